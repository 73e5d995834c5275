"""Reading a page image by OCR, offline, in the parse child (``ingest.isolate``).

The engine is RapidOCR 3.10 (``rapidocr`` on PyPI, Apache-2.0) on onnxruntime: PP-OCRv6 small text
detection and recognition, whose ONNX files ship inside the wheel (with the orientation classifier's,
given too so nothing is looked for, but not used: ``_found``). The engine is always given those files' paths, so it never looks for a model elsewhere and
never downloads (``tests/test_ocr.py`` runs it with every socket refused). The recogniser is one
multilingual model (Latin, Cyrillic-free: English, German, French, Spanish… and Chinese, Japanese):
``CHAPTERVERSE_OCR_LANGUAGES`` is checked against the languages the shipped model reads
(``retrieval.settings.ocr_languages``).

A page is rendered grey at ``OcrOptions.dpi`` (150 by default; a page larger than ``max_pixels`` at
that resolution is read at a lower one, and refused below ``MIN_DPI``), the engine finds text lines
(with each word's confidence), and ``ingest.ocr_layout`` puts them in reading order. What a reader
could not see is not content, as on a text layer: a line printed so faint that it barely differs from
the paper (``MIN_CONTRAST``) or so small that it is under ``ingest.pdf.MIN_FONT_SIZE`` is dropped and
counted as hidden. A page turned on its side or upside down is read turned upright (``_found``).

The result is a page's parts as the text layer would give them (``ingest.pdf.PageParts``), with
``read_by="ocr"``, the page's confidence (characters weighing) and the words holding a digit that were
read with a confidence under ``DOUBTFUL`` (``Page.ocr_doubtful``: a quote holding one is marked).
"""

from __future__ import annotations

import importlib.util
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ingest.mupdf import pymupdf
from ingest.ocr_layout import HEADING_RATIO, Box, blocks, body_height
from ingest.pdf import MIN_FONT_SIZE, PageParts, VisibleLine, lay_out

MIN_DPI = 72  # below this, body text is too small to read: the page is refused instead
MIN_CONTRAST = 0.12 * 255  # grey levels between a line's ink and its paper (ingest.pdf.MIN_CONTRAST)
DOUBTFUL = 0.9  # a word with a digit read below this confidence is doubtful (evidence: results/ocr/README.md)
REC_BATCH = 2  # lines recognised at once: 6 (the default) ran out of the parser's 2 GB address space on ACS p. 5
SPLIT_GAP = 1.0  # line heights of white between two words that cut a detected line in two
UPSIDE_DOWN = 0.75  # a page whose lines read with less mean confidence is tried turned upside down
_MODELS = {"Det": "PP-OCRv6_det_small.onnx", "Rec": "PP-OCRv6_rec_small.onnx",
           "Cls": "ch_ppocr_mobile_v2.0_cls_mobile.onnx"}


@dataclass(frozen=True)
class OcrOptions:
    """How the parse child reads pages by OCR (``CHAPTERVERSE_OCR_*``, ``retrieval.settings.OcrSettings``)."""

    mode: str = "auto"  # auto: pages without usable text; always: every page; off: never
    languages: tuple[str, ...] = ("en",)
    dpi: int = 150
    max_pixels: int = 40_000_000  # of one page image
    max_pages: int = 500  # pages of one document read by OCR (about half an hour)
    page_cpu_s: int = 60  # CPU seconds one OCR page may add to the parser's limit
    threads: int = 0  # onnxruntime threads; 0: every core


class OcrRefused(Exception):
    """A page OCR will not read (a limit of ``OcrOptions``); the message names the limit."""


def _package_dir() -> Path:
    spec = importlib.util.find_spec("rapidocr")
    if spec is None or spec.origin is None:
        raise OcrRefused("OCR needs the rapidocr package (pip install rapidocr==3.10.0)")
    return Path(spec.origin).parent


