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
  average (k1 = 1.2, b = 0.75 by default). A chunk's score is summed in lexeme order, so equal
  chunks get bit-equal scores whatever the plan, and ties fall to the lower id.

Scoring every chunk that has *any* query lexeme costs time in proportion to the postings of the
query's commonest words ("aircraft", "pilot"), which grow with the collection. ``bm25_sql`` returns
the same top ``limit`` while scoring far fewer chunks (a MaxScore-style bound, in the same statement):

1. *seed*: the query's rarest lexeme, and the next rarest while their document frequencies add up
   to at most 10 % of the scope's chunks (``SEED_SHARE``; at least ``SEED_POSTINGS`` and ``limit``);
   the chunks holding any of them are scored in full;
2. *threshold*: the ``limit``-th best of those scores, θ (0 when they are fewer than ``limit``);
3. a lexeme contributes less than ``(k1 + 1) · idf`` to any chunk, so a chunk holding only the
   commonest lexemes whose bounds add up to less than θ cannot reach the top ``limit``: only chunks
   with one of the other lexemes (not already scored) are scored next, and the best ``limit`` of
   both sets are returned. With θ = 0 this is the plain ranking over every candidate.

Each candidate's score reads only the query's lexemes from its tsvector (``setweight`` +
``ts_filter``, see ``_score_sql``) instead of unnesting all of them. ``bm25_all_sql`` scores every
candidate the plain way (unnest and join), kept as the reference the tests compare against.

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

SEED_POSTINGS = 50
SEED_SHARE = 0.1
"""The rarest query lexeme, and the next rarest while their document frequencies add up to at most
``SEED_SHARE`` of the scope's chunks (at least ``SEED_POSTINGS`` and ``limit``): those chunks are
scored first to find the score a chunk must beat. Timed on the FAA dev collection (2k chunks) and its
synthetic 100k and 1M copies with shares of 1-20 %: 5-10 % was best on all three."""


@dataclass(frozen=True)
class BM25Params:
    k1: float = 1.2
    b: float = 0.75


def _score_all_sql(cand: str) -> str:
    """BM25 of each chunk of the candidate CTE ``cand`` (collection, id, tsv, dl): every lexeme of the
    chunk's tsvector is unnested and joined to the query's (the reference way)."""
    return f"""SELECT cand.collection, cand.id,
           sum(idf.w * (tf.n * (%(k1)s + 1)) / (tf.n + %(k1)s * (1 - %(b)s + %(b)s * cand.dl / stats.avgdl))
               ORDER BY tf.lexeme) AS score
    FROM {cand} cand
    CROSS JOIN stats
    CROSS JOIN LATERAL (SELECT u.lexeme, coalesce(array_length(u.positions, 1), 1)::float8 AS n
                        FROM unnest(cand.tsv) u) tf
    JOIN idf ON idf.lexeme = tf.lexeme
    GROUP BY cand.collection, cand.id"""


def _score_sql(cand: str) -> str:
    """The same scores, reading only the query's lexemes from each chunk's tsvector: ``setweight`` marks
    them and ``ts_filter`` keeps them (with their positions) in C, instead of unnesting the ~50 lexemes
    of every chunk. ``ts_filter`` drops lexemes without positions, which are exactly the identifier
    terms (``chunks.terms``, never an English lexeme): those are looked up with ``@@`` (tf 1)."""
    return f"""SELECT cand.collection, cand.id, sc.score
    FROM {cand} cand
    CROSS JOIN stats
    CROSS JOIN LATERAL (
        SELECT sum(i.w * (t.n * (%(k1)s + 1)) / (t.n + %(k1)s * (1 - %(b)s + %(b)s * cand.dl / stats.avgdl))
                   ORDER BY i.lexeme) AS score
        FROM idf i
        LEFT JOIN unnest(ts_filter(setweight(cand.tsv, 'A', (SELECT array_agg(lexeme) FROM idf)), '{{a}}')) u
               ON u.lexeme = i.lexeme
        CROSS JOIN LATERAL (SELECT coalesce(array_length(u.positions, 1), 1)::float8 AS n) t
        WHERE i.df > 0 AND (u.lexeme IS NOT NULL OR (i.identifier AND cand.tsv @@ i.tsq))) sc"""


def _head_sql(scope: Scope) -> str:
    """The query's lexemes with their IDF (``q``, ``stats``, ``idf``), shared by both statements."""
    dcond = scope.documents_sql("d")
    return f"""q AS (
    SELECT lexeme FROM unnest(to_tsvector('english', %(query)s))
    UNION SELECT unnest(%(terms)s::text[])
), stats AS MATERIALIZED (
    SELECT coalesce(sum(d.chunk_count), 0)::float8 AS n,
           coalesce(sum(d.token_total)::float8 / nullif(sum(d.chunk_count), 0), 1)::float8 AS avgdl
    FROM documents d WHERE {dcond}
), idf AS MATERIALIZED (
    SELECT q.lexeme, df.df, ln(1 + (stats.n - df.df + 0.5) / (df.df + 0.5)) AS w,
           quote_literal(q.lexeme)::tsquery AS tsq, q.lexeme = ANY(%(terms)s::text[]) AS identifier
    FROM q CROSS JOIN stats
    CROSS JOIN LATERAL (
        SELECT coalesce(sum(l.df), 0)::float8 AS df FROM document_lexemes l
        JOIN documents d ON d.collection = l.collection AND d.id = l.document_id
        WHERE {dcond} AND l.lexeme = q.lexeme) df
)"""


