"""How the extractive answerer weighs the sentences it could quote (pure functions but the embedding
call): rarity-weighted coverage of the question's terms, the cosine of the question with the sentence
under its heading, the retrieval rank (``Scored.evidence``), the gates a first quote must pass
(``Scored.eligible``), the second judge's agreement and the choice of quotes."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np

from retrieval.answer.answerers.extractive.evidence import expected_answer, satisfies, specific_terms
from retrieval.answer.answerers.extractive.keyterms import KeyTerm, on_topic, passage_terms
from retrieval.answer.answerers.lexical import content_terms, coverage, joined_pairs, terms_with_words
from retrieval.answer.answerers.followup import followup_terms
from retrieval.answer.verify import PageText
from retrieval.profile import DEFAULT_PROFILE, Profile
from retrieval.text.tables import column_headers, under_headers
from retrieval.text.textnorm import normalize
from retrieval.answer.answerers.extractive.quotable import Candidate, candidates

LEX_WEIGHT = 0.75
RANK_PENALTY = 0.02  # per retrieval rank below the first
QUOTE_MARGIN = 0.15  # further quotes (other pages) must score within this of the best
MAX_QUOTES = 3
MIN_COVERAGE = 0.15  # share of the question's (shown) term weight a quote and its heading must carry
NAME_PIECES = 3  # a word the tokenizer cuts into this many pieces is a made-up name (``unfamiliar_words``)
MAX_EMBEDDED = 16  # sentences embedded per question (the rest lose on lexical features already)


class SentenceReader(Protocol):
    """Scores (question, sentence under its heading) pairs: probability the sentence states the answer."""

    name: str

    def score(self, question: str, texts: Sequence[str]) -> np.ndarray: ...

Embed = Callable[[Sequence[str]], np.ndarray]  # texts → L2-normalised rows
DocFreq = Callable[[Sequence[str]], tuple[dict[str, int], int]]  # words → (chunks containing each, chunks)
WordPieces = Callable[[str], int]  # a word → how many pieces the embedding model's tokenizer makes of it


def term_weights(question: str, doc_freq: DocFreq | None, profile: Profile = DEFAULT_PROFILE) -> dict[str, float]:
    """Stemmed question terms → inverse document frequency (uniform without ``doc_freq``)."""
    terms = terms_with_words(question, profile)
    if doc_freq is None:
        return dict.fromkeys(terms, 1.0)
    df, n = doc_freq(list(terms.values()))
    return {t: math.log((n + 1) / (df.get(w, 0) + 0.5)) for t, w in terms.items()}


@dataclass(frozen=True)
class Scored:
    candidate: Candidate
    cos: float  # question vs the section heading + the sentence
    lex: float  # idf-weighted coverage of the question's (shown) terms by the sentence and its heading
    rank: int  # retrieval rank of the passage the sentence came from (1 = best)
    typed: bool  # states the kind of quantity the question asks for (True when it asks for none)
    on_topic: bool = True  # its passage is about the question's key terms (``keyterms.on_topic``)
    about: bool = True  # covers at least MIN_COVERAGE of the question and every name like "Class G" it asks about
    complete: bool = True  # quoted with its neighbours, it does not stop at a lead-in ("... the following:")

    @property
    def eligible(self) -> bool:
        return self.typed and self.on_topic and self.about and self.complete

    @property
    def evidence(self) -> float:
        """The evidence score (see the module docstring)."""
        return self.cos + LEX_WEIGHT * self.lex - RANK_PENALTY * (max(self.rank, 1) - 1)


def passage_rank(passage_id: str) -> int:
    """The retrieval rank in a shown passage id ("P3" → 3); 1 when the id carries none."""
    m = re.fullmatch(r"P(\d+)", passage_id)
    return int(m.group(1)) if m else 1


def topical_passages(shown: Sequence[PageText], headings: Mapping[str, str], terms: Sequence[KeyTerm],
                     profile: Profile = DEFAULT_PROFILE) -> set[str]:
    """The shown passage ids whose text (all its slices) and heading are about ``terms``
    (``keyterms.on_topic``)."""
    texts: dict[str, list[str]] = {}
    documents: dict[str, str] = {}
    for p in shown:
        texts.setdefault(p.passage_id, [headings.get(p.passage_id, "")]).append(p.text)
        documents[p.passage_id] = p.document
    return {pid for pid, parts in texts.items()
            if on_topic(passage_terms("\n\n".join(parts), profile), documents[pid], terms)}


_DESIGNATOR = re.compile(r"\b([A-Za-z]{3,})[ \t]+([A-Z]|[0-9]{1,3})\b(?![.,]?[0-9])")


def designators(question: str, profile: Profile = DEFAULT_PROFILE) -> list[str]:
    """Names made of a word and a letter or short number ("Class G", "Part 61", "Figure 3"),
    normalised. "Class G" and "Class D" differ only in what content terms drop (a single letter),
    so such a name is matched as a phrase."""
    found = (normalize(f"{m.group(1)} {m.group(2)}") for m in _DESIGNATOR.finditer(question)
             if m.group(1).lower() not in profile.stopwords)
    return list(dict.fromkeys(found))


def _has_phrase(norm_text: str, phrase: str) -> bool:
    return re.search(rf"(?<![a-z0-9]){re.escape(phrase)}(?![a-z0-9])", norm_text) is not None


def score_candidates(question: str, shown: Sequence[PageText], embed: Embed,
                     doc_freq: DocFreq | None = None, headings: Mapping[str, str] | None = None,
                     terms_required: Sequence[KeyTerm] = (), profile: Profile = DEFAULT_PROFILE) -> list[Scored]:
    """The quotable sentences of ``shown`` worth embedding, with their features, best first.
    ``headings``: the section heading of each shown passage, by passage id; ``terms_required``: the
    question's key terms, which the passage of an on-topic sentence uses.

    Lexical features come first and are cheap; only the ``MAX_EMBEDDED`` eligible sentences that
    cover most of the question (then by retrieval rank) are embedded."""
    headings = headings or {}
    cands = candidates(shown, headings, profile)
    if not cands:
        return []
    # each candidate's text and heading (whitespace collapsed), the content terms of both, and the
    # question's term weights restricted to those terms
    texts = [" ".join(c.text.split()) for c in cands]
    heads = [" ".join(headings.get(shown[c.slice_index].passage_id, "").split()) for c in cands]
    terms = [set(content_terms(t, profile)) | joined_pairs(t) | set(content_terms(h, profile))
             for t, h in zip(texts, heads, strict=True)]
    weights = shown_weights(term_weights(question, doc_freq, profile), terms)
    expected = expected_answer(question, profile)
    topical = topical_passages(shown, headings, terms_required, profile) if terms_required else set()
    norms = [normalize(f"{h} {t}") for h, t in zip(heads, texts, strict=True)]
    names = [d for d in designators(question, profile) if any(_has_phrase(x, d) for x in norms)]
    # a follow-up's own terms ("and at night?"), where the shown text uses them, must be in the quote
    focus = {t for t in followup_terms(question, profile) if any(t in ts for ts in terms)}
    rows = []  # their cosine is filled in below, for those embedded
    for i, c in enumerate(cands):
        pid = shown[c.slice_index].passage_id
        lex = coverage(weights, terms[i])
        rows.append(Scored(c, 0.0, lex, passage_rank(pid), satisfies(expected, with_units(c, shown), profile),
                           not terms_required or pid in topical,
                           lex >= MIN_COVERAGE and all(_has_phrase(norms[i], d) for d in names)
                           and (not focus or bool(focus & terms[i]))))
    ok = [s for s in rows if s.typed and s.on_topic and s.about]
    keep = sorted(ok or rows, key=lambda s: (-s.lex, s.rank))[:MAX_EMBEDDED]
    vecs = embed([question, *(under_heading(s, shown, headings) for s in keep)])  # one call: latency
    out = [replace(s, cos=float(cos)) for s, cos in zip(keep, vecs[1:] @ vecs[0], strict=True)]
    return sorted(out, key=lambda s: s.evidence, reverse=True)


def with_units(c: Candidate, shown: Sequence[PageText]) -> str:
    """A candidate as read for the kind of quantity it states: a table row with each value followed by
    its column's header ("149 KIAS" for "149" under "KIAS"), other text as it is."""
    page = shown[c.slice_index].text
    return under_headers(c.text, column_headers(page, c.start))


