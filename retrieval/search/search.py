"""Hybrid search: BM25 keyword search and pgvector search, RRF (k=60), rerank, diversify.

The pipeline for one query:

1. **Legs.** BM25 over the postings stored at ingest (``retrieval.search.keyword``) and pgvector
   nearest neighbours (``retrieval.search.vector``: exact in small scopes, HNSW in large ones).
   The query is embedded, then one statement returns the keyword leg's postings rows (scored here
   in numpy) and the dense leg's nearest chunks: one round trip.
2. **Fuse** the two ranked lists by reciprocal rank fusion with k = 60.
3. **Fetch** the best ``fetch_depth`` fused chunks' rows and drop near-duplicates (same text, or
   mostly inside a better-ranked chunk of the same document).
4. **Rerank** them with the configured reranker (``retrieval.search.rerank``); "none" keeps fused order.
5. **Diversify** so the top ``k`` start on distinct pages and do not overlap each other.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import psycopg
from psycopg.rows import tuple_row
from pydantic import BaseModel, Field

from retrieval.store import db, index, pool, replicas
from retrieval.store.postings import POSTING, decode
from retrieval.encode.embed import Embedder, get_embedder
from retrieval.search.filters import Scope
from retrieval.search.fuse import RRF_K, Hit, Span, diversify, near_duplicates, rrf
from retrieval.search.keyword import bm25_params, lexemes_sql, postings_sql, top_scores
from retrieval.models import Passage, SearchResult, StageScores
from retrieval.search.named import named_documents, text_uses, title_cues
from retrieval.search.rerank import Choice, SentenceReranker, choose
from retrieval.encode.sentence_index import STORED_SCORE_SQL, half_vector, rerank_text
from retrieval.settings import Settings
from retrieval.store.collections import collection_profile
from retrieval.text.textnorm import without_invisible
from retrieval.search.vector import configure, nearest_hits, nearest_sql

log = logging.getLogger(__name__)

class SearchConfig(BaseModel):
    """How a search runs. ``search()`` uses the defaults plus the reranker named in Settings."""

    depth: int = Field(default=10, ge=1, le=1000, description="Candidates per leg before fusion.")
    rrf_k: int = Field(default=RRF_K, ge=0)
    fetch_depth: int = Field(default=30, ge=1, le=1000, description="Fused candidates fetched and reranked.")
    rerank_depth: int = Field(default=10, ge=1, le=1000, description="Best fused candidates the reranker "
                              "reorders (the rest follow in fused order).")
    rerank_weight: float = Field(default=0.3, ge=0.0, le=1.0,
                                 description="For the bi-encoder fallback: share of its rank in the final "
                                 "reciprocal-rank score (the fused rank has the rest).")
    reranker: str | None = None  # None: Settings.reranker
    named_first: bool = Field(
        default=True, description="Search the documents the question names by their title first "
        "(``retrieval.search.named``: \"in gnuplot, …\"), then the rest.")


PASSAGE_COLUMNS = """
    c.id AS chunk_id, c.collection, c.document_id, d.name AS document, d.url AS document_url,
    c.page_start, c.page_end, c.char_start, c.char_end, c.text, c.context, c.untrusted,
    (SELECT p.label FROM pages p WHERE p.collection = c.collection AND p.document_id = c.document_id
       AND p.page_no = c.page_start) AS page_label
"""


def fetch_rows(conn: psycopg.Connection, keys: Sequence[tuple[str, int]],
               query_vector: np.ndarray | None = None) -> dict[int, dict]:
    """The passage rows of (collection, chunk id) pairs (always looked up by collection too); with
    ``query_vector``, each row also carries ``sentence_score``, its best stored sentence-window cosine
    (``retrieval.encode.sentence_index``; NULL for a chunk indexed before sentence vectors existed),
    so fetching and the sentence rerank's scores are one statement."""
    if not keys:
        return {}
    scored = query_vector is not None
    rows = conn.execute(
        f"SELECT {PASSAGE_COLUMNS}{', ' + STORED_SCORE_SQL + ' AS sentence_score' if scored else ''} "
        f"FROM chunks c JOIN documents d ON d.collection = c.collection "
        f"AND d.id = c.document_id WHERE c.collection = ANY(%s) AND c.id = ANY(%s)",
        [*([half_vector(query_vector)] if scored else []), sorted({c for c, _ in keys}),
         [i for _, i in keys]]).fetchall()
    wanted = set(keys)
    return {int(r["chunk_id"]): r for r in rows if (r["collection"], int(r["chunk_id"])) in wanted}


