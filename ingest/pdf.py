"""Visible text and printed labels of every PDF page (PyMuPDF).

Text a reader cannot see is not content and is never ingested: spans in a colour too close to the
background under them (white on white, or text on a filled box of its own colour), spans in a font
too small to read (under ``MIN_READABLE_SIZE``, 3 pt), fully transparent spans, and spans outside the
page box.

A page's text is its visible lines joined by "\\n", text blocks separated by a blank line (the
blank line is the paragraph boundary the chunker follows). Running headers and footers are found
across the document (``find_running_lines``) and excluded from the page *body*, which is what gets
chunked; the full page text is kept for verification.

Table rows are recovered by line grouping (``retrieval.text.tables``) and written one row per line. Body
paragraphs that address an AI reader or read as prompt injection are listed in ``Page.untrusted``
(``retrieval.text.injection``): they stay in the page text, and the chunks made of them are flagged.
"""

from __future__ import annotations

import re
from array import array
from collections import Counter
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass
from itertools import count
from typing import NamedTuple

from ingest.labels import page_label, readable
from ingest.mupdf import pymupdf

from retrieval.text.injection import DEFAULT_RULES, untrusted_spans
from retrieval.text.tables import Line, find_tables

MIN_FONT_SIZE = 1.5  # points: OCR's floor for a line of a scanned page (``ingest.ocr``)
# Points: text layer set smaller is hidden (issue 39: a sentence in a 2-pt font, invisible on paper, was
# quoted as the answer). Real manuals go down to about 4 pt: in the test corpora the smallest real text
# is LaTeX's \tiny sample in memman.pdf (3.99 pt), 14 CFR Part 91's fraction digits and table footnote
# marks ("1⁄2 statute mile", 4.1-4.3 pt), the V-speed subscripts of the FAA PTS and ACS ("VSO", 5.0 and
# 5.8 pt), footnotes and tables (6-7 pt) and yosys-manual.pdf's Figure 16 labels (3.5 pt): all kept.
# Under 3 pt (a body about 1 mm tall) there are only the labels of a circuit diagram in yosys-manual.pdf
# (Figure 15, 2.0-2.7 pt) that cannot be read in print either.
MIN_READABLE_SIZE = 3.0
MIN_CONTRAST = 0.12  # luminance difference between text and background

Box = tuple[float, float, float, float]  # (x0, y0, x1, y1) in points


@dataclass(frozen=True)
class Heading:
    offset: int  # character offset of the heading line in the page text
    text: str
    larger: bool = False  # set in a font larger than the page's body text (``BODY_MARGIN`` points or more)


@dataclass(frozen=True)
class Page:
    number: int  # 1-based PDF page index
    label: str | None  # printed page label, when the PDF defines one
    text: str  # visible text
    headings: tuple[Heading, ...] = ()
    hidden_chars: int = 0  # characters dropped as invisible
    body_start: int = 0
    body_end: int = -1  # -1: len(text)
    # paragraphs of the body that read as prompt injection (``retrieval.text.injection``): (start, end) offsets
    untrusted: tuple[tuple[int, int], ...] = ()
    read_by: str = "text"  # how its words were read: "text" layer, our "ocr", or a searchable scan's "scan-layer"
    ocr_confidence: float | None = None  # OCR's mean confidence in its words (0..1), characters weighing
    ocr_doubtful: tuple[str, ...] = ()  # words with a digit that OCR read with low confidence ("1,600", "149")

    @property
    def body(self) -> tuple[int, int]:
        end = len(self.text) if self.body_end < 0 else self.body_end
        return self.body_start, end


@dataclass
class _Rect:
    # plain floats: a page of a software manual can hold hundreds of filled boxes (code listings)
    # and a thousand spans, and PyMuPDF's Rect/Point containment test costs ~5 µs a call in Python
    x0: float
    y0: float
    x1: float
    y1: float
    fill: tuple[float, float, float]
    opacity: float = 1.0  # the fill's alpha: a translucent tint lets what lies beneath show through

    def holds(self, x: float, y: float) -> bool:
        """MuPDF's ``fz_is_point_inside_rect``: left/top edges inside, right/bottom outside."""
        return self.x0 <= x < self.x1 and self.y0 <= y < self.y1


def _luminance(rgb: Sequence[float]) -> float:
    return 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2]


def _span_rgb(color: int) -> tuple[float, float, float]:
    return ((color >> 16) & 255) / 255.0, ((color >> 8) & 255) / 255.0, (color & 255) / 255.0


