"""Run the bot: `chapterverse bot`, `python -m bot` or the Procfile's worker.

Connects over Socket Mode (no public URL needed), loads the models in the background so the socket
is up at once, and exits cleanly on SIGTERM/Ctrl-C (the embedded Postgres, if any, is stopped by its
atexit hook on the way out).
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, NoReturn, TypeVar
from urllib.error import URLError

from pydantic import SecretStr
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_bolt.error import BoltError
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.answer import Answering, default_ask
from bot.app import Bot, build_app
from bot.clients import Clients
from bot.inflight import InFlightKeeper
from bot.digest import DigestPoster
from bot.installations import PostgresInstallationStore
from bot.jobs import Jobs
from bot.oauth import app_auth, multi_workspace, serve_install_pages
from bot.queue import JobQueue
from bot.runner import JobRunner
from bot.slack import Leave, RedactTokens
from bot.startup import settle
from bot.store import Store
from bot.workers import WorkerPool
from retrieval.answer.answerers.registry import choose_answerer
from retrieval.answer.answerers import unconfigured
from retrieval.store.db import DatabaseError, first_line
from retrieval.logs import log_handler, quiet_libraries
from retrieval.settings import Settings
from retrieval.text.urls import shown_url

T = TypeVar("T")
log = logging.getLogger("bot")


class ConfigError(RuntimeError):
    """The bot cannot start as configured: one line for the operator."""


def stop_on_signals() -> threading.Event:
    """An event that SIGTERM and Ctrl-C set, so a process shuts down cleanly (jobs, sockets, Postgres)."""
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        log.info("signal %d: shutting down", signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return stop


def setup_logging(verbose: bool) -> None:
    handler = log_handler("%(asctime)s %(levelname)s %(name)s: %(message)s", sys.stderr)  # controls shown, not obeyed
    handler.addFilter(RedactTokens())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO if verbose else logging.WARNING)
    logging.getLogger("bot").setLevel(logging.INFO)
    quiet_libraries()


def secret(value: SecretStr | None) -> str:
    return value.get_secret_value().strip() if value else ""


def tokens(settings: Settings) -> tuple[str | None, str]:
    """(bot token, or None in multi-workspace mode; app-level token)."""
    bot_token, app_token = secret(settings.slack.bot_token), secret(settings.slack.app_token)
    multi = multi_workspace(settings)
    if not app_token or not (bot_token or multi):
        raise ConfigError("SLACK_BOT_TOKEN (xoxb-…) and SLACK_APP_TOKEN (xapp-…, with connections:write) must be "
                          "set (or SLACK_CLIENT_ID/SLACK_CLIENT_SECRET instead of SLACK_BOT_TOKEN for several "
                          "workspaces); see the README's Slack app setup")
    if not app_token.startswith("xapp-"):
        raise ConfigError("SLACK_APP_TOKEN must be an app-level token (starts with xapp-)")
    if multi and bot_token:
        log.info("multi-workspace mode: SLACK_BOT_TOKEN is ignored; tokens come from the installations")
    return (None if multi else bot_token), app_token


CHECK_TIMEOUT_S = 10  # how long the start-up check waits for Slack
# Slack's answers that mean "this token is not (or no longer) good": the operator must fix it
TOKEN_REJECTED = {"invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired",
                  "not_allowed_token_type", "invalid_token", "no_permission", "missing_scope", "team_access_not_granted",
                  "ekm_access_denied", "org_login_required"}


def check_slack(settings: Settings, bot_token: str | None) -> dict[str, Any]:
    """Before anything else starts (database, models): can Slack be reached at SLACK_API_URL, and does it
    accept SLACK_BOT_TOKEN? One call (``auth.test``; ``api.test`` in multi-workspace mode, which has no
    bot token of its own), no retries, the SDK's own error logging silenced: a problem is one
    ConfigError line ("could not reach Slack at …", "Slack rejected SLACK_BOT_TOKEN (invalid_auth)").
    Returns auth.test's answer (team id, workspace URL) or {}."""
    quiet = logging.getLogger("bot.slack_check")
    quiet.disabled = True
    where = shown_url(settings.slack.api_url)
    base = settings.slack.api_url if settings.slack.api_url.endswith("/") else settings.slack.api_url + "/"
    client = WebClient(token=bot_token, base_url=base, timeout=CHECK_TIMEOUT_S, logger=quiet, retry_handlers=[])
    try:
        resp = client.auth_test() if bot_token else client.api_test()
    except SlackApiError as exc:
        data = exc.response.data
        # Slack's error codes are identifiers ("invalid_auth"); the SDK puts "Received a response in a
        # non-JSON format: <the page>" there when the server is some other web server
        if not isinstance(data, dict) or not re.fullmatch(r"[a-z0-9_.]+", str(data.get("error") or "")):
            raise ConfigError(f"could not reach Slack at {where} (HTTP {exc.response.status_code}, not a Slack "
                              "Web API answer; check SLACK_API_URL)") from None
        code = str(data["error"])
        if bot_token and code in TOKEN_REJECTED:
            raise ConfigError(f"Slack rejected SLACK_BOT_TOKEN ({code})") from None
        raise ConfigError(f"Slack at {where} answered with an error ({code})") from None
    except (URLError, OSError) as exc:  # the reason as the OS or server put it, no traceback
        reason = exc.reason if isinstance(exc, URLError) else exc
        text = reason.strerror if isinstance(reason, OSError) and reason.strerror else first_line(reason)
        raise ConfigError(f"could not reach Slack at {where} ({text})") from None
    except Exception as exc:  # noqa: BLE001  (not JSON: the URL is not a Slack Web API)
        raise ConfigError(f"could not reach Slack at {where} (the answer is not from the Slack Web API: "
                          f"{type(exc).__name__}); check SLACK_API_URL") from None
    return dict(resp.data) if isinstance(resp.data, dict) else {}


