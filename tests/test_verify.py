"""Quote verification and text normalisation: pure functions, no database."""

from __future__ import annotations

import pytest

from retrieval.models import Passage
from retrieval.text.textnorm import normalize, normalize_with_map, search_text
from retrieval.answer.context import SourcePage, page_slices, page_url, shown_slices
from retrieval.answer.verify import (
    Claim,
    PageText,
    locate,
    reader_words,
    too_short,
    verify_claim,
    verify_claims,
)

PAGE = ("(b) Unless otherwise authorized by the Administrator, no person may operate an air-\n"
        "craft below 10,000 feet MSL at an indicated airspeed of more than 250 knots (288 m.p.h.).\n"
        "The pilot shall, if\u00a0practicable, \ufb01le a \u201cflight plan\u201d \u2014 see \u00a7 91.153.\n"
        "Aerobatic flight is prohibited when flight visibility is less than 3 statute miles.\n"
        "Temperatures of \u221240 degrees are listed. Use 1.5 times the distance; pages 10-12 apply.")


def doc_page(text: str = PAGE, page: int = 17) -> PageText:
    return PageText(document="cfr.pdf", page=page, text=text, page_label=str(page), url=f"u#page={page}")


# --- normalisation ---------------------------------------------------------------------------

@pytest.mark.parametrize(("raw", "norm"), [
    ("Air\n  Craft", "air craft"),
    ("air- craft", "aircraft"),
    ("air-\ncraft", "aircraft"),
    ("air\u00adcraft", "aircraft"),
    ("\ufb01le \ufb02ight \ufb00", "file flight ff"),
    ("\u201cquoted\u201d \u2018x\u2019", "\"quoted\" 'x'"),
    ("a \u2013 b \u2014 c", "a - b - c"),
    ("  lead and trail  ", "lead and trail"),
    ("10-12", "10-12"),
    ("10\u201312", "10-12"),
    ("zero\u200bwidth", "zerowidth"),
])
def test_normalize_forgives_pdf_artefacts(raw: str, norm: str) -> None:
    assert normalize(raw) == norm


def test_normalize_map_points_at_raw_characters() -> None:
    raw = "The  \ufb01rst air-\ncraft"
    norm, idx = normalize_with_map(raw)
    assert norm == "the first aircraft"
    assert len(idx) == len(norm)
    assert raw[idx[norm.index("fi")]] == "\ufb01"
    c = norm.index("craft")
    assert raw[idx[c]:idx[c + 4] + 1] == "craft"
    assert idx == sorted(idx)


def test_search_text_behaviour_kept() -> None:
    assert search_text("An air-\n craft  \ufb02ies") == "An aircraft flies"
    assert search_text("Class E") == "Class E"


# --- locate / strictness ---------------------------------------------------------------------

@pytest.mark.parametrize("quote", [
    "no person may operate an aircraft below 10,000 feet MSL",  # hyphenated across a line break
    "NO PERSON MAY OPERATE AN AIRCRAFT",  # case
    "at an indicated airspeed of more than 250 knots (288 m.p.h.).",
    "The pilot shall, if practicable, file a \"flight plan\" - see § 91.153",  # nbsp, ligature, quotes, dash
    "the pilot shall, if practicable, \ufb01le a \u201cflight plan\u201d \u2013 see \u00a7 91.153",
    "aerobatic flight is prohibited   when flight\nvisibility is less than 3 statute miles",
])
def test_locate_accepts_what_pdfs_do(quote: str) -> None:
    assert locate(quote, PAGE) is not None


@pytest.mark.parametrize("quote", [
    "at an indicated airspeed of more than 200 knots",  # changed number
    "at an indicated airspeed of more than 250 miles",  # changed unit
    "at an indicated airspeed of less than 250 knots",  # changed word
    "Aerobatic flight is not prohibited when flight visibility",  # inserted "not"
    "flight visibility is less than 3 nautical miles",
    "more than 50 knots (288 m.p.h.)",  # "50" inside "250"
    "Temperatures of 40 degrees are listed",  # dropped minus sign: text has −40
    "40 degrees are listed",
    "Use 1 times the distance",
    "5 times the distance; pages",  # "5" inside "1.5"
    "pages 1012 apply",  # a range is not a number
    "airspeed of more than 250 knots (288 mph)",  # abbreviation changed
    "no person may operate an aircraft at 10,000 feet MSL",
    "no person may operate an aircraft below 10,000 feet MSL... 250 knots",  # ellipsis splice
])
def test_locate_rejects_any_other_change(quote: str) -> None:
    assert locate(quote, PAGE) is None


