"""Keyword search over the chunks' stored ``chunks.tsv``, through the postings kept at ingest.

The ranking is BM25:

* the query's lexemes come from ``to_tsvector(config, query)`` for each text-search configuration
  the searched documents were indexed with (``documents.text_search``, from the collection's profile
  at ingest; 'english' unless a preset says otherwise: stemming, stop words dropped) plus its
  identifier terms (``retrieval.text.identifiers``: ``gnu_source``, ``%in%``, ``c++``, which chunks
  carry in their tsvector too), so a question is a bag of terms, not a boolean expression;
* candidates are the chunks having *any* of the lexemes: a word of a long question that the corpus
  never uses cannot empty the result;
* each lexeme's document frequency over the searched scope is a sum of per-document counts kept at
  ingest (``document_lexemes``), so common words weigh little and rare ones a lot
  (IDF = ln(1 + (N - df + 0.5) / (df + 0.5))); N and the average chunk length come from
  ``documents.chunk_count`` / ``token_total``. Nothing is counted over the chunks per query;
* term frequency is the number of positions the lexeme has in the chunk's tsvector
  (``unnest(tsv)``); document length is the chunk's word-piece count, normalised by the scope's
  average (k1 = 1.2, b = 0.75). A chunk's score is summed in lexeme order, so equal
  chunks get bit-equal scores whatever the plan, and ties fall to the lower id.

The keyword leg reads the postings (``retrieval.store.postings``) of the question's lexemes in one
statement (``postings_sql``) and sums their weights in numpy (``top_scores``), bit-equal to the SQL
sum; nothing is pruned. The lab keeps that SQL sum as the reference (``chapterverse_lab.bm25``).
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter

import numpy as np

from retrieval.search.filters import Scope
from retrieval.search.fuse import Hit
from retrieval.store.postings import POSTING, decode
from retrieval.text.identifiers import identifier_terms

K1, B = 1.2, 0.75


def lexemes_sql(scope: Scope, text_param: str) -> str:
    """The lexemes of the text parameter ``%(<text_param>)s`` under every text-search configuration the
    scope's documents were indexed with (``documents.text_search``), as a query of one column
    ``lexeme``: how a question is parsed by the keyword leg and by the named-document rule."""
    return (f"SELECT u.lexeme FROM (SELECT DISTINCT d.text_search AS c FROM documents d "
            f"WHERE {scope.documents_sql('d')}) cfg CROSS JOIN LATERAL unnest(to_tsvector(cfg.c, %({text_param})s)) u")


def _head_sql(scope: Scope) -> str:
    """The query's lexemes with their IDF (``q``, ``stats``, ``idf``), shared with the lab's reference."""
    dcond = scope.documents_sql("d")
    return f"""q AS (
    {lexemes_sql(scope, "query")}
    UNION SELECT unnest(%(terms)s::text[])
), stats AS MATERIALIZED (
    SELECT coalesce(sum(d.chunk_count), 0)::float8 AS n,
           coalesce(sum(d.token_total)::float8 / nullif(sum(d.chunk_count), 0), 1)::float8 AS avgdl
    FROM documents d WHERE {dcond}
), idf AS MATERIALIZED (
    SELECT q.lexeme, df.df, ln(1 + (stats.n - df.df + 0.5) / (df.df + 0.5)) AS w
    FROM q CROSS JOIN stats
    CROSS JOIN LATERAL (
        SELECT coalesce(sum(l.df), 0)::float8 AS df FROM document_lexemes l
        JOIN documents d ON d.collection = l.collection AND d.id = l.document_id
        WHERE {dcond} AND l.lexeme = q.lexeme) df
)"""


def _docs_join(scope: Scope) -> str:
    return "JOIN documents d ON d.collection = p.collection AND d.id = p.document_id" if scope.needs_documents else ""


def postings_sql(scope: Scope) -> str:
    """The postings rows of the query's lexemes in the scope: ``ord`` (the lexeme's rank in SQL text
    order, the order BM25's sum runs in), its IDF ``w``, the scope's ``avgdl``, and the row's
    ``collection``, ``base`` and packed ``postings`` (``retrieval.store.postings``)."""
    return f"""
