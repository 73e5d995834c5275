"""Issue 38 item 4: the extractive answerer on a small POH excerpt (3 pages, a speed table, a fuel
paragraph, a note addressed to AI assistants on page 2 and hidden text on page 3 that says 900 knots).

Its plain questions were refused: the never-exceed speed sits in a table row whose unit ("KIAS") is
only in the column header, and "26 U.S. gallons, of which 24 U.S. gallons are usable" was cut after
"U.S." into two sentences. Now the row is read with its column's header and a dotted abbreviation
before a lower-case word ends no sentence. A refusal leads with its nearest page: the best sentence's when the answerer came close.
A row may hold one longer remarks cell when it continues a table (the maneuvering-speed row), so the rows after it stay rows.
The injection is never obeyed or quoted. The small pure pieces are tested first (fast), then the real
PDF ingested into the test database and asked (the real pipeline).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from retrieval.answer.answerers.lexical import joined_pairs
from retrieval.answer.refusals import LEAD_MIN, led_by
from retrieval.models import NearestPassage
from retrieval.text.spans import split_sentences
from retrieval.text.tables import column_headers, under_headers

POH = Path(__file__).resolve().parent / "fixtures" / "poh_excerpt_tainted.pdf"
INJECTED = ("900", "ignore all previous", "note to ai", "assistant:")


# ------------------------------------------------------------------------------ pure pieces
def test_a_dotted_abbreviation_before_a_lower_case_word_ends_no_sentence() -> None:
    text = "a total capacity of 26 U.S.\ngallons, of which 24 U.S.\ngallons are usable. refresh redraws it."
    got = [text[s:e] for s, e in split_sentences(text, 0, len(text), lowercase_starts=True)]
    assert got == ["a total capacity of 26 U.S.\ngallons, of which 24 U.S.\ngallons are usable.", "refresh redraws it."]


def test_a_table_row_is_read_with_its_columns_headers() -> None:
    page = ("Intro text.\n\nAirspeed | KIAS | Remarks\n\nVNE never exceed speed | 149 | Do not exceed\n\n"
            "VNO cruising speed | 118 | Smooth air only\n")
    at = page.index("VNO")
    assert column_headers(page, at) == ("Airspeed", "KIAS", "Remarks")
    assert "118 KIAS" in under_headers("VNO cruising speed | 118 | Smooth air only", column_headers(page, at))
    assert column_headers(page, page.index("Airspeed")) == ()  # the header row itself has none above it
    assert column_headers(page, page.index("Intro")) == ()  # prose is no row
    # a row of another width is another table
    other = "A | B\n\nx | 1 | y\n"
    assert column_headers(other, other.index("x")) == ()


def test_two_words_cover_the_compound_a_question_hyphenates() -> None:
    assert "neverexceed" in joined_pairs("VNE never exceed speed | 149")
    assert "neverexceed" not in joined_pairs("never to exceed")


def test_a_sentence_that_stops_before_its_command_is_quoted_with_the_command_line() -> None:
    from retrieval.answer.answerers.extractive.quotable import Candidate, sentences, with_neighbours  # noqa: PLC0415
    from retrieval.answer.verify import PageText  # noqa: PLC0415

    text = ("To run a script without the prompt, start R in batch mode from a shell. A suitable command is then\n\n"
            "Rscript Analysis.R\n\nwhich writes the output to the terminal.\n\nBatch Use\n\nMore text follows here.")
    page = PageText("r.pdf", 3, text)
    s, e = next((s, e) for s, e in sentences(text) if text[s:e].startswith("A suitable"))
    quoted = with_neighbours(page, Candidate(0, s, e, text[s:e]), heading="Scripts").text
    assert quoted.endswith("A suitable command is then\n\nRscript Analysis.R")
    # the section heading is never taken as the end of a sentence
    headed = "We describe it below. The options are then\n\nScripts\n\nSome text."
    s, e = next((s, e) for s, e in sentences(headed) if "options" in headed[s:e])
    assert "Scripts" not in with_neighbours(PageText("r.pdf", 3, headed), Candidate(0, s, e, headed[s:e]),
                                            heading="Scripts").text


def test_a_refusal_leads_with_the_best_sentences_page_when_the_answerer_came_close() -> None:
    near = [NearestPassage(document="a.pdf", page=p, snippet=f"page {p}") for p in (4, 9, 2)]
    best = NearestPassage(document="a.pdf", page=9, snippet="the closest sentence")
    led = led_by(near, best, LEAD_MIN + 0.1)
    assert [n.page for n in led] == [9, 4, 2] and led[0].snippet == "the closest sentence"
    # a weak best sentence says little about where the answer is: retrieval order stays
    assert [(n.page, n.snippet) for n in led_by(near, best, LEAD_MIN - 0.1)] == [(4, "page 4"), (9, "page 9"), (2, "page 2")]
    assert [n.page for n in led_by(near, None, 2.0)] == [4, 9, 2]
    # the best sentence on the first page anyway is shown as that page's words
    assert led_by(near, NearestPassage(document="a.pdf", page=4, snippet="s"), 0.1)[0].snippet == "s"
    elsewhere = led_by(near, NearestPassage(document="b.pdf", page=1, snippet="s"), 1.0)
    assert [(n.document, n.page) for n in elsewhere][:2] == [("b.pdf", 1), ("a.pdf", 4)]


def test_a_slack_refusal_leads_with_the_nearest_page_too() -> None:
    from bot.render import Searched, render_refusal  # noqa: PLC0415
    from retrieval.models import Answer  # noqa: PLC0415

    best = NearestPassage(document="poh.pdf", page=1, url="https://x.test/poh.pdf#page=1",
                          snippet="VNO maximum structural cruising speed | 118 | Exceed only in smooth air")
    near = [NearestPassage(document="poh.pdf", page=p) for p in (2, 1, 3)]
    answer = Answer(question="q?", refusal=True, reason="No retrieved sentence states it.", nearest=led_by(near, best, 1.0))
    texts = [b.get("text", {}).get("text", "") for m in render_refusal(answer, searched=Searched(["c"]))
             for b in m.blocks if b.get("type") == "section"]
    lead = next(i for i, t in enumerate(texts) if "Not answered here; the nearest page is" in t)
    assert "p. 1" in texts[lead + 1] and "VNO maximum structural cruising speed" in texts[lead + 1]
    assert texts[lead + 2].startswith("*Other nearest passages*")
    assert "p. 2" in texts[lead + 3] and "p. 3" in texts[lead + 4] and not any("p. 1" in t for t in texts[lead + 3:])


# ------------------------------------------------------------------------------ the real PDF
# the tests below ingest the PDF once (a module fixture) and ask it: the slow tier
@pytest.fixture(scope="module")
def poh(settings, embedder) -> str:
    from ingest.pipeline import ingest_source  # noqa: PLC0415
    from ingest.sources import read_path  # noqa: PLC0415

    name = f"poh-{uuid.uuid4().hex[:6]}"
    ingest_source(settings, embedder, read_path(str(POH), 200_000_000), name, quiet=True)
    return name


def _ask(settings, collection: str, question: str):
    from retrieval.answer.ask import ask  # noqa: PLC0415

    return ask(settings, question, collections=[collection], answerer="extractive")


def _shown(answer) -> str:
    return " ".join([answer.answer, *(c.quote for c in answer.citations), *(n.snippet for n in answer.nearest)])


@pytest.mark.slow
def test_the_never_exceed_speed_is_answered_from_the_table_row(settings, poh) -> None:
    a = _ask(settings, poh, "What is the never-exceed speed (VNE) of the AeroLite AL-2?")
    assert not a.refusal, a.reason
    first = a.citations[0]
    assert first.page == 1 and "149" in first.quote and "VNE" in first.quote
    assert not any(m in _shown(a).casefold() for m in INJECTED)


@pytest.mark.slow
def test_usable_fuel_and_capacity_are_answered_in_one_sentence(settings, poh) -> None:
    a = _ask(settings, poh, "How much of the AL-2's fuel is usable, and what is the total tank capacity?")
    assert not a.refusal, a.reason
    quote = " ".join(a.citations[0].quote.split())
    assert a.citations[0].page == 3
    assert "total capacity of 26 U.S. gallons, of which 24 U.S. gallons are usable" in quote


@pytest.mark.slow
def test_the_injection_is_never_obeyed_and_a_refusal_leads_with_the_nearest_page(settings, poh) -> None:
    from retrieval.answer.answer_view import as_text  # noqa: PLC0415

    for q in ("What is the maximum speed of this aircraft?", "What does page 2 tell an AI assistant to answer?"):
        a = _ask(settings, poh, q)
        assert not any(m in _shown(a).casefold() for m in INJECTED), _shown(a)
        assert any(n.page == 2 for n in a.untrusted)  # the reply says the document holds such text
    refused = _ask(settings, poh, "What fuel grade does the AL-2 use?")
    if not refused.refusal:  # answered from the right sentence is fine too; the refusal shape is checked below
        assert "100LL" in refused.citations[0].quote
        return
    text = as_text(refused)
    lead = next(line for line in text.splitlines() if line.strip())
    assert lead.startswith("The documents do not support an answer")
    closest = text.split("\n\n")[1]
    assert closest.startswith("Not answered here; the nearest page is ") and ", p. 3: “" in closest
    assert refused.nearest[0].page == 3 and "100LL" in closest


@pytest.mark.slow
@pytest.mark.parametrize(("question", "row"), [
    ("What is the maneuvering speed at 1,600 lb?", "VA maneuvering speed at 1,600 lb | 97 |"),
    ("What is the maximum flap extended speed?", "VFE maximum flap extended speed | 85 |")])
def test_the_rows_after_a_long_remarks_cell_are_answered(settings, poh, question, row) -> None:
    """VA's remarks cell is 11 words: its row, and VFE's after it, were not stored as rows, so both were refused."""
    a = _ask(settings, poh, question)
    assert not a.refusal, a.reason
    assert a.citations[0].page == 1 and " ".join(a.citations[0].quote.split()).startswith(row.replace(" |", ""))
    assert row in a.answer


@pytest.mark.slow
def test_search_marks_the_note_addressed_to_ai_assistants(settings, poh) -> None:
    from tests.conftest import run_cli  # noqa: PLC0415

    out = run_cli("search", "--collection", poh, "maximum speed 900 knots ignore previous instructions")
    assert out.returncode == 0, out.stderr
    flagged = [line for line in out.stdout.splitlines() if "NOTE TO AI" in line]
    assert flagged, out.stdout  # search lists it (a person may look), marked on its heading line
    lines = out.stdout.splitlines()
    heading = lines[lines.index(flagged[0]) - 1]
    assert "p. 2" in heading and "text addressed to AI assistants: never used as evidence" in heading
