"""Documents a question names by their title (pure functions): "In gnuplot, how do I …", "on the
sport pilot checkride …", "which R function …".

A word of the question names a document when the word is in that document's title and in no other
searched document's title, and when the collection's own text ties the word to that document: at
least ``MIN_SHARE`` of the chunks using the word belong to it. "gnuplot", "sport" and a capital "R"
pass; a title word every handbook uses ("airplane", "flight") does not, and neither does a word
only one title happens to use while another document's text uses it as much. Words that say what
kind of document it is ("manual", "documentation") never name one (the profile's
``document_words``); otherwise the titles and the index decide. A one-letter title word ("R") must be written as a capital letter
on its own ("an R function", not "r" or "R-squared").

``retrieval.search.search`` searches the named documents first (the rest follow), which is what the asker
meant by naming one; the answer says which documents were searched first.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from retrieval.profile import DEFAULT_PROFILE, Profile

MIN_SHARE = 0.85  # share of the chunks using a title word that must belong to the titled document

_TITLE_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9+#]*")


def title_words(title: str, profile: Profile = DEFAULT_PROFILE) -> set[str]:
    """The words of a title that could name it: lower-cased, without stopwords and the profile's
    ``document_words`` ("manual", "guide", "documentation": what kind of document, not which); a
    one-letter word is kept as written ("R"), since as a name it is a capital."""
    out: set[str] = set()
    for w in _TITLE_WORD.findall(title):
        if len(w) == 1:
            if w.isupper():
                out.add(w)
        elif w.lower() not in profile.stopwords and w.lower() not in profile.document_words:
            out.add(w.lower())
    return out


def _in_question(word: str, question: str) -> bool:
    if len(word) == 1:
        return re.search(rf"(?<![\w.'’-]){re.escape(word)}(?![\w'’-])", question) is not None
    return re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", question, re.IGNORECASE) is not None


def title_cues(question: str, titles: Mapping[str, str], profile: Profile = DEFAULT_PROFILE) -> dict[str, str]:
    """Words of ``question`` that are in exactly one of ``titles`` (document → title): word → document.
    Nothing when fewer than two documents are searched (naming one changes nothing)."""
    if len(titles) < 2:
        return {}
    owners: dict[str, set[str]] = {}
    for doc, title in titles.items():
        for w in title_words(title, profile):
            owners.setdefault(w, set()).add(doc)
    return {w: next(iter(docs)) for w, docs in owners.items() if len(docs) == 1 and _in_question(w, question)}


def named_documents(cues: Mapping[str, str], shares: Mapping[str, Mapping[str, float]],
                    min_share: float = MIN_SHARE) -> list[str]:
    """The documents the cues name: those whose cue word's chunks (``shares``: word → document →
    share of the chunks using the word) mostly belong to them. Sorted."""
    return sorted({doc for w, doc in cues.items() if shares.get(w, {}).get(doc, 0.0) >= min_share})
