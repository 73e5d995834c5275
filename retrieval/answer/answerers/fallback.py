"""A model answerer that degrades to the extractive answerer when the model fails (``Fallback``).

When the provider is down, rate-limited past its retry budget, or replies with output that cannot be
used, the question is answered from the same retrieved passages by the extractive answerer (verbatim
quotes, verified like any other), and ``Answer.answerer`` says so. A model that answers, or declines
to, is never second-guessed by the fallback.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from retrieval.answer.answerers import Answerer, Response, Retrieved
from retrieval.answer.drafting import Clock
from retrieval.models import Answer, Turn


class Fallback:
    """``primary`` (a model answerer), and ``fallback()`` (built only when needed) when it fails."""

    def __init__(self, primary: Answerer, fallback: Callable[[], Answerer]) -> None:
        self.primary = primary
        self._fallback = fallback
        self.name = primary.name
        self.model = primary.model
        self.passages_wanted = primary.passages_wanted  # a model reads more passages than the extractive answerer
        self.leg_depth = primary.leg_depth

    def respond(self, retrieved: Retrieved, clock: Clock, result: Answer) -> Response | None:
        response = self.primary.respond(retrieved, clock, result)
        if response is not None:
            return response
        with clock.stage("load_answerer"):
            fallback = self._fallback()
        return fallback.respond(retrieved, clock, result)

    def standalone(self, question: str, history: Sequence[Turn]) -> str:
        return self.primary.standalone(question, history)
