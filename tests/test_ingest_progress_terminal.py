"""Issue 39, item 11: ingest progress on a terminal. The one-time model export is announced before it
stalls the bars; between the last page and the embedding bar a line says what is happening; the
embedding bar counts every passage of the document, as the result line does (it counted only those
left after the embedding done while the pages were read: 1,034 of 2,355)."""

from __future__ import annotations

import io
import re
import sys
import time
import uuid
from pathlib import Path

import pymupdf

import ingest.pipeline as pipeline
from ingest.sources import read_path
from retrieval.encode.embed import Embedder


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _manual(path: Path, pages: int = 270) -> None:
    """Longer than one embedding segment (256 pages), so its first segment is embedded while it is read."""
    doc = pymupdf.open()
    for i in range(pages):
        doc.new_page().insert_textbox(pymupdf.Rect(72, 72, 540, 720), (
            f"Section {i + 1}. The Zephyr glider's tow release is checked before each launch; the pilot pulls the "
            f"release knob {i + 2} times and confirms the hook opens. ") * 2, fontsize=10)
    doc.save(path)


def test_the_embedding_bar_counts_every_passage_and_the_gap_is_named(settings, embedder, tmp_path, monkeypatch) -> None:
    pdf = tmp_path / f"bars-{uuid.uuid4().hex[:8]}.pdf"
    _manual(pdf)
    original = pipeline.parse

    def paced(*args, on_page, **kwargs):  # a pause past the first segment, as a slow page of a long manual makes
        seen = [0]

        def page(parts):
            on_page(parts)
            seen[0] += 1
            if seen[0] == 262:
                time.sleep(6)
        return original(*args, on_page=page, **kwargs)

    monkeypatch.setattr(pipeline, "parse", paced)
    screen = _Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    res = pipeline.ingest_source(settings, embedder, read_path(str(pdf), 10_000_000), f"bars-{uuid.uuid4().hex[:6]}")
    out = screen.getvalue().replace("\r", "\n")
    totals = {int(m) for m in re.findall(r"embedding:.*?\|\s*\d+/(\d+)", out)}
    assert totals == {res.chunks}, (totals, res.chunks, out[-2000:])
    started = [int(m) for m in re.findall(r"embedding:.*?\|\s*(\d+)/\d+", out)]
    assert started and started[0] > 0, out[-2000:]  # the passages embedded while reading count as done
    assert "finishing the last pages' passages" in out


def test_a_first_ingest_says_it_is_preparing_the_model(settings, tmp_path: Path) -> None:
    fresh = Embedder(settings.search.embedding_model, passage_cache=tmp_path / "cache")
    assert fresh.passage_export_pending()  # no export in this cache: the first embedding would make it
    assert not Embedder(settings.search.embedding_model, passage_cache=None).passage_export_pending()
