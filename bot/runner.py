"""A job runner: claims queued jobs from Postgres and runs them, one at a time per runner thread.

The bot starts one in-process by default (``CHAPTERVERSE_BOT_RUNS_JOBS``), and ``chapterverse
worker`` runs ``CHAPTERVERSE_WORKER_JOBS`` of them in a separate process; any number of both can
share one database (``bot.queue`` hands each job to one of them). While a job runs its heartbeat is
refreshed; every runner also puts back in the queue the jobs whose worker died (``JobQueue.recover``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from bot.queue import HEARTBEAT_S, STALE_S, Job, JobLost, JobQueue
from retrieval.store.db import DatabaseError

log = logging.getLogger(__name__)


class JobRunner:
    def __init__(self, queue: JobQueue, execute: Callable[[Job], None], *, threads: int = 1,
                 poll_s: float = 1.0, stale_s: float = STALE_S, heartbeat_s: float = HEARTBEAT_S,
                 on_lost: Callable[[Job, str], None] | None = None) -> None:
        """``on_lost(job, why)``: a running job stopped being this runner's ("expired": past its
        deadline; "lost": claimed elsewhere); ``job.lost`` is set and the work stops at its next check."""
        self.queue, self.execute = queue, execute
        self.on_lost = on_lost
        self.poll_s, self.stale_s, self.heartbeat_s = poll_s, stale_s, heartbeat_s
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._threads = [threading.Thread(target=self._loop, name=f"job-{i}", daemon=True) for i in range(threads)]

    def start(self) -> JobRunner:
        try:
            requeued, failed = self.queue.recover(self.stale_s, starting=True)
            if requeued or failed:
                log.warning("jobs interrupted by a stopped worker: %d requeued, %d failed", requeued, failed)
        except DatabaseError as exc:
            log.warning("cannot check for interrupted jobs yet: %s", exc)
        for t in self._threads:
            t.start()
        return self

    def wake(self) -> None:
        """A job was queued by this process: look now instead of at the next poll."""
        self._wake.set()

    def stop(self) -> None:
        """Stop claiming; a running job is abandoned when the process exits (and retried elsewhere)."""
        self._stop.set()
        self._wake.set()

    def _loop(self) -> None:
        since_recover, outage = 0.0, 0
        while not self._stop.is_set():
            try:
                if since_recover >= self.stale_s / 2:
                    since_recover = 0.0
                    requeued, failed = self.queue.recover(self.stale_s)
                    if requeued or failed:
                        log.warning("jobs of a stopped worker: %d requeued, %d failed", requeued, failed)
                job = self.queue.claim()
                if outage:
                    log.info("job queue reachable again")
                outage = 0
            except DatabaseError as exc:
                if not outage:
                    log.warning("job queue unavailable (%s); retrying", exc)
                outage += 1
                job = None
            if job is None:
                wait = min(30.0, self.poll_s * 2 ** min(outage, 5)) if outage else self.poll_s
                self._wake.wait(wait)
                self._wake.clear()
                since_recover += wait
                continue
            self._run(job)

    def _run(self, job: Job) -> None:
        log.info("job %s:%s (%s) claimed, attempt %d", job.workspace, job.id, job.spec.kind, job.attempts)
        done = threading.Event()

        def beat() -> None:
            while not done.wait(self.heartbeat_s):
                try:
                    state = self.queue.heartbeat(job)
                except DatabaseError as exc:
                    log.warning("job %s heartbeat failed: %s", job.id, exc)
                    continue
                if state != "ok":
                    log.warning("job %s:%s stopped: %s", job.workspace, job.id,
                                "past its deadline" if state == "expired" else "no longer this worker's")
                    if self.on_lost is not None:
                        try:
                            self.on_lost(job, state)
                        except Exception:  # noqa: BLE001
                            log.exception("job %s: could not report its end", job.id)
                    return

        beater = threading.Thread(target=beat, name=f"heartbeat-{job.id}", daemon=True)
        beater.start()
        try:
            self.execute(job)
        except JobLost:
            log.info("job %s:%s abandoned: it is no longer this worker's", job.workspace, job.id)
        except Exception:  # noqa: BLE001  (a job's bug must not stop the runner)
            log.exception("job %s failed unexpectedly", job.id)
            try:
                self.queue.finish(job, ok=False, message="unexpected error")
            except DatabaseError:
                pass
        finally:
            done.set()
