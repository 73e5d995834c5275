"""OCR boxes in reading order (pure functions): columns, lines and paragraphs of a page read by OCR.

The OCR engine (``ingest.ocr``) finds text lines as boxes with no order between them. Here they are
put in the order a reader takes them, so the page text reads like a text layer would:

* **Columns.** A page set in two columns has a vertical gutter: a band of white between two sides
  that each hold at least ``COLUMN_SHARE`` of the page's characters in boxes of running text (on
  average ``PROSE_WORDS`` words a box: table cells and margin labels are shorter, so a table or a
  "PA.II.D.K1  Current airport…" list is never read column by column). Boxes that cross the gutter
  (a title, a full-width figure caption) split the page into bands, read top to bottom; in each band
  the left column is read before the right.
* **Lines.** Boxes whose vertical centres lie within half a line height of each other are one line,
  read left to right; each box stays a line of its own in the page text, so table cells reach the
  table finder (``retrieval.text.tables``) as cells.
* **Paragraphs.** A vertical gap wider than ``PARAGRAPH_GAP`` line heights, or a line set much taller
  than the page's body text (a heading), starts a new paragraph (block).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

COLUMN_SHARE = 0.25  # each column holds at least this share of the page's characters
CROSSING = 0.08  # share of the boxes that may cross a gutter (titles, centred headings, running heads)
PROSE_WORDS = 3.0  # mean words per box from which a side reads as running text (a column)
PARAGRAPH_GAP = 0.8  # line heights of white between lines that start a new paragraph
HEADING_RATIO = 1.3  # a line this many times taller than the body's lines is a heading


@dataclass(frozen=True)
class Box:
    """One text line the OCR engine found: its text, confidence and axis-aligned box (page points)."""

    text: str
    score: float
    x0: float
    y0: float
    x1: float
    y1: float
    words: tuple[tuple[str, float], ...] = ()  # the words and their confidences, when the engine gives them

    @property
    def height(self) -> float:
        return max(self.y1 - self.y0, 0.1)

    @property
    def cy(self) -> float:
        return (self.y0 + self.y1) / 2


def body_height(boxes: Sequence[Box]) -> float:
    """The typical line height: the median height of the boxes, each counted once per character."""
    heights = sorted((b.height, len(b.text)) for b in boxes)
    half, seen = sum(n for _, n in heights) / 2, 0
    for h, n in heights:
        seen += n
        if seen >= half:
            return h
    return heights[-1][0] if heights else 1.0


def _prose(side: Sequence[Box]) -> bool:
    return bool(side) and statistics.fmean(len(b.text.split()) for b in side) >= PROSE_WORDS


def gutter(boxes: Sequence[Box]) -> float | None:
    """The x of the gutter between two columns of running text, or None (one column): of the places
    in the middle half of the page that the fewest boxes cross (at most ``CROSSING`` of them: titles,
    centred headings, running heads), the one with the most white on either side, when both sides
    hold ``COLUMN_SHARE`` of the characters and read as running text."""
    if len(boxes) < 6:
        return None
    total = sum(len(b.text) for b in boxes)
    lo, hi = min(b.x0 for b in boxes), max(b.x1 for b in boxes)
    middle = [x for b in boxes for x in (b.x0 - 0.5, b.x1 + 0.5) if lo + 0.25 * (hi - lo) <= x <= lo + 0.75 * (hi - lo)]
    best: tuple[int, float, float] | None = None  # (boxes crossing, -white, x)
    for x in middle:
        crossing = sum(1 for b in boxes if b.x0 < x < b.x1)
        if crossing > max(2, CROSSING * len(boxes)):
            continue
        left = [b for b in boxes if b.x1 <= x]
        right = [b for b in boxes if b.x0 >= x]
        if min(sum(len(b.text) for b in left), sum(len(b.text) for b in right)) < COLUMN_SHARE * total \
                or not (_prose(left) and _prose(right)):
            continue
        white = min(b.x0 for b in right) - max(b.x1 for b in left)
        key = (crossing, -white, x)
        if white > 0 and (best is None or key < best):
            best = key
    return best[2] if best else None


def _bands(boxes: Sequence[Box], x: float) -> list[list[Box]]:
    """The boxes in reading order around a gutter at ``x``: bands separated by boxes crossing it, each
    band's left column first."""
    out: list[list[Box]] = []
    left: list[Box] = []
    right: list[Box] = []
    for b in sorted(boxes, key=lambda b: (b.y0, b.x0)):
        if b.x0 < x < b.x1:  # crosses the gutter: ends the band above it
            out += [side for side in (left, right) if side]
            out.append([b])
            left, right = [], []
        else:
            (left if b.x1 <= x else right).append(b)
    return out + [side for side in (left, right) if side]


def lines(boxes: Sequence[Box]) -> list[list[Box]]:
    """Boxes grouped into lines (vertical centres within half a line height), top to bottom, each
    line left to right."""
    out: list[list[Box]] = []
    for b in sorted(boxes, key=lambda b: b.cy):
        if out:
            line = out[-1]
            cy = statistics.fmean(x.cy for x in line)
            if abs(b.cy - cy) <= 0.5 * min(b.height, min(x.height for x in line)):
                line.append(b)
                continue
        out.append([b])
    return [sorted(line, key=lambda b: b.x0) for line in out]


def blocks(boxes: Sequence[Box]) -> list[list[Box]]:
    """The page's boxes as paragraphs (lists of boxes, one box a line of page text) in reading order."""
    if not boxes:
        return []
    body = body_height(boxes)
    x = gutter(boxes)
    regions = _bands(boxes, x) if x is not None else [list(boxes)]
    out: list[list[Box]] = []
    for region in regions:
        previous: list[Box] | None = None
        for line in lines(region):
            tall = max(b.height for b in line) >= HEADING_RATIO * body
            gap = min(b.y0 for b in line) - max(b.y1 for b in previous) if previous else None
            was_tall = previous is not None and max(b.height for b in previous) >= HEADING_RATIO * body
            if gap is None or gap > PARAGRAPH_GAP * body or tall or was_tall:
                out.append([])
            out[-1].extend(line)
            previous = line
    return out
