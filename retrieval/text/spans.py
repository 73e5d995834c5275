"""Cutting text at separators while keeping character offsets (pure): the one place sentences are cut.

- ``split_sentences`` (at ``sentence_breaks``): the quotable sentences, used by ingest (chunks are
  filled with whole sentences) and by the extractive answerer (its candidate quotes), so a quote and
  the chunk it came from agree on where a sentence ends.
- ``sentence_spans``/``sentences``: the coarser windows the reranker scores and whose vectors are
  stored at ingest (they also break at ":" and at blank lines, whatever follows).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence


def pieces(text: str, separator: re.Pattern[str], start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """The [start, end) spans of ``text[start:end]`` between matches of ``separator``, blank ones left
    out; offsets are into ``text``, and each span keeps its own surrounding whitespace."""
    end = len(text) if end is None else end
    out: list[tuple[int, int]] = []
    pos = start
    for m in separator.finditer(text, start, end):
        if text[pos:m.start()].strip():
            out.append((pos, m.start()))
        pos = m.end()
    if text[pos:end].strip():
        out.append((pos, end))
    return out


def between(breaks: Sequence[tuple[int, int]], start: int, end: int) -> list[tuple[int, int]]:
    """The spans of [start, end) around the (sorted, non-overlapping) ``breaks``."""
    out: list[tuple[int, int]] = []
    pos = start
    for bs, be in breaks:
        out.append((pos, bs))
        pos = be
    out.append((pos, end))
    return out


def trimmed(text: str, spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Each span without its surrounding whitespace; empty ones left out."""
    out: list[tuple[int, int]] = []
    for s, e in spans:
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if e > s:
            out.append((s, e))
    return out


SENTENCE_BREAK = re.compile(r"(?<=[.;?!])[\"')\]]?\s+(?=[\"'(\[§A-Z0-9])")
_BREAK_BEFORE_LOWER = re.compile(r"(?<=[.?!])[\"')\]]?\s+(?=[a-z])")  # "… two major differences. refresh reformats …"
_DOTTED = re.compile(r"(?:[^\W\d_]\.){2,}")  # "u.s.", "a.m.", "e.g.": letters each followed by a stop


def sentence_breaks(text: str, start: int = 0, end: int | None = None, *, lowercase_starts: bool = False,
                    abbreviations: Collection[str] = ()) -> list[tuple[int, int]]:
    """Where sentences break in ``text[start:end]``: after ".", ";", "?" or "!" before a capital, a
    digit, a bracket or a quote, except after one of ``abbreviations`` before a digit ("see set
    palette (p. 181)", "Fig. 3", "No. 5"); with ``lowercase_starts`` also after ".", "?" or "!"
    before a lower-case word (software manuals open sentences with command names), unless the word
    before the stop is one of ``abbreviations`` ("e.g. the", "cf. set"), a single letter ("x. y") or
    letters each followed by a stop ("26 U.S. gallons", "10 a.m. local")."""
    end = len(text) if end is None else end
    breaks = [(m.start(), m.end()) for m in SENTENCE_BREAK.finditer(text, start, end)
              if not (text[m.end()].isdigit() and _word_before(text, start, m.start()) in abbreviations)]
    if lowercase_starts:
        breaks += [(m.start(), m.end()) for m in _BREAK_BEFORE_LOWER.finditer(text, start, end)
                   if (word := _word_before(text, start, m.start())) not in abbreviations
                   and len(word.rstrip(".?!")) > 1 and not _DOTTED.fullmatch(word)]
    return sorted(breaks)


def _word_before(text: str, start: int, stop: int) -> str:
    """The word ending with the stop at ``stop``, lower-cased, without opening brackets or quotes:
    "(p." is "p.": the last run of non-space characters in ``text[start:stop + 1]``. Found by stepping
    back from ``stop``; a regex anchored at the end tried every position from ``start`` on, once per
    sentence break, which cost 0.96 of the 1.43 CPU-s of splitting valgrind's manual (long paragraphs)."""
    end = min(stop + 1, len(text))
    while end > start and text[end - 1].isspace():
        end -= 1
    begin = end
    while begin > start and not text[begin - 1].isspace():
        begin -= 1
    return text[begin:end].lower().lstrip("([{\"'“‘")


def split_sentences(text: str, start: int, end: int, *, lowercase_starts: bool = False,
                    abbreviations: Collection[str] = ()) -> list[tuple[int, int]]:
    """The sentences of ``text[start:end]`` (``sentence_breaks``), each without surrounding whitespace."""
    breaks = sentence_breaks(text, start, end, lowercase_starts=lowercase_starts, abbreviations=abbreviations)
    return trimmed(text, between(breaks, start, end))


_SENTENCE = re.compile(r"(?<=[.;:?!])\s+|\n\s*\n")


def sentence_spans(text: str, min_words: int = 4) -> list[tuple[int, int]]:
    """Where the sentences of a passage lie in it, as [start, end) character spans; a sentence of
    fewer than ``min_words`` words is merged into the next one (the span then covers both)."""
    merged: list[tuple[int, int]] = []
    for s, e in pieces(text, _SENTENCE):
        if merged and len(text[merged[-1][0]:merged[-1][1]].split()) < min_words:
            merged[-1] = (merged[-1][0], e)
        else:
            merged.append((s, e))
    return merged


def sentences(text: str, min_words: int = 4, window: int = 1) -> list[str]:
    """Sentence windows of a passage (each sentence with the next ``window - 1``), short ones merged
    into their neighbour; the whole passage when it has a single sentence."""
    merged = [" ".join(text[s:e].split()) for s, e in sentence_spans(text, min_words)]
    if len(merged) <= 1:
        return merged or [" ".join(text.split())]
    return [" ".join(merged[i:i + window]) for i in range(max(1, len(merged) - window + 1))]
