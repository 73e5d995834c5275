"""Ingest benchmark: each document ingested by a fresh `chapterverse ingest` process, so the figures
are those a user sees. Per document: wall seconds, the ingest process's CPU seconds (user + system,
all its threads), the embedded Postgres server's CPU seconds over the same time, pages per second and
pages per CPU-second, peak memory; and the load average, so a busy machine shows in the figures.
The one-time export of the passage encoder (``retrieval.encode.passage_encoder``) is made before the clock
starts and reported on its own.

Two more ways, for where the time goes (issue 40; ``python -m chapterverse_lab.ingest_bench``):

* ``command``: one ``chapterverse ingest PDF... --json`` over a whole set, as a user runs it: wall
  seconds, CPU seconds of the command with every process it started (the PDF parsers), the Postgres
  server's, every other process's on the machine over the same time (the figure a busy machine
  distorts), peak memory of the command's process tree (sampled) and of its largest process, and
  each document's steps as the pipeline times them (``IngestResult.stages``);
* ``stages``: the same documents one step after another in this process, nothing overlapped: parse
  (the parser child's CPU), split, embed, write (with the server's CPU), so each step's cost is
  its own.
"""

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
from typing import Any

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


# ---------------------------------------------------------------------------------------------
# one command over a set, and the steps one after another (issue 40)

