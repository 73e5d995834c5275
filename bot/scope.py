"""Which collections a channel searches and fills (pure functions); who may change them is ``bot.authz``.

The workspace's collection, unless ``CHAPTERVERSE_SLACK_WORKSPACE_COLLECTION`` names one:

- **one workspace** (``SLACK_BOT_TOKEN``): the command line's default collection
  (``CHAPTERVERSE_DEFAULT_COLLECTION``, ``default``), so what a plain ``chapterverse ingest`` added is
  what Slack answers from, with no extra step;
- **several workspaces** (OAuth, ``bot.oauth``): ``slack-<team id>``, one per workspace, so no
  workspace sees another's documents.

A one-workspace bot whose documents were kept in ``slack-<team id>`` before (the default until then)
keeps that collection: ``bot.startup.settle`` finds them at start and pins it.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.oauth import multi_workspace
from retrieval.settings import Settings


@dataclass(frozen=True)
class Scope:
    read: tuple[str, ...]  # collections a question in this channel searches
    write: str  # collection that ingestion and removal from this channel change


def per_workspace_collection(team_id: str) -> str:
    """The collection of one workspace of a multi-workspace deployment (and of older one-workspace bots)."""
    return f"slack-{team_id}"


def shared_by_every_workspace(settings: Settings) -> bool:
    """True when the workspace collection does not depend on the team (one named collection)."""
    return bool(settings.slack.workspace_collection) or not multi_workspace(settings)


def workspace_collection(settings: Settings, team_id: str) -> str:
    if settings.slack.workspace_collection:
        return settings.slack.workspace_collection
    if multi_workspace(settings):
        return per_workspace_collection(team_id)
    return settings.ingest.default_collection


def scope_for(settings: Settings, team_id: str, channel_id: str) -> Scope:
    """Workspace scope: every channel shares the workspace collection. Channel scope: a channel also
    has its own collection ("<workspace collection>:<channel id>"), searched only there."""
    shared = workspace_collection(settings, team_id)
    if settings.slack.collection_scope == "channel" and channel_id:
        own = f"{shared}:{channel_id}"
        return Scope(read=(shared, own), write=own)
    return Scope(read=(shared,), write=shared)
