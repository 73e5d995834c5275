"""The acceptor (retrieval.answer.answerers.acceptor): a first sentence far ahead of its rivals is
accepted, a near tie is not, and the 'evidence+acceptor' scorer lets it decide in the answerer."""

from __future__ import annotations

import math

import pytest

from retrieval.answer.answerers import acceptor
from retrieval.answer.answerers.acceptor import ACCEPT_MIN, NO_RIVAL_MARGIN, acceptance, features
from retrieval.answer.answerers.extractive import Candidate, ExtractiveAnswerer, Scored, shared_pairs, word_pairs
from retrieval.answer.verify import verify_claims
from tests.test_extractive import PAGES, _answer, _bow_embed, _Judge


def _s(cos: float = 0.6, lex: float = 0.8, text: str = "The airspeed limit is 250 knots below 10,000 feet.",
       rank: int = 1) -> Scored:
    """An eligible sentence with the given cosine and term coverage (its evidence score follows)."""
    return Scored(Candidate(0, 0, len(text), text), cos, cos, lex, rank, True,
                  lex_sentence=lex, bigram=0.5, pool=40, table=False)


def test_features_follow_the_weights_order_and_count_the_rivals() -> None:
    first, second = _s(), _s(cos=0.3, lex=0.2)
    f = features([first, second], quantity_question=True)
    assert len(f) == len(acceptor.WEIGHTS) == 14
    assert f[0] == pytest.approx(first.score) and f[1] == pytest.approx(first.score - second.score)
    assert f[5] == pytest.approx(math.log(2)) and f[6] == pytest.approx(math.log(40))
    assert f[9] == 1.0 and f[10] == 1.0  # a quantity question, and the sentence has a digit
    assert f[13] == pytest.approx(0.3)  # the best rival's cosine
    alone = features([first], quantity_question=False)
    assert alone[1] == NO_RIVAL_MARGIN and alone[13] == 0.0 and alone[9] == 0.0


def test_a_clear_leader_is_accepted_a_weak_near_tie_is_not() -> None:
    leader = _s(cos=0.75, lex=1.0)
    far_behind = _s(cos=0.2, lex=0.1)
    close_behind = _s(cos=0.74, lex=1.0, text="The airspeed limit is 200 knots in Class D airspace below 2,500 feet.")
    assert acceptance([leader, far_behind], quantity_question=True) >= ACCEPT_MIN
    # the same first sentence is less likely right when a rival scores nearly as well
    assert acceptance([leader, close_behind], quantity_question=True) < acceptance([leader, far_behind], True)
    weak = _s(cos=0.3, lex=0.3)
    assert acceptance([weak, _s(cos=0.29, lex=0.3)], quantity_question=False) < ACCEPT_MIN


def test_word_pairs_shared_with_the_question() -> None:
    q = word_pairs(["emergency", "locator", "transmitter"])
    assert shared_pairs(q, ["the", "emergency", "locator", "transmitter"]) == 1.0
    assert shared_pairs(q, ["locator", "emergency"]) == 0.0
    assert shared_pairs(set(), ["a", "b"]) == 0.0


QUESTION = "What is the maximum indicated airspeed below 10,000 feet MSL?"
HEADS = {"P1": "§ 91.117 Aircraft speed.", "P2": "Introduction"}


def test_the_acceptor_decides_in_the_answerer_and_its_probability_is_the_score() -> None:
    ans = ExtractiveAnswerer(_bow_embed, model="bow", acceptor=True)
    assert ans.scorer == "evidence+acceptor" and ans.threshold == ACCEPT_MIN
    draft = _answer(ans, QUESTION, PAGES, HEADS)
    assert draft.score is not None and 0.0 < draft.score < 1.0
    probe = _answer(ExtractiveAnswerer(_bow_embed, model="bow", acceptor=True, threshold=float("-inf")), QUESTION,
                    PAGES, HEADS)
    assert not probe.refusal and probe.score == pytest.approx(draft.score)
    assert "250 knots" in probe.claims[0].quote and not verify_claims(probe.claims, PAGES).failures
    # the same probability decides: just above it refuses, just below it answers
    assert _answer(ExtractiveAnswerer(_bow_embed, model="bow", acceptor=True, threshold=draft.score + 1e-6),
                   QUESTION, PAGES, HEADS).refusal
    assert not _answer(ExtractiveAnswerer(_bow_embed, model="bow", acceptor=True, threshold=draft.score - 1e-6),
                       QUESTION, PAGES, HEADS).refusal


def test_the_judge_still_accepts_what_the_acceptor_would_refuse() -> None:
    strict = ExtractiveAnswerer(_bow_embed, model="bow", acceptor=True, threshold=1.0)
    assert _answer(strict, QUESTION, PAGES, HEADS).refusal
    judged = ExtractiveAnswerer(_bow_embed, model="bow", acceptor=True, threshold=1.0, judge=_Judge("250 knots", 0.97))
    assert judged.scorer == "evidence+acceptor+stub-judge"
    draft = _answer(judged, QUESTION, PAGES, HEADS)
    assert not draft.refusal and "250 knots" in draft.claims[0].quote and draft.agreement == pytest.approx(0.97)


def test_a_reader_that_decides_takes_no_acceptor() -> None:
    with pytest.raises(ValueError, match="no second judge or acceptor"):
        ExtractiveAnswerer(_bow_embed, model="bow", reader=_Judge("x", 0.9), acceptor=True)
