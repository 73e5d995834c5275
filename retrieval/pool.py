"""A few idle connections kept per database, so a search does not pay a new backend each time.

Searches run two legs at once, each on its own connection; connecting to Postgres costs a few
milliseconds (a new backend process), which is a large share of a ~50 ms search. Connections are
checked out by one thread at a time and returned when the block exits; a connection that broke
(server restarted) is discarded instead of being returned.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from retrieval import db
from retrieval.settings import Settings

MAX_IDLE = 4

_idle: dict[str, list[psycopg.Connection]] = defaultdict(list)
_lock = threading.Lock()


def _take(key: str) -> psycopg.Connection | None:
    with _lock:
        while _idle[key]:
            conn = _idle[key].pop()
            if not conn.closed and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                return conn
            conn.close()
    return None


def _give(key: str, conn: psycopg.Connection) -> None:
    ok = not conn.closed and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    with _lock:
        if ok and len(_idle[key]) < MAX_IDLE:
            _idle[key].append(conn)
            return
    conn.close()


@contextmanager
def connection(settings: Settings) -> Iterator[psycopg.Connection]:
    """An autocommit connection (dict rows, pgvector registered), reused across searches."""
    key = db.conninfo(settings)
    conn = _take(key) or db.connect(settings)
    try:
        yield conn
    except psycopg.OperationalError:
        conn.close()  # broken: never hand it out again
        raise
    finally:
        _give(key, conn)  # closes instead when broken or left inside a transaction


def close_all() -> None:
    with _lock:
        conns = [c for lst in _idle.values() for c in lst]
        _idle.clear()
    for c in conns:
        c.close()
