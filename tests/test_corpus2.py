"""The software-manual corpus (tests/corpus2) in a real index: ingest, page labels, and the WHOLE dev
question set of the ingested manual: each answerable question's gold page is retrieved in the top 5
and its extractive answer's first quote is on a gold page and states the answer (``answer_eval``'s
rule); each unanswerable question is refused.

No question is left out: the ones the product gets wrong today are marked as expected failures
(strict, so a fix shows up as an unexpected pass and the mark must be removed) with what goes wrong.
The gnuplot.pdf questions need that 311-page manual ingested (about 25 s since ingest embeds each
chunk once): they run by default; ``CV_TEST_GNUPLOT=0`` skips them (with that reason), and the marks
of the two R-intro questions whose outcome depends on gnuplot.pdf being indexed follow.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from chapterverse_lab.answer_eval import outcome
from retrieval.answer.ask import ask
from retrieval.search.search import search
from tests.conftest import run_cli
from tests.corpus2_fixture import CORPUS2, dev_questions, manuals_corpus  # noqa: F401  (session fixture)

GNUPLOT_COLLECTION = "manuals-gnuplot"  # its own collection: the shared fixture's collection is unchanged
WITH_GNUPLOT = os.environ.get("CV_TEST_GNUPLOT", "1") != "0"

# What goes wrong today, per question (extractive answerer, default settings). Found by running this
# module with every question; a question that starts passing fails the run until its line goes.
RETRIEVAL_MISSES: dict[str, str] = {
    "c2d02": "gold page 12 not in the top 5 (pages 100, 99, 107, 9, 97 are)",
    **({"c2d14": "with gnuplot.pdf indexed the gold page 40 falls out of the top 5 (39, then gnuplot pages)",
        "c2d22": "gold page 33 not in the top 5 (22, 32, 60, 35, 228)",
        "c2d24": "gold page 55 not in the top 5 (127, 93, 297, 44, 238)",
        "c2d28": "gold page 90 not in the top 5 (22, 89, 60, 162, 59)",
        "c2d37": "gold page 158 not in the top 5 (156, 108, 37, 231, 230)"} if WITH_GNUPLOT else {}),
}
ANSWER_FAILURES: dict[str, str] = {
    "c2d02": "false refusal: the gold page is not retrieved",
    "c2d03": "wrong but verified: the first quote is q() on PDF page 97, not the gold page 12",
    "c2d05": "false refusal: no retrieved sentence scores above the extractive threshold",
    "c2d06": "false refusal: no retrieved sentence scores above the extractive threshold",
    "c2d09": "false refusal: no retrieved sentence scores above the extractive threshold",
    "c2d14": "false refusal: no retrieved sentence scores above the extractive threshold",
    "c2d16": "false refusal: the absent-term gate finds no “tweak” in the manual",
    "c2d19": "false refusal: no retrieved sentence scores above the extractive threshold",
    "c2d10": "borderline: its best sentence's evidence score sits at the extractive threshold, so it is "
             "answered or refused from one fresh index to the next (int8 vectors; seen both ways in CI)",
    **({q: "false refusal: the gold page is not in the top 5" for q in ("c2d22", "c2d24", "c2d37")}
       if WITH_GNUPLOT else {}),
    "c2d20": "false refusal: gold page 32 retrieved second, no sentence scores above the extractive threshold",
    "c2d25": "wrong but verified: the first quote is on page 128, the gold page 55 is second",
    "c2d27": "false refusal: gold page 87 retrieved first, no sentence scores above the extractive threshold",
    "c2d31": "false refusal: gold page 129 retrieved fourth, no sentence scores above the extractive threshold",
    "c2d32": "false refusal: gold page 135 retrieved first, no sentence scores above the extractive threshold",
    "c2d35": "false refusal: the question asks for text the premise gate finds absent",
    # answered right until gnuplot.pdf (311 pages) was embedded in two segments (ingest.passages): its
    # vectors changed batch-mates, and these two flipped (results/ingest_segments/results.json)
    **({"c2d26": "false refusal: 'how many' and no retrieved sentence states a number (the answer says "
                 "'up to nine parameters')",
        "c2d28": "false refusal: gold page 90 not in the top 5, no sentence scores above the extractive threshold"}
       if WITH_GNUPLOT else {}),
}


BORDERLINE = {"c2d10"}  # outcome flips between runs on fresh indexes: marked, but not strictly


def _case(q: dict[str, Any], known: dict[str, str]) -> Any:
    marks = []
    if q.get("document") == "gnuplot.pdf" and not WITH_GNUPLOT:
        marks.append(pytest.mark.skip(reason="gnuplot.pdf questions skipped (CV_TEST_GNUPLOT=0)"))
    if q["id"] in known:
        # strict: a fix shows up as an unexpected pass; a question on the threshold passes either way
        marks.append(pytest.mark.xfail(reason=known[q["id"]], strict=q["id"] not in BORDERLINE))
    return pytest.param(q, id=q["id"], marks=marks)


ANSWERABLE = [q for q in dev_questions() if q["answerable"]]


@pytest.fixture(scope="module")
def collections(settings, embedder, manuals_corpus) -> list[str]:  # noqa: F811
    """The collections the questions search: the manuals fixture, plus gnuplot.pdf when asked for."""
    if not WITH_GNUPLOT:
        return [manuals_corpus]
    from ingest.pipeline import ingest_source  # noqa: PLC0415
    from ingest.sources import read_path  # noqa: PLC0415

    ingest_source(settings, embedder, read_path(str(CORPUS2 / "gnuplot.pdf"), 200_000_000), GNUPLOT_COLLECTION,
                  quiet=True)
    return [manuals_corpus, GNUPLOT_COLLECTION]


def test_manual_is_ingested_with_its_printed_page_labels(settings, manuals_corpus) -> None:  # noqa: F811
    res = run_cli("docs", "--json")
    assert res.returncode == 0, res.stderr
    docs = {(d["collection"], d["name"]): d for d in json.loads(res.stdout)["documents"]}
    assert docs[(manuals_corpus, "R-intro.pdf")]["pages"] == 113
    hits = search(settings, "How do I replace missing values in x by zeros?", k=5, collections=[manuals_corpus])
    labels = {(p.page, p.page_label) for p in hits.results}
    assert (19, "13") in labels  # PDF page 19 is printed page 13


@pytest.mark.parametrize("q", [_case(q, RETRIEVAL_MISSES) for q in ANSWERABLE])
def test_dev_question_retrieves_its_gold_page(settings, collections, q: dict[str, Any]) -> None:
    found = [(p.document, p.page) for p in search(settings, q["question"], k=5, collections=collections).results]
    assert any(doc == q["document"] and page in q["pages"] for doc, page in found), (q["pages"], found)


@pytest.mark.parametrize("q", [_case(q, ANSWER_FAILURES) for q in dev_questions()])
def test_dev_question_is_answered_from_its_gold_page_or_refused(settings, collections, q: dict[str, Any]) -> None:
    a = ask(settings, q["question"], collections=collections, answerer="extractive")
    expected = "right_evidence_first" if q["answerable"] else "refused"
    shown = (a.reason if a.refusal else a.answer, [(c.document, c.page, c.quote) for c in a.citations])
    assert outcome(q, a) == expected, shown