def _filled_rects(page: pymupdf.Page) -> list[_Rect]:
    rects: list[_Rect] = []
    for path in page.get_drawings():
        fill = path.get("fill")
        alpha = path.get("fill_opacity")
        opacity = 1.0 if alpha is None else float(alpha)
        if fill is None or opacity <= 0:
            continue
        r = path["rect"]
        rects.append(_Rect(float(r.x0), float(r.y0), float(r.x1), float(r.y1),
                           tuple(float(c) for c in fill[:3]), min(opacity, 1.0)))  # type: ignore[arg-type]
    return rects


def _background(bbox: Box, rects: Sequence[_Rect]) -> tuple[float, float, float]:
    """Colour under the centre of ``bbox``: the filled shapes drawn there laid over white paper in
    drawing order, each translucent one blended by its opacity (a 30 % black tint over a whole page
    leaves black text readable), from the last opaque one up."""
    x, y = (bbox[0] + bbox[2]) / 2, (bbox[1] + bbox[3]) / 2
    over: list[_Rect] = []  # the shapes above the last opaque one, topmost first
    colour = (1.0, 1.0, 1.0)
    for r in reversed(rects):
        if r.holds(x, y):
            if r.opacity >= 1.0:
                colour = r.fill
                break
            over.append(r)
    for r in reversed(over):
        a = r.opacity
        colour = tuple(a * f + (1 - a) * c for f, c in zip(r.fill, colour, strict=True))  # type: ignore[assignment]
    return colour


def is_invisible(span: dict) -> bool:
    """Text drawn fully transparent or in PDF's invisible render mode (both read as alpha 0): what an
    OCR tool lays over a scanned page image, and what an injection hides on a typeset page."""
    return span.get("alpha", 255) == 0


def span_is_hidden(span: dict, page_rect: Box, rects: Sequence[_Rect], invisible_ok: bool = False) -> bool:
    """``invisible_ok``: invisible text counts as shown (the text layer of a searchable scan,
    ``ingest.reading``); too small, off the page or unreadable against its background still hides it.
    ``page_rect`` is the page's (x0, y0, x1, y1). Plain float arithmetic, what PyMuPDF's ``Rect`` tests
    (``is_empty``, ``intersects``, ``&``, ``get_area``) compute: a page of a code listing has thousands of
    spans, and building ``Rect`` objects for each was most of a document's parse time."""
    if span.get("size", 0) < MIN_READABLE_SIZE:
        return True
    if is_invisible(span):
        return not invisible_ok
    box: Box = span["bbox"]  # floats, as PyMuPDF's text dictionary gives them
    x0, y0, x1, y1 = box
    px0, py0, px1, py1 = page_rect
    if _empty(box) or _infinite(box):  # empty, or (as PyMuPDF reads it) no box at all
        return True
    if _empty(page_rect) or _infinite(page_rect):  # a page without an area shows nothing
        return True
    if not (x0 < px1 and px0 < x1 and y0 < py1 and py0 < y1):  # off the page
        return True
    inside = (min(x1, px1) - max(x0, px0)) * (min(y1, py1) - max(y0, py0))
    if inside < 0.5 * (x1 - x0) * (y1 - y0):
        return True
    fg = _span_rgb(int(span.get("color", 0)))
    bg = _background(box, rects)
    return abs(_luminance(fg) - _luminance(bg)) < MIN_CONTRAST and max(
        abs(a - b) for a, b in zip(fg, bg, strict=True)) < 0.25


def _empty(box: Sequence[float]) -> bool:
    """No width or no height (PyMuPDF's ``Rect.is_empty``)."""
    return box[0] >= box[2] or box[1] >= box[3]


def _infinite(box: Box) -> bool:
    return box[0] == box[1] == pymupdf.FZ_MIN_INF_RECT and box[2] == box[3] == pymupdf.FZ_MAX_INF_RECT


def _is_bold(span: dict) -> bool:
    return bool(span.get("flags", 0) & 16) or "bold" in str(span.get("font", "")).lower()


@dataclass
class VisibleLine:
    text: str
    bbox: Box  # union of the visible spans
    bold: bool
    size: float = 0.0  # the largest font size of its visible spans


