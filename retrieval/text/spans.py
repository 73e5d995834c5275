"""Cutting text at separators while keeping character offsets (pure): the one place sentences and
paragraphs are cut for retrieval (the reranker's sentence windows, the vectors stored at ingest)."""

from __future__ import annotations

import re


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
