"""Keyword postings kept at ingest, grouped into bands that bound their BM25 weight (``lexeme_bands``).

For each document and each lexeme of its chunks' tsvectors, the chunks having the lexeme are split
by term frequency (tf, ratio 1.5) and chunk length (dl, ratio 1.2); a band row keeps the chunk ids,
the largest tf and the smallest length. BM25's weight of a lexeme in a chunk,
``w * tf (k1 + 1) / (tf + k1 (1 - b + b dl / avgdl))``, grows with tf and shrinks with dl for any
IDF ``w``, ``k1 >= 0``, ``0 <= b <= 1`` and average length, so the weight computed with the row's
``tf_max`` and ``dl_min`` bounds every chunk of the row *with the statistics of the moment*: nothing
stored depends on the collection's size or average length, which change with every document.
``retrieval.search.keyword.bm25_sql`` uses these bounds to skip chunks that cannot reach the top list.

The rows are computed in SQL from the chunks as stored (``lexeme_bands_of``, migration 0016, which
also backfills the documents indexed before it) and removed with their document (ON DELETE CASCADE).
"""

from __future__ import annotations

import psycopg


def write_postings(conn: psycopg.Connection, collection: str, document_id: int) -> None:
    """Write the band rows of a document whose chunks are inserted (call inside its transaction)."""
    conn.execute("INSERT INTO lexeme_bands (collection, document_id, lexeme, band, tf_max, dl_min, chunk_ids) "
                 "SELECT * FROM lexeme_bands_of(%s, %s)", (collection, document_id))


def write_collection_postings(conn: psycopg.Connection, collection: str) -> None:
    """The band rows of every document of a collection (bulk loads such as ``retrieval.eval.scale``)."""
    conn.execute("INSERT INTO lexeme_bands (collection, document_id, lexeme, band, tf_max, dl_min, chunk_ids) "
                 "SELECT b.* FROM documents d CROSS JOIN LATERAL lexeme_bands_of(d.collection, d.id) b "
                 "WHERE d.collection = %s", (collection,))
