"""Independent runs side by side, their results in order: the passage encoder's batches on every core.

An onnxruntime session told to use two threads splits every operator of a run between them and
waits for both at each of the graph's few hundred operators; on 2 cores a batch of eight passages
is too small for that to pay (400 chunks of reportlab-userguide.pdf at load average 6-8: 17.2-19.8
CPU-s and 20.6-40.2 s wall with one two-thread session, 15.0-16.0 CPU-s and 17.1-28.6 s with two runs
of one thread each, the same vectors bit for bit; ``results/speed/ingest_speed.md``). ``in_order`` runs whole batches on threads of their own instead
(onnxruntime releases the GIL while it runs) and hands the results back in the order given, on the
caller's thread, so a progress callback that raises there stops the work as before.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


@contextmanager
def in_order(run: Callable[[T], R], items: Sequence[T], workers: int) -> Iterator[Iterable[R]]:
    """``run(item)`` for each item, at most ``workers`` at a time, results yielded in the items' order.
    At most ``2 * workers`` results wait to be taken (each holds a batch's token states). Leaving the
    ``with`` block early (an exception, a ``break``) cancels the runs not started and waits for the
    ones running (a batch: under a second), so no run outlives the call. ``workers <= 1``: all on the
    caller's thread."""
    if workers <= 1 or len(items) <= 1:
        yield (run(item) for item in items)
        return
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="cv-encode")
    pending: deque[Future[R]] = deque()

    def results() -> Iterator[R]:
        queued = iter(items)
        for item in queued:
            pending.append(pool.submit(run, item))
            if len(pending) >= 2 * workers:
                break
        while pending:
            result = pending.popleft().result()
            for item in queued:  # one taken, one more started
                pending.append(pool.submit(run, item))
                break
            yield result

    try:
        yield results()
    finally:
        for future in pending:
            future.cancel()
        pool.shutdown(wait=True)
