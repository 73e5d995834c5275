"""A long ingest's progress in Slack: one message updated in place (chat.update), at most every
``CHAPTERVERSE_SLACK_PROGRESS_INTERVAL_S`` seconds, with the pipeline's own progress line (pages read /
total, the step, the time left: ``ingest.progress.ProgressLog``, which ``SlackProgress`` is, so the
pipeline needs nothing new). An update is due when the pipeline reports (a page read, a batch
embedded) or, in steps that report nothing, when the base class's timer fires; one sender thread
keeps only the latest text, so a slow or failing Slack never holds the ingest up. Where the message
lives: ``bot.jobs.Jobs._live`` (a direct message is posted only once an update is due).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from bot.queue import Job, JobLost
from bot.render import ingest_progress_text
from ingest.progress import ProgressLog

log = logging.getLogger(__name__)

Show = Callable[[str], None]


class SlackProgress(ProgressLog):
    def __init__(self, job: Job, name: str, interval_s: float, show: Show,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(name, interval_s, clock=clock)
        self.job = job
        self._show = show
        self._last = self.started
        self._pending: str | None = None
        self._wake = threading.Condition()
        self._closing = False
        self.updates = 0  # texts handed to Slack
        self._sender = threading.Thread(target=self._send_loop, name=f"progress-{job.id}", daemon=True)

    # -------------------------------------------------------------- what the pipeline reports
    def pages_changed(self) -> None:
        """A page read."""
        self._check()

    def advance(self, n: int) -> None:
        super().advance(n)
        self._check()

    def _check(self) -> None:
        """On the pipeline's thread: stop a job that is no longer ours; queue an update when due."""
        if self.job.lost.is_set():
            raise JobLost(self.job.id)
        self.due()

    # -------------------------------------------------------------- updates
    def _run(self) -> None:
        """The base class's timer, for steps that report nothing (the database write): an update when due."""
        while not self._stop.wait(self.interval_s):
            self.due()

    def due(self) -> None:
        now = self.clock()
        with self._wake:
            if now - self._last < self.interval_s:
                return
            self._last = now
            self._pending = ingest_progress_text(self.job.id, self)
            self._wake.notify()

    def _send_loop(self) -> None:
        while True:
            with self._wake:
                while self._pending is None and not self._closing:
                    self._wake.wait()
                text, self._pending = self._pending, None
                if text is None:
                    return
            try:
                self._show(text)
                self.updates += 1
            except Exception:  # noqa: BLE001  (progress is a courtesy; the ingest goes on)
                log.warning("job %s: progress update failed", self.job.id, exc_info=True)

    def __enter__(self) -> SlackProgress:
        self._sender.start()
        super().__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        with self._wake:
            self._pending = None  # the final message replaces whatever was still waiting
            self._closing = True
            self._wake.notify()
        self._sender.join(10)
