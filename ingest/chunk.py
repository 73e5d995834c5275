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
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from retrieval.text.injection import PARAGRAPH_BREAK, overlaps
from retrieval.text.spans import pieces, split_sentences, trimmed
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


def _word_windows(text: str, s: int, e: int, budget: int, count: TokenCounter) -> list[tuple[int, int]]:
    """A sentence longer than ``budget`` cut into the longest runs of whole words that fit (each at
    least one word). The end of each window is found by galloping, then bisecting, over the words
    (a window's count only grows with its words): O(log n) counts per window, not one per word, and
    those counts are not remembered (the ``functools.cache``'d ``count``'s ``__wrapped__``): a page that
    is one endless sentence (issue 32) cost a count, and a cached string, per word of every window."""
    counted = getattr(count, "__wrapped__", count)
    words = [(m.start(), m.end()) for m in re.finditer(r"\S+", text[s:e])]

    def fits(i: int, j: int) -> bool:  # words i..j (inclusive) in one window
        return counted(text[s + words[i][0]:s + words[j][1]]) <= budget

    out: list[tuple[int, int]] = []
    i = 0
    while i < len(words):
        lo, step = i, 1  # words i..lo fit (one word always goes in, as before)
        hi = len(words)  # the first j known not to fit (or the end)
        while lo + step < len(words):
            if fits(i, lo + step):
                lo += step
                step *= 2
            else:
                hi = lo + step
                break
        while hi - lo > 1:  # the last j that fits, between lo (fits) and hi (does not, or the end)
            mid = (lo + hi) // 2
            if fits(i, mid):
                lo = mid
            else:
                hi = mid
        out.append((s + words[i][0], s + words[lo][1]))
        i = lo + 1
    return out


def units_of(page: Page, budget: int, count: TokenCounter, abbreviations: Collection[str] = ()) -> list[Unit]:
    text = page.text
    b0, b1 = page.body
    units: list[Unit] = []
    for ps, pe in trimmed(text, pieces(text, PARAGRAPH_BREAK, b0, b1)):
        first = True
        for ss, se in split_sentences(text, ps, pe, abbreviations=abbreviations):
            n = count(text[ss:se])
            parts = [(ss, se, n)] if n <= budget else [
                (a, b, count(text[a:b])) for a, b in _word_windows(text, ss, se, budget, count)]
            for a, b, k in parts:
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


class Chunker:
    """``chunk_pages`` a page at a time: ``add`` each page in order and take the chunks it completes,
    then ``finish`` for the last. A chunk is complete once a later unit would not join it, so the
    chunks come out as they would from all pages at once (``chunk_pages`` is this loop)."""

    def __init__(self, count: TokenCounter, budget: int = 200, overlap: int = 40,
                 abbreviations: Collection[str] = ()) -> None:
        self.count, self.budget, self.overlap = count, budget, overlap
        self.abbreviations = abbreviations  # the preset's: no sentence ends at "(p." before "181)"
        self._texts: dict[int, str] = {}  # the texts of the pages the open group may still reach back to
        self._title = ""  # the section title in force
        self._group: list[tuple[Unit, str]] = []  # the open chunk's units, each with the title in force at it
        self._size = 0
        self._made = 0

    def add(self, page: Page) -> list[Chunk]:
        self._texts[page.number] = page.text
        pending = list(_section_titles(page))
        out: list[Chunk] = []
        for u in units_of(page, self.budget, self.count, self.abbreviations):
            while pending and pending[0][0] <= u.start:
                self._title = pending.pop(0)[1]
            self._take(u, self._title, out)
        keep = {u.page for u, _ in self._group} | {page.number}
        self._texts = {n: t for n, t in self._texts.items() if n in keep}
        return out

    def finish(self) -> list[Chunk]:
        out: list[Chunk] = []
        if self._group:
            out.append(self._emit(self._group))
            self._group, self._size = [], 0
        return out

    def _take(self, u: Unit, title: str, out: list[Chunk]) -> None:
        group = self._group
        new_fits = self._size + u.tokens <= self.budget
        early_break = u.paragraph_start and self._size >= 0.6 * self.budget
        trust_changes = bool(group) and group[-1][0].untrusted != u.untrusted  # flagged text gets chunks of its own
        if group and (not new_fits or early_break or trust_changes):
            out.append(self._emit(group))
            tail: list[tuple[Unit, str]] = []
            t = 0
            for v in reversed(group):
                if t + v[0].tokens > self.overlap:
                    break
                tail.insert(0, v)
                t += v[0].tokens
            self._group, self._size = (tail, t) if not trust_changes else ([], 0)
        self._group.append((u, title))
        self._size += u.tokens

    def _emit(self, group: list[tuple[Unit, str]]) -> Chunk:
        texts = self._texts
        first, last = group[0][0], group[-1][0]
        parts: list[str] = []
        page, start, prev_end = first.page, first.start, first.end
        for u, _ in group:
            if u.page != page:
                parts.append(texts[page][start:prev_end])
                page, start = u.page, u.start
            prev_end = u.end
        parts.append(texts[page][start:last.end])
        context = group[0][1]
        inner = tuple(dict.fromkeys(t for _, t in group[1:] if t and t != context))
        self._made += 1
        return Chunk(self._made - 1, first.page, first.start, last.page, last.end, "\n".join(parts),
                     sum(u.tokens for u, _ in group), context, inner, first.untrusted)


def chunk_pages(pages: Sequence[Page], count: TokenCounter, budget: int = 200, overlap: int = 40,
                abbreviations: Collection[str] = ()) -> list[Chunk]:
    chunker = Chunker(count, budget, overlap, abbreviations)
    chunks = [c for p in pages for c in chunker.add(p)]
    return chunks + chunker.finish()
