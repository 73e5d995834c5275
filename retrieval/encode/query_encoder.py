"""Query vectors without torch: the embedding model exported once to ONNX and run with onnxruntime.

Importing torch and building the SentenceTransformer costs a one-off ``ask``/``search`` about 5 s;
onnxruntime and the Rust ``tokenizers`` load the same network in about half a second. The vectors
are the SentenceTransformer's own (cosine >= 0.9999, checked at export and again at every load),
because the exported graph *is* the loaded SentenceTransformer (transformer, pooling, any dense
layer) traced by ``torch.onnx``, followed by the L2 normalisation ``embed_query`` always applied.

Layout under the state directory (``CHAPTERVERSE_HOME``)::

    query-encoder/<key>/model.onnx   the traced SentenceTransformer + L2 normalisation
    query-encoder/<key>/meta.json    what the graph expects, and probe vectors from torch

``<key>`` hashes the model directory's files (relative path, size, modification time) and this
module's FORMAT, so replacing the model's files, or pointing CHAPTERVERSE_EMBEDDING_MODEL at another
model, selects another (or no) export. An export is written into a temporary directory and renamed
into place, so a reader never sees half of one. A model the ONNX path cannot reproduce exactly
(no ``tokenizer.json``, a tokenisation or a vector that differs from sentence-transformers' on the
probe texts) gets a ``meta.json`` that says so and why, and keeps using torch.

Nothing here decides *when* to export or what to do when a load fails; ``retrieval.encode.embed`` does
(torch path, then export, never a crash and never a wrong vector).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from pydantic import BaseModel, ValidationError

from retrieval.interrupts import reraise_interrupt
from retrieval.store.db import first_line

log = logging.getLogger(__name__)

FORMAT = 1  # bump when the layout, the graph's inputs/outputs or the probes change
MIN_COSINE = 0.9999  # an export (or a loaded file) whose probe vectors differ more is not used
SUPPORTED_INPUTS = ("input_ids", "attention_mask", "token_type_ids")

# Probe texts: a question, an identifier, Unicode, surrounding whitespace and case, and a text far
# longer than any model's window (truncation must match). Exports are checked against all of them;
# loads against the first LOAD_PROBES (one padded batch: it checks padding too, for ~20 ms).
PROBES = (
    "What is the maximum indicated airspeed below 10,000 feet MSL?",
    "How does x %in% y differ from match(x, y)?",
    "Ünïcödé — “curly quotes”, the ﬁ ligature, 飛行機 and 🚀",
    "  UPPER and lower CASE,   with surrounding spaces  ",
    "The pilot in command of an aircraft is directly responsible for, and is the final authority as to, "
    "the operation of that aircraft (14 CFR 91.3(a)); see also §91.103, preflight action. " * 12,
)
LOAD_PROBES = 2


class QueryEncoderError(RuntimeError):
    """An export could not be made, found or trusted; the caller uses torch instead."""


class Meta(BaseModel):
    """``meta.json``: either a usable export, or the reason this model has none."""

    format: int
    key: str
    model_path: str
    unsupported: str | None = None  # set: do not try to export this model again (the reason)
    inputs: list[str] = []
    max_length: int = 0
    dim: int = 0
    onnx_bytes: int = 0
    onnx_sha256: str = ""
    probe_vectors: list[list[float]] = []  # torch's vectors of the probes (the load checks the first LOAD_PROBES)


M = TypeVar("M", bound=Meta)
E = TypeVar("E", bound="OnnxEncoder")


# ---------------------------------------------------------------------------------------------
# identity and location

def model_key(model_path: str | Path, fmt: int = FORMAT) -> str | None:
    """A key for the model directory's files as they are now (and the export format ``fmt``);
    None when it is not a local directory (a hub name), which has no export."""
    root = Path(model_path)
    if not root.is_dir():
        return None
    files = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        st = path.stat()
        files.append((path.relative_to(root).as_posix(), st.st_size, st.st_mtime_ns))
    blob = json.dumps({"format": fmt, "root": str(root.resolve()), "files": files}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def export_dir(cache_root: Path, key: str) -> Path:
    return cache_root / key


def onnx_bytes(directory: Path, graph: str = "model.onnx") -> int:
    """The size of the export's graph file (-1: missing)."""
    try:
        return (directory / graph).stat().st_size
    except OSError:
        return -1


def read_meta(directory: Path, kind: type[M] = Meta) -> M | None:
    """The export's ``meta.json`` as ``kind`` (this module's Meta or the passage encoder's), or None."""
    try:
        return kind.model_validate_json((directory / "meta.json").read_text())
    except (OSError, ValidationError, ValueError):
        return None