def prepare_database(store: Store) -> None:
    try:
        store.ensure_ready()
    except DatabaseError as exc:
        log.warning("database not available yet (%s); answering will resume when it is", exc)


def until_stopped(stop: threading.Event, what: str, attempt: Callable[[], T],
                  errors: tuple[type[Exception], ...], reason: Callable[[Exception], str]) -> T | None:
    """``attempt()`` until it returns, retried after a doubling wait (1 s, up to 30 s) while it raises one
    of ``errors``, each failure logged as "<what> (<reason>)"; None when ``stop`` is set first. A
    ConfigError is never retried: the operator must fix it."""
    delay = 1.0
    while not stop.is_set():
        try:
            return attempt()
        except errors as exc:
            if isinstance(exc, ConfigError):
                raise
            log.error("%s (%s); retrying in %.0f s", what, reason(exc), delay)
            stop.wait(delay)
            delay = min(delay * 2, 30.0)
    return None


def connect(handler: SocketModeHandler, stop: threading.Event) -> None:
    """First connection; later reconnects are the Socket Mode client's own (ping/pong watchdog). An
    app-level token Slack rejects is a ConfigError (exit 2), not something to retry."""
    # the Socket Mode client's own multi-line error for a failed apps.connections.open is left out
    # while the first connection is opened: this reports it in one line (or exits)
    said_by_us = Leave(lambda record: str(record.msg).startswith("Failed to retrieve WSS URL"))

    def once() -> None:
        handler.client.logger.addFilter(said_by_us)
        try:
            handler.connect()
        except SlackApiError as exc:
            code = str(exc.response.get("error") or "")
            if code in TOKEN_REJECTED:
                raise ConfigError(f"Slack rejected SLACK_APP_TOKEN ({code}); it must be an app-level token "
                                  "with connections:write, and Socket Mode must be on") from None
            raise
        finally:
            handler.client.logger.removeFilter(said_by_us)

    def reason(exc: Exception) -> str:
        return str(exc.response.get("error") or "") if isinstance(exc, SlackApiError) else type(exc).__name__

    until_stopped(stop, "cannot open the Socket Mode connection", once, (Exception,), reason)


CONNECT_THREAD = "slack-connect"
CLOSE_THREAD = "slack-close"
WARM_UP_THREAD = "warm-up"
CLOSE_WAIT_S = 5.0  # how long a stopping bot waits for the Socket Mode client to close
SLACK_IO_WAIT_S = 10.0  # how long it waits for replies already being posted
WARM_UP_JOIN_S = 3.0  # how long a stopping bot waits for a model load in progress


