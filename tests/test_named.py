"""Questions that name a document by its title ("on the sport pilot checkride", "in gnuplot") search
that document first; the answer says so. Pure rules first, then the real index of the dev PDFs."""

from __future__ import annotations

import json

from retrieval.search.named import named_documents, text_uses, title_cues, title_words
from retrieval.search.search import search
from tests.conftest import run_cli

MANUALS = {"R-intro.pdf": "R intro", "gnuplot.pdf": "gnuplot documentation"}
PTS = "FAA-S-8081-29_Sport-Pilot-and-Sport-Pilot-Flight-Instructor-PTS.pdf"


def test_title_words_leave_out_what_kind_of_document_it_is() -> None:
    assert title_words("gnuplot documentation") == {"gnuplot"}
    assert title_words("R intro") == {"R"}  # a one-letter name is a capital letter
    assert "airplane" in title_words("Private Pilot for Airplane Category ACS")
    assert not title_words("User Manual and Reference Guide")


def test_a_title_word_names_a_document_only_as_a_word_of_the_question() -> None:
    assert title_cues("How do I draw an R plot with a log axis?", MANUALS) == {"R": "R-intro.pdf"}
    assert title_cues("In gnuplot, how do I hide the key?", MANUALS) == {"gnuplot": "gnuplot.pdf"}
    assert title_cues("what is r-squared, and is R-squared reported?", MANUALS) == {}  # not the name R
    assert title_cues("Where is the documentation of the key?", MANUALS) == {}
    assert title_cues("In gnuplot, how do I hide the key?", {"gnuplot.pdf": "gnuplot documentation"}) == {}
    shared = {"a.pdf": "Private Pilot Airplane ACS", "b.pdf": "Sport Pilot Airplane PTS"}
    assert title_cues("Which airplane checks are on the test?", shared) == {}  # both titles use it


def test_the_text_must_tie_the_word_to_its_document() -> None:
    cues = {"sport": "pts.pdf", "documentation": "gnuplot.pdf"}
    rates = {"sport": {"pts.pdf": 0.21, "cfr.pdf": 0.015}, "documentation": {"gnuplot.pdf": 0.05, "r.pdf": 0.05}}
    assert named_documents(cues, rates) == ["pts.pdf"]
    assert named_documents({"sport": "pts.pdf"}, {}) == []  # the text never uses it
    assert named_documents({"sport": "pts.pdf"}, {"sport": {"pts.pdf": 0.0, "cfr.pdf": 0.0}}) == []


def test_a_title_word_the_other_manuals_text_uses_as_often_names_nothing() -> None:
    """"package" in "The minted package": minted's chunks all carry the title, so counted as indexed every
    one of them uses the word; counted in their text, minted uses it no more often than the other
    manual does, which is no name. Rates, not counts: a long manual does not win by its length."""
    minted = [1] * 300 + [2] * 60  # 360 chunks: the title alone in 300, the text too in 60
    assert text_uses(minted) == 60
    rates = {"package": {"minted.pdf": 60 / 360, "tabularray.pdf": 70 / 900}}
    assert named_documents({"package": "minted.pdf"}, rates) == []
    long_one = {"gnuplot": {"gnuplot.pdf": 480 / 1800, "r.pdf": 0 / 540}}
    assert named_documents({"gnuplot": "gnuplot.pdf"}, long_one) == ["gnuplot.pdf"]
    short_r = {"R": {"r.pdf": 220 / 540, "gnuplot.pdf": 66 / 1800}}  # 220 against 66 chunks, yet 11 times the rate
    assert named_documents({"R": "r.pdf"}, short_r) == ["r.pdf"]


def test_a_common_title_word_does_not_route_the_question_on_the_real_index(settings, dev_corpus) -> None:
    """"general" is in Part 91's title only, but the other handbooks' text uses it nearly as often."""
    q = "What are the general requirements for a flight review?"
    assert search(settings, q, k=5, collections=[dev_corpus]).named_documents == []


def test_a_named_handbook_is_searched_first_and_the_answer_says_so(settings, dev_corpus) -> None:
    q = "On the sport pilot checkride, how close to my chosen spot must I touch down on a normal landing?"
    found = search(settings, q, k=5, collections=[dev_corpus])
    assert found.named_documents == [PTS]
    assert {p.document for p in found.results} == {PTS}
    plain = search(settings, "How much fuel must a VFR flight at night carry?", k=5, collections=[dev_corpus])
    assert plain.named_documents == []
    res = run_cli("ask", q, "--collection", dev_corpus, "--answerer", "extractive", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["named_documents"] == [PTS]
    text = run_cli("ask", q, "--collection", dev_corpus, "--answerer", "extractive")
    assert f"Searched {PTS} first" in text.stdout
