"""The extractive answerer: the best supporting sentence(s) of the shown pages, verbatim.

No model service is needed. It reads the first ``EXTRACTIVE_PASSAGES`` ranked passages, their page
slices widened to whole sentences (``retrieval.answer.context.shown_pages``); their sentences are the
candidate quotes (``quotable``: headings and contents entries aside, a sentence stopping at a lead-in
continued into what it introduces, a table value kept with its row label). Word lists come from the
collection's ``retrieval.profile.Profile``.

Each candidate gets an evidence score (``scoring.Scored.evidence``: the cosine of the question and
the sentence under its heading, its rarity-weighted coverage of the question's words, the retrieval
rank) and must pass the gates (``Scored.eligible``): the answer type and specific terms a question
asks for (``evidence``), its key terms (``keyterms``), and enough of its words and names.

The best eligible sentence must score at least ``threshold`` (calibrated on the dev set:
``chapterverse_lab.answer_eval.calibrate``), or a second judge (``judge``: the reader of
``retrieval.reader``, scorer 'evidence+reader') must rank the same sentence first with probability
at least ``AGREEMENT_MIN``: two judges built differently that pick the same sentence are right far
more often than either alone at that score. The answer quotes it and up to ``MAX_QUOTES - 1`` more
eligible sentences from other pages (``scoring.choose_quotes``), each with its paragraph neighbours
(``quotable.with_neighbours``: the sentence that matches the question best often only names the
topic, and its neighbour states the answer). The answer text is the best sentence under the
profile's lead naming its page; every other word shown is a verified quote.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from retrieval.answer.answer_view import page_words
from retrieval.answer.answerers import Draft, Request, Retrieved
from retrieval.answer.answerers.extractive.evidence import expected_answer, specific_terms
from retrieval.answer.answerers.extractive.keyterms import KeyTerm, key_term_counts, key_terms
from retrieval.answer.answerers.lexical import terms_with_words
from retrieval.answer.answerers.extractive.quotable import introduces, with_neighbours
from retrieval.answer.answerers.extractive.scoring import (
    Embed,
    Scored,
    SentenceReader,
    WordPieces,
    absent_terms,
    agreement,
    choose_quotes,
    designators,
    score_candidates,
    unfamiliar_words,
)
from retrieval.answer.answerers.followup import standalone_without_model
from retrieval.answer.context import shown_pages
from retrieval.answer.drafting import Drafting
from retrieval.answer.verify import Claim, PageText, Verdict
from retrieval.models import Answer, Turn
from retrieval.profile import DEFAULT_PROFILE, Profile

DEFAULT_THRESHOLD = 1.1253  # `chapterverse eval calibrate` over the probe runs of the two dev sets only (results/threshold_calibration.json)
# The reader (retrieval.reader), a cross-encoder trained here, is the second judge: it accepts a first
# quote below DEFAULT_THRESHOLD when it ranks that sentence first too, with at least this probability.
AGREEMENT_MIN = 0.8472  # the judge's probability for the evidence scorer's first sentence, when it ranks it first too: `eval calibrate` over the two dev sets only (results/agreement/)


def _widened(s: Scored, shown: Sequence[PageText], headings: Mapping[str, str], profile: Profile) -> Scored:
    page = shown[s.candidate.slice_index]
    return replace(s, candidate=with_neighbours(page, s.candidate, heading=headings.get(page.passage_id, ""),
                                                profile=profile))


def _claim(s: Scored, shown: Sequence[PageText]) -> Claim:
    p = shown[s.candidate.slice_index]
    return Claim(p.document, p.page, s.candidate.text)


def lead(best: Scored, shown: Sequence[PageText], more: int, profile: Profile = DEFAULT_PROFILE) -> str:
    """The answer text: a fixed framing naming the page, then the best sentence in the source's words."""
    p = shown[best.candidate.slice_index]
    also = " " + profile.more_quoted.format(n=more, s="s" if more > 1 else "") if more else ""
    where = f"{p.document}, {page_words(p.page, p.page_label)}"
    return f"{profile.answer_lead} ({where}): {' '.join(best.candidate.text.split())}{also}"


def ineligible(question: str, scored: Sequence[Scored], required: Sequence[KeyTerm], profile: Profile) -> str:
    """Why no sentence is eligible, in words: the furthest gate some sentence reached and failed."""
    if any(s.typed and s.on_topic and s.about for s in scored):
        return ("the best retrieved sentences only introduce a list, table or example that the retrieved text "
                "does not show")
    if any(s.typed and s.on_topic for s in scored):
        names = designators(question, profile)
        also = f" and names {', '.join(f'“{n}”' for n in names)}" if names else ""
        return f"no retrieved sentence covers enough of the question's terms{also}"
    if any(s.typed for s in scored):
        return f"no retrieved passage that could answer it is about {', '.join(f'“{t.text}”' for t in required)}"
    expected = expected_answer(question, profile)  # not None: only a quantity question makes sentences ineligible
    what = f"{expected.describe()} (“{expected.cue}”)" if expected else "a quantity"
    return f"the question asks for {what}, and no retrieved sentence states one"


