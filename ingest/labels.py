"""Printed page labels ("iv", "A-3", "5-12"), every page's in one pass.

A PDF's page labels are a list of rules (PDF 32000-1, 12.4.2): from page ``startpage`` (0-based) on,
a page is labelled ``prefix`` followed by its number in ``style`` (``D`` decimal, ``r``/``R`` roman,
``a``/``A`` letters, none: the prefix alone), counting from ``firstpagenum`` at the rule's first page.
PyMuPDF's ``Page.get_label()`` reads and walks all the rules again for every page, so a document of
5,000 pages and 5,000 rules took minutes to read (issue 39); ``page_labels`` reads them once
(``Document.get_page_labels()``, the same parse of each rule ``get_label`` uses) and ``expand``s them.

The labels are ``get_label()``'s, with three deliberate differences: letters past "z" follow the PDF
standard ("aa", "bb", …, "zz", "aaa"; PyMuPDF counts "aa", "ab" like spreadsheet columns), a label
is made readable (control characters and runs of white space become one space, ends trimmed), and
a label that would be longer than ``MAX_LABEL_CHARS`` characters is no label: the page is cited by its
number instead (a label is printed in every citation of its page; cutting it could cite a page that
is not there). A number too big to print within that limit is not even written out (a hostile rule
starting at page 10^12 in roman numerals would be a gigabyte of "M").
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ingest.mupdf import pymupdf

MAX_LABEL_CHARS = 32  # longer labels are dropped: the page is cited by its number
MAX_PREFIX_CHARS = 16 * MAX_LABEL_CHARS  # a rule's prefix longer than this is not read: its pages have no label
_UNPRINTABLE = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})  # control, format, surrogate, line/paragraph separators
_ROMAN = ((1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"), (50, "L"), (40, "XL"),
          (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"))


def roman(n: int) -> str:
    """``n`` in upper-case roman numerals ("" for 0 or less, as PyMuPDF; "MMMM" for 4000)."""
    out = []
    for value, letters in _ROMAN:
        count, n = divmod(n, value) if n > 0 else (0, n)
        out.append(letters * count)
    return "".join(out)


def letters(n: int) -> str:
    """``n`` as the PDF standard's letter numbering: A..Z, then AA..ZZ, AAA.. ("" for 0 or less)."""
    if n <= 0:
        return ""
    repeat, index = divmod(n - 1, 26)
    return chr(ord("A") + index) * (repeat + 1)


def _number(style: str, n: int) -> str | None:
    """Page number ``n`` written in ``style``; None when it would not fit in ``MAX_LABEL_CHARS``."""
    if style == "D":
        return str(n) if abs(n) < 10 ** MAX_LABEL_CHARS else None
    if style in ("r", "R"):
        if n // 1000 > MAX_LABEL_CHARS:
            return None
        return roman(n).lower() if style == "r" else roman(n)
    if style in ("a", "A"):
        if (n - 1) // 26 >= MAX_LABEL_CHARS:
            return None
        return letters(n).lower() if style == "a" else letters(n)
    return ""  # no style: the prefix alone


def readable(text: str) -> str:
    """``text`` with control and format characters and runs of white space made one space, ends trimmed."""
    return " ".join("".join(" " if unicodedata.category(ch) in _UNPRINTABLE else ch for ch in text).split())


def clean_label(label: str | None) -> str | None:
    """A label as printed in citations (``readable``); None for an empty label or one over
    ``MAX_LABEL_CHARS``."""
    text = readable(label or "")
    return text if text and len(text) <= MAX_LABEL_CHARS else None


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def expand(rules: Iterable[Mapping[str, Any]], pages: int) -> list[str | None]:
    """The label of each of ``pages`` pages under ``rules`` (``Document.get_page_labels()``'s dicts:
    startpage, prefix, style, firstpagenum), cleaned (``clean_label``); None for a page before the
    first rule or whose label is empty or too long. One pass over the pages and the rules."""
    ordered = sorted(((_int(r.get("startpage"), -1), i, r) for i, r in enumerate(rules)), key=lambda t: t[:2])
    starts = [(start, rule) for start, _, rule in ordered if 0 <= start < pages]
    out: list[str | None] = [None] * pages
    for k, (start, rule) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else pages
        prefix, style = str(rule.get("prefix") or ""), str(rule.get("style") or "")
        first = _int(rule.get("firstpagenum"), 1)
        if len(prefix) > MAX_PREFIX_CHARS or len(readable(prefix)) > MAX_LABEL_CHARS:
            continue  # every page of the rule would be dropped (a number only adds to it): none written out
        for page in range(start, end):
            number = _number(style, first + page - start)
            out[page] = None if number is None else clean_label(prefix + number)
    return out


def page_labels(doc: pymupdf.Document) -> list[str | None]:
    """Every page's label (see ``expand``); the rules are read once. A PDF whose label rules cannot be
    read (damaged) has none."""
    try:
        rules = doc.get_page_labels() if doc.is_pdf else []
    except Exception:  # noqa: BLE001  (MuPDF raises several types for a damaged /PageLabels tree)
        rules = []
    return expand(rules, doc.page_count)


class _Last:
    """The labels of the last document asked about (one at a time: the parser reads one document)."""

    doc: pymupdf.Document | None = None
    labels: Sequence[str | None] = ()


def page_label(page: pymupdf.Page) -> str | None:
    """The label of ``page``: its document's labels are worked out on the first call for that
    document (``page_labels``) and kept until a page of another document is asked about."""
    doc = page.parent
    if _Last.doc is not doc or len(_Last.labels) != doc.page_count:
        _Last.doc, _Last.labels = doc, page_labels(doc)
    number = page.number
    return _Last.labels[number] if number is not None and 0 <= number < len(_Last.labels) else None
