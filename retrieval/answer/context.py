"""What an answerer is shown (pure functions): the retrieved passages cut from their pages' own text.

- The extractive answerer reads each passage's page slices widened to whole sentences
  (``shown_pages``): its candidates are the sentences of what was retrieved.
- Page links (``page_url``) and the page slices a passage covers (``page_slices``, ``shown_slices``).
- A model is shown more (``model_pages``): one item per page, in the order the pages were first
  retrieved, holding the whole page when it is short (``WHOLE_PAGE_CHARS``) and otherwise the
  retrieved slices widened by ``MODEL_WINDOW`` characters to whole lines, merged into one span. A
  table row keeps its cells and header, a list its opening line, a sentence its neighbours. Each
  item has its own id. Paragraphs that read as text addressed to an AI reader
  (``retrieval.text.injection``) are cut out of the widened text, so widening never shows what
  retrieval set aside. When a page's shown text runs to its end and its last line introduces what
  follows (ends with a colon: "A suitable command is then:") while the next page is not shown, the
  next page's opening lines follow it as an item of their own (``continues``): the command, list or
  table it introduces is there. When its last sentence goes on over the page break instead, the next
  page's opening up to that sentence's end follows (a passage that crosses pages is read to its end).
Every quote is verified against exactly this text (``retrieval.answer.verify``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from dataclasses import dataclass
from urllib.parse import urlsplit

from retrieval.answer.verify import PageText
from retrieval.models import Passage
from retrieval.text.injection import DEFAULT_RULES, untrusted_spans
from retrieval.text.textnorm import normalize
from retrieval.text.urls import shown_url

def page_url(document: str, page: int, document_url: str | None, file_base_url: str | None) -> str | None:
    """A link that opens the PDF at ``page``: the document's own URL, else ``<base>/<name>``.

    The document's URL is used without its user info and query string, whatever was stored (an
    index made before they were dropped at ingest may still hold a signed URL's signature)."""
    base = _without_query(document_url) if document_url else None
    if not base and file_base_url:
        base = file_base_url.rstrip("/") + "/" + document
    if not base:
        return None
    return f"{base.split('#', 1)[0]}#page={page}"


def _without_query(url: str) -> str | None:
    try:
        urlsplit(url)
    except ValueError:
        return None  # not a URL that can be shown safely: no link
    return shown_url(url)


@dataclass(frozen=True)
class SourcePage:
    """A page's own stored text and printed label (from the index), and how its words were read."""

    text: str
    label: str | None = None
    read_by: str = "text"  # "text", or "ocr" / "scan-layer": words read by OCR (ingest.reading)
    doubtful: tuple[str, ...] = ()  # words with a digit OCR read with low confidence


def page_spans(passage: Passage, pages: Mapping[int, SourcePage]) -> dict[int, tuple[int, int]]:
    """Where the passage lies on each of its pages in ``pages``: (start, end) offsets into that page's
    text. A passage runs from ``char_start`` on ``page`` to ``char_end`` on ``page_end``."""
    out: dict[int, tuple[int, int]] = {}
    for no in range(passage.page, passage.page_end + 1):
        src = pages.get(no)
        if src is not None:
            out[no] = (passage.char_start if no == passage.page else 0,
                       passage.char_end if no == passage.page_end else len(src.text))
    return out


def page_slices(passage: Passage, pages: Mapping[int, SourcePage]) -> dict[int, str]:
    """The part of each page a passage showed, cut from the pages' own texts (keyed by page number).
    A page missing from ``pages`` is left out, except that a one-page passage is its own slice."""
    if passage.page == passage.page_end and passage.page not in pages:
        return {passage.page: passage.text}
    return {no: pages[no].text[lo:hi] for no, (lo, hi) in page_spans(passage, pages).items()}


def shown_slices(passage: Passage, passage_id: str, pages: Mapping[int, SourcePage], *,
                 file_base_url: str | None = None) -> list[PageText]:
    """PageTexts for one shown passage, one per page it covers, in the page's own words. At a page
    break, edge lines the passage text does not contain are trimmed (the running header/footer
    between the pages was not shown); the slice itself stays contiguous page text."""
    shown_norm = normalize(passage.text)
    out: list[PageText] = []
    for no, text in page_slices(passage, pages).items():
        lines = text.split("\n")
        # trim the edges next to a page break (running header/footer) down to lines that were shown
        if no != passage.page:
            while lines and lines[0].strip() and normalize(lines[0]) not in shown_norm:
                lines.pop(0)
        if no != passage.page_end:
            while lines and lines[-1].strip() and normalize(lines[-1]) not in shown_norm:
                lines.pop()
        body = "\n".join(lines).strip("\n")
        if not body.strip():
            continue
        src = pages.get(no)
        label = src.label if src is not None else (passage.page_label if no == passage.page else None)
        out.append(PageText(document=passage.document, page=no, text=body, page_label=label,
                            url=page_url(passage.document, no, passage.document_url, file_base_url),
                            passage_id=passage_id, read_by=src.read_by if src else "text",
                            doubtful=src.doubtful if src else ()))
    return out