def under_heading(s: Scored, shown: Sequence[PageText], headings: Mapping[str, str]) -> str:
    """A sentence as the encoder and the reader read it: whitespace collapsed, after its section heading."""
    heading = " ".join(headings.get(shown[s.candidate.slice_index].passage_id, "").split())
    text = " ".join(s.candidate.text.split())
    return f"{heading}: {text}" if heading else text


def agreement(question: str, first: Scored, eligible: Sequence[Scored], shown: Sequence[PageText],
              headings: Mapping[str, str], judge: SentenceReader) -> float:
    """The judge's probability for ``first`` when it ranks ``first`` best among ``eligible`` (which
    holds it), else 0.0."""
    probs = judge.score(question, [under_heading(s, shown, headings) for s in eligible])
    at = eligible.index(first)
    return float(probs[at]) if int(np.argmax(probs)) == at else 0.0


def shown_weights(weights: Mapping[str, float], texts_terms: Sequence[set[str]]) -> dict[str, float]:
    """The question's term weights restricted to terms some shown sentence or heading uses: a
    paraphrase's own words ("crowded town") are no evidence either way; the terms the documents do
    use tell one sentence from the next ("at night" vs "during the day")."""
    used = set().union(*texts_terms) if texts_terms else set()
    kept = {t: w for t, w in weights.items() if t in used}
    return kept or dict(weights)


