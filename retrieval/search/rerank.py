"""Second-stage rerankers behind one small interface, and the choice of which one actually runs.

``Settings.reranker`` is ``bi-encoder-sentences`` by default (the reranker that was measured; its
sentence vectors are stored at ingest, see ``retrieval.encode.sentence_index``), ``none`` (no rerank: fused
order), or a sentence-transformers ``CrossEncoder`` (hub name or local path), opt-in. When a
cross-encoder cannot be loaded (no weights offline), the search falls back to ``FALLBACK`` and logs
once which reranker ran instead; ``SearchResult.reranker`` always names the one that ran, and
``describe`` says which one will run without loading any model (``chapterverse db status``).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from retrieval.encode.embed import Embedder
from retrieval.text.spans import sentences

log = logging.getLogger(__name__)

NONE = "none"
SENTENCES = "bi-encoder-sentences"


class Reranker(Protocol):
    name: str

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """One relevance score per passage (higher is better)."""
        ...


class CrossEncoderReranker:
    """A sentence-transformers CrossEncoder scoring (query, passage) pairs."""

    def __init__(self, name_or_path: str, max_length: int = 512) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import CrossEncoder  # noqa: PLC0415  (slow import)

        path = Path(name_or_path).expanduser()
        target = str(path) if path.exists() else name_or_path
        self.model = CrossEncoder(target, device="cpu", max_length=max_length)
        self.name = f"cross-encoder:{name_or_path}"
        self._lock = threading.Lock()

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        with self._lock:
            out = self.model.predict([(query, p) for p in passages], batch_size=32, show_progress_bar=False,
                                     convert_to_numpy=True)
        return [float(x) for x in np.asarray(out, dtype=np.float64).reshape(len(passages), -1)[:, -1]]


class SentenceReranker:
    """Bi-encoder fallback: a passage scores the best cosine between the query and one of its
    sentence windows. A 200-word chunk's single vector blurs the one sentence that answers; a
    window's vector does not. Uses the query embedding the dense leg already computed."""

    name = SENTENCES

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def score(self, query: str, passages: Sequence[str], query_vector: np.ndarray | None = None) -> list[float]:
        if not passages:
            return []
        qv = self.embedder.embed_query(query) if query_vector is None else query_vector
        windows = [sentences(p) for p in passages]
        sims = self.embedder.embed([w for ws in windows for w in ws], batch_size=64) @ qv
        ends = np.cumsum([len(ws) for ws in windows])
        return [float(part.max()) for part in np.split(sims, ends[:-1])]


@dataclass(frozen=True)
class Choice:
    reranker: Reranker | None  # None: no rerank
    name: str  # what ran, for logs and output
    requested: str
    note: str = ""  # why it differs from what was requested


# The default, and what runs when a configured cross-encoder cannot be loaded: the bi-encoder
# sentence reranker. Measured on the 24 dev questions (results/retrieval_dev_eval.json): RRF alone
# recall@5 0.96, MRR@10 0.87; with it at weight 0.3 over the top 10, recall@5 0.96, MRR@10 0.93,
# recall@1 0.79 -> 0.92. Embedding the candidates' sentences per query cost ~0.5 s on 2 cores; with
# the vectors stored at ingest it is one small SQL statement (results/retrieval_latency.json, stage
# "rerank"). CHAPTERVERSE_RERANKER=none turns reranking off.
FALLBACK = SENTENCES


def _hub_online() -> bool:
    """Whether the Hugging Face hub may be asked for a model. ``CrossEncoderReranker`` sets
    ``HF_HUB_OFFLINE=1`` when it is unset, so only an operator who set it otherwise allows a download;
    huggingface_hub reads any value but 1, ON, YES and TRUE as online."""
    value = os.environ.get("HF_HUB_OFFLINE")
    return value is not None and value.strip().upper() not in ("1", "ON", "YES", "TRUE")


def _cached(requested: str) -> bool:
    """Whether ``requested`` is a model in the Hugging Face cache or in sentence-transformers' own
    (``SENTENCE_TRANSFORMERS_HOME``), the two places a ``CrossEncoder`` loads from offline."""
    from huggingface_hub import try_to_load_from_cache  # noqa: PLC0415

    for cache_dir in (None, os.environ.get("SENTENCE_TRANSFORMERS_HOME")):
        if cache_dir == "":
            continue
        try:
            if isinstance(try_to_load_from_cache(requested, "config.json", cache_dir=cache_dir), str):
                return True
        except Exception:  # noqa: BLE001, S112  (not a repo id, no cache: not there)
            continue
    return False


def _found(requested: str) -> str | None:
    """Where a cross-encoder ``requested`` would be loaded from ("path", "cache", "hub"), decided without
    importing torch; None when it cannot be had (no such folder, not in the cache, the hub offline)."""
    if Path(requested).expanduser().exists():
        return "path"
    if _cached(requested):
        return "cache"
    return "hub" if _hub_online() else None


def describe(requested: str) -> str:
    """Which reranker ``requested`` will run, decided without loading a model: a local path or a
    model in the Hugging Face cache is tried as a cross-encoder; anything else falls back."""
    if requested in (NONE, SENTENCES):
        return requested
    where = _found(requested)
    if where == "path":
        return f"cross-encoder:{requested} (loaded on first use; {FALLBACK} if it cannot be)"
    if where == "cache":
        return f"cross-encoder:{requested} (from the Hugging Face cache; {FALLBACK} if it cannot be loaded)"
    if where == "hub":
        return f"cross-encoder:{requested} (downloaded from the Hugging Face hub on first use; {FALLBACK} if it cannot be)"
    return f"{FALLBACK} (cross-encoder {requested!r} is not available offline)"

_cache: dict[tuple[str, str], Choice] = {}
_cache_lock = threading.Lock()


def _build(requested: str, embedder: Embedder) -> Choice:
    if requested == NONE:
        return Choice(None, NONE, requested)
    if requested == SENTENCES:
        return Choice(SentenceReranker(embedder), SENTENCES, requested)
    if _found(requested) is None:  # not tried: importing sentence-transformers to fail costs ~4 s a process
        reason = "no such folder, not in the Hugging Face cache, and nothing is downloaded"
    else:
        try:
            ce = CrossEncoderReranker(requested)
            return Choice(ce, ce.name, requested)
        except Exception as exc:  # noqa: BLE001  (hub/network/format errors all mean: not available)
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    fb = _build(FALLBACK, embedder)
    return Choice(fb.reranker, fb.name, requested, f"cross-encoder {requested!r} could not be loaded ({reason})")


def choose(requested: str, embedder: Embedder) -> Choice:
    """The reranker for ``requested`` (loaded once per process); logs once which one runs."""
    key = (requested, embedder.name)
    with _cache_lock:
        if key not in _cache:
            choice = _build(requested, embedder)
            if choice.note:
                log.warning("%s; reranker in use: %s", choice.note, choice.name)
            else:
                log.info("reranker in use: %s", choice.name)
            _cache[key] = choice
        return _cache[key]
