"""The Bolt app: small listeners that acknowledge at once and hand the work to worker threads.

Events (``app_mention``, ``message``) are acknowledged by Bolt before the listener runs; commands
and button presses call ``ack()`` first thing, except ``/chapterverse ingest`` and ``remove``: they
are checked (``bot.authz``: may this person change documents?) and queued as a row in Postgres
(``bot.queue``) before the acknowledgement, so an acknowledged change is never lost; both run on
their own thread within ``ACK_BUDGET_S`` (if slower, the acknowledgement says the result follows).
Listeners run on Bolt's worker threads, never on the socket's. Questions go to the answer pool,
whose backlog is bounded (``CHAPTERVERSE_SLACK_ANSWER_BACKLOG``), unless their asker is over the
per-person limit (``bot.limits``): a question turned away gets a reply saying so at once;
shared files (claimed and queued in one transaction), thread checks, feedback and listing to the
quick pool. Jobs run on a job runner (``bot.runner``), in this process or a separate worker.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

from slack_bolt import Ack, App, BoltContext, Respond
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped
from slack_sdk.errors import SlackApiError

from bot import render, slack, urls
from bot.answer import Answering, Question, strip_mentions
from bot.authz import EVERYONE, Authorizer, listed_for
from bot.clients import Clients
from bot.digest import BadSince, parse_since
from bot.digest import as_mrkdwn as digest_mrkdwn
from bot.digest import digest as build_digest
from bot.jobs import Jobs, Requester, ephemeral_reporter
from bot.limits import RateLimiter
from bot.slack import Leave, make_client
from bot.store import Store
from bot.workers import BacklogFull, WorkerPool
from ingest.sources import is_url
from retrieval.store.db import DatabaseError
from retrieval.settings import Settings

log = logging.getLogger(__name__)

FOLLOWUP_SUBTYPES = (None, "thread_broadcast", "file_share")
MAX_THREAD_SCAN = 200  # replies fetched to see whether the bot is in a thread when the database is down
ACK_BUDGET_S = 2.5  # a slash ingest/remove is checked and queued before its acknowledgement, within this
BUSY = ("I'm busy with other questions right now and have not looked at this one. Please try again in a minute.")
RATE_LIMITED = ("You've asked me {} questions in the last minute, as many as I take from one person. "
                "I have not looked at this one: please ask again in a minute.")


@dataclass
class Bot:
    """Everything the listeners need."""

    settings: Settings
    clients: Clients  # the Web API client of each workspace
    store: Store
    answering: Answering
    jobs: Jobs
    answers: WorkerPool  # questions (bounded: CHAPTERVERSE_SLACK_ANSWER_BACKLOG)
    quick: WorkerPool  # thread checks, feedback, listing


def is_pdf(file: dict[str, Any]) -> bool:
    return file.get("mimetype") == "application/pdf" or str(file.get("name", "")).lower().endswith(".pdf")


def unwrap_url(text: str) -> str:
    """Slack sends links as <https://…> or <https://…|label>."""
    m = re.fullmatch(r"<([^|>]+)(?:\|[^>]*)?>", text.strip())
    return m.group(1) if m else text.strip()


def within(budget_s: float, work: Callable[[], str], late: Callable[[str], None], name: str) -> str | None:
    """Run ``work`` on its own thread; its text if it finishes within ``budget_s``, else None, and
    ``late`` gets the text when it does finish (Slack's acknowledgement cannot wait longer)."""
    fut: Future[str] = Future()

    def run() -> None:
        try:
            text = work()
        except Exception:  # noqa: BLE001
            log.exception("%s failed", name)
            text = ":x: Something went wrong on my side; nothing was changed. Please try again."
        fut.set_result(text)

    threading.Thread(target=run, name=name, daemon=True).start()
    try:
        return fut.result(timeout=budget_s)
    except FutureTimeout:
        fut.add_done_callback(lambda f: late(f.result()))
        return None


# Bolt reads SLACK_BOT_TOKEN from the environment itself and warns that it goes unused because a
# client is given; that client carries the same token, so the warning is noise at every start.
_NOT_NEWS = Leave(lambda record: record.getMessage() == warning_client_prioritized_and_token_skipped())


def digest_refusal(settings: Settings, team: str, user_id: str) -> str | None:
    """The digest shows questions from every channel of the workspace, private channels and DMs
    included: only the people CHAPTERVERSE_SLACK_ADMINS names for this workspace may see it (none
    named: nobody; '*', which opens ingest and remove to everyone, does not open the digest)."""
    allowed = listed_for(settings, team) - {EVERYONE}
    if not allowed:
        return ("The digest lists questions from every channel, DMs included, so only admins may see it, and "
                "none are set: list their Slack user ids in CHAPTERVERSE_SLACK_ADMINS (or run "
                "`chapterverse digest` on the server).")
    if user_id not in allowed:
        return (f"Sorry, only the admins ({', '.join(f'<@{u}>' for u in sorted(allowed))}) can see the digest: it "
                "lists questions from every channel, DMs included.")
    return None


