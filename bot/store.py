"""The bot's Postgres state: event dedup, threads, turns and feedback (tables of 0002_bot.sql); jobs
are in ``bot.queue``.

Every function borrows a connection from the process's one pool (``retrieval.store.pool``, shared with
searches and sized to the workers); each is checked when handed out, so a database that goes away
and comes back is picked up again without restarting the bot. Failures surface as ``retrieval.store.db.DatabaseError``
(``IndexUnavailable`` when the server cannot be reached).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

import psycopg
from psycopg.types.json import Jsonb

from retrieval.store import db, pool
from retrieval.store.db import DatabaseError, IndexUnavailable, first_line
from retrieval.models import Answer, Turn
from retrieval.settings import Settings

T = TypeVar("T")
HISTORY_TURNS = 6  # earlier exchanges of a thread given to a follow-up
EVENT_KEEP_S = 24 * 3600  # Slack redelivers an event within minutes; keys older than this are forgotten
# a question is answered: its text and owner are forgotten (``finish_question``)
_QUESTION_DONE = ("UPDATE bot_events SET question = NULL, owner_host = NULL, owner_pid = NULL "
                  "WHERE workspace = %(ws)s AND event_key = %(key)s")
_INSERT_TURN = ("INSERT INTO bot_turns (workspace, id, channel, thread_ts, message_ts, user_id, question, answer, "
                "refusal, collections, result, reply_ts) OVERRIDING SYSTEM VALUE VALUES (%(ws)s, %(id)s, %(channel)s, "
                "%(thread)s, %(message)s, %(user)s, %(question)s, %(said)s, %(refusal)s, %(collections)s, %(result)s, "
                "%(reply)s)")
# the bot takes part in the thread from its first question on (replies there are follow-ups): a CTE
_JOIN_THREAD = ("thread AS (INSERT INTO bot_threads (workspace, channel, thread_ts) "
                "VALUES (%(ws)s, %(channel)s, %(thread)s) ON CONFLICT DO NOTHING) ")
# what a claimed question's reply needs from the database (``Claim``), as one row
_CONTEXT = ("SELECT nextval(pg_get_serial_sequence('bot_turns', 'id')) AS turn_id, "
            "(SELECT coalesce(json_agg(json_build_array(d.name, d.title) ORDER BY d.collection, d.name), '[]') "
            "FROM documents d WHERE d.collection = ANY(%(collections)s)) AS documents, "
            # a follow-up's thread: its newest ``limit`` earlier exchanges, oldest first
            "(SELECT coalesce(json_agg(json_build_array(h.question, h.answer) ORDER BY h.id), '[]') FROM ("
            "SELECT id, question, answer FROM bot_turns WHERE workspace = %(ws)s AND channel = %(channel)s "
            "AND thread_ts = %(thread)s AND message_ts <> %(before)s ORDER BY id DESC LIMIT %(limit)s) h) AS history")
PRUNE_EVERY = 200  # events claimed between two prunes of old event keys


@dataclass(frozen=True)
class Claim:
    """A question claimed by this process, and what its reply needs from the database."""

    turn_id: int  # the id its turn is recorded under (``finish_question``), known before it is answered
    titles: dict[str, str | None]  # name -> title of each document the question searches (collection, name order)
    history: list[Turn]  # a follow-up's earlier exchanges in the thread, oldest first; [] for a new question


@dataclass(frozen=True)
class TurnRecord:
    """One exchange, recorded once its reply is out (``Store.finish_question``)."""

    id: int  # ``Claim.turn_id``
    channel: str
    thread_ts: str
    message_ts: str  # the question's message
    user_id: str
    answer: Answer
    collections: tuple[str, ...]  # what was searched


class Store:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._claims = 0

    # ------------------------------------------------------------------ plumbing
    def ensure_ready(self) -> None:
        """Start/migrate the database once it can be reached (``db.ready``: cheap after the first success)."""
        try:
            db.ready(self.settings)
        except psycopg.Error as exc:
            raise IndexUnavailable(f"the index database is unavailable: {first_line(exc)}") from exc

    @contextmanager
    def _conn(self) -> Iterator[psycopg.Connection]:
        try:
            self.ensure_ready()
            with pool.connection(self.settings) as conn:
                yield conn
        except psycopg.OperationalError as exc:
            raise IndexUnavailable(f"the index database is unavailable: {first_line(exc)}") from exc
        except psycopg.Error as exc:
            raise DatabaseError(f"database error: {first_line(exc)}") from exc

    def run(self, fn: Callable[[psycopg.Connection], T]) -> T:
        with self._conn() as conn:
            return fn(conn)

    # ------------------------------------------------------------------ events and threads
    def claim_event(self, workspace: str, key: str) -> bool:
        """True the first time ``key`` is seen in ``workspace``; False for a redelivery/duplicate.
        Every ``PRUNE_EVERY`` claims (the first included), keys older than ``EVENT_KEEP_S`` go."""
        with self._conn() as conn:
            row = conn.execute(
                "INSERT INTO bot_events (workspace, event_key) VALUES (%s, %s) ON CONFLICT DO NOTHING "
                "RETURNING event_key", (workspace, key)).fetchone()
        self._claims += 1
        if self._claims % PRUNE_EVERY == 1:
            self.prune_events()
        return row is not None

    # ------------------------------------------------------------------ questions in flight (0017)
    def claim_question(self, workspace: str, key: str, question: dict[str, str], *, thread: tuple[str, str],
                       collections: Sequence[str], history_before: str | None = None) -> Claim | None:
        """Like ``claim_event``, and the question is recorded as in flight, owned by this process, until
        ``finish_question``; a process that dies before then leaves it to ``adopt_questions``. None for
        a redelivery. In the same statement the bot joins the ``thread`` (channel, thread ts), and the
        claim brings what the reply needs from here (``Claim``): its turn's id, the titles of the
        documents in ``collections``, and with ``history_before`` (a follow-up's message ts) the
        thread's earlier exchanges."""
        host, pid = job_owner()
        args = {"key": key, "question": Jsonb(question), "host": host, "pid": pid,
                **_context_args(workspace, thread, collections, history_before)}
        with self._conn() as conn:
            row = conn.execute(
                "WITH claimed AS (INSERT INTO bot_events (workspace, event_key, question, owner_host, owner_pid, "
                "heartbeat_at, attempts) VALUES (%(ws)s, %(key)s, %(question)s, %(host)s, %(pid)s, now(), 1) "
                "ON CONFLICT DO NOTHING RETURNING event_key), " + _JOIN_THREAD + _CONTEXT + " FROM claimed",
                args).fetchone()
        self._claims += 1
        if self._claims % PRUNE_EVERY == 1:
            self.prune_events()
        return None if row is None else _claim(row)

    def reclaim(self, workspace: str, *, thread: tuple[str, str], collections: Sequence[str],
                history_before: str | None = None) -> Claim:
        """``claim_question``'s ``Claim`` for a question adopted from a stopped process (claimed already)."""
        with self._conn() as conn:
            row = conn.execute("WITH " + _JOIN_THREAD + _CONTEXT,
                               _context_args(workspace, thread, collections, history_before)).fetchone()
        return _claim(row)

    def set_placeholder(self, workspace: str, key: str, placeholder_ts: str) -> None:
        with self._conn() as conn:
            conn.execute("UPDATE bot_events SET placeholder_ts = %s WHERE workspace = %s AND event_key = %s",
                         (placeholder_ts, workspace, key))

    def finish_question(self, workspace: str, key: str, turn: TurnRecord | None, reply_ts: str | None) -> None:
        """The reply is out (at ``reply_ts``; None: it could not be delivered), in one statement: the
        ``turn`` is recorded with where its reply is, and the question's text and owner are forgotten.
        Safe to repeat (a turn recorded already is left as it is)."""
        with self._conn() as conn:
            if turn is None:
                conn.execute(_QUESTION_DONE, {"ws": workspace, "key": key})
                return
            conn.execute(f"WITH turn AS ({_INSERT_TURN} ON CONFLICT DO NOTHING) {_QUESTION_DONE}",
                         {**_turn_args(workspace, turn, reply_ts), "key": key})

    def beat_questions(self, keys: Sequence[tuple[str, str]]) -> int:
        """Refresh the heartbeat of these questions (workspace, event key), where still this process's."""
        if not keys:
            return 0
        host, pid = job_owner()
        with self._conn() as conn:
            return conn.execute("UPDATE bot_events SET heartbeat_at = now() WHERE question IS NOT NULL "
                                "AND owner_host = %s AND owner_pid = %s AND workspace || ':' || event_key = ANY(%s)",
                                (host, pid, [f"{w}:{k}" for w, k in keys])).rowcount

    def adopt_questions(self, stale_s: float, *, starting: bool = False) -> list[dict[str, object]]:
        """Take over the questions whose process is gone: no heartbeat for ``stale_s``, or (when
        ``starting``) owned on this host by a process that is no longer alive or had this PID (a
        predecessor). Each row: workspace, event_key, question, placeholder_ts, attempts (this one's)."""
        host, me = job_owner()
        with self._conn() as conn, conn.transaction():
            gone = predecessors(conn, "SELECT workspace, event_key AS key, owner_pid FROM bot_events "
                                "WHERE question IS NOT NULL AND owner_host = %s", host) if starting else []
            return list(conn.execute(
                "UPDATE bot_events SET owner_host = %(host)s, owner_pid = %(pid)s, heartbeat_at = now(), "
                "attempts = attempts + 1 WHERE question IS NOT NULL AND (workspace || ':' || event_key = ANY(%(gone)s) "
                "OR heartbeat_at < now() - make_interval(secs => %(stale)s)) "
                "RETURNING workspace, event_key, question, placeholder_ts, attempts",
                {"host": host, "pid": me, "gone": gone, "stale": stale_s}).fetchall())

    def replied(self, workspace: str, channel: str, message_ts: str) -> bool:
        """Whether a reply to this message was delivered (its turn has a reply ts)."""
        with self._conn() as conn:
            return conn.execute("SELECT 1 FROM bot_turns WHERE workspace = %s AND channel = %s AND message_ts = %s "
                                "AND reply_ts IS NOT NULL", (workspace, channel, message_ts)).fetchone() is not None

    def prune_events(self, keep_s: float = EVENT_KEEP_S) -> int:
        """Forget event keys received more than ``keep_s`` seconds ago; how many went."""
        with self._conn() as conn:
            return conn.execute("DELETE FROM bot_events WHERE received_at < now() - make_interval(secs => %s)",
                                (keep_s,)).rowcount

    def in_thread(self, workspace: str, channel: str, thread_ts: str) -> bool:
        with self._conn() as conn:
            return conn.execute("SELECT 1 FROM bot_threads WHERE workspace = %s AND channel = %s AND thread_ts = %s",
                                (workspace, channel, thread_ts)).fetchone() is not None

    def remember_workspace(self, workspace: str, name: str, url: str) -> None:
        """The workspace's web address (auth.test's ``url``), for links in ``bot.digest``."""
        with self._conn() as conn:
            conn.execute("INSERT INTO bot_workspaces (workspace, name, url) VALUES (%s, %s, %s) "
                         "ON CONFLICT (workspace) DO UPDATE SET name = EXCLUDED.name, url = EXCLUDED.url, "
                         "seen_at = now()", (workspace, name, url))

    # ------------------------------------------------------------------ feedback
    def record_feedback(self, workspace: str, turn_id: int, user_id: str, rating: int) -> bool:
        """Record (or change) a person's vote on an answer; False if the answer is unknown."""
        with self._conn() as conn:
            try:
                conn.execute(
                    "INSERT INTO bot_feedback (workspace, turn_id, user_id, rating) VALUES (%s, %s, %s, %s) "
                    "ON CONFLICT (workspace, turn_id, user_id) DO UPDATE SET rating = EXCLUDED.rating, "
                    "updated_at = now()", (workspace, turn_id, user_id, rating))
            except psycopg.errors.ForeignKeyViolation:
                return False
        return True


def _context_args(workspace: str, thread: tuple[str, str], collections: Sequence[str],
                  history_before: str | None) -> dict[str, object]:
    channel, thread_ts = thread
    return {"ws": workspace, "channel": channel, "thread": thread_ts, "collections": list(collections),
            "before": history_before or "", "limit": HISTORY_TURNS if history_before else 0}


def _claim(row: dict) -> Claim:
    return Claim(turn_id=int(row["turn_id"]), titles={name: title for name, title in row["documents"]},
                 history=[Turn(question=q, answer=a) for q, a in row["history"]])


def _turn_args(workspace: str, turn: TurnRecord, reply_ts: str | None) -> dict[str, object]:
    a = turn.answer
    return {"ws": workspace, "id": turn.id, "channel": turn.channel, "thread": turn.thread_ts,
            "message": turn.message_ts, "user": turn.user_id, "question": a.question,
            "said": a.reason if a.refusal else a.answer, "refusal": a.refusal, "collections": list(turn.collections),
            "result": Jsonb(a.model_dump(mode="json")), "reply": reply_ts}


def job_owner() -> tuple[str, int]:
    """This process as a job owner: (host name + PID namespace, PID). Two processes with the same
    host part can see each other's PIDs, so a PID's liveness means something only between them."""
    host = socket.gethostname()
    try:
        host += "/" + os.readlink("/proc/self/ns/pid")
    except OSError:
        pass  # not Linux: the host name alone
    return host, os.getpid()


def predecessors(conn: psycopg.Connection, query: str, host: str) -> list[str]:
    """"workspace:key" of the rows ``query`` selects (workspace, key, owner_pid; owned on ``host``, its
    parameter) whose owner is gone: a process no longer alive, or one that had this process's PID (a
    predecessor: in a container every bot is PID 1)."""
    me = os.getpid()
    return [f"{r['workspace']}:{r['key']}" for r in conn.execute(query, (host,)).fetchall()
            if r["owner_pid"] == me or not _alive(r["owner_pid"])]


def _alive(pid: int | None) -> bool:
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True  # exists, someone else's
    except OSError:  # ProcessLookupError: no such process
        return False
    return True