@pytest.mark.parametrize(("quote", "source"), [
    ("Flight visibility must be at least 3", "Flight visibility must be at least 3-5 statute miles."),
    ("flight visibility must be at least 3", "Flight visibility must be at least 3\u20135 statute miles."),
    ("the ceiling must be at least 250", "The ceiling must be at least 2,500 feet."),
    ("the ceiling must be at least 2", "The ceiling must be at least 2,500 feet."),
    ("multiply the distance by 1", "Multiply the distance by 1.5 for grass."),
    ("Use 1.5 times the distance; pages 10", PAGE),  # "10" cut out of the range "10-12"
])
def test_locate_rejects_a_number_cut_out_of_a_range_or_decimal(quote: str, source: str) -> None:
    assert locate(quote, source) is None


@pytest.mark.parametrize(("quote", "source"), [
    ("Flight visibility must be at least 3-5", "Flight visibility must be at least 3-5 statute miles."),
    ("the ceiling must be at least 2,500", "The ceiling must be at least 2,500 feet."),
    ("the ceiling must be at least 2,500 feet", "The ceiling must be at least 2,500 feet, and 3 more."),
    ("flight visibility of at least 3", "A flight visibility of at least 3. 5 pilots agreed."),
    ("flight visibility of at least 3", "A flight visibility of at least 3, and more."),
])
def test_locate_accepts_a_whole_number_before_punctuation(quote: str, source: str) -> None:
    assert locate(quote, source) is not None


def test_locate_returns_source_words() -> None:
    m = locate("no person may operate an aircraft below 10,000 feet msl", PAGE)
    assert m is not None
    assert m.text == "no person may operate an air-\ncraft below 10,000 feet MSL"
    assert PAGE[m.start:m.end] == m.text
    m2 = locate("file a \"flight plan\"", PAGE)
    assert m2 is not None and m2.text == "\ufb01le a \u201cflight plan\u201d"


def test_a_quote_may_start_or_end_at_an_em_dash_between_words() -> None:
    """normalize joins the words around a dash between letters, as it joins a line-broken "air-craft";
    an em dash there is punctuation, so a quote that stops or starts at it is whole words. A hyphen or
    an en dash between letters still is not ("ADS–B" is one name), and a cut word still fails."""
    dash = "\u2014"
    source = f"The mesher knows nothing of the geometry{dash}this is a job left to the solver."
    assert locate("this is a job left to the solver", source).text == "this is a job left to the solver"
    assert locate("The mesher knows nothing of the geometry", source).text == "The mesher knows nothing of the geometry"
    assert locate("his is a job left to the solver", source) is None
    assert locate("is a job left to the", source.replace(dash, " ")) is not None
    assert locate("craft is parked in the hangar", "The air-craft is parked in the hangar.") is None
    assert locate("each aircraft equipped with ADS", "each aircraft equipped with ADS\u2013B Out must") is None


def test_locate_finds_later_occurrence_on_word_boundary() -> None:
    text = "250 knots is too fast; 50 knots (slow) is fine"
    m = locate("50 knots (slow) is", text)
    assert m is not None and m.text == "50 knots (slow) is"


@pytest.mark.parametrize(("quote", "short"), [
    ("250 knots", True),
    ("Clear of clouds", True),
    ("a b c d", True),
    ("more than 250 knots", False),
    ("1 statute mile, clear of clouds", False),
])
def test_too_short(quote: str, short: bool) -> None:
    assert too_short(quote) is short


@pytest.mark.parametrize(("text", "words"), [
    ("10,000", 1),            # a number with a thousands separator is one word, not "10" + "000"
    ("3.5 inches", 2),
    ("x11() under UNIX", 3),  # an identifier with its parentheses is one word
    ("y ~ B %in% A", 4),      # "%in%" is a word; a lone "~" is not
    ("air- craft", 1),        # hyphenated across a line break: one word
    ("\u2014 \u2022 -", 0),
    ("set xrange [0:10]", 3),
])
def test_reader_words(text: str, words: int) -> None:
    assert reader_words(text) == words