def absent_terms(question: str, doc_freq: DocFreq | None, profile: Profile = DEFAULT_PROFILE,
                 word_pieces: WordPieces | None = None) -> list[str]:
    """The question's specific terms that the collection never uses: names, designators and numbers
    (``specific_terms``), and — given the embedding model's tokenizer as ``word_pieces`` — words its
    general vocabulary does not know either (``unfamiliar_words``: "strsplit", "dplyr", "ggsave").
    A question about a function, package or product the documents never name is not answered by a
    sentence about something else."""
    specific = specific_terms(question, profile)
    if word_pieces is not None:
        specific += [w for w in unfamiliar_words(question, word_pieces, profile) if w not in specific]
    if doc_freq is None or not specific:
        return []
    df, _ = doc_freq(specific)
    return [t for t in specific if df.get(t, 0) == 0]


def unfamiliar_words(question: str, word_pieces: WordPieces, profile: Profile = DEFAULT_PROFILE) -> list[str]:
    """Plain words of the question that the tokenizer splits into ``NAME_PIECES`` or more pieces
    both as written and stemmed ("supposed" is one piece, its stem "suppos" three): made-up names rather than English ("strsplit" → st·rs·pl·it,
    "dplyr", "matplotlib"), where ordinary words, rare ones and inflections included, are one or two
    pieces ("helicopter", "checkride[s]" → check·ride). Only worth anything for words the collection
    never uses (``absent_terms`` checks that); a paraphrase's own English words stay out of it.
    Known limit: long compounds of Latin parts are cut into three pieces too ("autorotation",
    "superimposed"), so a question using one that the documents never use is refused."""
    asked = question.lower().replace("\u2019", "'")
    return [word for term, word in terms_with_words(question, profile).items()
            if word.isalpha() and min(word_pieces(word), word_pieces(term)) >= NAME_PIECES
            and re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", asked)]  # as written, not "single-seat"


def choose_quotes(scored: Sequence[Scored], shown: Sequence[PageText]) -> list[Scored]:
    """The best eligible sentence, plus up to ``MAX_QUOTES - 1`` eligible ones from other pages
    scoring within ``QUOTE_MARGIN`` of it (``scored`` is best first)."""
    chosen: list[Scored] = []
    for s in (s for s in scored if s.eligible):
        if chosen and (len(chosen) >= MAX_QUOTES or s.evidence < chosen[0].evidence - QUOTE_MARGIN):
            break
        if page_of(s, shown) not in {page_of(c, shown) for c in chosen}:
            chosen.append(s)
    return chosen


def page_of(s: Scored, shown: Sequence[PageText]) -> tuple[str, int]:
    p = shown[s.candidate.slice_index]
    return p.document, p.page
