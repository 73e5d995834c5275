"""Split page bodies into overlapping chunks that fit the embedder (pure functions).

Units are sentences inside paragraphs (a paragraph is a text block; blocks are separated by a
blank line in the page text). Chunks are filled greedily with whole units up to ``budget`` word
pieces, close early at a paragraph boundary once they are reasonably full, may run across a page
break, and start with up to ``overlap`` word pieces of the previous chunk's last sentences. A
sentence longer than the budget is cut into word windows. Every unit keeps its page and character
span, so a chunk's text is exactly the page text it came from.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from retrieval.text.injection import PARAGRAPH_BREAK, overlaps
from retrieval.text.spans import pieces
from ingest.pdf import Page

TokenCounter = Callable[[str], int]


@dataclass(frozen=True)
class Unit:
    page: int  # 1-based page number
    start: int  # character offsets into that page's text
    end: int
    tokens: int
    paragraph_start: bool  # first unit of a paragraph
    untrusted: bool = False  # inside a paragraph flagged as prompt injection (Page.untrusted)


@dataclass(frozen=True)
class Chunk:
    ordinal: int
    page_start: int
    char_start: int  # offset into the text of page_start
    page_end: int
    char_end: int  # offset into the text of page_end (exclusive)
    text: str  # the page text slices, joined by "\n" at page breaks
    tokens: int
    context: str  # nearest preceding section heading, "" when none
    inner_titles: tuple[str, ...] = ()  # section headings that start inside the chunk
    untrusted: bool = False  # made of prompt-injection paragraphs only (never mixed with other text)


_SENT = re.compile(r"(?<=[.;?!])[\"')\]]?\s+(?=[\"'(\[§A-Z0-9])")


def _spans(text: str, start: int, end: int, pattern: re.Pattern[str]) -> list[tuple[int, int]]:
    return [_trim(text, s, e) for s, e in pieces(text, pattern, start, end)]


def _trim(text: str, s: int, e: int) -> tuple[int, int]:
    while s < e and text[s].isspace():
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    return s, e


def _word_windows(text: str, s: int, e: int, budget: int, count: TokenCounter) -> list[tuple[int, int]]:
    words = [(m.start(), m.end()) for m in re.finditer(r"\S+", text[s:e])]
    out: list[tuple[int, int]] = []
    i = 0
    while i < len(words):
        j = i + 1
        # grow the window while it fits (linear growth is fine: sentences this long are rare)
        while j < len(words) and count(text[s + words[i][0]:s + words[j][1]]) <= budget:
            j += 1
        out.append((s + words[i][0], s + words[j - 1][1]))
        i = j
    return out


def units_of(page: Page, budget: int, count: TokenCounter) -> list[Unit]:
    text = page.text
    b0, b1 = page.body
    units: list[Unit] = []
    for ps, pe in _spans(text, b0, b1, PARAGRAPH_BREAK):
        first = True
        for ss, se in _spans(text, ps, pe, _SENT):
            n = count(text[ss:se])
            pieces = [(ss, se, n)] if n <= budget else [
                (a, b, count(text[a:b])) for a, b in _word_windows(text, ss, se, budget, count)]
            for a, b, k in pieces:
                units.append(Unit(page.number, a, b, k, first, overlaps(page.untrusted, a, b)))
                first = False
    return units


def _is_title_line(text: str) -> bool:
    """Bold lines that can name a section: not field labels ("Skills:") nor drop-cap letters."""
    return not text.endswith(":") and len(text.replace(" ", "")) >= 3


def _section_titles(page: Page) -> list[tuple[int, str]]:
    """Bold heading lines, merged when on adjacent lines, that have at least two words or are set
    larger than the body text: software manuals title sections with one word ("Offsets", "Mxtics"),
    while a bold word in body size is a label ("Objective.", "Risk")."""
    out: list[tuple[int, str, bool]] = []
    prev_end = -10
    for h in page.headings:
        if not _is_title_line(h.text):
            continue
        gap = page.text[prev_end:h.offset] if prev_end >= 0 else "\n\n\n"
        if out and not gap.strip() and gap.count("\n") <= 1:
            off, title, larger = out[-1]
            joined = title[:-1] + h.text if title.endswith("-") and title[-2:-1].isalpha() else f"{title} {h.text}"
            out[-1] = (off, joined, larger or h.larger)
        else:
            out.append((h.offset, h.text, h.larger))
        prev_end = h.offset + len(h.text)
    return [(o, t) for o, t, larger in out if len(t.split()) >= 2 or (larger and any(c.isalpha() for c in t))]


def chunk_pages(pages: Sequence[Page], count: TokenCounter, budget: int = 200, overlap: int = 40) -> list[Chunk]:
    texts = {p.number: p.text for p in pages}
    titles = {p.number: _section_titles(p) for p in pages}
    units = [u for p in pages for u in units_of(p, budget, count)]
    chunks: list[Chunk] = []
    current_title = ""
    title_at: dict[tuple[int, int], str] = {}  # the section title in force at each unit's start
    t_iter = {n: list(ts) for n, ts in titles.items()}
    for u in units:
        pending = t_iter[u.page]
        while pending and pending[0][0] <= u.start:
            current_title = pending.pop(0)[1]
        title_at[(u.page, u.start)] = current_title

    def emit(group: list[Unit]) -> None:
        first, last = group[0], group[-1]
        parts: list[str] = []
        page, start, prev_end = first.page, first.start, first.end
        for u in group:
            if u.page != page:
                parts.append(texts[page][start:prev_end])
                page, start = u.page, u.start
            prev_end = u.end
        parts.append(texts[page][start:last.end])
        context = title_at[(first.page, first.start)]
        inner: list[str] = []
        for u in group[1:]:
            t = title_at[(u.page, u.start)]
            if t and t != context and t not in inner:
                inner.append(t)
        chunks.append(Chunk(len(chunks), first.page, first.start, last.page, last.end, "\n".join(parts),
                            sum(u.tokens for u in group), context, tuple(inner), first.untrusted))

    group: list[Unit] = []
    size = 0
    for u in units:
        new_fits = size + u.tokens <= budget
        early_break = u.paragraph_start and size >= 0.6 * budget
        trust_changes = bool(group) and group[-1].untrusted != u.untrusted  # flagged text gets chunks of its own
        if group and (not new_fits or early_break or trust_changes):
            emit(group)
            tail: list[Unit] = []
            t = 0
            for v in reversed(group):
                if t + v.tokens > overlap:
                    break
                tail.insert(0, v)
                t += v.tokens
            group, size = (tail, t) if not trust_changes else ([], 0)
        group.append(u)
        size += u.tokens
    if group:
        emit(group)
    return chunks
