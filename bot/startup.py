"""The collection a bot answers from, settled once at start, and the start line that says where it is.

``settle`` keeps a one-workspace bot's documents where they are: until the workspace collection
became the command line's default collection (``bot.scope``), a bot with ``SLACK_BOT_TOKEN`` searched
``slack-<team id>``. When that collection (or one of its channel collections) holds documents, or is
placed on another primary, and ``CHAPTERVERSE_SLACK_WORKSPACE_COLLECTION`` is unset, the bot keeps
it: its questions, slash-command ingests, removals and lists go on using it, nothing moves, and the
start line says so and how to switch. Otherwise the choice of ``bot.scope`` stands.

The start line names the index (the embedded Postgres's ``CHAPTERVERSE_HOME``, or ``DATABASE_URL``'s
host, port and database, never its password), the OS user, and how many documents the collection
holds; none is a warning saying what to do (a bot run as another OS user than the one who ran
``chapterverse ingest`` opens that user's own home, and another index).
"""

from __future__ import annotations

import getpass
import logging
import os
from dataclasses import dataclass

import psycopg

from bot.scope import per_workspace_collection, shared_by_every_workspace, workspace_collection
from bot.store import Store
from retrieval.store.db import DatabaseError, first_line
from retrieval.store.placement import PlacementError, placed
from retrieval.settings import Settings

log = logging.getLogger("bot")


@dataclass(frozen=True)
class StartLine:
    level: int  # logging.INFO or logging.WARNING
    text: str


def os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry and no LOGNAME/USER
        return f"uid {os.getuid()}" if hasattr(os, "getuid") else "unknown"


def index_location(settings: Settings) -> str:
    """Where the index is, for a log line: the embedded Postgres's home, or DATABASE_URL's server and
    database (never its password or other parameters)."""
    if settings.db.url is None:
        return f"the embedded Postgres in CHAPTERVERSE_HOME {settings.home}"
    try:
        parts = psycopg.conninfo.conninfo_to_dict(settings.db.url.get_secret_value())
    except psycopg.Error:
        return "DATABASE_URL (which cannot be read)"
    host, port = parts.get("host") or parts.get("hostaddr") or "localhost", parts.get("port") or 5432
    name = parts.get("dbname") or parts.get("user") or "postgres"
    if host.startswith("/"):
        return f"DATABASE_URL database {name} on the Unix socket in {host} (port {port})"
    return f"DATABASE_URL {host}:{port}/{name}"


def keeps_per_workspace(settings: Settings, team_id: str, earlier_documents: int) -> bool:
    """Whether a one-workspace bot keeps ``slack-<team id>``: the collection is not named, the bot
    serves one workspace whose id is known, and that collection holds documents or is placed elsewhere."""
    if settings.slack.workspace_collection or not team_id or not shared_by_every_workspace(settings):
        return False
    earlier = per_workspace_collection(team_id)
    placed_there = any(c == earlier or c.startswith(f"{earlier}:") for c in settings.db.placement)
    return earlier_documents > 0 or placed_there


def start_line(collection: str, where: str, user: str, documents: int, *, kept: bool = False,
               default_collection: str = "", default_documents: int = 0) -> StartLine:
    """What the bot says at start about what it answers from (pure)."""
    index = f"in the index of {where} (OS user {user})"
    if documents == 0:
        named = "" if collection == default_collection else f" --collection {collection}"
        return StartLine(logging.WARNING, (
            f"questions search the collection {collection!r}, which holds no documents {index}: add some with "
            f"`chapterverse ingest FILE.pdf{named}` "
            "run as this OS user with the same CHAPTERVERSE_HOME or DATABASE_URL (another user's ingest went to "
            "that user's own index), or share a PDF with the bot in Slack"))
    text = f"questions search the collection {collection!r} ({documents} document{'s' * (documents != 1)}) {index}"
    if kept:
        text += (f"; kept because this workspace's documents are there, not in {default_collection!r}"
                 + (f" ({default_documents} document{'s' * (default_documents != 1)}, not searched)"
                    if default_documents else "")
                 + f": set CHAPTERVERSE_SLACK_WORKSPACE_COLLECTION={default_collection} to search that instead")
    return StartLine(logging.INFO, text)


def count_documents(settings: Settings, store: Store, collection: str) -> int:
    """Documents in ``collection`` and its channel collections ("<collection>:<channel>"), on the
    database that holds it (``CHAPTERVERSE_DB_PLACEMENT``)."""
    try:
        target = placed(settings, [collection])
    except PlacementError:
        target = settings
    holder = store if target is settings else Store(target)
    row = holder.run(lambda conn: conn.execute(
        "SELECT count(*) AS n FROM documents WHERE collection = %s OR left(collection, %s) = %s",
        (collection, len(collection) + 1, f"{collection}:")).fetchone())
    return int(row["n"]) if row else 0


def settle(settings: Settings, store: Store, team_id: str) -> Settings:
    """The settings the bot runs with: ``slack.workspace_collection`` pinned to ``slack-<team id>`` when a
    one-workspace bot's documents are there (``keeps_per_workspace``); logs the start line. A database
    that cannot be reached leaves the settings as they are, and the line says so."""
    where, user = index_location(settings), os_user()
    if not shared_by_every_workspace(settings):
        log.info("each workspace's questions search its own collection %r in the index of %s (OS user %s)",
                 per_workspace_collection("<team id>"), where, user)
        return settings
    earlier = per_workspace_collection(team_id) if team_id and not settings.slack.workspace_collection else None
    chosen = workspace_collection(settings, team_id)
    try:
        if earlier and (keeps_per_workspace(settings, team_id, 0)  # placed on another primary: no count needed
                        or keeps_per_workspace(settings, team_id, count_documents(settings, store, earlier))):
            settings, chosen = settings.but(slack={"workspace_collection": earlier}), earlier
        kept = chosen == earlier
        default = settings.ingest.default_collection
        line = start_line(chosen, where, user, count_documents(settings, store, chosen), kept=kept,
                          default_collection=default,
                          default_documents=count_documents(settings, store, default) if kept else 0)
    except DatabaseError as exc:
        hint = (f" (if this workspace's documents are in {earlier!r}, set CHAPTERVERSE_SLACK_WORKSPACE_COLLECTION="
                f"{earlier})" if earlier and chosen != earlier else "")
        line = StartLine(logging.WARNING, f"questions search the collection {chosen!r} in the index of {where} "
                         f"(OS user {user}); its documents could not be counted ({first_line(exc)}){hint}")
    log.log(line.level, "%s", line.text)
    return settings
