"""A process-wide cap on model-provider calls in flight (``CHAPTERVERSE_MODEL_CONCURRENCY``).

Every provider request (Gemini, or any other model service an answerer calls) runs inside
``provider_slot(settings, wait_s)``; all answer workers of a process share one semaphore, so a busy
channel cannot open more than the configured number of requests at once (and run into the
provider's rate limit). A call that cannot get a slot within ``wait_s`` raises ``ProviderBusy``
(an ``AnswererError``), which ``retrieval.answer.ask`` turns into the extractive fallback like any other
provider failure. Hold a slot for one request only, not across retry back-off.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from retrieval.answer.answerers import AnswererError
from retrieval.settings import Settings

_SEMAPHORES: dict[int, threading.BoundedSemaphore] = {}
_LOCK = threading.Lock()


class ProviderBusy(AnswererError):
    """No provider slot came free in time."""


def semaphore(limit: int) -> threading.BoundedSemaphore:
    """The process's semaphore for ``limit`` concurrent calls (one per configured size)."""
    with _LOCK:
        return _SEMAPHORES.setdefault(limit, threading.BoundedSemaphore(limit))


@contextmanager
def provider_slot(settings: Settings, wait_s: float) -> Iterator[None]:
    """Run the body holding one of the ``settings.answer.model_concurrency`` provider slots; ``ProviderBusy``
    if none came free within ``wait_s`` seconds."""
    limit = settings.answer.model_concurrency
    sem = semaphore(limit)
    if not sem.acquire(timeout=max(0.0, wait_s)):
        raise ProviderBusy(f"too many model calls at once ({limit} in flight, "
                           f"CHAPTERVERSE_MODEL_CONCURRENCY); none finished within {wait_s:.0f} s")
    try:
        yield
    finally:
        sem.release()
