"""PyMuPDF, without the add-ons PyMuPDF 2 loads on import when they are installed (and its wheel
requires them): ``pymupdf.layout`` starts an ONNX layout model and ``pymupdf4llm`` an OCR helper,
about 0.3 s and onnxruntime in every process that reads a PDF, for features ingest never calls
(page text, fonts, colours and labels come out bit for bit the same without them, checked on the
test corpora). Import ``pymupdf`` from here."""

from __future__ import annotations

import sys

for _name in ("pymupdf.layout", "pymupdf4llm"):
    if _name not in sys.modules:
        sys.modules[_name] = None  # type: ignore[assignment]  (import of it raises ImportError: skipped)

import pymupdf  # noqa: E402

__all__ = ["pymupdf"]
