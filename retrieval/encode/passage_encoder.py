"""Passage vectors for ingest in one int8 forward pass per chunk, without torch.

Each chunk used to go through the model twice in PyTorch fp32: once whole (the chunk's vector) and
once per sentence window (the sentence reranker's stored vectors). Here the embedding model's
transformer is exported once to ONNX with its *token* states as output, its MatMul weights
quantized to int8 (onnxruntime dynamic quantization, per output channel), and run with
onnxruntime on all cores:

* a chunk's vector is the mean of all its token states, L2-normalised: the model's own pooling
  (sentence-transformers ``Pooling`` in mean mode, then ``Normalize``), so it is the vector the
  torch model gives, up to int8 rounding (cosine >= INT8_MIN_COSINE on the probes, measured at export);
* a sentence window's vector is the mean of the states of the tokens inside the window, taken
  from the same pass ("late chunking", Günther et al. 2024): the window's tokens have read the
  whole chunk, its heading and the document title, and no token is embedded twice.

Only models that pool by the mean of token states can be split this way; any other model gets a
``meta.json`` that says why and is embedded by ``retrieval.encode.embed`` with torch as before. If int8
rounding moves the probes' vectors by more than INT8_MIN_COSINE the export keeps the fp32 graph and
says so in ``meta.json``.

Layout under the state directory (``CHAPTERVERSE_HOME``)::

    passage-encoder/<key>/passages.onnx   token states out; int8 (or fp32, see meta.json)
    passage-encoder/<key>/meta.json       inputs, precision, checksum, probe vectors

``<key>`` identifies the model directory's files (``retrieval.encode.query_encoder.model_key``), so
another model or changed files select another export. Writing is atomic (temporary directory,
then rename), as for the query encoder.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from retrieval.encode import query_encoder as qe
from retrieval.encode.side_by_side import in_order
from retrieval.interrupts import reraise_interrupt
from retrieval.store.db import first_line

log = logging.getLogger(__name__)

FORMAT = 1  # bump when the graph's inputs/outputs, the quantization or the probes change
GRAPH = "passages.onnx"
INT8_MIN_COSINE = 0.97  # int8 probe vectors at least this close to torch's, else the fp32 graph ships
LOAD_MIN_COSINE = 0.999  # a loaded graph must reproduce the probe vectors its export recorded
BATCH = 8  # texts per run: smaller batches are a little faster per token on 2 cores (8: 13.2k, 32: 11.7k, 64: 10.4k tokens per CPU-second on 14 CFR 91)

Spans = Sequence[tuple[int, int]]  # character spans [start, end) into one text


class Meta(qe.Meta):
    """``meta.json``: the query encoder's record, with the graph's precision; ``probe_vectors`` are
    this graph's own vectors of the first LOAD_PROBES probes."""

    precision: Literal["int8", "fp32"] = "int8"
    probe_cosine: float = 0.0  # the smallest cosine between this graph's and torch's probe vectors
    int8_note: str = ""  # why the int8 graph was not kept, when it was not


def read_meta(directory: Path) -> Meta | None:
    return qe.read_meta(directory, Meta)


def cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


@dataclass
class Encoded:
    vectors: np.ndarray  # (texts, dim), L2-normalised
    windows: list[np.ndarray]  # per text: (windows, dim), L2-normalised; a row of NaN: no token inside
    missing: list[tuple[int, int]]  # (text, window) whose spans hold no token (truncated, not found)


def one() -> int:
    return 1


