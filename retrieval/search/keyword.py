"""Keyword search inside Postgres over the stored, GIN-indexed ``chunks.tsv`` column.

The default ranking is BM25, computed in one SQL statement:

* the query's lexemes come from ``to_tsvector(config, query)`` for each text-search configuration
  the searched documents were indexed with (``documents.text_search``, from the collection's profile
  at ingest; 'english' unless a preset says otherwise: stemming, stop words dropped) plus its identifier terms (``retrieval.text.identifiers``: ``gnu_source``, ``%in%``, ``c++``,
  which chunks carry in their tsvector too), so a question is a bag of terms, not a boolean expression;
* candidates are the chunks having *any* of the lexemes: a word of a long question that the corpus
  never uses cannot empty the result;
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
the same top ``limit`` while scoring few chunks, using the postings kept at ingest in bands
(``retrieval.store.postings``: per document and lexeme, chunk ids grouped by tf and length, each band row
with its largest tf and smallest length). For a band row of lexeme t, ``ub`` = BM25's weight of t
computed with the row's largest tf and smallest length and the scope's IDF and average length *now*:
no chunk of the row gets more from t (the weight grows with tf and shrinks with length).

1. *bounds*: for each query lexeme t, its ``seed`` band rows in the scope with the largest ``ub``
   (from the index alone); ``u_t`` = the largest ``ub`` of lexeme t, U = Σ u_t;
2. *seed*: the chunks of each lexeme's best rows (``seed`` per lexeme) and chunks having two of the
   ``pair_lexemes`` rarest lexemes (GIN index, at most ``probe``) are scored exactly; θ = the
   ``limit``-th best of those scores, lowered by 1e-9 of itself for rounding (0 when fewer than
   ``limit``). ``limit`` chunks reach θ, so the ``limit``-th best score of all, θ*, is at least θ;
3. *skipped lexemes*: in order of document frequency per unit of bound (commonest first), the
   lexemes whose ``u_t`` add up to at most ``skip_share`` · θ; S = their sum. Their postings are
   not read: each adds at most ``u_t`` to any chunk;
4. *essential lexemes* (the others): their band rows are read, except rows with ``ub`` below
   θ - (U - u_t): a chunk in such a row scores less than θ - (U - u_t) + (U - u_t) = θ ≤ θ*;
   a chunk's bound is S plus the ``ub`` of its rows read (at least its score, unless a row of it
   was skipped by that rule, and then it scores below θ anyway). A chunk in none of the rows read
   scores at most S < θ (it lacks every essential lexeme, or holds one in a row skipped by the rule);
5. chunks whose bound is below θ cannot reach θ*; of the others, the ``probe`` with the largest
   bounds are scored exactly, which may raise θ (same argument as in 2), then every remaining one
   whose bound reaches θ is scored exactly. The best ``limit`` scored are the top list: every chunk
   scoring at least θ* has been scored, so ties fall to the lower id as in the plain ranking.
   (θ is lowered by 1e-9 of itself, far more than the rounding of any sum here.)

With θ = 0 (fewer than ``limit`` seed chunks) every chunk with a query lexeme is scored.

An exact score reads only the query's lexemes from the chunk's tsvector (``setweight`` +
``ts_filter``, see ``_score_sql``) instead of unnesting all of them. ``bm25_all_sql`` scores every
candidate of the GIN index the plain way (unnest and join), kept as the reference the tests compare
against.

Two simpler rankings are kept for the evaluation that justified BM25: ``websearch`` (AND
semantics, ``ts_rank_cd``) and ``or_rank`` (OR of lexemes, ``ts_rank_cd``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import psycopg

from retrieval.search.filters import Scope
from retrieval.search.fuse import Hit
from retrieval.text.identifiers import identifier_terms

KeywordMethod = Literal["bm25", "websearch", "or_rank"]

SEED_POSTINGS = 20
PROBE = 100
SKIP_SHARE = 0.5
PAIR_LEXEMES = 4
"""Chunks of each query lexeme's best band rows scored first (at least ``limit``) to find θ, the
score a chunk must beat."""


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


# The text-search configuration of the scope's documents (the baseline rankers take one; BM25 takes
# the union of every configuration's lexemes, ``_head_sql``)
SCOPE_TEXT_SEARCH = "(SELECT coalesce(min(d.text_search::text), 'english')::regconfig FROM documents d WHERE {dcond})"


def lexemes_sql(scope: Scope, text_param: str) -> str:
    """The lexemes of the text parameter ``%(<text_param>)s`` under every text-search configuration the
    scope's documents were indexed with (``documents.text_search``), as a query of one column
    ``lexeme``: how a question is parsed by the keyword leg and by the named-document rule."""
    return (f"SELECT u.lexeme FROM (SELECT DISTINCT d.text_search AS c FROM documents d "
            f"WHERE {scope.documents_sql('d')}) cfg CROSS JOIN LATERAL unnest(to_tsvector(cfg.c, %({text_param})s)) u")


def _head_sql(scope: Scope) -> str:
    """The query's lexemes with their IDF (``q``, ``stats``, ``idf``), shared by both statements."""
    dcond = scope.documents_sql("d")
    return f"""q AS (
    {lexemes_sql(scope, "query")}
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


def _ub_sql(p: str, w: str) -> str:
    """BM25's weight of a lexeme (IDF ``w``) with the largest tf and smallest length of band row ``p``."""
    return (f"{w} * ({p}.tf_max * (%(k1)s + 1)) "
            f"/ ({p}.tf_max + %(k1)s * (1 - %(b)s + %(b)s * {p}.dl_min / stats.avgdl))")


