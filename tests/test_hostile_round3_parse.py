"""Issue 39, round 3 (the parse side): the real `chapterverse` command on real PDFs and real Postgres.

* A parse that takes minutes (a form-XObject fan-out bomb) is stopped with the command: Ctrl-C
  returns within a second or two and leaves no parser running; a command killed with SIGKILL takes
  its parser with it.
* Unusual but legal names (a NUL in a download's file name, a local name that is not UTF-8) are
  ingested under readable names; junk before the %PDF- header within its first 1,024 bytes is
  skipped, as PDF readers do.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from retrieval.lifetime import orphaned
from tests.conftest import run_cli, sigint_delivered
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
    sigint_delivered()


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
    assert took < 8, f"{took:.1f} s after Ctrl-C; {err}"  # 1-3 s on a quiet machine; slack for a loaded one
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


# --- unusual but legal names, junk before the header (item 4) ------------------------------------

def test_odd_names_and_junk_before_the_header_are_ingested_with_readable_names(settings, tmp_path: Path) -> None:
    from tests.test_bot_fetch import Site  # noqa: PLC0415  (a local HTTP server)

    coll = f"round3-names-{RUN}"
    odd = os.fsencode(tmp_path) + b"/bad\xff-" + RUN.encode() + b".pdf"  # a name that is not UTF-8
    with open(odd, "wb") as f:  # (PyMuPDF cannot save under such a name itself)
        f.write(text_pdf(tmp_path / "odd.pdf", ["The odd-name manual says the magneto drop is 125 rpm. " * 5]).read_bytes())
    junk = tmp_path / f"junk-{RUN}.pdf"
    good = text_pdf(tmp_path / "plain.pdf", ["The junk-prefixed manual says the flaps extend to 40 degrees. " * 5])
    junk.write_bytes(os.urandom(600).replace(b"%", b"#") + good.read_bytes())  # mail-gateway junk first
    served = text_pdf(tmp_path / "served.pdf", ["The downloaded manual says the tyre pressure is 2.5 bar. " * 5])
    site = Site("127.0.0.1", 0, {"/get": (200, {"Content-Type": "application/pdf", "Content-Disposition":
                                               f'attachment; filename="nul%00name-{RUN}.pdf"'}, served.read_bytes())})
    res = subprocess.run([sys.executable, "-m", "retrieval.cli", "ingest", odd, junk, f"http://127.0.0.1:{site.port}/get",
                          "--collection", coll, "--json"], capture_output=True, env=dict(os.environ), timeout=300)
    out, err = res.stdout.decode(), res.stderr.decode()
    assert res.returncode == 0, err
    results = json.loads(out)["results"]
    assert [r["status"] for r in results] == ["ingested"] * 3, results
    assert [r["name"] for r in results] == [f"bad\ufffd-{RUN}.pdf", f"junk-{RUN}.pdf", f"nulname-{RUN}.pdf"]
    assert results[0]["origin"].endswith(f"/bad\ufffd-{RUN}.pdf")
    listed = run_cli("docs", "--collection", coll, "--json")
    assert sorted(d["name"] for d in json.loads(listed.stdout)["documents"]) == \
        sorted(r["name"] for r in results), listed.stderr


def test_junk_past_the_first_kilobyte_is_not_a_pdf(settings, tmp_path: Path) -> None:
    late = tmp_path / "late.pdf"
    late.write_bytes(b"#" * 1100 + text_pdf(tmp_path / "x.pdf", ["Some text on a page. " * 5]).read_bytes())
    res = run_cli("ingest", str(late), "--collection", f"round3-late-{RUN}")
    assert res.returncode == 1
    assert res.stderr.strip() == f"error: {late}: not a PDF (no %PDF- header in its first 1,024 bytes)", res.stderr


# --- URLs (item 8) -------------------------------------------------------------------------------

def test_a_url_with_a_port_out_of_range_is_bad_input_naming_the_port(settings) -> None:
    res = run_cli("ingest", "http://127.0.0.1:99999/x.pdf", "--collection", f"round3-url-{RUN}")
    assert res.returncode == 1
    assert res.stderr.strip() == "error: http://127.0.0.1:99999/x.pdf: not a valid URL (port 99999 is out of range " \
                                 "1-65535)", res.stderr


def test_an_infinite_download_timeout_means_no_deadline(tmp_path: Path) -> None:
    from ingest.sources import fetch_url  # noqa: PLC0415
    from tests.test_bot_fetch import Site  # noqa: PLC0415

    pdf = text_pdf(tmp_path / "t.pdf", ["A page downloaded without a deadline. " * 5]).read_bytes()
    site = Site("127.0.0.1", 0, {"/t.pdf": (200, {"Content-Type": "application/pdf"}, pdf)})
    src = fetch_url(f"http://127.0.0.1:{site.port}/t.pdf", 10**7, float("inf"))  # it raised OverflowError
    assert src.data == pdf and src.name == "t.pdf"


# --- docs and remove with a misspelt name (item 10) ------------------------------------------------

def test_docs_and_remove_with_a_misspelt_name_name_what_there_is(settings, tmp_path: Path) -> None:
    coll = f"round3-docs-{RUN}"
    guide = text_pdf(tmp_path / f"gretl-guide-{RUN}.pdf", ["The gretl guide explains the ordinary least squares. " * 5])
    other = text_pdf(tmp_path / f"pgfmanual-{RUN}.pdf", ["The pgf manual explains how to draw a path with TikZ. " * 5])
    assert run_cli("ingest", str(other), str(guide), "--collection", coll, "-q").returncode == 0
    listed = run_cli("docs", "--collection", f"{coll}x")
    assert listed.returncode == 2 and listed.stdout == "", listed.stdout  # as ask and search
    [line] = listed.stderr.splitlines()
    assert line.startswith(f"error: no collection '{coll}x'; collections: ") and coll in line, line
    missing = run_cli("remove", f"gretl-gide-{RUN}", "--collection", coll)
    assert missing.returncode == 1
    assert missing.stderr.strip() == f"error: no document named 'gretl-gide-{RUN}' in '{coll}'; documents: " \
                                     f"gretl-guide-{RUN}.pdf, pgfmanual-{RUN}.pdf (closest first)", missing.stderr
