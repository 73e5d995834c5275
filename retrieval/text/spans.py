"""Cutting text at separators while keeping character offsets (pure)."""

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
