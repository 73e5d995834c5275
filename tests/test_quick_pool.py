"""The bot's quick pool is bounded (issue 32, item 7): busy and rate-limit replies, shared PDFs,
follow-up checks, feedback and listing wait for one of 4 quick workers, at most
CHAPTERVERSE_SLACK_QUICK_BACKLOG of them; beyond that a task is dropped and logged at once, the
tasks already taken all run, and nothing waits for ever. Real threads, the bot's own pool."""

from __future__ import annotations

import logging
import threading

import pytest

from bot.app import quickly
from bot.main import QUICK_WORKERS, quick_pool
from retrieval.settings import Settings


def test_the_bots_quick_pool_has_a_bound_from_the_settings() -> None:
    assert quick_pool(Settings()).backlog == 50
    pool = quick_pool(Settings(slack={"quick_backlog": 3}))
    try:
        assert pool.size == QUICK_WORKERS and pool.backlog == 3
    finally:
        pool.shutdown()


def test_a_burst_beyond_the_bound_is_dropped_and_logged_and_the_rest_run(caplog: pytest.LogCaptureFixture) -> None:
    pool = quick_pool(Settings(slack={"quick_backlog": 3}))
    release = threading.Event()
    ran: list[int] = []
    lock = threading.Lock()

    def task(n: int) -> None:
        release.wait(10)
        with lock:
            ran.append(n)

    try:
        with caplog.at_level(logging.WARNING, logger="bot.app"):
            taken = [quickly(pool, task, n) for n in range(20)]
        assert taken == [True] * (QUICK_WORKERS + 3) + [False] * (20 - QUICK_WORKERS - 3)
        dropped = [r for r in caplog.records if "dropped task" in r.getMessage()]
        assert len(dropped) == 20 - QUICK_WORKERS - 3
        assert "quick: 7 tasks waiting or running" in dropped[0].getMessage()
        release.set()
        for _ in range(100):
            if len(ran) == QUICK_WORKERS + 3:
                break
            threading.Event().wait(0.05)
        assert sorted(ran) == list(range(QUICK_WORKERS + 3))
        assert quickly(pool, task, 99)  # room again once they are done
    finally:
        release.set()
        pool.shutdown()