def _docs_join(scope: Scope) -> str:
    return "JOIN documents d ON d.collection = p.collection AND d.id = p.document_id" if scope.needs_documents else ""


def _bands_from(scope: Scope, lexemes: str, joins: str = "") -> str:
    """FROM and WHERE of the band rows ``p`` of the lexemes of CTE ``lexemes`` (lexeme, w, ...) in the scope."""
    return (f"{lexemes} lex JOIN lexeme_bands p ON p.lexeme = lex.lexeme {_docs_join(scope)} CROSS JOIN stats {joins} "
            f"WHERE {scope.sql('p', 'd')}")


def bm25_sql(scope: Scope) -> str:
    """The BM25 statement (exact top ``limit``, pruned); parameters: ``query``, ``terms``
    (``query_terms(query)``), ``k1``, ``b``, ``limit``, ``seed``, ``probe`` and the scope's.
    See the module doc."""
    return f"""
WITH {_head_sql(scope)}, lex AS MATERIALIZED (
    SELECT lexeme, w, df FROM idf WHERE df > 0
), tops AS MATERIALIZED (
    SELECT l.lexeme, top.* FROM lex l CROSS JOIN LATERAL (
        SELECT p.collection, p.document_id, p.band, {_ub_sql("p", "l.w")} AS ub
        FROM lexeme_bands p {_docs_join(scope)} CROSS JOIN stats
        WHERE p.lexeme = l.lexeme AND {scope.sql("p", "d")}
        ORDER BY ub DESC LIMIT %(seed)s) top
), rarest AS MATERIALIZED (
    SELECT lexeme, rn FROM (SELECT lexeme, row_number() OVER (ORDER BY df, lexeme) AS rn FROM lex) r
    WHERE rn <= %(pair_lexemes)s
), seed AS MATERIALIZED (
    SELECT collection, chunk_id FROM (
        SELECT t.collection, x.chunk_id,
               row_number() OVER (PARTITION BY t.lexeme ORDER BY t.ub DESC, x.chunk_id) AS rn
        FROM tops t
        JOIN lexeme_bands r ON r.collection = t.collection AND r.document_id = t.document_id
                           AND r.lexeme = t.lexeme AND r.band = t.band
        CROSS JOIN LATERAL unnest(r.chunk_ids) x(chunk_id)) s
    WHERE rn <= %(seed)s
    UNION (  -- the GIN index alone finds them: the scope is applied after (a seed outside it is no use, no harm)
        SELECT c.collection, c.id
        FROM (SELECT * FROM chunks WHERE tsv @@ (
                  SELECT string_agg('(' || quote_literal(a.lexeme) || ' & ' || quote_literal(b.lexeme) || ')', ' | ')
                         ::tsquery
                  FROM rarest a JOIN rarest b ON a.rn < b.rn)
              LIMIT %(probe)s) c {"JOIN documents d ON d.collection = c.collection AND d.id = c.document_id" if scope.needs_documents else ""}
        WHERE {scope.sql()})
), cand1 AS (
    SELECT c.collection, c.id, c.tsv, greatest(c.token_count, 1)::float8 AS dl
    FROM seed JOIN chunks c ON c.collection = seed.collection AND c.id = seed.chunk_id
), scored1 AS MATERIALIZED (
    {_score_sql("cand1")}
), theta AS MATERIALIZED (
    SELECT CASE WHEN count(*) >= %(limit)s THEN min(score) * (1 - 1e-9) ELSE 0 END AS t
    FROM (SELECT score FROM scored1 ORDER BY score DESC LIMIT %(limit)s) top
), split AS MATERIALIZED (
    SELECT u.lexeme, u.u, lex.w,
           sum(u.u) OVER (ORDER BY lex.df / u.u DESC, u.lexeme ROWS UNBOUNDED PRECEDING) <= %(skip_share)s * theta.t AS skipped
    FROM (SELECT lexeme, max(ub) AS u FROM tops GROUP BY lexeme) u
    JOIN lex ON lex.lexeme = u.lexeme CROSS JOIN theta
), essential AS MATERIALIZED (
    SELECT lexeme, w, (SELECT t FROM theta) - ((SELECT sum(u) FROM split) - u) AS least_weight
    FROM split WHERE NOT skipped
), survivors AS MATERIALIZED (
    SELECT min(p.collection) AS collection, x.chunk_id,  -- chunk ids are unique across collections
           sum({_ub_sql("p", "lex.w")}) + (SELECT coalesce(sum(u), 0) FROM split WHERE skipped) AS ub
    FROM {_bands_from(scope, "essential", "CROSS JOIN LATERAL unnest(p.chunk_ids) x(chunk_id)")}
    AND {_ub_sql("p", "lex.w")} >= lex.least_weight
    GROUP BY x.chunk_id
    HAVING sum({_ub_sql("p", "lex.w")}) + (SELECT coalesce(sum(u), 0) FROM split WHERE skipped) >= (SELECT t FROM theta)
), cand2 AS (
    SELECT c.collection, c.id, c.tsv, greatest(c.token_count, 1)::float8 AS dl
    FROM (SELECT * FROM survivors ORDER BY ub DESC, chunk_id LIMIT %(probe)s) s
    JOIN chunks c ON c.collection = s.collection AND c.id = s.chunk_id
), scored2 AS MATERIALIZED (
    {_score_sql("cand2")}
), theta2 AS MATERIALIZED (
    SELECT greatest((SELECT t FROM theta), CASE WHEN count(*) >= %(limit)s THEN min(score) * (1 - 1e-9) ELSE 0 END) AS t
    FROM (SELECT score FROM scored2 ORDER BY score DESC LIMIT %(limit)s) top
), cand3 AS (  -- read in the table's order (a bitmap over the primary key), not one probe per chunk
    SELECT c.collection, c.id, c.tsv, greatest(c.token_count, 1)::float8 AS dl
    FROM chunks c
    WHERE c.collection = ANY(ARRAY(SELECT DISTINCT collection FROM survivors))
      AND c.id = ANY(ARRAY(SELECT chunk_id FROM survivors WHERE ub >= (SELECT t FROM theta2)))
), scored3 AS (
    {_score_sql("cand3")}
)
SELECT collection, id AS chunk_id, score FROM (SELECT * FROM scored2 UNION SELECT * FROM scored3) s
ORDER BY score DESC, id
LIMIT %(limit)s
"""


