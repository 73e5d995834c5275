"""Retrieval evaluation: recall@1/@5, MRR@10 and nDCG@5 of several configurations over a question set.

A result is a *hit* when it comes from the question's document and its page span
[page, page_end] covers one of the gold pages. Metrics (answerable questions only):

* recall@n: share of questions with a hit in the top n;
* MRR@10: mean of 1/rank of the first hit (0 when none in the top 10);
* nDCG@5: binary gains, where a result gains 1 when it covers a gold page no better-ranked result
  covered (repeats of the same page earn nothing); the ideal ranking covers
  min(#gold pages, 5) pages with its first results.

Each configuration sees the same candidate lists (the two legs run once per question at the
largest depth), so differences come from fusion and reranking alone.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import psycopg
from pydantic import BaseModel, ConfigDict

from retrieval.store import pool
from retrieval.encode.embed import get_embedder
from retrieval.search.filters import Scope
from retrieval.search.keyword import B, K1
from chapterverse_lab.bm25 import hits as _hits
from retrieval.search.fuse import Hit
from retrieval.models import Passage
from retrieval.search.rerank import NONE, SENTENCES, Choice, choose
from retrieval.search.search import Legs, SearchConfig, check_model, default_config, finish, named_first, named_in, run_legs
from retrieval.settings import Settings

TOP = 10


class Question(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str
    question: str
    answerable: bool = True
    document: str | None = None
    pages: list[int] | None = None


def load_questions(path: Path) -> list[Question]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a JSON list of questions")
    return [Question.model_validate(q) for q in data]


def covers(p: Passage, q: Question) -> set[int]:
    """Gold pages of ``q`` that passage ``p`` covers (empty: not a hit)."""
    if q.document is None or not q.pages or p.document != q.document:
        return set()
    return {g for g in q.pages if p.page <= g <= p.page_end}


def first_hit(results: Sequence[Passage], q: Question) -> int | None:
    for i, p in enumerate(results, 1):
        if covers(p, q):
            return i
    return None


def ndcg_at(results: Sequence[Passage], q: Question, n: int = 5) -> float:
    seen: set[int] = set()
    dcg = 0.0
    for i, p in enumerate(results[:n]):
        new = covers(p, q) - seen
        if new:
            dcg += 1.0 / math.log2(i + 2)
            seen |= new
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(q.pages or []), n)))
    return dcg / ideal if ideal else 0.0


class Metrics(BaseModel):
    recall_at_1: float
    recall_at_5: float
    mrr_at_10: float
    ndcg_at_5: float
    questions: int


def metrics(ranks: Sequence[int | None], ndcgs: Sequence[float]) -> Metrics:
    n = len(ranks)
    if n == 0:
        return Metrics(recall_at_1=0, recall_at_5=0, mrr_at_10=0, ndcg_at_5=0, questions=0)
    return Metrics(
        recall_at_1=sum(1 for r in ranks if r is not None and r <= 1) / n,
        recall_at_5=sum(1 for r in ranks if r is not None and r <= 5) / n,
        mrr_at_10=sum(1.0 / r for r in ranks if r is not None and r <= TOP) / n,
        ndcg_at_5=sum(ndcgs) / n,
        questions=n)


class Variant(BaseModel):
    """One evaluated configuration: which legs feed it and how it is reranked."""

    name: str
    legs: tuple[str, ...]
    keyword_method: str = "bm25"
    reranker: str = NONE
    rerank_weight: float = 1.0
    note: str = ""


# The baseline keyword rankings BM25 was measured against (the product ranks by BM25 only).
SCOPE_TEXT_SEARCH = "(SELECT coalesce(min(d.text_search::text), 'english')::regconfig FROM documents d WHERE {dcond})"


def websearch(conn: psycopg.Connection, query: str, limit: int, scope: Scope) -> list[Hit]:
    """``websearch_to_tsquery`` (every word required) ranked by ``ts_rank_cd``: the usual way, weak."""
    rows = conn.execute(
        f"SELECT c.collection, c.id AS chunk_id, ts_rank_cd(c.tsv, tq) AS score FROM {scope.from_clause()}, "
        f"websearch_to_tsquery({SCOPE_TEXT_SEARCH.format(dcond=scope.documents_sql('d'))}, %(query)s) tq "
        f"WHERE {scope.sql()} AND c.tsv @@ tq ORDER BY score DESC, c.id LIMIT %(limit)s",
        {**scope.params(), "query": query, "limit": limit}).fetchall()
    return _hits(rows)


def or_rank(conn: psycopg.Connection, query: str, limit: int, scope: Scope) -> list[Hit]:
    """Any lexeme of the query, ranked by ``ts_rank_cd`` (no IDF: common words weigh as much as rare)."""
    rows = conn.execute(
        f"WITH qq AS (SELECT string_agg(quote_literal(lexeme), ' | ')::tsquery AS tq "
        f"FROM unnest(to_tsvector({SCOPE_TEXT_SEARCH.format(dcond=scope.documents_sql('d'))}, %(query)s))) "
        f"SELECT c.collection, c.id AS chunk_id, ts_rank_cd(c.tsv, qq.tq) AS score FROM {scope.from_clause()}, qq "
        f"WHERE {scope.sql()} AND c.tsv @@ qq.tq ORDER BY score DESC, c.id LIMIT %(limit)s",
        {**scope.params(), "query": query, "limit": limit}).fetchall()
    return _hits(rows)


BASELINES = {"websearch": websearch, "or_rank": or_rank}


def legs_by_method(settings: Settings, embedder, query: str, cfg: SearchConfig, scope: Scope,
                   methods: Sequence[str]) -> dict[str, Legs]:
    """The product's legs (BM25 + dense), and for each baseline ranking the same dense leg beside it."""
    legs = run_legs(settings, embedder, query, cfg, scope)
    out = {"bm25": legs}
    with pool.connection(settings) as conn:
        for m in methods:
            if m != "bm25":
                out[m] = Legs(lists={"keyword": BASELINES[m](conn, query, cfg.depth, scope),
                                     "dense": legs.lists["dense"]}, query_vector=legs.query_vector)
    return out