class Engine:
    """RapidOCR with the models inside its wheel; built on first use (about 0.3 s)."""

    def __init__(self, threads: int = 0) -> None:
        self.threads = threads or os.cpu_count() or 1
        self._ocr: Any = None

    def _engine(self) -> Any:
        if self._ocr is None:
            from rapidocr import RapidOCR  # noqa: PLC0415  (heavy; only the parse child reads scans)

            models = _package_dir() / "models"
            params: dict[str, Any] = {f"{kind}.model_path": str(models / name) for kind, name in _MODELS.items()}
            params.update({"Global.log_level": "error", "Global.return_word_box": True, "Global.use_cls": False,
                           "Rec.rec_batch_num": REC_BATCH,
                           "EngineConfig.onnxruntime.intra_op_num_threads": self.threads,
                           "EngineConfig.onnxruntime.inter_op_num_threads": 1})
            self._ocr = RapidOCR(params=params)
        return self._ocr

    def __call__(self, image: Any) -> list[tuple[list[list[float]], str, float, tuple[tuple[str, float], ...]]]:
        """Text lines of a grey image: (quadrilateral in pixels, text, confidence, words), a line the
        detector ran across a gap wider than ``SPLIT_GAP`` line heights cut there (``split_line``)."""
        result = self._engine()(image)
        if result.boxes is None:
            return []
        words = list(result.word_results or ()) + [()] * len(result.txts)
        return [piece for quad, text, score, line_words in zip(result.boxes, result.txts, result.scores, words)
                for piece in split_line(quad.tolist(), str(text), float(score), line_words)]


def split_line(quad: list[list[float]], text: str, score: float, words: Sequence[Any]) -> list[tuple]:
    """One detected line, or its pieces where the white between two words is wider than ``SPLIT_GAP``
    times the line's height: the detector runs a line across a narrow gutter ("manage- the" from two
    columns of 14 CFR at 150 dpi) and across the cells of a table; cut, each column and cell is a box
    of its own for ``ingest.ocr_layout``. A piece's confidence is its words' lowest."""
    parsed = [(str(w[0]), float(w[1]), w[2]) for w in words if len(w) >= 3 and str(w[0]).strip()]
    height = _size(quad)[1]
    if len(parsed) < 2 or height <= 0:
        return [(quad, text, score, tuple((w, s) for w, s, _ in parsed))]
    pieces: list[list[tuple[str, float, Any]]] = [[parsed[0]]]
    for word in parsed[1:]:
        gap = min(p[0] for p in word[2]) - max(p[0] for p in pieces[-1][-1][2])
        if gap > SPLIT_GAP * height:
            pieces.append([])
        pieces[-1].append(word)
    if len(pieces) == 1:
        return [(quad, text, score, tuple((w, s) for w, s, _ in parsed))]
    out = []
    for piece in pieces:
        xs = [p[0] for _, _, q in piece for p in q]
        ys = [p[1] for p in quad]
        out.append(([[min(xs), min(ys)], [max(xs), min(ys)], [max(xs), max(ys)], [min(xs), max(ys)]],
                    " ".join(w for w, _, _ in piece), min(s for _, s, _ in piece), tuple((w, s) for w, s, _ in piece)))
    return out


def render(page: pymupdf.Page, options: OcrOptions) -> tuple[Any, float]:
    """The page as a grey image and its resolution (dpi), at most ``max_pixels`` pixels."""
    import numpy as np  # noqa: PLC0415

    area = page.rect.width * page.rect.height / 72 ** 2  # square inches
    dpi = min(options.dpi, math.sqrt(options.max_pixels / area)) if area > 0 else options.dpi
    if dpi < MIN_DPI:
        raise OcrRefused(f"it is {page.rect.width:,.0f} × {page.rect.height:,.0f} points: too large to read by OCR "
                         f"at {MIN_DPI} dpi within {options.max_pixels:,} pixels (CHAPTERVERSE_OCR_MAX_PIXELS)")
    pix = page.get_pixmap(dpi=int(dpi), colorspace=pymupdf.csGRAY, alpha=False)
    image = np.frombuffer(pix.samples, dtype=np.uint8).reshape(pix.height, pix.width, pix.n)[:, :, 0]
    return image, int(dpi)


def _found(engine: Engine, image: Any) -> tuple[Any, list]:
    """The engine's lines, read with the page turned upright: when most lines stand on their side both
    quarter turns are tried, and when the words read poorly (``UPSIDE_DOWN``) the half turn; the read
    with the most confident characters wins. (PP-OCR's per-line orientation classifier is not used: on
    clean 150 dpi scans of FAA pages it turned upright lines over and garbled them.)"""
    import numpy as np  # noqa: PLC0415

    found = engine(image)
    upright = sum(1 for quad, *_ in found if _size(quad)[0] >= _size(quad)[1])
    if found and upright < len(found) / 2:
        turns = (1, 3)
    elif found and (confidence_of(found) or 1.0) < UPSIDE_DOWN:
        turns = (2,)
    else:
        return image, found
    tries = [(image, found)] + [(np.rot90(image, k), engine(np.rot90(image, k))) for k in turns]
    return max(tries, key=lambda t: sum(len(text) * score for _, text, score, _ in t[1]))


