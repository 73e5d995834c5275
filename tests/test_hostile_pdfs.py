"""Hostile PDFs are parsed in a limited child process (ingest.isolate): each fails with one line
naming the limit it broke, nothing is stored, and the process that asked carries on. The real
command, generated hostile files, real Postgres."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from retrieval.store import db
from tests.conftest import run_cli
from tests.pdfgen import bomb_pdf, huge_text_page_pdf, many_pages_pdf, text_pdf

RUN = uuid.uuid4().hex[:8]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hostile")
    return {"pages": many_pages_pdf(root / "hundred-thousand-pages.pdf"),
            "bomb": bomb_pdf(root / "bomb.pdf", inflated_mb=1024),
            "text": huge_text_page_pdf(root / "fifty-mb-text-layer.pdf", megabytes=50)}


def _stored(settings, collection: str) -> int:
    with db.connection(settings) as conn:
        return conn.execute("SELECT count(*) AS n FROM documents WHERE collection = %s", (collection,)).fetchone()["n"]


def test_each_hostile_pdf_fails_with_its_reason_and_the_good_one_is_ingested(settings, hostile, tmp_path):
    collection = f"hostile-{RUN}"
    good = text_pdf(tmp_path / "good.pdf", ["A good page about carburetor icing and carburetor heat. " * 6])
    res = run_cli("ingest", str(hostile["pages"]), str(hostile["bomb"]), str(hostile["text"]), str(good),
                  "--collection", collection, "--json")
    assert res.returncode == 1, res.stderr  # some inputs failed
    results = {Path(r.get("origin", r.get("name", ""))).name: r for r in json.loads(res.stdout)["results"]}
    assert "100,000 pages; the limit is 5,000 (CHAPTERVERSE_PDF_MAX_PAGES)" in results["hundred-thousand-pages.pdf"]["message"]
    assert "decompression bomb" in results["bomb.pdf"]["message"] or "MB of memory" in results["bomb.pdf"]["message"]
    assert "52 MB of drawing instructions; the limit is 32 MB" in results["fifty-mb-text-layer.pdf"]["message"]
    assert results["good.pdf"]["status"] == "ingested"
    assert _stored(settings, collection) == 1


def test_memory_and_cpu_limits_stop_the_parser_not_the_caller(settings, hostile, monkeypatch):
    collection = f"hostile-limits-{RUN}"
    # one line each, whatever the load: a parse slowed past 30 s wall on a busy machine also wrote a
    # progress line (CHAPTERVERSE_PROGRESS_INTERVAL_S), which is not what this test is about
    monkeypatch.setenv("CHAPTERVERSE_PROGRESS_INTERVAL_S", "3600")
    # the bomb under a smaller address space; the page tree allowed but given 2 CPU seconds
    bomb = run_cli("ingest", str(hostile["bomb"]), "--collection", collection,
                   env={"CHAPTERVERSE_PDF_MAX_MEMORY_MB": "768"})
    assert bomb.returncode == 1
    assert "parsing it needs more than 768 MB of memory (CHAPTERVERSE_PDF_MAX_MEMORY_MB)" in bomb.stderr, bomb.stderr
    slow = run_cli("ingest", str(hostile["pages"]), "--collection", collection,
                   env={"CHAPTERVERSE_PDF_MAX_PAGES": "200000", "CHAPTERVERSE_PDF_MAX_CPU_S": "2"})
    assert slow.returncode == 1
    assert "parsing it took more than 2 CPU seconds (CHAPTERVERSE_PDF_MAX_CPU_S)" in slow.stderr, slow.stderr
    big = run_cli("ingest", str(hostile["text"]), "--collection", collection,
                  env={"CHAPTERVERSE_PDF_MAX_PAGE_CONTENT_MB": "100", "CHAPTERVERSE_PDF_MAX_MEMORY_MB": "768"})
    assert big.returncode == 1
    assert "MB of memory" in big.stderr or "characters of text" in big.stderr, big.stderr
    for res in (bomb, slow, big):
        assert len([line for line in res.stderr.splitlines() if line.strip()]) == 1, res.stderr
    assert _stored(settings, collection) == 0
