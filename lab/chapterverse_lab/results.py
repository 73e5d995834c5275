"""The one writer of ``results/*.json`` (every ``chapterverse eval`` command uses it).

Each result records where it came from: besides the command, date and configuration that the
evaluation itself puts in, ``write_result`` adds ``provenance`` -- the git commit the code ran at and
whether the working tree differed from it (``git_dirty``, with the changed paths), so a number can be
traced to the code that produced it. Outside a git checkout (an installed package) the commit is
``null`` and says so.
"""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
MAX_DIRTY_PATHS = 50


def _git(*args: str, cwd: Path) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def provenance(repo: Path = REPO) -> dict[str, Any]:
    """The git commit of ``repo`` and whether its working tree (tracked or untracked files) differs."""
    commit = _git("rev-parse", "HEAD", cwd=repo)
    if commit is None:
        return {"git_commit": None, "git_dirty": None, "note": f"{repo} is not a git checkout"}
    status = _git("status", "--porcelain", "--untracked-files=all", cwd=repo) or ""
    paths = [line[3:] for line in status.splitlines() if line.strip()]
    return {"git_commit": commit.strip(), "git_dirty": bool(paths), "dirty_paths": paths[:MAX_DIRTY_PATHS],
            "dirty_paths_total": len(paths)}


def machine() -> dict[str, Any]:
    """Where a timing ran: the cores and the load average at the end (this machine is shared)."""
    return {"cpus": os.cpu_count(), "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
            "note": "shared machine: other work ran concurrently"}


def stamp(command: str) -> dict[str, Any]:
    """The head of a result: the command that made it and when (UTC)."""
    return {"command": command, "date": datetime.now(UTC).isoformat(timespec="seconds")}


def write_result(out: Path, result: dict[str, Any], *, repo: Path = REPO) -> dict[str, Any]:
    """Write ``result`` with its provenance to ``out`` (pretty JSON); return what was written. A result
    that took its provenance when its run started (``result["provenance"]``, as ``eval answers``
    does, so a commit made during a long run is not credited with it) keeps it; otherwise it is
    taken now, when the result is written."""
    full = {**result, "provenance": result.get("provenance") or {**provenance(repo), "taken": "at write"}}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(full, indent=2, default=str, ensure_ascii=False) + "\n")
    return full


def read_result(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a result file (expected a JSON object)")
    return data
