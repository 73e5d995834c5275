"""Answerers: turn a question and the page texts it was shown into a draft answer with claimed quotes.

A draft is never shown as is: ``retrieval.answer.ask`` verifies every claimed quote against the shown page
texts (``retrieval.answer.verify``) and keeps only the source's own words. Three answerers exist:
``gemini`` (google-genai, structured output), ``openai`` (any OpenAI-compatible server through the
``openai`` client: Ollama, vLLM, llama.cpp, LM Studio, OpenAI; ``openai_compat``) and ``extractive``
(verbatim best sentences, no model service). All implement ``Answerer``; the two model answerers share
everything but their provider call (``structured``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pydantic import BaseModel, Field

from retrieval.models import Turn
from retrieval.settings import Settings
from retrieval.answer.verify import Claim, PageText, Verdict

ANSWERERS = ("gemini", "openai", "extractive")


def unconfigured(settings: Settings, name: str) -> str | None:
    """What the answerer ``name`` still needs from the configuration, in plain words (None: nothing)."""
    if name == "gemini" and settings.answer.gemini_api_key is None:
        return "GEMINI_API_KEY"
    if name == "openai":
        if not settings.answer.openai_model:
            return "CHAPTERVERSE_OPENAI_MODEL (and CHAPTERVERSE_OPENAI_BASE_URL for a local server)"
        if settings.answer.openai_api_key is None and not settings.answer.openai_base_url:
            return "CHAPTERVERSE_OPENAI_BASE_URL (a local server) or OPENAI_API_KEY (OpenAI itself)"
    return None


class AnswererError(RuntimeError):
    """The answerer could not produce a usable draft (provider down, bad output): one clear line."""


class Draft(BaseModel):
    """An answerer's proposal, before verification."""

    refusal: bool
    answer: str = ""
    reason: str = ""
    claims: list[Claim] = Field(default_factory=list)
    evidence_score: float | None = None  # the extractive answerer's evidence score for its first quote (None for models)
    agreement: float | None = None  # its second judge's probability for the first quote if it ranks it first too, else 0 (None: no judge)
    model_calls: int = 0
    best: Claim | None = None  # the extractive answerer's best sentence, also when it refuses


class Answerer(Protocol):
    name: str
    model: str  # what ran ("" when no model)

    def answer(self, question: str, shown: Sequence[PageText]) -> Draft: ...

    def repair(self, question: str, shown: Sequence[PageText], draft: Draft,
               failures: Sequence[Verdict]) -> Draft: ...

    def standalone(self, question: str, history: Sequence[Turn]) -> str: ...
