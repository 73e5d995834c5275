"""Dense search: pgvector cosine nearest neighbours on the HNSW index.

With a collection or document filter the HNSW scan alone could stop before finding ``limit``
matching rows; ``hnsw.iterative_scan = relaxed_order`` (pgvector 0.8) keeps scanning until it has
them, and the outer ORDER BY restores exact distance order. ``hnsw.ef_search`` is raised to at
least the number of rows asked for (an HNSW scan returns at most ef_search rows per pass).
"""

from __future__ import annotations

import weakref

import numpy as np
import psycopg

from retrieval.search.filters import Scope
from retrieval.search.fuse import Hit

MIN_EF_SEARCH = 64


_configured: "weakref.WeakKeyDictionary[psycopg.Connection, int]" = weakref.WeakKeyDictionary()


def configure(conn: psycopg.Connection, limit: int) -> None:
    """Session settings for the HNSW scan, sent only when this connection does not have them yet
    (pooled connections keep them: two round trips saved per search)."""
    ef = max(MIN_EF_SEARCH, int(limit))
    if _configured.get(conn) == ef:
        return
    conn.execute(f"SET hnsw.ef_search = {ef}")
    conn.execute("SET hnsw.iterative_scan = relaxed_order")
    if conn.autocommit:  # inside a transaction a rollback would undo the SET: then set it every time
        _configured[conn] = ef


def nearest_sql(scope: Scope) -> str:
    """The dense leg as a query (collection, id, dist) over the HNSW index, parameters ``%(vec)s`` and
    ``%(limit)s`` plus the scope's (run by ``dense``)."""
    return (f"SELECT c.collection, c.id, c.embedding <=> %(vec)s AS dist FROM {scope.from_clause()} "
            f"WHERE {scope.sql()} ORDER BY c.embedding <=> %(vec)s LIMIT %(limit)s")


def dense(conn: psycopg.Connection, vector: np.ndarray, limit: int, scope: Scope = Scope()) -> list[Hit]:
    configure(conn, limit)
    rows = conn.execute(
        f"WITH nn AS MATERIALIZED ({nearest_sql(scope)}) "
        f"SELECT collection, id AS chunk_id, 1 - dist AS score FROM nn ORDER BY dist, id",
        {**scope.params(), "vec": vector, "limit": limit}).fetchall()
    return [Hit(int(r["chunk_id"]), float(r["score"]), r["collection"]) for r in rows]