def to_passage(row: dict, score: float, stages: StageScores) -> Passage:
    return Passage(chunk_id=row["chunk_id"], collection=row["collection"], document=row["document"],
                   document_url=row["document_url"], page=row["page_start"], page_end=row["page_end"],
                   page_label=row["page_label"], char_start=row["char_start"], char_end=row["char_end"],
                   text=row["text"], context=row["context"], score=score, stages=stages,
                   untrusted=bool(row.get("untrusted", False)))


def span_of(row: Mapping) -> Span:
    return Span((row["collection"], int(row["document_id"])), row["page_start"], row["char_start"],
                row["page_end"], row["char_end"], row["text"], bool(row.get("untrusted", False)))


# ---------------------------------------------------------------------------------------------
# stage 1: the two legs

_checked: set[tuple[str, str, int]] = set()
_checked_lock = threading.Lock()


def check_model(settings: Settings, embedder: Embedder) -> None:
    """Refuse to search an index built with another embedding model (checked once per process)."""
    key = (db.conninfo(settings), embedder.name, embedder.dim)
    with _checked_lock:
        if key in _checked:
            return
    with pool.connection(settings) as conn:
        index.ensure_model(conn, embedder.name, embedder.dim)
    with _checked_lock:
        _checked.add(key)


@dataclass
class Legs:
    """The ranked lists of one query, plus what they cost."""

    lists: dict[str, list[Hit]]
    query_vector: np.ndarray
    timings_ms: dict[str, float] = field(default_factory=dict)


def run_legs(settings: Settings, embedder: Embedder, query: str, cfg: SearchConfig, scope: Scope) -> Legs:
    """Both legs in one statement after embedding the query (one round trip): the keyword leg's
    stored postings rows (scored here, ``keyword.top_scores``) and the dense leg's nearest chunks."""
    t = time.perf_counter()
    vec = embedder.embed_query(query)
    t1 = time.perf_counter()
    with pool.connection(settings) as conn:
        configure(conn, cfg.depth)
        # postings rows first (their column types decide the union's), then the dense rows
        sql = (f"WITH kw AS ({postings_sql(scope)}), nn AS MATERIALIZED ({nearest_sql(scope)}) "
               "SELECT kw.*, NULL::bigint AS id, NULL::float8 AS dist FROM kw "
               "UNION ALL SELECT NULL, NULL, NULL, collection, NULL, NULL, id, dist FROM nn")
        with conn.cursor(row_factory=tuple_row) as cur:
            rows = cur.execute(sql, {**bm25_params(query, cfg.depth, scope), "vec": vec}, binary=True).fetchall()
    dense_list = nearest_hits((r[3], r[6], r[7]) for r in rows if r[6] is not None)
    t2 = time.perf_counter()
    keyword_hits = top_scores([r[:6] for r in rows if r[6] is None], cfg.depth)
    t3 = time.perf_counter()
    return Legs(lists={"keyword": keyword_hits, "dense": dense_list}, query_vector=vec,
                timings_ms={"embed_query": (t1 - t) * 1e3, "legs_sql": (t2 - t1) * 1e3, "keyword": (t3 - t2) * 1e3})


# ---------------------------------------------------------------------------------------------
# stages 2-5

def _rank_map(order: Sequence[int]) -> dict[int, int]:
    return {cid: i + 1 for i, cid in enumerate(order)}


def combine_ranks(fused_order: Sequence[int], rerank_scores: Mapping[int, float], weight: float,
                  k: int = RRF_K) -> list[int]:
    """Order chunks by w/(k + rerank rank) + (1-w)/(k + fused rank); w = 1 is the reranker's order."""
    by_rerank = sorted(fused_order, key=lambda c: -rerank_scores[c])
    rr, fr = _rank_map(by_rerank), _rank_map(fused_order)
    score = {c: weight / (k + rr[c]) + (1 - weight) / (k + fr[c]) for c in fused_order}
    return sorted(fused_order, key=lambda c: (-score[c], fr[c]))


