"""Off a terminal, `chapterverse ingest` says where it is on stderr at least every
CHAPTERVERSE_PROGRESS_INTERVAL_S seconds (30 by default): the document, pages read of the total, and
the step. The real command in a subprocess (stderr is a pipe, as under nohup, CI or a container),
a real Postgres, a generated PDF and a short interval."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from retrieval.settings import Settings
from tests.conftest import run_cli, scratch_database
from tests.pdfgen import LOREM, text_pdf

PAGES = 80  # enough text that the int8 ingest (~20 pages/s) prints several lines
INTERVAL_S = 0.25
LINE = re.compile(r"^ingest: (?P<doc>\S+): (?P<what>.+) · (?:(?P<s>\d+\.\d) s|(?P<m>\d+)m(?P<ms>\d\d)s)$")


@pytest.fixture(scope="module")
def db_env(pg_url: str) -> Iterator[dict[str, str]]:
    with scratch_database(pg_url, "cv_progress") as url:
        yield {"DATABASE_URL": url, "CHAPTERVERSE_PROGRESS_INTERVAL_S": str(INTERVAL_S)}


@pytest.fixture(scope="module")
def pdf(tmp_path_factory) -> Path:
    body = " ".join(LOREM.format(n=n) for n in range(1000, 1012))
    return text_pdf(tmp_path_factory.mktemp("progress") / "progress-test.pdf",
                    [f"Chapter {i}. {body}" for i in range(1, PAGES + 1)])


def progress_lines(stderr: str) -> list[tuple[str, str, float]]:
    out = []
    for line in stderr.splitlines():
        m = LINE.match(line)
        if m:
            secs = float(m["s"]) if m["s"] else int(m["m"]) * 60 + int(m["ms"])
            out.append((m["doc"], m["what"], secs))
    return out


def test_progress_lines_off_a_terminal(db_env: dict[str, str], pdf: Path) -> None:
    res = run_cli("ingest", str(pdf), "--collection", "progress-a", env=db_env)
    assert res.returncode == 0, res.stderr
    assert f"progress-test.pdf: ingested into 'progress-a': {PAGES} pages" in res.stdout
    lines = progress_lines(res.stderr)
    assert len(lines) >= 3, res.stderr
    assert {doc for doc, _, _ in lines} == {"progress-test.pdf"}
    # every line says how many of the document's pages are done once they are being read
    counts = [tuple(map(int, m.groups())) for _, what, _ in lines if (m := re.search(r"pages (\d+)/(\d+) read", what))]
    assert counts and all(total == PAGES for _, total in counts), res.stderr
    assert [done for done, _ in counts] == sorted(done for done, _ in counts)
    assert any(re.search(rf"pages {PAGES}/{PAGES} read; embedding (passages|sentences) \d+/\d+ \(\d+%", what)
               for _, what, _ in lines), res.stderr
    # at least every interval (with room for a busy machine), never silent for long
    times = [t for _, _, t in lines]
    assert times == sorted(times)
    gaps = [b - a for a, b in zip([0.0, *times], times)]
    assert max(gaps) <= INTERVAL_S + 3.0, (gaps, res.stderr)
    # nothing but progress lines and no warnings on stderr
    others = [line for line in res.stderr.splitlines() if line and not LINE.match(line)]
    assert not others, others


def test_json_keeps_stdout_one_document_and_quiet_silences_it(db_env: dict[str, str], pdf: Path) -> None:
    res = run_cli("ingest", str(pdf), "--collection", "progress-b", "--json", env=db_env)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["results"][0]["status"] == "ingested"
    assert progress_lines(res.stderr), res.stderr

    quiet = run_cli("ingest", str(pdf), "--collection", "progress-c", "--quiet", env=db_env)
    assert quiet.returncode == 0, quiet.stderr
    assert not progress_lines(quiet.stderr) and "ingest:" not in quiet.stderr


def test_the_default_interval_is_30_seconds() -> None:
    assert Settings().ingest.progress_interval_s == 30.0