WITH {_head_sql(scope)}, lex AS MATERIALIZED (
    SELECT lexeme, w, row_number() OVER (ORDER BY lexeme) AS ord FROM idf WHERE df > 0
)  -- in this column order: top_scores reads the rows as tuples
SELECT lex.ord, lex.w, stats.avgdl, p.collection, p.base, p.postings
FROM lex JOIN lexeme_postings p ON p.lexeme = lex.lexeme {_docs_join(scope)} CROSS JOIN stats
WHERE {scope.sql("p", "d")}
"""


def bm25_params(query: str, limit: int, scope: Scope) -> dict[str, object]:
    return {**scope.params(), "query": query, "terms": identifier_terms(query), "k1": K1, "b": B, "limit": limit}


def top_scores(rows: Sequence[Sequence], limit: int) -> list[Hit]:
    """The best ``limit`` chunks by BM25, then lower id, of the rows of ``postings_sql`` (as tuples).

    Each posting's weight is ``(w * (tf * (k1 + 1))) / (tf + k1 * ((1 - b) + (b * dl) / avgdl))``, the
    SQL expression's float8 operations in its order (computed once per lexeme for each (tf, dl) pair of
    the grid covering the postings, then looked up, unless the grid is larger than the postings); a
    chunk's score adds its weights lexeme by lexeme in ``ord`` order starting from 0 (as Postgres's
    float8 ``sum`` does from the first), so it is bit-equal to the SQL score."""
    if not rows or limit < 1:
        return []
    rows = sorted(rows, key=itemgetter(0))  # by lexeme (stable: the index's order of documents within)
    k1, b, avgdl = K1, B, float(rows[0][2])
    counts = np.fromiter((len(r[5]) // POSTING.itemsize for r in rows), np.int64, len(rows))
    records = np.frombuffer(b"".join(r[5] for r in rows), POSTING)
    ids, tf, dl = decode(np.fromiter((r[4] for r in rows), np.int64, len(rows)), counts, records)
    width = int(tf.max()) + 1
    pair = dl * width + tf
    table = int(pair.max()) < len(ids)
    if table:
        grid = np.arange(int(pair.max()) + 1)
        tf_f, dl_f = (grid % width).astype(np.float64), (grid // width).astype(np.float64)
    else:
        tf_f, dl_f = tf.astype(np.float64), dl.astype(np.float64)
    tf_part = tf_f * (k1 + 1)
    den = tf_f + k1 * ((1 - b) + (b * dl_f) / avgdl)
    lo, hi = int(ids.min()), int(ids.max())
    dense = hi - lo < 4 * len(ids) + (1 << 20)  # a scope's chunk ids are close together: a slot per id
    if dense:
        slot = ids - lo
        acc = np.zeros(hi - lo + 1)
    else:
        chunk_ids, slot = np.unique(ids, return_inverse=True)
        acc = np.zeros(len(chunk_ids))
    ends = np.cumsum(counts).tolist()
    start = 0
    with np.errstate(divide="ignore", invalid="ignore"):  # grid cells of tf 0 are never read
        for i, r in enumerate(rows):
            if i + 1 < len(rows) and rows[i + 1][0] == r[0]:
                continue  # one segment per lexeme (a chunk appears at most once in it), in ord order
            end, w = ends[i], float(r[1])
            weight = ((w * tf_part) / den)[pair[start:end]] if table else (w * tf_part[start:end]) / den[start:end]
            acc[slot[start:end]] += weight
            start = end
    if dense:
        cids = np.flatnonzero(acc)  # every weight is > 0: the chunks with a posting
        scores = acc[cids]
        cids += lo
    else:
        cids, scores = chunk_ids, acc
    if len(scores) > limit:
        kth = np.partition(scores, len(scores) - limit)[len(scores) - limit]
        keep = np.flatnonzero(scores >= kth)
        scores, cids = scores[keep], cids[keep]
    order = np.lexsort((cids, -scores))[:limit]
    top = cids[order]
    collections = sorted({r[3] for r in rows})
    if len(collections) == 1:
        coll = dict.fromkeys(top.tolist(), collections[0])
    else:  # chunk ids are unique across collections: a chunk's collection is that of its postings' rows
        code = np.repeat(np.fromiter((collections.index(r[3]) for r in rows), np.int64, len(rows)), counts)
        at = np.flatnonzero(np.isin(ids, top))
        coll = {int(c): collections[int(k)] for c, k in zip(ids[at], code[at])}
    return [Hit(int(cids[i]), float(scores[i]), coll[int(cids[i])]) for i in order]

