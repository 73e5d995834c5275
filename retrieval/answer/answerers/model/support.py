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

The same statement in other spacing or spelling is not a false alarm (measured on a stand-in model's
recorded replies, ``results/model_path/``): "27 °C" / "27°C", an abbreviation a quote spells out or
the reverse, the "No" opening the answer to a yes/no question, and negations restating a question
about what is prohibited (each where ``unsupported`` checks it).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from retrieval.answer.answerers.extractive.evidence import specific_terms
from retrieval.profile import DEFAULT_PROFILE, Profile
from retrieval.text.textnorm import normalize

# a number as written: "250", "1,000", "3.5", "10-12" (the dash family is "-" after normalize)
_NUMBER = re.compile(r"\d+(?:[.,-]\d+)*")
_WORD = re.compile(r"[a-z0-9'’]+")
# the space between a number and what it measures ("4 gb", "27 °c") is spelling, not content
_NUMBER_SPACE = re.compile(r"(?<=\d)[ \t]+(?=[^\W\d_]|[°%])")
_ACRONYM = re.compile(r"\b[A-Z][A-Z0-9]*[A-Z]s?\b")  # VFR, ATC, PDFs
_CAPITALISED_RUN = re.compile(r"\b(?:[A-Z][a-z]+(?:\s+(?:of|and|for|the|to|in|on)\s+|\s+)){1,7}[A-Z][a-z]+\b")
_LINKING = frozenset({"of", "and", "for", "the", "to", "in", "on", "a"})
_YES_NO_OPENERS = frozenset({"is", "are", "was", "were", "do", "does", "did", "can", "could", "may", "might",
                             "must", "should", "will", "would", "has", "have", "had", "shall"})


def _has_number(number: str, quotes: str) -> bool:
    return re.search(rf"(?<!\d)(?<!\d[.,]){re.escape(number)}(?!\d)(?![.,]\d)", quotes) is not None


def unquoted_numbers(text: str, quotes: Sequence[str]) -> list[str]:
    """The numbers in ``text`` that occur in none of the quotes, compared after normalisation. A
    number occurs only as a whole: "250" is not in "2,500", "3" not in "3.5"; "10" is in "10-12"."""
    joined = "\n".join(normalize(q) for q in quotes)
    return list(dict.fromkeys(n for n in _NUMBER.findall(normalize(text)) if not _has_number(n, joined)))


def compact(text: str) -> str:
    """Normalised text without the space between a number and its unit ("4 gb" → "4gb")."""
    return _NUMBER_SPACE.sub("", normalize(text))


def _whole(phrase: str, text: str, *, unit_glue: bool) -> bool:
    if not phrase:
        return False
    before = r"(?<![a-z])" if unit_glue and not phrase[0].isdigit() else r"(?<![a-z0-9])"
    after = r"(?![a-z0-9])" if phrase[-1].isalnum() else ""
    return re.search(rf"{before}{re.escape(phrase)}{after}", text) is not None


def _has_words(phrase: str, quotes: str) -> bool:
    """``phrase`` occurs in ``quotes`` as whole words, as written or with a number and its unit
    written together ("4 GB" in "4GB", "GB" after "4")."""
    norm = normalize(phrase)
    return _whole(norm, normalize(quotes), unit_glue=False) or _whole(compact(norm), compact(quotes), unit_glue=True)


def _initials(words: Sequence[str]) -> tuple[str, str]:
    """The initials of ``words``, with and without the linking words ("flight of rules" → "for", "fr")."""
    return "".join(w[0] for w in words), "".join(w[0] for w in words if w not in _LINKING)


