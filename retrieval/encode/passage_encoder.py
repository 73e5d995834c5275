"""Passage vectors for ingest in one int8 forward pass per chunk, without torch.

Each chunk used to go through the model twice in PyTorch fp32: once whole (the chunk's vector) and
once per sentence window (the sentence reranker's stored vectors). Here the embedding model's
transformer is exported once to ONNX with its *token* states as output, its MatMul weights
quantized to int8 (onnxruntime dynamic quantization, per output channel), and run with
onnxruntime on all cores:

* each passage runs alone, so the graph has no attention mask (nothing to pad) and int8 activations
  are scaled per passage: a passage's vector depends on its text alone, never on which passages
  shared a run with it (FORMAT 2; FORMAT 1 ran batches of eight, padded and masked);
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

    passage-encoder/<key>/passages.onnx   one passage's token states out; int8 (or fp32, see meta.json)
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

FORMAT = 2  # bump when the graph's inputs/outputs, the quantization or the probes change (2: no attention mask, one passage a run)
GRAPH = "passages.onnx"
INT8_MIN_COSINE = 0.97  # int8 probe vectors at least this close to torch's, else the fp32 graph ships
LOAD_MIN_COSINE = 0.999  # a loaded graph must reproduce the probe vectors its export recorded
# One passage a run: it is the fastest as well as batch-independent. Word pieces per CPU-second, one thread, 96 FAA
# passages of 150-250 pieces (Xeon with AMX): batches of 8, padded and masked, 8.4k; of 4, 10.4k; of 2, 11.2k; one
# passage with the mask, 11.1k; without it, 12.2k (the mask's broadcast add over every head's scores is ~12 % of a
# padded batch). On an older CPU without AMX: 8: 13.2k, 32: 11.7k, 64: 10.4k.

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
    passage, the pooled vectors of the tokens inside them. One passage a run (longest first), each
    run on one thread, as many side by side as there are cores (one onnxruntime session: its runs
    may overlap). A passage's vector depends on its text alone: not on the number of cores, nor on
    the other passages encoded with it."""

    NAME = "passage"
    GRAPH = GRAPH
    threads = staticmethod(one)  # per run; ``workers`` runs at once
    workers = staticmethod(cores)

    def vectors(self, texts: Sequence[str]) -> np.ndarray:
        return self.encode(texts).vectors

    def encode(self, texts: Sequence[str], spans: Sequence[Sequence[Spans]] | None = None, *,
               on_batch: Callable[[int], object] | None = None, workers: int | None = None) -> Encoded:
        """Vectors of ``texts``; with ``spans`` (per text, per window, the character spans the
        window covers in that text), also each window's vector, pooled from the same pass.
        ``workers``: runs at once (default one per core); ``on_batch(1)`` after each text."""
        dim = self.meta.dim
        vectors = np.zeros((len(texts), dim), dtype=np.float32)
        windows = [np.full((len(spans[i]) if spans else 0, dim), np.nan, dtype=np.float32)
                   for i in range(len(texts))]
        missing: list[tuple[int, int]] = []
        if not texts:
            return Encoded(vectors, windows, missing)
        encs = self._tokenizer.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda i: len(encs[i].ids), reverse=True)
        with in_order(lambda i: self._run(encs[i]), order, workers or self.workers()) as ran:
            for i, states in zip(order, ran, strict=True):
                self._pool(i, states, encs[i], spans[i] if spans else (), vectors, windows[i], missing)
                if on_batch:
                    on_batch(1)
        return Encoded(vectors, windows, missing)

    @staticmethod
    def _pool(i: int, states: np.ndarray, enc: Any, spans: Sequence[Spans], vectors: np.ndarray,
              windows: np.ndarray, missing: list[tuple[int, int]]) -> None:
        """Text ``i``'s vector and its windows' vectors, pooled from its token states (in place)."""
        vectors[i] = _unit(states.mean(axis=0))
        if not spans:
            return
        offsets = np.asarray(enc.offsets, dtype=np.int64).reshape(-1, 2)
        special = np.asarray(enc.special_tokens_mask, dtype=bool)
        for w, pieces in enumerate(spans):
            chosen = _tokens_inside(offsets, special, pieces)
            if chosen.any():
                windows[w] = _unit(states[chosen].mean(axis=0))
            else:
                missing.append((i, w))

    def _run(self, enc: Any) -> np.ndarray:
        """One passage's token states (tokens, dim): the graph's inputs for it alone, unpadded."""
        states = self._session.run(None, qe.padded([enc], self.meta.inputs))[0][0]
        return np.asarray(states, dtype=np.float32)


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
    loaded = got[:qe.LOAD_PROBES]  # each probe runs alone: the load check's vectors are these
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
    # one passage a run has no padding to mask: traced without the mask, the graph skips adding it to
    # every head's attention scores (the model's own all-ones default, so the same states)
    inputs = [name for name in inputs if name != "attention_mask"]
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