def finish(settings: Settings, query: str, legs: Legs, k: int, cfg: SearchConfig, choice: Choice,
           conn: psycopg.Connection) -> tuple[list[Passage], dict[str, float]]:
    """Fuse, fetch, dedup, rerank and diversify; returns the top k passages and stage timings."""
    timings: dict[str, float] = {}
    t = time.perf_counter()
    fused = rrf(legs.lists, cfg.rrf_k)
    head = fused[:max(cfg.fetch_depth, k)]
    collection_of = {h.chunk_id: h.collection for hits in legs.lists.values() for h in hits}
    stored = isinstance(choice.reranker, SentenceReranker) and bool(head)
    rows = fetch_rows(conn, [(collection_of[f.chunk_id], f.chunk_id) for f in head],
                      legs.query_vector if stored else None)
    head = [f for f in head if f.chunk_id in rows]  # a chunk deleted meanwhile is skipped
    keep = near_duplicates([span_of(rows[f.chunk_id]) for f in head])
    head = [head[i] for i in keep]
    timings["fuse"] = (time.perf_counter() - t) * 1e3

    t = time.perf_counter()
    order = [f.chunk_id for f in head]
    rerank_scores: dict[int, float] = {}
    if choice.reranker is not None and head:
        top, rest = order[:cfg.rerank_depth], order[cfg.rerank_depth:]
        if isinstance(choice.reranker, SentenceReranker):
            rerank_scores = _sentence_scores(choice.reranker, query, legs, [rows[c] for c in top])
            weight = cfg.rerank_weight
        else:
            vals = choice.reranker.score(query, [rerank_text(rows[c]["context"], rows[c]["text"]) for c in top])
            rerank_scores = dict(zip(top, vals, strict=True))
            weight = 1.0
        order = combine_ranks(top, rerank_scores, weight, cfg.rrf_k) + rest
    timings["rerank"] = (time.perf_counter() - t) * 1e3

    t = time.perf_counter()
    picks = diversify([span_of(rows[c]) for c in order], k)
    final = [order[i] for i in picks][:k]
    by_id = {f.chunk_id: (i, f) for i, f in enumerate(head, 1)}
    rerank_rank = _rank_map(sorted(rerank_scores, key=lambda c: -rerank_scores[c])) if rerank_scores else {}
    passages: list[Passage] = []
    for cid in final:
        fused_rank, f = by_id[cid]
        stages = StageScores(
            keyword_rank=f.ranks.get("keyword"), keyword_score=f.scores.get("keyword"),
            dense_rank=f.ranks.get("dense"), dense_score=f.scores.get("dense"),
            fused_rank=fused_rank, fused_score=f.score,
            rerank_rank=rerank_rank.get(cid), rerank_score=rerank_scores.get(cid))
        score = rerank_scores.get(cid, f.score) if choice.reranker is not None else f.score
        passages.append(to_passage(rows[cid], float(score), stages))
    timings["diversify"] = (time.perf_counter() - t) * 1e3
    return passages, timings


def _sentence_scores(reranker: SentenceReranker, query: str, legs: Legs, rows: Sequence[Mapping]) -> dict[int, float]:
    """Sentence-reranker scores: the stored ones fetched with the rows (``fetch_rows``); a chunk
    indexed before they existed has its sentences embedded now."""
    scores = {int(r["chunk_id"]): float(r["sentence_score"]) for r in rows if r.get("sentence_score") is not None}
    missing = [r for r in rows if int(r["chunk_id"]) not in scores]
    if missing:
        vals = reranker.score(query, [rerank_text(r["context"], r["text"]) for r in missing],
                              query_vector=legs.query_vector)
        scores.update({int(r["chunk_id"]): v for r, v in zip(missing, vals, strict=True)})
    return scores


def search_with(settings: Settings, query: str, k: int, scope: Scope, cfg: SearchConfig) -> SearchResult:
    """The top ``k`` passages. When the question names some of the searched documents by their title
    (``retrieval.search.named``), their passages come first and the other documents' fill the rest."""
    t0 = time.perf_counter()
    embedder = get_embedder(settings.search.embedding_model)
    check_model(settings, embedder)
    choice = choose(cfg.reranker or settings.search.reranker, embedder)
    query = without_invisible(query).strip()
    if not query:
        return SearchResult(query=query, results=[], reranker=choice.name)
    named = named_in(settings, query, scope) if cfg.named_first and not scope.documents else []
    passages: list[Passage] = []
    timings: dict[str, float] = {}
    if named:
        passages, first_timings = _ranked(settings, embedder, choice, query, k,
                                          Scope(scope.collections, tuple(named)), cfg)
        timings.update({f"named.{stage}": ms for stage, ms in first_timings.items()})
    if len(passages) < k:  # the other documents fill what the named ones leave (all of it when none is named)
        rest, rest_timings = _ranked(settings, embedder, choice, query, k, scope, cfg)
        passages = named_first(passages, rest, k)
        timings.update(rest_timings)
    timings["total"] = (time.perf_counter() - t0) * 1e3
    return SearchResult(query=query, results=passages, reranker=choice.name, timings_ms=timings,
                        named_documents=named)


