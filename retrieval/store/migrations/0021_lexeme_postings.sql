-- depends: 0020_document_text_search
-- Keyword postings as packed binary (retrieval.store.postings, read by retrieval.search.keyword.bm25):
-- for each document and lexeme of its chunks' tsvectors, the chunks having the lexeme in chunk id
-- order, in blocks of at most 250, each block a row: ``base`` (its first chunk id) and 8-byte records,
-- big-endian int4 pairs (int4send): the chunk id minus base, and the chunk length (greatest(token_count,
-- 1)) times 512 plus the term frequency (positions of the lexeme in the tsvector, at most 256; 1 for
-- identifier terms). The keyword leg reads the rows of a question's lexemes and computes BM25 over
-- every posting in numpy, instead of one SQL row per posting.
-- The rows are read from the index on (lexeme, collection) alone, which carries them (INCLUDE): there
-- the rows of one lexeme are side by side, whatever order the documents came in, so a question reads a
-- few thousand consecutive index pages rather than one heap page per document and lexeme. A btree
-- entry holds at most 2,704 bytes, so a block holds at most 2,000 bytes of records, fewer when the
-- lexeme and collection name are long (at least one record). Rows are stored inline, uncompressed
-- (STORAGE PLAIN). Replaces the bound bands of 0016 (lexeme_bands), which are dropped. Written with
-- the chunks (same transaction, lexeme_postings_of), removed with the document, backfilled here.
CREATE TABLE IF NOT EXISTS lexeme_postings (
    collection   text     NOT NULL,
    document_id  bigint   NOT NULL,
    lexeme       text     NOT NULL,
    block        integer  NOT NULL,
    base         bigint   NOT NULL,
    postings     bytea    NOT NULL CHECK (length(postings) % 8 = 0 AND length(postings) BETWEEN 8 AND 2000),
    PRIMARY KEY (collection, document_id, lexeme, block),
    FOREIGN KEY (collection, document_id) REFERENCES documents (collection, id) ON DELETE CASCADE
);
ALTER TABLE lexeme_postings ALTER COLUMN postings SET STORAGE PLAIN;

-- a question's lexemes -> their rows in the searched collections, read from the index alone
CREATE INDEX IF NOT EXISTS lexeme_postings_lexeme ON lexeme_postings (lexeme, collection)
    INCLUDE (document_id, base, postings);

-- The rows of one document, from its chunks as stored: tf and dl exactly as BM25 reads them (a chunk
-- of 4,194,304 word pieces or more would not fit the record: integer out of range).
CREATE OR REPLACE FUNCTION lexeme_postings_of(p_collection text, p_document_id bigint)
RETURNS TABLE (collection text, document_id bigint, lexeme text, block integer, base bigint, postings bytea)
LANGUAGE sql STABLE AS $$
    SELECT x.collection, x.document_id, x.lexeme, x.block, min(x.id),
           string_agg(int4send((x.id - x.first)::integer)
                      || int4send((greatest(x.token_count, 1)::bigint * 512 + x.tf)::integer), ''::bytea ORDER BY x.id)
    FROM (SELECT y.*, min(y.id) OVER (PARTITION BY y.lexeme, y.block) AS first
          FROM (SELECT c.collection, c.document_id, u.lexeme, c.id, c.token_count,
                       coalesce(array_length(u.positions, 1), 1) AS tf,
                       ((row_number() OVER (PARTITION BY u.lexeme ORDER BY c.id) - 1)
                        / greatest(1, least(250, (2400 - octet_length(u.lexeme) - octet_length(c.collection)) / 8)))::integer
                       AS block
                FROM chunks c
                CROSS JOIN LATERAL unnest(c.tsv) u
                WHERE c.collection = p_collection AND c.document_id = p_document_id) y) x
    GROUP BY x.collection, x.document_id, x.lexeme, x.block
$$;

INSERT INTO lexeme_postings (collection, document_id, lexeme, block, base, postings)
SELECT p.* FROM documents d CROSS JOIN LATERAL lexeme_postings_of(d.collection, d.id) p
ON CONFLICT DO NOTHING;

DROP TABLE IF EXISTS lexeme_bands;
DROP FUNCTION IF EXISTS lexeme_bands_of(text, bigint);