def spells_out(acronym: str, quotes: str) -> bool:
    """Some run of consecutive words of ``quotes`` has ``acronym``'s letters as initials ("VFR" and
    "visual flight rules"), with or without the linking words ("of", "and", ...) among them."""
    letters = acronym.lower().removesuffix("s") if len(acronym) > 2 else acronym.lower()
    words = re.findall(r"[a-z]+", normalize(quotes))
    n = len(letters)
    return any(letters in _initials(words[i:j]) and words[i][0] == letters[0] and words[j - 1][0] == letters[-1]
               for i in range(len(words)) for j in range(i + n, min(len(words), i + 2 * n) + 1))


def _abbreviated(text: str, quotes: str) -> set[str]:
    """Names in ``text`` that a quote states in other form: an acronym it spells out, or capitalised
    words it abbreviates ("Air Traffic Control" when a quote says "ATC"); lower-cased, as
    ``specific_terms`` gives them."""
    out = {a.lower() for a in _ACRONYM.findall(text) if spells_out(a, quotes)}
    for m in _CAPITALISED_RUN.finditer(text):
        run = m.group(0).lower().split()
        for i in range(len(run)):
            for j in range(i + 2, len(run) + 1):
                words = run[i:j]
                if words[0] in _LINKING or words[-1] in _LINKING:
                    continue
                if any(_has_words(form, quotes) for form in _initials(words) if len(form) >= 2):
                    out.update(words)
    return out


def yes_no(question: str) -> bool:
    """The question asks for a yes or a no ("Is a transponder required ...?")."""
    first = _WORD.findall(normalize(question)[:40])
    return bool(first) and first[0] in _YES_NO_OPENERS


def _without_yes_no(text: str) -> str:
    """``text`` without the "Yes"/"No" that opens the answer to a yes/no question."""
    return re.sub(r"\A\s*(?:yes|no)\b[\s,.;:—-]*", "", text, flags=re.IGNORECASE)


def stated_units(text: str, profile: Profile = DEFAULT_PROFILE) -> list[str]:
    """The unit words the text puts right after a number ("45 minutes" → "minutes"), longest first."""
    norm = normalize(text)
    out: dict[str, None] = {}
    for m in _NUMBER.finditer(norm):
        rest = norm[m.end():].lstrip()
        stated = [u for words in profile.units.values() for u in words if re.match(rf"{re.escape(u)}(?![a-z0-9])", rest)]
        if stated:
            out.setdefault(max(stated, key=len))
    return list(out)


def negates(text: str, profile: Profile = DEFAULT_PROFILE) -> bool:
    words = _WORD.findall(normalize(text).replace("’", "'"))
    return any(w in profile.negations or w.endswith("n't") for w in words)


def unsupported(text: str, quotes: Sequence[str], profile: Profile = DEFAULT_PROFILE, *,
                question: str = "") -> list[str]:
    """What the answer text states that none of its verified quotes does, in plain words (empty
    when everything is backed): "number 900", "unit “hours”", "a negation", "name “Cessna”".
    ``question``: what was asked, so the "No" answering a yes/no question is not taken for a claim."""
    joined = "\n".join(normalize(q) for q in quotes)
    problems = [f"number {n}" for n in unquoted_numbers(text, quotes)]
    undotted = joined.replace(".", "")  # "m.p.h." is "mph"
    problems += [f"unit “{u}”" for u in stated_units(text, profile)
                 if not _has_words(u, joined) and not _has_words(u.replace(".", ""), undotted)]
    asks_yes_no = bool(question) and yes_no(question)
    claim = _without_yes_no(text) if asks_yes_no else text
    # a question about what is prohibited or not done ("Where is aerobatic flight prohibited?") is
    # answered in negations that restate it; a yes/no question's own negation backs nothing
    restated = bool(question) and not asks_yes_no and negates(question, profile)
    if negates(claim, profile) and not restated and not any(negates(q, profile) for q in quotes):
        problems.append("a negation")
    spelled = _abbreviated(text, joined)
    problems += [f"name “{t}”" for t in specific_terms(text, profile)
                 if t not in spelled and not _has_words(normalize(t), joined)]
    return problems
