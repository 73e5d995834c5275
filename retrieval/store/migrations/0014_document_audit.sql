-- depends: 0013_url_queries
-- Who added each document, and a record of every change to the index: ingests and removals, with
-- who (a Slack user id, or the operating-system user of a command-line run), when, what, through
-- what (slack or cli) and from which workspace. Written in the same transaction as the change
-- (ingest.store.write_document / remove_document). Keyed by collection like the index tables.
ALTER TABLE documents ADD COLUMN added_by text;
ALTER TABLE documents ADD COLUMN added_via text;
ALTER TABLE documents ADD COLUMN added_workspace text;

CREATE TABLE document_audit (
    collection  text        NOT NULL,
    id          bigint      GENERATED ALWAYS AS IDENTITY,
    action      text        NOT NULL CHECK (action IN ('ingest', 'remove')),
    document    text        NOT NULL,
    sha256      text,
    outcome     text        NOT NULL,               -- ingested, replaced, removed
    actor       text        NOT NULL,               -- Slack user id, or user@host of a CLI run
    via         text        NOT NULL CHECK (via IN ('slack', 'cli')),
    workspace   text        NOT NULL DEFAULT '',    -- Slack team id ('' for the CLI)
    at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (collection, id)
);
CREATE INDEX document_audit_at ON document_audit (collection, at);
