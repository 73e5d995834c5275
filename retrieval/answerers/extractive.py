"""The extractive answerer: the best supporting sentence(s) of the shown pages, verbatim.

No model service is needed. Every sentence of the shown page slices is a candidate quote. A
candidate's evidence score combines
- ``cos``: bi-encoder cosine similarity of the question and the sentence (the embedding model the
  index already uses), and
- ``lex``: the share of the question's content words (stemmed, stopwords dropped) found in the
  sentence together with the passage it came from, each word weighted by its inverse document
  frequency in the index (a word the index never uses — "Cessna", "squawk" — weighs most, so a
  question about something the documents never mention scores low),
as ``score = cos + LEX_WEIGHT * lex``. The answer is the best sentence, plus a second one when it
scores almost as well. When the best score is below ``threshold`` the evidence is too weak and the
answerer refuses. The threshold is calibrated on the dev set (``chapterverse eval answers``
records every question's best score; see ``retrieval.answer_eval.calibrate``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from retrieval.answerers import Draft
from retrieval.answerers.followup import standalone_without_model
from retrieval.answerers.lexical import content_terms, coverage, terms_with_words
from retrieval.models import Turn
from retrieval.verify import Claim, PageText, Strictness, Verdict, too_short, verify_claim

LEX_WEIGHT = 0.75
DEFAULT_THRESHOLD = 0.93  # `chapterverse eval answers ... --calibrate` on the dev set (results/answer_eval.json)
SECOND_QUOTE_MARGIN = 0.05  # a second sentence is quoted when it scores within this of the best
MAX_SENTENCE_WORDS = 80

_PARA = re.compile(r"\n[ \t]*\n")
_SENT = re.compile(r"(?<=[.;?!])[\"')\]]?\s+(?=[\"'(\[§A-Z0-9])")

Embed = Callable[[Sequence[str]], np.ndarray]  # texts → L2-normalised rows
DocFreq = Callable[[Sequence[str]], tuple[dict[str, int], int]]  # words → (chunks containing each, chunks)


def term_weights(question: str, doc_freq: DocFreq | None) -> dict[str, float]:
    """Stemmed question terms → inverse document frequency (uniform without ``doc_freq``)."""
    terms = terms_with_words(question)
    if doc_freq is None:
        return dict.fromkeys(terms, 1.0)
    df, n = doc_freq(list(terms.values()))
    return {t: math.log((n + 1) / (df.get(w, 0) + 0.5)) for t, w in terms.items()}


@dataclass(frozen=True)
class Candidate:
    slice_index: int  # into the shown PageTexts
    start: int
    end: int
    text: str  # verbatim slice of the page text


@dataclass(frozen=True)
class Scored:
    candidate: Candidate
    cos: float
    lex: float

    @property
    def score(self) -> float:
        return self.cos + LEX_WEIGHT * self.lex


def _spans(text: str, pattern: re.Pattern[str], start: int, end: int) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    pos = start
    for m in pattern.finditer(text, start, end):
        out.append((pos, m.start()))
        pos = m.end()
    out.append((pos, end))
    trimmed = []
    for s, e in out:
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if e > s:
            trimmed.append((s, e))
    return trimmed


def sentences(text: str, strictness: Strictness = Strictness()) -> list[tuple[int, int]]:
    """Sentence spans of a page slice; short pieces are joined to the next so each is quotable,
    over-long ones are cut into word windows."""
    out: list[tuple[int, int]] = []
    for ps, pe in _spans(text, _PARA, 0, len(text)):
        pending: tuple[int, int] | None = None
        for s, e in _spans(text, _SENT, ps, pe):
            if pending is not None:
                s = pending[0]
            if too_short(text[s:e], strictness) or len(text[s:e].split()) < 6:
                pending = (s, e)
                continue
            pending = None
            out.extend(_windows(text, s, e))
        if pending is not None and not too_short(text[pending[0]:pending[1]], strictness):
            out.extend(_windows(text, *pending))
    return out


def _windows(text: str, s: int, e: int) -> list[tuple[int, int]]:
    words = [(m.start() + s, m.end() + s) for m in re.finditer(r"\S+", text[s:e])]
    if len(words) <= MAX_SENTENCE_WORDS:
        return [(s, e)]
    step = MAX_SENTENCE_WORDS // 2
    return [(words[i][0], words[min(i + MAX_SENTENCE_WORDS, len(words)) - 1][1])
            for i in range(0, len(words) - step, step)]


def candidates(shown: Sequence[PageText]) -> list[Candidate]:
    """Every sentence of the shown slices that would pass verification as a quote of its page
    (a sentence can start inside a word the PDF hyphenated across a block break: such is dropped)."""
    out = []
    for i, p in enumerate(shown):
        for s, e in sentences(p.text):
            if verify_claim(Claim(p.document, p.page, p.text[s:e]), [p]).ok:
                out.append(Candidate(i, s, e, p.text[s:e]))
    return out


def score_candidates(question: str, shown: Sequence[PageText], embed: Embed,
                     doc_freq: DocFreq | None = None) -> list[Scored]:
    cands = candidates(shown)
    if not cands:
        return []
    vecs = embed([question] + [" ".join(c.text.split()) for c in cands])
    cos = vecs[1:] @ vecs[0]
    weights = term_weights(question, doc_freq)
    slice_terms = [set(content_terms(p.text)) for p in shown]
    out = []
    for c, sim in zip(cands, cos, strict=True):
        terms = set(content_terms(c.text)) | slice_terms[c.slice_index]
        out.append(Scored(c, float(sim), coverage(weights, terms)))
    return sorted(out, key=lambda s: s.score, reverse=True)


class ExtractiveAnswerer:
    name = "extractive"

    def __init__(self, embed: Embed, model: str, threshold: float = DEFAULT_THRESHOLD,
                 doc_freq: DocFreq | None = None) -> None:
        self._embed = embed
        self._doc_freq = doc_freq
        self.model = model
        self.threshold = threshold

    def answer(self, question: str, shown: Sequence[PageText]) -> Draft:
        scored = score_candidates(question, shown, self._embed, self._doc_freq)
        if not scored:
            return Draft(refusal=True, reason="no quotable text in the retrieved passages", score=None)
        best = scored[0]
        top = shown[best.candidate.slice_index]
        best_claim = Claim(top.document, top.page, best.candidate.text)
        if best.score < self.threshold:
            return Draft(refusal=True, score=best.score, best=best_claim,
                         reason=f"the best supporting sentence is too weak (evidence score {best.score:.2f} "
                                f"< {self.threshold:.2f})")
        chosen = [best]
        for s in scored[1:]:
            if s.score < best.score - SECOND_QUOTE_MARGIN:
                break
            if not any(_overlaps(s.candidate, c.candidate) for c in chosen):
                chosen.append(s)
                break
        claims = [Claim(shown[s.candidate.slice_index].document, shown[s.candidate.slice_index].page,
                        s.candidate.text) for s in chosen]
        answer = " … ".join(" ".join(s.candidate.text.split()) for s in chosen)
        return Draft(refusal=False, answer=answer, claims=claims, score=best.score, best=best_claim)

    def repair(self, question: str, shown: Sequence[PageText], draft: Draft,
               failures: Sequence[Verdict]) -> Draft:
        # Its quotes are cut from the shown text, so there is nothing a second attempt would fix.
        return Draft(refusal=True, reason="extractive quotes failed verification", score=draft.score)

    def standalone(self, question: str, history: Sequence[Turn]) -> str:
        return standalone_without_model(question, history)


def _overlaps(a: Candidate, b: Candidate) -> bool:
    return a.slice_index == b.slice_index and a.start < b.end and b.start < a.end
