"""Key terms of a question: the technical phrases an answer must be about (pure functions).

A near-miss question shares many words with the documents but asks about something they do not
cover: "On which frequencies does an emergency locator transmitter broadcast?" retrieves a sentence
about ADS-B equipment "operating on the radio frequency of 1090 MHz". The sentence states a
frequency and reads alike, but it is not about an emergency locator transmitter. What gives it away
is a *term*: two words used together as one name ("locator transmitter", "light-sport",
"supplemental oxygen"). A quote is only evidence when its passage is about the question's terms.

Key terms, each used by the searched collection in at least ``MIN_PHRASE_DF`` chunks:

- a pair of adjacent content words of the question, without digits (numbers in a question are
  conditions the text may write differently), that is
  - hyphenated in the question ("light-sport", "short-field"): a compound by construction, or
  - a collocation, not a chance neighbourhood: its pointwise mutual information over chunks,
    ``log(N * df(ab) / (df(a) * df(b)))``, is at least ``MIN_PMI`` ("locator transmitter"), or
    the rarer word occurs mostly in the phrase (``df(ab) / min(df(a), df(b)) >= MIN_COHESION``:
    "sport pilot", "private pilot"); "required flight" and "pilot holding" are neither;
- an acronym as the question writes it ("NTSB", "ELT"), which a passage uses either as written or
  spelled out ("National Transportation Safety Board": the initials of adjacent words).

A passage is *on topic* when it uses at least half of the key terms (rounded up) in its text or its
section heading, a term counting as used throughout a document that uses it in at least
``PERVASIVE_SHARE`` of its chunks ("practical test" in a practical test standard names the whole
document's subject, so its pages need not repeat it).

Words are split at hyphens, lightly stemmed; stopwords and punctuation other than brackets break a
run, so "first point of intended landing" yields "first point" and "intended landing", and
"14,000 feet (MSL)" still uses "feet MSL".
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from retrieval.answer.answerers.lexical import TOKEN, stem
from retrieval.profile import DEFAULT_PROFILE, Profile
from retrieval.text.textnorm import search_text

MIN_PHRASE_DF = 2
MIN_PMI = 1.0
MIN_COHESION = 0.5
PERVASIVE_SHARE = 0.05

Pair = tuple[str, str]

_BREAK = re.compile(r"[^\sa-z0-9.,'()\[\]-]|[.,](?![0-9])|(?<![a-z0-9])-|-(?![a-z0-9])")


@dataclass(frozen=True)
class PhraseStats:
    """Chunk counts over the searched collection."""

    chunks: int
    phrase_df: Mapping[str, int]  # "a b" → chunks using the words next to each other
    word_df: Mapping[str, int]
    # "a b" → document → share of that document's chunks using the phrase
    share_by_document: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def doc_freq(self, words: Sequence[str]) -> tuple[dict[str, int], int]:
        """How many chunks contain each word, and how many chunks there are. Every word must have been
        read (``ExtractiveAnswerer.counts_needed``): a missing one is a bug, not a zero."""
        missing = [w for w in words if w not in self.word_df]
        if missing:
            raise KeyError(f"no statistics were read for {missing}")
        return {w: self.word_df[w] for w in words}, self.chunks


@dataclass(frozen=True)
class KeyTerm:
    words: tuple[str, ...]  # as written in the question, lower case: a pair, or one acronym
    hyphenated: bool = False
    pervasive_in: frozenset[str] = frozenset()  # documents that use it throughout

    @property
    def text(self) -> str:
        if len(self.words) == 1:
            return self.words[0].upper()
        return ("-" if self.hyphenated else " ").join(self.words)


@dataclass(frozen=True)
class PassageTerms:
    """What ``mentions`` looks for in a text: its stemmed adjacent word pairs, its words, and the
    initials of its runs of 2–6 adjacent words (stopwords included: "pilot in command" is "pic")."""

    pairs: frozenset[Pair]
    words: frozenset[str]
    initials: frozenset[str]


def _runs(text: str, profile: Profile) -> list[list[tuple[str, bool]]]:
    """Runs of two or more adjacent content words, each word with whether a hyphen joins it to the
    previous one; stopwords and punctuation end a run, hyphens and brackets do not."""
    lowered = search_text(text).casefold().replace("\u2019", "'")
    runs: list[list[tuple[str, bool]]] = [[]]
    for segment in _BREAK.split(lowered):
        for m in re.finditer(r"(-?)([^\s-]+)", segment):
            word = m.group(2).strip("'.,()[]")
            if TOKEN.fullmatch(word) and word not in profile.stopwords and (len(word) > 1 or word.isdigit()):
                runs[-1].append((word, bool(m.group(1)) and bool(runs[-1])))
            else:
                runs.append([])
        runs.append([])
    return [run for run in runs if len(run) > 1]


def question_pairs(question: str, profile: Profile = DEFAULT_PROFILE) -> list[tuple[Pair, bool]]:
    """Adjacent content-word pairs of a question without digits (numbers in a question are conditions
    the text may write differently), each with whether it is hyphenated; in order, no repeats."""
    out: dict[Pair, bool] = {}
    for run in _runs(question, profile):
        for (a, _), (b, hyphen) in zip(run, run[1:], strict=False):
            if not any(ch.isdigit() for ch in a + b):
                out.setdefault((a, b), hyphen)
    return list(out.items())


def pmi(phrase_df: int, df_a: int, df_b: int, n: int) -> float:
    """Pointwise mutual information of a phrase over chunks; -inf when it never occurs."""
    if phrase_df <= 0 or df_a <= 0 or df_b <= 0 or n <= 0:
        return -math.inf
    return math.log(n * phrase_df / (df_a * df_b))


_ACRONYM = re.compile(r"\b[A-Z]{2,6}s?\b")
_ROMAN = re.compile(r"[IVXLC]+")


def question_acronyms(question: str) -> list[str]:
    """Acronyms as the question writes them ("NTSB", "ELTs" → "ntsb", "elt"), roman numerals aside."""
    words = (m.group(0).removesuffix("s") for m in _ACRONYM.finditer(question))
    return list(dict.fromkeys(w.lower() for w in words if not _ROMAN.fullmatch(w)))


def key_term_counts(question: str, profile: Profile = DEFAULT_PROFILE) -> tuple[list[str], list[str]]:
    """The phrases and words ``key_terms`` asks the statistics for, so that a caller can read them
    together with other counts in one statement."""
    pairs = question_pairs(question, profile)
    return [*(" ".join(p) for p, _ in pairs), *question_acronyms(question)], sorted({w for p, _ in pairs for w in p})


def key_terms(question: str, stats: PhraseStats | None, profile: Profile = DEFAULT_PROFILE) -> list[KeyTerm]:
    """The question's key terms (see the module docstring); none without collection statistics
    (``stats`` must hold the counts of ``key_term_counts``)."""
    if stats is None:
        return []
    out: list[KeyTerm] = []
    for pair, hyphen in question_pairs(question, profile):
        phrase = " ".join(pair)
        df = stats.phrase_df.get(phrase, 0)
        df_a, df_b = stats.word_df.get(pair[0], 0), stats.word_df.get(pair[1], 0)
        score = pmi(df, df_a, df_b, stats.chunks)
        cohesion = df / min(df_a, df_b) if min(df_a, df_b) > 0 else 0.0
        if df >= MIN_PHRASE_DF and (hyphen or score >= MIN_PMI or cohesion >= MIN_COHESION):
            out.append(KeyTerm(pair, hyphen, _pervasive(stats, phrase)))
    for acronym in question_acronyms(question):
        if stats.phrase_df.get(acronym, 0) >= MIN_PHRASE_DF:
            out.append(KeyTerm((acronym,), pervasive_in=_pervasive(stats, acronym)))
    return out


def _pervasive(stats: PhraseStats, phrase: str) -> frozenset[str]:
    shares = stats.share_by_document.get(phrase, {})
    return frozenset(d for d, share in shares.items() if share >= PERVASIVE_SHARE)


MAX_INITIALS = 6


def passage_terms(text: str, profile: Profile = DEFAULT_PROFILE) -> PassageTerms:
    """The ``PassageTerms`` of a text (a passage and its heading)."""
    pairs = frozenset((stem(a), stem(b)) for run in _runs(text, profile) for (a, _), (b, _) in zip(run, run[1:], strict=False))
    words = re.findall(r"[a-z0-9]+", search_text(text).casefold())
    initials = {"".join(w[0] for w in words[i:i + n]) for n in range(2, MAX_INITIALS + 1)
                for i in range(len(words) - n + 1)}
    return PassageTerms(pairs, frozenset(words), frozenset(initials))


def mentions(passage: PassageTerms, term: KeyTerm) -> bool:
    """Whether a passage uses the term: a pair's two words next to each other; an acronym as a word
    or spelled out."""
    if len(term.words) == 1:
        return term.words[0] in passage.words or term.words[0] in passage.initials
    return (stem(term.words[0]), stem(term.words[1])) in passage.pairs


def on_topic(passage: PassageTerms, document: str, terms: Sequence[KeyTerm]) -> bool:
    """Whether a passage of ``document`` uses at least half of the key terms, rounded up (always,
    when there are none)."""
    used = sum(1 for t in terms if document in t.pervasive_in or mentions(passage, t))
    return used * 2 >= len(terms)
