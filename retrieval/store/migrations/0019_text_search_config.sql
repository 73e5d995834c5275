-- depends: 0016_lexeme_bands
-- Language as data: each chunk records the Postgres text-search configuration it is indexed with
-- (its collection's profile, ``text_search``: 'english' unless a preset says otherwise, e.g. 'german'),
-- and its tsvector is built with it. Existing chunks keep 'english', so nothing they hold changes.
ALTER TABLE chunks ADD COLUMN ts_config regconfig NOT NULL DEFAULT 'english';
ALTER TABLE chunks ALTER COLUMN tsv SET EXPRESSION AS
    (to_tsvector(ts_config, search_text) || array_to_tsvector(terms));
