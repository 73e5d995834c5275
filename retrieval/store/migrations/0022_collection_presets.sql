-- depends: 0021_lexeme_postings
-- Each collection records the preset it was created with (retrieval.settings, retrieval/presets/): the
-- questions asked of it are read with that preset's profile (word lists, units, wording, text search),
-- whatever the asking process's own preset. Collections made before this migration record 'default',
-- or 'german' when every one of their documents was indexed with German text search (the only way a
-- collection could have had the German profile before, through a profile file).
CREATE TABLE collections (
    collection text PRIMARY KEY,
    preset text NOT NULL CHECK (preset <> ''),
    created_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO collections (collection, preset)
SELECT collection, CASE WHEN bool_and(text_search = 'german'::regconfig) THEN 'german' ELSE 'default' END
FROM documents GROUP BY collection;
