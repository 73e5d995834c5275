"""Keyword search inside Postgres over the stored, GIN-indexed ``chunks.tsv`` column.

The default ranking is BM25, computed in one SQL statement:

* the query's lexemes come from ``to_tsvector('english', query)`` (English stemming, stop words
  dropped) plus its identifier terms (``retrieval.identifiers``: ``gnu_source``, ``%in%``, ``c++``,
  which chunks carry in their tsvector too), so a question is a bag of terms, not a boolean expression;
* candidates are the chunks matching *any* lexeme (an OR ``tsquery``, served by the GIN index): a
  word of a long question that the corpus never uses cannot empty the result;
* each lexeme's document frequency over the searched scope is a sum of per-document counts kept at
  ingest (``document_lexemes``), so common words weigh little and rare ones a lot
  (IDF = ln(1 + (N - df + 0.5) / (df + 0.5))); N and the average chunk length come from
  ``documents.chunk_count`` / ``token_total``. Nothing is counted over the chunks per query;
* term frequency is the number of positions the lexeme has in the chunk's tsvector
  (``unnest(tsv)``); document length is the chunk's word-piece count, normalised by the scope's
  average (k1 = 1.2, b = 0.75 by default).

Two simpler rankings are kept for the evaluation that justified BM25: ``websearch`` (AND
semantics, ``ts_rank_cd``) and ``or_rank`` (OR of lexemes, ``ts_rank_cd``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import psycopg

from retrieval.filters import Scope
from retrieval.fuse import Hit
from retrieval.identifiers import identifier_terms

KeywordMethod = Literal["bm25", "websearch", "or_rank"]

@dataclass(frozen=True)
class BM25Params:
    k1: float = 1.2
    b: float = 0.75


def bm25_sql(scope: Scope) -> str:
    """The BM25 statement; parameters: ``query``, ``terms`` (``query_terms(query)``), ``k1``, ``b``,
    ``limit`` and the scope's."""
    cond = scope.sql()
    src = scope.from_clause()
    dcond = scope.documents_sql("d")
    return f"""
WITH q AS (
    SELECT lexeme FROM unnest(to_tsvector('english', %(query)s))
    UNION SELECT unnest(%(terms)s::text[])
), qq AS (
    SELECT string_agg(quote_literal(lexeme), ' | ')::tsquery AS tsq FROM q
), stats AS MATERIALIZED (
    SELECT coalesce(sum(d.chunk_count), 0)::float8 AS n,
           coalesce(sum(d.token_total)::float8 / nullif(sum(d.chunk_count), 0), 1)::float8 AS avgdl
    FROM documents d WHERE {dcond}
), idf AS MATERIALIZED (
    SELECT q.lexeme, ln(1 + (stats.n - df.df + 0.5) / (df.df + 0.5)) AS w
    FROM q CROSS JOIN stats
    CROSS JOIN LATERAL (
        SELECT coalesce(sum(l.df), 0)::float8 AS df FROM document_lexemes l
        JOIN documents d ON d.collection = l.collection AND d.id = l.document_id
        WHERE {dcond} AND l.lexeme = q.lexeme) df
), cand AS (
    SELECT c.collection, c.id, c.tsv, greatest(c.token_count, 1)::float8 AS dl
    FROM {src} WHERE {cond} AND c.tsv @@ (SELECT tsq FROM qq)
)
SELECT cand.collection, cand.id AS chunk_id,
       sum(idf.w * (tf.n * (%(k1)s + 1)) / (tf.n + %(k1)s * (1 - %(b)s + %(b)s * cand.dl / stats.avgdl))) AS score
FROM cand
CROSS JOIN stats
CROSS JOIN LATERAL (SELECT u.lexeme, coalesce(array_length(u.positions, 1), 1)::float8 AS n
                    FROM unnest(cand.tsv) u) tf
JOIN idf ON idf.lexeme = tf.lexeme
GROUP BY cand.collection, cand.id
ORDER BY score DESC, cand.id
LIMIT %(limit)s
"""


def query_terms(query: str) -> list[str]:
    """The identifier terms a query adds to its English lexemes (see ``retrieval.identifiers``)."""
    return identifier_terms(query)


def bm25_params(query: str, limit: int, scope: Scope, params: BM25Params = BM25Params()) -> dict[str, object]:
    return {**scope.params(), "query": query, "terms": query_terms(query), "k1": params.k1, "b": params.b,
            "limit": limit}


def _hits(rows: list[dict]) -> list[Hit]:
    return [Hit(int(r["chunk_id"]), float(r["score"]), r.get("collection")) for r in rows]


def bm25(conn: psycopg.Connection, query: str, limit: int, scope: Scope = Scope(),
         params: BM25Params = BM25Params()) -> list[Hit]:
    rows = conn.execute(bm25_sql(scope), bm25_params(query, limit, scope, params)).fetchall()
    return _hits(rows)


def websearch(conn: psycopg.Connection, query: str, limit: int, scope: Scope = Scope()) -> list[Hit]:
    """``websearch_to_tsquery`` (every word required) ranked by ``ts_rank_cd``: the usual way, weak."""
    rows = conn.execute(
        f"SELECT c.collection, c.id AS chunk_id, ts_rank_cd(c.tsv, tq) AS score FROM {scope.from_clause()}, "
        f"websearch_to_tsquery('english', %(query)s) tq WHERE {scope.sql()} AND c.tsv @@ tq "
        f"ORDER BY score DESC, c.id LIMIT %(limit)s", {**scope.params(), "query": query, "limit": limit}).fetchall()
    return _hits(rows)


def or_rank(conn: psycopg.Connection, query: str, limit: int, scope: Scope = Scope()) -> list[Hit]:
    """Any lexeme of the query, ranked by ``ts_rank_cd`` (no IDF: common words weigh as much as rare)."""
    rows = conn.execute(
        f"WITH qq AS (SELECT string_agg(quote_literal(lexeme), ' | ')::tsquery AS tq "
        f"FROM unnest(to_tsvector('english', %(query)s))) "
        f"SELECT c.collection, c.id AS chunk_id, ts_rank_cd(c.tsv, qq.tq) AS score FROM {scope.from_clause()}, qq "
        f"WHERE {scope.sql()} AND c.tsv @@ qq.tq ORDER BY score DESC, c.id LIMIT %(limit)s",
        {**scope.params(), "query": query, "limit": limit}).fetchall()
    return _hits(rows)


def keyword(conn: psycopg.Connection, query: str, limit: int, scope: Scope = Scope(),
            method: KeywordMethod = "bm25") -> list[Hit]:
    if method == "bm25":
        return bm25(conn, query, limit, scope)
    if method == "websearch":
        return websearch(conn, query, limit, scope)
    if method == "or_rank":
        return or_rank(conn, query, limit, scope)
    raise ValueError(f"unknown keyword method {method!r}")
