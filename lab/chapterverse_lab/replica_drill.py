"""``chapterverse eval replica-drill``: read replicas under failure, on one machine.

A primary and two streaming standbys start from the embedded binaries (``chapterverse_lab.cluster``);
the sample PDFs are ingested on the primary and a question about the last one is asked through the
standbys at once (read your writes after an ingest). Then every question is asked

1. on the primary alone (the single-server run every other answer is compared with),
2. through the standbys, both up (each must be answered by a standby),
3. through the standbys again, stopping the standby a question reads from in the middle of it (after the
   question chose it, before it searches): a third of the way through with ``pg_ctl -m fast``, two
   thirds through (then the other one) with ``-m immediate``, as a crash would.

The standbys are started again, and a document is removed and a question about it asked through them at
once (read your writes after a removal). The report is one JSON object: questions asked, answered,
answered identically to the single-server run, errors a user saw (must be 0), reads served per server,
the worst read-your-writes wait, and the replication lag the primary reported (sampled every 50 ms).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from chapterverse_lab.cluster import Cluster, wait_caught_up
from retrieval.models import Answer
from retrieval.settings import Settings
from retrieval.store import db, replicas

ERROR_MARKS = ("index is unavailable", "Something went wrong")


class Report(BaseModel):
    passed: bool
    questions_asked: int
    answered: int
    identical_to_single_server: int
    user_errors: int
    through_standbys_both_up: str  # "n/m" of the run with both standbys up
    reads_per_server: dict[str, int]
    read_your_writes: dict[str, Any]
    worst_read_your_writes_wait_ms: float
    replication_lag_max: dict[str, float]
    seconds: float
    questions: str
    failures: list[str]


def same(a: Answer, b: Answer) -> bool:
    """The same answer as a user sees it: refusal or not, text, quotes and their pages, nearest passages."""
    keys = {"refusal", "answer", "reason", "citations", "nearest"}
    return a.model_dump(include=keys) == b.model_dump(include=keys)


def user_error(a: Answer) -> bool:
    return a.refusal and any(mark in a.reason for mark in ERROR_MARKS)


class LagSampler(threading.Thread):
    """The largest replay lag (bytes, seconds) the primary reports while it runs."""

    def __init__(self, cluster: Cluster) -> None:
        super().__init__(daemon=True, name="lag-sampler")
        self.cluster, self.stop = cluster, threading.Event()
        self.max_bytes = self.max_s = 0.0

    def run(self) -> None:
        while not self.stop.wait(0.05):
            try:
                rows = self.cluster.replication()
            except Exception:  # noqa: BLE001,S112  (the primary busy or restarting: sample again)
                continue
            for r in rows:
                self.max_bytes, self.max_s = max(self.max_bytes, r["bytes_behind"]), max(self.max_s, r["replay_lag_s"])


def stopping_search(cluster: Cluster, mode: str) -> Callable[..., Any]:
    """The question's search, which first stops (once) the standby the question is reading from: the
    question has chosen it and holds a connection to it, so the stop lands in the middle of the question."""
    from retrieval.search.search import search  # noqa: PLC0415

    pending = [mode]

    def run(settings: Settings, *args: Any, **kwargs: Any) -> Any:
        on = next((s for s in cluster.servers if s.standby and s.url == db.conninfo(settings)), None)
        if pending and on is not None:
            cluster.stop(on, pending.pop())
        return search(settings, *args, **kwargs)
    return run


def drill(base: Settings, corpus: Path, questions_file: Path, limit: int | None = None,
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
    servers: Counter[str] = Counter()
    waits: list[float] = []
    asked = answered = identical = errors = 0
    with Cluster() as cluster:
        primary = cluster.primary()
        single = base.but(db={"url": primary.url, "read_urls": [], "placement": {}})
        db.ready(single)
        standbys = [cluster.standby(), cluster.standby()]
        wait_caught_up(cluster)
        through = base.but(db={"url": primary.url, "read_urls": [s.url for s in standbys], "placement": {}})
        sampler = LagSampler(cluster)
        sampler.start()
        log(f"primary and 2 standbys up in {time.perf_counter() - t0:.1f} s; ingesting {len(pdfs)} PDFs")

        def ask_through(q: dict, search_fn: Callable[..., Any] | None = None) -> Answer:
            nonlocal asked, errors
            a = ask(through, q["question"], collections=[coll], answerer="extractive", search_fn=search_fn)
            asked += 1
            servers[a.server] += 1
            waits.append(a.timings_ms.get("replica.wait", 0.0))
            if user_error(a):
                errors += 1
                failures.append(f"{q['id']}: {a.reason[:200]}")
            return a

        embedder = get_embedder(single.search.embedding_model)
        for pdf in pdfs:
            ingest_source(single, embedder, read_path(str(pdf), 500_000_000), coll, quiet=True)
        last = next((q for q in qs if q.get("document") == pdfs[-1].name), qs[0])
        after_ingest = ask_through(last)  # at once: the standbys may still be replaying the ingest
        log(f"ingested in {time.perf_counter() - t0:.1f} s; asked at once on {after_ingest.server}")

        baseline = {q["id"]: ask(single, q["question"], collections=[coll], answerer="extractive") for q in qs}
        ingest_ok = same(after_ingest, baseline[last["id"]])
        if not ingest_ok:
            failures.append(f"read your writes after ingest: {last['id']} differs from the single-server answer")

        def run(label: str, stops: dict[int, str]) -> int:
            nonlocal answered, identical
            on_standby = 0
            for i, q in enumerate(qs):
                a = ask_through(q, stopping_search(cluster, stops[i]) if i in stops else None)
                on_standby += a.server.startswith("replica")
                answered += not user_error(a)
                if same(a, baseline[q["id"]]):
                    identical += 1
                else:
                    failures.append(f"{label} {q['id']}: differs from the single-server answer ({a.server})")
            log(f"{label}: {len(qs)} questions, {on_standby} on standbys, {time.perf_counter() - t0:.1f} s")
            return on_standby

        both_up = run("both standbys up", {})
        if both_up != len(qs):
            failures.append(f"only {both_up} of {len(qs)} questions were answered by a standby with both up")
        n = len(qs)
        run("standbys stopping", {n // 3: "fast", (2 * n) // 3: "immediate"})

        for s in standbys:  # back, and used again once the product's skip period is over
            cluster.start(s)
        wait_caught_up(cluster)
        time.sleep(replicas.RETRY_S)
        gone = last["document"] if last.get("document") else pdfs[-1].name
        with db.connection(single) as conn:
            remove_document(conn, gone, coll)
        after_removal = ask_through(last)  # at once
        reference = ask(single, last["question"], collections=[coll], answerer="extractive")
        cited = {c.document for c in after_removal.citations} | {p.document for p in after_removal.nearest}
        removal_ok = gone not in cited and same(after_removal, reference)
        if not removal_ok:
            failures.append(f"read your writes after removal: {last['id']} still shows {gone} or differs")
        sampler.stop.set()
        sampler.join()
    ok = (errors == 0 and both_up == len(qs) and identical == 2 * len(qs) and ingest_ok and removal_ok)
    return Report(
        passed=ok, questions_asked=asked, answered=answered + (not user_error(after_ingest)) + (not user_error(after_removal)),
        identical_to_single_server=identical + ingest_ok + removal_ok, user_errors=errors,
        through_standbys_both_up=f"{both_up}/{len(qs)}", reads_per_server=dict(sorted(servers.items())),
        read_your_writes={"after_ingest": {"held": ingest_ok, "server": after_ingest.server,
                                           "wait_ms": round(after_ingest.timings_ms.get("replica.wait", 0.0), 1)},
                          "after_removal": {"held": removal_ok, "server": after_removal.server, "removed": gone,
                                            "wait_ms": round(after_removal.timings_ms.get("replica.wait", 0.0), 1)}},
        worst_read_your_writes_wait_ms=round(max(waits, default=0.0), 1),
        replication_lag_max={"bytes": sampler.max_bytes, "seconds": round(sampler.max_s, 3)},
        seconds=round(time.perf_counter() - t0, 1), questions=f"{questions_file} ({len(qs)})", failures=failures[:20])


def summary_line(report: Report) -> str:
    return json.dumps(report.model_dump(), separators=(",", ":"))
