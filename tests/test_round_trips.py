"""One question, one session: an extractive question costs a handful of statements on one pooled
connection (was about 45 over about 10 checkouts), and eight in Slack, counted on the real test
database (each ``psycopg.Cursor.execute``, the pool's liveness checks included)."""

from __future__ import annotations

import psycopg
import pytest

from retrieval.answer.ask import ask

# named-document titles, both legs, fetch + sentence scores, pages, statistics; the pool's liveness check
# costs no round trip on a connection used within ``pool.FRESH_S`` (the warm question)
MAX_STATEMENTS = 5


@pytest.fixture()
def counted(monkeypatch):
    sent: list[str] = []
    execute = psycopg.Cursor.execute

    def counting(self, query, *args, **kwargs):
        sent.append(query if isinstance(query, str) else repr(query))
        return execute(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", counting)
    return sent


@pytest.fixture()
def new_pool() -> None:
    """A new pool, so every connection in it is used by the warm question: the pool hands out its idle
    connections in turn, and one left idle for over ``pool.FRESH_S`` by an earlier test (seen on a
    loaded machine) is checked with a round trip."""
    from retrieval.store import pool  # noqa: PLC0415

    pool.close_all()


def test_an_extractive_question_is_a_few_statements_on_one_connection(settings, dev_corpus, new_pool, counted) -> None:
    ask(settings, "How much fuel must be on board for a VFR flight at night?", collections=[dev_corpus],
        answerer="extractive")  # warm: pool, named-document titles, HNSW settings
    counted.clear()
    answer = ask(settings, "What is the maximum airspeed below 10,000 feet MSL?", collections=[dev_corpus],
                 answerer="extractive")
    assert answer.citations or answer.reason, "an answer or a refusal with its reason"
    assert "" not in counted, counted  # no liveness round trip: the connection was used moments ago
    assert len(counted) <= MAX_STATEMENTS, "\n".join(q[:80] for q in counted)


def test_a_question_in_slack_is_eight_statements(settings, dev_corpus, new_pool, counted) -> None:
    """The bot's path (bot.answer.Answering with the real store and pipeline; Slack is a stub), a new
    extractive question (was 21 statements over 7 checkouts, then 15 over 4):
    1. the claim: the event key (dedup) with the question, its owner and heartbeat (crash recovery), the
       thread joined, the turn's id, the searched documents' titles (and a follow-up's history);
    2. the placeholder's ts, recorded as soon as it is posted (an adopter replaces it);
    3-7. ``ask`` on one held connection: named-document titles, both legs, fetch + sentence scores,
       pages, statistics;
    8. after delivery: the turn with its reply's ts, and the question done.
    A follow-up in the thread is eight too (its history comes with the claim).
    The pool's liveness check costs no round trip on a connection used within ``pool.FRESH_S`` (the
    warm question before); after a longer quiet spell the first checkout adds one empty statement."""
    import uuid  # noqa: PLC0415

    from bot.answer import Answering, Question  # noqa: PLC0415
    from bot.store import Store  # noqa: PLC0415
    from tests.test_bot_answer import StubClient  # noqa: PLC0415

    s = settings.but(slack={"workspace_collection": dev_corpus})
    client = StubClient()
    store = Store(s)
    answering = Answering(s, lambda team: client, store)

    def question(text: str) -> Question:
        ts = f"{uuid.uuid4().int % 10**9}.000001"
        return Question(team="T1", channel="C1", user="U1", text=text, ts=ts, thread_ts=ts)

    answering.handle(question("How much fuel must be on board for a VFR flight at night?"))  # warm
    counted.clear()
    q = question("What is the maximum airspeed below 10,000 feet MSL?")
    answering.handle(q)
    assert "250 knots" in client.texts()[-1]
    assert len(counted) <= 8, "\n".join(q[:80] for q in counted)
    assert counted[0].startswith("WITH claimed AS (INSERT INTO bot_events")
    assert counted[1].startswith("UPDATE bot_events SET placeholder_ts")
    assert any("WITH kw AS" in q for q in counted[2:-1])
    assert "INSERT INTO bot_turns" in counted[-1] and "UPDATE bot_events SET question = NULL" in counted[-1]
    rows = store.run(lambda conn: conn.execute(
        "SELECT t.reply_ts, t.answer, e.question FROM bot_turns t JOIN bot_events e ON e.workspace = t.workspace "
        "AND e.event_key = t.channel || ':' || t.message_ts WHERE t.workspace = 'T1' AND t.message_ts = %s",
        (q.ts,)).fetchall())
    assert len(rows) == 1 and rows[0]["reply_ts"] and "250 knots" in rows[0]["answer"]
    assert rows[0]["question"] is None  # done: no process adopts it

    counted.clear()  # a follow-up in the thread: its history comes with the claim, so eight again
    answering.handle(Question(team="T1", channel="C1", user="U1", text="And above 10,000 feet?",
                              ts=f"{uuid.uuid4().int % 10**9}.000002", thread_ts=q.ts))
    assert len(counted) <= 8, "\n".join(q[:80] for q in counted)
    standalone = store.run(lambda conn: conn.execute(
        "SELECT result->>'standalone_question' AS s FROM bot_turns WHERE workspace = 'T1' AND thread_ts = %s "
        "ORDER BY id DESC LIMIT 1", (q.ts,)).fetchone()["s"])
    assert "maximum airspeed below 10,000 feet" in (standalone or ""), standalone  # the thread's history was used


def test_a_fresh_connection_is_checked_without_a_round_trip_and_a_terminated_one_is_replaced(
        settings, counted, monkeypatch) -> None:
    """The pool's liveness check: a connection used moments ago goes out unchecked, unless the server
    ended it (its socket then has the server's last word to read): that one is replaced, not handed out."""
    from retrieval.store import pool  # noqa: PLC0415

    pool.close_all()  # a new pool: one connection, just made
    with pool.connection(settings) as conn:
        first = conn.execute("SELECT pg_backend_pid() AS pid").fetchone()["pid"]
    counted.clear()
    with pool.connection(settings) as conn:
        assert conn.execute("SELECT pg_backend_pid() AS pid").fetchone()["pid"] == first
    assert counted == ["SELECT pg_backend_pid() AS pid"]  # no liveness round trip

    with psycopg.connect(settings.db.url.get_secret_value(), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (first,))
    import time  # noqa: PLC0415

    time.sleep(0.5)  # the server's farewell reaches the socket
    with pool.connection(settings) as conn:
        assert conn.execute("SELECT pg_backend_pid() AS pid").fetchone()["pid"] != first

    monkeypatch.setattr(pool, "FRESH_S", 0.0)  # idle for longer than FRESH_S: checked with a round trip
    counted.clear()
    with pool.connection(settings) as conn:
        conn.execute("SELECT 1")
    # the pool may be opening a connection in the background at this moment (to replace the terminated
    # one); its type registration (pgvector's, a pg_type lookup) is not this checkout's
    assert [q for q in counted if "pg_type" not in q] == ["", "SELECT 1"]