def _union(boxes: Sequence[Sequence[float]]) -> Box:
    """The box around ``boxes`` (at least one), as PyMuPDF's ``Rect | Rect | …`` gives it: an empty box
    (no width or no height, e.g. an invisible span on a searchable scan) adds nothing unless all are
    empty (then the first is the result); MuPDF unites rectangles in 32-bit floats, so a union of two or
    more non-empty boxes is rounded to them, and one is itself."""
    solid = [b for b in boxes if not _empty(b)]
    if len(solid) <= 1:
        x0, y0, x1, y1 = (float(v) for v in (solid or boxes)[0])
        return x0, y0, x1, y1
    x0, y0, x1, y1 = array("f", (min(b[0] for b in solid), min(b[1] for b in solid),
                                 max(b[2] for b in solid), max(b[3] for b in solid)))
    return x0, y0, x1, y1


def visible_blocks(page: pymupdf.Page, invisible_ok: bool = False) -> tuple[list[list[VisibleLine]], int]:
    """The page's text blocks as lists of visible lines, and the number of hidden characters
    (``invisible_ok``: see ``span_is_hidden``)."""
    data = page.get_text("dict", flags=pymupdf.TEXT_PRESERVE_WHITESPACE | pymupdf.TEXT_PRESERVE_LIGATURES)
    rects = _filled_rects(page)
    r = page.rect
    page_rect = (float(r.x0), float(r.y0), float(r.x1), float(r.y1))
    blocks: list[list[VisibleLine]] = []
    hidden = 0
    for block in data.get("blocks", []):
        if block.get("type") != 0:
            continue
        lines: list[VisibleLine] = []
        for line in block.get("lines", []):
            shown: list[dict] = []
            for span in line.get("spans", []):
                if span_is_hidden(span, page_rect, rects, invisible_ok):
                    hidden += len(span.get("text", ""))
                else:
                    shown.append(span)
            text = "".join(span["text"] for span in shown).rstrip()
            inked = [span for span in shown if span["text"].strip()]  # bold, size and box are theirs
            if text.strip() and inked:
                bbox = _union([span["bbox"] for span in inked])
                lines.append(VisibleLine(text, bbox, all(_is_bold(span) for span in inked),
                                          max(float(span.get("size", 0.0)) for span in inked)))
        if lines:
            blocks.append(lines)
    return blocks, hidden


BODY_MARGIN = 1.0  # points: a heading set this much larger than the body text is a section title even as one word


def body_size(lines: Sequence[VisibleLine]) -> float:
    """The page's body font size: the largest size of the lines holding the most characters."""
    chars: dict[float, int] = {}
    for line in lines:
        key = round(line.size, 1)
        chars[key] = chars.get(key, 0) + len(line.text.strip())
    return max(chars, key=lambda k: (chars[k], k)) if chars else 0.0


def page_text(page: pymupdf.Page) -> tuple[str, tuple[Heading, ...], int]:
    """Visible text of one page, its bold heading lines, and the number of hidden characters."""
    blocks, hidden = visible_blocks(page)
    return (*lay_out(blocks), hidden)


def lay_out(blocks: Sequence[Sequence[VisibleLine]]) -> tuple[str, tuple[Heading, ...]]:
    """The page text of blocks of lines in reading order (a text layer's, or OCR's: ``ingest.ocr``) and
    its bold heading lines.

    Table rows found by ``retrieval.text.tables`` replace their cells: each row is one line ("VNE | Never-
    exceed speed | 149 KIAS") and its own paragraph, placed where the table's first cell was."""
    flat = [line for lines in blocks for line in lines]
    body = body_size(flat)
    cells = [Line(line.text, *line.bbox) for line in flat]
    found = find_tables(cells)
    table_of = {i: t for t, table in enumerate(found) for i in table.lines}  # line number -> its table
    numbers = count()
    emitted: set[int] = set()
    paragraphs: list[list[tuple[str, bool, bool]]] = []  # lines of each paragraph: (text, is heading, larger font)
    for lines in blocks:
        paragraphs.append([])
        for line in lines:
            t = table_of.get(next(numbers))
            if t is None:
                paragraphs[-1].append((line.text, line.bold and len(line.text.strip()) <= 120,
                                       line.size >= body + BODY_MARGIN))
            elif t not in emitted:  # the table's rows, where its first cell was; the block goes on after them
                emitted.add(t)
                paragraphs += [[(row, False, False)] for row in found[t].row_texts(cells)]
                paragraphs.append([])
    out = ""
    heads: list[Heading] = []
    for pi, para in enumerate(p for p in paragraphs if p):
        for li, (text, heading, larger) in enumerate(para):
            out += "\n" if li else "\n\n" if pi else ""
            if heading:
                heads.append(Heading(len(out), text.strip(), larger))
            out += text
    return out, tuple(heads)


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
    """The lines of ``text`` that are not blank, as (start, end, line)."""
    return [(m.start(), m.end(), m.group()) for m in re.finditer(r"[^\n]+", text) if m.group().strip()]