Pages = Mapping[tuple[str, str], Mapping[int, SourcePage]]  # (collection, document) -> page number -> page

MAX_EXTEND = 600  # characters a passage may grow at each end to reach a sentence boundary
_SENTENCE_END = re.compile(r"[.?!][\"')\]]?(?=\s|$)")
_BOUNDARY_BEFORE = re.compile(r"(?:[.?!:][\"')\]]?[ \t]*\n|\n[ \t]*\n)")
_SPLIT_WORD = re.compile(r"[^\W\d_]-\s*\Z")  # a word hyphenated across a line (or column) break


def sentence_bounds(text: str, start: int, end: int, limit: int = MAX_EXTEND) -> tuple[int, int]:
    """``start``/``end`` moved outwards (at most ``limit`` characters each) to the nearest sentence
    boundaries of ``text``, so a chunk cut mid-sentence is shown with its whole first and last
    sentence: "... enough fuel to fly to the first point of intended landing and," goes on to
    "(2) At night, to fly after that for at least 45 minutes." A boundary is a sentence end
    (punctuation and a line break before the start; punctuation and a space after the end) or a
    blank line, but not a line break after a word hyphenated across it, so a slice never starts
    inside "heli-\n\ncopters"; an end already on one stays."""
    start, end = max(0, start), min(len(text), end)
    head = text[max(0, start - limit):start]
    split = bool(_SPLIT_WORD.search(head))  # the slice starts inside a word: "heli-\n\ncopters"
    if head and (split or not head.endswith("\n\n")) and (m := [
            b for b in _BOUNDARY_BEFORE.finditer(head) if not _SPLIT_WORD.search(head, 0, b.start() + 1)]):
        start = start - len(head) + m[-1].end()
        while start < end and text[start].isspace():
            start += 1
    tail = text[:end].rstrip()
    if tail and tail[-1] not in ".?!" and (m2 := _SENTENCE_END.search(text, end, min(len(text), end + limit))):
        end = m2.end()
    return start, end


def whole_sentences(passage: Passage, pages: dict[int, SourcePage]) -> Passage:
    """The passage with its first and last page slice widened to sentence boundaries (``sentence_bounds``)."""
    first, last = pages.get(passage.page), pages.get(passage.page_end)
    if first is None or last is None:
        return passage
    start, _ = sentence_bounds(first.text, passage.char_start, passage.char_start)
    _, end = sentence_bounds(last.text, passage.char_end, passage.char_end)
    if passage.page == passage.page_end:
        start, end = sentence_bounds(first.text, passage.char_start, passage.char_end)
    return passage.model_copy(update={"char_start": start, "char_end": end})


def shown_pages(passages: Sequence[Passage], pages: Pages, file_base_url: str | None = None) -> list[PageText]:
    """What the answerer is shown: each passage's page slices, widened to whole sentences."""
    out: list[PageText] = []
    for rank, p in enumerate(passages, 1):
        doc_pages = pages.get((p.collection, p.document), {})
        out.extend(shown_slices(whole_sentences(p, doc_pages), f"P{rank}", doc_pages,
                                file_base_url=file_base_url))
    return out


WHOLE_PAGE_CHARS = 3000  # a page this short is shown whole to a model
MODEL_WINDOW = 600  # characters a model's slice grows at each end (then to whole lines)
WITHHELD = "[…]"  # stands where a paragraph addressed to an AI reader was cut out


def page_window(text: str, lo: int, hi: int) -> tuple[int, int]:
    """The span of ``text`` a model is shown for a hit at [lo, hi): the whole page when it is at most
    ``WHOLE_PAGE_CHARS`` characters, else the hit widened by ``MODEL_WINDOW`` characters each way, to
    whole lines."""
    if len(text) <= WHOLE_PAGE_CHARS:
        return 0, len(text)
    end = text.find("\n", min(len(text), hi + MODEL_WINDOW))
    return text.rfind("\n", 0, max(0, lo - MODEL_WINDOW)) + 1, len(text) if end < 0 else end


def without_untrusted(text: str, lo: int, hi: int, names: tuple[str, ...] = DEFAULT_RULES) -> str:
    """``text[lo:hi]`` with every paragraph that reads as prompt injection replaced by ``WITHHELD``."""
    out: list[str] = []
    at = lo
    for s, e in untrusted_spans(text, lo, hi, names):
        out.append(text[at:s])
        out.append(WITHHELD)
        at = e
    out.append(text[at:hi])
    return "".join(out).strip("\n")


