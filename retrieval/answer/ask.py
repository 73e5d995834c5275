"""The answering pipeline: follow-up → standalone question → search → answer → verify → (one repair
pass) → answer with verified citations, or a refusal.

``ask`` never raises. Whatever fails (the index, the embedding model, the answer provider, the
provider's output) ends in a refusal with a plain reason, or, when only the model (Gemini or an
OpenAI-compatible server) failed, in an extractive answer (``answerers.fallback``) whose quotes were
verified like any other. Only verified quotes (the source's own words) ever reach ``Answer.citations``.

This module reads the index and puts the pieces in order; they live beside it: which answerer runs
(``answerers.registry``), what each is shown (its ``request``; ``context``), drafting, verifying, the
repair pass and the answerer's own checks (``drafting``; a model's in ``answerers.model.checks``),
what a refusal says (``refusals``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import ExitStack

from retrieval.answer.answerers import Answerer, AnswererError, Retrieved
from retrieval.answer.answerers.extractive.keyterms import PhraseStats
from retrieval.answer.answerers.followup import standalone_without_model
from retrieval.answer.answerers.registry import build_answerer, choose_answerer
from retrieval.answer.context import SourcePage, page_url
from retrieval.answer.drafting import Clock, join_quotes
from retrieval.answer.premise import examine, premise_note
from retrieval.answer.refusals import index_unavailable, no_support, refusal, untrusted_note
from retrieval.answer.term_stats import statistics
from retrieval.encode.embed import ModelError
from retrieval.models import Answer, NearestPassage, Passage, SearchResult, Turn
from retrieval.search.filters import Scope
from retrieval.settings import Settings, SettingsError
from retrieval.store import pool, replicas
from retrieval.store.placement import PlacementError
from retrieval.store.collections import collection_profile
from retrieval.store.db import DatabaseError

log = logging.getLogger(__name__)

def load_pages(settings: Settings, passages: Sequence[Passage]) -> dict[tuple[str, str], dict[int, SourcePage]]:
    """The stored text, label and how it was read (``ingest.reading``) of every page the passages touch
    and the page after each (where a page's last line may introduce what follows:
    ``retrieval.answer.context.continues``), keyed by (collection, document)."""
    out: dict[tuple[str, str], dict[int, SourcePage]] = {(p.collection, p.document): {} for p in passages}
    if not passages:
        return out
    with pool.connection(settings) as conn:  # one statement for every passage
        rows = conn.execute(
            "SELECT q.collection, q.name, pg.page_no, pg.text, pg.label, pg.read_by, pg.ocr_doubtful "
            "FROM unnest(%s::text[], %s::text[], %s::int[], %s::int[]) AS q(collection, name, first, last) "
            "JOIN documents d ON d.collection = q.collection AND d.name = q.name "
            "JOIN pages pg ON pg.collection = d.collection AND pg.document_id = d.id "
            "AND pg.page_no BETWEEN q.first AND q.last",
            ([p.collection for p in passages], [p.document for p in passages], [p.page for p in passages],
             [p.page_end + 1 for p in passages])).fetchall()
    for r in rows:
        out[(r["collection"], r["name"])][r["page_no"]] = SourcePage(r["text"], r["label"], r["read_by"],
                                                                     tuple(r["ocr_doubtful"] or ()))
    return out


def set_aside_untrusted(settings: Settings, passages: Sequence[Passage], result: Answer) -> list[Passage]:
    """The passages an answerer may see: those flagged at ingest as text addressed to an AI reader
    (``retrieval.text.injection``) are withheld from every answerer (the model prompt included) and listed in
    ``result.untrusted`` with a note, so the reply says the document holds such text."""
    flagged = [p for p in passages if p.untrusted]
    if flagged:
        result.untrusted = [NearestPassage(document=p.document, page=p.page, page_label=p.page_label,
                                           url=page_url(p.document, p.page, p.document_url, settings.ingest.file_base_url))
                            for p in flagged]
        result.warnings.append(untrusted_note(result.untrusted))
    return [p for p in passages if not p.untrusted]


def ask(settings: Settings, question: str, *, history: Sequence[Turn] = (),
        collections: Sequence[str] | None = None, answerer: str | Answerer | None = None,
        search_fn: Callable[..., SearchResult] | None = None, documents: Sequence[str] | None = None) -> Answer:
    """Answer ``question`` from the indexed documents (only ``documents``, by name, when given), or
    refuse. Never raises.

    ``answerer``: a name (``choose_answerer``) or an answerer already built (calibration builds its own)."""
    result = Answer(question=question, refusal=True)
    try:  # on a standby or the primary (retrieval.store.replicas); the answer names it
        return replicas.read(settings, collections, lambda s: _on(s, question, history, collections, answerer, search_fn, documents))
    except PlacementError as exc:
        return refusal(result, str(exc))
    except Exception as exc:  # noqa: BLE001  (the contract: a refusal, never an exception)
        log.exception("ask failed")
        return refusal(result, f"Something went wrong while answering ({type(exc).__name__}); "
                                "no answer is given rather than an unchecked one.")


def _on(settings: Settings, question: str, history: Sequence[Turn], collections: Sequence[str] | None,
        wanted: str | Answerer | None, search_fn: Callable[..., SearchResult] | None,
        documents: Sequence[str] | None = None) -> Answer:
    with ExitStack() as held:
        try:  # one connection for every step of the question (retrieval.store.pool)
            held.enter_context(pool.connection(settings))
        except DatabaseError:  # IndexUnavailable included
            pass  # each step meets the outage itself and the answer says so
        return _ask(settings, question, history, collections, wanted, search_fn, Answer(question=question, refusal=True),
                    documents)


def _ask(settings: Settings, question: str, history: Sequence[Turn], collections: Sequence[str] | None,
         wanted: str | Answerer | None, search_fn: Callable[..., SearchResult] | None, result: Answer,
         documents: Sequence[str] | None = None) -> Answer:
    clock = Clock()
    result.timings_ms = clock.ms
    if not question.strip():
        return refusal(result, "The question is empty.")
    built = None if wanted is None or isinstance(wanted, str) else wanted  # calibration's own answerer
    try:
        name = built.name if built is not None else choose_answerer(settings, wanted)
    except ValueError as exc:
        return refusal(result, str(exc))
    result.answerer = name
    result.models["embedding"] = settings.search.embedding_model
    try:
        with clock.stage("load_answerer"):
            profile = collection_profile(settings, collections)  # the language the collections record
            answerer = built if built is not None else build_answerer(settings, name, profile)
    except (ModelError, AnswererError, SettingsError) as exc:
        return refusal(result, f"The answerer is unavailable: {exc}")

    standalone = question
    if history:
        with clock.stage("rewrite"):
            try:
                standalone = answerer.standalone(question, history)
            except AnswererError as exc:
                result.warnings.append(f"follow-up rewrite failed ({exc}); used the previous question as context")
                standalone = standalone_without_model(question, history)
        result.standalone_question = standalone
    examined = examine(standalone, profile)  # instructions to the bot dropped; "X is N, confirm" asked as "What is X?"
    if examined.changed:
        standalone = result.standalone_question = examined.question

    try:
        with clock.stage("search"):
            if search_fn is None:
                from retrieval.search.search import search as search_fn  # noqa: PLC0415
            wanted_k = answerer.passages_wanted
            found = search_fn(settings, standalone, k=wanted_k, collections=collections, documents=documents,
                              depth=answerer.leg_depth)
            flagged = sum(1 for p in found.results if p.untrusted)
            if flagged:  # text addressed to AI readers is set aside below: it must not take the answerer's places
                found = search_fn(settings, standalone, k=wanted_k + flagged, collections=collections,
                                  documents=documents, depth=answerer.leg_depth)
        result.reranker = found.reranker
        result.named_documents = list(found.named_documents)
        result.models["reranker"] = found.reranker
        for stage, ms in found.timings_ms.items():
            clock.ms[f"search.{stage}"] = ms
        with clock.stage("load_pages"):
            pages = load_pages(settings, found.results)
        trusted = set_aside_untrusted(settings, found.results, result)[:wanted_k]
        if not trusted:
            where = f" in {', '.join(collections)}" if collections else ""
            return refusal(result, no_support(f"no passages were found{where}"))

        def counts(phrases: Sequence[str], words: Sequence[str]) -> PhraseStats:  # the extractive answerer's
            with clock.stage("statistics"), pool.connection(settings) as conn:
                return statistics(conn, phrases, words, Scope.of(collections, documents))

        response = answerer.respond(Retrieved(standalone, trusted, pages, counts), clock, result)
    except DatabaseError as exc:
        return refusal(result, index_unavailable(question, exc).reason)
    except ModelError as exc:
        return refusal(result, f"The search model is unavailable: {exc}")
    if response is None:
        return refusal(result, no_support(result.warnings[-1] if result.warnings else ""))
    shown = response.shown
    if response.draft.refusal:
        return refusal(result, no_support(response.draft.reason), shown)
    citations = response.quotes
    if not citations:
        return refusal(result, no_support("none of the quotes offered could be verified in the retrieved text"),
                       shown)
    result.refusal = False
    result.answer = response.draft.answer.strip() or join_quotes(citations)
    result.citations = citations
    result.reason = ""
    note = premise_note(examined, [c.quote for c in citations])
    if note:
        result.warnings.append(note)
    return result
