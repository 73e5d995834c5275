"""`chapterverse worker`: a process that only runs queued ingestion/removal jobs, ``CHAPTERVERSE_WORKER_JOBS``
at a time (``bot.runner``; how jobs are shared and taken over: ``bot.queue``), beside bots on the same
database that then leave jobs alone (``CHAPTERVERSE_BOT_RUNS_JOBS=false``, docs/operations.md). It
needs Slack only to report progress and to download shared files. SIGTERM/Ctrl-C stop it.
"""

from __future__ import annotations

import logging
import sys
import threading

from bot.clients import Clients
from bot.installations import PostgresInstallationStore
from bot.jobs import Jobs
from bot.main import (ConfigError, check_slack, exit_status, prepare_database, secret, setup_logging,
                      stop_on_signals)
from bot.oauth import multi_workspace
from bot.queue import JobQueue
from bot.runner import JobRunner
from bot.store import Store
from retrieval.settings import Settings

log = logging.getLogger("bot.worker")


def run(settings: Settings, stop: threading.Event) -> None:
    token = secret(settings.slack.bot_token)
    multi = multi_workspace(settings)
    if not token and not multi:
        raise ConfigError("SLACK_BOT_TOKEN must be set (the worker reports progress in Slack and downloads "
                          "shared files), or SLACK_CLIENT_ID/SLACK_CLIENT_SECRET for several workspaces")
    check_slack(settings, None if multi else token)  # "could not reach Slack …", "Slack rejected …": exit 2
    store = Store(settings)
    prepare_database(store)
    clients = Clients(settings, token=None if multi else token,
                      installations=PostgresInstallationStore(store) if multi else None)
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
