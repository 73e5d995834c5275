"""Which collections a channel searches and fills, and who may change them (pure functions)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from retrieval.settings import Settings


@dataclass(frozen=True)
class Scope:
    read: tuple[str, ...]  # collections a question in this channel searches
    write: str  # collection that ingestion and removal from this channel change


def workspace_collection(settings: Settings, team_id: str) -> str:
    return settings.slack_workspace_collection or f"slack-{team_id}"


def scope_for(settings: Settings, team_id: str, channel_id: str) -> Scope:
    """Workspace scope: every channel shares the workspace collection. Channel scope: a channel also
    has its own collection ("<workspace collection>:<channel id>"), searched only there."""
    shared = workspace_collection(settings, team_id)
    if settings.slack_collection_scope == "channel" and channel_id:
        own = f"{shared}:{channel_id}"
        return Scope(read=(shared, own), write=own)
    return Scope(read=(shared,), write=shared)


def admins(settings: Settings) -> frozenset[str]:
    return frozenset(x for x in re.split(r"[\s,]+", settings.slack_admins) if x)


def may_change_documents(settings: Settings, user_id: str) -> bool:
    """Ingest and remove: anyone when no allowlist is configured, else only the listed user ids."""
    allowed = admins(settings)
    return not allowed or user_id in allowed
