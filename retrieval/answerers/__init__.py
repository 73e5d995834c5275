"""Answerers: turn a question and the page texts it was shown into a draft answer with claimed quotes.

A draft is never shown as is: ``retrieval.ask`` verifies every claimed quote against the shown page
texts (``retrieval.verify``) and keeps only the source's own words. Two answerers exist:
``gemini`` (google-genai, structured output) and ``extractive`` (verbatim best sentences, no model
service). Both implement ``Answerer``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pydantic import BaseModel, Field

from retrieval.models import Turn
from retrieval.verify import Claim, PageText, Verdict


class AnswererError(RuntimeError):
    """The answerer could not produce a usable draft (provider down, bad output): one clear line."""


class Draft(BaseModel):
    """An answerer's proposal, before verification."""

    refusal: bool
    answer: str = ""
    reason: str = ""
    claims: list[Claim] = Field(default_factory=list)
    score: float | None = None  # the extractive answerer's evidence score (None for models)
    model_calls: int = 0
    best: Claim | None = None  # the extractive answerer's best sentence, also when it refuses


class Answerer(Protocol):
    name: str
    model: str  # what ran ("" when no model)

    def answer(self, question: str, shown: Sequence[PageText]) -> Draft: ...

    def repair(self, question: str, shown: Sequence[PageText], draft: Draft,
               failures: Sequence[Verdict]) -> Draft: ...

    def standalone(self, question: str, history: Sequence[Turn]) -> str: ...
