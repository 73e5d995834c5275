"""Which database holds a collection: ``DATABASE_URL`` (and its standbys, ``db.read_urls``) unless
``db.placement`` places the collection on another primary (with its own standbys).

``placed`` turns the process's settings into the settings of the collection's servers; everything
downstream (ingest, removal, search, questions, migrations) takes settings and so goes there. The
bot's own state (threads, turns, feedback, jobs) stays on ``DATABASE_URL``.
"""

from __future__ import annotations

from collections.abc import Sequence

from retrieval.settings import Placement, Settings
from retrieval.store.db import DatabaseError


class PlacementError(DatabaseError):
    """Collections held by different primaries cannot be read by one question."""


def placed(settings: Settings, collections: Sequence[str] | None) -> Settings:
    """The settings of the servers holding ``collections``: ``settings`` itself when none of them is
    placed elsewhere (or none is named: an unscoped read searches ``DATABASE_URL``'s collections),
    else the placement's primary and standbys. Raises ``PlacementError`` when they are on different
    primaries."""
    placement = settings.db.placement
    if not placement or not collections:
        return settings
    targets: list[Placement | None] = [placement.get(c) for c in collections]
    if any(t != targets[0] for t in targets):
        raise PlacementError(f"the collections {', '.join(repr(c) for c in collections)} are held by different "
                             "databases (CHAPTERVERSE_DB_PLACEMENT); ask each of them on its own")
    return settings if targets[0] is None else _on(settings, targets[0])


def _on(settings: Settings, target: Placement) -> Settings:
    return settings.but(db={"url": target.url, "read_urls": target.read_urls, "placement": {}})


def primaries(settings: Settings) -> list[Settings]:
    """The settings of every primary: ``DATABASE_URL``'s first, then each placement's (one per distinct
    primary), for the commands that act on every collection (``docs``, ``collections list``, ``db reembed``)."""
    out, seen = [settings], {settings.db.url.get_secret_value() if settings.db.url else None}
    for target in settings.db.placement.values():
        url = target.url.get_secret_value()
        if url not in seen:
            seen.add(url)
            out.append(_on(settings, target))
    return out
