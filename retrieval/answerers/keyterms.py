"""Key terms of a question: the technical phrases an answer must be about (pure functions).

A near-miss question shares many words with the documents but asks about something they do not
cover: "On which frequencies does an emergency locator transmitter broadcast?" retrieves a sentence
about ADS-B equipment "operating on the radio frequency of 1090 MHz". The sentence states a
frequency and reads alike, but it is not about an emergency locator transmitter. What gives it away
is a *term*: two words used together as one name ("locator transmitter", "light-sport",
"supplemental oxygen"). A quote is only evidence when its passage is about the question's terms.

A pair of adjacent content words of the question is a key term when the searched collection uses it
as a phrase in at least ``MIN_PHRASE_DF`` chunks, it holds no digits (numbers in a question are
conditions the text may write differently), and either

- the question hyphenates it ("light-sport", "short-field"): a compound by construction, or
- it is a collocation, not a chance neighbourhood: its pointwise mutual information over chunks,
  ``log(N * df(ab) / (df(a) * df(b)))``, is at least ``MIN_PMI`` ("locator transmitter" is;
  "required flight" and "pilot holding" are not).

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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from retrieval.answerers.lexical import STOPWORDS, stem
from retrieval.textnorm import search_text

MIN_PHRASE_DF = 2
MIN_PMI = 1.0
PERVASIVE_SHARE = 0.05

Pair = tuple[str, str]

_WORD = re.compile(r"[a-z0-9]+(?:[.,][0-9]+)*")
_BREAK = re.compile(r"[^\sa-z0-9.,'()\[\]-]|[.,](?![0-9])|(?<![a-z0-9])-|-(?![a-z0-9])")


@dataclass(frozen=True)
class PhraseStats:
    """Chunk counts over the searched collection."""

    chunks: int
    phrase_df: Mapping[str, int]  # "a b" → chunks using the words next to each other
    word_df: Mapping[str, int]
    # "a b" → document → share of that document's chunks using the phrase
    share_by_document: Mapping[str, Mapping[str, float]] = field(default_factory=dict)


# (phrases "a b", words) → their statistics
PhraseFreq = Callable[[Sequence[str], Sequence[str]], PhraseStats]


@dataclass(frozen=True)
class KeyTerm:
    words: Pair  # as written in the question, lower case
    df: int  # chunks using the phrase
    pmi: float
    hyphenated: bool = False
    pervasive_in: frozenset[str] = frozenset()  # documents that use it throughout

    @property
    def text(self) -> str:
        return ("-" if self.hyphenated else " ").join(self.words)


def _runs(text: str, shortest: int = 2) -> list[list[tuple[str, bool]]]:
    """Runs of adjacent content words (at least ``shortest`` long), each word with whether a hyphen
    joins it to the previous one; stopwords and punctuation end a run, hyphens and brackets do not."""
    lowered = search_text(text).casefold().replace("\u2019", "'")
    runs: list[list[tuple[str, bool]]] = []
    for segment in _BREAK.split(lowered):
        current: list[tuple[str, bool]] = []
        for m in re.finditer(r"(-?)([^\s-]+)", segment):
            word = m.group(2).strip("'.,()[]")
            if _WORD.fullmatch(word) and word not in STOPWORDS and (len(word) > 1 or word.isdigit()):
                current.append((word, bool(m.group(1)) and bool(current)))
            else:
                if len(current) >= shortest:
                    runs.append(current)
                current = []
        if len(current) >= shortest:
            runs.append(current)
    return runs


def question_pairs(question: str) -> list[tuple[Pair, bool]]:
    """Adjacent content-word pairs of a question (and whether hyphenated), in order, no repeats."""
    out: list[tuple[Pair, bool]] = []
    seen: set[Pair] = set()
    for run in _runs(question):
        for (a, _), (b, hyphen) in zip(run, run[1:], strict=False):
            if (a, b) not in seen:
                seen.add((a, b))
                out.append(((a, b), hyphen))
    return out


def pmi(phrase_df: int, df_a: int, df_b: int, n: int) -> float:
    """Pointwise mutual information of a phrase over chunks; -inf when it never occurs."""
    if phrase_df <= 0 or df_a <= 0 or df_b <= 0 or n <= 0:
        return -math.inf
    return math.log(n * phrase_df / (df_a * df_b))


def key_terms(question: str, phrase_freq: PhraseFreq | None) -> list[KeyTerm]:
    """The question's key terms (see the module docstring); none without collection statistics."""
    pairs = [(p, h) for p, h in question_pairs(question) if not any(ch.isdigit() for ch in "".join(p))]
    if phrase_freq is None or not pairs:
        return []
    words = sorted({w for p, _ in pairs for w in p})
    stats = phrase_freq([" ".join(p) for p, _ in pairs], words)
    out: list[KeyTerm] = []
    for pair, hyphen in pairs:
        phrase = " ".join(pair)
        df = stats.phrase_df.get(phrase, 0)
        score = pmi(df, stats.word_df.get(pair[0], 0), stats.word_df.get(pair[1], 0), stats.chunks)
        if df >= MIN_PHRASE_DF and (hyphen or score >= MIN_PMI):
            shares = stats.share_by_document.get(phrase, {})
            out.append(KeyTerm(pair, df, score, hyphen,
                               frozenset(d for d, share in shares.items() if share >= PERVASIVE_SHARE)))
    return out


def stemmed_pairs(text: str) -> frozenset[Pair]:
    """Every pair of adjacent content words of a text, stemmed, for ``mentions``."""
    return frozenset((stem(a), stem(b)) for run in _runs(text) for (a, _), (b, _) in zip(run, run[1:], strict=False))


def mentions(pairs: frozenset[Pair], term: KeyTerm) -> bool:
    """Whether a text (as its ``stemmed_pairs``) uses the term: its two words next to each other."""
    return (stem(term.words[0]), stem(term.words[1])) in pairs


def on_topic(pairs: frozenset[Pair], document: str, terms: Sequence[KeyTerm]) -> bool:
    """Whether a passage of ``document`` (its text and heading as ``stemmed_pairs``) uses at least
    half of the key terms, rounded up (always, when there are none)."""
    used = sum(1 for t in terms if document in t.pervasive_in or mentions(pairs, t))
    return used * 2 >= len(terms)
