"""How an Answer is printed by the CLI: DESIGN §3 JSON, and plain text for people (pure functions)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath

from retrieval.answer.refusals import NO_SUPPORT
from retrieval.models import Answer, Citation, NearestPassage
from retrieval.text.printable import one_line
from retrieval.text.textnorm import normalize, readable

ASK_BETTER = ("To ask better: use the words the manual would use, name the document or section if you know "
              "it, and ask one thing at a time.")


def readable_name(name: str) -> str:
    """A short human title for a file name, when the document has no title of its own.

    The stem before the first underscore (the part that usually names the document, e.g.
    "14-CFR-Part-91" of "14-CFR-Part-91_General-Operating-and-Flight-Rules.pdf"). Its hyphens become
    spaces when it reads as words ("14 CFR Part 91"), and stay in identifiers with no lower-case word
    ("FAA-S-ACS-6C").
    """
    stem = PurePosixPath(name).stem if name.lower().endswith(".pdf") else name
    head = stem.split("_", 1)[0].strip() or stem
    if re.search(r"(?:^|-)[A-Z]?[a-z]{2,}(?:-|$)", head):
        head = head.replace("-", " ")
    return head


def shown_title(name: str, titles: Mapping[str, str | None] | None = None) -> str:
    """What people are shown for a document: its title (``documents.title``: the PDF's declared
    title, or its readable file name), else the cleaned file name."""
    title = (titles or {}).get(name)
    return one_line(" ".join(title.split()) if title and title.strip() else readable_name(name))


def answer_repeats_quotes(answer: Answer) -> bool:
    """The answer text is made of its first quote (the extractive answer, or a model's withheld text
    replaced by its quotes): printing it and the quotes would show that quote twice."""
    if not answer.citations:
        return False
    first = normalize(" ".join(answer.citations[0].quote.split()))
    return bool(first) and first in normalize(" ".join(answer.answer.split()))


def page_words(page: int, label: str | None) -> str:
    """"p. 6-12 (PDF p. 34)" when the printed label differs from the PDF index, else "p. 34"."""
    if label and label != str(page):
        return f"p. {one_line(label)} (PDF p. {page})"
    return f"p. {page}"


def pages_words(page: int, page_end: int, label: str | None) -> str:
    """``page_words`` for a passage that may run onto later pages: "pp. 2–3", "p. 111ff. (PDF pp. 112–113)"."""
    if page_end <= page:
        return page_words(page, label)
    if label and label != str(page):
        return f"p. {one_line(label)}ff. (PDF pp. {page}–{page_end})"
    return f"pp. {page}–{page_end}"


def _quote_block(i: int, c: Citation, titles: Mapping[str, str | None] | None = None) -> str:
    quote = readable(c.quote)
    link = f"\n   {c.url}" if c.url else ""
    ocr = f" ({c.ocr_note})" if c.ocr_note else ""
    return f"[{i}] “{quote}”\n   — {shown_title(c.document, titles)}, {page_words(c.page, c.page_label)}{ocr}{link}"


def named_note(answer: Answer) -> str:
    """Which documents were searched first because the question names them ("" when none)."""
    if not answer.named_documents:
        return ""
    return f"Searched {', '.join(answer.named_documents)} first: the question names it by its title."


def searched_where(collections: Sequence[str] | None, documents: Sequence[str] | None = None) -> str:
    """"every collection", "the collection manuals", "the documents a.pdf, b.pdf in the collection manuals"."""
    where = f"the collection{'s' if len(collections) > 1 else ''} {', '.join(collections)}" if collections \
        else "every collection"
    if documents:
        return f"the document{'s' if len(documents) > 1 else ''} {', '.join(documents)} in {where}"
    return where


def lead_line(n: NearestPassage, titles: Mapping[str, str | None] | None = None) -> str:
    """The page a refusal leads with (``refusals.led_by``), with its words when there are any."""
    link = f"  {n.url}" if n.url else ""
    words = f": “{n.snippet}”" if n.snippet else ""
    return f"Not answered here; the nearest page is {shown_title(n.document, titles)}, {page_words(n.page, n.page_label)}{words}{link}"


def as_text(answer: Answer, titles: Mapping[str, str | None] | None = None,
            searched: Sequence[str] | None = None, documents: Sequence[str] | None = None) -> str:
    """``titles``: document name → title; ``searched``: the collections searched (None: all);
    ``documents``: the only documents searched (``--document``), if any."""
    lines: list[str] = []
    if answer.standalone_question and answer.standalone_question != answer.question:
        lines.append(f"(understood as: {answer.standalone_question})\n")
    if not answer.refusal and (named := named_note(answer)):
        lines.append(f"({named})\n")
    if answer.refusal:
        lines.append(answer.reason or NO_SUPPORT)
        others = answer.nearest[1:]
        if answer.nearest:
            lines.append(f"\n{lead_line(answer.nearest[0], titles)}")
        where = searched_where(searched, documents)
        if answer.named_documents:  # searched in two steps: the named document, then the rest
            lines.append(f"\nSearched {', '.join(answer.named_documents)} first (the question names it by its "
                         f"title), then {where}.")
        else:
            lines.append(f"\nSearched {where}.")
        if others:
            lines.append("Other nearest pages (not an answer; look for yourself):")
            for n in others:
                link = f"  {n.url}" if n.url else ""
                lines.append(f"  - {shown_title(n.document, titles)}, {page_words(n.page, n.page_label)}{link}")
        if answer.question.strip():
            lines.append(f"\n{ASK_BETTER}")
    else:
        if not answer_repeats_quotes(answer):
            lines.append(answer.answer)
            lines.append("")
        lines.extend(_quote_block(i, c, titles) for i, c in enumerate(answer.citations, 1))
    for w in answer.warnings:
        lines.append(f"\nnote: {w}")
    ran = f"answerer: {answer.answerer or '-'}, reranker: {answer.reranker or '-'}"
    total = sum(v for k, v in answer.timings_ms.items() if "." not in k)
    lines.append(f"\n({ran}; {total / 1000:.1f} s)")
    return "\n".join(lines)