def tokenizer(model_path: str, max_length: int) -> Any:
    """The model's Rust tokenizer (``tokenizer.json``) set up as sentence-transformers tokenizes:
    truncated to the model's window (tokenizer.json's own settings are not ST's), unpadded."""
    from tokenizers import Tokenizer  # noqa: PLC0415

    tok = Tokenizer.from_file(str(Path(model_path) / "tokenizer.json"))
    tok.enable_truncation(max_length)
    tok.no_padding()
    return tok


# ---------------------------------------------------------------------------------------------
# running an export

BATCH = 4  # texts per run; 17 answer-time texts: 12.8 → 6.0 CPU-s over 30 questions with 4 (2: 5.3, 8: 8.2)


class OnnxEncoder:
    """An export's graph (``GRAPH`` in its directory, checked against its checksum) in an onnxruntime
    session, and the model's tokenizer. Safe to call from several threads at once (onnxruntime
    sessions are; the tokenizer is configured once, before use)."""

    GRAPH = "model.onnx"

    def __init__(self, directory: Path, model_path: str, meta: Meta) -> None:
        import onnxruntime as ort  # noqa: PLC0415  (~0.1 s; only when something is embedded)

        self.meta = meta
        graph = directory / self.GRAPH
        if hashlib.sha256(graph.read_bytes()).hexdigest() != meta.onnx_sha256:
            # the probes cannot see every weight (e.g. the embedding rows of words they do not use)
            raise QueryEncoderError(f"{graph} is not the file its export wrote (checksum)")
        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        opts.intra_op_num_threads = self.threads()
        # Idle threads spinning would compete with the search and answer threads, and burn the CPU
        # seconds ingest is measured in.
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        # from the path (~0.1 s faster than from the bytes just hashed, which are then in the page cache)
        self._session = ort.InferenceSession(str(graph), opts, providers=["CPUExecutionProvider"])
        self._tokenizer = tokenizer(model_path, meta.max_length)

    @staticmethod
    def threads() -> int:
        return 0  # onnxruntime's default

    def vectors(self, texts: Sequence[str]) -> np.ndarray:
        """The L2-normalised vectors of ``texts`` (what the probes check)."""
        raise NotImplementedError


class QueryEncoder(OnnxEncoder):
    """An exported model: ``encode(texts)`` gives L2-normalised float32 vectors, like
    ``SentenceTransformer.encode(texts, normalize_embeddings=True)``."""

    NAME = "query"

    def vectors(self, texts: Sequence[str]) -> np.ndarray:
        return self.encode(texts)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Runs of ``BATCH`` texts of similar length (a question with its candidate sentences wastes
        little on padding: half the CPU of one run padded to the longest, same vectors to 1e-7)."""
        out = np.zeros((len(texts), self.meta.dim), dtype=np.float32)
        encs = self._tokenizer.encode_batch(list(texts))
        order = sorted(range(len(encs)), key=lambda i: len(encs[i].ids))
        for start in range(0, len(order), BATCH):
            idx = order[start:start + BATCH]
            out[idx] = self._session.run(None, padded([encs[i] for i in idx], self.meta.inputs))[0]
        return out


def padded(encs: Sequence[Any], inputs: Sequence[str]) -> dict[str, np.ndarray]:
    """The graph's ``inputs`` for a batch of ``tokenizers`` encodings, zero-padded to the longest."""
    width = max(len(e.ids) for e in encs)
    arrays = {name: np.zeros((len(encs), width), dtype=np.int64) for name in inputs}
    for i, e in enumerate(encs):
        n = len(e.ids)
        for name, values in (("input_ids", e.ids), ("attention_mask", e.attention_mask),
                             ("token_type_ids", e.type_ids)):
            if name in arrays:
                arrays[name][i, :n] = values
    return arrays


def agreement(a: np.ndarray, b: np.ndarray) -> float:
    """The smallest cosine between corresponding rows (both L2-normalised)."""
    if a.shape != b.shape:
        return -1.0
    return float(np.min(np.sum(a * b, axis=1)))


def checked_export(cache_root: Path, model_path: str, encoder: type[OnnxEncoder] = QueryEncoder,
                   kind: type[M] = Meta, fmt: int = FORMAT) -> tuple[Path, M]:
    """The export directory and its record (``kind``, format ``fmt``) for the model's files as they
    are now, when its files look intact (raises QueryEncoderError: none, another model's,
    unsupported, truncated). Reads files only; ``load`` then runs it on its probe texts. The
    defaults are the query encoder's; ``retrieval.encode.passage_encoder`` passes its own."""
    key = model_key(model_path, fmt)
    if key is None:
        raise QueryEncoderError(f"{model_path} is not a local model directory")
    directory = export_dir(cache_root, key)
    meta = read_meta(directory, kind)
    if meta is None:
        raise QueryEncoderError(f"no export at {directory}")
    if meta.format != fmt or meta.key != key:
        raise QueryEncoderError(f"{directory} holds an export for other model files")
    if meta.unsupported:
        raise QueryEncoderError(f"no ONNX {encoder.NAME} encoder for this model: {meta.unsupported}")
    size = onnx_bytes(directory, encoder.GRAPH)
    if size != meta.onnx_bytes:
        raise QueryEncoderError(f"{directory / encoder.GRAPH} has {size} bytes (-1: missing), its export wrote "
                                f"{meta.onnx_bytes}")
    if not meta.onnx_sha256:
        raise QueryEncoderError(f"{directory} has no checksum")
    return directory, meta