def named_first(first: Sequence[Passage], rest: Sequence[Passage], k: int) -> list[Passage]:
    """The named documents' passages, then the others' that are not among them; ``k`` in all."""
    seen = {(p.collection, p.chunk_id) for p in first}
    return (list(first) + [p for p in rest if (p.collection, p.chunk_id) not in seen])[:k]


def _ranked(settings: Settings, embedder: Embedder, choice: Choice, query: str, k: int, scope: Scope,
            cfg: SearchConfig) -> tuple[list[Passage], dict[str, float]]:
    t_legs = time.perf_counter()
    legs = run_legs(settings, embedder, query, cfg, scope)
    legs.timings_ms["legs"] = (time.perf_counter() - t_legs) * 1e3
    with pool.connection(settings) as conn:
        passages, timings = finish(settings, query, legs, k, cfg, choice, conn)
    return passages, {**legs.timings_ms, **timings}


def named_in(settings: Settings, query: str, scope: Scope) -> list[str]:
    """The searched documents ``query`` names by title (``retrieval.search.named``); [] when it names none."""
    with pool.connection(settings) as conn:
        docs = {r["name"]: r for r in conn.execute(
            f"SELECT d.collection, d.id, d.name, d.title, d.chunk_count FROM documents d WHERE {scope.documents_sql('d')}",
            scope.params())}
        titles = {name: r["title"] or name for name, r in docs.items()}
        cues = title_cues(query, titles, collection_profile(settings, scope.collections))
        rates: dict[str, dict[str, float]] = {}
        for word, titled in cues.items():  # chunk counts per document kept at ingest: no scan of the chunks
            rows = conn.execute(
                "SELECT d.name, sum(l.df) AS n FROM document_lexemes l JOIN documents d ON d.collection = l.collection "
                f"AND d.id = l.document_id WHERE {scope.documents_sql('d')} AND l.lexeme = ANY({lexemes_sql(scope, 'word')}) "
                "GROUP BY d.name", {**scope.params(), "word": word}).fetchall()
            uses = {r["name"]: int(r["n"]) for r in rows if r["name"] != titled}
            own = docs[titled]
            uses[titled] = text_uses(_term_frequencies(conn, scope, own["collection"], own["id"], word))
            rates[word] = {name: n / max(1, docs[name]["chunk_count"]) for name, n in uses.items()}
    return named_documents(cues, rates)


def _term_frequencies(conn: psycopg.Connection, scope: Scope, collection: str, document_id: int, word: str) -> list[int]:
    """The word's term frequency in each chunk of one document that has it, from the stored postings
    (``retrieval.store.postings``)."""
    rows = conn.execute(
        "SELECT base, postings FROM lexeme_postings WHERE collection = %(c)s AND document_id = %(d)s "
        f"AND lexeme = ANY({lexemes_sql(scope, 'word')})",
        {**scope.params(), "c": collection, "d": document_id, "word": word}).fetchall()
    out: list[int] = []
    for r in rows:
        records = np.frombuffer(r["postings"], dtype=POSTING)
        out.extend(decode(np.array([r["base"]]), np.array([len(records)]), records)[1].tolist())
    return out


def default_config(settings: Settings, depth: int | None = None) -> SearchConfig:
    """The defaults plus the reranker named in ``settings``; ``depth``: candidates per leg when more than
    the default's are wanted (then half as many again are fetched after fusion)."""
    cfg = SearchConfig(reranker=settings.search.reranker)
    if depth is not None and depth > cfg.depth:
        cfg = cfg.model_copy(update={"depth": depth, "fetch_depth": max(cfg.fetch_depth, depth + depth // 2)})
    return cfg


def search(settings: Settings, query: str, k: int = 5, collections: Sequence[str] | None = None,
           documents: Sequence[str] | None = None, depth: int | None = None) -> SearchResult:
    """The top ``k`` passages for ``query``, optionally only from some collections / documents.
    ``depth``: candidates each leg fetches before fusion, when more than ``SearchConfig.depth`` are
    wanted (an answerer reading many passages asks for a deeper pool than it reads)."""
    if k < 1:
        raise ValueError("k must be at least 1")
    scope = Scope.of(collections, documents)  # read on a standby or the primary (retrieval.store.replicas)
    return replicas.read(settings, collections, lambda s: search_with(s, query, k, scope, default_config(s, depth)))
