"""Ingest benchmark: each document ingested by a fresh `chapterverse ingest` process, so the figures
(seconds, pages/s, peak memory) are those a user sees, model loading excluded from seconds but
included in peak memory."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from ingest import store
from retrieval import db
from retrieval.settings import Settings


def run(settings: Settings, pdfs: list[Path], command: str) -> dict:
    collection = f"bench-ingest-{int(time.time())}"
    rows = []
    try:
        for pdf in pdfs:
            proc = subprocess.run(
                [sys.executable, "-m", "retrieval.cli", "ingest", str(pdf), "--collection", collection, "--json",
                 "--quiet"], capture_output=True, text=True, env=os.environ.copy(), check=False)
            if proc.returncode != 0:
                raise RuntimeError(f"ingest of {pdf} failed: {proc.stderr.strip().splitlines()[-1:]}")
            out = json.loads(proc.stdout)
            res = out["results"][0]
            rows.append({"document": res["name"], "pages": res["pages"], "chunks": res["chunks"],
                         "seconds": round(res["seconds"], 2),
                         "pages_per_s": round(res["pages"] / res["seconds"], 2),
                         "chunks_per_s": round(res["chunks"] / res["seconds"], 2),
                         "peak_rss_mb": round(out["peak_rss_mb"], 1)})
    finally:
        with db.connection(settings) as conn:
            for r in rows:
                store.remove_document(conn, r["document"], collection)
    total_pages = sum(r["pages"] for r in rows)
    total_s = sum(r["seconds"] for r in rows)
    return {
        "command": command,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "config": {"embedding_model": settings.embedding_model, "chunk_tokens": settings.chunk_tokens,
                   "chunk_overlap_tokens": settings.chunk_overlap_tokens,
                   "database": "external" if settings.database_url else "embedded"},
        "documents": rows,
        "total": {"pages": total_pages, "chunks": sum(r["chunks"] for r in rows), "seconds": round(total_s, 2),
                  "pages_per_s": round(total_pages / total_s, 2) if total_s else None,
                  "max_peak_rss_mb": max((r["peak_rss_mb"] for r in rows), default=None)},
    }