def status(cache_root: Path, model_path: str) -> str:
    """What embeds queries, for ``db status``: "onnx (<directory>)", or "torch (<why not ONNX>)"."""
    try:
        directory, _ = checked_export(cache_root, model_path)
    except QueryEncoderError as exc:
        return f"torch ({exc})"
    return f"onnx ({directory})"


def load(cache_root: Path, model_path: str) -> QueryEncoder:
    """The export for the model's files as they are now (raises QueryEncoderError: none, another
    model's, corrupt, or not reproducing its probe vectors)."""
    directory, meta = checked_export(cache_root, model_path)
    return trusted(QueryEncoder, directory, model_path, meta, MIN_COSINE)


def trusted(encoder: type[E], directory: Path, model_path: str, meta: Meta, min_cosine: float) -> E:
    """The ``encoder`` of the export in ``directory``, when it reproduces the vectors its export
    recorded for the first LOAD_PROBES probes to ``min_cosine`` (raises QueryEncoderError)."""
    try:
        enc = encoder(directory, model_path, meta)
        got = enc.vectors(PROBES[:LOAD_PROBES])
    except QueryEncoderError:
        raise
    except Exception as exc:  # noqa: BLE001  (onnxruntime/tokenizers raise their own types)
        reraise_interrupt(exc)  # a Ctrl-C during onnxruntime's import comes as an ImportError
        raise QueryEncoderError(f"{directory} could not be loaded: {first_line(exc)}") from exc
    want = np.asarray(meta.probe_vectors[:LOAD_PROBES], dtype=np.float32)
    if agreement(got, want) < min_cosine:
        raise QueryEncoderError(f"{directory} does not reproduce its probe vectors")
    return enc


# ---------------------------------------------------------------------------------------------
# making an export (needs torch; called from a process that has loaded the SentenceTransformer)

def features(model: Any, texts: Sequence[str]) -> dict[str, Any]:
    return {k: v for k, v in model.preprocess(list(texts)).items() if hasattr(v, "shape")}


def check_tokenizer(model: Any, model_path: str) -> tuple[int, list[str]]:
    """The model's window and the graph's input names, if the Rust tokenizer gives exactly
    sentence-transformers' input on every probe (raises QueryEncoderError with the reason otherwise)."""
    max_length = int(getattr(model, "max_seq_length", 0) or 0)
    if max_length <= 0:
        raise QueryEncoderError("the model declares no maximum sequence length")
    if not (Path(model_path) / "tokenizer.json").is_file():
        raise QueryEncoderError("the model directory has no tokenizer.json")
    tok = tokenizer(model_path, max_length)
    for text in PROBES:
        feats = features(model, [text])
        names = list(feats)
        if "input_ids" not in names or "attention_mask" not in names or not set(names) <= set(SUPPORTED_INPUTS):
            raise QueryEncoderError(f"the model takes inputs {names}")
        enc = tok.encode(text)
        ours = {"input_ids": enc.ids, "attention_mask": enc.attention_mask, "token_type_ids": enc.type_ids}
        for name in names:
            if feats[name][0].tolist() != ours[name]:
                raise QueryEncoderError(f"tokenizer.json does not reproduce sentence-transformers' {name} "
                                        f"for {text[:40]!r}")
    return max_length, [n for n in SUPPORTED_INPUTS if n in names]


def torch_vectors(model: Any) -> np.ndarray:
    """sentence-transformers' own vectors of the probes, which an export must reproduce."""
    return np.asarray(model.encode(list(PROBES), normalize_embeddings=True, convert_to_numpy=True,
                                   show_progress_bar=False), dtype=np.float32)


def trace(module: Any, model: Any, inputs: list[str], target: Path, *, key: str, output: str,
          output_axes: dict[int, str], normalise: bool = False) -> None:
    """Export ``module`` (called with the tokenizer's features as a dict; ``key`` of its result,
    L2-normalised if ``normalise``) to ONNX at ``target`` with torch.onnx, traced on a padded batch
    of two probes so the graph handles the general case."""
    import torch  # noqa: PLC0415

    class Graph(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
            out = self.inner(dict(zip(inputs, tensors, strict=True)))[key]
            return torch.nn.functional.normalize(out, p=2, dim=1) if normalise else out

    feats = features(model, PROBES[:2])
    args = tuple(feats[n] for n in inputs)
    axes = {n: {0: "batch", 1: "tokens"} for n in inputs} | {output: output_axes}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Graph(module).eval(), args, str(target), dynamo=False, input_names=inputs,
                          output_names=[output], dynamic_axes=axes, opset_version=17)


