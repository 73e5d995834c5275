"""Ingest benchmark: each document ingested by a fresh `chapterverse ingest` process, so the figures
are those a user sees. Per document: wall seconds, the ingest process's CPU seconds (user + system,
all its threads), the embedded Postgres server's CPU seconds over the same time, pages per second and
pages per CPU-second, peak memory; and the load average, so a busy machine shows in the figures.
The one-time export of the passage encoder (``retrieval.encode.passage_encoder``) is made before the clock
starts and reported on its own."""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from ingest import store
from retrieval.store import db
from retrieval.encode.embed import get_embedder
from retrieval.settings import Settings

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_cpu(pid: int, with_children: bool) -> float:
    """CPU seconds of a process from /proc (user + system; with its reaped children's)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return (utime + stime + ((cutime + cstime) if with_children else 0)) / CLOCK_TICKS


def server_cpu_seconds(settings: Settings) -> float | None:
    """CPU seconds the embedded Postgres has used so far: the postmaster with the backends it has
    reaped, plus its live children. None for an external server or off Linux."""
    pid_file = settings.home / "pgdata" / "postmaster.pid"
    if settings.db.url or not pid_file.is_file():
        return None
    try:
        pid = int(pid_file.read_text().split()[0])
        total = _proc_cpu(pid, with_children=True)
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        for child in children:
            try:
                total += _proc_cpu(int(child), with_children=False)
            except (OSError, ValueError, IndexError):
                continue  # exited meanwhile: its time is in the postmaster's reaped total
        return total
    except (OSError, ValueError, IndexError):
        return None


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _prepare_encoder(settings: Settings) -> dict:
    """Make the passage encoder's export now (once per state directory), so per-document figures
    are those of every later ingest; returns what it cost."""
    t0, c0 = time.perf_counter(), time.process_time()
    emb = get_embedder(settings.search.embedding_model, load=False)
    emb.passage_encoder()  # export if missing: the benchmark wants it outside the clock
    return {"status": emb.passage_encoder_status(), "seconds": round(time.perf_counter() - t0, 2),
            "cpu_seconds": round(time.process_time() - c0, 2)}


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 2) if b else None


def run(settings: Settings, pdfs: list[Path], command: str) -> dict:
    collection = f"bench-ingest-{int(time.time())}"
    encoder = _prepare_encoder(settings)
    rows = []
    try:
        for pdf in pdfs:
            load_before = os.getloadavg()[0]
            server0, cpu0, t0 = server_cpu_seconds(settings), _children_cpu(), time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-m", "retrieval.cli", "ingest", str(pdf), "--collection", collection, "--json",
                 "--quiet"], capture_output=True, text=True, env=os.environ.copy(), check=False)
            wall, cpu, server1 = time.perf_counter() - t0, _children_cpu() - cpu0, server_cpu_seconds(settings)
            if proc.returncode != 0:
                raise RuntimeError(f"ingest of {pdf} failed: {proc.stderr.strip().splitlines()[-1:]}")
            out = json.loads(proc.stdout)
            res = out["results"][0]
            server = round(server1 - server0, 2) if server0 is not None and server1 is not None else None
            rows.append({"document": res["name"], "pages": res["pages"], "chunks": res["chunks"],
                         "seconds": round(wall, 2), "cpu_seconds": round(cpu, 2), "server_cpu_seconds": server,
                         "pages_per_s": _ratio(res["pages"], wall), "pages_per_cpu_s": _ratio(res["pages"], cpu),
                         "pages_per_cpu_s_with_server": _ratio(res["pages"], cpu + (server or 0)),
                         "chunks_per_s": _ratio(res["chunks"], wall), "peak_rss_mb": round(out["peak_rss_mb"], 1),
                         "load_avg_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)]})
    finally:
        with db.connection(settings) as conn:
            for r in rows:
                store.remove_document(conn, r["document"], collection)
    pages = sum(r["pages"] for r in rows)
    wall = sum(r["seconds"] for r in rows)
    cpu = sum(r["cpu_seconds"] for r in rows)
    server = sum(r["server_cpu_seconds"] or 0 for r in rows)
    return {
        "command": command,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "config": {"embedding_model": settings.search.embedding_model, "chunk_tokens": settings.ingest.chunk_tokens,
                   "chunk_overlap_tokens": settings.ingest.chunk_overlap_tokens,
                   "database": "external" if settings.db.url else "embedded"},
        "passage_encoder": encoder,
        "how": "each document in a fresh `chapterverse ingest` process; seconds = wall clock of that process; "
               "cpu_seconds = its user + system CPU (all threads); server_cpu_seconds = the embedded "
               "Postgres' CPU over the same interval; load_avg_1m = before and after",
        "documents": rows,
        "total": {"pages": pages, "chunks": sum(r["chunks"] for r in rows), "seconds": round(wall, 2),
                  "cpu_seconds": round(cpu, 2), "server_cpu_seconds": round(server, 2),
                  "pages_per_s": _ratio(pages, wall), "pages_per_cpu_s": _ratio(pages, cpu),
                  "pages_per_cpu_s_with_server": _ratio(pages, cpu + server),
                  "max_peak_rss_mb": max((r["peak_rss_mb"] for r in rows), default=None)},
    }
