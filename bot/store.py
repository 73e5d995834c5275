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
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
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
# a question is answered: its text and owner are forgotten (``question_done``, ``set_reply_ts``)
_QUESTION_DONE = ("UPDATE bot_events SET question = NULL, owner_host = NULL, owner_pid = NULL "
                  "WHERE workspace = %s AND event_key = %s")
PRUNE_EVERY = 200  # events claimed between two prunes of old event keys


class Store:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._ready = False
        self._ready_lock = threading.Lock()
        self._claims = 0

    # ------------------------------------------------------------------ plumbing
    def ensure_ready(self) -> None:
        """Start/migrate the database once it can be reached (cheap after the first success)."""
        if self._ready:
            return
        with self._ready_lock:
            if not self._ready:
                try:
                    db.ready(self.settings)
                except psycopg.Error as exc:
                    raise IndexUnavailable(f"the index database is unavailable: {first_line(exc)}") from exc
                self._ready = True

    @contextmanager
    def _conn(self) -> Iterator[psycopg.Connection]:
        try:
            self.ensure_ready()
            with pool.connection(self.settings) as conn:
                yield conn
        except IndexUnavailable:
            raise
        except psycopg.OperationalError as exc:
            raise IndexUnavailable(f"the index database is unavailable: {first_line(exc)}") from exc
        except psycopg.Error as exc:
            raise DatabaseError(f"database error: {first_line(exc)}") from exc

    @contextmanager
    def session(self) -> Iterator[None]:
        """Hold one pooled connection for the block: every store call inside it (and the answering
        pipeline's, which shares the pool) runs on it, one checkout instead of one per call."""
        with self._conn():
            yield

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
    def claim_question(self, workspace: str, key: str, question: dict[str, str]) -> bool:
        """Like ``claim_event``, and the question is recorded as in flight, owned by this process, until
        ``question_done``; a process that dies before then leaves it to ``adopt_questions``."""
        host, pid = job_owner()
        with self._conn() as conn:
            row = conn.execute(
                "INSERT INTO bot_events (workspace, event_key, question, owner_host, owner_pid, heartbeat_at, "
                "attempts) VALUES (%s, %s, %s, %s, %s, now(), 1) ON CONFLICT DO NOTHING RETURNING event_key",
                (workspace, key, Jsonb(question), host, pid)).fetchone()
        self._claims += 1
        if self._claims % PRUNE_EVERY == 1:
            self.prune_events()
        return row is not None

    def set_placeholder(self, workspace: str, key: str, placeholder_ts: str) -> None:
        with self._conn() as conn:
            conn.execute("UPDATE bot_events SET placeholder_ts = %s WHERE workspace = %s AND event_key = %s",
                         (placeholder_ts, workspace, key))

    def question_done(self, workspace: str, key: str) -> None:
        """The reply is out (or the person was told to ask again): forget the question's text."""
        with self._conn() as conn:
            conn.execute(_QUESTION_DONE, (workspace, key))

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
            gone: list[str] = []
            if starting:
                rows = conn.execute("SELECT workspace, event_key, owner_pid FROM bot_events WHERE question IS NOT NULL "
                                    "AND owner_host = %s", (host,)).fetchall()
                gone = [f"{r['workspace']}:{r['event_key']}" for r in rows
                        if r["owner_pid"] == me or not _alive(r["owner_pid"])]
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

    def join_thread(self, workspace: str, channel: str, thread_ts: str) -> None:
        with self._conn() as conn:
            conn.execute("INSERT INTO bot_threads (workspace, channel, thread_ts) VALUES (%s, %s, %s) "
                         "ON CONFLICT DO NOTHING", (workspace, channel, thread_ts))

    def in_thread(self, workspace: str, channel: str, thread_ts: str) -> bool:
        with self._conn() as conn:
            row = conn.execute("SELECT 1 FROM bot_threads WHERE workspace = %s AND channel = %s AND thread_ts = %s",
                               (workspace, channel, thread_ts)).fetchone()
        return row is not None

    def history(self, workspace: str, channel: str, thread_ts: str, before_ts: str,
                limit: int = HISTORY_TURNS) -> list[Turn]:
        """The thread's earlier exchanges (oldest first), up to ``limit``, asked before ``before_ts``."""
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT question, answer FROM (SELECT id, question, answer FROM bot_turns WHERE workspace = %s "
                "AND channel = %s AND thread_ts = %s AND message_ts <> %s ORDER BY id DESC LIMIT %s) t ORDER BY id",
                (workspace, channel, thread_ts, before_ts, limit)).fetchall()
        return [Turn(question=r["question"], answer=r["answer"]) for r in rows]

    def save_turn(self, workspace: str, channel: str, thread_ts: str, message_ts: str, user_id: str,
                  answer: Answer, collections: Sequence[str]) -> int:
        said = answer.reason if answer.refusal else answer.answer
        with self._conn() as conn:
            row = conn.execute(
                "INSERT INTO bot_turns (workspace, channel, thread_ts, message_ts, user_id, question, answer, "
                "refusal, collections, result) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
                (workspace, channel, thread_ts, message_ts, user_id, answer.question, said, answer.refusal,
                 list(collections), Jsonb(answer.model_dump(mode="json")))).fetchone()
        return int(row["id"])

    def set_reply_ts(self, workspace: str, turn_id: int, reply_ts: str, done_key: str | None = None) -> None:
        """Record where the reply is; with ``done_key``, in the same statement the question is done
        (``question_done``)."""
        with self._conn() as conn:
            if done_key is None:
                conn.execute("UPDATE bot_turns SET reply_ts = %s WHERE workspace = %s AND id = %s",
                             (reply_ts, workspace, turn_id))
                return
            conn.execute("WITH turn AS (UPDATE bot_turns SET reply_ts = %s WHERE workspace = %s AND id = %s) "
                         + _QUESTION_DONE, (reply_ts, workspace, turn_id, workspace, done_key))

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


def job_owner() -> tuple[str, int]:
    """This process as a job owner: (host name + PID namespace, PID). Two processes with the same
    host part can see each other's PIDs, so a PID's liveness means something only between them."""
    host = socket.gethostname()
    try:
        host += "/" + os.readlink("/proc/self/ns/pid")
    except OSError:
        pass  # not Linux: the host name alone
    return host, os.getpid()


def _alive(pid: int | None) -> bool:
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, someone else's
    except OSError:
        return False
    return True