@pytest.mark.parametrize(("quote", "short"), [
    ("below 10,000 feet", True),        # three words to a reader (was counted as four: 10 / 000)
    ("below 10,000 feet MSL", False),
    ("x11() under UNIX", True),
    ("the x11() device under UNIX", False),
    ("the %in% operator nests", False),  # %in% counts (it used to count as no word at all)
])
def test_quote_length_is_counted_as_a_reader_counts(quote: str, short: bool) -> None:
    assert too_short(quote) is short


def test_number_does_not_pad_a_short_quote_into_a_citation() -> None:
    v = verify_claim(Claim("cfr.pdf", 17, "below 10,000 feet"), [doc_page()])
    assert not v.ok and "too short" in v.reason
    assert verify_claim(Claim("cfr.pdf", 17, "below 10,000 feet MSL"), [doc_page()]).ok


# --- verify_claim --------------------------------------------------------------------------------

def test_verified_citation_carries_source_words_label_and_url() -> None:
    v = verify_claim(Claim("cfr.pdf", 17, "operate an aircraft below 10,000 feet MSL"), [doc_page()])
    assert v.ok and v.citation is not None
    assert v.citation.quote == "operate an air-\ncraft below 10,000 feet MSL"
    assert (v.citation.document, v.citation.page, v.citation.page_label, v.citation.url) == \
        ("cfr.pdf", 17, "17", "u#page=17")


def test_a_quote_cited_on_the_wrong_shown_page_is_cited_where_its_words_are() -> None:
    shown = [doc_page(), doc_page("Nothing relevant is written on this page at all.", page=18)]
    v = verify_claim(Claim("cfr.pdf", 18, "operate an aircraft below 10,000 feet MSL"), shown)
    assert v.ok and (v.citation.page, v.citation.page_label, v.citation.url) == (17, "17", "u#page=17")
    unshown = verify_claim(Claim("cfr.pdf", 18, "operate an aircraft below 10,000 feet MSL"),
                           [doc_page("Nothing relevant is written here.", 18)])
    assert not unshown.ok and "word for word" in unshown.reason  # only pages the answerer was shown count


BROKEN = ("The pilot in command is required to have con-\ntrol of the aircraft at all times, and a com-\npact "
          "binary or text file is kept aboard.")


@pytest.mark.parametrize(("quote", "shown"), [
    ("The pilot in command is required to have con-", "The pilot in command is required to have con-\ntrol"),
    ("is required to have con", "is required to have con-\ntrol"),
    ("pact binary or text file is kept aboard", "com-\npact binary or text file is kept aboard"),
])
def test_a_quote_cut_inside_a_word_broken_across_lines_is_widened_to_the_word(quote: str, shown: str) -> None:
    m = locate(quote, BROKEN)
    assert m is not None and m.text == shown


@pytest.mark.parametrize("quote", [
    "pilot in command is required to have co",  # cut where the page does not break the word
    "ilot in command is required",  # a fragment that starts inside an unbroken word
])
def test_a_word_cut_anywhere_else_is_not_widened(quote: str) -> None:
    assert locate(quote, BROKEN) is None


DASHED = "Each operator must keep con-\ntrol\u2014this is the rule\u2014for every flight of the day."


@pytest.mark.parametrize(("quote", "shown"), [
    ("Each operator must keep con-", "Each operator must keep con-\ntrol"),  # not "control\u2014this"
    ("Each operator must keep con", "Each operator must keep con-\ntrol"),
])
def test_a_widened_word_stops_at_an_em_dash(quote: str, shown: str) -> None:
    """The page's word ends at the dash: the reader is shown the word the quote cut, never the next one."""
    m = locate(quote, DASHED)
    assert m is not None and m.text == shown


def test_a_quote_cut_in_a_broken_word_may_end_at_an_em_dash() -> None:
    """One end inside a word the page breaks across lines, the other at an em dash between words (14 CFR 91
    p. 1): kept as the page's whole words."""
    page = "used for law en-\nforcement purposes.\n91.27\u201391.99\n[Reserved]\n\nSubpart B\u2014Flight Rules"
    m = locate("forcement purposes. 91.27\u201391.99 [Reserved] Subpart B", page)
    assert m is not None and m.text == "en-\nforcement purposes.\n91.27\u201391.99\n[Reserved]\n\nSubpart B"