def connected(handler: SocketModeHandler, stop: threading.Event) -> bool:
    """``connect`` on a thread of its own, so that a stop while the connection is being opened (a
    handshake Slack is slow to answer, which blocks in a socket read the signal cannot interrupt)
    is not stuck behind it. True once connected; False when stopped first. A ConfigError from the
    connection is raised here."""
    done: Future[None] = Future()

    def attempt() -> None:
        try:
            connect(handler, stop)
            if stop.is_set():  # connected after the stop closed the client: this session is closed too
                handler.close()
            done.set_result(None)
        except BaseException as exc:  # noqa: BLE001  (handed to the main thread)
            done.set_exception(exc)

    threading.Thread(target=attempt, name=CONNECT_THREAD, daemon=True).start()
    while not stop.is_set():
        try:
            done.result(timeout=0.5)
        except TimeoutError:
            continue
        return not stop.is_set()
    return False


def finished_within(work: Callable[[], object], seconds: float, name: str) -> bool:
    """``work()`` on a daemon thread named ``name``, waited for at most ``seconds``; whether it finished.
    For the parts of a stop that may not return: slack_sdk's ``close()`` joins its session threads without
    a timeout (a receive thread stuck in a half-open connection holds the lock it needs), and a reply
    being posted waits on Slack."""
    thread = threading.Thread(target=work, name=name, daemon=True)
    thread.start()
    thread.join(seconds)
    return not thread.is_alive()


def still_running() -> list[str]:
    """The bot's own threads a normal exit would wait on or abort under: a model still loading (the
    interpreter's teardown aborts while torch is importing), a connection still opening or closing."""
    names = {CONNECT_THREAD, CLOSE_THREAD, WARM_UP_THREAD}
    return sorted(t.name for t in threading.enumerate() if t.name in names and t.is_alive())


def leave_now(status: int) -> NoReturn:
    """Exit at once, past the interpreter's teardown (which hangs or aborts with the threads above
    still running): the atexit hooks run first (the embedded Postgres's stop), the logs are flushed."""
    atexit._run_exitfuncs()  # noqa: SLF001  (what a normal exit runs; os._exit alone would skip it)
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(status)


def warm_up(settings: Settings) -> None:
    """Load the embedding model and the answering pipeline before the first question needs them."""
    t0 = time.perf_counter()
    try:
        from retrieval.encode.embed import get_embedder  # noqa: PLC0415

        default_ask()
        get_embedder(settings.search.embedding_model)
        log.info("models loaded in %.1f s", time.perf_counter() - t0)
    except Exception as exc:  # noqa: BLE001  (answers will report the problem)
        log.error("could not load the models: %s", exc)


EXTRACTIVE_WORKERS = 4  # answer workers when the extractive answerer answers: its work is CPU
MODEL_WORKERS = 24  # when a model answers: a worker mostly waits for it; a burst of 20 is answered at once (results/speed/mentions_load.md)


def answer_workers(settings: Settings) -> int:
    """Questions the bot answers at once: ``CHAPTERVERSE_SLACK_WORKERS``, else by the answerer configured."""
    if settings.slack.workers is not None:
        return settings.slack.workers
    return EXTRACTIVE_WORKERS if choose_answerer(settings, None) == "extractive" else MODEL_WORKERS


