"""The acceptor: how likely the evidence scorer's first sentence states the answer (a pure function).

The evidence score alone decides acceptance by one threshold. The acceptor looks at the first
sentence *and its rivals*: a first sentence far ahead of the second is right far more often than
one that barely leads, whatever its own score. It is a logistic model over 14 features of the first
eligible sentence and the eligible list (``features``), with weights fitted on the lists the answerer
builds for the 4,001 reader-training questions (``retrieval/eval/reader_data``: 14 documents no
evaluation set uses), asked against an index of their own documents; nothing was fitted on an
evaluation set. How they were made: ``results/reader_pipeline/`` (``scripts/dump_train.sh``, then
``scripts/fit_acceptor.py``). Out of sample by collection on those documents it answered 1,101
questions right with 401 wrong where the threshold answered 1,232 with 790.

Used by the scorer 'evidence+acceptor' (``retrieval.settings``): the acceptor's probability replaces
the evidence threshold, and the reader's agreement still accepts a first quote on its own.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from retrieval.answer.answerers.extractive import Scored

ACCEPT_MIN = 0.5  # the natural cut of a probability: a right answer gains what a wrong one costs
NO_RIVAL_MARGIN = 0.5  # the margin counted when the first sentence has no eligible rival
BIAS = -4.261021263301562
WEIGHTS = (  # in the order of ``features``; fitted by results/reader_pipeline/scripts/fit_acceptor.py
    -0.11569269025654627,  # evidence score
    4.355299171623085,  # margin to the second eligible sentence
    1.566319827685024,  # cosine
    0.8088196358291624,  # term coverage with the heading
    0.5238125169749557,  # term coverage of the sentence alone
    -0.04511128938843889,  # log eligible sentences
    0.45577155218170784,  # log quotable sentences shown
    -0.8033533939054287,  # log retrieval rank
    1.2936196569609884,  # share of the question's word pairs in heading + sentence
    -0.7106116593175589,  # quantity question and a digit in the sentence
    1.005801049727034,  # quantity question
    -0.32301336283634186,  # log words
    -0.16513712739926767,  # table row
    1.377650064215525,  # best cosine of the other eligible sentences
)
_DIGIT = re.compile(r"\d")


def features(eligible: Sequence[Scored], quantity_question: bool) -> list[float]:
    """The acceptor's inputs for the first of ``eligible`` (best first, at least one)."""
    first, rivals = eligible[0], eligible[1:]
    words = max(len(first.candidate.text.split()), 1)
    digit = bool(_DIGIT.search(first.candidate.text))
    return [
        first.score,
        first.score - rivals[0].score if rivals else NO_RIVAL_MARGIN,
        first.cos,
        first.lex,
        first.lex_sentence,
        math.log(len(eligible)),
        math.log(max(first.pool, 1)),
        math.log(max(first.rank, 1)),
        first.bigram,
        float(digit and quantity_question),
        float(quantity_question),
        math.log(words),
        float(first.table),
        max((r.cos for r in rivals), default=0.0),
    ]


def acceptance(eligible: Sequence[Scored], quantity_question: bool) -> float:
    """Probability that the first of ``eligible`` states the answer."""
    z = BIAS + sum(w * x for w, x in zip(WEIGHTS, features(eligible, quantity_question), strict=True))
    return 1.0 / (1.0 + math.exp(-z))
