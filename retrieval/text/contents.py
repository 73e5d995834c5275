"""Table-of-contents lines (pure functions): "18.3 Linux . . . . . . . . 450", "Index ........ iv".

A contents entry is a title, dot leaders and a page number or label at the end of the line. Such lines
are navigation, not content: they are never quoted (``retrieval.answer.answerers.extractive``) and a
refusal does not offer them as the nearest passages (``retrieval.answer.refusals``). Dot leaders
followed by words are a table row ("Flashing red ...... Taxi clear of runway") and are not entries.
"""

from __future__ import annotations

import re

CONTENTS_ENTRY = re.compile(r"(?:\.{4,}|(?:\. ){4,}|…{2,})\s*(?:[0-9]+(?:-[0-9]+)?|[ivxlc]+|[0-9]+-[ivxlc]+)\s*$",
                            re.IGNORECASE)
CONTENTS_SHARE = 0.3  # a text whose lines are this much contents entries (and at least two) is a contents page


def is_contents_entry(line: str) -> bool:
    return CONTENTS_ENTRY.search(line) is not None


def is_contents_text(text: str) -> bool:
    """The text reads as (part of) a table of contents: at least two lines, and ``CONTENTS_SHARE`` of its
    non-empty lines, are contents entries."""
    lines = [line for line in text.splitlines() if line.strip()]
    entries = sum(1 for line in lines if is_contents_entry(line))
    return entries >= 2 and entries >= CONTENTS_SHARE * len(lines)
