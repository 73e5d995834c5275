"""What the reader costs (``chapterverse eval reader-latency``): load time in a fresh process, and per
question the reader's own time over the sentences the extractive answerer actually gives it, next to
the whole ``ask``; medians and 95th percentiles, with the machine's load average."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retrieval import reader as reader_mod
from retrieval.settings import Settings


def _pct(xs: Sequence[float], q: float) -> float | None:
    return round(float(np.percentile(xs, q)), 1) if xs else None


def load_seconds_fresh_process(directory: Path) -> float:
    """Seconds to load the reader in a new Python process (imports included: what a bot start pays)."""
    code = ("import time; t=time.perf_counter(); from retrieval.reader import Reader; from pathlib import Path; "
            f"Reader(Path({str(directory)!r})); print(time.perf_counter()-t)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    return float(out.stdout.strip().splitlines()[-1])


def run(settings: Settings, questions: Sequence[dict[str, Any]], collections: Sequence[str] | None,
        command: str, rounds: int = 1) -> dict[str, Any]:
    from retrieval.answer.ask import ask  # noqa: PLC0415

    directory = reader_mod.reader_dir(settings.answer.reader_model)
    r = reader_mod.load_reader(directory)
    calls: list[tuple[int, float]] = []
    original = r.score

    def timed(question: str, texts: Sequence[str]) -> np.ndarray:
        t = time.perf_counter()
        out = original(question, texts)
        calls.append((len(texts), (time.perf_counter() - t) * 1e3))
        return out

    r.score = timed  # type: ignore[method-assign]
    asks: list[float] = []
    try:
        ask(settings, questions[0]["question"], collections=collections, answerer="extractive")  # warm
        calls.clear()
        for _ in range(rounds):
            for q in questions:
                t = time.perf_counter()
                ask(settings, q["question"], collections=collections, answerer="extractive")
                asks.append((time.perf_counter() - t) * 1e3)
    finally:
        r.score = original  # type: ignore[method-assign]
    ms = [c[1] for c in calls]
    sizes = [c[0] for c in calls]
    full = [c[1] for c in calls if c[0] >= 40]
    return {
        "command": command, "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "config": {"reader": r.card.name, "onnx_sha256": r.card.onnx_sha256, "max_length": r.card.max_length,
                   "threads": os.cpu_count(), "collections": list(collections) if collections else None,
                   "rounds": rounds},
        "load_average": os.getloadavg(),
        "load_seconds_fresh_process": round(load_seconds_fresh_process(directory), 3),
        "reader_calls": len(calls), "sentences_per_call_median": _pct(sizes, 50),
        "reader_ms": {"p50": _pct(ms, 50), "p95": _pct(ms, 95)},
        "reader_ms_at_40_sentences": {"calls": len(full), "p50": _pct(full, 50), "p95": _pct(full, 95)},
        "ask_ms": {"p50": _pct(asks, 50), "p95": _pct(asks, 95)},
    }


