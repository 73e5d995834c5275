"""A small bounded pool of daemon worker threads for slow work (answers, ingestion jobs).

Daemon threads on purpose: on SIGTERM the process exits at once (its atexit hooks, which stop the
embedded Postgres, still run) instead of waiting for a long ingestion; an interrupted job's
transaction is rolled back by Postgres and the job is marked failed at the next start.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


class BacklogFull(Exception):
    """The pool already has ``size + backlog`` tasks waiting or running."""


class WorkerPool:
    def __init__(self, name: str, size: int, backlog: int | None = None) -> None:
        """``backlog``: how many tasks may wait for a free thread (None: no bound); ``submit`` raises
        ``BacklogFull`` beyond it, so a burst is refused at once instead of waiting for ever."""
        self.name = name
        self.size, self.backlog = size, backlog
        self._queue: queue.Queue[tuple[Callable[..., Any], tuple[Any, ...]] | None] = queue.Queue()
        self._outstanding = 0  # submitted and not finished
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, name=f"{name}-{i}", daemon=True) for i in range(size)]
        for t in self._threads:
            t.start()

    def submit(self, fn: Callable[..., Any], *args: Any, anyway: bool = False) -> int:
        """Queue ``fn(*args)``; returns how many tasks are ahead of it (queued or running). Raises
        ``BacklogFull`` (nothing queued) when ``backlog`` tasks are already waiting, unless ``anyway``
        (work accepted earlier: an interrupted question)."""
        with self._lock:
            if not anyway and self.backlog is not None and self._outstanding >= self.size + self.backlog:
                raise BacklogFull(f"{self.name}: {self._outstanding} tasks waiting or running")
            ahead = self._outstanding
            self._outstanding += 1
            self._queue.put((fn, args))
        return ahead

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            fn, args = item
            try:
                fn(*args)
            except Exception:  # noqa: BLE001  (a task's failure must not kill the worker)
                log.exception("%s task failed", self.name)
            finally:
                with self._lock:
                    self._outstanding -= 1

    def shutdown(self) -> None:
        """Stop taking tasks; running ones are abandoned when the process exits."""
        for _ in self._threads:
            self._queue.put(None)