EDGE_LINES = 12  # headers/footers are looked for among this many lines at each edge of a page


def edge_signatures(text: str) -> set[str]:
    """Signatures of the lines near the top and bottom of one page (the candidates for running lines)."""
    lines = _lines_with_offsets(text)
    return {line_signature(t) for _, _, t in lines[:EDGE_LINES] + lines[-EDGE_LINES:]}


def running_need(pages: int) -> int:
    """On how many of ``pages`` pages a line must stand at an edge to be a running header or footer:
    a fifth of them, and at least 3."""
    return max(3, int(0.2 * pages + 0.999))


def find_running_lines(texts: Sequence[str]) -> set[str]:
    """Signatures of lines repeated near the top or bottom of many pages."""
    so_far = RunningSoFar()
    for text in texts:
        so_far.add(text)
    return {sig for sig in so_far.counts if sig in so_far}


class RunningSoFar:
    """The running lines ``find_running_lines`` would find in the pages added so far, kept up to date
    page by page (for a guess at the bounds of pages read before the whole document has been)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.pages = 0

    def add(self, text: str) -> None:
        self.counts.update(edge_signatures(text))
        self.pages += 1

    def __contains__(self, sig: object) -> bool:
        return isinstance(sig, str) and bool(sig) and self.counts[sig] >= running_need(self.pages)


def body_bounds(text: str, running: Container[str]) -> tuple[int, int]:
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
    """The title the PDF declares, else its file name made readable ("14 CFR Part 91 General ...").
    Control characters (a NUL, which Postgres cannot store) and runs of white space become one space."""
    declared = readable(str((doc.metadata or {}).get("title") or ""))
    if len(declared.split()) >= 2 and not declared.lower().startswith(("microsoft", "untitled")) \
            and not declared.lower().endswith((".doc", ".docx", ".pdf")):
        return declared
    stem = file_name.rsplit(".", 1)[0]
    return readable(re.sub(r"[_-]+", " ", stem))


class PageParts(NamedTuple):
    """What one page contributes before the document-wide pass (running headers and footers)."""

    text: str
    headings: tuple[Heading, ...]
    hidden: int  # characters hidden
    label: str | None
    read_by: str = "text"  # see ``Page``
    ocr_confidence: float | None = None
    ocr_doubtful: tuple[str, ...] = ()


def page_parts(page: pymupdf.Page) -> PageParts:
    """A page as its text layer gives it (``ingest.reading`` decides when OCR reads it instead)."""
    text, heads, hidden = page_text(page)
    return PageParts(text, heads, hidden, page_label(page))


def page_from(number: int, parts: PageParts, running: Container[str],
              injection: tuple[str, ...] = DEFAULT_RULES) -> Page:
    """Page ``number`` (1-based) with body bounds (``running`` lines excluded), body headings and
    untrusted spans (paragraphs the ``injection`` rule sets flag, ``retrieval.text.injection``)."""
    text = parts.text
    start, end = body_bounds(text, running)
    body_heads = tuple(h for h in parts.headings if start <= h.offset < end)
    return Page(number, parts.label, text, body_heads, parts.hidden, start, end,
                untrusted_spans(text, start, end, injection), parts.read_by, parts.ocr_confidence, parts.ocr_doubtful)


def pages_from(raw: Sequence[PageParts], running: Container[str],
               injection: tuple[str, ...] = DEFAULT_RULES) -> list[Page]:
    """The pages, with body bounds (``running`` lines excluded), body headings and untrusted spans."""
    return [page_from(i + 1, parts, running, injection) for i, parts in enumerate(raw)]


def extract(doc: pymupdf.Document, progress: Iterable[int] | None = None) -> list[Page]:
    """Every page of ``doc`` with visible text, label, headings and body bounds (in this process;
    ingest parses in a limited child process, ``ingest.isolate``)."""
    raw = [page_parts(doc[i]) for i in (progress if progress is not None else range(doc.page_count))]
    return pages_from(raw, find_running_lines([r[0] for r in raw]))
