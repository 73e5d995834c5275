"""Issue 38 item 2 (the repair prompt): a quote that fails verification goes back to the model with
what was wrong, in words it can act on: where its words part from the page's closest span, the
page's own words there and the quote's (``retrieval.answer.misquote``). Through the real Gemini
client, ``test_gemini_failures.test_repair_pass_can_succeed`` checks that the second call carries it."""

from __future__ import annotations

from retrieval.answer.misquote import misquote_reason, where_it_differs
from retrieval.answer.verify import Claim, PageText, verify_claim

PAGE = ("(a) Unless otherwise authorized by\nthe Administrator, no person may op-\nerate an aircraft below 10,000 feet "
        "MSL\nat an indicated airspeed of more than\n250 knots (288 m.p.h.).")


def test_a_changed_number_is_named_with_the_pages_own_words() -> None:
    got = where_it_differs("no person may operate an aircraft below 10,000 feet MSL at an indicated airspeed of more "
                           "than 900 knots", PAGE)
    assert got == "after “of more than” the page reads “250 knots (288 m.p.h.).” where the quote reads “900 knots”"


def test_a_changed_word_before_the_matching_run_is_named_too() -> None:
    got = where_it_differs("no person may operate an aircraft under 10,000 feet MSL at an indicated airspeed", PAGE)
    # the page's word broken across lines ("op-\nerate") is shown whole, as a reader sees it
    assert got == ("before “10,000 feet MSL” the page reads “person may operate an aircraft below” where the quote "
                   "reads “person may operate an aircraft under”")


def test_a_missing_comma_is_named_and_a_quote_on_the_page_has_nothing_to_name() -> None:
    assert where_it_differs("the Administrator no person may operate", PAGE) == (
        "before “no person may” the page reads “the Administrator,” where the quote reads “the Administrator”")
    assert where_it_differs("no  person\nmay operate", PAGE) == ""  # its words are the page's, in order
    reason = misquote_reason("no person may operate", PAGE, 17, "cfr.pdf")
    assert "words are on page 17" in reason and "punctuation" in reason


def test_a_quote_with_nothing_of_the_page_says_so() -> None:
    assert where_it_differs("entirely other words about balloons", PAGE) is None
    assert "no run of 3 of its words is on that page" in misquote_reason("entirely other words about balloons",
                                                                         PAGE, 17, "cfr.pdf")


def test_verification_gives_the_reason_and_never_passes_the_misquote() -> None:
    page = PageText("cfr.pdf", 17, PAGE)
    v = verify_claim(Claim("cfr.pdf", 17, "at an indicated airspeed of more than 200 knots (288 m.p.h.)"), [page])
    assert not v.ok and v.citation is None
    assert "the page reads “250 knots (288 m.p.h.).” where the quote reads “200 knots (288 m.p.h.)”" in v.reason