def _candidates_sql(scope: Scope, match: str) -> str:
    return (f"SELECT c.collection, c.id, c.tsv, greatest(c.token_count, 1)::float8 AS dl "
            f"FROM {scope.from_clause()} WHERE {scope.sql()} AND {match}")


def bm25_all_sql(scope: Scope) -> str:
    """BM25 over every chunk that contains any query lexeme (no pruning): the reference ranking."""
    return f"""
WITH {_head_sql(scope)}, qq AS (
    SELECT string_agg(quote_literal(lexeme), ' | ')::tsquery AS tsq FROM q
), cand AS (
    {_candidates_sql(scope, "c.tsv @@ (SELECT tsq FROM qq)")}
), scored AS (
    {_score_all_sql("cand")}
)
SELECT collection, id AS chunk_id, score FROM scored
ORDER BY score DESC, id
LIMIT %(limit)s
"""


def bm25_sql(scope: Scope) -> str:
    """The BM25 statement (exact top ``limit``, pruned); parameters: ``query``, ``terms``
    (``query_terms(query)``), ``k1``, ``b``, ``limit``, ``seed`` and the scope's. See the module doc."""
    return f"""
WITH {_head_sql(scope)}, ranked AS MATERIALIZED (
    SELECT lexeme,
           row_number() OVER (ORDER BY df, lexeme) = 1
               OR sum(df) OVER (ORDER BY df, lexeme ROWS UNBOUNDED PRECEDING)
                  <= greatest(%(seed)s, %(seed_share)s * (SELECT n FROM stats)) AS in_seed,
           (%(k1)s + 1) * sum(w) OVER (ORDER BY df DESC, lexeme DESC ROWS UNBOUNDED PRECEDING) AS bound_upto
    FROM idf WHERE df > 0
), seed AS MATERIALIZED (
    SELECT string_agg(quote_literal(lexeme), ' | ')::tsquery AS tsq FROM ranked WHERE in_seed
), cand1 AS (
    {_candidates_sql(scope, "c.tsv @@ (SELECT tsq FROM seed)")}
), scored1 AS MATERIALIZED (
    {_score_sql("cand1")}
), theta AS MATERIALIZED (
    SELECT CASE WHEN count(*) >= %(limit)s THEN min(score) ELSE 0 END AS t
    FROM (SELECT score FROM scored1 ORDER BY score DESC LIMIT %(limit)s) top
), rest AS MATERIALIZED (
    SELECT string_agg(quote_literal(r.lexeme), ' | ')::tsquery AS tsq FROM ranked r, theta
    WHERE r.bound_upto >= theta.t * (1 - 1e-9) AND NOT r.in_seed
), cand2 AS (
    {_candidates_sql(scope, "c.tsv @@ (SELECT tsq FROM rest) AND NOT c.tsv @@ (SELECT tsq FROM seed)")}
), scored2 AS (
    {_score_sql("cand2")}
)
SELECT collection, id AS chunk_id, score FROM (SELECT * FROM scored1 UNION ALL SELECT * FROM scored2) s
ORDER BY score DESC, id
LIMIT %(limit)s
"""


def query_terms(query: str) -> list[str]:
    """The identifier terms a query adds to its English lexemes (see ``retrieval.identifiers``)."""
    return identifier_terms(query)


def bm25_params(query: str, limit: int, scope: Scope, params: BM25Params = BM25Params()) -> dict[str, object]:
    return {**scope.params(), "query": query, "terms": query_terms(query), "k1": params.k1, "b": params.b,
            "limit": limit, "seed": max(limit, SEED_POSTINGS), "seed_share": SEED_SHARE}


def _hits(rows: list[dict]) -> list[Hit]:
    return [Hit(int(r["chunk_id"]), float(r["score"]), r.get("collection")) for r in rows]


def bm25(conn: psycopg.Connection, query: str, limit: int, scope: Scope = Scope(),
         params: BM25Params = BM25Params()) -> list[Hit]:
    rows = conn.execute(bm25_sql(scope), bm25_params(query, limit, scope, params)).fetchall()
    return _hits(rows)


def bm25_all(conn: psycopg.Connection, query: str, limit: int, scope: Scope = Scope(),
             params: BM25Params = BM25Params()) -> list[Hit]:
    """The same ranking without pruning (every chunk with any query lexeme is scored): the reference."""
    rows = conn.execute(bm25_all_sql(scope), bm25_params(query, limit, scope, params)).fetchall()
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
