"""Issue 39, round 3 (the parse side): the real `chapterverse` command on real PDFs and real Postgres.

* A parse that takes minutes (a form-XObject fan-out bomb) is stopped with the command: Ctrl-C
  returns within a second or two and leaves no parser running; a command killed with SIGKILL takes
  its parser with it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ingest.child import orphaned
from tests.pdfgen import FONT, _raw_pdf, _stream, text_pdf

RUN = uuid.uuid4().hex[:8]
GOOD = "A good page about carburetor icing, carburetor heat and the magneto check before take-off. " * 6


def fan_out_bomb_pdf(path: Path, depth: int = 8, fan: int = 10) -> Path:
    """One small page that draws a form that draws the next form ``fan`` times, ``depth`` deep: a
    2 KB file whose page takes MuPDF minutes to lay out (``fan ** depth`` drawings; depth 5 takes
    about 0.4 s here, each level ten times more)."""
    first = 6  # objects 1-5: catalog, pages, page, content, font; the forms follow
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Count 1 /Kids [3 0 R] >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
               b"/Resources << /Font << /F1 5 0 R >> /XObject << /X 6 0 R >> >> >>",
               _stream(b"BT /F1 12 Tf 72 720 Td (A page that draws a form.) Tj ET /X Do", compress=False), FONT]
    for level in range(depth):
        body = b"/X Do " * fan
        objects.append(b"<< /Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources << /XObject << /X %d 0 R >> >> "
                       b"/Length %d >>\nstream\n" % (first + level + 1, len(body)) + body + b"\nendstream")
    leaf = b"BT /F1 1 Tf 10 10 Td (x) Tj ET"
    objects.append(b"<< /Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources << /Font << /F1 5 0 R >> >> "
                   b"/Length %d >>\nstream\n" % len(leaf) + leaf + b"\nendstream")
    path.write_bytes(_raw_pdf(objects))
    return path


def _session(sid: int) -> dict[int, str]:
    """The live (not zombie) processes of session ``sid``: pid -> command line."""
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        state, _ppid, _pgrp, session = stat.rsplit(")", 1)[1].split()[:4]
        if int(session) == sid and state != "Z":
            found[int(entry)] = cmdline
    return found


def _wait_for(predicate, timeout_s: float, step_s: float = 0.05) -> bool:  # noqa: ANN001
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(step_s)
    return bool(predicate())


def _as_from_a_terminal() -> None:
    """In the command's process: a session of its own (its processes can be found and cleaned up),
    and SIGINT as a terminal would deliver it (a background shell starts children ignoring it)."""
    os.setsid()
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def command() -> Iterator[list[subprocess.Popen]]:
    """Started commands; whatever is left of their sessions is killed afterwards."""
    started: list[subprocess.Popen] = []
    yield started
    for proc in started:
        for pid in _session(proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.kill()
        proc.wait()


def _start(started: list[subprocess.Popen], *args: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "retrieval.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ),
                            preexec_fn=_as_from_a_terminal)  # noqa: PLW1509
    started.append(proc)
    return proc


def _parsing(proc: subprocess.Popen, name: str) -> list[int]:
    return [pid for pid, cmd in _session(proc.pid).items() if "ingest.isolate" in cmd and name in cmd]


def _parsers(proc: subprocess.Popen) -> list[int]:
    """The PDF parser processes left of the command's session."""
    return [pid for pid, cmd in _session(proc.pid).items() if "ingest.isolate" in cmd]


@pytest.fixture(scope="module")
def bomb(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("round3")
    return {"good": text_pdf(root / f"good-{RUN}.pdf", [GOOD]), "bomb": fan_out_bomb_pdf(root / f"bomb-{RUN}.pdf")}


def test_ctrl_c_during_a_read_ahead_parse_returns_at_once_and_leaves_no_parser(settings, bomb, command) -> None:
    proc = _start(command, "ingest", str(bomb["good"]), str(bomb["bomb"]), "--collection", f"round3-int-{RUN}")
    assert _wait_for(lambda: _parsing(proc, bomb["bomb"].name), 90), proc.communicate(timeout=5)
    time.sleep(2)  # well into the bomb
    assert proc.poll() is None
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: to the whole foreground process group
    t0 = time.monotonic()
    try:
        out, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail("the command did not return within 20 s of Ctrl-C")
    took = time.monotonic() - t0
    assert took < 3, f"{took:.1f} s after Ctrl-C; {err}"
    assert proc.returncode == 130, err
    assert "error: interrupted:" in err and "was not stored" in err, err
    assert _wait_for(lambda: not _parsers(proc), 2), _session(proc.pid)


def test_a_command_killed_with_sigkill_takes_its_parser_with_it(settings, bomb, command) -> None:
    # the bomb read ahead: its parser was started by the read-ahead thread, and Linux ties the
    # parent-death signal to the thread that started a child (the command's other children, such as
    # a first run's model export, are not the parser's business here)
    proc = _start(command, "ingest", str(bomb["good"]), str(bomb["bomb"]), "--collection", f"round3-kill-{RUN}")
    assert _wait_for(lambda: _parsing(proc, bomb["bomb"].name), 90), proc.communicate(timeout=5)
    time.sleep(1)
    proc.kill()
    proc.wait()
    assert _wait_for(lambda: not _parsers(proc), 2), _session(proc.pid)



def test_a_child_knows_when_the_process_that_started_it_is_gone() -> None:
    # handed to a reaper before PR_SET_PDEATHSIG took hold: pid 1, or a desktop's ``systemd --user``
    assert orphaned("4242", 1) and orphaned("4242", 977) and not orphaned("4242", 4242)
    assert orphaned(None, 1) and not orphaned(None, 4242)  # started some other way: only init says so
