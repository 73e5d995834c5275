"""Answer one question in its Slack thread: claim (dedup, history) → placeholder → ask → render → reply
→ record.

A new question costs eight statements on the database: the claim (which also joins the thread and
brings the turn's id, the searched documents' titles and a follow-up's history), the placeholder's
record, the pipeline's five (``retrieval.answer.ask``), and one that records the turn with its reply
and ends the question.

Runs on a worker thread, never on the socket thread. Whatever fails, the person who asked gets a
message that says what happened; nothing is guessed.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import TypeVar

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot import slack
from bot.render import Searched, render_answer, render_note, render_placeholder, render_problem
from bot.scope import scope_for
from bot.store import Claim, Store, TurnRecord
from retrieval.store.db import DatabaseError, IndexUnavailable
from retrieval.models import Answer, Turn
from retrieval.settings import Settings
from retrieval.text.question import without_control

log = logging.getLogger(__name__)

AskFn = Callable[..., Answer]
T = TypeVar("T")

DB_DOWN = ("I can't reach my database right now, so I can't search the handbooks. Nothing was guessed. "
           "Please ask again in a minute.")
UNEXPECTED = ("Something went wrong on my side while preparing the reply ({}). Nothing was guessed. "
              "Please ask again; if it keeps happening, tell the person who runs me.")
UNDELIVERED = ("I had a reply but Slack would not accept it, so it is not shown. Nothing was guessed. "
               "Please ask again; if it keeps happening, tell the person who runs me.")
ASK_AGAIN = ("I was interrupted (restarted) while answering this, more than once, so there is no answer. "
             "Nothing was guessed. Please ask again.")
MAX_ATTEMPTS = 2  # a question whose process died is answered again once; then the person is asked to ask again
PARTLY_DELIVERED = ("{} of the {} messages of my reply could not be posted, so the reply above is incomplete. "
                    "Please ask again to see all of it.")


@dataclass(frozen=True)
class Question:
    team: str
    channel: str
    user: str
    text: str  # the question, bot mention removed
    ts: str  # the question's message
    thread_ts: str  # the thread the reply goes to (the message itself for a new thread)

    @property
    def key(self) -> str:
        return f"{self.channel}:{self.ts}"

    @property
    def is_followup(self) -> bool:
        return self.thread_ts != self.ts


def strip_mentions(text: str, bot_user_id: str) -> str:
    """The question without the bot's mention, runs of white space, NUL and other control characters
    (a NUL cannot be stored in Postgres text: it used to fail the claim and read as an outage)."""
    return " ".join(without_control(re.sub(rf"<@{re.escape(bot_user_id)}(?:\|[^>]*)?>", " ", text)).split())


def default_ask() -> AskFn:
    from retrieval.answer.ask import ask  # noqa: PLC0415  (loads the models)

    return ask


class Answering:
    def __init__(self, settings: Settings, clients: Callable[[str], WebClient], store: Store,
                 ask: AskFn | None = None, io: Executor | None = None) -> None:
        """``clients(team)`` is the workspace's Web API client (``bot.clients.Clients``). ``io`` runs
        the Slack calls (placeholder, delivery), so a worker that answers never waits on Slack (a
        slow or rate-limited API): it posts the placeholder while the answer is computed and moves
        on to the next question while the reply is delivered. Without it they run inline."""
        self.settings, self.clients, self.store = settings, clients, store
        self._ask = ask
        self._io = io or InlineExecutor()
        # questions claimed by this process and not yet recorded as done (bot.inflight beats for them),
        # each with its reply's record (turn, reply ts) once it was replied to but recording that failed
        # (the database was down): tried again
        self._mine: dict[tuple[str, str], tuple[TurnRecord | None, str | None] | None] = {}
        self._lock = threading.Lock()

    def handle(self, q: Question) -> None:
        try:
            self.clients(q.team)
        except Exception as exc:  # noqa: BLE001  (not installed there, or the database is down: no way to reply)
            log.error("cannot reply in workspace %s: %s", q.team, exc)
            return
        scope = scope_for(self.settings, q.team, q.channel)
        try:
            claim = self.store.claim_question(q.team, q.key, dataclasses.asdict(q), thread=(q.channel, q.thread_ts),
                                              collections=scope.read, history_before=q.ts if q.is_followup else None)
        except DatabaseError as exc:
            log.warning("cannot dedup %s: %s", q.key, exc)
            self._problem(q, None, DB_DOWN)
            return
        if claim is None:
            log.info("already handled %s; ignoring the redelivery", q.key)
            return
        with self._lock:
            self._mine.setdefault((q.team, q.key), None)
        self._answer(q, self._io.submit(self._placeholder, q), claim)

    def resume(self, q: Question, placeholder_ts: str | None, attempt: int) -> None:
        """Answer a question whose process died while answering it (``bot.inflight`` adopted it for this
        process): in place of its placeholder if it has one; after ``MAX_ATTEMPTS``, or when its
        reply had gone out already, no new answer."""
        with self._lock:
            self._mine.setdefault((q.team, q.key), None)
        try:
            if self.store.replied(q.team, q.channel, q.ts):
                log.info("%s was answered before its process stopped", q.key)
                self._done(q)
                return
        except DatabaseError as exc:
            log.warning("cannot check %s: %s", q.key, exc)
            with self._lock:
                self._mine.pop((q.team, q.key), None)  # left to the next adoption (its heartbeat goes stale)
            return
        if attempt > MAX_ATTEMPTS:
            log.warning("%s interrupted %d times; asking the person to ask again", q.key, attempt - 1)
            self._problem(q, placeholder_ts, ASK_AGAIN)
            self._done(q)
            return
        log.info("answering %s, interrupted in a stopped process (attempt %d)", q.key, attempt)
        placeholder = (InlineExecutor().submit(lambda: placeholder_ts) if placeholder_ts
                       else self._io.submit(self._placeholder, q))
        scope = scope_for(self.settings, q.team, q.channel)
        try:
            claim: Claim | None = self.store.reclaim(q.team, thread=(q.channel, q.thread_ts), collections=scope.read,
                                                     history_before=q.ts if q.is_followup else None)
        except DatabaseError as exc:
            log.warning("database unavailable while answering %s: %s", q.key, exc)
            claim = None
        self._answer(q, placeholder, claim)

    def in_flight(self) -> list[tuple[str, str]]:
        """(workspace, event key) of the questions this process still owns."""
        with self._lock:
            return sorted(self._mine)

    def retry_done(self) -> None:
        """Record the replies whose recording failed earlier (the database was down)."""
        with self._lock:
            pending = [(k, record) for k, record in self._mine.items() if record is not None]
        for (team, key), (turn, reply_ts) in pending:
            self._record(team, key, turn, reply_ts)

    def _done(self, q: Question) -> None:
        """The person was told something other than an answer: the question is over, no turn recorded."""
        self._record(q.team, q.key, None, None)

    def _record(self, team: str, key: str, turn: TurnRecord | None, reply_ts: str | None) -> None:
        """The turn (if any) with where its reply is, and the question done: one statement; kept for
        ``retry_done`` while the database is away."""
        with self._lock:
            self._mine[(team, key)] = (turn, reply_ts)
        try:
            self.store.finish_question(team, key, turn, reply_ts)
        except IndexUnavailable as exc:
            log.info("could not record %s as answered yet: %s", key, exc)
            return
        except DatabaseError as exc:  # not an outage: the turn cannot be recorded, the question still ends
            log.error("could not record the turn of %s: %s", key, exc)
            if turn is not None:
                self._record(team, key, None, None)
            return
        with self._lock:  # recorded: this process no longer owns the question
            self._mine.pop((team, key), None)

    def _answer(self, q: Question, placeholder: Future[str | None], claim: Claim | None) -> None:
        try:
            messages, turn = self._prepare(q, claim)
        except Exception as exc:  # noqa: BLE001  (a bug must not leave "Looking through…" behind)
            log.exception("preparing the reply to %s failed", q.key)
            messages, turn = [render_problem(UNEXPECTED.format(type(exc).__name__))], None
        self._io.submit(self._deliver, q, placeholder, messages, turn)

    def _deliver(self, q: Question, placeholder: Future[str | None], messages: Sequence[slack.SlackMessage],
                 turn: TurnRecord | None) -> None:
        first_ts = self._finish(q, placeholder.result(), messages)
        self._record(q.team, q.key, turn, first_ts)

    def _prepare(self, q: Question, claim: Claim | None) -> tuple[list[slack.SlackMessage], TurnRecord | None]:
        """Ask → render: the reply's messages and the turn to record once it is out (None: no answer).
        ``claim`` None: the database was away when the question was taken up."""
        if claim is None:
            return [render_problem(DB_DOWN)], None
        scope = scope_for(self.settings, q.team, q.channel)
        answer = self.ask(q.text, claim.history, scope.read)
        turn = TurnRecord(claim.turn_id, q.channel, q.thread_ts, q.ts, q.user, answer, scope.read)
        shown = {c.document for c in answer.citations} | {n.document for n in answer.nearest}
        docs = claim.titles if answer.refusal else {n: t for n, t in claim.titles.items() if n in shown}
        searched = Searched(scope.read, list(docs) if answer.refusal else (), titles=docs)
        return render_answer(answer, turn_id=claim.turn_id, searched=searched), turn

    def ask(self, question: str, history: Sequence[Turn], collections: Sequence[str]) -> Answer:
        """The shared pipeline, guarded: it should never raise, but a bug must not kill the reply."""
        try:
            fn = self._ask or default_ask()
            return fn(self.settings, question, history=list(history), collections=list(collections))
        except Exception as exc:  # noqa: BLE001
            log.exception("answering failed")
            return Answer(question=question, refusal=True,
                          reason=f"Something went wrong while answering ({type(exc).__name__}); "
                                 "no answer is given rather than an unchecked one.")

    def _placeholder(self, q: Question) -> str | None:
        try:
            ts = slack.post(self.clients(q.team), q.channel, render_placeholder(), q.thread_ts)
        except Exception as exc:  # noqa: BLE001
            log.warning("could not post the placeholder for %s: %s", q.key, _error(exc))
            return None
        try:  # so that a process taking over this question replaces it (bot.inflight)
            self.store.set_placeholder(q.team, q.key, ts)
        except DatabaseError as exc:
            log.info("placeholder of %s not recorded: %s", q.key, exc)
        return ts

    def _finish(self, q: Question, placeholder: str | None, messages: Sequence[slack.SlackMessage]) -> str | None:
        """Deliver the reply; never raises. Returns the ts of its first message, if it got out.

        The first message replaces the placeholder; when that update fails it is posted as a new
        thread message and the placeholder is removed. If the first message cannot be delivered at
        all, nothing more is posted: the placeholder becomes a problem message instead. A later
        message that fails is noted in the thread, so a reader knows the reply is incomplete.
        """
        if not messages:
            messages = [render_problem(UNEXPECTED.format("empty reply"))]
        try:
            first_ts = self._show(q, placeholder, messages[0])
        except Exception as exc:  # noqa: BLE001
            log.error("could not post the reply to %s: %s", q.key, _error(exc))
            self._problem(q, placeholder, UNDELIVERED)
            return None
        if placeholder and first_ts != placeholder:
            self._retire(q, placeholder)
        lost = 0
        for i, msg in enumerate(messages[1:], start=2):
            try:
                slack.post(self.clients(q.team), q.channel, msg, q.thread_ts)
            except Exception as exc:  # noqa: BLE001
                lost += 1
                log.error("could not post reply %d/%d for %s: %s", i, len(messages), q.key, _error(exc))
        if lost:
            self._problem(q, None, PARTLY_DELIVERED.format(lost, len(messages)))
        return first_ts

    def _show(self, q: Question, placeholder: str | None, msg: slack.SlackMessage) -> str:
        """``msg`` in place of the placeholder if possible, else as a new message in the thread; its ts.
        Raises when it cannot be posted either."""
        if placeholder:
            try:
                slack.update(self.clients(q.team), q.channel, placeholder, msg)
                return placeholder
            except Exception as exc:  # noqa: BLE001
                log.warning("could not update the placeholder for %s (%s); posting a new message instead",
                            q.key, _error(exc))
        return slack.post(self.clients(q.team), q.channel, msg, q.thread_ts)

    def _retire(self, q: Question, placeholder: str) -> None:
        """The reply went out as a new message: delete the placeholder (or at least say where the reply is)."""
        try:
            self.clients(q.team).chat_delete(channel=q.channel, ts=placeholder)
            return
        except Exception as exc:  # noqa: BLE001
            log.info("could not delete the placeholder for %s: %s", q.key, _error(exc))
        try:
            slack.update(self.clients(q.team), q.channel, placeholder, render_note("My reply is below."))
        except Exception as exc:  # noqa: BLE001
            log.warning("placeholder for %s left as is: %s", q.key, _error(exc))

    def _problem(self, q: Question, placeholder: str | None, text: str) -> None:
        """Show a problem message: in place of the placeholder if possible, else as a new message."""
        try:
            self._show(q, placeholder, render_problem(text))
        except Exception as exc:  # noqa: BLE001
            log.error("could not tell %s about the problem: %s", q.key, _error(exc))


class InlineExecutor(Executor):
    """Runs each task at once in the caller's thread (tests, and ``Answering`` without an ``io``)."""

    def submit(self, fn: Callable[..., T], /, *args: object, **kwargs: object) -> Future[T]:  # type: ignore[override]
        future: Future[T] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001
            future.set_exception(exc)
        return future


def _error(exc: BaseException) -> str:
    """A Slack API error's code, else the exception's type (no message: it may carry payloads)."""
    return str(exc.response.get("error")) if isinstance(exc, SlackApiError) else type(exc).__name__