def quickly(pool: WorkerPool, fn: Callable[..., Any], *args: Any) -> bool:
    """``pool.submit(fn, *args)``; when its backlog is full (a burst of events), the task is dropped
    and logged, never queued without bound. False when dropped."""
    try:
        pool.submit(fn, *args)
    except BacklogFull as exc:
        log.warning("%s; dropped %s", exc, getattr(fn, "__name__", "a task"))
        return False
    return True


def build_app(bot: Bot, *, logger: logging.Logger | None = None, **auth: Any) -> App:
    """``auth``: extra ``App`` arguments for multi-workspace mode (installation store, OAuth
    settings); without them the app uses the single bot token's client."""
    client = make_client(bot.settings, None) if auth else bot.clients.for_team("")
    logger = logger or logging.getLogger("slack_bolt")
    logger.addFilter(_NOT_NEWS)  # once: a logger keeps one of each filter
    authz = Authorizer(bot.settings, bot.clients)  # who may add and remove documents
    limiter = RateLimiter(bot.settings.slack.user_questions_per_minute)  # questions per person
    app = App(client=client, process_before_response=False, ignoring_self_events_enabled=True,
              logger=logger, **auth)

    def question(event: dict[str, Any], context: BoltContext) -> Question:
        ts = str(event["ts"])
        return Question(team=str(context.team_id or event.get("team") or ""), channel=str(event["channel"]),
                        user=str(event.get("user", "")),
                        text=strip_mentions(str(event.get("text", "")), str(context.bot_user_id)),
                        ts=ts, thread_ts=str(event.get("thread_ts") or ts))

    def take(q: Question, files: list[dict[str, Any]]) -> None:
        """A message addressed to the bot: a shared PDF to ingest, a question, or an empty hello."""
        pdfs = [f for f in files if is_pdf(f)]
        if pdfs:
            quickly(bot.quick, share_files, q, pdfs)
        elif files and not q.text:
            quickly(bot.quick, reply_problem, q, "I can only read PDF files. Share a PDF, or ask me a question.")
        elif not q.text:
            quickly(bot.quick, reply_help, q)
        else:
            answer_later(q)

    def answer_later(q: Question) -> None:
        """To the answer workers, unless this person asked too often or the backlog is full: then a
        short reply saying so, at once (never a question waiting for ever)."""
        if not limiter.allow(q.team, q.user, q.key):
            log.info("rate limit: %s asked more than %d questions in a minute", q.user, limiter.per_window)
            quickly(bot.quick, turn_away, q, RATE_LIMITED.format(limiter.per_window))
            return
        try:
            bot.answers.submit(bot.answering.handle, q)
        except BacklogFull:
            log.warning("answer backlog full (%d waiting); turning away %s", bot.answers.backlog or 0, q.key)
            quickly(bot.quick, turn_away, q, BUSY)

    def first_time(q: Question) -> bool:
        """False for a redelivery of a message handled (or turned away) already; True when the
        database cannot say (the reply is sent anyway)."""
        try:
            return bot.store.claim_event(q.team, q.key)
        except DatabaseError:
            return True

    def turn_away(q: Question, text: str) -> None:
        if first_time(q):
            reply_problem(q, text)

    @app.event("app_mention")
    def on_mention(event: dict[str, Any], context: BoltContext) -> None:
        take(question(event, context), list(event.get("files") or []))

    @app.event("message")
    def on_message(event: dict[str, Any], context: BoltContext) -> None:
        if event.get("subtype") not in FOLLOWUP_SUBTYPES or event.get("bot_id") or not event.get("user"):
            return  # edits, deletions, joins, other bots
        q = question(event, context)
        if event.get("channel_type") == "im":
            take(q, list(event.get("files") or []))
            return
        if f"<@{context.bot_user_id}" in str(event.get("text", "")):
            return  # the app_mention event for the same message handles it
        if not q.is_followup or not q.text:
            return  # top-level channel chatter is not for us
        quickly(bot.quick, maybe_followup, q, str(context.bot_user_id))

    def maybe_followup(q: Question, me: str) -> None:
        if in_bot_thread(q, me):
            answer_later(q)

    def in_bot_thread(q: Question, me: str) -> bool:
        try:
            return bot.store.in_thread(q.team, q.channel, q.thread_ts)
        except DatabaseError:
            pass
        # The database is down: ask Slack whether the bot wrote in this thread, so the person still
        # hears that the bot cannot answer right now instead of silence.
        try:
            resp = bot.clients(q.team).conversations_replies(channel=q.channel, ts=q.thread_ts, limit=MAX_THREAD_SCAN)
        except SlackApiError:
            return False
        return any(m.get("user") == me for m in resp.get("messages", []))

    def share_files(q: Question, files: list[dict[str, Any]]) -> None:
        who = Requester(q.team, q.channel, q.user)
        decision = authz.check(q.team, q.user)
        if not decision.allowed:
            if not first_time(q):
                return
            ephemeral_reporter(bot.clients(q.team), who, thread_ts=q.thread_ts)(decision.why)
            log.info("refused a shared PDF from %s in %s: not allowed to change documents", q.user, q.team)
            return
        # the message is claimed and its jobs queued in one transaction
        bot.jobs.ingest_files(who, [(str(f["id"]), str(f.get("name") or f["id"])) for f in files], q.thread_ts,
                              claim=q.key)

    def reply_problem(q: Question, text: str) -> None:
        slack.post(bot.clients(q.team), q.channel, render.render_problem(text), q.thread_ts)

    def reply_help(q: Question) -> None:
        slack.post(bot.clients(q.team), q.channel, render.SlackMessage("How to use me", [render.section(render.HELP)]),
                   q.thread_ts)

    @app.command(re.compile(r"^/.+"))
    def on_command(ack: Ack, command: dict[str, Any], respond: Respond, context: BoltContext) -> None:
        words = str(command.get("text", "")).strip().split(maxsplit=1)
        verb = words[0].lower() if words else "help"
        arg = words[1].strip() if len(words) > 1 else ""
        who = Requester(str(context.team_id or command.get("team_id")), str(command["channel_id"]),
                        str(command["user_id"]))
        report = ephemeral_reporter(bot.clients(who.team), who, respond)
        response_url = command.get("response_url")
        if verb in ("ingest", "remove"):
            url = unwrap_url(arg)
            if verb == "ingest" and not is_url(url):
                ack("Usage: `/chapterverse ingest <https://…/handbook.pdf>` (or share a PDF with me in a mention).")
                return
            if verb == "remove" and not arg:
                ack("Usage: `/chapterverse remove <document name>` (`/chapterverse list` shows the names).")
                return

            def change() -> str:
                """Who may, what may be fetched, then the job's row in Postgres: all before the acknowledgement."""
                decision = authz.check(who.team, who.user)
                if not decision.allowed:
                    log.info("refused %s by %s in %s: not allowed to change documents", verb, who.user, who.team)
                    return decision.why
                if verb == "remove":
                    return bot.jobs.remove(who, arg, response_url).text
                why = urls.refusal(bot.settings, url)  # a name's addresses are checked when the job connects
                return why or bot.jobs.ingest_url(who, url, response_url).text

            text = within(ACK_BUDGET_S, change, report, f"slash-{verb}")
            ack(text if text is not None else
                f":hourglass_flowing_sand: Checking and queueing your {verb}; I'll tell you here in a moment "
                "(only you see this).")
        elif verb == "list":
            ack()
            quickly(bot.quick, bot.jobs.list_documents, who, report)
        elif verb == "digest":
            why = digest_refusal(bot.settings, who.team, who.user)
            if why:
                ack(why)
                return
            try:
                start = parse_since(arg or "7d")
            except BadSince as exc:
                ack(f"{exc}. Usage: `/chapterverse digest [7d]`.")
                return
            ack()
            quickly(bot.quick, send_digest, who, start, report)
        elif verb == "help":
            ack(render.HELP)
        else:
            ack(f"I don't know `{verb}`.\n{render.HELP}")

    def send_digest(who: Requester, start: Any, report: Any) -> None:
        try:
            found = bot.store.run(lambda conn: build_digest(conn, start, workspace=who.team))
        except DatabaseError as exc:
            report(f":x: Could not build the digest: {exc}. Please try again later.")
            return
        report(digest_mrkdwn(found))

    def on_feedback(ack: Ack, body: dict[str, Any], action: dict[str, Any], context: BoltContext) -> None:
        ack()
        rating = 1 if action["action_id"] == render.FEEDBACK_UP else -1
        quickly(bot.quick, record_feedback, body, action, str(context.team_id or body["team"]["id"]), rating)

    def record_feedback(body: dict[str, Any], action: dict[str, Any], team: str, rating: int) -> None:
        user = str(body["user"]["id"])
        channel = str((body.get("channel") or {}).get("id") or body["container"]["channel_id"])
        thread_ts = (body.get("container") or {}).get("thread_ts")
        try:
            known = bot.store.record_feedback(team, int(action["value"]), user, rating)
            text = (f"Thanks, noted {'👍' if rating > 0 else '👎'} for this answer." if known
                    else "I no longer know that answer, so I couldn't record your vote.")
        except (DatabaseError, ValueError) as exc:
            log.warning("feedback not recorded: %s", exc)
            text = "I couldn't record that right now (my database is unavailable). Please try again later."
        try:
            slack.ephemeral(bot.clients(team), channel, user, text, thread_ts)
        except SlackApiError as exc:
            log.warning("could not acknowledge feedback: %s", exc.response.get("error"))

    app.action(render.FEEDBACK_UP)(on_feedback)
    app.action(render.FEEDBACK_DOWN)(on_feedback)

    @app.error
    def on_error(error: Exception) -> None:
        log.error("listener failed: %s: %s", type(error).__name__, error)

    return app
