"""``chapterverse eval replica-drill``: read replicas under failure, on one machine.

A primary and two streaming standbys start from the embedded binaries (``chapterverse_lab.cluster``).
The report has one entry per phase, each with its own outcome, in the order they run:

1. ``read_your_writes_after_ingest``: the sample PDFs but the last are ingested on the primary and
   replayed; the standbys' replay is paused (``pg_wal_replay_pause``), the last PDF is ingested, and a
   question about it is asked through the standbys at once while replay resumes ``PAUSE_S`` later. It
   held only when a standby answered it, had to wait for the write (its first look did not show it:
   ``timings_ms["replica.behind"]``), and answered as the primary alone does. An answer from the
   primary is a fallback, reported as such, not a hold.
2. ``both_standbys_up``: every question through the standbys; each must be answered by a standby,
   identically to the primary alone (the single-server run every answer is compared with).
3. ``standbys_stopping``: every question again, stopping the standby a question reads from in the
   middle of it (after the question chose it, before it searches): from a third of the way through with
   ``pg_ctl -m fast``, from two thirds (then the other one) with ``-m immediate``, as a crash would. A
   stop lands on the first question from its planned one that a standby serves; a stop no standby
   question reached is reported as not exercised, and the phase fails.
4. ``read_your_writes_after_removal``: the standbys started again, replay paused, a document removed,
   and the question asked at once, held as in 1.

No user may see an error in any phase. Also reported: the largest replication lag the primary reported
while the first PDFs were ingested, replay not paused (sampled every 50 ms).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import psycopg
from pydantic import BaseModel, Field

from chapterverse_lab.cluster import Cluster, Server, wait_caught_up
from retrieval.models import Answer
from retrieval.settings import Settings
from retrieval.store import db, replicas

ERROR_MARKS = ("index is unavailable", "Something went wrong")
PAUSE_S = 1.0  # how long the standbys' replay stays paused after a write, the question asked meanwhile
READ_WAIT_S = 10.0  # db.read_wait_s of the reads through the standbys: longer than the pause and its replay

Outcome = Literal["held", "fell back to the primary", "not exercised: the standby had replayed the write already",
                  "differs from the primary's answer"]


class Phase(BaseModel):
    """Questions asked through the standbys in one phase."""

    passed: bool = False
    asked: int = 0
    answered: int = 0  # without an error a user would see
    identical_to_single_server: int = 0
    user_errors: int = 0
    on_standbys: int = 0
    reads_per_server: dict[str, int] = Field(default_factory=dict)


class Stop(BaseModel):
    """One planned stop of a standby in the middle of a question."""

    mode: str
    planned_at: str  # the question it was planned for
    question: str | None = None  # the question in whose middle a standby was stopped; None: none was
    stopped: str | None = None  # that standby's address
    answered_by: str | None = None  # the server that answered that question instead
    identical: bool = False
    exercised: bool = False  # a standby stopped mid-question, the question answered elsewhere, identically


class Stopping(Phase):
    stops: list[Stop] = Field(default_factory=list)


class ReadAfterWrite(BaseModel):
    """A question asked at once after a write, through standbys whose replay was paused during it."""

    passed: bool = False
    outcome: Outcome
    write: str
    question: str
    server: str
    standbys_behind_bytes: float  # how much WAL the standbys had not replayed when the question was asked
    behind_ms: float | None  # how long the serving standby waited for the write (None: it did not)
    wait_ms: float
    identical_to_single_server: bool


class Report(BaseModel):
    passed: bool
    questions: str
    questions_asked: int
    user_errors: int
    read_your_writes_after_ingest: ReadAfterWrite
    both_standbys_up: Phase
    standbys_stopping: Stopping
    read_your_writes_after_removal: ReadAfterWrite
    read_wait_s: float
    replay_paused_s: float
    replication_lag_max_during_ingest: dict[str, float]
    seconds: float
    failures: list[str]


def same(a: Answer, b: Answer) -> bool:
    """The same answer as a user sees it: refusal or not, text, quotes and their pages, nearest passages."""
    keys = {"refusal", "answer", "reason", "citations", "nearest"}
    return a.model_dump(include=keys) == b.model_dump(include=keys)


def user_error(a: Answer) -> bool:
    return a.refusal and any(mark in a.reason for mark in ERROR_MARKS)


def on_standby(a: Answer) -> bool:
    return a.server.startswith("replica ")


class LagSampler(threading.Thread):
    """The largest replay lag (bytes, seconds) the primary reports while it runs."""

    def __init__(self, cluster: Cluster) -> None:
        super().__init__(daemon=True, name="lag-sampler")
        self.cluster, self.stop = cluster, threading.Event()
        self.max_bytes = self.max_s = 0.0

    def finish(self) -> dict[str, float]:
        self.stop.set()
        self.join()
        return {"bytes": self.max_bytes, "seconds": round(self.max_s, 3)}

    def run(self) -> None:
        while not self.stop.wait(0.05):
            try:
                rows = self.cluster.replication()
            except Exception:  # noqa: BLE001,S112  (the primary busy or restarting: sample again)
                continue
            for r in rows:
                self.max_bytes, self.max_s = max(self.max_bytes, r["bytes_behind"]), max(self.max_s, r["replay_lag_s"])


def serving(cluster: Cluster, settings: Settings) -> Server | None:
    """The standby ``settings`` read from (a read's settings name the server chosen), None for the primary."""
    return next((s for s in cluster.servers if s.standby and s.url == db.conninfo(settings)), None)


def stopping_search(cluster: Cluster, mode: str) -> Callable[..., Any]:
    """The question's search, which first stops (once) the standby the question is reading from: the
    question has chosen it and holds a connection to it, so the stop lands in the middle of the question."""
    from retrieval.search.search import search  # noqa: PLC0415

    pending = [mode]

    def run(settings: Settings, *args: Any, **kwargs: Any) -> Any:
        on = serving(cluster, settings)
        if pending and on is not None:
            cluster.stop(on, pending.pop())
        return search(settings, *args, **kwargs)
    return run


class Stopper:
    """The searches of the stopping phase: each planned stop, in order, stops the standby serving the
    first question from its planned one that a standby serves, in the middle of that question (one stop
    per question)."""

    def __init__(self, cluster: Cluster, plan: dict[int, str], ids: list[str]) -> None:
        self.cluster, self.plan = cluster, sorted(plan.items())
        self.stops = [Stop(mode=mode, planned_at=ids[i]) for i, mode in self.plan]
        self.index, self.ids, self.fired = 0, ids, None

    def question(self, index: int) -> None:
        self.index, self.fired = index, None

    def search(self, settings: Settings, *args: Any, **kwargs: Any) -> Any:
        from retrieval.search.search import search  # noqa: PLC0415

        on = serving(self.cluster, settings)
        due = next((s for (i, _), s in zip(self.plan, self.stops, strict=True)
                    if s.question is None and i <= self.index), None)
        if due is not None and on is not None and self.fired is None:
            due.question, due.stopped = self.ids[self.index], replicas.address(on.url)
            self.fired = due
            self.cluster.stop(on, due.mode)
        return search(settings, *args, **kwargs)

    def answered(self, a: Answer, identical: bool) -> None:
        """Record how the question in whose middle a standby was stopped (if any) was answered."""
        if self.fired is not None:
            self.fired.answered_by, self.fired.identical = a.server, identical
            self.fired.exercised = identical and not user_error(a) and not a.server.endswith(self.fired.stopped or "")


def set_replay(standbys: list[Server], paused: bool) -> None:
    for s in standbys:
        with psycopg.connect(s.url, autocommit=True) as conn:
            conn.execute("SELECT pg_wal_replay_pause()" if paused else "SELECT pg_wal_replay_resume()")


def drill(base: Settings, corpus: Path, questions_file: Path, limit: int | None = None,  # noqa: PLR0915
          log: Callable[[str], None] = lambda _: None) -> Report:
    from ingest.pipeline import ingest_source  # noqa: PLC0415
    from ingest.sources import read_path  # noqa: PLC0415
    from ingest.store import remove_document  # noqa: PLC0415
    from retrieval.answer.ask import ask  # noqa: PLC0415
    from retrieval.encode.embed import get_embedder  # noqa: PLC0415

    t0 = time.perf_counter()
    qs: list[dict] = json.loads(questions_file.read_text())[:limit]
    pdfs = sorted(corpus.glob("*.pdf"))
    coll = "drill"
    failures: list[str] = []
    asked = errors = 0
    with Cluster() as cluster:
        primary = cluster.primary()
        single = base.but(db={"url": primary.url, "read_urls": [], "placement": {}})
        db.ready(single)
        standbys = [cluster.standby(), cluster.standby()]
        wait_caught_up(cluster)
        through = base.but(db={"url": primary.url, "read_urls": [s.url for s in standbys], "placement": {},
                               "read_wait_s": READ_WAIT_S})
        sampler = LagSampler(cluster)
        sampler.start()
        log(f"primary and 2 standbys up in {time.perf_counter() - t0:.1f} s; ingesting {len(pdfs)} PDFs")

        def ask_through(q: dict, search_fn: Callable[..., Any] | None = None) -> Answer:
            nonlocal asked, errors
            a = ask(through, q["question"], collections=[coll], answerer="extractive", search_fn=search_fn)
            asked += 1
            if user_error(a):
                errors += 1
                failures.append(f"{q['id']}: {a.reason[:200]}")
            return a

        def alone(q: dict) -> Answer:
            return ask(single, q["question"], collections=[coll], answerer="extractive")

        def after_write(label: str, q: dict, what: str, write: Callable[[], None], gone: str | None = None) -> ReadAfterWrite:
            """``write`` on the primary with the standbys' replay paused, then ``q`` through them at once."""
            set_replay(standbys, paused=True)
            resume = threading.Timer(PAUSE_S, set_replay, (standbys, False))
            try:
                write()
                behind = max((r["bytes_behind"] for r in cluster.replication()), default=0.0)
                resume.start()
                a = ask_through(q)
            finally:
                if resume.is_alive():
                    resume.join()  # replay resumes when the timer fires, whoever answered
                set_replay(standbys, paused=False)
                wait_caught_up(cluster)
            identical = same(a, alone(q))
            shown = {c.document for c in a.citations} | {p.document for p in a.nearest}
            behind_ms = a.timings_ms.get("replica.behind")
            outcome: Outcome = ("differs from the primary's answer" if not identical or gone in shown else
                                "fell back to the primary" if not on_standby(a) else
                                "not exercised: the standby had replayed the write already" if behind_ms is None else
                                "held")
            if outcome != "held":
                failures.append(f"{label}: {outcome} ({q['id']}, {a.server})")
            log(f"{label}: {outcome} on {a.server}, {behind:.0f} bytes behind when asked")
            return ReadAfterWrite(passed=outcome == "held", outcome=outcome, write=what, question=q["id"],
                                  server=a.server, standbys_behind_bytes=behind,
                                  behind_ms=None if behind_ms is None else round(behind_ms, 1),
                                  wait_ms=round(a.timings_ms.get("replica.wait", 0.0), 1), identical_to_single_server=identical)

        embedder = get_embedder(single.search.embedding_model)
        for pdf in pdfs[:-1]:
            ingest_source(single, embedder, read_path(str(pdf), 500_000_000), coll, quiet=True)
        wait_caught_up(cluster)
        lag = sampler.finish()  # before replay is paused on purpose
        every: list[dict] = json.loads(questions_file.read_text())
        last = next((q for q in every if q.get("document") == pdfs[-1].name), qs[0])  # about the PDF written last

        def ingest_last() -> None:
            ingest_source(single, embedder, read_path(str(pdfs[-1]), 500_000_000), coll, quiet=True)
        after_ingest = after_write("read your writes after ingest", last, f"ingest of {pdfs[-1].name}", ingest_last)
        log(f"ingested in {time.perf_counter() - t0:.1f} s")

        baseline = {q["id"]: alone(q) for q in qs}

        def run(label: str, phase: Phase, stopper: Stopper | None = None) -> None:
            servers: Counter[str] = Counter()
            for i, q in enumerate(qs):
                if stopper is not None:
                    stopper.question(i)
                a = ask_through(q, stopper.search if stopper is not None else None)
                identical = same(a, baseline[q["id"]])
                if stopper is not None:
                    stopper.answered(a, identical)
                phase.asked += 1
                phase.user_errors += user_error(a)
                phase.answered += not user_error(a)
                phase.identical_to_single_server += identical
                phase.on_standbys += on_standby(a)
                servers[a.server] += 1
                if not identical:
                    failures.append(f"{label} {q['id']}: differs from the single-server answer ({a.server})")
            phase.reads_per_server = dict(sorted(servers.items()))
            log(f"{label}: {len(qs)} questions, {phase.on_standbys} on standbys, {time.perf_counter() - t0:.1f} s")

        n = len(qs)
        both_up = Phase()
        run("both standbys up", both_up)
        both_up.passed = (both_up.identical_to_single_server == n and both_up.on_standbys == n
                          and both_up.user_errors == 0)
        if both_up.on_standbys != n:
            failures.append(f"both standbys up: only {both_up.on_standbys} of {n} questions were answered by a standby")

        stopper = Stopper(cluster, {n // 3: "fast", (2 * n) // 3: "immediate"}, [q["id"] for q in qs])
        stopping = Stopping()
        run("standbys stopping", stopping, stopper)
        stopping.stops = stopper.stops
        for s in stopping.stops:
            if not s.exercised:
                failures.append(f"standbys stopping: the {s.mode} stop planned at {s.planned_at} was not exercised on a "
                                + ("standby (no question from there on was read from one)" if s.question is None else
                                   f"standby: {s.question} was answered by {s.answered_by}, identical: {s.identical}"))
        stopped = {s.stopped for s in stopping.stops}
        stopping.passed = (stopping.identical_to_single_server == n and stopping.user_errors == 0
                           and all(s.exercised for s in stopping.stops) and len(stopped) == len(stopping.stops))

        for s in standbys:  # back, and used again once the product's skip period is over
            if not cluster.running(s):
                cluster.start(s)
        wait_caught_up(cluster)
        time.sleep(replicas.RETRY_S)
        gone = last["document"] if last.get("document") else pdfs[-1].name

        def remove() -> None:
            with db.connection(single) as conn:
                remove_document(conn, gone, coll)
        after_removal = after_write("read your writes after removal", last, f"removal of {gone}", remove, gone)
    phases = (after_ingest, both_up, stopping, after_removal)
    return Report(
        passed=errors == 0 and all(p.passed for p in phases), questions=f"{questions_file} ({n})",
        questions_asked=asked, user_errors=errors, read_your_writes_after_ingest=after_ingest,
        both_standbys_up=both_up, standbys_stopping=stopping, read_your_writes_after_removal=after_removal,
        read_wait_s=READ_WAIT_S, replay_paused_s=PAUSE_S,
        replication_lag_max_during_ingest=lag,
        seconds=round(time.perf_counter() - t0, 1), failures=failures[:20])


def summary_line(report: Report) -> str:
    return json.dumps(report.model_dump(), separators=(",", ":"))