STEPS = ("start", "read", "split", "embed", "write")
SAMPLE_S = 0.05  # how often the command's process tree is measured for its memory


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy since boot (/proc/stat: all but idle and iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / CLOCK_TICKS


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def tree_rss_mb(pid: int) -> float:
    """Resident memory of a process and all its descendants now (MB); 0 once it is gone."""
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            total += _rss_mb(p)
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue  # exited meanwhile
    return total


def _sum_steps(rows: list[dict]) -> dict[str, dict[str, float]]:
    out = {s: {"seconds": 0.0, "cpu_seconds": 0.0} for s in STEPS}
    for r in rows:
        for step, got in r.get("stages", {}).items():
            for k in ("seconds", "cpu_seconds"):
                out.setdefault(step, {"seconds": 0.0, "cpu_seconds": 0.0})[k] += got[k]
    return {s: {k: round(v, 2) for k, v in d.items()} for s, d in out.items()}


def command(settings: Settings, pdfs: list[Path], collection: str) -> dict[str, Any]:
    """One ``chapterverse ingest`` of all ``pdfs`` into ``collection`` (removed afterwards)."""
    cmd = [sys.executable, "-m", "retrieval.cli", "ingest", *map(str, pdfs), "--collection", collection,
           "--json", "--quiet"]
    load0, busy0, server0, cpu0 = os.getloadavg(), machine_busy_seconds(), server_cpu_seconds(settings), _children_cpu()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    peak_tree = 0.0
    while proc.poll() is None:
        peak_tree = max(peak_tree, tree_rss_mb(proc.pid))
        time.sleep(SAMPLE_S)
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    cpu, busy, server1, load1 = _children_cpu() - cpu0, machine_busy_seconds() - busy0, server_cpu_seconds(settings), \
        os.getloadavg()
    largest = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    try:
        if proc.returncode != 0:
            raise RuntimeError(f"ingest failed ({proc.returncode}): {err.strip().splitlines()[-3:]}")
        rows = json.loads(out)["results"]
    finally:
        with db.connection(settings) as conn:
            for pdf in pdfs:
                store.remove_document(conn, pdf.name, collection)
    server = round(server1 - server0, 2) if server0 is not None and server1 is not None else None
    pages = sum(r["pages"] for r in rows)
    return {
        "pages": pages, "chunks": sum(r["chunks"] for r in rows), "seconds": round(wall, 2),
        "cpu_seconds": round(cpu, 2), "server_cpu_seconds": server,
        "other_processes_cpu_seconds": round(busy - cpu - (server or 0), 2),
        "pages_per_s": _ratio(pages, wall), "pages_per_cpu_s": _ratio(pages, cpu),
        "pages_per_cpu_s_with_server": _ratio(pages, cpu + (server or 0)),
        "peak_tree_rss_mb": round(peak_tree, 1), "largest_process_peak_rss_mb": round(largest, 1),
        "load_avg": {"before": [round(x, 2) for x in load0], "after": [round(x, 2) for x in load1]},
        "steps": _sum_steps(rows),
        "documents": [{"document": r["name"], "pages": r["pages"], "chunks": r["chunks"],
                       "seconds": round(r["seconds"], 2), "stages": r.get("stages", {})} for r in rows],
    }


def stages(settings: Settings, pdfs: list[Path], collection: str) -> dict[str, Any]:
    """Each document parsed, then split, embedded and written, one step after another in this process."""
    from ingest.pipeline import ingest_source, parse_ahead  # noqa: PLC0415
    from ingest.sources import load  # noqa: PLC0415

    embedder = get_embedder(settings.search.embedding_model, load=False)
    embedder.passage_encoder()
    rows, load0, busy0 = [], os.getloadavg(), machine_busy_seconds()
    try:
        for pdf in pdfs:
            src = load(str(pdf), settings.ingest.max_file_bytes, settings.ingest.download_timeout_s)
            t0, own0, kids0 = time.perf_counter(), time.process_time(), _children_cpu()
            parsed = parse_ahead(settings, src, collection)
            parse = {"seconds": round(time.perf_counter() - t0, 3), "cpu_seconds": round(_children_cpu() - kids0, 3),
                     "own_cpu_seconds": round(time.process_time() - own0, 3)}
            server0 = server_cpu_seconds(settings)
            res = ingest_source(settings, embedder, src, collection, quiet=True, parsed=parsed)
            server1 = server_cpu_seconds(settings)
            steps = {"parse": parse, **res.stages}
            if server0 is not None and server1 is not None:
                steps["write"] = {**steps["write"], "server_cpu_seconds": round(server1 - server0, 3)}
            rows.append({"document": res.name, "pages": res.pages, "chunks": res.chunks, "steps": steps})
    finally:
        with db.connection(settings) as conn:
            for r in rows:
                store.remove_document(conn, r["document"], collection)
    total: dict[str, dict[str, float]] = {}
    for r in rows:
        for step, got in r["steps"].items():
            for k, v in got.items():
                total.setdefault(step, {})[k] = round(total.get(step, {}).get(k, 0.0) + v, 2)
    return {"pages": sum(r["pages"] for r in rows), "chunks": sum(r["chunks"] for r in rows), "steps": total,
            "load_avg": {"before": [round(x, 2) for x in load0], "after": [round(x, 2) for x in os.getloadavg()]},
            "machine_busy_cpu_seconds": round(machine_busy_seconds() - busy0, 2), "documents": rows}


def main(argv: list[str] | None = None) -> None:
    import argparse  # noqa: PLC0415

    from retrieval.settings import get_settings  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog="python -m chapterverse_lab.ingest_bench")
    parser.add_argument("how", choices=("command", "stages"))
    parser.add_argument("pdfs", nargs="+", type=Path)
    parser.add_argument("--label", required=True, help="the run's name in the output (e.g. before, after)")
    parser.add_argument("--out", type=Path, required=True, help="JSON file the run is added to")
    parser.add_argument("--commit", default="", help="the code measured (a commit id)")
    args = parser.parse_args(argv)
    settings = get_settings()
    db.ready(settings)  # this process keeps the embedded server up, so its CPU can be read before and after
    _prepare_encoder(settings)
    collection = f"bench-speed-{int(time.time())}"
    measure = command if args.how == "command" else stages
    run_ = measure(settings, args.pdfs, collection)
    record = {"label": args.label, "how": args.how, "commit": args.commit,
              "command": "python -m chapterverse_lab.ingest_bench " + " ".join(argv if argv is not None else sys.argv[1:]),
              "date": datetime.now(UTC).isoformat(timespec="seconds"), **run_}
    doc = json.loads(args.out.read_text()) if args.out.is_file() else {"runs": []}
    doc["runs"].append(record)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    summary = {k: record[k] for k in ("label", "how", "pages", "chunks") if k in record}
    summary |= {k: record[k] for k in ("seconds", "cpu_seconds", "server_cpu_seconds", "other_processes_cpu_seconds",
                                       "pages_per_s", "pages_per_cpu_s", "peak_tree_rss_mb",
                                       "largest_process_peak_rss_mb", "load_avg") if k in record}
    print(json.dumps(summary))
    print(json.dumps(record["steps"]))


if __name__ == "__main__":
    main()
