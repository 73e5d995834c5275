-- Which version of extraction + chunking built a document: same bytes under an older pipeline are
-- re-indexed instead of skipped.
ALTER TABLE documents ADD COLUMN pipeline_version text NOT NULL DEFAULT '';
