"""Follow-up questions without a language model (pure functions).

A follow-up such as "and at night?" or "what about class G?" leaves out what it is about. Without a
model to rewrite it, the previous question supplies the missing context: when the follow-up is
elliptical (few content words, or it opens with a continuation like "and"/"what about", or leans
on a pronoun like "it"/"that"), the standalone question is the previous question followed by the
follow-up (the previous question itself resolved the same way, so a chain of follow-ups keeps the
original subject). A follow-up that stands on its own is left unchanged, so a change of topic in the same
thread is searched as asked.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from retrieval.answerers.lexical import content_terms
from retrieval.models import Turn

MAX_ELLIPTICAL_TERMS = 3  # a follow-up with this few content words cannot stand alone
_CONTINUATION = re.compile(
    r"^\s*(and|or|but|also|what about|how about|and what about|same for|what if|then|so|in that case|"
    r"does that|is that|is it|does it|why)\b", re.IGNORECASE)
_PRONOUN = re.compile(r"\b(it|its|that|this|they|them|those|these|there|he|she)\b", re.IGNORECASE)


def is_elliptical(question: str) -> bool:
    terms = content_terms(question)
    if len(terms) <= MAX_ELLIPTICAL_TERMS:
        return True
    return bool(_CONTINUATION.match(question)) or (len(terms) <= 6 and bool(_PRONOUN.search(question)))


def standalone_without_model(question: str, history: Sequence[Turn]) -> str:
    """The question to search for: the follow-up itself, or the previous question plus it."""
    if not history or not is_elliptical(question):
        return question
    previous = standalone_without_model(history[-1].question, history[:-1]).strip()
    return f"{previous.rstrip('?.! ')} — {question.strip()}"