def test_page_not_retrieved_fails() -> None:
    v = verify_claim(Claim("cfr.pdf", 99, "the limit is 900 knots below 10,000 feet"), [doc_page()])
    assert not v.ok and "not among the passages" in v.reason
    slip = verify_claim(Claim("cfr.pdf", 99, "operate an aircraft below 10,000 feet MSL"), [doc_page()])
    assert slip.ok and slip.citation.page == 17  # a page-number slip: cited on the shown page holding the words


def test_document_not_retrieved_fails() -> None:
    v = verify_claim(Claim("other.pdf", 17, "operate an aircraft below 10,000 feet MSL"), [doc_page()])
    assert not v.ok and "other.pdf" in v.reason


def test_short_quote_fails_even_if_present() -> None:
    v = verify_claim(Claim("cfr.pdf", 17, "250 knots"), [doc_page()])
    assert not v.ok and "too short" in v.reason


def test_fabricated_quote_fails() -> None:
    v = verify_claim(Claim("cfr.pdf", 17, "the limit is 900 knots below 10,000 feet"), [doc_page()])
    assert not v.ok and "word for word" in v.reason


def test_verification_deduplicates_and_separates_failures() -> None:
    claims = [Claim("cfr.pdf", 17, "more than 250 knots (288 m.p.h.)"),
              Claim("cfr.pdf", 17, "MORE THAN 250 KNOTS (288 m.p.h.)"),
              Claim("cfr.pdf", 17, "more than 900 knots (288 m.p.h.)")]
    res = verify_claims(claims, [doc_page()])
    assert len(res.citations) == 1
    assert len(res.failures) == 1 and res.failures[0].claim.quote.startswith("more than 900")


# --- pages of a passage, links ------------------------------------------------------------------

def _passage(**kw) -> Passage:
    base = dict(chunk_id=1, collection="c", document="d.pdf", page=3, page_end=3, char_start=0, char_end=0,
                text="", page_label="iii")
    base.update(kw)
    return Passage(**base)


def test_two_page_passage_maps_text_to_each_page() -> None:
    p3 = "Header line\nFirst part of the rule says aircraft must carry fuel.\nFooter 3"
    p4 = "Header line\nSecond part says at night 45 minutes are required.\nMore text"
    start = p3.index("First")
    end = p4.index("\nMore")
    shown_text = p3[start:p3.index("\nFooter")] + "\n" + p4[p4.index("Second"):end]
    passage = _passage(page=3, page_end=4, char_start=start, char_end=end, text=shown_text)
    pages = {3: SourcePage(p3, "iii"), 4: SourcePage(p4, "iv")}
    slices = page_slices(passage, pages)
    assert slices[3].startswith("First part") and slices[4].endswith("are required.")
    shown = shown_slices(passage, "P1", pages, file_base_url="https://files.example/docs/")
    assert [(s.page, s.page_label) for s in shown] == [(3, "iii"), (4, "iv")]
    assert "Footer" not in shown[0].text and "Header" not in shown[1].text
    assert shown[1].url == "https://files.example/docs/d.pdf#page=4"
    ok = verify_claim(Claim("d.pdf", 4, "at night 45 minutes are required"), shown)
    assert ok.ok
    wrong_page = verify_claim(Claim("d.pdf", 3, "at night 45 minutes are required"), shown)
    assert wrong_page.ok and (wrong_page.citation.page, wrong_page.citation.page_label) == (4, "iv")  # where the words are
    assert wrong_page.citation.url == "https://files.example/docs/d.pdf#page=4"
    footer = verify_claim(Claim("d.pdf", 4, "Header line Second part says"), shown)
    assert not footer.ok  # the running header was not shown with this passage


def test_one_page_passage_without_stored_page_is_its_own_slice() -> None:
    passage = _passage(text="Shown text of the page only.", char_end=28)
    assert page_slices(passage, {}) == {3: "Shown text of the page only."}
    two = _passage(page=3, page_end=4, text="x\ny")
    assert page_slices(two, {}) == {}


@pytest.mark.parametrize(("doc_url", "base", "expected"), [
    ("https://faa.gov/a.pdf", "https://files/x", "https://faa.gov/a.pdf#page=7"),
    ("https://faa.gov/a.pdf#page=2", None, "https://faa.gov/a.pdf#page=7"),
    (None, "https://files/x/", "https://files/x/a.pdf#page=7"),
    (None, None, None),
])
def test_page_url(doc_url, base, expected) -> None:
    assert page_url("a.pdf", 7, doc_url, base) == expected


