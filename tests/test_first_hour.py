"""A new user's first hour (issue 32, item 11), each with the real command and real Postgres: a fresh
index says that nothing is ingested (at once, not after loading the model); ``--document`` takes what
the output shows (the name without .pdf, the title) and an unknown one exits 2 naming the documents
there are; Ctrl-C during an ingest says nothing of that document was stored; progress never goes
backwards; ``search --help`` is about search; help screens name what to type, not Python types;
the extractive answer does not call every document a handbook; and the output says what a
verified quote is: its words are on the page, not a checked answer."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time


from retrieval.cli import CHECKED, NOTHING_INGESTED
from tests.conftest import run_cli, scratch_database, sigint_delivered
from tests.pdfgen import long_pdf

# the same two collections as the exit-status tests, ingested with the real command (its own database)
from tests.test_exit_status import env  # noqa: E402,F401


def _one_line(res: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in res.stderr and res.stdout == "", (res.stdout, res.stderr)
    return lines[0]


def test_ask_and_search_in_a_fresh_index_say_nothing_is_ingested_at_once(pg_url: str) -> None:
    with scratch_database(pg_url, "cv_fresh") as url:
        for args in (("ask", "What is the maximum magneto drop?"), ("ask", "What is the magneto drop?", "--json"),
                     ("search", "magneto drop")):
            t0 = time.monotonic()
            res = run_cli(*args, env={"DATABASE_URL": url})
            assert res.returncode == 2, res.stderr
            assert _one_line(res) == f"error: {NOTHING_INGESTED}"
            assert time.monotonic() - t0 < 20  # said before any model is loaded


def test_document_takes_what_the_output_shows_and_an_unknown_one_exits_2(env: dict[str, str]) -> None:
    for given in ("ground-checks", "ground-checks.pdf", "Ground Checks", "GROUND-CHECKS"):
        res = run_cli("search", "magneto drop", "--document", given, "--json", env=env)
        assert res.returncode == 0, res.stderr
        found = json.loads(res.stdout)["results"]
        assert found and {p["document"] for p in found} == {"ground-checks.pdf"}, (given, found)
    res = run_cli("search", "magneto drop", "--document", "nosuch", env=env)
    assert res.returncode == 2
    assert _one_line(res) == "error: no document 'nosuch'; documents: cabin, ground-checks"
    res = run_cli("search", "magneto drop", "--document", "cabin", "--collection", "dev", env=env)
    assert res.returncode == 2 and _one_line(res) == "error: no document 'cabin'; documents: ground-checks"


def test_ctrl_c_during_an_ingest_says_nothing_of_it_was_stored(env: dict[str, str], tmp_path) -> None:
    pdf = long_pdf(tmp_path / "long-manual.pdf", 120)
    proc = subprocess.Popen([sys.executable, "-m", "retrieval.cli", "ingest", str(pdf), "--collection", "ctrl-c"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **env, "CHAPTERVERSE_PROGRESS_INTERVAL_S": "0.5"},
                            preexec_fn=sigint_delivered)  # noqa: PLW1509
    line = proc.stderr.readline()  # the first progress line: it is under way
    assert line.startswith("ingest: "), line
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert errors == [f"error: interrupted: {pdf} was not stored (nothing of it was written)"], err
    assert "Traceback" not in err and out == ""
    docs = run_cli("docs", "--json", env=env)  # (docs --collection of one that holds nothing is an error)
    assert [d for d in json.loads(docs.stdout)["documents"] if d["collection"] == "ctrl-c"] == []


# What a Ctrl-C during the import of a pybind11 extension (onnxruntime, loaded when the first passage is
# embedded) looks like to the code around it: ImportError("initialization failed") raised from the
# KeyboardInterrupt. Read as a broken model, it sent the ingest on to export the model again and store
# the document (a lost Ctrl-C, 1 in 5 near 2 s into a 120-page ingest).
_CTRL_C_IN_IMPORT = """
import runpy, sys
class CtrlCDuringImport:
    def find_spec(self, name, path=None, target=None):
        if name == "onnxruntime":
            try:
                raise KeyboardInterrupt
            except KeyboardInterrupt as k:
                raise ImportError("initialization failed") from k
        return None
