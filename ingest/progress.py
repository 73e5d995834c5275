"""Progress of an ingest when nobody watches a terminal: one line on stderr every few seconds.

On a terminal the tqdm bars show progress; off a terminal (a pipe, a log file, CI, a container)
they are off, and a 16-minute document used to print nothing until it finished. ``ProgressLog``
runs a small thread that writes, every ``CHAPTERVERSE_PROGRESS_INTERVAL_S`` seconds (30 by default),
where the current input is:

    ingest: manual.pdf: pages 120/447 read, 200 passages embedded · 35 s
    ingest: manual.pdf: pages 447/447 read; embedding passages 300/1,100 (27%, about 6 min left for this step) · 2m10s
    ingest: manual.pdf: pages 447/447 read; embedding sentences 2,000/7,000 (29%, …) · 5m02s
    ingest: manual.pdf: pages 447/447 read; writing 1,100 passages to the database · 8m40s

The line is written whatever the stage, so a stage that reports nothing for a while (loading the
model, a slow download, the database write) still shows the process is alive. Nothing is written for
an input that finishes within one interval.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

from retrieval.text.urls import shown_url


def shown_name(origin: str) -> str:
    """A URL without its query string, fragment or credentials; a path as it is."""
    return shown_url(origin) if origin[:8].lower().startswith(("http://", "https://")) else origin


def _elapsed(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    m, s = divmod(int(seconds), 60)
    return f"{m}m{s:02d}s"


def _left(seconds: float) -> str:
    return f"about {max(1, round(seconds / 60))} min" if seconds >= 60 else f"about {max(1, round(seconds))} s"


def ocr_words(pages: int, confidence: float | None) -> str:
    """The OCR part of an ingest's summary line, ' (12 read by OCR, confidence 0.97)'; empty when no page was."""
    if not pages:
        return ""
    return f" ({pages:,} read by OCR" + (f", confidence {confidence:.2f})" if confidence is not None else ")")


class StageClock:
    """Wall and CPU seconds of an ingest's steps, for its result (``IngestResult.stages``): ``lap(step)``
    ends a step begun where the last one ended. CPU seconds are this process's, all its threads
    (the parser's child process is not counted)."""

    def __init__(self) -> None:
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        self.stages: dict[str, dict[str, float]] = {}

    def lap(self, step: str) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        got = self.stages.setdefault(step, {"seconds": 0.0, "cpu_seconds": 0.0})
        got["seconds"] = round(got["seconds"] + wall - self._wall, 3)
        got["cpu_seconds"] = round(got["cpu_seconds"] + cpu - self._cpu, 3)
        self._wall, self._cpu = wall, cpu


class ProgressLog:
    """Where one input's ingest is; a background thread writes it to ``stream`` every ``interval_s``."""

    def __init__(self, name: str, interval_s: float, stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.name = shown_name(name)
        self.interval_s = interval_s
        self.stream = stream or sys.stderr
        self.clock = clock
        self.started = clock()
        self.pages_total: int | None = None
        self._pages_done = 0
        self.ocr_pages = 0  # of those read, pages read by OCR (the pipeline counts them)
        self.ahead = 0  # passages embedded while the pages are still being read (``ingest.ahead``)
        self.step = "opening"  # what is going on besides reading pages
        self.done = 0
        self.total: int | None = None
        self.step_started = self.started
        self.done_at_start = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ingest-progress", daemon=True)

    # -------------------------------------------------------------- what the pipeline reports
    @property
    def pages_done(self) -> int:
        """Pages read so far (the pipeline counts them here)."""
        return self._pages_done

    @pages_done.setter
    def pages_done(self, n: int) -> None:
        self._pages_done = n
        self.pages_changed()

    def pages_changed(self) -> None:
        """Called on each change of ``pages_done``: a subclass that reports as the pipeline goes hooks in here."""

    def document(self, name: str) -> None:
        self.name = shown_name(name)

    def begin(self, step: str, total: int | None = None, done: int = 0) -> None:
        """A new step of ``total`` units, ``done`` of them done already (passages embedded while the
        pages were read: the count goes on from there, never back to 0)."""
        self.done, self.step_started = done, self.clock()
        self.done_at_start = done
        self.total = total
        self.step = step

    def advance(self, n: int) -> None:
        self.done += n

    # -------------------------------------------------------------- the line
    def line(self) -> str:
        now = self.clock()
        parts: list[str] = []
        if self.pages_total is not None:
            ahead = f", {self.ahead:,} passages embedded" if self.ahead and self.step == "reading pages" else ""
            ocr = f" ({self.ocr_pages:,} by OCR" if self.ocr_pages else ""
            if ocr and 0 < self.pages_done < self.pages_total:  # OCR sets the pace: the time left is worth telling
                ocr += f", {_left((self.pages_total - self.pages_done) * (now - self.started) / self.pages_done)} left"
            parts.append(f"pages {self.pages_done:,}/{self.pages_total:,} read{ocr + ')' if ocr else ''}{ahead}")
        if self.step != "reading pages" or self.pages_total is None:
            step = self.step
            if self.total:
                pct = 100 * self.done / self.total
                step += f" {self.done:,}/{self.total:,} ({pct:.0f}%"
                if self.done_at_start < self.done < self.total:
                    rate = (self.done - self.done_at_start) / max(now - self.step_started, 1e-6)
                    step += f", {_left((self.total - self.done) / rate)} left for this step"
                step += ")"
            parts.append(step)
        return f"ingest: {self.name}: {'; '.join(parts)} · {_elapsed(now - self.started)}"

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.stream.write(self.line() + "\n")
                self.stream.flush()
            except (OSError, ValueError):  # stderr closed: nothing to tell anyone
                return

    def __enter__(self) -> ProgressLog:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
