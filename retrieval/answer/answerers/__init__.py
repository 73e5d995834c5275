"""Answerers: turn a question and the page texts it was shown into a draft answer with claimed quotes.

A draft is never shown as is: every claimed quote is verified against the shown page texts
(``retrieval.answer.verify``) and only the source's own words are kept. Three answerers implement
``Answerer`` through ``retrieval.answer.drafting.Drafting``: ``gemini`` and ``openai`` (``model``,
sharing all but their provider call) and ``extractive`` (verbatim best sentences, no model service).
``registry`` builds them by name; ``fallback`` lets a failed model degrade to the extractive answerer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from pydantic import BaseModel, Field

from retrieval.answer.context import Pages
from retrieval.answer.verify import Claim, PageText, Verification
from retrieval.models import Answer, Citation, Passage, Turn
from retrieval.settings import Settings

if TYPE_CHECKING:  # both import this module
    from retrieval.answer.answerers.extractive.keyterms import PhraseStats
    from retrieval.answer.drafting import Clock

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
    best: Claim | None = None  # the extractive answerer's best sentence, also when it refuses


Statistics = Callable[[Sequence[str], Sequence[str]], "PhraseStats"]
"""Reads the searched collections' chunk counts of (phrases, words) (``retrieval.answer.term_stats``)."""


@dataclass(frozen=True)
class Retrieved:
    """What search found for one question: the ranked passages an answerer may see (flagged text
    already set aside), the stored text of their pages, and a reader of the collections' counts."""

    question: str
    passages: Sequence[Passage]
    pages: Pages
    statistics: Statistics


@dataclass(frozen=True)
class Request:
    """One question as an answerer reads it: the question, the page texts it is shown (every quote
    is verified against exactly these), the section heading of each shown passage by its id, and
    the collection's counts of the words it weighs (None: every word weighs the same)."""

    question: str
    shown: Sequence[PageText]
    headings: Mapping[str, str] = field(default_factory=dict)
    stats: PhraseStats | None = None


@dataclass(frozen=True)
class Response:
    """A draft after verification (and the answerer's own checks), with what it was checked against;
    ``citations``: the verified quotes as shown (None: as verified)."""

    draft: Draft
    verification: Verification
    shown: Sequence[PageText]
    citations: Sequence[Citation] | None = None

    @property
    def quotes(self) -> list[Citation]:
        return list(self.citations) if self.citations is not None else self.verification.citations


class Answerer(Protocol):
    name: str  # as registered (``registry.REGISTRY``) and reported in ``Answer.answerer``
    model: str  # what ran ("" when no model)
    passages_wanted: int  # how many ranked passages it reads
    leg_depth: int | None  # candidates each search leg fetches for it (None: the search's default)

    def respond(self, retrieved: Retrieved, clock: Clock, result: Answer) -> Response | None:
        """Draft, verify, repair once and settle (``drafting.Drafting``); None when it failed (the
        reason is in ``result.warnings``). Records in ``result`` which answerer and models ran."""
        ...

    def standalone(self, question: str, history: Sequence[Turn]) -> str: ...
