"""What is wrong with a quote that is not on its page, in words a model can act on (pure functions).

A failed quote goes back to the model once (the repair pass). "The quote does not appear word for
word" leaves it to guess; most misquotes are a near copy with a word or number changed, dropped or
added. Here the page's longest run of the quote's words is found (``difflib.SequenceMatcher`` over
words compared after ``textnorm.normalize``) and the first place beside it where the two part is named,
with a few words of each side: the page's own words, as printed, and the quote's.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

from retrieval.text.textnorm import normalize_with_map

ANCHOR_WORDS = 3  # a run of this many of the quote's words on the page places it there
SHOWN_WORDS = 6  # words of each side shown where they part
_WORD = re.compile(r"\S+")


def _words(text: str) -> tuple[list[str], list[str]]:
    """The text's words as printed (a word broken across lines by a hyphen whole, its spacing collapsed)
    and each normalised, from one pass of ``normalize_with_map`` over the whole text."""
    hay, index = normalize_with_map(text)
    raw, norm = [], []
    for m in _WORD.finditer(hay):  # the characters each normalised one came from, in order (once each)
        raw.append("".join(text[i] for i in dict.fromkeys(index[m.start():m.end()])))
        norm.append(m.group())
    return raw, norm


def _span(words: Sequence[str], at: int) -> str:
    shown = " ".join(words[at:at + SHOWN_WORDS])
    return f"{shown} …" if at + SHOWN_WORDS < len(words) else shown


def where_it_differs(quote: str, page: str) -> str | None:
    """How ``quote`` differs from the closest span of ``page``: 'the page reads “…” where the quote
    reads “…”' at the first place the two part after (or, when the quote's opening words are not on
    the page, before) their longest common run of words; None when no run of ``ANCHOR_WORDS`` of its
    words is on the page."""
    q_raw, q = _words(quote)
    p_raw, p = _words(page)
    if not q or not p:
        return None
    match = difflib.SequenceMatcher(None, q, p, autojunk=False).find_longest_match(0, len(q), 0, len(p))
    if match.size < min(ANCHOR_WORDS, len(q)):
        return None
    qa, pa, size = match.a, match.b, match.size
    if qa + size < len(q):  # they part after the run
        page_side = _span(p_raw, pa + size) if pa + size < len(p) else "(the page's text ends)"
        return (f"after “{' '.join(q_raw[max(qa, qa + size - 3):qa + size])}” the page reads “{page_side}” where the "
                f"quote reads “{_span(q_raw, qa + size)}”")
    if qa > 0:  # the run is the quote's end: they part before it
        lead = max(0, qa - SHOWN_WORDS)
        before = " ".join(p_raw[max(0, pa - (qa - lead)):pa]) or "(the page's text starts)"
        return (f"before “{' '.join(q_raw[qa:qa + 3])}” the page reads “{before}” where the quote reads "
                f"“{' '.join(q_raw[lead:qa])}”")
    return ""  # every word matches: only what lies between words differs


def misquote_reason(quote: str, page: str, page_no: int, document: str) -> str:
    """The failure reason for a quote not found on its page: where its words differ, when that can be said."""
    differs = where_it_differs(quote, page)
    if differs is None:
        return (f"the quote does not appear word for word on page {page_no} of {document!r}, and no run of "
                f"{ANCHOR_WORDS} of its words is on that page: copy a span of the passage's text exactly")
    if not differs:
        return (f"the quote's words are on page {page_no} of {document!r}, but not with the punctuation and spacing "
                "between them: copy the span exactly as printed")
    return f"the quote does not appear word for word on page {page_no} of {document!r}; its words differ from the page here: {differs}"