def run(settings: Settings) -> None:
    bot_token, app_token = tokens(settings)
    if settings.answer.answerer and (missing := unconfigured(settings, settings.answer.answerer)):
        raise ConfigError(f"CHAPTERVERSE_ANSWERER={settings.answer.answerer} needs {missing}")
    me = check_slack(settings, bot_token)
    if me.get("team_id"):
        log.info("Slack accepted the bot token: workspace %s (%s), bot user %s", me.get("team") or "?",
                 me["team_id"], me.get("user") or me.get("user_id") or "?")
    workers = answer_workers(settings)
    settings = settings.but(slack={"workers": workers})
    if settings.db.pool_size is None:  # one pool for searches and bot state, sized to the workers
        settings = settings.but(db={"pool_size": 2 * workers + 6})
    stop = stop_on_signals()

    store = Store(settings)
    prepare_database(store)
    # the collection questions search and Slack ingests fill, and the start line naming the index
    settings = settle(settings, store, str(me.get("team_id") or ""))
    if me.get("team_id") and me.get("url"):
        try:
            store.remember_workspace(str(me["team_id"]), str(me.get("team") or ""), str(me["url"]))
        except DatabaseError as exc:
            log.info("workspace address not recorded (%s); digest links will open the channel", exc)
    installations = PostgresInstallationStore(store) if bot_token is None else None
    if installations is not None:
        try:  # tokens stored in plain text (or under an older key) are encrypted with the current key
            installations.seal_stored()
        except DatabaseError as exc:
            log.warning("could not check the stored installations' encryption: %s", exc)
    clients = Clients(settings, token=bot_token, installations=installations)
    queue = JobQueue(store, settings.jobs.queue_limit)
    answers = WorkerPool("answer", workers, backlog=settings.slack.answer_backlog)
    quick = quick_pool(settings)
    slack_io = ThreadPoolExecutor(max_workers=8, thread_name_prefix="slack-io")
    runner: JobRunner | None = None
    jobs = Jobs(settings, clients, store, queue, wake=lambda: runner.wake() if runner else None)
    if settings.jobs.bot_runs_jobs:
        runner = JobRunner(queue, jobs.run, on_lost=jobs.on_lost).start()
    digests = DigestPoster(settings, clients).start()  # only with CHAPTERVERSE_SLACK_DIGEST_CHANNEL
    bot = Bot(settings=settings, clients=clients, store=store, answering=Answering(settings, clients, store, io=slack_io),
              jobs=jobs, answers=answers, quick=quick)
    # Bolt checks the token with auth.test on start (check_slack just did: a failure here is Slack
    # going away in between)
    auth = app_auth(settings, installations) if installations else {}
    app = until_stopped(stop, "cannot start the Slack app", lambda: build_app(bot, **auth),
                        (BoltError, URLError, OSError), lambda exc: str(exc).splitlines()[0])
    if app is None:
        return
    keeper = InFlightKeeper(bot.answering, answers).start()  # questions interrupted by a stopped process
    if app.oauth_flow is not None:
        serve_install_pages(app.oauth_flow, settings.slack.oauth_host, settings.slack.oauth_port)
    handler = SocketModeHandler(app, app_token=app_token, ping_interval=settings.slack.ping_interval_s)
    warming = threading.Thread(target=warm_up, args=(settings,), name=WARM_UP_THREAD, daemon=True)
    warming.start()
    try:
        if connected(handler, stop):
            log.info("connected to Slack over Socket Mode (%s); waiting for mentions",
                     "multi-workspace" if installations else "one workspace")
        while not stop.wait(1.0):
            pass
    finally:
        if not finished_within(handler.close, CLOSE_WAIT_S, CLOSE_THREAD):
            log.warning("the Socket Mode connection did not close within %.0f s; leaving it", CLOSE_WAIT_S)
        keeper.stop()
        digests.stop()
        if runner is not None:
            runner.stop()
        for pool in (answers, quick):
            pool.shutdown()
        # replies being posted, turns recorded: a stop that leaves past the interpreter's teardown
        # (``leave_now``) would cut them off, where a normal exit waited for them without a bound
        if not finished_within(lambda: slack_io.shutdown(wait=True), SLACK_IO_WAIT_S, "slack-io-drain"):
            log.warning("replies still being posted after %.0f s; not waiting for them", SLACK_IO_WAIT_S)
        # Exiting while torch is still being imported on the warm-up thread aborts the process
        # ("terminate called without an active exception"): a load about to finish is waited for,
        # a longer one is left by ``main`` (``leave_now``).
        warming.join(WARM_UP_JOIN_S)
        if running := still_running():
            log.info("not waiting for: %s", ", ".join(running))
        log.info("stopped")


QUICK_WORKERS = 4


def quick_pool(settings: Settings) -> WorkerPool:
    """The pool of small tasks (busy replies, shared files, follow-up checks): bounded, like the
    answers' (CHAPTERVERSE_SLACK_QUICK_BACKLOG); ``bot.app.quickly`` drops and logs what does not fit."""
    return WorkerPool("quick", QUICK_WORKERS, backlog=settings.slack.quick_backlog)


def main(verbose: bool = False) -> int:
    setup_logging(verbose)
    status = exit_status(lambda: run(Settings()))
    if still_running():
        leave_now(status)
    return status


def exit_status(start: Callable[[], None]) -> int:
    """Run a process's main loop; a configuration or start-up problem is one line on stderr and exit 2."""
    try:
        start()
    except ConfigError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    except Exception as exc:  # noqa: BLE001  (pydantic validation and the like: one line, no secrets)
        sys.stderr.write(f"error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}\n")
        return 2
    return 0
