"""Whole-process CLI latency: each command run as a new process, as a person would run it.

    python -m chapterverse_lab.cli_bench --label after --out results/cli_latency.json --collection dev

For every command: wall time and CPU time (user + sys of the process and its children, which is
less disturbed than wall time when other work shares the cores), p50/min/max over ``--runs``
runs. For ``ask`` and ``search``, the stage split that the CLI prints with ``CHAPTERVERSE_TIMINGS=1``
(startup = interpreter + module imports, imports = the command's own imports, db_start, model_load,
search, answer); code without that hook (``--code`` pointing at an older checkout) gets wall/CPU only.
Each label's entry in ``--out`` is replaced; other labels are kept, so "before" and "after" can sit
side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from chapterverse_lab.results import write_result

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_QUESTION = "What is the maximum indicated airspeed below 10,000 feet MSL?"


def commands(collection: str, question: str, pdf: Path, junk: Path) -> dict[str, list[str]]:
    return {
        "docs": ["docs"],
        "db status": ["db", "status"],
        "ingest unchanged": ["ingest", str(pdf), "--collection", collection],
        "ingest rejected (not a PDF)": ["ingest", str(junk), "--collection", collection],
        "ingest rejected (missing file)": ["ingest", str(junk.with_name("missing.pdf")), "--collection", collection],
        "search": ["search", question, "--collection", collection, "--json"],
        "ask": ["ask", question, "--collection", collection, "--json"],
    }


def _cpu_children() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def parse_timings(stderr: str) -> dict[str, float] | None:
    """The stage split from the CLI's ``timings {...}`` line, as startup/imports/db_start/model_load/search/answer/other."""
    line = next((ln for ln in reversed(stderr.splitlines()) if ln.startswith("timings ")), None)
    if line is None:
        return None
    raw = json.loads(line[len("timings "):])
    split = {k: raw.get(k, 0.0) for k in ("startup", "imports", "db_start", "model_load")}
    if "ask" in raw:
        split["search"] = raw.get("ask.search", 0.0)
        split["answer"] = raw["ask"] - split["search"]
    else:
        split["search"] = raw.get("search", 0.0)
    total = raw.get("total_ms") or 0.0
    split["other (exit, server stop)"] = max(0.0, total - sum(split.values()))
    split["total"] = total
    return split


SCRIPT = Path(sys.executable).with_name("chapterverse")  # the console command (retrieval.warm:main)


def run_once(code: Path, args: list[str], env: dict[str, str], script: bool = False) -> dict:
    cpu0 = _cpu_children()
    t0 = time.perf_counter()
    command = [str(SCRIPT), *args] if script else [sys.executable, "-m", "retrieval.cli", *args]
    try:
        proc = subprocess.run(command, cwd=code, env=env, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return {"wall_s": time.perf_counter() - t0, "cpu_s": _cpu_children() - cpu0, "exit": "timeout",
                "split_ms": None}
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "cpu_s": _cpu_children() - cpu0, "exit": proc.returncode,
            "split_ms": parse_timings(proc.stderr)}


def small_pdf(path: Path) -> Path:
    """A one-page PDF for the unchanged re-ingest (ingested once, untimed, before the timed runs)."""
    from ingest.mupdf import pymupdf  # noqa: PLC0415

    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_textbox(pymupdf.Rect(72, 72, 540, 720),
                        "Benchmark page. The unchanged re-ingest of this file must be a no-op. " * 5, fontsize=11)
    doc.save(path)
    doc.close()
    return path


def wait_warm(env: dict[str, str], timeout_s: float = 300) -> None:
    """Until the warm process for ``env`` answers (started by the untimed first call)."""
    from retrieval import warm  # noqa: PLC0415

    path = warm.socket_path(warm.socket_dir(), env)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if warm._exchange(path, {"ping": True}, timeout_s=2) is not None:
            return
        time.sleep(0.5)
    raise SystemExit(f"no warm process answered on {path}")


