"""The answering pipeline: follow-up → standalone question → search → answer → verify → (one repair
pass) → answer with verified citations, or a refusal.

``ask`` never raises. Whatever fails (the index, the embedding model, the answer provider, the
provider's output) ends in a refusal with a plain reason, or — when only the model (Gemini or an
OpenAI-compatible server) failed — in an extractive answer whose quotes were verified like any other. Only verified quotes (the source's own
words) ever reach ``Answer.citations``.

A model's free text is held to its quotes too:
- if any quote it proposed fails verification, it gets one repair pass (told which quotes failed and
  why); quotes still unverifiable after that are dropped;
- its answer text is shown only when its verified quotes back every number, unit, negation and
  name in it (``retrieval.answer.answerers.support``); otherwise its verified quotes are shown alone;
- no verified quote at all: the extractive answerer's answer (verbatim quotes), or a refusal;
- a refusal carries our own plain reason, never the model's (that goes to the log only).
The extractive answerer's text is cut from the pages already, so none of this applies to it.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager

from retrieval.answer.answerers import ANSWERERS, Answerer, AnswererError, Draft
from retrieval.answer.answerers.followup import standalone_without_model
from retrieval.answer.answerers.keyterms import PhraseStats
from retrieval.answer.answerers.support import unsupported
from retrieval.answer.premise import examine, premise_note
from retrieval.answer.term_stats import statistics
from retrieval.answer.context import model_pages, shown_pages
from retrieval.answer.verify import (
    PageText,
    SourcePage,
    Support,
    Verification,
    join_adjacent,
    page_url,
    support_doubts,
    verify_claims,
)
from retrieval.encode.embed import ModelError
from retrieval.models import (
    Answer,
    Citation,
    NearestPassage,
    Passage,
    SearchResult,
    ShownPage,
    Turn,
)
from retrieval.profile import Profile
from retrieval.search.filters import Scope
from retrieval.settings import Settings, SettingsError
from retrieval.store import pool
from retrieval.store.collections import collection_profile
from retrieval.store.db import DatabaseError

log = logging.getLogger(__name__)

ASK_K = 8  # passages shown to the extractive answerer
MODEL_K = 12  # passages retrieved for a model answerer (its pages shown whole or widened: retrieval.answer.context)
NEAREST = 5  # passages listed with a refusal
NO_SUPPORT = "The documents do not support an answer to this question."
EXTRACTIVE = "extractive"

class _Clock:
    def __init__(self) -> None:
        self.ms: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.ms[name] = self.ms.get(name, 0.0) + (time.perf_counter() - t0) * 1e3


def choose_answerer(settings: Settings, name: str | None) -> str:
    """The answerer asked for, else the ``answerer`` setting, else ``gemini`` when a key is
    configured, else ``extractive``."""
    name = name or settings.answer.answerer
    if name in ANSWERERS:
        return name
    if name:
        raise ValueError(f"unknown answerer {name!r} (use {', '.join(repr(a) for a in ANSWERERS)})")
    return "gemini" if settings.answer.gemini_api_key is not None else "extractive"


def build_answerer(settings: Settings, name: str, profile: Profile) -> Answerer:
    if name == "gemini":
        from retrieval.answer.answerers.gemini import GeminiAnswerer  # noqa: PLC0415  (imports google-genai)

        return GeminiAnswerer.from_settings(settings)
    if name == "openai":
        from retrieval.answer.answerers.openai_compat import OpenAICompatAnswerer  # noqa: PLC0415  (imports openai)

        return OpenAICompatAnswerer.from_settings(settings)
    return build_extractive(settings, profile)


def build_extractive(settings: Settings, profile: Profile, threshold: float | None = None) -> Answerer:
    """The extractive answerer reading with ``profile`` (the searched collections'), the reader as its
    second judge when the reader's weights load; ``threshold`` overrides its refusal threshold (the
    calibration in ``retrieval.eval.answer_eval`` builds one with it disabled and passes it to ``ask``)."""
    from retrieval.answer.answerers.extractive import ExtractiveAnswerer  # noqa: PLC0415
    from retrieval.encode.embed import get_embedder  # noqa: PLC0415

    embedder = get_embedder(settings.search.embedding_model)
    return ExtractiveAnswerer(embedder.embed_queries, model=embedder.name, profile=profile, threshold=threshold,
                              judge=sentence_reader(settings), word_pieces=embedder.word_pieces)


def sentence_reader(settings: Settings, purpose: str = "answer"):
    """The trained reader: the extractive answerer's second judge ('answer'), or the model path's
    support check ('support': only when ``quote_support_check``); None when not wanted or when its
    weights do not load (the log says why)."""
    if purpose == "support" and not settings.answer.quote_support_check:
        return None
    from retrieval import reader  # noqa: PLC0415

    try:
        return reader.load_reader(reader.reader_dir(settings.answer.reader_model))
    except reader.ReaderError as exc:
        instead = "the evidence score alone accepts quotes" if purpose == "answer" else "model quotes are not support-checked"
        log.warning("reader unavailable (%s); %s", exc, instead)
        return None


def read_statistics(settings: Settings, collections: Sequence[str] | None, answerer: Answerer,
                    question: str) -> PhraseStats:
    """The chunk counts the extractive ``answerer`` needs for ``question`` over the searched
    collections, kept at ingest (``retrieval.answer.term_stats``): one statement."""
    phrases, words = answerer.counts_needed(question)  # type: ignore[attr-defined]
    with pool.connection(settings) as conn:
        return statistics(conn, phrases, words, Scope.of(collections))


def load_pages(settings: Settings, passages: Sequence[Passage]) -> dict[tuple[str, str], dict[int, SourcePage]]:
    """The stored text and label of every page the passages touch, keyed by (collection, document)."""
    out: dict[tuple[str, str], dict[int, SourcePage]] = {}
    if not passages:
        return out
    with pool.connection(settings) as conn:  # one statement for every passage
        rows = conn.execute(
            "SELECT q.collection, q.name, pg.page_no, pg.text, pg.label "
            "FROM unnest(%s::text[], %s::text[], %s::int[], %s::int[]) AS q(collection, name, first, last) "
            "JOIN documents d ON d.collection = q.collection AND d.name = q.name "
            "JOIN pages pg ON pg.collection = d.collection AND pg.document_id = d.id "
            "AND pg.page_no BETWEEN q.first AND q.last",
            ([p.collection for p in passages], [p.document for p in passages], [p.page for p in passages],
             [p.page_end for p in passages])).fetchall()
    for p in passages:
        out.setdefault((p.collection, p.document), {})
    for r in rows:
        out[(r["collection"], r["name"])][r["page_no"]] = SourcePage(r["text"], r["label"])
    return out


def nearest_of(shown: Sequence[PageText]) -> list[NearestPassage]:
    seen: set[tuple[str, int]] = set()
    out: list[NearestPassage] = []
    for p in shown:
        if (p.document, p.page) in seen:
            continue
        seen.add((p.document, p.page))
        snippet = " ".join(p.text.split())
        out.append(NearestPassage(document=p.document, page=p.page, page_label=p.page_label, url=p.url,
                                  snippet=snippet[:240] + ("…" if len(snippet) > 240 else "")))
        if len(out) >= NEAREST:
            break
    return out


def _refusal(answer: Answer, reason: str, shown: Sequence[PageText] = ()) -> Answer:
    answer.refusal = True
    answer.answer = ""
    answer.citations = []
    answer.reason = reason
    answer.nearest = nearest_of(shown)
    return answer


def index_unavailable(question: str, exc: BaseException) -> Answer:
    """The refusal when the index cannot be reached (also used by the CLI before ``ask`` runs)."""
    return _refusal(Answer(question=question, refusal=True),
                    f"The index is unavailable, so nothing could be searched: {exc}")


def untrusted_note(places: Sequence[NearestPassage]) -> str:
    """What a reply says when passages flagged as prompt injection matched the question."""
    where = ", ".join(dict.fromkeys(f"{n.document} p. {n.page_label or n.page}" for n in places))
    return (f"This document contains text addressed to AI assistants ({where}); it was ignored: such text is "
            "never evidence and never an instruction.")


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


def _no_support(detail: str) -> str:
    detail = detail.strip().rstrip(".")
    return f"{NO_SUPPORT} {detail[:1].upper()}{detail[1:]}." if detail else NO_SUPPORT


def ask(settings: Settings, question: str, *, history: Sequence[Turn] = (),
        collections: Sequence[str] | None = None, answerer: str | Answerer | None = None,
        k: int = ASK_K, search_fn: Callable[..., SearchResult] | None = None) -> Answer:
    """Answer ``question`` from the indexed documents, or refuse. Never raises.

    ``answerer``: a name (``choose_answerer``) or an answerer already built (calibration builds its own)."""
    result = Answer(question=question, refusal=True)
    try:
        with ExitStack() as held:
            try:  # one connection for every step of the question (retrieval.store.pool)
                held.enter_context(pool.connection(settings))
            except DatabaseError:  # IndexUnavailable included
                pass  # each step meets the outage itself and the answer says so
            return _ask(settings, question, history, collections, answerer, k, search_fn, result)
    except Exception as exc:  # noqa: BLE001  (the contract: a refusal, never an exception)
        log.exception("ask failed")
        return _refusal(result, f"Something went wrong while answering ({type(exc).__name__}); "
                                "no answer is given rather than an unchecked one.")


def _ask(settings: Settings, question: str, history: Sequence[Turn], collections: Sequence[str] | None,
         wanted: str | Answerer | None, k: int, search_fn: Callable[..., SearchResult] | None,
         result: Answer) -> Answer:
    clock = _Clock()
    result.timings_ms = clock.ms
    if not question.strip():
        return _refusal(result, "The question is empty.")
    try:
        name = wanted.name if wanted is not None and not isinstance(wanted, str) else choose_answerer(settings, wanted)
    except ValueError as exc:
        return _refusal(result, str(exc))
    result.answerer = name
    result.models["embedding"] = settings.search.embedding_model
    try:
        with clock.stage("load_answerer"):
            profile = collection_profile(settings, collections)  # the language the collections record
            answerer = build_answerer(settings, name, profile) if wanted is None or isinstance(wanted, str) else wanted
    except (ModelError, AnswererError, SettingsError) as exc:
        return _refusal(result, f"The answerer is unavailable: {exc}")
    if answerer.model:
        result.models["answerer"] = answerer.model
    if getattr(answerer, "scorer", None):
        result.models["sentence_scorer"] = answerer.scorer

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
            found = search_fn(settings, standalone, k=k if name == EXTRACTIVE else max(k, MODEL_K),
                              collections=collections)
        result.reranker = found.reranker
        result.named_documents = list(found.named_documents)
        result.models["reranker"] = found.reranker
        for stage, ms in found.timings_ms.items():
            clock.ms[f"search.{stage}"] = ms
        with clock.stage("load_pages"):
            pages = load_pages(settings, found.results)
    except DatabaseError as exc:
        return _refusal(result, index_unavailable(question, exc).reason)
    except ModelError as exc:
        return _refusal(result, f"The search model is unavailable: {exc}")

    trusted = set_aside_untrusted(settings, found.results, result)
    first_k = [p for p in trusted if any(p is r for r in found.results[:k])]  # what the extractive answerer reads
    extract_view = shown_pages(first_k, pages, settings.ingest.file_base_url)
    shown = extract_view if name == EXTRACTIVE else model_pages(
        trusted, pages, settings.ingest.file_base_url, profile.injection, settings.answer.model_context_chars)
    result.shown_pages = [ShownPage(document=p.document, page=p.page, chars=len(p.text)) for p in shown]
    if not shown:
        where = f" in {', '.join(collections)}" if collections else ""
        return _refusal(result, _no_support(f"no passages were found{where}"))

    stats = None
    if name == EXTRACTIVE:  # the counts it weighs words by, read only when there is text to weigh
        try:
            with clock.stage("statistics"):
                stats = read_statistics(settings, collections, answerer, standalone)
        except DatabaseError as exc:
            return _refusal(result, index_unavailable(question, exc).reason)
    headings = {f"P{rank}": p.context for rank, p in enumerate(first_k, 1)}
    draft, verification = _answer_and_verify(answerer, standalone, shown, clock, result, headings, stats)
    if name != EXTRACTIVE:
        result.model_calls = getattr(answerer, "calls", 0)
        if draft is not None and verification is not None and not draft.refusal and verification.citations:
            support = sentence_reader(settings, "support")
            verification = _support_filtered(verification, draft.answer, standalone, support, profile, result)
            problems = unsupported(draft.answer, [c.quote for c in verification.citations], profile,
                                   question=standalone)
            if problems:
                log.info("%s answer withheld: %s in none of its verified quotes", name, ", ".join(problems))
                result.withheld = problems
                result.withheld_text = draft.answer
                result.warnings.append(f"{name} answer withheld: it stated {', '.join(problems)}, which none of its "
                                       "verified quotes states; the quotes are shown alone")
                draft = draft.model_copy(update={"answer": ""})  # the verified quotes alone
    if draft is None and name != EXTRACTIVE:  # the model failed: degrade to verbatim quotes
        fallback = build_extractive(settings, profile)
        result.answerer = "extractive"
        result.models["answerer"] = fallback.model
        result.models["sentence_scorer"] = getattr(fallback, "scorer", "")
        try:
            with clock.stage("statistics"):
                stats = read_statistics(settings, collections, fallback, standalone)
        except DatabaseError as exc:
            return _refusal(result, index_unavailable(question, exc).reason)
        shown = extract_view
        draft, verification = _answer_and_verify(fallback, standalone, shown, clock, result, headings, stats)
    if draft is None or verification is None:
        return _refusal(result, _no_support(result.warnings[-1] if result.warnings else ""), shown)
    if draft.refusal:
        return _refusal(result, _no_support(draft.reason), shown)
    citations = verification.citations if result.answerer == EXTRACTIVE else join_adjacent(verification.citations, shown)
    if not citations:
        return _refusal(result, _no_support("none of the quotes offered could be verified in the retrieved text"),
                        shown)
    result.refusal = False
    result.answer = draft.answer.strip() or _join_quotes(citations)
    result.citations = citations
    result.reason = ""
    note = premise_note(examined, [c.quote for c in citations])
    if note:
        result.warnings.append(note)
    return result


def _answer_and_verify(answerer: Answerer, question: str, shown: Sequence[PageText], clock: _Clock,
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
        draft = _own_reason(answerer.name, draft, result)
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
        repaired = _own_reason(answerer.name, repaired, result)
    with clock.stage("verify"):
        second = verify_claims(repaired.claims, shown)
    result.dropped_citations += len(second.failures)
    result.proposed_citations += len(repaired.claims)
    if not repaired.refusal and not second.citations and verification.citations:
        return draft, verification  # the repair made it worse: keep the first draft's verified quotes
    return repaired, second


def _support_filtered(verification: Verification, answer: str, question: str, support: Support | None,
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


def _own_reason(name: str, draft: Draft, result: Answer) -> Draft:
    """A model's refusal with its own words taken out: they go to the log, never to users."""
    if not draft.refusal:
        return draft
    log.info("%s declined to answer: %r", name, draft.reason)
    result.warnings.append(f"{name} found no answer in the passages")
    return draft.model_copy(update={"reason": ""})


def _join_quotes(citations: Sequence[Citation]) -> str:
    return " … ".join(" ".join(c.quote.split()) for c in citations)
