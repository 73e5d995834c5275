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

from retrieval.answer.answerers.lexical import content_terms
from retrieval.models import Turn
from retrieval.profile import DEFAULT_PROFILE, Profile

JOIN = " — "  # between the previous question and the follow-up in a standalone question
MAX_ELLIPTICAL_TERMS = 3  # a follow-up with this few content words cannot stand alone


def is_elliptical(question: str, profile: Profile = DEFAULT_PROFILE) -> bool:
    terms = content_terms(question, profile)
    if len(terms) <= MAX_ELLIPTICAL_TERMS:
        return True
    words = re.findall(r"[a-z']+", question.casefold())
    opens = " ".join(words[:3])
    continues = any(opens == o or opens.startswith(o + " ") for o in profile.followup_openers)
    return continues or (len(terms) <= 6 and any(w in profile.pronouns for w in words))


def standalone_without_model(question: str, history: Sequence[Turn], profile: Profile = DEFAULT_PROFILE) -> str:
    """The question to search for: the follow-up itself, or the previous question plus it."""
    if not history or not is_elliptical(question, profile):
        return question
    previous = standalone_without_model(history[-1].question, history[:-1], profile).strip()
    return f"{previous.rstrip('?.! ')}{JOIN}{question.strip()}"


def followup_terms(standalone: str, profile: Profile = DEFAULT_PROFILE) -> set[str]:
    """The content terms a follow-up adds to the question it continues ("… by day — and at night?"
    → {"night"}): what the follow-up asks about, which its answer must speak of. Empty for a
    question that was not joined to a previous one."""
    if JOIN not in standalone:
        return set()
    previous, followup = standalone.rsplit(JOIN, 1)
    return set(content_terms(followup, profile)) - set(content_terms(previous, profile))
