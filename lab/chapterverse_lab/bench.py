"""Latency benchmark of ``search`` over a question set: p50/p95 per stage, for several setups.

Not a test: numbers depend on the machine and its load. Each setup runs every question ``rounds``
times after one warm-up pass (models loaded, connections pooled, caches warm), one query at a time,
the setups interleaved query by query.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from retrieval.encode.embed import get_embedder
from chapterverse_lab.evaluate import load_questions
from retrieval.search.filters import Scope
from retrieval.search.rerank import choose
from retrieval.search.search import SearchConfig, default_config, search_with
from chapterverse_lab.results import machine, stamp
from retrieval.settings import Settings


def percentiles(values: Sequence[float]) -> dict[str, float]:
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        return {"p50": 0.0, "p95": 0.0, "max": 0.0, "n": 0}
    return {"p50": round(float(np.percentile(arr, 50)), 2), "p95": round(float(np.percentile(arr, 95)), 2),
            "max": round(float(arr.max()), 2), "n": int(arr.size)}


def setups(settings: Settings) -> dict[str, SearchConfig]:
    base = default_config(settings)
    out = {
        "default": base,
        "no rerank": base.model_copy(update={"reranker": "none"}),
    }
    return out


def run(settings: Settings, questions_path: Path, collections: Sequence[str] | None = None, rounds: int = 3,
        k: int = 5, command: str = "") -> dict:
    questions = [q.question for q in load_questions(questions_path)]
    embedder = get_embedder(settings.search.embedding_model)
    scope = Scope.of(collections)
    configs = setups(settings)
    for cfg in configs.values():
        for q in questions:  # warm-up
            search_with(settings, q, k, scope, cfg)
    # Setups take turns query by query, so a change in machine load affects them all alike.
    stages: dict[str, dict[str, list[float]]] = {name: {} for name in configs}
    for _ in range(rounds):
        for q in questions:
            for name, cfg in configs.items():
                res = search_with(settings, q, k, scope, cfg)
                for stage, ms in res.timings_ms.items():
                    stages[name].setdefault(stage, []).append(ms)
    results = {name: {"reranker_ran": choose(cfg.reranker or settings.search.reranker, embedder).name,
                      "stages_ms": {s: percentiles(v) for s, v in stages[name].items()}}
               for name, cfg in configs.items()}
    base = default_config(settings)
    return {
        **stamp(command),
        "questions_file": str(questions_path),
        "queries_per_setup": len(questions) * rounds,
        "machine": machine(),
        "configuration": {"embedding_model": embedder.name, "reranker_setting": settings.search.reranker,
                          "rrf_k": base.rrf_k, "candidates_per_leg": base.depth, "fetch_depth": base.fetch_depth,
                          "k": k, "collections": list(collections or []),
                          "database": "external (DATABASE_URL)" if settings.db.url else "embedded Postgres"},
        "stage_notes": {
            "embed_query": "bi-encoder query embedding (dense leg only)",
            "keyword": "BM25: scoring the postings rows in numpy",
            "legs": "wall time of both legs together",
            "legs_sql": "the one statement of both legs (postings rows and nearest chunks), after embed_query",
            "fuse": "RRF + fetching the fused candidates' rows + near-duplicate removal",
            "rerank": "second stage (0 when none; sentence reranker: one SQL statement over the stored "
                      "sentence vectors)",
            "diversify": "distinct pages in the top k, building the result",
            "total": "whole search() call",
        },
        "setups": results,
    }
