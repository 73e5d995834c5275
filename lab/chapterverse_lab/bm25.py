"""The keyword leg one query at a time, and the SQL reference it is measured against.

``bm25`` is the product's keyword leg alone (``retrieval.search.keyword``: the question's postings rows,
scored in numpy). ``bm25_all`` ranks the same way in plain SQL: every chunk of the GIN index having any
query lexeme, each lexeme of its tsvector unnested and joined to the query's IDF, summed in lexeme
order. Its scores are bit-equal to ``bm25``'s (tests/test_keyword_scale.py, ``eval scale``).
"""

from __future__ import annotations

import psycopg
from psycopg.rows import tuple_row

from retrieval.search.filters import Scope
from retrieval.search.fuse import Hit
from retrieval.search.keyword import _head_sql, bm25_params, postings_sql, top_scores


def hits(rows: list[dict]) -> list[Hit]:
    return [Hit(int(r["chunk_id"]), float(r["score"]), r.get("collection")) for r in rows]


def postings_rows(conn: psycopg.Connection, query: str, scope: Scope = Scope()) -> list[tuple]:
    """The rows of ``postings_sql`` for ``query`` (tuples, as ``top_scores`` reads them)."""
    with conn.cursor(row_factory=tuple_row) as cur:
        return cur.execute(postings_sql(scope), bm25_params(query, 0, scope), binary=True).fetchall()


def bm25(conn: psycopg.Connection, query: str, limit: int, scope: Scope = Scope()) -> list[Hit]:
    """The keyword leg as searched: the query's postings rows scored in numpy."""
    return top_scores(postings_rows(conn, query, scope), limit)


def bm25_all_sql(scope: Scope) -> str:
    """BM25 over every chunk that contains any query lexeme, in SQL (no pruning): the reference ranking."""
    return f"""
WITH {_head_sql(scope)}, qq AS (
    SELECT string_agg(quote_literal(lexeme), ' | ')::tsquery AS tsq FROM q
), cand AS (
    SELECT c.collection, c.id, c.tsv, greatest(c.token_count, 1)::float8 AS dl
    FROM {scope.from_clause()} WHERE {scope.sql()} AND c.tsv @@ (SELECT tsq FROM qq)
), scored AS (
    SELECT cand.collection, cand.id,
           sum(idf.w * (tf.n * (%(k1)s + 1)) / (tf.n + %(k1)s * (1 - %(b)s + %(b)s * cand.dl / stats.avgdl))
               ORDER BY tf.lexeme) AS score
    FROM cand
    CROSS JOIN stats
    CROSS JOIN LATERAL (SELECT u.lexeme, coalesce(array_length(u.positions, 1), 1)::float8 AS n
                        FROM unnest(cand.tsv) u) tf
    JOIN idf ON idf.lexeme = tf.lexeme
    GROUP BY cand.collection, cand.id
)
SELECT collection, id AS chunk_id, score FROM scored
ORDER BY score DESC, id
LIMIT %(limit)s
"""


def bm25_all(conn: psycopg.Connection, query: str, limit: int, scope: Scope = Scope()) -> list[Hit]:
    """The reference ranking (``bm25_all_sql``)."""
    return hits(conn.execute(bm25_all_sql(scope), bm25_params(query, limit, scope)).fetchall())
