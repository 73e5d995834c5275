"""Visible text and printed labels of every PDF page (PyMuPDF).

Text a reader cannot see is not content and is never ingested: spans in a colour too close to the
background under them (white on white, or text on a filled box of its own colour), spans in a tiny
or zero-size font, fully transparent spans, and spans outside the page box.

A page's text is its visible lines joined by "\\n", text blocks separated by a blank line (the
blank line is the paragraph boundary the chunker follows). Running headers and footers are found
across the document (``find_running_lines``) and excluded from the page *body*, which is what gets
chunked; the full page text is kept for verification.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pymupdf

MIN_FONT_SIZE = 1.5  # points; smaller text is not readable
MIN_CONTRAST = 0.12  # luminance difference between text and background


@dataclass(frozen=True)
class Heading:
    offset: int  # character offset of the heading line in the page text
    text: str


@dataclass(frozen=True)
class Page:
    number: int  # 1-based PDF page index
    label: str | None  # printed page label, when the PDF defines one
    text: str  # visible text
    headings: tuple[Heading, ...] = ()
    hidden_chars: int = 0  # characters dropped as invisible
    body_start: int = 0
    body_end: int = -1  # -1: len(text)

    @property
    def body(self) -> tuple[int, int]:
        end = len(self.text) if self.body_end < 0 else self.body_end
        return self.body_start, end


@dataclass
class _Rect:
    rect: pymupdf.Rect
    fill: tuple[float, float, float]


def _luminance(rgb: Sequence[float]) -> float:
    r, g, b = (float(c) for c in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _span_rgb(color: int) -> tuple[float, float, float]:
    return ((color >> 16) & 255) / 255.0, ((color >> 8) & 255) / 255.0, (color & 255) / 255.0


def _filled_rects(page: pymupdf.Page) -> list[_Rect]:
    rects: list[_Rect] = []
    for path in page.get_drawings():
        fill = path.get("fill")
        if fill is None or path.get("fill_opacity", 1.0) == 0:
            continue
        rects.append(_Rect(pymupdf.Rect(path["rect"]), tuple(float(c) for c in fill[:3])))  # type: ignore[arg-type]
    return rects


def _background(bbox: pymupdf.Rect, rects: Sequence[_Rect]) -> tuple[float, float, float]:
    """Colour under the centre of ``bbox``: the last filled shape drawn there, else white paper."""
    centre = pymupdf.Point((bbox.x0 + bbox.x1) / 2, (bbox.y0 + bbox.y1) / 2)
    for r in reversed(rects):
        if centre in r.rect:
            return r.fill
    return (1.0, 1.0, 1.0)


def span_is_hidden(span: dict, page_rect: pymupdf.Rect, rects: Sequence[_Rect]) -> bool:
    bbox = pymupdf.Rect(span["bbox"])
    if span.get("size", 0) < MIN_FONT_SIZE:
        return True
    if span.get("alpha", 255) == 0:
        return True
    if bbox.is_empty or not bbox.intersects(page_rect):
        return True
    inside = bbox & page_rect
    if inside.get_area() < 0.5 * bbox.get_area():
        return True
    fg = _span_rgb(int(span.get("color", 0)))
    bg = _background(bbox, rects)
    return abs(_luminance(fg) - _luminance(bg)) < MIN_CONTRAST and max(
        abs(a - b) for a, b in zip(fg, bg, strict=True)) < 0.25


def _is_bold(span: dict) -> bool:
    return bool(span.get("flags", 0) & 16) or "bold" in str(span.get("font", "")).lower()


def page_text(page: pymupdf.Page) -> tuple[str, tuple[Heading, ...], int]:
    """Visible text of one page, its bold heading lines, and the number of hidden characters."""
    data = page.get_text("dict", flags=pymupdf.TEXT_PRESERVE_WHITESPACE | pymupdf.TEXT_PRESERVE_LIGATURES)
    rects = _filled_rects(page)
    page_rect = page.rect
    blocks: list[list[str]] = []
    headings: list[tuple[int, int, str]] = []  # (block index, line index, text)
    hidden = 0
    for block in data.get("blocks", []):
        if block.get("type") != 0:
            continue
        lines: list[str] = []
        for line in block.get("lines", []):
            parts: list[str] = []
            bold = True
            for span in line.get("spans", []):
                if span_is_hidden(span, page_rect, rects):
                    hidden += len(span.get("text", ""))
                    continue
                parts.append(span["text"])
                if span["text"].strip():
                    bold = bold and _is_bold(span)
            text = "".join(parts).rstrip()
            if text.strip():
                if bold and len(text.strip()) <= 120:
                    headings.append((len(blocks), len(lines), text.strip()))
                lines.append(text)
        if lines:
            blocks.append(lines)
    out = ""
    offsets: dict[tuple[int, int], int] = {}
    for bi, lines in enumerate(blocks):
        if bi:
            out += "\n\n"
        for li, line in enumerate(lines):
            if li:
                out += "\n"
            offsets[(bi, li)] = len(out)
            out += line
    heads = tuple(Heading(offsets[(b, li)], t) for b, li, t in headings)
    return out, heads, hidden


_ROMAN = re.compile(r"\b[ivxlcdm]+\b")
_DIGITS = re.compile(r"\d+")


MASKED_LINE_MAX_LETTERS = 8  # numbers are masked only in lines this short: "Page 12", "§ 91.115", "Frm 00702"


def line_signature(line: str) -> str:
    """A line as compared across pages to recognise running headers and footers: numbers are masked
    in lines that are mostly numbers ("Page 12", "4-xxi", "§ 91.115"); wordier lines must repeat
    exactly (a sentence with a different number on each page is content, not a header)."""
    s = re.sub(r"\s+", " ", line.strip().casefold())
    masked = _ROMAN.sub("#", _DIGITS.sub("#", s))
    return masked if sum(ch.isalpha() for ch in masked) <= MASKED_LINE_MAX_LETTERS else s


def _lines_with_offsets(text: str) -> list[tuple[int, int, str]]:
    out = []
    pos = 0
    for raw in text.split("\n"):
        if raw.strip():
            out.append((pos, pos + len(raw), raw))
        pos += len(raw) + 1
    return out


EDGE_LINES = 12  # headers/footers are looked for among this many lines at each edge of a page


def find_running_lines(texts: Sequence[str], min_share: float = 0.2, min_pages: int = 3) -> set[str]:
    """Signatures of lines repeated near the top or bottom of many pages."""
    counts: Counter[str] = Counter()
    for text in texts:
        lines = _lines_with_offsets(text)
        edge = {line_signature(t) for _, _, t in lines[:EDGE_LINES] + lines[-EDGE_LINES:]}
        counts.update(edge)
    need = max(min_pages, int(min_share * len(texts) + 0.999))
    return {sig for sig, n in counts.items() if n >= need and sig}


def body_bounds(text: str, running: set[str]) -> tuple[int, int]:
    """Offsets of the page text without its leading and trailing runs of running lines."""
    lines = _lines_with_offsets(text)
    start_i, end_i = 0, len(lines)
    while start_i < end_i and start_i < EDGE_LINES and line_signature(lines[start_i][2]) in running:
        start_i += 1
    while end_i > start_i and len(lines) - end_i < EDGE_LINES and line_signature(lines[end_i - 1][2]) in running:
        end_i -= 1
    if start_i >= end_i:
        return len(text), len(text)
    return lines[start_i][0], lines[end_i - 1][1]


def document_title(doc: pymupdf.Document, file_name: str) -> str:
    """The title the PDF declares, else its file name made readable ("14 CFR Part 91 General ...")."""
    declared = " ".join(str((doc.metadata or {}).get("title") or "").split())
    if len(declared.split()) >= 2 and not declared.lower().startswith(("microsoft", "untitled")) \
            and not declared.lower().endswith((".doc", ".docx", ".pdf")):
        return declared
    stem = file_name.rsplit(".", 1)[0]
    return " ".join(re.sub(r"[_-]+", " ", stem).split())


def extract(doc: pymupdf.Document, progress: Iterable[int] | None = None) -> list[Page]:
    """Every page of ``doc`` with visible text, label, headings and body bounds."""
    raw: list[tuple[str, tuple[Heading, ...], int, str | None]] = []
    for i in progress if progress is not None else range(doc.page_count):
        page = doc[i]
        text, heads, hidden = page_text(page)
        label = page.get_label() or None
        raw.append((text, heads, hidden, label))
    running = find_running_lines([r[0] for r in raw])
    pages: list[Page] = []
    for i, (text, heads, hidden, label) in enumerate(raw):
        start, end = body_bounds(text, running)
        body_heads = tuple(h for h in heads if start <= h.offset < end)
        pages.append(Page(i + 1, label, text, body_heads, hidden, start, end))
    return pages
