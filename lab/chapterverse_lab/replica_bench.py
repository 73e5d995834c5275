"""``chapterverse eval replica-bench``: questions per second and CPU per question with 0, 1 and 2
standbys on this machine, and what read-your-writes costs.

A primary and two standbys start here (``chapterverse_lab.cluster``) and the sample PDFs are ingested.
For each number of standbys, ``clients`` processes (spawned once, models loaded and warmed before any
timing) each ask every question ``rounds`` times with the extractive answerer; reported: questions per
second (all clients together), the median latency, CPU seconds per question of the clients and of all
the Postgres processes (psutil, the servers' own processes only, so other work on the machine is not
counted), and the reads each server served. Read-your-writes: the routing's own cost per question
(``timings_ms["replica.route"]``: one statement on the primary, one on the standby), and, for a question
asked at once after a small document is ingested and after it is removed (``writes`` times each): how
many a standby answered, how many of those it answered only after waiting for the write
(``timings_ms["replica.behind"]``), and the wait of those a standby answered. A question answered by the
primary is counted as a fallback, never in the waits.
"""

from __future__ import annotations

import json
import statistics
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import psutil

from chapterverse_lab.cluster import Cluster, wait_caught_up
from retrieval.settings import Settings
from retrieval.store import db

COLLECTION = "bench"


def _postgres_cpu(cluster: Cluster) -> float:
    """CPU seconds used so far by the cluster's servers (postmasters and their children)."""
    total = 0.0
    for server in cluster.servers:
        pid_file = server.data / "postmaster.pid"
        if not pid_file.exists():
            continue
        try:
            top = psutil.Process(int(pid_file.read_text().split()[0]))
            for p in [top, *top.children(recursive=True)]:
                t = p.cpu_times()
                total += t.user + t.system + t.children_user + t.children_system
        except (psutil.Error, ValueError, OSError):
            continue
    return total


def _settings(url: str, read_urls: list[str]) -> Settings:
    """A client's settings: the environment's, reading ``url`` and its standbys ``read_urls``."""
    return Settings(db={"url": url, "read_urls": read_urls})


def _warm(url: str, questions: list[str]) -> float:
    from retrieval.answer.ask import ask  # noqa: PLC0415

    settings = _settings(url, [])
    for q in questions[:3]:
        ask(settings, q, collections=[COLLECTION], answerer="extractive")
    return time.process_time()


def _client(url: str, read_urls: list[str], questions: list[str], rounds: int) -> dict[str, Any]:
    """One client's share: every question ``rounds`` times; its latencies, CPU, servers and span."""
    from retrieval.answer.ask import ask  # noqa: PLC0415

    settings = _settings(url, read_urls)
    cpu0, t0 = time.process_time(), time.time()
    latencies, route, servers = [], [], Counter()
    for _ in range(rounds):
        for q in questions:
            t = time.perf_counter()
            a = ask(settings, q, collections=[COLLECTION], answerer="extractive")
            latencies.append((time.perf_counter() - t) * 1e3)
            route.append(a.timings_ms.get("replica.route", 0.0))
            servers[" ".join(a.server.split()[:2]) if a.server.startswith("replica") else "primary"] += 1
    return {"latencies_ms": latencies, "route_ms": route, "servers": dict(servers), "cpu_s": time.process_time() - cpu0,
            "start": t0, "end": time.time()}


def _small_pdf(path: Path, n: int) -> Path:
    from ingest.mupdf import pymupdf  # noqa: PLC0415

    doc = pymupdf.open()
    for i in range(3):
        page = doc.new_page()
        page.insert_textbox(pymupdf.Rect(72, 72, 540, 720), f"Bench notice {n}, page {i + 1}. The hangar door code "
                            f"for rotation {n} is {1000 + n}. " + "Pilots review the weather before each flight. " * 20)
    doc.save(path)
    doc.close()
    return path


