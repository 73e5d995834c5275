"""Whether a model's free answer text says only what its verified quotes say (pure functions).

Quotes are checked word for word (``retrieval.answer.verify``); a model's own sentence cannot be, so it is
held to its quotes on what most often turns a right-looking answer wrong:

- **numbers**: every number in the text ("1,000", "3.5", "10-12") occurs, as a whole, in a quote;
- **units**: every unit the text puts after a number ("45 minutes", "3 statute miles", "8 bytes",
  unit words from the collection's ``Profile``) occurs in a quote;
- **negations**: a text that negates ("not", "never", "no", "cannot", ...; the profile's list) is
  backed by a quote that negates too, so "is not required" cannot stand on "is required";
- **names**: every name or designator the text uses (capitalised words other than a sentence's
  first, words with digits such as "172S"; ``evidence.specific_terms``) occurs in a quote.

Anything missing is reported; ``retrieval.answer.ask`` then shows the verified quotes alone.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from retrieval.answer.answerers.evidence import specific_terms
from retrieval.profile import DEFAULT_PROFILE, Profile
from retrieval.text.textnorm import normalize

# a number as written: "250", "1,000", "3.5", "10-12" (the dash family is "-" after normalize)
_NUMBER = re.compile(r"\d+(?:[.,-]\d+)*")
_WORD = re.compile(r"[a-z0-9'’]+")


def _has_number(number: str, quotes: str) -> bool:
    return re.search(rf"(?<!\d)(?<!\d[.,]){re.escape(number)}(?!\d)(?![.,]\d)", quotes) is not None


def unquoted_numbers(text: str, quotes: Sequence[str]) -> list[str]:
    """The numbers in ``text`` that occur in none of the quotes, compared after normalisation. A
    number occurs only as a whole: "250" is not in "2,500", "3" not in "3.5"; "10" is in "10-12"."""
    joined = "\n".join(normalize(q) for q in quotes)
    missing: list[str] = []
    for n in _NUMBER.findall(normalize(text)):
        if not _has_number(n, joined) and n not in missing:
            missing.append(n)
    return missing


def _has_words(phrase: str, quotes: str) -> bool:
    return re.search(rf"(?<![a-z0-9]){re.escape(phrase)}(?![a-z0-9])", quotes) is not None


def stated_units(text: str, profile: Profile = DEFAULT_PROFILE) -> list[str]:
    """The unit words the text puts right after a number ("45 minutes" → "minutes"), longest first."""
    norm = normalize(text)
    out: list[str] = []
    for m in _NUMBER.finditer(norm):
        rest = norm[m.end():].lstrip()
        best = ""
        for words in profile.units.values():
            for unit in words:
                if len(unit) > len(best) and re.match(rf"{re.escape(unit)}(?![a-z0-9])", rest):
                    best = unit
        if best and best not in out:
            out.append(best)
    return out


def negates(text: str, profile: Profile = DEFAULT_PROFILE) -> bool:
    words = _WORD.findall(normalize(text).replace("’", "'"))
    return any(w in profile.negations or w.endswith("n't") for w in words)


def unsupported(text: str, quotes: Sequence[str], profile: Profile = DEFAULT_PROFILE) -> list[str]:
    """What the answer text states that none of its verified quotes does, in plain words (empty
    when everything is backed): "number 900", "unit “hours”", "a negation", "name “Cessna”"."""
    joined = "\n".join(normalize(q) for q in quotes)
    problems = [f"number {n}" for n in unquoted_numbers(text, quotes)]
    undotted = joined.replace(".", "")  # "m.p.h." is "mph"
    problems += [f"unit “{u}”" for u in stated_units(text, profile)
                 if not _has_words(u, joined) and not _has_words(u.replace(".", ""), undotted)]
    if negates(text, profile) and not any(negates(q, profile) for q in quotes):
        problems.append("a negation")
    problems += [f"name “{t}”" for t in specific_terms(text, profile) if not _has_words(normalize(t), joined)]
    return problems
