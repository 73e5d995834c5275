"""The bot's commands: ``bot``, ``worker`` and ``digest``, registered into the ``chapterverse`` app
through the ``chapterverse.commands`` entry point."""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from retrieval.clikit import JsonOpt, bad_input, emit, fail, load_settings, ready, say
from retrieval.store.db import DatabaseError


def run_bot_command(verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log each step to stderr.")] = False) -> None:
    """Run the Slack bot (Socket Mode; needs SLACK_BOT_TOKEN and SLACK_APP_TOKEN). Ctrl-C stops it."""
    from bot.main import main as run_bot  # noqa: PLC0415  (Slack SDK only when needed)

    code = run_bot(verbose=verbose or logging.getLogger().level <= logging.INFO)
    if code:
        raise typer.Exit(code)


def worker(verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log each step to stderr.")] = False) -> None:
    """Run queued ingestion jobs from Slack (beside one or more bots on the same database). Ctrl-C stops it."""
    from bot.worker import main as run_worker  # noqa: PLC0415  (Slack SDK only when needed)

    code = run_worker(verbose=verbose or logging.getLogger().level <= logging.INFO)
    if code:
        raise typer.Exit(code)


def digest(
    since: Annotated[str, typer.Option(help="How far back: a duration (7d, 12h, 2w, 90m) or a date (2026-12-01).")] = "7d",
    collection: Annotated[str | None, typer.Option(help="Only questions that searched this collection.")] = None,
    workspace: Annotated[str | None, typer.Option(help="Only this Slack workspace (team id).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """What readers could not get answered in Slack: refused questions and 👎-voted answers, grouped by
    the nearest document, with counts and links to the threads."""
    from bot.digest import BadSince, as_text, digest as build_digest, parse_since  # noqa: PLC0415
    from retrieval.store import db  # noqa: PLC0415

    try:
        start = parse_since(since)
    except BadSince as exc:
        bad_input(str(exc))
    settings = load_settings()
    ready(settings)
    try:
        with db.connection(settings) as conn:
            result = build_digest(conn, start, collection=collection, workspace=workspace)
    except DatabaseError as exc:
        fail(str(exc))
    if json_out:
        emit(result)
    else:
        say(as_text(result))


def register(app: typer.Typer, eval_app: typer.Typer) -> None:
    app.command("bot")(run_bot_command)
    app.command()(worker)
    app.command()(digest)
