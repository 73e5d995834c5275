"""Which collections a channel searches and fills (pure functions); who may change them is ``bot.authz``."""

from __future__ import annotations

from dataclasses import dataclass

from retrieval.settings import Settings


@dataclass(frozen=True)
class Scope:
    read: tuple[str, ...]  # collections a question in this channel searches
    write: str  # collection that ingestion and removal from this channel change


def workspace_collection(settings: Settings, team_id: str) -> str:
    return settings.slack.workspace_collection or f"slack-{team_id}"


def scope_for(settings: Settings, team_id: str, channel_id: str) -> Scope:
    """Workspace scope: every channel shares the workspace collection. Channel scope: a channel also
    has its own collection ("<workspace collection>:<channel id>"), searched only there."""
    shared = workspace_collection(settings, team_id)
    if settings.slack.collection_scope == "channel" and channel_id:
        own = f"{shared}:{channel_id}"
        return Scope(read=(shared, own), write=own)
    return Scope(read=(shared,), write=shared)