class PassageEncoder(qe.OnnxEncoder):
    """A loaded export: ``encode`` gives passage vectors and, for given character spans of each
    passage, the pooled vectors of the tokens inside them. Batches sorted by length and padded to
    the batch's longest, each run on one thread, as many side by side as there are cores (one
    onnxruntime session: its runs may overlap). The batches, and so the vectors, are the same
    whatever the number of cores."""

    NAME = "passage"
    GRAPH = GRAPH
    threads = staticmethod(one)  # per run; ``workers`` runs at once
    workers = staticmethod(cores)

    def vectors(self, texts: Sequence[str]) -> np.ndarray:
        return self.encode(texts).vectors

    def encode(self, texts: Sequence[str], spans: Sequence[Sequence[Spans]] | None = None, *,
               batch_size: int = BATCH, on_batch: Callable[[int], object] | None = None,
               workers: int | None = None) -> Encoded:
        """Vectors of ``texts``; with ``spans`` (per text, per window, the character spans the
        window covers in that text), also each window's vector, pooled from the same pass.
        ``workers``: batches run at once (default one per core); the vectors do not depend on it."""
        dim = self.meta.dim
        vectors = np.zeros((len(texts), dim), dtype=np.float32)
        windows = [np.full((len(spans[i]) if spans else 0, dim), np.nan, dtype=np.float32)
                   for i in range(len(texts))]
        missing: list[tuple[int, int]] = []
        if not texts:
            return Encoded(vectors, windows, missing)
        encs = self._tokenizer.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda i: len(encs[i].ids), reverse=True)
        batches = [order[start:start + batch_size] for start in range(0, len(order), batch_size)]
        with in_order(lambda idx: self._run([encs[i] for i in idx]), batches,
                      workers or self.workers()) as ran:
            for idx, (states, mask) in zip(batches, ran, strict=True):
                self._pool(idx, states, mask, encs, spans, vectors, windows, missing)
                if on_batch:
                    on_batch(len(idx))
        return Encoded(vectors, windows, missing)

    @staticmethod
    def _pool(idx: Sequence[int], states: np.ndarray, mask: np.ndarray, encs: Sequence[Any],
              spans: Sequence[Sequence[Spans]] | None, vectors: np.ndarray, windows: list[np.ndarray],
              missing: list[tuple[int, int]]) -> None:
        """One batch's chunk vectors and window vectors, pooled from its token states (in place)."""
        for row, i in enumerate(idx):
            n = int(mask[row].sum())
            vectors[i] = _unit(states[row, :n].mean(axis=0))
            if spans:
                offsets = np.asarray(encs[i].offsets, dtype=np.int64).reshape(-1, 2)
                special = np.asarray(encs[i].special_tokens_mask, dtype=bool)
                for w, pieces in enumerate(spans[i]):
                    chosen = _tokens_inside(offsets, special, pieces)
                    if chosen.any():
                        windows[i][w] = _unit(states[row, :n][chosen].mean(axis=0))
                    else:
                        missing.append((i, w))

    def _run(self, encs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        arrays = qe.padded(encs, self.meta.inputs)
        mask = arrays["attention_mask"]
        states = self._session.run(None, arrays)[0]
        return np.asarray(states, dtype=np.float32), mask


def _unit(v: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(v))
    return (v / norm if norm > 0 else v).astype(np.float32)


def _tokens_inside(offsets: np.ndarray, special: np.ndarray, pieces: Spans) -> np.ndarray:
    """Which tokens (by their character ``offsets``; ``special`` ones never) lie inside one of the spans."""
    inside = np.zeros(len(offsets), dtype=bool)
    for s, e in pieces:
        inside |= (offsets[:, 0] >= s) & (offsets[:, 1] <= e) & (offsets[:, 1] > offsets[:, 0])
    return inside & ~special


# ---------------------------------------------------------------------------------------------
# finding and loading an export

def checked_export(cache_root: Path, model_path: str) -> tuple[Path, Meta]:
    """The export directory and record for the model's files as they are now (``qe.checked_export``)."""
    return qe.checked_export(cache_root, model_path, PassageEncoder, Meta, FORMAT)


def load(cache_root: Path, model_path: str) -> PassageEncoder:
    """The export for the model's files as they are now, checked on its probe texts (raises
    QueryEncoderError when there is none or it cannot be trusted)."""
    directory, meta = checked_export(cache_root, model_path)
    return qe.trusted(PassageEncoder, directory, model_path, meta, LOAD_MIN_COSINE)


def status(cache_root: Path, model_path: str) -> str:
    """What embeds passages at ingest, for ``db status``."""
    try:
        directory, meta = checked_export(cache_root, model_path)
    except qe.QueryEncoderError as exc:
        return f"torch ({exc})"
    return f"onnx {meta.precision} ({directory})"


# ---------------------------------------------------------------------------------------------
# making an export (needs torch and the loaded SentenceTransformer)

def unsupported_reason(model: Any) -> str | None:
    """Why this SentenceTransformer's vectors cannot be pooled from token states (None: they can):
    only a transformer, mean pooling and an optional normalisation are understood."""
    kinds = [type(m).__name__ for m in model]
    if not kinds or kinds[0] != "Transformer" or any(k not in ("Transformer", "Pooling", "Normalize") for k in kinds) \
            or kinds.count("Pooling") != 1:
        return f"modules {kinds} are not transformer + mean pooling"
    mode = model[kinds.index("Pooling")].pooling_mode
    if mode != "mean":
        return f"pooling mode {mode!r} is not the mean of token states"
    return None


def eager_model(model_path: str) -> Any | None:
    """The model loaded with plain ("eager") attention: its ONNX graph runs about a third faster than
    the scaled-dot-product one, whose exported masking costs a fifth of the time. None when this
    transformers cannot load it so."""
    from sentence_transformers import SentenceTransformer  # noqa: PLC0415

    try:
        return SentenceTransformer(model_path, device="cpu", model_kwargs={"attn_implementation": "eager"})
    except Exception as exc:  # noqa: BLE001  (an older transformers without that option)
        reraise_interrupt(exc)
        log.info("no eager-attention copy of %s (%s)", model_path, first_line(exc))
        return None


def _eager(model_path: str, model: Any) -> Any:
    """``model`` when it already has plain attention (``retrieval.encode.export_child`` loads it so: no
    second copy), else an eager copy of it (``eager_model``), else ``model`` itself."""
    config = getattr(getattr(model[0], "auto_model", None), "config", None)
    if getattr(config, "_attn_implementation", None) == "eager":
        return model
    return eager_model(model_path) or model


def _quantize(fp32: Path, int8: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic  # noqa: PLC0415

    logging.disable(logging.WARNING)  # the quantizer logs advice through the root logger; not for our users
    try:
        # per channel and MatMul only: per-tensor int8 or quantized embedding lookups move vectors
        # to cosine 0.83 of fp32's; this keeps 0.98 at 2.4-3x torch's speed (measured on 14 CFR 91)
        quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8, per_channel=True,
                         op_types_to_quantize=["MatMul"])
    finally:
        logging.disable(logging.NOTSET)


def _finish(tmp: Path, meta: Meta, model_path: str, want: np.ndarray) -> Meta:
    """Record the graph's size, checksum and probe agreement (run through PassageEncoder itself)."""
    data = (tmp / GRAPH).read_bytes()
    meta = meta.model_copy(update={"onnx_bytes": len(data), "onnx_sha256": hashlib.sha256(data).hexdigest()})
    enc = PassageEncoder(tmp, model_path, meta)
    got = enc.encode(qe.PROBES).vectors
    # int8 activations are scaled per batch, so the load check's batch is recorded as such
    loaded = enc.encode(qe.PROBES[:qe.LOAD_PROBES]).vectors
    return meta.model_copy(update={"probe_cosine": qe.agreement(got, want), "probe_vectors": loaded.tolist()})


def _build(model: Any, model_path: str, key: str, tmp: Path) -> Meta:
    base = Meta(format=FORMAT, key=key, model_path=str(model_path))
    reason = unsupported_reason(model)
    if reason is not None:
        return base.model_copy(update={"unsupported": reason})
    try:
        max_length, inputs = qe.check_tokenizer(model, model_path)
    except qe.QueryEncoderError as exc:
        return base.model_copy(update={"unsupported": str(exc)})
    want = qe.torch_vectors(model)
    fp32 = tmp / "fp32.onnx"
    try:
        eager = _eager(model_path, model)
        qe.trace(eager[0], eager, inputs, fp32, key="token_embeddings", output="states",
                 output_axes={0: "batch", 1: "tokens"})
        _quantize(fp32, tmp / GRAPH)
    except Exception as exc:  # noqa: BLE001  (the tracer and quantizer raise many types)
        reraise_interrupt(exc)
        raise qe.QueryEncoderError(f"could not export the passage encoder: {first_line(exc)}") from exc
    meta = base.model_copy(update={"inputs": inputs, "max_length": max_length, "dim": int(want.shape[1])})
    try:
        meta = _finish(tmp, meta, model_path, want)
        if meta.probe_cosine < INT8_MIN_COSINE:
            note = f"int8 probe cosine {meta.probe_cosine:.4f} < {INT8_MIN_COSINE}: the fp32 graph is used"
            os.replace(fp32, tmp / GRAPH)
            meta = _finish(tmp, meta.model_copy(update={"precision": "fp32", "int8_note": note}), model_path, want)
    except Exception as exc:  # noqa: BLE001
        reraise_interrupt(exc)
        raise qe.QueryEncoderError(f"onnxruntime could not run the passage export: {first_line(exc)}") from exc
    fp32.unlink(missing_ok=True)
    if meta.probe_cosine < INT8_MIN_COSINE:
        return base.model_copy(update={"unsupported": f"the exported graph's vectors differ from "
                                                      f"sentence-transformers' (cosine {meta.probe_cosine:.4f})"})
    return meta


def export(model: Any, model_path: str, cache_root: Path) -> Meta:
    """Export a loaded SentenceTransformer's passage encoder under ``cache_root`` (atomically, as
    ``qe.export``). Returns the meta written (usable, or ``unsupported`` with the reason); raises
    QueryEncoderError when torch or onnxruntime failed (nothing written) and OSError when the
    directory is not writable."""
    return qe.export(model, model_path, cache_root, _build, FORMAT)