def confidence_of(found: list) -> float | None:
    """The mean confidence of the engine's lines (``mean_confidence``)."""
    return mean_confidence((score, len(text)) for _, text, score, _ in found)


def mean_confidence(scored: Iterable[tuple[float, int]]) -> float | None:
    """The mean of (confidence, characters) pairs, each weighing as many characters as it holds; None
    without characters. What a page's, a document's and a read's confidence all are."""
    pairs = list(scored)
    chars = sum(n for _, n in pairs)
    return sum(c * n for c, n in pairs) / chars if chars else None


def _size(quad: Sequence[Sequence[float]]) -> tuple[float, float]:
    xs, ys = [p[0] for p in quad], [p[1] for p in quad]
    return max(xs) - min(xs), max(ys) - min(ys)


def _contrast(image: Any, x0: int, y0: int, x1: int, y1: int) -> float:
    import numpy as np  # noqa: PLC0415

    cut = image[max(0, y0):max(0, y1), max(0, x0):max(0, x1)]
    if cut.size == 0:
        return 0.0
    low, high = np.percentile(cut, (5, 95))
    return float(high - low)


def boxes_of(image: Any, found: list, dpi: float) -> tuple[list[Box], int]:
    """The engine's lines as boxes in page points, and the characters dropped as unreadable (too faint
    or too small)."""
    scale = 72.0 / dpi
    out: list[Box] = []
    hidden = 0
    for quad, text, score, words in found:
        if not text.strip():
            continue
        xs, ys = [p[0] for p in quad], [p[1] for p in quad]
        x0, y0, x1, y1 = min(xs), min(ys), max(xs), max(ys)
        if (y1 - y0) * scale * 0.7 < MIN_FONT_SIZE or _contrast(image, int(x0), int(y0), int(x1), int(y1)) < MIN_CONTRAST:
            hidden += len(text)
            continue
        out.append(Box(text.strip(), score, x0 * scale, y0 * scale, x1 * scale, y1 * scale, words))
    return out, hidden


def doubtful_words(boxes: Sequence[Box], threshold: float = DOUBTFUL) -> tuple[str, ...]:
    """Words holding a digit that were read with a confidence under ``threshold`` (each once)."""
    found: dict[str, None] = {}
    for b in boxes:
        for word, score in b.words or ((w, b.score) for w in b.text.split()):
            if score < threshold and any(ch.isdigit() for ch in word):
                found[word.strip(".,;:()[]")] = None
    return tuple(found)


def confidence(boxes: Sequence[Box]) -> float | None:
    """The mean confidence of the page's boxes (``mean_confidence``), to 4 places."""
    mean = mean_confidence((b.score, len(b.text)) for b in boxes)
    return None if mean is None else round(mean, 4)


def visible_lines(paragraphs: Sequence[Sequence[Box]]) -> list[list[VisibleLine]]:
    """Paragraphs of boxes as the text layer's blocks of lines (``ingest.pdf.lay_out`` reads either).
    A line set much taller than the body's is bold for ``lay_out``: a heading the chunker can use."""
    flat = [b for para in paragraphs for b in para]
    body = body_height(flat) if flat else 1.0
    return [[VisibleLine(b.text, (float(b.x0), float(b.y0), float(b.x1), float(b.y1)), b.height >= HEADING_RATIO * body and len(b.text) <= 120,
                         round(b.height * 0.7, 1)) for b in para] for para in paragraphs]


def read(page: pymupdf.Page, options: OcrOptions, engine: Engine, hidden: int = 0) -> PageParts:
    """The page's parts read by OCR (``hidden``: characters its text layer hid, counted on)."""
    image, dpi = render(page, options)
    image, found = _found(engine, image)
    boxes, faint = boxes_of(image, found, dpi)
    text, heads = lay_out(visible_lines(blocks(boxes)))
    return PageParts(text, heads, hidden + faint, page.get_label() or None, "ocr", confidence(boxes),
                     doubtful_words(boxes))
