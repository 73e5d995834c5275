"""What `chapterverse ask` prints for people (retrieval.answer.answer_view, pure): documents by title, each quote
once, no internal scores, and a refusal that says what was searched, the nearest pages and how to ask
better. The Slack rendering shares the same rules (bot.render)."""

from __future__ import annotations

from bot.render import Searched, render_answer, render_refusal
from retrieval.answer.answer_view import ASK_BETTER, as_text, readable_name, shown_title
from retrieval.models import Answer, Citation, NearestPassage

CFR = "14-CFR-Part-91_General-Operating-and-Flight-Rules.pdf"
QUOTE = "No person may operate an aircraft below 10,000 feet MSL at an indicated airspeed of more than 250 knots"
TITLES = {CFR: "14 CFR Part 91 General Operating and Flight Rules"}


def cite(quote: str = QUOTE) -> Citation:
    return Citation(document=CFR, page=17, page_label="17", quote=quote, url=None)


def extractive(n_quotes: int = 1) -> Answer:
    return Answer(question="q", refusal=False, answerer="extractive", evidence_score=1.23,
                  answer=f"The handbooks say ({CFR}, p. 17): {QUOTE}.",
                  citations=[cite()] + [cite("Another supporting sentence of the same page here")] * (n_quotes - 1))


def test_documents_are_shown_by_title_else_a_cleaned_file_name() -> None:
    assert shown_title(CFR, TITLES) == TITLES[CFR]
    assert shown_title(CFR, {CFR: None}) == shown_title(CFR) == readable_name(CFR) == "14 CFR Part 91"
    text = as_text(extractive(), TITLES)
    assert TITLES[CFR] in text and CFR not in text.split("\n", 1)[1]


def test_each_quote_is_shown_once_and_no_internal_score() -> None:
    text = as_text(extractive(), TITLES)
    assert text.count("250 knots") == 1
    assert "1.23" not in text and "score" not in text
    slack = render_answer(extractive(), turn_id=None, searched=Searched(["dev"]))
    shown = " ".join(str(b) for m in slack for b in m.blocks)
    assert shown.count("250 knots") == 1


def test_a_model_answer_in_its_own_words_is_kept_above_the_quotes() -> None:
    a = Answer(question="q", refusal=False, answerer="openai", answer="250 knots below 10,000 feet.", citations=[cite()])
    text = as_text(a, TITLES)
    assert text.startswith("250 knots below 10,000 feet.") and text.count(QUOTE) == 1


def test_a_refusal_says_what_was_searched_the_nearest_pages_and_how_to_ask_better() -> None:
    a = Answer(question="What is the crosswind limit?", refusal=True, reason="The documents do not support an answer.",
               evidence_score=0.7, nearest=[NearestPassage(document=CFR, page=42, page_label="42", snippet="…")])
    text = as_text(a, TITLES, ["dev"])
    assert "Searched the collection dev." in text
    assert f"{TITLES[CFR]}, p. 42" in text and ASK_BETTER in text and "0.7" not in text
    assert "Searched every collection." in as_text(a, TITLES)
    slack = render_refusal(a, searched=Searched(["dev"], [CFR]))
    assert ASK_BETTER in " ".join(str(b) for m in slack for b in m.blocks)


def test_slack_shows_titles_when_the_bot_knows_them() -> None:
    searched = Searched(["dev"], titles=TITLES)
    shown = " ".join(str(b) for m in render_answer(extractive(), turn_id=None, searched=searched) for b in m.blocks)
    assert TITLES[CFR] in shown and CFR not in shown
    # without titles: the cleaned file name, never the raw one
    bare = " ".join(str(b) for m in render_answer(extractive(), turn_id=None, searched=Searched(["dev"]))
                    for b in m.blocks)
    assert "14 CFR Part 91 · p. 17" in bare and CFR not in bare