def test_table_cell_joiners_are_layout_not_words() -> None:
    """Ingest writes a table row's cells joined by " | "; the PDF has blank space there. A quote in
    the PDF's own words verifies, a quote cut from the stored row verifies too, and neither shows
    the inserted "|" as the document's. (Known limit: the stored text cannot tell a " | " of the
    document's own from a joiner, so "ls grep" also verifies against "ls | grep".)"""
    from retrieval.answer.verify import Claim, PageText, verify_claim

    page = PageText(document="R-intro.pdf", page=101, text=(
        "Table of commands\nINSTALL | Install add-on packages.\nREMOVE | Remove add-on packages.\n"
        "Pipe the listing with ls | grep pdf to keep the PDF files only.\n"))
    for quote in ("INSTALL Install add-on packages.", "INSTALL | Install add-on packages."):
        verdict = verify_claim(Claim("R-intro.pdf", 101, quote), [page])
        assert verdict.ok, quote
        assert verdict.citation.quote == "INSTALL Install add-on packages."
    assert verify_claim(Claim("R-intro.pdf", 101, "the listing with ls | grep pdf to keep"), [page]).ok
    assert not verify_claim(Claim("R-intro.pdf", 101, "INSTALL Remove add-on packages."), [page]).ok


def test_the_support_check_names_the_verified_quotes_the_reader_doubts() -> None:
    """The support check of the model path: a quote found word for word on its page, but that the
    reader rates as stating nothing towards the question, is doubted; without a reader nothing is."""
    import numpy as np

    from retrieval.answer.answerers.model.checks import support_doubts
    from retrieval.answer.verify import Claim, PageText, verify_claims

    class Reader:
        def score(self, question, texts):
            return np.array([0.9 if "500" in t else 0.01 for t in texts])

    page = PageText(document="bash.pdf", page=3, text=(
        "HISTSIZE is the number of commands remembered in the history list; the default value is 500. "
        "The shell sets BASH_VERSION to the version of this instance of Bash at startup."))
    claims = [Claim("bash.pdf", 3, "the number of commands remembered in the history list; the default value is 500"),
              Claim("bash.pdf", 3, "The shell sets BASH_VERSION to the version of this instance of Bash")]
    plain = verify_claims(claims, [page])
    assert len(plain.citations) == 2
    assert support_doubts(plain.citations, "What is the default HISTSIZE?", Reader()) == {1}
    assert support_doubts(plain.citations, "What is the default HISTSIZE?", None) == set()


def test_readable_joins_only_line_break_hyphenation_and_verification_still_uses_the_page() -> None:
    from retrieval.text.textnorm import readable
    from retrieval.answer.verify import Claim, PageText, verify_claim

    page = PageText(document="cfr.pdf", page=17, text="no person may op-\nerate an aircraft under Part-\n91 or pre- and post-flight")
    assert readable(page.text) == "no person may operate an aircraft under Part- 91 or pre- and post-flight"
    verdict = verify_claim(Claim("cfr.pdf", 17, "no person may operate an aircraft"), [page])
    assert verdict.ok and "op-\nerate" in verdict.citation.quote  # stored as the page has it; shown readable


@pytest.mark.parametrize("text", ["a- b", "a-b-c", "a--b", "a - b", "10-12", " x ", " - a", "a-", "-a", "air- craft",
                                  "head- on", "a-  b", "a\u00ad\nb", "¨x", "ﬁne", "a\u200b- b", "Ö-ä", "½-a", "a-½",
                                  "a- \u00a0b", "", " ", "-", "a-\u2013b", "x\u2010 y", "ﬂight-\n level"])
def test_normalize_is_the_mapped_normalisation_without_the_map(text: str) -> None:
    assert normalize(text) == normalize_with_map(text)[0]


def test_normalize_agrees_with_the_mapped_one_on_random_text() -> None:
    import random  # noqa: PLC0415

    rng = random.Random(7)
    alphabet = list("ab- \n\t-1.é\u00adﬁ¨\u2013\u200bÖ½²_A")
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        assert normalize(text) == normalize_with_map(text)[0], repr(text)