def _read_your_writes(primary: Settings, through: Settings, writes: int, root: Path) -> dict[str, Any]:
    from ingest.pipeline import ingest_source  # noqa: PLC0415
    from ingest.sources import read_path  # noqa: PLC0415
    from ingest.store import remove_document  # noqa: PLC0415
    from retrieval.answer.ask import ask  # noqa: PLC0415
    from retrieval.encode.embed import get_embedder  # noqa: PLC0415

    embedder = get_embedder(primary.search.embedding_model)
    waits: dict[str, list[float]] = {"ingest": [], "removal": []}  # of the questions a standby answered
    waited, fallbacks = Counter(), Counter()

    def asked(write: str, n: int) -> None:
        a = ask(through, f"What is the hangar door code for rotation {n}?", collections=[COLLECTION], answerer="extractive")
        if not a.server.startswith("replica"):
            fallbacks[write] += 1
            return
        waits[write].append(a.timings_ms.get("replica.wait", 0.0))
        waited[write] += "replica.behind" in a.timings_ms

    for n in range(writes):
        pdf = _small_pdf(root / f"notice-{n}.pdf", n)
        ingest_source(primary, embedder, read_path(str(pdf), 10_000_000), COLLECTION, quiet=True)
        asked("ingest", n)
        with db.connection(primary) as conn:
            remove_document(conn, pdf.name, COLLECTION)
        asked("removal", n)
    return {k: {"answered_by_a_standby": f"{len(v)}/{writes}", "standby_waited_for_the_write": f"{waited[k]}/{len(v)}",
                "fell_back_to_the_primary": f"{fallbacks[k]}/{writes}",
                "median_wait_ms": round(statistics.median(v), 2) if v else None,
                "max_wait_ms": round(max(v), 2) if v else None} for k, v in waits.items()}


def bench(base: Settings, corpus: Path, questions_file: Path, clients: int = 2, rounds: int = 2, writes: int = 10,
          limit: int | None = None, order: tuple[int, ...] = (0, 1, 2),
          log: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    from ingest.pipeline import ingest_source  # noqa: PLC0415
    from ingest.sources import read_path  # noqa: PLC0415
    from retrieval.encode.embed import get_embedder  # noqa: PLC0415

    questions = [q["question"] for q in json.loads(questions_file.read_text())][:limit]
    out: dict[str, Any] = {"order": list(order), "clients": clients, "rounds": rounds, "questions": len(questions), "configurations": {}}
    with Cluster() as cluster:
        primary = base.but(db={"url": cluster.primary().url, "read_urls": [], "placement": {}})
        db.ready(primary)
        standbys = [cluster.standby(), cluster.standby()]
        embedder = get_embedder(primary.search.embedding_model)
        for pdf in sorted(corpus.glob("*.pdf")):
            ingest_source(primary, embedder, read_path(str(pdf), 500_000_000), COLLECTION, quiet=True)
        wait_caught_up(cluster)
        log("cluster up, corpus ingested")
        with ProcessPoolExecutor(clients, mp_context=get_context("spawn")) as pool:
            url = primary.db.url.get_secret_value()
            list(pool.map(_warm, [url] * clients, [questions] * clients))
            for n in order:  # in this order (the machine's other load drifts: run it both ways)
                read_urls = [s.url for s in standbys[:n]]
                pg0, t0 = _postgres_cpu(cluster), time.time()
                parts = list(pool.map(_client, [url] * clients, [read_urls] * clients,
                                      [questions] * clients, [rounds] * clients))
                pg_cpu, wall = _postgres_cpu(cluster) - pg0, time.time() - t0
                asked = sum(len(p["latencies_ms"]) for p in parts)
                span = max(p["end"] for p in parts) - min(p["start"] for p in parts)
                servers: Counter[str] = Counter()
                for p in parts:
                    servers.update(p["servers"])
                lat = [x for p in parts for x in p["latencies_ms"]]
                route = [x for p in parts for x in p["route_ms"]]
                out["configurations"][f"{n} standbys"] = {
                    "questions": asked, "questions_per_s": round(asked / span, 2), "wall_s": round(wall, 1),
                    "latency_ms_median": round(statistics.median(lat), 1),
                    "latency_ms_p95": round(sorted(lat)[int(0.95 * (len(lat) - 1))], 1),
                    "client_cpu_s_per_question": round(sum(p["cpu_s"] for p in parts) / asked, 4),
                    "postgres_cpu_s_per_question": round(pg_cpu / asked, 4),
                    "routing_ms_median": round(statistics.median(route), 2) if n else 0.0,
                    "reads_per_server": dict(sorted(servers.items())),
                }
                log(f"{n} standbys: {out['configurations'][f'{n} standbys']}")
        through = primary.but(db={"read_urls": [s.url for s in standbys]})
        out["read_your_writes"] = _read_your_writes(primary, through, writes, cluster.root)
        log(f"read your writes: {out['read_your_writes']}")
    out["machine"] = {"cpus": psutil.cpu_count(), "load_average_after": [round(x, 2) for x in psutil.getloadavg()]}
    return out
