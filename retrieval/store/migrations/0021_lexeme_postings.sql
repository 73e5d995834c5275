-- depends: 0020_document_text_search
-- Keyword postings as packed binary (retrieval.store.postings, read by retrieval.search.keyword.bm25):
-- for each document and lexeme of its chunks' tsvectors, one bytea of 14-byte records, one per chunk
-- having the lexeme, in chunk id order: chunk id (int8), term frequency (int2: positions of the lexeme
-- in the tsvector, 1 for identifier terms) and chunk length (int4: greatest(token_count, 1)), each
-- big-endian (int8send / int2send / int4send). The keyword leg reads these rows for the question's
-- lexemes and computes BM25 over every posting in numpy, instead of one SQL row per posting.
-- Replaces the bound bands of 0016 (lexeme_bands), which are dropped. Written with the chunks (same
-- transaction, lexeme_postings_of), removed with the document, backfilled here.
CREATE TABLE IF NOT EXISTS lexeme_postings (
    collection   text   NOT NULL,
    document_id  bigint NOT NULL,
    lexeme       text   NOT NULL,
    postings     bytea  NOT NULL CHECK (length(postings) % 14 = 0 AND length(postings) > 0),
    PRIMARY KEY (collection, document_id, lexeme),
    FOREIGN KEY (collection, document_id) REFERENCES documents (collection, id) ON DELETE CASCADE
);
-- read whole and often: stored uncompressed (no decompression per query)
ALTER TABLE lexeme_postings ALTER COLUMN postings SET STORAGE EXTERNAL;

-- a question's lexemes -> their rows in the searched collections
CREATE INDEX IF NOT EXISTS lexeme_postings_lexeme ON lexeme_postings (lexeme, collection);

-- The rows of one document, from its chunks as stored: tf and dl exactly as BM25 reads them.
CREATE OR REPLACE FUNCTION lexeme_postings_of(p_collection text, p_document_id bigint)
RETURNS TABLE (collection text, document_id bigint, lexeme text, postings bytea)
LANGUAGE sql STABLE AS $$
    SELECT c.collection, c.document_id, u.lexeme,
           string_agg(int8send(c.id::bigint) || int2send(coalesce(array_length(u.positions, 1), 1)::smallint)
                      || int4send(greatest(c.token_count, 1)::integer), ''::bytea ORDER BY c.id)
    FROM chunks c
    CROSS JOIN LATERAL unnest(c.tsv) u
    WHERE c.collection = p_collection AND c.document_id = p_document_id
    GROUP BY 1, 2, 3
$$;

INSERT INTO lexeme_postings (collection, document_id, lexeme, postings)
SELECT p.* FROM documents d CROSS JOIN LATERAL lexeme_postings_of(d.collection, d.id) p
ON CONFLICT DO NOTHING;

DROP TABLE IF EXISTS lexeme_bands;
DROP FUNCTION IF EXISTS lexeme_bands_of(text, bigint);
