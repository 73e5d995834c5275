"""The question as it should be answered: instructions to the bot taken out, a stated premise turned
into the question it hides (pure functions).

Users (or text pasted by them) sometimes wrap a question in instructions ("Ignore your rules …") or
state the answer they want confirmed ("the handbook says the top speed is 900 knots, confirm it").
Neither may steer the answer: sentences that read as prompt injection (``retrieval.text.injection``) are
dropped, and a premise "X is N <unit>" is asked as "What is X?", so the document's own value is
found and quoted. When the quotes do not contain the figure the question claimed, the reply says so.
The words these rules look for, and the wording of the question and the note, are the profile's
(``Profile.premise``: "the handbook says", "is", "confirm", "What is {subject}?" in the default
preset; "das Handbuch sagt", "beträgt", "bestätigen", "Was ist {subject}?" in ``german``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from retrieval.profile import DEFAULT_PROFILE, PremiseWords, Profile
from retrieval.text.injection import is_injection

_SENTENCE = re.compile(r"(?<=[.!?…])\s+|\s*;\s*")
_NUMBER = r"\d[\d,]*(?:\.\d+)?"
_VALUE = rf"{_NUMBER}(?:\s*[a-z%°/]+\.?){{0,2}}"  # "900 knots", "180 KIAS", "300 km/h"


def _any(words: Sequence[str]) -> str:
    """An alternation of ``words`` (longest first; a space matches any run of white space)."""
    return "(?:" + "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in sorted(words, key=len, reverse=True)) + ")"


@dataclass(frozen=True)
class _Rules:
    claim: re.Pattern[str]  # "the handbook says (that)", "according to the POH,"
    is_value: re.Pattern[str]  # "the top speed is 900 knots"
    yes_no: re.Pattern[str]  # "Is the top speed 900 knots?"
    tail: re.Pattern[str]  # "…, confirm it", "…, right?"


@lru_cache(maxsize=16)
def _rules(w: PremiseWords) -> _Rules:
    det = _any(w.determiners)
    return _Rules(
        claim=re.compile(
            rf"(?:{det}\s+)?{_any(w.sources)}s?\s+{_any(w.claim_verbs)}[,:]?\s+(?:{_any(w.that)}\s+)?"
            rf"|{_any(w.according_to)}\s+(?:{det}\s+)?\w+\s*,?\s*", re.IGNORECASE),
        is_value=re.compile(rf"^(?P<subject>.+?)\s+{_any(w.copulas)}\s+(?:{_any(w.hedges)}\s+)?(?P<value>{_VALUE})\b",
                            re.IGNORECASE),
        yes_no=re.compile(rf"^{_any(w.question_openers)}\s+(?P<subject>.+?)\s+(?P<value>{_VALUE})\s*\??$",
                          re.IGNORECASE),
        tail=re.compile(rf"(?:[,;:]\s*|\s+)(?:{_any(w.confirm_openers)}\s+)*{_any(w.confirm_verbs)}\b.*$"
                        rf"|[,;:]?\s+{_any(w.confirm_tags)}\s*[?.!]*$", re.IGNORECASE))


@dataclass(frozen=True)
class Examined:
    question: str  # what to search for and answer
    dropped: tuple[str, ...] = ()  # sentences taken out as instructions to the bot
    claimed: str = ""  # the figure the question asserted ("900 knots"), if any
    note: str = ""  # the profile's note when the quotes do not state the figure ({claimed})

    @property
    def changed(self) -> bool:
        return bool(self.dropped or self.claimed)


def _premise(sentence: str, rules: _Rules) -> tuple[str, str] | None:
    """(subject, value) of a sentence asserting a figure, else None."""
    m = rules.yes_no.match(sentence.strip())
    if m is None:
        s = rules.tail.sub("", sentence.strip().rstrip("?.!")).strip()
        claim = rules.claim.search(s)
        m = rules.is_value.match(s[claim.end():].strip()) if claim else None
    return (m.group("subject").strip(), m.group("value").strip()) if m else None


def examine(question: str, profile: Profile = DEFAULT_PROFILE) -> Examined:
    """The question without instructions to the bot, and a stated premise asked as a question."""
    words = profile.premise
    sentences = [s for s in _SENTENCE.split(question.strip()) if s.strip()]
    dropped = tuple(s for s in sentences if is_injection(s, profile.injection))
    kept = [s for s in sentences if s not in dropped]
    for s in kept:
        if found := _premise(s, _rules(words)):
            subject, value = found
            return Examined(words.question.format(subject=subject), dropped, value, words.note)
    if dropped and kept:
        return Examined(" ".join(kept), dropped)
    return Examined(question)


def premise_note(examined: Examined, quotes: Sequence[str]) -> str | None:
    """What the reply says when the figure the question asserted is in none of the quotes."""
    if not examined.claimed:
        return None
    number = re.match(_NUMBER, examined.claimed)
    quoted = " ".join(" ".join(q.split()) for q in quotes)
    if number and re.search(rf"(?<![\d.,]){re.escape(number.group(0))}(?![\d]|[.,]\d)", quoted):
        return None
    return examined.note.format(claimed=examined.claimed)
