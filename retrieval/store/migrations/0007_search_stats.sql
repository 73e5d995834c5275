-- depends: 0005_document_title
-- Search statistics kept at ingest instead of recomputed per query (all keyed by collection first):
--  * chunks.terms: software identifiers and punctuation-bearing terms (gnu_source, %in%, c++,
--    std::vector) that the English parser splits or drops; added to the tsvector as they are.
--  * documents.token_total: the document's chunk lengths summed (BM25 average length per scope).
--  * document_lexemes: in how many of the document's chunks each tsvector lexeme occurs (BM25
--    document frequencies per scope = sums over its documents).
--  * chunk_sentences: each chunk's sentence-window vectors for the bi-encoder sentence reranker.
-- Documents indexed before this migration keep working: their statistics are backfilled here,
-- their identifier terms and sentence vectors come when they are re-indexed (the pipeline version
-- changed), and until then the reranker embeds their sentences per query as before.
ALTER TABLE chunks ADD COLUMN terms text[] NOT NULL DEFAULT '{}';
ALTER TABLE chunks ALTER COLUMN tsv SET EXPRESSION AS
    (to_tsvector('english', search_text) || array_to_tsvector(terms));

ALTER TABLE documents ADD COLUMN token_total bigint NOT NULL DEFAULT 0;
UPDATE documents d SET token_total = coalesce(
    (SELECT sum(c.token_count) FROM chunks c WHERE c.collection = d.collection AND c.document_id = d.id), 0);

CREATE TABLE document_lexemes (
    collection   text    NOT NULL,
    document_id  bigint  NOT NULL,
    lexeme       text    NOT NULL,
    df           integer NOT NULL CHECK (df > 0),  -- chunks of the document whose tsv has the lexeme
    PRIMARY KEY (collection, document_id, lexeme),
    FOREIGN KEY (collection, document_id) REFERENCES documents (collection, id) ON DELETE CASCADE
);
CREATE INDEX document_lexemes_lexeme ON document_lexemes (collection, lexeme) INCLUDE (document_id, df);
INSERT INTO document_lexemes (collection, document_id, lexeme, df)
SELECT c.collection, c.document_id, u.lexeme, count(*)
FROM chunks c CROSS JOIN LATERAL unnest(c.tsv) u
GROUP BY c.collection, c.document_id, u.lexeme;

CREATE TABLE chunk_sentences (
    collection   text     NOT NULL,
    chunk_id     bigint   NOT NULL,
    sentence_no  smallint NOT NULL,
    embedding    halfvec  NOT NULL,  -- unit-length sentence-window vector, same model as chunks
    PRIMARY KEY (collection, chunk_id, sentence_no),
    FOREIGN KEY (collection, chunk_id) REFERENCES chunks (collection, id) ON DELETE CASCADE
);
