"""Questions interrupted by a dead process (bot.inflight) against the real test Postgres: which ones
the next process adopts, and what the person then sees. A stub Slack client records the replies."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from bot.answer import ASK_AGAIN, Answering, Question
from bot.inflight import InFlightKeeper
from bot.store import Store, job_owner
from tests.bot_helpers import save_turn
from tests.test_bot_answer import GOOD, StubClient


class Inline:
    """An answer pool that runs each task at once."""

    def submit(self, fn: Any, *args: Any, anyway: bool = False) -> int:
        fn(*args)
        return 0


@pytest.fixture()
def parts(settings) -> Iterator[tuple[Store, StubClient, InFlightKeeper, str]]:
    store = Store(settings)
    client = StubClient()
    answering = Answering(settings, lambda team: client, store, ask=lambda *a, **k: GOOD)  # type: ignore[arg-type]
    team = f"T{uuid.uuid4().hex[:8].upper()}"
    yield store, client, InFlightKeeper(answering, Inline(), stale_s=45), team  # type: ignore[misc]
    with psycopg.connect(settings.db.url.get_secret_value(), autocommit=True) as conn:
        conn.execute("DELETE FROM bot_events WHERE workspace = %s", (team,))


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def interrupted(settings, team: str, client: StubClient, *, attempts: int = 1, host: str | None = None,
                pid: int | None = None, beat_age_s: float = 0.0) -> tuple[Question, str]:
    """A question claimed by another process that posted its placeholder and then stopped."""
    q = Question(team=team, channel="C1", user="U1", text="what?", ts=f"{uuid.uuid4().int % 10**6}.000100",
                 thread_ts="")
    q = Question(**{**q.__dict__, "thread_ts": q.ts})
    placeholder = client.chat_postMessage(channel=q.channel, text="Looking through the handbooks…",
                                          thread_ts=q.ts)["ts"]
    with psycopg.connect(settings.db.url.get_secret_value(), autocommit=True) as conn:
        conn.execute("INSERT INTO bot_events (workspace, event_key, question, owner_host, owner_pid, heartbeat_at, "
                     "placeholder_ts, attempts) VALUES (%s, %s, %s, %s, %s, now() - make_interval(secs => %s), %s, %s)",
                     (team, q.key, Jsonb(q.__dict__), host or job_owner()[0], pid or dead_pid(), beat_age_s,
                      placeholder, attempts))
    return q, placeholder


def row(settings, team: str, key: str) -> dict[str, Any]:
    with psycopg.connect(settings.db.url.get_secret_value(), row_factory=psycopg.rows.dict_row) as conn:
        return conn.execute("SELECT question, attempts FROM bot_events WHERE workspace = %s AND event_key = %s",
                            (team, key)).fetchone()


def test_a_question_of_a_dead_process_is_answered_in_place_of_its_placeholder(parts, settings) -> None:
    store, client, keeper, team = parts
    q, placeholder = interrupted(settings, team, client)
    keeper.adopt(starting=True)
    assert client.messages[placeholder]["text"] != "Looking through the handbooks…"
    assert "Three miles." in str(client.messages[placeholder]["blocks"])
    assert len(client.messages) == 1  # no second message
    assert row(settings, team, q.key) == {"question": None, "attempts": 2}
    keeper.adopt(starting=True)  # done: never again
    assert len(client.messages) == 1 and row(settings, team, q.key)["attempts"] == 2


def test_a_question_interrupted_twice_asks_the_person_to_ask_again(parts, settings) -> None:
    store, client, keeper, team = parts
    q, placeholder = interrupted(settings, team, client, attempts=2)
    keeper.adopt(starting=True)
    assert ASK_AGAIN in str(client.messages[placeholder]["blocks"])
    assert row(settings, team, q.key)["question"] is None


def test_another_hosts_question_is_adopted_only_when_its_heartbeat_is_stale(parts, settings) -> None:
    store, client, keeper, team = parts
    fresh, _ = interrupted(settings, team, client, host="elsewhere", pid=1, beat_age_s=5)
    stale, placeholder = interrupted(settings, team, client, host="elsewhere", pid=1, beat_age_s=60)
    keeper.adopt()
    assert "Three miles." in str(client.messages[placeholder]["blocks"])
    assert row(settings, team, fresh.key)["question"] is not None  # its process is still working on it
    assert row(settings, team, stale.key)["question"] is None


def test_a_question_whose_reply_went_out_is_not_answered_twice(parts, settings) -> None:
    store, client, keeper, team = parts
    q, placeholder = interrupted(settings, team, client)
    save_turn(store, team, q.channel, q.thread_ts, q.ts, q.user, GOOD, ["dev"], reply_ts=placeholder)
    keeper.adopt(starting=True)
    assert client.messages[placeholder]["text"] == "Looking through the handbooks…"  # untouched
    assert row(settings, team, q.key)["question"] is None


def test_an_unreadable_interrupted_question_is_dropped_once(parts, settings) -> None:
    store, client, keeper, team = parts
    with psycopg.connect(settings.db.url.get_secret_value(), autocommit=True) as conn:
        conn.execute("INSERT INTO bot_events (workspace, event_key, question, owner_host, owner_pid, heartbeat_at, "
                     "attempts) VALUES (%s, 'C1:1.000001', %s, %s, %s, now(), 1)",
                     (team, Jsonb({"text": "what?"}), job_owner()[0], dead_pid()))
    assert keeper.adopt(starting=True) == 1
    assert row(settings, team, "C1:1.000001") == {"question": None, "attempts": 2}  # ended: never adopted again
    assert keeper.adopt(starting=True) == 0 and client.messages == {}
