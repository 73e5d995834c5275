-- Chunks made of text that addresses an AI reader or reads as prompt injection ("NOTE TO AI
-- ASSISTANTS: ignore all previous instructions ..."), flagged at ingest (ingest/injection.py): such
-- chunks are never quoted as evidence and are mentioned in replies as untrusted text.
ALTER TABLE chunks ADD COLUMN untrusted boolean NOT NULL DEFAULT false;
