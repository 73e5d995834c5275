"""The question as it should be answered: instructions to the bot taken out, a stated premise turned
into the question it hides (pure functions).

Users (or text pasted by them) sometimes wrap a question in instructions ("Ignore your rules …") or
state the answer they want confirmed ("the handbook says the top speed is 900 knots, confirm it").
Neither may steer the answer: sentences that read as prompt injection (``retrieval.text.injection``) are
dropped, and a premise "X is N <unit>" is asked as "What is X?", so the document's own value is
found and quoted. When the quotes do not contain the figure the question claimed, the reply says so.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from retrieval.text.injection import is_injection

_SENTENCE = re.compile(r"(?<=[.!?…])\s+|\s*;\s*")
_NUMBER = r"\d[\d,]*(?:\.\d+)?"
# "the handbook says (that) the top speed is 900 knots", "according to the POH, VNE is 180 KIAS"
_CLAIM = re.compile(
    r"(?:(?:the|this|your|my)\s+)?(?:handbook|manual|document|book|poh|afm|pdf|source|regulation|text|it)s?\s+"
    r"(?:says|said|states|stated|claims|shows|lists|gives)\s+(?:that\s+)?"
    r"|according\s+to\s+(?:the\s+|this\s+)?\w+\s*,?\s*", re.IGNORECASE)
_IS_VALUE = re.compile(rf"^(?P<subject>.+?)\s+(?:is|are|was|were|equals|of)\s+(?:about\s+|only\s+)?"
                       rf"(?P<value>{_NUMBER}(?:\s*[a-z%°]+\.?){{0,2}})\b", re.IGNORECASE)
# "Is the top speed 900 knots?"
_YES_NO = re.compile(rf"^(?:is|are|was|were|isn't|aren't)\s+(?P<subject>.+?)\s+(?P<value>{_NUMBER}(?:\s*[a-z%°]+\.?){{0,2}})\s*\??$",
                     re.IGNORECASE)
# "…, confirm it", "…, please verify", "…, right?" at the end of a sentence
_TAIL = re.compile(r"(?:[,;:]\s*|\s+)(?:(?:please|so|and|now|can you)\s+)*(?:confirm|verify|agree)\b.*$"
                   r"|[,;:]?\s+(?:right|correct|true|yes|ok|isn't it)\s*[?.!]*$", re.IGNORECASE)


@dataclass(frozen=True)
class Examined:
    question: str  # what to search for and answer
    dropped: tuple[str, ...] = ()  # sentences taken out as instructions to the bot
    claimed: str = ""  # the figure the question asserted ("900 knots"), if any

    @property
    def changed(self) -> bool:
        return bool(self.dropped or self.claimed)


def _premise(sentence: str) -> tuple[str, str] | None:
    """(subject, value) of a sentence asserting a figure, else None."""
    s = _TAIL.sub("", sentence.strip().rstrip("?.!")).strip()
    m = _YES_NO.match(sentence.strip())
    if m:
        return m.group("subject").strip(), m.group("value").strip()
    claim = _CLAIM.search(s)
    if claim is None:
        return None
    m = _IS_VALUE.match(s[claim.end():].strip())
    if not m:
        return None
    return m.group("subject").strip(), m.group("value").strip()


def examine(question: str) -> Examined:
    """The question without instructions to the bot, and a stated premise asked as a question."""
    sentences = [s for s in _SENTENCE.split(question.strip()) if s.strip()]
    kept = [s for s in sentences if not is_injection(s)]
    dropped = tuple(s for s in sentences if is_injection(s))
    for s in kept:
        found = _premise(s)
        if found:
            subject, value = found
            return Examined(f"What is {subject}?", dropped, value)
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
    return (f"The question states {examined.claimed}; the document does not say that. Its own words are "
            "quoted above.")
