"""Scanned copies of PDFs, and how well the parser reads them back (``chapterverse eval scans``).

A "scanned" copy is what a scanner would give for a handbook: each page rendered to a grey image at
a given resolution, JPEG-encoded (quality 75) and placed as the only thing on a page of the same size,
with no text layer. With ``skew_noise`` each page is also rotated by a small random angle (within
±1.5°) and gets Gaussian noise (sigma 8 grey levels), as a sheet fed crooked through a cheap scanner
would; both are deterministic from the seed and the page index. The copy keeps the source's file name
(the caller gives the directory and name), so question sets that name documents by file name apply to it.

``measure`` parses the original and the copy with the product's parser (``ingest.isolate.parse``, in
its limited child process, exactly as an ingest does) and compares each page's words
(``word_agreement``): the share of the words read from the copy that are words of the original page
(``ocr_in_reference``, how much of what OCR says is right) and the share of the original page's words
that OCR found (``reference_in_ocr``, how much it misses), as multisets of normalised words
(``retrieval.text.textnorm.normalize``: case, ligatures, quotes, dashes and line-break hyphens
forgiven, as quote verification forgives them).
"""

from __future__ import annotations

import io
import json
import re
import resource
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ingest.mupdf import pymupdf
from retrieval.text.textnorm import normalize

JPEG_QUALITY = 75
MAX_SKEW_DEGREES = 1.5
NOISE_SIGMA = 8.0  # grey levels
WORST_PAGES = 5
ENGINE = "rapidocr 3.10.0 PP-OCRv6 small, via ingest.isolate.parse"
PARSE_CPU_S = 100_000  # the measurement's parse limit: generous, so a slow OCR is timed, not refused
_WORD = re.compile(r"\w+(?:[.,'’/-]\w+)*")  # "91.113", "10,000", "pilot's", "and/or" are one word each


# ---------------------------------------------------------------------------------------------
# the scanned copy

def spread(n: int, max_pages: int | None) -> list[int]:
    """0-based indexes of ``max_pages`` pages spread evenly over ``n`` (all ``n`` when None or more)."""
    if max_pages is None or max_pages >= n:
        return list(range(n))
    return [round(i * n / max_pages) for i in range(max(max_pages, 0))]


def _skewed_noisy_jpeg(pix: Any, rng: np.random.Generator) -> bytes:
    """The grey pixmap rotated by a random angle within ±MAX_SKEW_DEGREES (white fill, same size),
    with Gaussian noise of NOISE_SIGMA grey levels, as JPEG bytes."""
    from PIL import Image  # noqa: PLC0415

    grey = np.frombuffer(pix.samples_mv, dtype=np.uint8).reshape(pix.height, pix.stride)[:, :pix.width]
    angle = float(rng.uniform(-MAX_SKEW_DEGREES, MAX_SKEW_DEGREES))
    img = Image.fromarray(np.ascontiguousarray(grey), mode="L").rotate(
        angle, resample=Image.Resampling.BICUBIC, expand=False, fillcolor=255)
    noisy = np.asarray(img, dtype=np.float32) + rng.normal(0.0, NOISE_SIGMA, size=(img.height, img.width))
    out = io.BytesIO()
    Image.fromarray(np.clip(np.rint(noisy), 0, 255).astype(np.uint8), mode="L").save(
        out, format="JPEG", quality=JPEG_QUALITY, dpi=(pix.xres, pix.yres))
    return out.getvalue()


def scan_copy(src: Path, dest: Path, dpi: int, *, skew_noise: bool = False, seed: int = 0,
              pages: Sequence[int] | None = None) -> int:
    """Write to ``dest`` an image-only copy of the PDF ``src``: each page (or only the 0-based
    ``pages``, in that order) rendered grey at ``dpi``, JPEG-encoded and placed as a full-page image on
    a page of the same size, no text layer; with ``skew_noise``, rotated and noised first (deterministic
    from ``seed`` and the page index). The title is copied over. Returns the copy's page count."""
    with pymupdf.open(src) as doc, pymupdf.open() as out:
        for i in (range(doc.page_count) if pages is None else pages):
            page = doc[i]
            pix = page.get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY, alpha=False)
            if skew_noise:
                jpeg = _skewed_noisy_jpeg(pix, np.random.default_rng([seed, i]))
            else:
                jpeg = pix.tobytes("jpeg", jpg_quality=JPEG_QUALITY)
            rect = page.rect  # as displayed (a /Rotate of the page is in the rendering and in this size)
            copy = out.new_page(width=rect.width, height=rect.height)
            copy.insert_image(copy.rect, stream=jpeg)
        title = (doc.metadata or {}).get("title") or ""
        if title:
            out.set_metadata({"title": title})
        dest.parent.mkdir(parents=True, exist_ok=True)
        out.save(dest, garbage=3, deflate=True)
        return out.page_count


