"""Documents a question names by their title (pure functions): "In gnuplot, how do I …", "on the
sport pilot checkride …", "which R function …".

A word of the question names a document when the word is in that document's title and in no other
searched document's title, and when the collection's own text ties the word to that document: of the
rates at which each document's chunks use the word, the titled document's is at least ``MIN_SHARE``
of the sum. Rates, not counts, so a long document does not win by its length; and the titled
document's chunks count only where the word is in their text as well as in the title every chunk is
indexed under (``text_uses``), so "package" in "The minted package" does not name minted when the
other manual's text says "package" as often. "gnuplot", "sport" and a capital "R" pass; a title word
every handbook uses ("airplane", "flight", "general", "rules") does not, and neither does a word only
one title happens to use while another document's text uses it as much. Words that say what
kind of document it is ("manual", "documentation") never name one (the profile's
``document_words``); otherwise the titles and the index decide. A one-letter title word ("R") must be written as a capital letter
on its own ("an R function", not "r" or "R-squared").

``retrieval.search.search`` searches the named documents first (the rest follow), which is what the asker
meant by naming one; the answer says which documents were searched first.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

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


def named_documents(cues: Mapping[str, str], rates: Mapping[str, Mapping[str, float]],
                    min_share: float = MIN_SHARE) -> list[str]:
    """The documents the cues name: those whose rate of using their cue word (``rates``: word →
    document → share of that document's chunks using the word in their text) is at least
    ``min_share`` of all the documents' rates together. Sorted."""
    named: set[str] = set()
    for w, doc in cues.items():
        total = sum(rates.get(w, {}).values())
        if total > 0 and rates[w].get(doc, 0.0) / total >= min_share:
            named.add(doc)
    return sorted(named)


def text_uses(tfs: Sequence[int]) -> int:
    """How many chunks of a document use a word of its title in their text: its term frequency in each
    chunk's indexed text (``tfs``) counts the title once, so only a count of two or more says the
    text (or a section heading) uses it too."""
    return sum(1 for tf in tfs if tf >= 2)
