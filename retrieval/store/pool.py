"""Pooled connections for searches (psycopg_pool), one pool per database.

Searches run two legs, each needing a connection; opening one costs a new backend process (a few
milliseconds of a ~50 ms search), so connections are kept. Each is checked when handed out
(``_check``, mostly without a round trip), so after a database restart a stale connection is replaced
instead of failing the next question.
"""

from __future__ import annotations

import logging
import select
import threading
import time
import weakref
from contextvars import ContextVar
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from pgvector.psycopg import register_vector
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from retrieval.store import db
from retrieval.settings import Settings

MAX_SIZE = 4
CHECKOUT_TIMEOUT_S = 3.0  # when the database is down, a search gives up after this long

# The pool logs every failed connection attempt; the caller reports one clear line instead.
logging.getLogger("psycopg.pool").setLevel(logging.ERROR)

_pools: dict[str, ConnectionPool] = {}
_lock = threading.Lock()


FRESH_S = 60.0  # a connection used this recently is checked without a round trip (``_check``)

# When each pooled connection was last seen working: connected, or handed back after use.
_last_used: weakref.WeakKeyDictionary[psycopg.Connection, float] = weakref.WeakKeyDictionary()


def _configure(conn: psycopg.Connection) -> None:
    register_vector(conn)
    _last_used[conn] = time.monotonic()


def _check(conn: psycopg.Connection) -> None:
    """Raise if ``conn`` no longer works (the pool then discards it and hands out another). A
    connection used within ``FRESH_S`` whose socket has nothing to read passes without a round trip:
    an idle connection is sent nothing but the server's notice that it is ending it (by restart,
    termination or shutdown; or, rarely, a notice), so a readable socket means "ask the server" like
    a connection idle for longer, which gets an empty statement (``ConnectionPool.check_connection``:
    it also catches a connection a firewall or NAT dropped silently, after minutes at the least)."""
    used = _last_used.get(conn)
    if used is not None and time.monotonic() - used < FRESH_S and not conn.closed and not _readable(conn):
        return
    ConnectionPool.check_connection(conn)


def _readable(conn: psycopg.Connection) -> bool:
    """Whether the server sent something on the idle connection (or its socket is gone)."""
    try:
        poller = select.poll()
        poller.register(conn.pgconn.socket, select.POLLIN)
        return bool(poller.poll(0))
    except (OSError, psycopg.Error, ValueError):
        return True


def _pool(settings: Settings) -> ConnectionPool:
    key = db.conninfo(settings)
    with _lock:
        if key not in _pools:
            _pools[key] = ConnectionPool(key, min_size=0, max_size=settings.db.pool_size or MAX_SIZE, open=True,
                                         name="search", configure=_configure, check=_check,
                                         kwargs={"autocommit": True, "row_factory": dict_row, "connect_timeout": 5},
                                         timeout=CHECKOUT_TIMEOUT_S, reconnect_timeout=0)
        return _pools[key]


# The connection this context (thread, task) already holds, by pool key: a question checks out one
# connection and every step of it (named documents, both legs, fetch, sentence scores, pages, term
# statistics) runs on it, instead of one checkout (and one liveness check) per step.
_held: ContextVar[dict[str, psycopg.Connection] | None] = ContextVar("chapterverse_held_connection", default=None)


# The databases (pool keys) on which a statement or checkout failed in this context, while
# ``retrieval.store.replicas`` watches a read on a standby (to run it again on the primary).
_failed: ContextVar[set[str] | None] = ContextVar("chapterverse_failed_databases", default=None)


@contextmanager
def failures() -> Iterator[set[str]]:
    """The databases (connection strings) on which a checkout or statement fails inside the block."""
    failed: set[str] = set()
    token = _failed.set(failed)
    try:
        yield failed
    finally:
        _failed.reset(token)


@contextmanager
def connection(settings: Settings, *, timeout: float | None = None) -> Iterator[psycopg.Connection]:
    """An autocommit connection (dict rows, pgvector registered) from the pool; inside another
    ``connection`` block of the same context, that block's connection (one checkout per question).
    ``timeout``: how long to wait for a checkout (default ``CHECKOUT_TIMEOUT_S``)."""
    key = db.conninfo(settings)
    try:
        held = _held.get() or {}
        if key in held:
            yield held[key]
            return
        try:
            with _pool(settings).connection(timeout=timeout) as conn:
                token = _held.set({**held, key: conn})
                try:
                    yield conn
                finally:
                    _held.reset(token)
                    _last_used[conn] = time.monotonic()  # a broken one is discarded by the pool anyway
        except PoolTimeout as exc:
            raise db.IndexUnavailable(f"the index database is unavailable: {db.first_line(exc, key)}") from exc
        except psycopg.OperationalError as exc:  # the server went away mid-query
            raise db.IndexUnavailable(f"the index database is unavailable: {db.first_line(exc, key)}") from exc
    except (psycopg.Error, db.IndexUnavailable):
        if (failed := _failed.get()) is not None:
            failed.add(key)
        raise


def close_all() -> None:
    """Close every pooled connection (the pools are re-created on next use)."""
    with _lock:
        pools = list(_pools.values())
        _pools.clear()
    for p in pools:
        p.close()