def variants(settings: Settings) -> list[Variant]:
    """Keyword-only (three rankings), dense-only, RRF, and RRF + each reranker available here."""
    out = [
        Variant(name="keyword (websearch_to_tsquery AND, ts_rank_cd)", legs=("keyword",), keyword_method="websearch"),
        Variant(name="keyword (OR of lexemes, ts_rank_cd)", legs=("keyword",), keyword_method="or_rank"),
        Variant(name="keyword (BM25 in Postgres)", legs=("keyword",)),
        Variant(name="dense", legs=("dense",)),
        Variant(name="RRF (OR ts_rank_cd + dense)", legs=("keyword", "dense"), keyword_method="or_rank"),
        Variant(name="RRF (BM25 + dense)", legs=("keyword", "dense")),
    ]
    for w in (1.0, 0.5, 0.3):
        out.append(Variant(name=f"RRF + {SENTENCES} (weight {w})", legs=("keyword", "dense"),
                           reranker=SENTENCES, rerank_weight=w))
    if settings.search.reranker not in (NONE, SENTENCES):
        out.append(Variant(name=f"RRF + cross-encoder {settings.search.reranker}", legs=("keyword", "dense"),
                           reranker=settings.search.reranker))
    return out


def _legs_for(all_legs: dict[str, Legs], v: Variant) -> Legs:
    base = all_legs[v.keyword_method]
    lists: dict[str, list[Hit]] = {leg: base.lists[leg] for leg in v.legs}
    return Legs(lists=lists, query_vector=base.query_vector)


