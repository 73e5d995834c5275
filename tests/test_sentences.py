"""Where sentences end (``retrieval.text.spans``): the one splitter the chunker and the extractive
answerer share, with the default preset's abbreviations."""

from __future__ import annotations

import pytest

from retrieval.settings import preset_profile
from retrieval.text.spans import split_sentences

ABBREVIATIONS = preset_profile("default").abbreviations


def sentences(text: str, lowercase_starts: bool = True) -> list[str]:
    return [text[s:e] for s, e in split_sentences(text, 0, len(text), lowercase_starts=lowercase_starts,
                                                  abbreviations=ABBREVIATIONS)]


@pytest.mark.parametrize("text", [
    "Surfaces are colored with a smooth palette (see set palette (p. 181)). Other surfaces are not.",
    "The readings are shown in Fig. 3 of this handbook. They were taken at noon.",
    "Start the No. 2 engine first. Then the other one.",
    "Cite them as in pp. 12-14 of the guide. Nothing else is needed.",
])
def test_a_page_reference_or_figure_number_does_not_end_a_sentence(text: str) -> None:
    first, second = sentences(text)
    assert text.startswith(first) and first.endswith(".") and text.endswith(second)
    assert first.count(".") >= 2  # the abbreviation's stop stayed inside


def test_a_sentence_still_ends_before_a_digit_after_an_ordinary_word() -> None:
    assert sentences("The limit is 250 knots. 10,000 feet is the altitude.") == [
        "The limit is 250 knots.", "10,000 feet is the altitude."]
    assert sentences("It was 5 p.m. Then it rained.") == ["It was 5 p.m.", "Then it rained."]


def test_an_abbreviation_in_brackets_does_not_end_a_sentence_before_a_lower_case_word() -> None:
    assert sentences("Use a terminal (e.g. the x11 one) for this. plot draws it.") == [
        "Use a terminal (e.g. the x11 one) for this.", "plot draws it."]


def test_an_abbreviation_is_read_at_the_paragraph_start_and_after_a_long_paragraph() -> None:
    """The word before a stop is the last run of non-space characters since the paragraph began (stepped back
    to, not searched for from the paragraph's start): at the very start, behind an opening bracket or quote,
    and after thousands of words of code listing."""
    assert sentences("(p. 3) shows it. Then more.") == ["(p. 3) shows it.", "Then more."]
    assert sentences('"Fig. 2" is wrong. Next.') == ['"Fig. 2" is wrong.', "Next."]
    listing = " ".join(f"v{i} = f(v{i - 1});" for i in range(3000))
    text = f"{listing} See Fig. 3 for the plot. Then stop."
    assert sentences(text)[-2:] == ["See Fig. 3 for the plot.", "Then stop."]
