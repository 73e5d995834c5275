"""Pure functions over ranked lists: reciprocal rank fusion and diversification of the top results."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

RRF_K = 60


@dataclass(frozen=True)
class Hit:
    """One chunk in a ranked list (a keyword or dense leg), best first."""

    chunk_id: int
    score: float
    collection: str | None = None  # the chunk's collection, so later lookups can be routed by it


@dataclass(frozen=True)
class Fused:
    chunk_id: int
    score: float
    ranks: dict[str, int] = field(default_factory=dict)  # leg name -> 1-based rank in that leg
    scores: dict[str, float] = field(default_factory=dict)  # leg name -> that leg's score


def rrf(lists: Mapping[str, Sequence[Hit]], k: int = RRF_K) -> list[Fused]:
    """Reciprocal rank fusion: score(d) = Σ_legs 1 / (k + rank_leg(d)), ranks 1-based.

    A chunk missing from a leg contributes nothing for it. Ties go to the chunk with the better
    best-single-leg rank, then to the lower chunk id (deterministic).
    """
    if k < 0:
        raise ValueError("the RRF constant k must be >= 0")
    ranks: dict[int, dict[str, int]] = {}
    scores: dict[int, dict[str, float]] = {}
    for leg, hits in lists.items():
        for i, h in enumerate(hits, 1):
            if leg not in ranks.setdefault(h.chunk_id, {}):  # a leg lists each chunk once; ignore accidental repeats
                ranks[h.chunk_id][leg] = i
                scores.setdefault(h.chunk_id, {})[leg] = h.score
    fused = [Fused(cid, sum(1.0 / (k + r) for r in rs.values()), rs, scores[cid]) for cid, rs in ranks.items()]
    fused.sort(key=lambda f: (-f.score, min(f.ranks.values()), f.chunk_id))
    return fused


@dataclass(frozen=True)
class Span:
    """Where a passage lies: a document and a (page, char) range; text for exact-repeat detection."""

    document: tuple[str, int]  # (collection, document id)
    page_start: int
    char_start: int
    page_end: int
    char_end: int
    text: str
    untrusted: bool = False  # flagged as text addressed to an AI reader: it never takes a trusted passage's place


def _page_ranges(s: Span) -> dict[int, tuple[float, float]]:
    """Character range on each page the span touches (a page it runs off has an open end)."""
    return {p: (s.char_start if p == s.page_start else 0, s.char_end if p == s.page_end else math.inf)
            for p in range(s.page_start, s.page_end + 1)}


def overlap_chars(a: Span, b: Span) -> int:
    """Characters two spans share (0 for different documents); open-ended overlaps count as the
    shorter span's length, since both run to the same page end."""
    if a.document != b.document or a.page_end < b.page_start or b.page_end < a.page_start:
        return 0
    ra, rb = _page_ranges(a), _page_ranges(b)
    total = 0.0
    for p in ra.keys() & rb.keys():
        lo = max(ra[p][0], rb[p][0])
        hi = min(ra[p][1], rb[p][1])
        if hi > lo:
            total += hi - lo if math.isfinite(hi) else min(len(a.text), len(b.text))
    return int(min(total, len(a.text), len(b.text)))


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def near_duplicates(spans: Sequence[Span], threshold: float = 0.5) -> list[int]:
    """Indexes (in order) of the spans to keep: a span is dropped when its text repeats an earlier
    kept span's exactly (after whitespace/case folding, any document) or when at least
    ``threshold`` of it lies inside an earlier kept span of the same document."""
    kept: list[int] = []
    seen_text: set[str] = set()
    for i, s in enumerate(spans):
        key = _norm(s.text)
        if key in seen_text:
            continue
        if any(overlap_chars(s, spans[j]) >= threshold * max(len(s.text), 1) for j in kept
               if spans[j].untrusted == s.untrusted):
            continue
        kept.append(i)
        seen_text.add(key)
    return kept


def diversify(spans: Sequence[Span], k: int) -> list[int]:
    """Order indexes so the first ``k`` come from distinct pages: a span that starts on a page an
    earlier pick starts on, or that overlaps an earlier pick, waits until no fresh span is left.
    Relative order is otherwise kept; every index appears once."""
    picked: list[int] = []
    deferred: list[int] = []
    pages: set[tuple[tuple[str, int], int]] = set()
    for i, s in enumerate(spans):
        crowded = (s.document, s.page_start) in pages or any(
            overlap_chars(s, spans[j]) > 0 for j in picked if not spans[j].untrusted)
        if crowded and len(picked) < k:
            deferred.append(i)
            continue
        picked.append(i)
        if not s.untrusted:  # a flagged passage (set aside by the answerer) does not take its page's place
            pages.add((s.document, s.page_start))
    head, tail = picked[:k], picked[k:]
    fill = k - len(head)
    return head + deferred[:fill] + sorted(deferred[fill:] + tail)
