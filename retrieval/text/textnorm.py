"""Text normalisation shared by indexing and quote verification (pure functions).

``normalize`` forgives what PDFs do to text and nothing else:
- Unicode compatibility forms (ligatures ﬁ ﬂ ﬀ → fi fl ff), case (casefold);
- curly quotes → straight quotes, the dash family (‐ ‑ ‒ – — −) → "-";
- runs of whitespace and line breaks → one space;
- a hyphen between two letters, with or without following whitespace, is removed, so the
  line-broken "air- craft" and the quoted "aircraft" meet, and "head- on" meets "head-on". A hyphen
  next to a digit is kept: "10-12" is a range and must not meet "1012".

Every normalised character keeps the index of the raw character it came from, so a match in
normalised text maps back to the source's own words.
"""

from __future__ import annotations

import re
import unicodedata

from retrieval.text.spans import between

_QUOTES = {"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'",
           "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u2033": '"', "`": "'"}
_DASHES = set("\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u00ad\ufe58\ufe63\uff0d")
_SOFT = {"\u200b", "\u200c", "\u200d", "\ufeff"}


def _char_forms(ch: str) -> str:
    if ch in _SOFT:
        return ""
    if ch in _QUOTES:
        return _QUOTES[ch]
    if ch in _DASHES:
        return "-"
    if ch.isspace():
        return " "
    if ord(ch) < 128:
        return ch.casefold()
    return unicodedata.normalize("NFKC", ch).casefold()


def _joining_hyphens(s: str) -> list[tuple[int, int]]:
    """The [start, end) spans of ``s`` to drop: a hyphen between two letters with the space after it,
    if any ("air- craft", "air-craft" → "aircraft"; "10-12" keeps its). A hyphen's left neighbour is
    never dropped, so it is the character before it in ``s``."""
    out: list[tuple[int, int]] = []
    n = len(s)
    i = s.find("-")
    while i != -1:
        j = i + 1 if i + 1 < n and s[i + 1] == " " else i
        if i > 0 and s[i - 1].isalpha() and j + 1 < n and s[j + 1].isalpha():
            out.append((i, j + 1))
        i = s.find("-", i + 1)
    return out


def normalize_with_map(text: str) -> tuple[str, list[int]]:
    """Return the normalised text and, for each of its characters, the raw index it came from."""
    out: list[str] = []
    idx: list[int] = []
    for i, ch in enumerate(text):
        for c in _char_forms(ch):
            if c == " " and (not out or out[-1] == " "):
                continue  # collapse whitespace runs, drop leading space
            out.append(c)
            idx.append(i)
    s = "".join(out).rstrip(" ")
    kept = between(_joining_hyphens(s), 0, len(s))
    return "".join(s[a:b] for a, b in kept), [idx[i] for a, b in kept for i in range(a, b)]


class _Forms(dict):
    """Code point → its normalised form (``_char_forms``), filled as characters are met: a table for
    ``str.translate``."""

    def __missing__(self, code: int) -> str:
        form = self[code] = _char_forms(chr(code))
        return form


_FORMS = _Forms()
_SPACE_RUN = re.compile(" {2,}")


def normalize(text: str) -> str:
    """``normalize_with_map(text)[0]``, without the map: the same rules with ``str.translate`` and one
    look at each hyphen, several times faster (answering normalises every candidate sentence)."""
    s = _SPACE_RUN.sub(" ", text.translate(_FORMS)).strip(" ")
    if "-" not in s:
        return s
    return "".join(s[a:b] for a, b in between(_joining_hyphens(s), 0, len(s)))


_WS = re.compile(r"\s+")
# Characters that take no room on the page but split a word for a search engine: zero-width space,
# non-joiner and joiner, word joiner, byte-order mark, Mongolian vowel separator, and the soft hyphen
# (shown only where a line breaks). "pass\u200bword" is the word "password" to a reader.
_INVISIBLE = re.compile("[\u00ad\u180e\u200b-\u200d\u2060\ufeff]")
_LINE_HYPHEN = re.compile(r"(\w)-\s*\n\s*(\w)")


def without_invisible(text: str) -> str:
    """``text`` without the characters that are not seen but split words (``_INVISIBLE``): applied to
    what is indexed (``search_text``) and to every query alike, so either side may hold them."""
    return _INVISIBLE.sub("", text)


def search_text(text: str) -> str:
    """Text as indexed for keyword and dense search: ligatures expanded, words broken across lines
    rejoined, invisible characters inside words dropped (``without_invisible``), whitespace collapsed;
    case and punctuation kept (the embedder sees readable text)."""
    text = unicodedata.normalize("NFKC", without_invisible(text))
    text = _LINE_HYPHEN.sub(r"\1\2", text)
    return _WS.sub(" ", text).strip()


_BROKEN_WORD = re.compile(r"(?<=[a-z])-[ \t]*\n[ \t]*(?=[a-z])")


def readable(text: str) -> str:
    """A quote as people read it: a word the PDF hyphenated across a line break is joined
    ("op-\nerate" → "operate"; only between lower-case letters, so "Part-\n91" and "pre- and post-"
    keep theirs) and runs of whitespace become one space. Display only: verification always runs
    against the page text itself."""
    return " ".join(_BROKEN_WORD.sub("", text).split())