EXTRACTIVE_PASSAGES = 8  # ranked passages it reads


class ExtractiveAnswerer(Drafting):
    name = "extractive"
    passages_wanted = EXTRACTIVE_PASSAGES
    verbatim = True

    def __init__(self, embed: Embed, model: str, threshold: float | None = None,
                 profile: Profile = DEFAULT_PROFILE, word_pieces: WordPieces | None = None,
                 judge: SentenceReader | None = None, file_base_url: str | None = None) -> None:
        """The evidence score picks and accepts the first quote (refusal below ``threshold``, default
        ``DEFAULT_THRESHOLD``); ``judge`` (the reader), when given, accepts a first quote below it when
        it ranks that sentence first too with at least ``AGREEMENT_MIN``. ``file_base_url``: page links
        for documents without a URL of their own."""
        self._embed = embed
        self._file_base_url = file_base_url
        self.judge = judge
        self.scorer = f"evidence+{judge.name}" if judge is not None else "evidence"
        self._word_pieces = word_pieces
        self.profile = profile
        self.model = model
        self.threshold = DEFAULT_THRESHOLD if threshold is None else threshold

    def note(self, result: Answer) -> None:
        super().note(result)
        result.models["sentence_scorer"] = self.scorer

    def request(self, retrieved: Retrieved) -> Request:
        """The first passages' slices widened to whole sentences, their headings by shown id, and the
        counts of ``counts_needed`` (read only when there is text to weigh)."""
        passages = retrieved.passages[:self.passages_wanted]
        shown = shown_pages(passages, retrieved.pages, self._file_base_url)
        stats = retrieved.statistics(*self.counts_needed(retrieved.question)) if shown else None
        return Request(retrieved.question, shown, {f"P{rank}": p.context for rank, p in enumerate(passages, 1)}, stats)

    def counts_needed(self, question: str) -> tuple[list[str], list[str]]:
        """(phrases, words) whose chunk counts ``answer`` uses for ``question``, read all at once
        (``retrieval.answer.term_stats.statistics``, one statement)."""
        phrases, pair_words = key_term_counts(question, self.profile)
        unfamiliar = unfamiliar_words(question, self._word_pieces, self.profile) if self._word_pieces else []
        words = [*terms_with_words(question, self.profile).values(), *specific_terms(question, self.profile),
                 *unfamiliar, *pair_words]
        return phrases, list(dict.fromkeys(words))

    def answer(self, request: Request) -> Draft:
        """The draft for the request's question from its shown page texts, a function of the request:
        ``headings`` (section heading by passage id) and ``stats``, the collection's counts of
        ``counts_needed(question)`` (without them every word weighs the same and no term gate runs)."""
        question, shown, headings, stats = request.question, request.shown, request.headings, request.stats
        doc_freq = stats.doc_freq if stats is not None else None
        required = key_terms(question, stats, self.profile)
        scored = score_candidates(question, shown, self._embed, doc_freq, headings, required, self.profile)
        if not scored:
            return Draft(refusal=True, reason="no quotable text in the retrieved passages")
        # each eligible sentence as it would be quoted (with its neighbours), widened once: one that
        # still stops at a lead-in is not eligible, and the chosen ones are quoted so
        quoted = {s.candidate: _widened(s, shown, headings, self.profile).candidate for s in scored if s.eligible}
        scored = [replace(s, complete=not introduces(quoted[s.candidate].text)) if s.candidate in quoted else s
                  for s in scored]
        chosen = choose_quotes(scored, shown)
        top = chosen[0] if chosen else scored[0]
        best_claim = _claim(top, shown)
        score = chosen[0].evidence if chosen else None
        absent = absent_terms(question, doc_freq, self.profile, self._word_pieces)
        if absent:
            return Draft(refusal=True, evidence_score=score, best=best_claim,
                         reason="the searched documents never mention " + ", ".join(f"“{t}”" for t in absent))
        if not chosen:
            return Draft(refusal=True, best=best_claim, reason=ineligible(question, scored, required, self.profile))
        eligible = [s for s in scored if s.eligible]
        agreed = None if self.judge is None else agreement(question, top, eligible, shown, headings, self.judge)
        if top.evidence < self.threshold and (agreed is None or agreed < AGREEMENT_MIN):
            return Draft(refusal=True, evidence_score=top.evidence, agreement=agreed, best=best_claim,
                         reason="no retrieved sentence states the answer clearly enough to quote it as one")
        chosen = [replace(s, candidate=quoted[s.candidate]) for s in chosen]
        top = chosen[0]
        claims = [_claim(s, shown) for s in chosen]
        return Draft(refusal=False, answer=lead(top, shown, len(chosen) - 1, self.profile), claims=claims,
                     evidence_score=top.evidence, agreement=agreed, best=best_claim)

    def repair(self, request: Request, draft: Draft, failures: Sequence[Verdict]) -> Draft:
        # Its quotes are cut from the shown text, so there is nothing a second attempt would fix.
        return Draft(refusal=True, reason="extractive quotes failed verification", evidence_score=draft.evidence_score)

    def standalone(self, question: str, history: Sequence[Turn]) -> str:
        return standalone_without_model(question, history, self.profile)
