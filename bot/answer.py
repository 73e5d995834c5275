"""Answer one question in its Slack thread: dedup → placeholder → history → ask → render → reply.

Runs on a worker thread, never on the socket thread. Whatever fails, the person who asked gets a
message that says what happened; nothing is guessed.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot import slack
from bot.render import Searched, render_answer, render_placeholder, render_problem
from bot.scope import scope_for
from bot.store import Store
from retrieval.db import DatabaseError
from retrieval.models import Answer, Turn
from retrieval.settings import Settings

log = logging.getLogger(__name__)

AskFn = Callable[..., Answer]

DB_DOWN = ("I can't reach my database right now, so I can't search the handbooks. Nothing was guessed. "
           "Please ask again in a minute.")


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
    return " ".join(re.sub(rf"<@{re.escape(bot_user_id)}(?:\|[^>]*)?>", " ", text).split())


def default_ask() -> AskFn:
    from retrieval.ask import ask  # noqa: PLC0415  (loads the models)

    return ask


class Answering:
    def __init__(self, settings: Settings, client: WebClient, store: Store, ask: AskFn | None = None) -> None:
        self.settings, self.client, self.store = settings, client, store
        self._ask = ask

    def handle(self, q: Question) -> None:
        try:
            if not self.store.claim_event(q.team, q.key):
                log.info("already handled %s; ignoring the redelivery", q.key)
                return
        except DatabaseError as exc:
            log.warning("cannot dedup %s: %s", q.key, exc)
            self._reply_problem(q, DB_DOWN)
            return
        placeholder = self._placeholder(q)
        try:
            self.store.join_thread(q.team, q.channel, q.thread_ts)
            history = self.store.history(q.team, q.channel, q.thread_ts, q.ts) if q.is_followup else []
        except DatabaseError as exc:
            log.warning("database unavailable while answering %s: %s", q.key, exc)
            self._finish(q, placeholder, [render_problem(DB_DOWN)])
            return
        scope = scope_for(self.settings, q.team, q.channel)
        answer = self.ask(q.text, history, scope.read)
        turn_id = self._save(q, answer, scope.read)
        searched = Searched(scope.read, self._documents(scope.read) if answer.refusal else ())
        messages = render_answer(answer, turn_id=turn_id, searched=searched)
        first_ts = self._finish(q, placeholder, messages)
        if turn_id is not None and first_ts:
            try:
                self.store.set_reply_ts(q.team, turn_id, first_ts)
            except DatabaseError:
                pass  # only bookkeeping

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

    def _save(self, q: Question, answer: Answer, collections: Sequence[str]) -> int | None:
        try:
            return self.store.save_turn(q.team, q.channel, q.thread_ts, q.ts, q.user, answer, collections)
        except DatabaseError as exc:
            log.warning("could not store the turn for %s: %s", q.key, exc)
            return None  # the answer is still shown, without feedback buttons

    def _documents(self, collections: Sequence[str]) -> list[str]:
        from ingest.store import list_documents  # noqa: PLC0415

        try:
            return [r["name"] for c in collections for r in self.store.run(lambda conn, c=c: list_documents(conn, c))]
        except DatabaseError:
            return []

    def _placeholder(self, q: Question) -> str | None:
        try:
            return slack.post(self.client, q.channel, render_placeholder(), q.thread_ts)
        except SlackApiError as exc:
            log.warning("could not post the placeholder for %s: %s", q.key, exc.response.get("error"))
            return None

    def _finish(self, q: Question, placeholder: str | None, messages: Sequence[slack.SlackMessage]) -> str | None:
        """Replace the placeholder with the first message and post the rest in the thread."""
        first_ts = None
        for i, msg in enumerate(messages):
            try:
                if i == 0 and placeholder:
                    slack.update(self.client, q.channel, placeholder, msg)
                    first_ts = placeholder
                else:
                    ts = slack.post(self.client, q.channel, msg, q.thread_ts)
                    first_ts = first_ts or ts
            except SlackApiError as exc:
                log.error("could not post reply %d/%d for %s: %s", i + 1, len(messages), q.key,
                          exc.response.get("error"))
        return first_ts

    def _reply_problem(self, q: Question, text: str) -> None:
        self._finish(q, None, [render_problem(text)])
