"""`chapterverse worker`: a process that only runs queued ingestion/removal jobs.

Run any number of them beside the bot processes, all on one database (``DATABASE_URL``); each job
is run by exactly one of them (``bot.queue``). Set ``CHAPTERVERSE_BOT_RUNS_JOBS=false`` on the bots
when workers run, so answering never shares a CPU with embedding. A worker needs Slack only to
report progress and to download shared files: ``SLACK_BOT_TOKEN`` in single-workspace mode, the
installation store in multi-workspace mode. SIGTERM/Ctrl-C stop it; a job it was running is
claimed again by another worker after ``bot.queue.STALE_S`` seconds (or at once by the next
worker started on this host), and failed after its last attempt.
"""

from __future__ import annotations

import logging
import sys
import threading

from bot.clients import Clients
from bot.installations import PostgresInstallationStore
from bot.jobs import Jobs
from bot.main import ConfigError, check_slack, exit_status, prepare_database, setup_logging, stop_on_signals
from bot.oauth import multi_workspace
from bot.queue import JobQueue
from bot.runner import JobRunner
from bot.store import Store
from retrieval.settings import Settings

log = logging.getLogger("bot.worker")


def run(settings: Settings, stop: threading.Event) -> None:
    token = settings.slack.bot_token.get_secret_value().strip() if settings.slack.bot_token else ""
    multi = multi_workspace(settings)
    if not token and not multi:
        raise ConfigError("SLACK_BOT_TOKEN must be set (the worker reports progress in Slack and downloads "
                          "shared files), or SLACK_CLIENT_ID/SLACK_CLIENT_SECRET for several workspaces")
    check_slack(settings, None if multi else token)  # "could not reach Slack …", "Slack rejected …": exit 2
    store = Store(settings)
    prepare_database(store)
    if multi:
        clients = Clients(settings, installations=PostgresInstallationStore(store))
    else:
        clients = Clients(settings, token=token)
    queue = JobQueue(store, settings.jobs.queue_limit)
    jobs = Jobs(settings, clients, store, queue)
    runner = JobRunner(queue, jobs.run, threads=settings.jobs.worker_jobs, on_lost=jobs.on_lost).start()
    log.info("worker running %d job(s) at a time; waiting for jobs", settings.jobs.worker_jobs)
    try:
        while not stop.wait(1.0):
            pass
    finally:
        runner.stop()
        log.info("stopped")


def main(verbose: bool = False) -> int:
    setup_logging(verbose)
    stop = stop_on_signals()
    return exit_status(lambda: run(Settings(), stop))


if __name__ == "__main__":
    sys.exit(main(verbose=True))