# ---------------------------------------------------------------------------------------------
# the comparison

def gold_pages(questions: Path) -> dict[str, list[int]]:
    """The pages (0-based indexes) each document's answerable questions name as their evidence."""
    out: dict[str, set[int]] = {}
    for q in json.loads(questions.read_text(encoding="utf-8")):
        if q.get("answerable") and q.get("document"):
            out.setdefault(q["document"], set()).update(int(p) - 1 for p in q.get("pages", []))
    return {doc: sorted(pages) for doc, pages in out.items()}


def mixed_copy(src: Path, dest: Path, dpi: int, pages: Sequence[int]) -> int:
    """A copy of ``src`` in which only ``pages`` (0-based) are scanned (a grey JPEG at ``dpi``, no text
    layer, as ``scan_copy`` makes them); every other page keeps its text layer, and the page numbers
    stay the same, so a question set's page numbers still apply. Returns the pages scanned."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with pymupdf.open(src) as doc:
        wanted = sorted({p for p in pages if 0 <= p < doc.page_count})
        for i in wanted:
            page = doc[i]
            rect = page.rect
            picture = page.get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY).tobytes("jpeg", jpg_quality=JPEG_QUALITY)
            doc.delete_page(i)
            doc.new_page(pno=i, width=rect.width, height=rect.height).insert_image(
                pymupdf.Rect(0, 0, rect.width, rect.height), stream=picture)
        doc.save(dest, garbage=3, deflate=True)
    return len(wanted)


def words(text: str) -> Counter[str]:
    """The normalised words of ``text`` as a multiset."""
    return Counter(_WORD.findall(normalize(text)))


def _ratio(matched: int, total: int, other: int) -> float:
    if total == 0:
        return 1.0 if other == 0 else 0.0
    return matched / total


def _agreement(ref: Counter[str], ocr: Counter[str]) -> dict[str, Any]:
    n, m = sum(ref.values()), sum(ocr.values())
    matched = sum((ref & ocr).values())
    return {"reference_words": n, "ocr_words": m, "matched": matched,
            "ocr_in_reference": _ratio(matched, m, n), "reference_in_ocr": _ratio(matched, n, m)}


def word_agreement(reference: str, ocr: str) -> dict:
    """How far the words of ``ocr`` agree with those of ``reference`` (both normalised, compared as
    multisets): ``ocr_in_reference`` is the share of OCR's words found in the reference, and
    ``reference_in_ocr`` the share of the reference's words OCR found. When a side has no words the
    ratio is 1.0 if neither has any, else 0.0."""
    a = _agreement(words(reference), words(ocr))
    return {k: a[k] for k in ("reference_words", "ocr_words", "ocr_in_reference", "reference_in_ocr")}


def number_check(reference: Counter[str], ocr: Counter[str], doubtful: Sequence[str]) -> dict[str, int]:
    """OCR's words holding a digit, split by whether OCR marked them doubtful (``Page.ocr_doubtful``),
    and how many of each are not among the reference's words (misread): the evidence for what a
    doubtful number in a quote should do."""
    marked = set(words(" ".join(doubtful)))
    out = {"doubtful_numbers": 0, "doubtful_numbers_misread": 0, "confident_numbers": 0, "confident_numbers_misread": 0}
    for word, n in ocr.items():
        if not any(ch.isdigit() for ch in word):
            continue
        kind = "doubtful" if word in marked else "confident"
        out[f"{kind}_numbers"] += n
        out[f"{kind}_numbers_misread"] += max(0, n - reference.get(word, 0))
    return out


def _summary(rows: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    """Micro-averaged agreement (summed matches over summed words), per-page extremes, speed."""
    n = sum(r["reference_words"] for r in rows)
    m = sum(r["ocr_words"] for r in rows)
    matched = sum(r["matched"] for r in rows)
    per_page = [r["ocr_in_reference"] for r in rows]
    return {
        "pages": len(rows),
        "ocr_seconds": round(seconds, 2),
        "pages_per_s": round(len(rows) / seconds, 3) if seconds > 0 else None,
        "reference_words": n, "ocr_words": m, "matched_words": matched,
        "ocr_in_reference": round(_ratio(matched, m, n), 4) if rows else None,
        "reference_in_ocr": round(_ratio(matched, n, m), 4) if rows else None,
        "page_ocr_in_reference_min": round(min(per_page), 4) if per_page else None,
        "page_ocr_in_reference_p10": round(float(np.percentile(per_page, 10)), 4) if per_page else None,
        **{key: sum(r.get(key, 0) for r in rows) for key in ("doubtful_numbers", "doubtful_numbers_misread",
                                                             "confident_numbers", "confident_numbers_misread")},
    }


def _peak_child_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)  # Linux: KB


def copy_path(workdir: Path, dpi: int, skew_noise: bool, pdf: Path) -> Path:
    """Where the scanned copy of ``pdf`` goes: ``workdir/<dpi>dpi[_skew]/<file name>``."""
    return workdir / f"{dpi}dpi{'_skew' if skew_noise else ''}" / pdf.name


def measure(pdfs: Sequence[Path], workdir: Path, dpi: int, skew_noise: bool, max_pages: int | None) -> dict:
    """For each PDF, make its scanned copy (of ``max_pages`` pages spread over it, or all), parse the
    original and the copy with the product's parser, and compare them page by page. Returns the
    figures per document and over all (a document whose copy the parser refuses is reported with its
    error and left out of the totals)."""
    from ingest.isolate import Limits, parse  # noqa: PLC0415
    from ingest.sources import InputError, Source  # noqa: PLC0415

    limits = replace(Limits(), cpu_s=PARSE_CPU_S)

    def read(path: Path) -> Any:
        return parse(Source(name=path.name, origin=str(path), data=path.read_bytes(), url=None), limits)

    documents: list[dict[str, Any]] = []
    every: list[dict[str, Any]] = []
    ocr_seconds = 0.0
    for pdf in pdfs:
        with pymupdf.open(pdf) as doc:
            total = doc.page_count
        indexes = spread(total, max_pages)
        copy = copy_path(workdir, dpi, skew_noise, pdf)
        scan_copy(pdf, copy, dpi, skew_noise=skew_noise, seed=0, pages=indexes)
        entry: dict[str, Any] = {"document": pdf.name, "source": str(pdf), "copy": str(copy),
                                 "document_pages": total, "page_numbers": [i + 1 for i in indexes]}
        try:
            original = {p.number: p.text for p in read(pdf).pages}
            start = time.perf_counter()
            scanned = read(copy)
            seconds = time.perf_counter() - start
        except InputError as exc:
            entry["error"] = str(exc)
            entry["peak_child_rss_mb"] = _peak_child_rss_mb()
            documents.append(entry)
            continue
        rows = []
        for page in scanned.pages:  # the copy's page k is the original's page indexes[k - 1] + 1
            number = indexes[page.number - 1] + 1
            reference, ocr_words = words(original.get(number, "")), words(page.text)
            rows.append({"document": pdf.name, "page": number, **_agreement(reference, ocr_words),
                         **number_check(reference, ocr_words, page.ocr_doubtful)})
        ocr_seconds += seconds
        every += rows
        entry.update(_summary(rows, seconds))
        entry["peak_child_rss_mb"] = _peak_child_rss_mb()
        entry["per_page"] = [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items() if k != "document"}
                             for r in rows]
        documents.append(entry)
    worst = sorted(every, key=lambda r: (min(r["ocr_in_reference"], r["reference_in_ocr"]),
                                         r["ocr_in_reference"], r["document"], r["page"]))[:WORST_PAGES]
    return {
        "dpi": dpi, "skew_noise": skew_noise, "seed": 0, "max_pages": max_pages,
        "jpeg_quality": JPEG_QUALITY,
        "skew_noise_settings": {"max_degrees": MAX_SKEW_DEGREES, "noise_sigma": NOISE_SIGMA} if skew_noise else None,
        "engine": ENGINE,
        "parse_limits": {"cpu_s": limits.cpu_s, "memory_mb": limits.memory_mb},
        "definitions": {
            "ocr_in_reference": "matched words / words read from the scanned copy (normalised words as "
                                "multisets; summed over pages for the totals)",
            "reference_in_ocr": "matched words / words of the original's text layer",
            "ocr_seconds": "wall seconds of ingest.isolate.parse on the scanned copy (child start-up included)",
            "page_ocr_in_reference_p10": "10th percentile over pages (linear interpolation)",
            "peak_child_rss_mb": "largest resident set of any child process so far (the parser's, original "
                                 "and copy), from getrusage(RUSAGE_CHILDREN) after the document",
            "worst_pages": f"the {WORST_PAGES} pages with the lowest of the two ratios",
            "doubtful_numbers": "OCR's words holding a digit that it read with a confidence under "
                                "ingest.ocr.DOUBTFUL (marked in quotes); *_misread: not among the text layer's words",
        },
        "total": {**_summary(every, ocr_seconds), "documents": sum("error" not in d for d in documents),
                  "documents_refused": sum("error" in d for d in documents),
                  "peak_child_rss_mb": _peak_child_rss_mb()},
        "worst_pages": [{"document": r["document"], "page": r["page"],
                         "ocr_in_reference": round(r["ocr_in_reference"], 4),
                         "reference_in_ocr": round(r["reference_in_ocr"], 4),
                         "reference_words": r["reference_words"], "ocr_words": r["ocr_words"]} for r in worst],
        "documents": documents,
    }
