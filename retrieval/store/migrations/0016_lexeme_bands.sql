-- depends: 0007_search_stats
-- Keyword postings grouped by what bounds their BM25 weight (retrieval.store.postings, read by
-- retrieval.search.keyword.bm25_sql): for each document and lexeme of its chunks' tsvectors, the chunks
-- having it, split into bands of similar term frequency (tf, ratio 1.5) and chunk length (dl,
-- ratio 1.2). Each band row keeps its largest tf and smallest length, so the BM25 weight of the
-- lexeme in any of its chunks is at most w * tf_max (k1 + 1) / (tf_max + k1 (1 - b + b dl_min / avgdl))
-- whatever the scope's IDF w and average length avgdl are at query time. Written with the chunks
-- (same transaction, lexeme_bands_of), removed with the document, backfilled here.
CREATE TABLE lexeme_bands (
    collection   text     NOT NULL,
    document_id  bigint   NOT NULL,
    lexeme       text     NOT NULL,
    band         smallint NOT NULL,  -- 64 * floor(log_1.5 tf) + floor(log_1.2 dl)
    tf_max       smallint NOT NULL CHECK (tf_max > 0),
    dl_min       integer  NOT NULL CHECK (dl_min > 0),
    chunk_ids    bigint[] NOT NULL,
    PRIMARY KEY (collection, document_id, lexeme, band),
    FOREIGN KEY (collection, document_id) REFERENCES documents (collection, id) ON DELETE CASCADE
);

-- The query reads every band row of its lexemes from this index alone (to bound and choose), then
-- the chunk ids of the rows it chose through the primary key.
CREATE INDEX lexeme_bands_lexeme ON lexeme_bands (lexeme, collection) INCLUDE (document_id, band, tf_max, dl_min);

-- The band rows of one document, from its chunks as stored: tf and dl exactly as BM25 reads them
-- (positions of the lexeme in the tsvector, 1 for identifier terms; token_count, at least 1).
CREATE FUNCTION lexeme_bands_of(p_collection text, p_document_id bigint)
RETURNS TABLE (collection text, document_id bigint, lexeme text, band smallint, tf_max smallint,
               dl_min integer, chunk_ids bigint[])
LANGUAGE sql STABLE AS $$
    SELECT c.collection, c.document_id, u.lexeme,
           (64 * floor(ln(t.tf) / ln(1.5)) + floor(ln(t.dl) / ln(1.2)))::smallint,
           max(t.tf)::smallint, min(t.dl)::integer, array_agg(c.id ORDER BY c.id)
    FROM chunks c
    CROSS JOIN LATERAL unnest(c.tsv) u
    CROSS JOIN LATERAL (SELECT coalesce(array_length(u.positions, 1), 1) AS tf,
                               greatest(c.token_count, 1) AS dl) t
    WHERE c.collection = p_collection AND c.document_id = p_document_id
    GROUP BY 1, 2, 3, 4
$$;

INSERT INTO lexeme_bands (collection, document_id, lexeme, band, tf_max, dl_min, chunk_ids)
SELECT b.* FROM documents d CROSS JOIN LATERAL lexeme_bands_of(d.collection, d.id) b;