def query_terms(query: str) -> list[str]:
    """The identifier terms a query adds to its English lexemes (see ``retrieval.text.identifiers``)."""
    return identifier_terms(query)


def bm25_params(query: str, limit: int, scope: Scope, params: BM25Params = BM25Params()) -> dict[str, object]:
    return {**scope.params(), "query": query, "terms": query_terms(query), "k1": params.k1, "b": params.b,
            "limit": limit, "seed": max(limit, SEED_POSTINGS), "probe": max(limit, PROBE), "skip_share": SKIP_SHARE, "pair_lexemes": PAIR_LEXEMES}


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
        f"websearch_to_tsquery({SCOPE_TEXT_SEARCH.format(dcond=scope.documents_sql('d'))}, %(query)s) tq WHERE {scope.sql()} AND c.tsv @@ tq "
        f"ORDER BY score DESC, c.id LIMIT %(limit)s",
        {**scope.params(), "query": query, "limit": limit}).fetchall()
    return _hits(rows)


def or_rank(conn: psycopg.Connection, query: str, limit: int, scope: Scope = Scope()) -> list[Hit]:
    """Any lexeme of the query, ranked by ``ts_rank_cd`` (no IDF: common words weigh as much as rare)."""
    rows = conn.execute(
        f"WITH qq AS (SELECT string_agg(quote_literal(lexeme), ' | ')::tsquery AS tq "
        f"FROM unnest(to_tsvector({SCOPE_TEXT_SEARCH.format(dcond=scope.documents_sql('d'))}, %(query)s))) "
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
