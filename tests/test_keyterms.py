"""Key terms of a question and whether a passage is about them (pure functions)."""

from __future__ import annotations

import math

import pytest

from retrieval.answer.answerers.extractive.keyterms import (
    KeyTerm,
    PhraseStats,
    key_terms,
    mentions,
    on_topic,
    pmi,
    question_pairs,
    passage_terms,
    question_acronyms,
)


def test_pairs_are_adjacent_content_words_split_at_hyphens_broken_by_stopwords_and_punctuation() -> None:
    pairs = question_pairs("What is the maximum takeoff weight for a light-sport airplane, by day?")
    assert pairs == [(("maximum", "takeoff"), False), (("takeoff", "weight"), False),
                     (("light", "sport"), True), (("sport", "airplane"), False)]
    assert question_pairs("first point of intended landing") == [(("first", "point"), False),
                                                                  (("intended", "landing"), False)]


def test_text_pairs_are_stemmed_and_see_through_brackets_and_line_break_hyphens() -> None:
    pairs = passage_terms("Batteries used in the emergency locator trans-\nmitters at 14,000 feet (MSL) must").pairs
    assert ("locator", "transmitter") in pairs and ("feet", "msl") in pairs
    assert ("msl", "must") not in pairs  # "must" is a stopword


def test_pmi() -> None:
    assert pmi(16, 108, 20, 2159) == pytest.approx(math.log(2159 * 16 / (108 * 20)))
    assert pmi(0, 10, 10, 100) == -math.inf


def _stats(phrase_df: dict[str, int], word_df: dict[str, int], chunks: int = 2000,
           shares: dict[str, dict[str, float]] | None = None) -> PhraseStats:
    return PhraseStats(chunks, phrase_df, word_df, shares or {})


def test_key_terms_are_collocations_or_hyphenated_compounds_the_collection_uses() -> None:
    freq = _stats({"locator transmitter": 16, "transmitter broadcast": 0, "emergency locator": 16,
                   "required flight": 22, "light sport": 25, "feet msl": 33},
                  {"locator": 108, "transmitter": 20, "emergency": 249, "broadcast": 30, "required": 792,
                   "flight": 1884, "light": 110, "sport": 445, "feet": 170, "msl": 34})
    q = "On which frequencies does an emergency locator transmitter broadcast when activated?"
    assert [t.text for t in key_terms(q, freq)] == ["locator transmitter"]  # "emergency locator": PMI 0.25
    assert key_terms("Which required flight crew?", freq) == []  # a chance neighbourhood (PMI < 0)
    light = key_terms("Maximum weight of a light-sport airplane?", freq)
    assert [t.text for t in light] == ["light-sport"] and pmi(25, 110, 445, freq.chunks) < 1  # hyphenated: a compound anyway
    assert key_terms("Above 14,000 feet MSL?", freq)[0].text == "feet msl"  # "14,000 feet" holds digits
    assert key_terms("On which frequencies does an emergency locator transmitter broadcast?", None) == []


def test_a_phrase_used_once_is_not_a_key_term() -> None:
    freq = _stats({"locator transmitter": 1}, {"locator": 1, "transmitter": 1})
    assert key_terms("locator transmitter", freq) == []


def test_on_topic_needs_half_the_terms_in_the_passage_or_a_document_about_them() -> None:
    elt = KeyTerm(("locator", "transmitter"))
    oxygen = KeyTerm(("supplemental", "oxygen"))
    practical = KeyTerm(("practical", "test"), pervasive_in=frozenset({"pts.pdf"}))
    adsb = passage_terms("Equipment operating on the radio frequency of 1090 Megahertz (MHz)")
    assert not on_topic(adsb, "part91.pdf", [elt])
    assert on_topic(passage_terms("§ 91.207 Emergency locator transmitters. (c) Batteries ..."), "part91.pdf", [elt])
    assert on_topic(adsb, "part91.pdf", [])
    assert on_topic(passage_terms("uses supplemental oxygen"), "part91.pdf", [elt, oxygen])  # 1 of 2
    assert not on_topic(adsb, "part91.pdf", [practical])
    assert on_topic(adsb, "pts.pdf", [practical])  # the whole document is about it
    assert mentions(passage_terms("locator transmitters"), elt)


def test_cohesive_phrases_are_key_terms_even_when_one_word_is_everywhere() -> None:
    freq = _stats({"sport pilot": 422, "pilot certificate": 70}, {"sport": 445, "pilot": 1232, "certificate": 410})
    terms = key_terms("How many hours before a sport pilot certificate?", freq)
    assert [t.text for t in terms] == ["sport pilot"]  # PMI 0.5, but "sport" is nearly always "sport pilot"


def test_acronyms_are_key_terms_used_as_written_or_spelled_out() -> None:
    assert question_acronyms("How many days to file with the NTSB about ELTs in area IX?") == ["ntsb", "elt"]
    freq = _stats({"ntsb": 3, "elt": 0}, {})
    terms = key_terms("How many days to file with the NTSB about ELTs?", freq)
    assert [t.text for t in terms] == ["NTSB"]  # "ELT" is never used: the absent-term gate's business
    ntsb = terms[0]
    assert mentions(passage_terms("notify the nearest NTSB field office"), ntsb)
    assert mentions(passage_terms("the National Transportation Safety Board must be notified"), ntsb)
    assert not mentions(passage_terms("each program manager must send each report in writing"), ntsb)
