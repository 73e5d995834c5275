"""Drafting and checking one answer, the same for every answerer (``Drafting.respond``): the answerer
says what it is shown and drafts, every quote is verified against exactly that, one repair pass,
then the answerer's own checks (``settle``; the model answerers' is ``support_filtered`` and the
answer-text check). ``retrieval.answer.ask`` retrieves and calls ``respond``."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

from retrieval.answer.answerers import AnswererError, Draft, Request, Response, Retrieved
from retrieval.answer.verify import PageText, Verdict, Verification, verify_claims
from retrieval.models import Answer, Citation, NearestPassage, ShownPage

log = logging.getLogger(__name__)


def best_passage(document: str, page: int, sentence: str, shown: Sequence[PageText]) -> NearestPassage:
    """The answerer's best sentence as a passage to point at: its page's label and link from the shown
    slice it came from, the sentence (the page's own words) as the snippet."""
    at = next((p for p in shown if p.document == document and p.page == page), None)
    return NearestPassage(document=document, page=page, page_label=at.page_label if at else None,
                          url=at.url if at else None, snippet=" ".join(sentence.split())[:240])


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


class Drafting:
    """The steps every answerer shares, in order (``respond``); an answerer supplies ``request``,
    ``answer``, ``repair`` and, when it has checks of its own after verification, ``settle``.

    ``verbatim``: its quotes are cut from the shown text (the extractive answerer), so it is repaired
    only when none of them verified and it has no free text or refusal reason of its own to hold
    back; a model answerer is repaired when ANY quote failed and its refusal reasons are replaced by
    ours (``_own``)."""

    name = ""
    model = ""
    passages_wanted = 0
    leg_depth: int | None = None
    verbatim = False
    calls = 0  # model calls made

    def request(self, retrieved: Retrieved) -> Request:
        raise NotImplementedError

    def answer(self, request: Request) -> Draft:
        raise NotImplementedError

    def repair(self, request: Request, draft: Draft, failures: Sequence[Verdict]) -> Draft:
        raise NotImplementedError

    def settle(self, request: Request, response: Response, result: Answer) -> Response:
        """Its own checks of a verified, non-refusing draft (none by default)."""
        return response

    def note(self, result: Answer) -> None:
        """Record in ``result`` what answers (name and models)."""
        result.answerer = self.name
        result.models["answerer"] = self.model

    def respond(self, retrieved: Retrieved, clock: Clock, result: Answer) -> Response | None:
        self.note(result)
        request = self.request(retrieved)
        result.shown_pages = [ShownPage(document=p.document, page=p.page, chars=len(p.text)) for p in request.shown]
        before = self.calls
        try:
            response = self._drafted(request, clock, result)
        finally:
            result.model_calls += self.calls - before
        if response is not None and not response.draft.refusal and response.verification.citations:
            response = self.settle(request, response, result)
        return response

    def _drafted(self, request: Request, clock: Clock, result: Answer) -> Response | None:
        """Draft, verify, and repair once; None when the answerer failed.

        After the repair pass the repaired draft is used when at least one of its quotes verified,
        else the first draft when one of its quotes did; failed quotes are dropped either way."""
        try:
            with clock.stage("answer"):
                draft = self._own(self.answer(request), result)
        except AnswererError as exc:
            result.warnings.append(f"{self.name} failed: {exc}")
            return None
        result.evidence_score = draft.evidence_score
        result.reader_agreement = draft.agreement
        if draft.best is not None:
            result.best_evidence = best_passage(draft.best.document, draft.best.page, draft.best.quote, request.shown)
        first = Response(draft, self._verified(draft, request, clock, result), request.shown)
        if draft.refusal:
            return first
        if not draft.claims:
            return replace(first, draft=draft.model_copy(update={"refusal": True, "reason": "the answer offered no quote"}))
        failed = not first.verification.citations if self.verbatim else first.verification.failures
        if not failed:
            return first
        try:
            with clock.stage("repair"):
                repaired = self._own(self.repair(request, draft, first.verification.failures), result)
        except AnswererError as exc:
            result.warnings.append(f"repair failed: {exc}")
            if first.verification.citations:
                return first  # its unverifiable quotes are dropped
            return replace(first, draft=draft.model_copy(
                update={"refusal": True, "reason": "its quotes could not be verified"}))
        result.repaired = True
        second = self._verified(repaired, request, clock, result)
        if not repaired.refusal and not second.citations and first.verification.citations:
            return first  # the repair made it worse: keep the first draft's verified quotes
        return Response(repaired, second, request.shown)

    @staticmethod
    def _verified(draft: Draft, request: Request, clock: Clock, result: Answer) -> Verification:
        with clock.stage("verify"):
            verification = verify_claims(draft.claims, request.shown)
        result.dropped_citations += len(verification.failures)
        result.proposed_citations += len(draft.claims)
        return verification

    def _own(self, draft: Draft, result: Answer) -> Draft:
        """A model's refusal with its own words taken out: they go to the log, never to users."""
        if self.verbatim or not draft.refusal:
            return draft
        log.info("%s declined to answer: %r", self.name, draft.reason)
        result.warnings.append(f"{self.name} found no answer in the passages")
        return draft.model_copy(update={"reason": ""})


def join_quotes(citations: Sequence[Citation]) -> str:
    return " … ".join(" ".join(c.quote.split()) for c in citations)
