"""Dense search: pgvector cosine nearest neighbours, exact in small scopes, on the HNSW index in large ones.

With a collection or document filter the HNSW scan alone could stop before finding ``limit``
matching rows; ``hnsw.iterative_scan = relaxed_order`` (pgvector 0.8) keeps scanning until it has
them, and the outer ORDER BY restores exact distance order. ``hnsw.ef_search`` is raised to at
least the number of rows asked for (an HNSW scan returns at most ef_search rows per pass).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Sequence

import numpy as np
import psycopg
from psycopg.rows import tuple_row

from retrieval.search.filters import Scope
from retrieval.search.fuse import Hit

MIN_EF_SEARCH = 64
EXACT_MAX = 20_000  # chunks: a scope this small is searched exactly (about 10 ms at 20k; see ``nearest_sql``)


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
    """The dense leg as a query (collection, id, dist), parameters ``%(vec)s`` and ``%(limit)s`` plus
    the scope's: used alone (``dense``) and inside the statement that runs both legs at once
    (``retrieval.search.search``).

    A scope of at most ``EXACT_MAX`` chunks (the documents' counts kept at ingest) is searched
    exactly: every vector's distance, then the nearest (the ``+ 0`` keeps the planner off the HNSW
    index). Left to the planner, a small collection was searched exactly until Postgres first
    analysed the tables and approximately after, so the same question could rank its passages
    differently from one day to the next. Larger scopes use the HNSW index. Postgres computes the
    scope's size once and runs only the branch it selects."""
    head = f"SELECT c.collection, c.id, c.embedding <=> %(vec)s AS dist FROM {scope.from_clause()} WHERE {scope.sql()}"
    return (f"WITH size AS (SELECT coalesce(sum(d.chunk_count), 0) AS n FROM documents d "
            f"WHERE {scope.documents_sql('d')}) "
            f"(SELECT * FROM ({head} ORDER BY (c.embedding <=> %(vec)s) + 0 LIMIT %(limit)s) exact "
            f"WHERE (SELECT n FROM size) <= {EXACT_MAX}) UNION ALL "
            f"(SELECT * FROM ({head} ORDER BY c.embedding <=> %(vec)s LIMIT %(limit)s) approx "
            f"WHERE (SELECT n FROM size) > {EXACT_MAX})")


def nearest_hits(rows: Iterable[Sequence]) -> list[Hit]:
    """Hits of ``nearest_sql``'s rows (collection, id, dist), nearest first (then lower id); score
    1 - cosine distance."""
    return [Hit(int(i), 1.0 - float(d), c) for c, i, d in sorted(rows, key=lambda r: (r[2], r[1]))]


def dense(conn: psycopg.Connection, vector: np.ndarray, limit: int, scope: Scope = Scope()) -> list[Hit]:
    configure(conn, limit)
    with conn.cursor(row_factory=tuple_row) as cur:
        rows = cur.execute(nearest_sql(scope), {**scope.params(), "vec": vector, "limit": limit}).fetchall()
    return nearest_hits(rows)
