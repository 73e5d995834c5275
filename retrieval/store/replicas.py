"""Reads (searches, questions) on hot standbys, with read-your-writes; everything else on the primary.

``read`` runs one read on a standby of ``db.read_urls``, taking turns between them (``choose``):

1. one statement on the primary reads the WAL position it is at and, for the collections asked about,
   the position of their last ingest or removal (``collections.written_lsn``, set in that write's
   own transaction: ``retrieval.store.collections.mark_written``);
2. one on the standby (on the connection the read then uses) reads its copy of those positions and
   how far behind it is: a standby that shows every one of them holds those collections as they are
   now. If it does not yet, it is asked again until it does, for at most ``db.read_wait_s``;
3. a standby with more than ``db.max_lag_mb`` of the primary's WAL still to replay (not keeping up; a
   bound in bytes, since the age of its last replayed commit says nothing while a long ingest streams), one that has not replayed the writes in time, one whose
   connection string libpq cannot use (named with its password masked, ``retrieval.store.masking``), one that
   cannot be reached, or one on which the read fails is skipped, with a warning in the log, and the read
   runs on the next or on the primary: a standby's trouble never reaches the user. A standby that failed
   is not tried again for ``RETRY_S``.

The result says which server answered (``server``) and, with standbys, what choosing it cost
(``timings_ms["replica.route"]``, of which ``["replica.wait"]`` checking and waiting for writes to be replayed;
``["replica.behind"]``, only when the standby's first look did not yet show the collections' last writes: the time
from that look until one did, so a read that had to wait for a write says so).
Reads nested in a read (a question's search) run on the server already chosen.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeVar

import psycopg

from retrieval.settings import DbSettings, Settings, connection_problem
from retrieval.store import db, pool
from retrieval.store.masking import masked
from retrieval.store.placement import placed

log = logging.getLogger(__name__)

RETRY_S = 10.0  # a standby that failed or lagged is skipped this long
CHECKOUT_S = 1.0  # waiting longer for a standby's connection means it is down (or saturated): use the primary
POLL_S = (0.002, 0.05)  # first and longest pause between two looks at a standby replaying writes


class Stamped(Protocol):
    server: str
    timings_ms: dict[str, float]


R = TypeVar("R", bound=Stamped)
Verdict = Literal["ok", "lagging", "behind"]  # behind: has not replayed the collections' last writes in time


@dataclass(frozen=True)
class Fence:
    """What a standby must show to serve a read: the primary's WAL position, and the last write
    position of each collection read."""

    primary_lsn: str
    collections: tuple[str, ...] = ()
    written: tuple[str, ...] = ()


@dataclass
class Route:
    server: str
    timings_ms: dict[str, float] = field(default_factory=dict)


def choose(standbys: Sequence[str], skipped_until: Mapping[str, float], now: float, turn: int) -> list[str]:
    """The standbys to try, in order: those not being skipped, the ``turn``-th first (round robin)."""
    up = [s for s in standbys if skipped_until.get(s, 0.0) <= now]
    first = turn % len(up) if up else 0
    return up[first:] + up[:first]


def address(url: str) -> str:
    """host:port of a connection string (a socket directory for a Unix socket), never its password.
    Raises ``psycopg.ProgrammingError`` (its message masked) when ``url`` cannot be read."""
    try:
        parts = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:  # libpq's message may quote the string, password and all
        raise psycopg.ProgrammingError(db.first_line(exc, url)) from None
    return f"{parts.get('host') or parts.get('hostaddr') or 'localhost'}:{parts.get('port') or 5432}"


def standby_label(n: int, url: str) -> tuple[str, str | None]:
    """How the log names the ``n``-th standby (its address; the string itself, password masked, when
    libpq cannot use it), and why it cannot be used (None: it can be tried)."""
    if problem := connection_problem(url):
        return f"replica {n} ({masked(url)})", f"it cannot be used: {problem}"
    return f"replica {n} {address(url)}", None


def _primary(settings: Settings) -> str:
    try:
        return f"primary {address(db.conninfo(settings))}"
    except (db.DatabaseError, psycopg.Error):  # the embedded server does not start: the read says why
        return "primary"


_skipped: dict[str, float] = {}  # standby URL → monotonic time until which it is skipped
_turns = itertools.count()
_lock = threading.Lock()
_route: ContextVar[Route | None] = ContextVar("chapterverse_read_route", default=None)

FENCE_SQL = """SELECT pg_current_wal_lsn()::text AS primary_lsn,
  coalesce(array_agg(collection ORDER BY collection), '{}') AS collections,
  coalesce(array_agg(written_lsn::text ORDER BY collection), '{}') AS written
