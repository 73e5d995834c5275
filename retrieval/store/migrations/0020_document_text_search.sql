-- depends: 0019_text_search_config
-- Each document records the text-search configuration its chunks were indexed with, so a question is
-- parsed with the configurations its scope's documents actually use (keyword leg, term statistics,
-- named documents), whatever the collection's profile says now; a changed profile applies when the
-- documents are ingested again.
ALTER TABLE documents ADD COLUMN text_search regconfig NOT NULL DEFAULT 'english';
UPDATE documents d SET text_search = c.ts_config
    FROM (SELECT DISTINCT ON (collection, document_id) collection, document_id, ts_config FROM chunks
          ORDER BY collection, document_id) c
    WHERE c.collection = d.collection AND c.document_id = d.id AND c.ts_config <> d.text_search;
