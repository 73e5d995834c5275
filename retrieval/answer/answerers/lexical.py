"""Content words of questions and sentences (pure functions), for lexical overlap and follow-ups.
Stopwords come from the collection's ``retrieval.profile.Profile``."""

from __future__ import annotations

import re

from retrieval.profile import DEFAULT_PROFILE, Profile
from retrieval.text.textnorm import normalize

TOKEN = re.compile(r"[a-z0-9]+(?:[.,][0-9]+)*")


def stem(word: str) -> str:
    """A deliberately light stemmer: plural and common verb endings only ("checked" → "check",
    "batteries" → "battery"); short words and words like "speed", "class" are left alone."""
    if len(word) <= 4 or not word.isalpha():
        return word
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith("ing") and len(word) > 5:
        return word[:-3]
    if word.endswith("ed") and not word.endswith("eed") and len(word) > 5:
        return word[:-2]
    if word.endswith(("sses", "xes", "zes", "ches", "shes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def terms_with_words(text: str, profile: Profile = DEFAULT_PROFILE) -> dict[str, str]:
    """Content terms (stem → the word as written) of a question, in order of appearance."""
    out: dict[str, str] = {}
    for t in TOKEN.findall(normalize(text)):
        if (t not in profile.stopwords and len(t) > 1) or t.isdigit():
            out.setdefault(stem(t), t)
    return out


def content_terms(text: str, profile: Profile = DEFAULT_PROFILE) -> list[str]:
    """Stemmed content words (stopwords dropped; numbers kept as written, e.g. "10,000")."""
    return [stem(t) for t in TOKEN.findall(normalize(text))
            if t not in profile.stopwords and len(t) > 1 or t.isdigit()]


def joined_pairs(text: str) -> set[str]:
    """Each two neighbouring words written as one ("never exceed" → "neverexceed"), stemmed: a question
    that writes a compound with a hyphen ("never-exceed", normalised to one word) asks about what a
    table row or a sentence writes as two words."""
    tokens = TOKEN.findall(normalize(text))
    return {stem(a + b) for a, b in zip(tokens, tokens[1:]) if a.isalpha() and b.isalpha()}


def coverage(weights: dict[str, float], text_terms: set[str]) -> float:
    """Weighted share of the question's content terms (stem → weight) that occur in the text."""
    total = sum(weights.values())
    if total <= 0:
        return 0.0
    return sum(w for t, w in weights.items() if t in text_terms) / total