def publish(tmp: Path, final: Path) -> None:
    """Rename the finished temporary directory into place; an existing export (another process's,
    or a corrupt one we are replacing) is moved aside first, so the swap is atomic per reader."""
    with suppress(OSError):
        os.rename(tmp, final)
        return
    stale = final.with_name(f".stale-{final.name}-{os.getpid()}-{threading.get_ident()}")
    with suppress(OSError):  # already gone (another process replaced it): try ours
        os.rename(final, stale)
    try:
        os.rename(tmp, final)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)  # another process published meanwhile: keep theirs
    shutil.rmtree(stale, ignore_errors=True)


def export(model: Any, model_path: str, cache_root: Path, build: Callable[..., M] | None = None,
           fmt: int = FORMAT) -> Meta | M:
    """Export a loaded SentenceTransformer for ``model_path`` under ``cache_root`` (atomically):
    ``build(model, model_path, key, directory)`` writes the graph and returns its meta (the default:
    the query encoder's; ``retrieval.encode.passage_encoder`` passes its own, and its ``fmt``).

    Returns the written meta: a usable export, or one marked ``unsupported`` with the reason when
    the ONNX path would not give the same vectors. Raises QueryEncoderError when the model is not a
    local directory or the tracer or onnxruntime failed (nothing is written: that may be the
    environment's fault, so a later process tries again), OSError when the directory is not
    writable."""
    key = model_key(model_path, fmt)
    if key is None:
        raise QueryEncoderError(f"{model_path} is not a local model directory")
    cache_root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key}-", dir=cache_root))
    try:
        meta = (build or _build)(model, model_path, key, tmp)
        if meta.unsupported:
            for f in tmp.iterdir():
                f.unlink()
        (tmp / "meta.json").write_text(meta.model_dump_json(indent=1))
        publish(tmp, export_dir(cache_root, key))
        prune(cache_root, key, str(model_path))
        return meta
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def prune(cache_root: Path, key: str, model_path: str) -> None:
    """Remove this model's exports for files it no longer has, and temporary directories a killed
    export left behind (older than an hour, so a running export elsewhere keeps its own)."""
    cutoff = time.time() - 3600
    for entry in cache_root.iterdir():
        if entry.name == key or not entry.is_dir():
            continue
        if entry.name.startswith("."):
            if entry.stat().st_mtime < cutoff:
                shutil.rmtree(entry, ignore_errors=True)
            continue
        meta = read_meta(entry)
        if meta is not None and meta.model_path == model_path:
            shutil.rmtree(entry, ignore_errors=True)


def _build(model: Any, model_path: str, key: str, tmp: Path) -> Meta:
    base = {"format": FORMAT, "key": key, "model_path": str(model_path)}
    try:
        max_length, inputs = check_tokenizer(model, model_path)
    except QueryEncoderError as exc:
        return Meta(**base, unsupported=str(exc))
    want = torch_vectors(model)
    # An exception here may be the environment's (the onnx package missing, an old onnxruntime):
    # nothing is written, so a later process tries again; a mismatch below is the model's own.
    try:
        trace(model, model, inputs, tmp / "model.onnx", key="sentence_embedding", output="embedding",
              output_axes={0: "batch"}, normalise=True)
    except Exception as exc:  # noqa: BLE001  (the tracer raises many types)
        reraise_interrupt(exc)
        raise QueryEncoderError(f"torch.onnx could not export it: {first_line(exc)}") from exc
    meta = Meta(**base, inputs=inputs, max_length=max_length, dim=int(want.shape[1]),
                onnx_bytes=(tmp / "model.onnx").stat().st_size,
                onnx_sha256=hashlib.sha256((tmp / "model.onnx").read_bytes()).hexdigest(), probe_vectors=want.tolist())
    try:
        enc = QueryEncoder(tmp, model_path, meta)
        singles = np.vstack([enc.encode([p]) for p in PROBES])
        batch = enc.encode(PROBES)
    except Exception as exc:  # noqa: BLE001
        reraise_interrupt(exc)
        raise QueryEncoderError(f"onnxruntime could not run the export: {first_line(exc)}") from exc
    worst = min(agreement(singles, want), agreement(batch, want))
    if worst < MIN_COSINE:
        return Meta(**base, unsupported=f"the export's vectors differ from sentence-transformers' (cosine {worst:.6f})")
    return meta