sys.meta_path.insert(0, CtrlCDuringImport())
sys.argv = ["chapterverse", *sys.argv[1:]]
runpy.run_module("retrieval.cli", run_name="__main__")
"""


def test_a_ctrl_c_a_library_turns_into_an_import_error_still_stops_the_ingest(env: dict[str, str], tmp_path) -> None:
    pdf = long_pdf(tmp_path / "import-manual.pdf", 12)
    res = subprocess.run([sys.executable, "-c", _CTRL_C_IN_IMPORT, "ingest", str(pdf), "--collection", "ctrl-c-import"],
                         capture_output=True, text=True, timeout=300, env={**os.environ, **env})
    assert res.returncode == 130, res.stderr
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert errors == [f"error: interrupted: {pdf} was not stored (nothing of it was written)"], res.stderr
    assert "Traceback" not in res.stderr and "export" not in res.stderr.casefold()
    docs = run_cli("docs", "--json", env=env)
    assert [d for d in json.loads(docs.stdout)["documents"] if d["collection"] == "ctrl-c-import"] == []


def test_ingest_progress_never_goes_backwards(env: dict[str, str], tmp_path) -> None:
    """A document of more than 256 pages is embedded while it is read (``ingest.ahead``): the
    passages counted then are not counted again from 0 once every page is in."""
    pdf = long_pdf(tmp_path / "three-hundred.pdf", 300)
    res = run_cli("ingest", str(pdf), "--collection", "progress", env={**env, "CHAPTERVERSE_PROGRESS_INTERVAL_S": "0.3"},
                  timeout=600)
    assert res.returncode == 0, res.stderr
    counts = []
    for line in res.stderr.splitlines():
        if m := re.search(r"([\d,]+) passages embedded", line):
            counts.append(int(m.group(1).replace(",", "")))
        if m := re.search(r"embedding passages ([\d,]+)/([\d,]+)", line):
            counts.append(int(m.group(1).replace(",", "")))
    assert len(counts) >= 2, res.stderr
    assert counts == sorted(counts), counts
    totals = {int(t.replace(",", "")) for t in re.findall(r"embedding passages [\d,]+/([\d,]+)", res.stderr)}
    chunks = int(re.search(r"300 pages, (\d+) chunks", res.stdout).group(1))
    assert totals <= {chunks}, (totals, chunks)  # counted over every passage


def test_help_screens_are_about_their_command_and_name_what_to_type() -> None:
    search = run_cli("search", "--help", env={"COLUMNS": "200"})
    assert search.returncode == 0
    assert "--answerer" not in search.stdout and "GEMINI_API_KEY" not in search.stdout
    assert "--document that does not exist" in " ".join(search.stdout.split())
    for cmd in (("ask",), ("search",), ("ingest",), ("docs",), ("remove",), ("collections", "set-preset")):
        res = run_cli(*cmd, "--help", env={"COLUMNS": "200"})
        assert res.returncode == 0, res.stderr
        for label in ("<str>", "<list[str]>", "<bool>", "<int>", "<Path>", "{"):
            assert label not in res.stdout, (cmd, label, res.stdout)
    ask = run_cli("ask", "--help", env={"COLUMNS": "200"}).stdout
    assert "Usage: " in ask and " QUESTION" in ask and "TEXT…" in ask


def test_the_answer_says_what_was_checked_and_is_not_about_handbooks(env: dict[str, str]) -> None:
    res = run_cli("ask", "What is the maximum magneto drop?", "--collection", "dev", "--answerer", "extractive",
                  env=env)
    assert res.returncode == 0, res.stderr
    assert "125 RPM" in res.stdout
    assert "handbooks" not in res.stdout.lower()
    assert CHECKED in res.stdout
    as_json = run_cli("ask", "What is the maximum magneto drop?", "--collection", "dev", "--answerer",
                      "extractive", "--json", env=env)
    answer = json.loads(as_json.stdout)["answer"]
    assert answer.startswith("The documents say (") or "125 RPM" in answer, answer
