"""Keyword postings kept at ingest as packed binary (``lexeme_postings``, migration 0021).

For each document and each lexeme of its chunks' tsvectors, one row holds a ``bytea`` of 14-byte
records, one per chunk having the lexeme, in chunk id order: the chunk id (int8), the lexeme's term
frequency in it (int2: its positions in the tsvector, 1 for identifier terms, which have none) and
the chunk's length (int4: ``greatest(token_count, 1)``), big-endian. That is everything BM25 needs of
a posting besides the scope's statistics (IDF, average length), which change with every document and
so are never stored. ``retrieval.search.keyword.bm25`` reads the rows of a question's lexemes and
scores every posting in numpy (``POSTING``), instead of one SQL row per posting.

The rows are computed in SQL from the chunks as stored (``lexeme_postings_of``, migration 0021, which
also backfills the documents indexed before it) and removed with their document (ON DELETE CASCADE).
"""

from __future__ import annotations

import numpy as np
import psycopg

POSTING = np.dtype([("chunk_id", ">i8"), ("tf", ">i2"), ("dl", ">i4")])
"""One posting as stored (``int8send(id) || int2send(tf) || int4send(dl)``)."""


def write_postings(conn: psycopg.Connection, collection: str, document_id: int) -> None:
    """Write the postings rows of a document whose chunks are inserted (call inside its transaction)."""
    conn.execute("INSERT INTO lexeme_postings (collection, document_id, lexeme, postings) "
                 "SELECT * FROM lexeme_postings_of(%s, %s)", (collection, document_id))


def write_collection_postings(conn: psycopg.Connection, collection: str) -> None:
    """The postings rows of every document of a collection (bulk loads such as ``retrieval.eval.scale``)."""
    conn.execute("INSERT INTO lexeme_postings (collection, document_id, lexeme, postings) "
                 "SELECT p.* FROM documents d CROSS JOIN LATERAL lexeme_postings_of(d.collection, d.id) p "
                 "WHERE d.collection = %s", (collection,))
