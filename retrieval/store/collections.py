"""The preset each collection records (table ``collections``, migration 0022) and the profile a
question is read with.

A collection records the preset it is created with, at its first ingest, in the same transaction
as that document (``record_preset``); it keeps it. Questions read the searched collections' presets
(``collection_profile``): one statement the first time a process meets a collection, then from
memory for ``CACHE_S`` (five minutes: a steady stream of questions costs one statement per
collection every five minutes, and a preset changed with ``chapterverse collections set-preset`` is
seen by running processes within that time).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import psycopg

from retrieval.profile import Profile
from retrieval.settings import Settings, preset_profile
from retrieval.store import pool
from retrieval.store.db import DatabaseError, conninfo

CACHE_S = 300.0
_lock = threading.Lock()
_known: dict[tuple[str, str], tuple[float, str]] = {}  # (database, collection) → (read at, preset)


def record_preset(conn: psycopg.Connection, collection: str, preset: str) -> str:
    """The collection's preset: ``preset`` when the collection is new (recorded now, in the caller's
    transaction), else the one it recorded when it was created."""
    row = conn.execute(
        "INSERT INTO collections (collection, preset) VALUES (%s, %s) "
        "ON CONFLICT (collection) DO UPDATE SET collection = EXCLUDED.collection RETURNING preset", (collection, preset)).fetchone()
    return str(row["preset"])


def mark_written(conn: psycopg.Connection, collections: Sequence[str]) -> None:
    """Record, in the caller's (writing) transaction, that ``collections`` change: their ``written_lsn``
    becomes the primary's WAL position now (a standby showing it has replayed this transaction;
    ``retrieval.store.replicas``)."""
    conn.execute("UPDATE collections SET written_lsn = pg_current_wal_insert_lsn() WHERE collection = ANY(%s)",
                 (list(collections),))


def recorded_presets(conn: psycopg.Connection, collections: Sequence[str] | None = None) -> dict[str, str]:
    """collection → preset, for ``collections`` (every collection when None)."""
    rows = conn.execute("SELECT collection, preset FROM collections WHERE %(c)s::text[] IS NULL OR collection = ANY(%(c)s) "
                        "ORDER BY collection", {"c": None if collections is None else list(collections)})
    return {r["collection"]: r["preset"] for r in rows}


def set_preset(conn: psycopg.Connection, collection: str, preset: str) -> None:
    """Change a collection's preset (its documents keep the text search they were indexed with until
    they are ingested again). Raises ``LookupError`` for an unknown collection."""
    preset_profile(preset)  # the preset exists and is valid (SettingsError otherwise)
    if conn.execute("UPDATE collections SET preset = %s, written_lsn = pg_current_wal_insert_lsn() "  # read your writes
                    "WHERE collection = %s RETURNING collection", (preset, collection)).fetchone() is None:
        raise LookupError(f"no collection {collection!r}")
    with _lock:
        for key in [k for k in _known if k[1] == collection]:
            del _known[key]


def presets_of(settings: Settings, collections: Sequence[str]) -> dict[str, str]:
    """The recorded presets of ``collections`` (those that have one), from memory when read within
    ``CACHE_S``, else one statement on the pooled connection."""
    db_key, now = conninfo(settings), time.monotonic()
    with _lock:
        fresh = {c: p for c in collections if (hit := _known.get((db_key, c))) and now - hit[0] < CACHE_S
                 for p in [hit[1]]}
    missing = [c for c in collections if c not in fresh]
    if missing:
        with pool.connection(settings) as conn:
            read = recorded_presets(conn, missing)
        with _lock:
            _known.update({(db_key, c): (now, p) for c, p in read.items()})
        fresh.update(read)
    return fresh


def ingest_profile(settings: Settings, collection: str) -> Profile:
    """The profile a document ingested into ``collection`` is read with: its recorded preset's, or
    for a new collection the preset it will record (``settings.preset``)."""
    return preset_profile(presets_of(settings, [collection]).get(collection) or settings.preset)


def collection_profile(settings: Settings, collections: Sequence[str] | None) -> Profile:
    """The profile questions to ``collections`` are read with: the first of them that records a
    preset gives it; none (or no collection named, or the index unreachable: the search that
    follows reports that) → the process's own ``settings.profile``. A recorded preset that is not
    installed raises ``SettingsError``."""
    if not collections:
        return settings.profile
    try:
        recorded = presets_of(settings, collections)
    except DatabaseError:
        return settings.profile
    preset = next((recorded[name] for name in collections if name in recorded), settings.preset)
    return settings.profile if preset == settings.preset else preset_profile(preset)

