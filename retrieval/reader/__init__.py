"""The reader: a cross-encoder trained here that scores (question, sentence under its heading) →
probability that the sentence states the answer.

It runs with onnxruntime (int8, dynamically quantized) and the Rust ``tokenizers``; no torch, no
download. The shipped model lives in ``retrieval/reader/model/`` (``reader.onnx``, ``tokenizer.json``,
``card.json``, ``MODEL_CARD.md``); ``CHAPTERVERSE_READER_MODEL`` may point at another directory of the
same layout (for instance one made by ``chapterverse eval train-reader``).

Inputs are encoded as a BERT pair, ``[CLS] question [SEP] heading: sentence [SEP]``, truncated to the
card's ``max_length``; a batch is sorted by length and padded to its longest, so 40 short sentences
cost what 40 short sentences cost.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from retrieval.encode.query_encoder import padded

log = logging.getLogger(__name__)

SHIPPED = Path(__file__).resolve().parent / "model"
BATCH = 16


class ReaderError(RuntimeError):
    """The reader model could not be loaded: one clear line for the user."""


class Card(BaseModel):
    """``card.json``: what the weights are and how they were made (written by the trainer)."""

    name: str
    base: str
    max_length: int
    onnx_file: str = "reader.onnx"
    onnx_sha256: str
    quantized: str = "int8 dynamic (onnxruntime.quantization.quantize_dynamic, QInt8 weights)"
    licence: str = ""
    training: dict = {}
    figures: dict = {}


class Reader:
    """A loaded reader; thread-safe (onnxruntime sessions may be run concurrently)."""

    def __init__(self, directory: Path, threads: int | None = None) -> None:
        import onnxruntime as ort  # noqa: PLC0415 - loaded only when a reader is used
        from tokenizers import Tokenizer  # noqa: PLC0415

        started = time.perf_counter()
        self.directory = directory
        try:
            self.card = Card.model_validate_json((directory / "card.json").read_text())
        except (OSError, ValueError) as exc:
            raise ReaderError(f"no usable reader card in {directory}: {exc}") from exc
        onnx = directory / self.card.onnx_file
        if not onnx.is_file():
            raise ReaderError(f"reader weights missing: {onnx}")
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or max(1, os.cpu_count() or 1)
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self._session = ort.InferenceSession(str(onnx), options, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        tok = Tokenizer.from_file(str(directory / "tokenizer.json"))
        tok.enable_truncation(self.card.max_length)
        tok.no_padding()
        self._tok = tok
        self.load_seconds = time.perf_counter() - started
        log.info("reader %s loaded from %s in %.2f s", self.card.name, directory, self.load_seconds)

    @property
    def name(self) -> str:
        return self.card.name

    def logits(self, question: str, texts: Sequence[str]) -> np.ndarray:
        """Raw scores, one per text (higher: more likely to state the answer)."""
        if not texts:
            return np.zeros(0, dtype=np.float32)
        enc = self._tok.encode_batch([(question, t) for t in texts])
        order = sorted(range(len(enc)), key=lambda i: len(enc[i].ids))
        out = np.zeros(len(enc), dtype=np.float32)
        for b in range(0, len(order), BATCH):
            idx = order[b:b + BATCH]
            res = self._session.run(None, padded([enc[i] for i in idx], self._inputs))[0]
            out[idx] = res.reshape(len(idx), -1)[:, 0]
        return out

    def score(self, question: str, texts: Sequence[str]) -> np.ndarray:
        """Probabilities in [0, 1], one per text."""
        return 1.0 / (1.0 + np.exp(-self.logits(question, texts)))


_lock = threading.Lock()


def reader_dir(configured: Path | None = None) -> Path:
    """The reader's directory: ``configured`` (the ``answer.reader_model`` setting) or the shipped one."""
    return configured.expanduser() if configured else SHIPPED


@lru_cache(maxsize=4)
def _cached(directory: str) -> Reader:
    return Reader(Path(directory))


def load_reader(directory: Path | None = None) -> Reader:
    """The reader of ``directory`` (default: the shipped one), loaded once per process."""
    with _lock:
        return _cached(str(directory or reader_dir()))

