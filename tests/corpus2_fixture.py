"""Session fixture: the non-FAA test corpus (tests/corpus2, software manuals) in a real index.

Import the fixture into a test module (``from tests.corpus2_fixture import manuals_corpus``) rather
than declaring it in conftest.py. Only R-intro.pdf (113 pages) is ingested: the cheaper of the two
manuals; gnuplot.pdf is for the evaluations (`chapterverse eval answers tests/corpus2/...`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

CORPUS2 = Path(__file__).resolve().parent / "corpus2"
COLLECTION = "manuals"  # as in the README's commands, so a kept test home can be shared with them
FIXTURE_PDFS = ("R-intro.pdf",)


def dev_questions(document: str | None = None) -> list[dict]:
    qs = json.loads((CORPUS2 / "dev_questions.json").read_text())
    return [q for q in qs if document is None or q.get("document") == document]


@pytest.fixture(scope="session")
def manuals_corpus(settings, embedder) -> str:
    """R-intro.pdf ingested into its own collection; returns the collection name."""
    from ingest.pipeline import ingest_source  # noqa: PLC0415
    from ingest.sources import read_path  # noqa: PLC0415

    for name in FIXTURE_PDFS:
        ingest_source(settings, embedder, read_path(str(CORPUS2 / name), 200_000_000), COLLECTION, quiet=True)
    return COLLECTION
