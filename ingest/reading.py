"""How each page is read: its text layer, the text layer of a searchable scan, or OCR (parse child).

* **Text layer** (most pages): ``ingest.pdf.page_parts``; invisible text on such a page stays hidden
  and untrusted.
* **OCR** (``ingest.ocr``) for a page with no usable text: fewer than ``MIN_TEXT_CHARS`` visible
  characters while an image or drawing could hold text (``how``; an empty page is left empty, and a
  page number beside a rule or an ornament keeps its text layer). With
  ``CHAPTERVERSE_OCR_MODE=always`` every page is read by OCR; with ``off``, none.
* **A searchable scan's own text layer**: invisible text over an image covering at least
  ``SCAN_COVER`` of the page is what an office scanner or OCRmyPDF lays over the page image. It is
  read as the page's text (``read_by="scan-layer"``) when it reads as words (``layer_quality``: at
  least ``GOOD_LAYER`` of its tokens that hold a letter or digit are plausible words or numbers); a
  garbled layer is set aside and the page read by our own OCR instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ingest.mupdf import pymupdf
from ingest.ocr import Engine, OcrOptions, read
from ingest.pdf import PageParts, lay_out, page_parts, visible_blocks

MIN_TEXT_CHARS = 40  # visible characters below which a page has no usable text layer
SCAN_COVER = 0.6  # share of the page an image covers on a scanned page
GOOD_LAYER = 0.75  # share of plausible tokens from which a scan's text layer is trusted
_TOKEN = re.compile(r"\S+")
_SYMBOLS = re.compile(r"^[^\w]+$")  # "::=", "|", "(", "..." : no letter, no digit
_WORD = re.compile(r"^[(\"'\[{<]*(?:[A-Za-zÀ-ÿ]+(?:[-'’][A-Za-zÀ-ÿ]+)*|[\d][\d.,:/-]*%?|[A-Z]{1,4}-?\d+[\w.-]*)"
                   r"[)\"'\]}>.,;:!?]*$")
_VOWEL = re.compile(r"[aeiouyàâäéèêëîïôöûüAEIOUYÀÂÄÉÈÊËÎÏÔÖÛÜ]")


def image_cover(page: pymupdf.Page) -> float:
    """The share of the page covered by images (their boxes clipped to the page, summed, at most 1)."""
    area = abs(page.rect)
    if not area:
        return 0.0
    covered = sum(abs(pymupdf.Rect(info["bbox"]) & page.rect) for info in page.get_image_info())
    return min(1.0, covered / area)


def layer_quality(text: str) -> float:
    """The share of a text layer's tokens that read as words or numbers: a letter run with a vowel (or a
    short one, "by", "St"), a number, a code like "AC-91", each possibly in brackets, braces or quotes;
    OCR garbage ("iI1l|", "ﬁ~^", "Tlie_rn") is not. Tokens of symbols alone ("::=", "|", "...") count
    neither way: a grammar or a code listing is full of them (a language manual's scanned syntax page
    read 0.48 when they counted, and its exact layer went to OCR, which read "::=" as ":="). 0 for a
    layer without tokens."""
    tokens = [t for t in _TOKEN.findall(text) if not _SYMBOLS.match(t)]
    if not tokens:
        return 0.0
    good = sum(1 for t in tokens if _WORD.match(t) and (len(t) <= 3 or _VOWEL.search(t) or t[0].isdigit()))
    return good / len(tokens)


def _chars(parts: PageParts) -> int:
    return sum(len(line.strip()) for line in parts.text.splitlines())


MIN_PICTURE_COVER = 0.1  # an image over this share of a page with almost no text may be a picture of text
OUTLINED_PATHS = 100  # vector paths from which a page with almost no text may hold words drawn as outlines


def how(parts: PageParts, cover: float, drawings: int, mode: str) -> str:
    """``"text"``, ``"layer"`` (try the invisible text layer of a scan) or ``"ocr"``, for a page whose
    text layer gave ``parts``, with images covering ``cover`` of it and ``drawings`` vector paths.
    A page without text is read by OCR when anything is drawn on it; a page with a few words (a page
    number, a running head) only when a picture covers a part of it or its paths are many enough to
    be words drawn as outlines: a rule, an ornament or a small logo gives OCR nothing to read."""
    if mode == "off":
        return "text"
    if mode == "always":
        return "ocr"
    chars = _chars(parts)
    if chars >= MIN_TEXT_CHARS:
        return "text"
    if cover >= SCAN_COVER:
        return "layer"
    if chars == 0:
        return "ocr" if cover > 0 or drawings else "text"
    return "ocr" if cover >= MIN_PICTURE_COVER or drawings >= OUTLINED_PATHS else "text"


SCAN_CONTENT_BYTES = 4096  # a scanned page's drawing instructions only place its image (compressed size)
# A page image with fewer pixels than this resolution over SCAN_COVER of the page is a logo, an icon or a
# decoration (a LaTeX guide's 26 x 7 pixel ornaments), not a scan: scanners write 100-600 dpi.
MIN_SCAN_DPI = 50


def _page_sized_image(page: pymupdf.Page) -> bool:
    """Whether the page's images have between them the pixels (their declared widths and heights, nothing
    decoded; a scan may be stored in strips) to cover SCAN_COVER of the page at MIN_SCAN_DPI."""
    need = SCAN_COVER * (page.rect.width / 72 * MIN_SCAN_DPI) * (page.rect.height / 72 * MIN_SCAN_DPI)
    images = page.get_images()
    return bool(images) and sum(max(0, int(i[2])) * max(0, int(i[3])) for i in images) >= need


def looks_scanned(page: pymupdf.Page, mode: str) -> bool:
    """A quick guess, from the file's structure alone, whether OCR will read the page: it shows an image
    with the pixels of a page (``_page_sized_image``) and its drawing instructions are short (their stored
    length, nothing decompressed or laid out, so a hostile file's limits are still met page by page as it
    is read). What a document of more pages than ``CHAPTERVERSE_OCR_MAX_PAGES`` is checked with before any
    page is read."""
    if mode == "always":
        return True
    if not _page_sized_image(page):
        return False
    doc = page.parent
    stored = 0
    for xref in page.get_contents():
        kind, value = doc.xref_get_key(xref, "Length")
        if kind != "int":  # an indirect length: not worth following here
            return False
        stored += int(value)
    return stored < SCAN_CONTENT_BYTES


def read_page(page: pymupdf.Page, options: OcrOptions, engine: Engine,
              before_ocr: Callable[[], object] | None = None) -> PageParts:
    """The page's parts, read as the module docstring says; ``before_ocr()`` is called before a page
    is read by OCR (the child reports it and raises its CPU limit)."""
    parts = page_parts(page)
    if options.mode == "off" or (options.mode == "auto" and _chars(parts) >= MIN_TEXT_CHARS):
        return parts  # the common case, without looking at images
    cover = image_cover(page)
    kind = how(parts, cover, len(page.get_drawings()), options.mode)
    if kind == "text":
        return parts
    if kind == "layer":
        shown, hidden = visible_blocks(page, invisible_ok=True)
        text, heads = lay_out(shown)
        if len(text.strip()) >= MIN_TEXT_CHARS and layer_quality(text) >= GOOD_LAYER:
            return PageParts(text, heads, hidden, parts.label, "scan-layer")
    if before_ocr is not None:
        before_ocr()
    return read(page, options, engine, parts.hidden)._replace(label=parts.label)  # labels: ``ingest.labels``
