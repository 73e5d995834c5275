"""Issue 39, item 3 (what was left): every child process dies with the process that started it. The
one-time model export (``retrieval.encode.export_child``, torch and several hundred MB) outlived an
ingest killed with SIGKILL in a fresh home and kept burning CPU; parsers and jobs already died with
theirs (tests/test_hostile_round3_parse.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from retrieval.lifetime import orphaned


def _children(pid: int) -> list[int]:
    out = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(proc.name))
            except (OSError, ValueError, IndexError):
                continue
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_the_model_export_child_dies_with_a_parent_killed_with_sigkill(settings, tmp_path: Path) -> None:
    from retrieval.encode.embed import get_embedder

    model = get_embedder(settings.search.embedding_model, load=False)._path
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        from pathlib import Path
        from retrieval.encode import export_child
        export_child.run("passages", {str(model)!r}, Path({str(tmp_path / 'cache')!r}))
    """)], start_new_session=True)
    deadline = time.monotonic() + 60
    kids: list[int] = []
    while not kids and time.monotonic() < deadline:
        kids = [k for k in _children(parent.pid) if "export_child" in Path(f"/proc/{k}/cmdline").read_text()]
        time.sleep(0.1)
    assert kids, "the export child never started"
    time.sleep(1.0)  # it is loading torch and the model
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while _alive(kids[0]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(kids[0]), "the export child outlived its parent"


def test_a_child_whose_parent_is_gone_knows_it() -> None:
    assert orphaned("4242", 1) and orphaned("4242", 977) and not orphaned("4242", 4242)
    assert orphaned(None, 1) and not orphaned(None, 4242)
