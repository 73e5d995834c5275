"""Session fixture: the non-FAA test corpus (tests/corpus2, software manuals) in a real index.

Import the fixture into a test module (``from tests.corpus2_fixture import manuals_corpus``) rather
than declaring it in conftest.py. Only R-intro.pdf (113 pages) is ingested: the cheaper of the two
manuals; gnuplot.pdf is for the evaluations (`chapterverse eval answers tests/corpus2/...`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import ingest_shared

CORPUS2 = Path(__file__).resolve().parent / "corpus2"
COLLECTION = "manuals"  # as in the README's commands, so a kept test home can be shared with them
FIXTURE_PDFS = ("R-intro.pdf",)


def dev_questions(document: str | None = None) -> list[dict]:
    qs = json.loads((CORPUS2 / "dev_questions.json").read_text())
    return [q for q in qs if document is None or q.get("document") == document]


@pytest.fixture(scope="session")
def manuals_corpus(settings, embedder, shared_folder) -> str:
    """R-intro.pdf ingested into its own collection; returns the collection name."""
    return ingest_shared(settings, embedder, shared_folder, [CORPUS2 / name for name in FIXTURE_PDFS], COLLECTION)