FROM collections WHERE %(every)s OR collection = ANY(%(names)s)"""
PROBE_SQL = """SELECT (SELECT count(*) FROM unnest(%(collections)s::text[], %(written)s::pg_lsn[]) AS f(collection, lsn)
    LEFT JOIN collections c USING (collection) WHERE c.written_lsn IS NULL OR c.written_lsn < f.lsn) AS missing,
  CASE WHEN pg_is_in_recovery() THEN greatest(pg_wal_lsn_diff(%(primary_lsn)s::pg_lsn, pg_last_wal_replay_lsn()), 0)
       ELSE 0 END::float8 / 1e6 AS lag_mb"""


def fence(conn: psycopg.Connection, collections: Sequence[str] | None) -> Fence:
    row = conn.execute(FENCE_SQL, {"every": not collections, "names": list(collections or ())}).fetchone()
    return Fence(row["primary_lsn"], tuple(row["collections"]), tuple(row["written"]))


def caught_up(conn: psycopg.Connection, need: Fence, cfg: DbSettings) -> tuple[Verdict, str, float | None]:
    """Whether the standby on ``conn`` may serve the read (waiting up to ``cfg.read_wait_s`` for it to
    replay the writes), if not why, and how long it was behind (ms from a first look that did not show
    the writes to the look that did; None when the first look showed them)."""
    deadline, pause = time.monotonic() + cfg.read_wait_s, POLL_S[0]
    params = {"collections": list(need.collections), "written": list(need.written), "primary_lsn": need.primary_lsn}
    first_miss: float | None = None
    while True:
        row = conn.execute(PROBE_SQL, params).fetchone()
        if row["lag_mb"] > cfg.max_lag_mb:
            return ("lagging", f"it lags {row['lag_mb']:.1f} MB of WAL (more than CHAPTERVERSE_DB_MAX_LAG_MB="
                    f"{cfg.max_lag_mb:g})", None)
        if row["missing"] == 0:
            return "ok", "", None if first_miss is None else (time.perf_counter() - first_miss) * 1e3
        first_miss = time.perf_counter() if first_miss is None else first_miss
        if time.monotonic() + pause > deadline:
            return "behind", (f"it had not replayed the last write of {row['missing']} of the collections read "
                              f"within CHAPTERVERSE_DB_READ_WAIT_S={cfg.read_wait_s:g} s"), None
        time.sleep(pause)
        pause = min(pause * 2, POLL_S[1])


def _skip(url: str, label: str, why: str, seconds: float = RETRY_S) -> None:
    with _lock:
        _skipped[url] = time.monotonic() + seconds
    log.warning("standby %s skipped for %.0f s, reading from the primary instead: %s", label, seconds, why)


def _run(route: Route, settings: Settings, run: Callable[[Settings], R]) -> R:
    token = _route.set(route)
    try:
        result = run(settings)
    finally:
        _route.reset(token)
    result.server = route.server
    result.timings_ms.update(route.timings_ms)
    return result


def read(settings: Settings, collections: Sequence[str] | None, run: Callable[[Settings], R]) -> R:
    """``run(settings of the server chosen)`` on a standby that holds ``collections`` as they are now, else
    on their primary (``db.placement`` decides which primary); the result names the server."""
    if (outer := _route.get()) is not None:
        return _run(outer, settings, run)
    settings = placed(settings, collections)
    primary = Route(_primary(settings))
    standbys = [u.get_secret_value() for u in settings.db.read_urls]
    if not standbys:
        return _run(primary, settings, run)
    t0 = time.perf_counter()
    try:
        with pool.connection(settings) as conn:
            need = fence(conn, collections)
    except (db.DatabaseError, psycopg.Error):
        return _run(primary, settings, run)  # the primary's trouble: reported as without standbys
    with _lock:
        order = choose(standbys, _skipped, time.monotonic(), next(_turns))
    for url in order:
        label, unusable = standby_label(standbys.index(url) + 1, url)
        if unusable:
            _skip(url, label, unusable)
            continue
        on_standby = settings.but(db={"url": url, "read_urls": []})
        with pool.failures() as failed:  # the pool notes failures on this context's databases
            try:
                with pool.connection(on_standby, timeout=CHECKOUT_S) as conn:
                    t1 = time.perf_counter()
                    verdict, why, behind_ms = caught_up(conn, need, settings.db)
                    timings = {"replica.route": (time.perf_counter() - t0) * 1e3,
                               "replica.wait": (time.perf_counter() - t1) * 1e3}
                    if behind_ms is not None:
                        timings["replica.behind"] = behind_ms
                    if verdict != "ok":
                        if verdict == "lagging":
                            _skip(url, label, why)
                        else:
                            log.info("standby %s not used: %s", label, why)
                        continue
                    result = _run(Route(label, timings), on_standby, run)
                if db.conninfo(on_standby) not in failed:
                    return result
                _skip(url, label, "the read failed on it")  # and runs again on the next standby or the primary
            except (db.DatabaseError, psycopg.Error) as exc:
                if db.conninfo(on_standby) not in failed:
                    raise  # the read's own error, not the standby's
                _skip(url, label, db.first_line(exc, url))
    primary.timings_ms["replica.route"] = (time.perf_counter() - t0) * 1e3
    return _run(primary, settings, run)