def summarize(runs: list[dict]) -> dict:
    walls = [r["wall_s"] for r in runs]
    cpus = [r["cpu_s"] for r in runs]
    out: dict = {"runs": len(runs), "exit_codes": sorted({str(r["exit"]) for r in runs}),
                 "wall_s": {"p50": round(statistics.median(walls), 2), "min": round(min(walls), 2),
                            "max": round(max(walls), 2)},
                 "cpu_s": {"p50": round(statistics.median(cpus), 2), "min": round(min(cpus), 2),
                           "max": round(max(cpus), 2)}}
    splits = [r["split_ms"] for r in runs if r["split_ms"]]
    if splits:
        out["split_ms_p50"] = {k: round(statistics.median(s[k] for s in splits), 1) for k in splits[0]}
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--label", required=True, help="name of this measurement (e.g. before, after)")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "cli_latency.json")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--collection", default="dev")
    ap.add_argument("--question", default=DEFAULT_QUESTION)
    ap.add_argument("--code", type=Path, default=ROOT, help="source tree whose retrieval.cli is run")
    ap.add_argument("--only", action="append", help="measure only these commands (repeatable)")
    ap.add_argument("--warm", action="store_true", help="run the console command (`chapterverse`, retrieval.warm) "
                    "after one untimed call has started its warm process; no stage split (timings run cold)")
    opts = ap.parse_args(argv)

    pdf = small_pdf(Path("/tmp") / "cv-bench-unchanged.pdf")
    junk = Path("/tmp") / f"cv-bench-not-a-pdf-{os.getpid()}.pdf"
    junk.write_text("this is not a PDF\n")
    env = {**os.environ, "CHAPTERVERSE_TIMINGS": "1", "PYTHONPATH": str(opts.code.resolve())}
    if opts.warm:
        env.pop("CHAPTERVERSE_TIMINGS")
    table = {**commands("cli-bench", opts.question, pdf, junk),  # ingest/rejections: own collection
             **{k: v for k, v in commands(opts.collection, opts.question, pdf, junk).items() if k in ("search", "ask")}}
    selected = {k: v for k, v in table.items() if not opts.only or k in opts.only}
    results = {}
    try:
        if "ingest unchanged" in selected:  # make it unchanged first (untimed; loads the model once)
            run_once(opts.code.resolve(), selected["ingest unchanged"], env)
        for name, args in selected.items():
            if opts.warm:
                run_once(opts.code.resolve(), args, env, script=True)
                wait_warm(env)
            runs = [run_once(opts.code.resolve(), args, env, script=opts.warm) for _ in range(opts.runs)]
            results[name] = summarize(runs)
            s = results[name]
            print(f"{name}: wall p50 {s['wall_s']['p50']} s, cpu p50 {s['cpu_s']['p50']} s, exit {s['exit_codes']}"
                  + (f", split {s['split_ms_p50']}" if "split_ms_p50" in s else ""), flush=True)
    finally:
        junk.unlink(missing_ok=True)

    existing = json.loads(opts.out.read_text()) if opts.out.exists() else {}
    labels = existing.get("labels", {})
    load = os.getloadavg()
    labels[opts.label] = {
        "command": "python -m chapterverse_lab.cli_bench " + " ".join(argv if argv is not None else sys.argv[1:]),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "code": str(opts.code.resolve()),
        "configuration": {"warm": opts.warm, "runs": opts.runs, "collection": opts.collection, "question": opts.question,
                          "database": "external (DATABASE_URL)" if os.environ.get("DATABASE_URL") else
                          f"embedded at {os.environ.get('CHAPTERVERSE_HOME', '(default home)')}",
                          "cpus": os.cpu_count(), "load_average_1_5_15_at_end": [round(x, 1) for x in load]},
        "commands": results,
    }
    doc = {"what": "each CLI command as a whole new process: wall and CPU seconds (p50 over runs); for "
                   "ask/search the stage split in ms (CHAPTERVERSE_TIMINGS=1)",
           "labels": labels}
    write_result(opts.out, doc)
    print(f"wrote {opts.out}")


if __name__ == "__main__":
    main()