def evaluate(settings: Settings, questions_path: Path, collections: Sequence[str] | None = None,
             command: str = "") -> dict:
    questions = load_questions(questions_path)
    answerable = [q for q in questions if q.answerable and q.document and q.pages]
    embedder = get_embedder(settings.search.embedding_model)
    check_model(settings, embedder)
    base_cfg = default_config(settings)
    scope = Scope.of(collections)
    vs = variants(settings)
    choices: dict[str, Choice] = {v.name: choose(v.reranker, embedder) for v in vs}
    unavailable = {v.reranker: choices[v.name].note for v in vs if choices[v.name].note}
    vs = [v for v in vs if not choices[v.name].note]  # a reranker that could not load is not evaluated
    default_choice = choose(settings.search.reranker, embedder)

    per_q: dict[str, dict[str, int | None]] = {}
    per_variant_ranks: dict[str, list[int | None]] = {v.name: [] for v in vs}
    per_variant_ndcg: dict[str, list[float]] = {v.name: [] for v in vs}
    methods = sorted({v.keyword_method for v in vs})
    for q in answerable:
        all_legs = legs_by_method(settings, embedder, q.question, base_cfg, scope, methods)
        named = named_in(settings, q.question, scope) if base_cfg.named_first else []
        named_legs = legs_by_method(settings, embedder, q.question, base_cfg, Scope(scope.collections, tuple(named)),
                                    methods) if named else {}
        per_q[q.id] = {}
        for v in vs:
            cfg = base_cfg.model_copy(update={"rerank_weight": v.rerank_weight, "reranker": v.reranker})
            with pool.connection(settings) as conn:
                passages: list[Passage] = []
                if named_legs:  # as search() does: the documents the question names by title first
                    passages, _ = finish(settings, q.question, _legs_for(named_legs, v), TOP, cfg, choices[v.name],
                                         conn)
                if len(passages) < TOP:
                    rest, _ = finish(settings, q.question, _legs_for(all_legs, v), TOP, cfg, choices[v.name], conn)
                    passages = named_first(passages, rest, TOP)
            rank = first_hit(passages, q)
            per_q[q.id][v.name] = rank
            per_variant_ranks[v.name].append(rank)
            per_variant_ndcg[v.name].append(ndcg_at(passages, q))

    results = {}
    for v in vs:
        ran = choices[v.name].name
        results[v.name] = {
            "legs": list(v.legs), "keyword_method": v.keyword_method if "keyword" in v.legs else None,
            "reranker_requested": v.reranker, "reranker_ran": ran,
            "rerank_weight": v.rerank_weight if ran != NONE else None,
            "note": choices[v.name].note,
            **metrics(per_variant_ranks[v.name], per_variant_ndcg[v.name]).model_dump()}
    default_name = _default_variant_name(vs, choices, default_choice, base_cfg)
    return {
        "command": command,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "questions_file": str(questions_path),
        "questions": len(questions),
        "answerable_questions": len(answerable),
        "hit_definition": "right document and the passage's page span [page, page_end] covers a gold page",
        "configuration": {
            "embedding_model": embedder.name,
            "reranker_setting": settings.search.reranker,
            "reranker_default_ran": default_choice.name,
            "reranker_default_note": default_choice.note,
            "rrf_k": base_cfg.rrf_k,
            "candidates_per_leg": base_cfg.depth,
            "fetch_depth": base_cfg.fetch_depth,
            "bm25": {"k1": K1, "b": B, "config": "english + identifier terms",
                     "statistics": "kept per document at ingest (document_lexemes, token_total)"},
            "top": TOP,
            "collections": list(collections or []),
            "diversify": "near-duplicates dropped; top results start on distinct pages",
            "named_first": base_cfg.named_first,
        },
        "default_configuration": default_name,
        "unavailable_rerankers": unavailable,
        "results": results,
        "per_question_first_hit_rank": per_q,
    }


def _default_variant_name(vs: Sequence[Variant], choices: dict[str, Choice], default_choice: Choice,
                          cfg: SearchConfig) -> str | None:
    """The evaluated variant that does what ``search()`` does with the current settings."""
    for v in vs:
        if v.legs == ("keyword", "dense") and v.keyword_method == "bm25" \
                and choices[v.name].name == default_choice.name \
                and (default_choice.name == NONE or v.rerank_weight == cfg.rerank_weight):
            return v.name
    return None
