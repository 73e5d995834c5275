"""Busy channels: a bounded answer backlog, a per-person rate limit, a cap on model calls in flight.

The first two run the real bot process (slack-bolt/slack-sdk) against the fake Slack, with a fake
Gemini whose answers are slow, so the answer worker is demonstrably busy; the cap runs ask() from
many threads (as the bot's answer workers do) against a fake Gemini that counts requests in flight.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import SecretStr

from bot.app import BUSY, RATE_LIMITED
from retrieval.answer.answerers.model import gemini as gemini_mod
from retrieval.answer.ask import ask
from tests import fake_gemini as fg
from tests.fake_slack import FakeSlack, wait_for
from tests.fake_slack import fake  # noqa: F401  (the module's fake Slack: a pytest fixture)
from tests.test_bot_e2e import ANSWERABLE, text_of
from tests.test_bot_support import BotProcess, wait_reply
from tests.test_gemini_failures import CFR, good_reply

PER_MINUTE = 3
SLOW_S = 4.0  # how long the fake Gemini takes to answer a question the bot asks


@pytest.fixture(scope="module")
def gemini() -> Iterator[fg.FakeGemini]:
    with fg.running() as server:
        yield server


@pytest.fixture(scope="module")
def bot(fake: FakeSlack, gemini: fg.FakeGemini, settings, dev_corpus: str, tmp_path_factory) -> Iterator[BotProcess]:
    env = {"DATABASE_URL": settings.db.url.get_secret_value(),
           "CHAPTERVERSE_SLACK_WORKSPACE_COLLECTION": dev_corpus,
           "CHAPTERVERSE_SLACK_PING_INTERVAL_S": "1",
           "CHAPTERVERSE_SLACK_WORKERS": "1", "CHAPTERVERSE_SLACK_ANSWER_BACKLOG": "1",
           "CHAPTERVERSE_SLACK_USER_QUESTIONS_PER_MINUTE": str(PER_MINUTE),
           "GEMINI_API_KEY": gemini.api_key, "GOOGLE_GEMINI_BASE_URL": gemini.base_url,
           "CHAPTERVERSE_GEMINI_MODEL": "gemini-test", "CHAPTERVERSE_GEMINI_TIMEOUT_S": "20"}
    proc = BotProcess(fake, env, tmp_path_factory.mktemp("busy-bot") / "bot.log").start()
    yield proc
    if proc.proc and proc.proc.poll() is None:
        proc.stop()


def channel() -> str:
    return f"C{uuid.uuid4().hex[:8].upper()}"


def user() -> str:
    return f"U{uuid.uuid4().hex[:8].upper()}"


def slow(rec: fg.Recorded) -> fg.Reply:
    return fg.Reply(200, good_reply(rec).body, delay_s=SLOW_S)


def test_a_full_backlog_answers_busy_at_once_and_the_queued_questions_are_answered(
        fake: FakeSlack, bot: BotProcess, gemini: fg.FakeGemini) -> None:
    """One answer worker and a backlog of one: a third question at the same time is turned away with
    "busy, try again in a minute" (at once, not after the others), and the other two are answered.
    Which of the three is the third is the bot's: Slack's socket-mode client handles envelopes on
    several threads, so the order they reach the answer workers is not the order they were sent."""
    gemini.script(slow)
    ch = channel()
    threads = []
    for _ in range(3):
        ts, _ = fake.mention(ch, user(), ANSWERABLE)
        threads.append(ts)
    busy = wait_for(lambda: [ts for ts in threads if BUSY in text_of(fake.bot_messages(ch, ts))], timeout=30,
                    what="a question turned away as busy")
    assert len(busy) == 1 and len(fake.bot_messages(ch, busy[0])) == 1
    for ts in (t for t in threads if t not in busy):
        msgs = wait_reply(fake, ch, ts, timeout=120)
        assert len(msgs) == 1 and "250 knots" in text_of(msgs) and BUSY not in text_of(msgs)
    assert len(gemini.requests) == 2  # the turned-away question never reached the model
    time.sleep(1.0)
    assert len(fake.bot_messages(ch, busy[0])) == 1  # and it stays one reply


def test_a_person_over_the_rate_limit_is_asked_to_wait(fake: FakeSlack, bot: BotProcess,
                                                        gemini: fg.FakeGemini) -> None:
    gemini.script(good_reply)
    ch, who = channel(), user()
    for i in range(PER_MINUTE):
        ts, _ = fake.mention(ch, who, ANSWERABLE)
        msgs = wait_reply(fake, ch, ts, timeout=120)
        assert "250 knots" in text_of(msgs), (i, text_of(msgs))
    asked = len(gemini.requests)
    ts, _ = fake.mention(ch, who, ANSWERABLE)
    msgs = wait_reply(fake, ch, ts, timeout=30)
    assert RATE_LIMITED.format(PER_MINUTE) in text_of(msgs)
    assert len(gemini.requests) == asked  # not answered, not sent to the model
    # someone else is not held back by that person
    ts, _ = fake.mention(ch, user(), ANSWERABLE)
    assert "250 knots" in text_of(wait_reply(fake, ch, ts, timeout=120))


# ------------------------------------------------------------------------- the cap on model calls
class InFlight:
    """A fake Gemini reply that takes ``hold_s`` and counts how many requests are being answered at once."""

    def __init__(self, hold_s: float) -> None:
        self.hold_s = hold_s
        self.now = self.most = 0
        self._lock = threading.Lock()

    def __call__(self, rec: fg.Recorded) -> fg.Reply:
        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(self.hold_s)
        with self._lock:
            self.now -= 1
        return good_reply(rec)


def _ask_from_threads(s: Any, n: int) -> list[Any]:
    out: list[Any] = [None] * n

    def one(i: int) -> None:
        out[i] = ask(s, ANSWERABLE, collections=["dev"])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    return out


@pytest.fixture()
def capped(settings, dev_corpus, gemini, monkeypatch):
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", gemini.base_url)
    gemini_mod.close_clients()
    yield settings.but(answer={"gemini_api_key": SecretStr(gemini.api_key), "gemini_model": "gemini-test", "gemini_timeout_s": 10.0, "gemini_retry_budget_s": 60.0, "model_concurrency": 2})
    gemini_mod.close_clients()


def test_concurrent_model_calls_never_exceed_the_cap(capped, gemini: fg.FakeGemini) -> None:
    counter = InFlight(hold_s=2.0)
    gemini.script(counter)
    answers = _ask_from_threads(capped, 6)
    assert len(gemini.requests) == 6
    assert counter.most == 2  # the cap held, and was used
    for a in answers:
        assert a is not None and not a.refusal and a.answerer == "gemini" and a.citations[0].document == CFR


def test_a_call_that_waits_too_long_for_a_slot_degrades_to_the_extractive_answer(
        capped, gemini: fg.FakeGemini) -> None:
    counter = InFlight(hold_s=8.0)
    gemini.script(counter)
    answers = _ask_from_threads(capped.but(answer={"gemini_retry_budget_s": 1.0}), 4)
    assert counter.most == 2 and len(gemini.requests) == 2
    waited = [a for a in answers if a.answerer == "extractive"]
    assert len(waited) == 2
    for a in waited:
        assert not a.refusal and a.citations[0].page == 17  # the verified fallback, not a refusal
        assert any("too many model calls at once" in w for w in a.warnings), a.warnings
