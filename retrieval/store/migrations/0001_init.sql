-- Documents, pages and chunks. Every table is keyed by collection first, so the collection can
-- become the distribution column if the index ever moves to Citus.
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE documents (
    collection   text        NOT NULL,
    id           bigint      GENERATED ALWAYS AS IDENTITY,
    name         text        NOT NULL,
    sha256       text        NOT NULL,
    source       text        NOT NULL,
    url          text,
    bytes        bigint      NOT NULL,
    page_count   integer     NOT NULL,
    chunk_count  integer     NOT NULL,
    status       text        NOT NULL DEFAULT 'ready' CHECK (status IN ('ready')),
    ingested_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (collection, id),
    UNIQUE (collection, name)
);
CREATE INDEX documents_sha256 ON documents (sha256);

CREATE TABLE pages (
    collection   text    NOT NULL,
    document_id  bigint  NOT NULL,
    page_no      integer NOT NULL CHECK (page_no >= 1),  -- 1-based PDF page index
    label        text,                                   -- printed page label, if the PDF has one
    text         text    NOT NULL,                       -- visible text (hidden text never stored)
    body_start   integer NOT NULL,                       -- page text without running header/footer
    body_end     integer NOT NULL,
    hidden_chars integer NOT NULL DEFAULT 0,
    PRIMARY KEY (collection, document_id, page_no),
    FOREIGN KEY (collection, document_id) REFERENCES documents (collection, id) ON DELETE CASCADE
);

CREATE TABLE chunks (
    collection   text    NOT NULL,
    id           bigint  GENERATED ALWAYS AS IDENTITY,
    document_id  bigint  NOT NULL,
    ordinal      integer NOT NULL,
    page_start   integer NOT NULL,
    char_start   integer NOT NULL,  -- offset into the text of page_start
    page_end     integer NOT NULL,
    char_end     integer NOT NULL,  -- offset into the text of page_end (exclusive)
    text         text    NOT NULL,  -- exactly the page text slices
    context      text    NOT NULL DEFAULT '',  -- section heading in force at the start
    search_text  text    NOT NULL,  -- what is embedded and keyword-indexed (context + cleaned text)
    token_count  integer NOT NULL,
    embedding    vector,            -- typed to the model's dimension by the embedding-model record
    tsv          tsvector GENERATED ALWAYS AS (to_tsvector('english', search_text)) STORED,
    PRIMARY KEY (collection, id),
    FOREIGN KEY (collection, document_id) REFERENCES documents (collection, id) ON DELETE CASCADE,
    CHECK (page_end >= page_start)
);
CREATE INDEX chunks_document ON chunks (collection, document_id, ordinal);
CREATE INDEX chunks_tsv ON chunks USING gin (tsv);

-- The embedding model the vectors were made with; one row. The HNSW index is created when the
-- first model is recorded (its dimension fixes the column type).
CREATE TABLE embedding_model (
    singleton   boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    name        text        NOT NULL,
    dim         integer     NOT NULL CHECK (dim > 0),
    recorded_at timestamptz NOT NULL DEFAULT now()
);
