"""Drafting and checking one answer (``retrieval.answer.ask`` calls it): the answerer drafts, every
quote is verified against what it was shown, one repair pass (``answer_and_verify``); then, on the
model path, the optional support check (``support_filtered``). ``ask`` decides what is shown."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from retrieval.answer.answerers import Answerer, AnswererError, Draft
from retrieval.answer.answerers.extractive.keyterms import PhraseStats
from retrieval.answer.answerers.registry import EXTRACTIVE
from retrieval.answer.answerers.support import unsupported
from retrieval.answer.verify import PageText, Support, Verification, support_doubts, verify_claims
from retrieval.models import Answer, Citation, NearestPassage
from retrieval.profile import Profile

log = logging.getLogger(__name__)


class Clock:
    def __init__(self) -> None:
        self.ms: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.ms[name] = self.ms.get(name, 0.0) + (time.perf_counter() - t0) * 1e3


def answer_and_verify(answerer: Answerer, question: str, shown: Sequence[PageText], clock: Clock,
                       result: Answer, headings: dict[str, str] | None = None,
                       stats: PhraseStats | None = None) -> tuple[Draft | None, Verification | None]:
    """Draft, verify, and repair once. (None, None) when the answerer failed.

    A model answerer is repaired when ANY of its quotes failed; the extractive answerer (verbatim by
    construction) only when none survived. After the repair pass the repaired draft is used when at
    least one of its quotes verified, else the first draft when one of its quotes did; failed quotes
    are dropped either way. A model's own refusal reason is logged and replaced by ours (empty: the
    caller says the documents do not support an answer). ``headings`` (section heading by shown
    passage id) and ``stats`` (``read_statistics``) go to the extractive answerer, which scores
    sentences under their headings and weighs words by their rarity."""
    is_model = answerer.name != EXTRACTIVE
    try:
        with clock.stage("answer"):
            if not is_model:
                draft = answerer.answer(question, shown, headings=headings, stats=stats)  # type: ignore[call-arg]
            else:
                draft = answerer.answer(question, shown)
    except AnswererError as exc:
        result.warnings.append(f"{answerer.name} failed: {exc}")
        return None, None
    if is_model:
        draft = own_reason(answerer.name, draft, result)
    result.evidence_score = draft.evidence_score
    result.reader_agreement = draft.agreement
    if draft.best is not None:
        result.best_evidence = NearestPassage(document=draft.best.document, page=draft.best.page,
                                              snippet=" ".join(draft.best.quote.split())[:240])
    with clock.stage("verify"):
        verification = verify_claims(draft.claims, shown)
    result.dropped_citations += len(verification.failures)
    result.proposed_citations += len(draft.claims)
    if draft.refusal:
        return draft, verification
    if not draft.claims:
        return draft.model_copy(update={"refusal": True, "reason": "the answer offered no quote"}), verification
    if not (verification.failures if is_model else not verification.citations):
        return draft, verification
    try:
        with clock.stage("repair"):
            repaired = answerer.repair(question, shown, draft, verification.failures)
    except AnswererError as exc:
        result.warnings.append(f"repair failed: {exc}")
        if verification.citations:
            return draft, verification  # its unverifiable quotes are dropped
        return draft.model_copy(update={"refusal": True, "reason": "its quotes could not be verified"}), verification
    result.repaired = True
    if is_model:
        repaired = own_reason(answerer.name, repaired, result)
    with clock.stage("verify"):
        second = verify_claims(repaired.claims, shown)
    result.dropped_citations += len(second.failures)
    result.proposed_citations += len(repaired.claims)
    if not repaired.refusal and not second.citations and verification.citations:
        return draft, verification  # the repair made it worse: keep the first draft's verified quotes
    return repaired, second


def support_filtered(verification: Verification, answer: str, question: str, support: Support | None,
                      profile: Profile, result: Answer) -> Verification:
    """A model's verified quotes without those the reader doubts (``verify.support_doubts``), only when
    an undoubted one remains and the answer text stays backed by what remains: the check never empties
    an answer, never calls the model again, and never cuts the quote that carries the answer's numbers."""
    doubted = support_doubts(verification.citations, question, support)
    kept = [c for i, c in enumerate(verification.citations) if i not in doubted]
    if not doubted or not kept:
        return verification
    quotes = [c.quote for c in verification.citations]
    if unsupported(answer, [c.quote for c in kept], profile, question=question) and not unsupported(
            answer, quotes, profile, question=question):
        return verification
    result.unsupported_dropped += len(doubted)
    drop = {(c.document, c.page, c.quote) for i, c in enumerate(verification.citations) if i in doubted}
    return Verification([v for v in verification.verdicts if v.citation is None
                         or (v.citation.document, v.citation.page, v.citation.quote) not in drop])


def own_reason(name: str, draft: Draft, result: Answer) -> Draft:
    """A model's refusal with its own words taken out: they go to the log, never to users."""
    if not draft.refusal:
        return draft
    log.info("%s declined to answer: %r", name, draft.reason)
    result.warnings.append(f"{name} found no answer in the passages")
    return draft.model_copy(update={"reason": ""})


def join_quotes(citations: Sequence[Citation]) -> str:
    return " … ".join(" ".join(c.quote.split()) for c in citations)
