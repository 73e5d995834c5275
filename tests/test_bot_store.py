"""The bot's own state in Postgres (real database; no Slack). Jobs: tests/test_bot_queue.py."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest

from bot.store import Store
from tests.bot_helpers import save_turn


def test_event_keys_dedup_and_old_keys_are_forgotten(settings) -> None:
    ws = f"T{uuid.uuid4().hex[:8]}"
    url = settings.db.url.get_secret_value()
    with psycopg.connect(url) as conn:
        conn.execute("INSERT INTO bot_events (workspace, event_key, received_at) VALUES "
                     "(%s, 'C1:old', now() - interval '2 days'), (%s, 'C1:recent', now() - interval '1 hour')",
                     (ws, ws))
    store = Store(settings)
    assert store.claim_event(ws, "C1:new")  # the first claim also prunes keys older than a day
    assert not store.claim_event(ws, "C1:new")  # a redelivery
    assert not store.claim_event(ws, "C1:recent")
    with psycopg.connect(url) as conn:
        keys = {r[0] for r in conn.execute("SELECT event_key FROM bot_events WHERE workspace = %s", (ws,))}
        conn.execute("DELETE FROM bot_events WHERE workspace = %s", (ws,))
    assert keys == {"C1:new", "C1:recent"}


@pytest.fixture()
def workspace(settings) -> Iterator[str]:
    """A workspace of its own, whose rows go afterwards (an unfinished claim would be adopted by a bot)."""
    ws = f"T{uuid.uuid4().hex[:8]}"
    yield ws
    with psycopg.connect(settings.db.url.get_secret_value(), autocommit=True) as conn:
        conn.execute("DELETE FROM bot_events WHERE workspace = %s", (ws,))
        conn.execute("DELETE FROM bot_threads WHERE workspace = %s", (ws,))


def test_a_question_is_claimed_once_with_its_context_and_finished_in_one_statement(settings, workspace) -> None:
    """The claim joins the thread and brings the turn's id, the searched documents' titles and a
    follow-up's history; ``finish_question`` records the turn under that id with its reply and ends the
    question, and may be repeated (a retry after the database came back)."""
    from retrieval.models import Answer  # noqa: PLC0415
    from bot.store import HISTORY_TURNS, TurnRecord  # noqa: PLC0415

    ws = workspace
    store = Store(settings)
    thread = ("C1", "100.000001")
    claim = store.claim_question(ws, "C1:100.000001", {"text": "first?"}, thread=thread, collections=["none"])
    assert claim is not None and claim.titles == {} and claim.history == []
    assert store.claim_question(ws, "C1:100.000001", {"text": "first?"}, thread=thread, collections=["none"]) is None
    assert store.in_thread(ws, *thread)  # follow-ups there are for the bot while it answers

    first = TurnRecord(claim.turn_id, *thread, "100.000001", "U1", Answer(question="first?", refusal=False,
                                                                          answer="One."), ("none",))
    store.finish_question(ws, "C1:100.000001", first, "100.000002")
    store.finish_question(ws, "C1:100.000001", first, "100.000002")  # repeated: nothing changes
    for i in range(HISTORY_TURNS + 1):  # more earlier exchanges than a follow-up is given
        save_turn(store, ws, *thread, f"10{i + 1}.000001", "U1",
                  Answer(question=f"q{i}?", refusal=False, answer=f"a{i}."), ["none"])
    follow = store.claim_question(ws, "C1:200.000001", {"text": "and?"}, thread=thread, collections=["none"],
                                  history_before="200.000001")
    assert follow is not None and follow.turn_id != claim.turn_id
    assert [t.question for t in follow.history] == [f"q{i}?" for i in range(1, HISTORY_TURNS + 1)]  # newest, in order
    store.finish_question(ws, "C1:200.000001", None, None)
    with psycopg.connect(settings.db.url.get_secret_value()) as conn:
        turns = conn.execute("SELECT id, reply_ts FROM bot_turns WHERE workspace = %s AND message_ts = '100.000001'",
                             (ws,)).fetchall()
        questions = conn.execute("SELECT event_key, question IS NULL FROM bot_events WHERE workspace = %s "
                                 "ORDER BY event_key", (ws,)).fetchall()
    assert turns == [(claim.turn_id, "100.000002")]
    assert questions == [("C1:100.000001", True), ("C1:200.000001", True)]


def test_the_claim_brings_the_titles_of_the_searched_documents(settings, dev_corpus, workspace) -> None:
    claim = Store(settings).claim_question(workspace, "C1:1.000001", {"text": "?"}, thread=("C1", "1.000001"),
                                           collections=[dev_corpus])
    with psycopg.connect(settings.db.url.get_secret_value()) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM documents WHERE collection = %s ORDER BY name",
                                            (dev_corpus,))]
    assert claim is not None and list(claim.titles) == names and names