FOOTER_CHARS = 40  # a line this short after a page's last text line may be its footer (a page number, a running title)


def _closing_lines(text: str) -> list[str]:
    """The page's last four non-blank lines, stripped, last first: its final line of text and the short
    lines that may follow it (a page number, a running footer)."""
    lines = [ln.strip() for ln in text.rstrip().splitlines() if ln.strip()]
    return lines[-4:][::-1]


def introduces_next(text: str) -> bool:
    """The page's last line of text ends with a colon: it introduces what the next page holds (the
    short lines after it, a page number or running footer, aside)."""
    for ln in _closing_lines(text):
        if ln.endswith(":"):
            return True
        if len(ln) > FOOTER_CHARS:
            return False
    return False


_CLOSED = re.compile(r"[.?!:;][\"')\]]?\Z")


def ends_mid_sentence(text: str) -> bool:
    """The page's last line of text (short lines after it, a page number or running footer, aside)
    ends without a sentence's closing punctuation: its sentence goes on over the page."""
    for ln in _closing_lines(text):
        if len(ln) > FOOTER_CHARS:
            return not _CLOSED.search(ln)
    return False


def sentence_rest(text: str) -> tuple[int, int]:
    """The opening of a page up to the end of its first sentence (at most ``MODEL_WINDOW`` characters
    on, then to the end of that line): where a sentence cut by the page break ends."""
    m = _SENTENCE_END.search(text, 0, min(len(text), MODEL_WINDOW))
    end = text.find("\n", m.end() if m else min(len(text), MODEL_WINDOW))
    return 0, len(text) if end < 0 else end


def continues(spans: Mapping[tuple[str, str, int], tuple[int, int, Passage]], pages: Pages
              ) -> dict[tuple[str, str, int], tuple[int, int, Passage]]:
    """``spans`` with, after each span that runs to the end of a page, what the next page adds when
    that page is not shown already: its opening window when the page introduces it
    (``introduces_next``), the rest of the sentence when the page ends in one (``ends_mid_sentence``)."""
    out: dict[tuple[str, str, int], tuple[int, int, Passage]] = {}
    for key, (lo, hi, p) in spans.items():
        out[key] = (lo, hi, p)
        collection, document, no = key
        doc_pages = pages.get((collection, document), {})
        text = doc_pages[no].text
        following = (collection, document, no + 1)
        after = [ln.strip() for ln in text[hi:].splitlines() if ln.strip()]
        runs_to_end = len(after) <= 3 and all(len(ln) <= FOOTER_CHARS for ln in after)
        if not runs_to_end or no + 1 not in doc_pages or following in spans:
            continue
        if introduces_next(text[:hi]):
            out[following] = (*page_window(doc_pages[no + 1].text, 0, 0), p)
        elif ends_mid_sentence(text[:hi]):
            out[following] = (*sentence_rest(doc_pages[no + 1].text), p)
    return out


def model_pages(passages: Sequence[Passage], pages: Pages, file_base_url: str | None = None,
                injection_rules: tuple[str, ...] = DEFAULT_RULES, budget_chars: int | None = None) -> list[PageText]:
    """What a model is shown: one item per retrieved page (module docstring), ids ``P1``, ``P2``, …
    in the order the pages were first reached, stopping before the item that would take the text
    past ``budget_chars`` (the first item is always shown)."""
    spans: dict[tuple[str, str, int], tuple[int, int, Passage]] = {}  # the span and the first passage on it
    for p in passages:
        doc_pages = pages.get((p.collection, p.document), {})
        for no, (lo, hi) in page_spans(p, doc_pages).items():
            text = doc_pages[no].text
            lo, hi = page_window(text, max(0, lo), min(len(text), hi))
            first_lo, first_hi, owner = spans.get((p.collection, p.document, no), (lo, hi, p))
            spans[(p.collection, p.document, no)] = (min(lo, first_lo), max(hi, first_hi), owner)
    out: list[PageText] = []
    used = 0  # characters shown so far
    for (collection, document, no), (lo, hi, p) in continues(spans, pages).items():
        src = pages[(collection, document)][no]
        text = without_untrusted(src.text, lo, hi, injection_rules)
        if not text.strip() or text.strip() == WITHHELD:
            continue
        if budget_chars is not None and out and used + len(text) > budget_chars:
            break
        used += len(text)
        out.append(PageText(document=document, page=no, text=text, page_label=src.label,
                            url=page_url(document, no, p.document_url, file_base_url), passage_id=f"P{len(out) + 1}",
                            read_by=src.read_by, doubtful=src.doubtful))
    return out
