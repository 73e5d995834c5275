"""The hidden-text test and a line's box computed on plain floats give what PyMuPDF's ``Rect`` gives.

``ingest.pdf`` once built ``Rect`` objects for every span of every page (most of a code listing's parse
time); it now compares floats. These cases pin the two to the same answers: spans on, across and off the
page edge, empty and degenerate boxes, touching edges, and unions of several spans (which MuPDF forms in
32-bit floats).
"""

from __future__ import annotations

import operator
import random
from functools import reduce

from ingest.mupdf import pymupdf
from ingest.pdf import MIN_READABLE_SIZE, _background, _Rect, _union, span_is_hidden

PAGE = (0.0, 0.0, 612.0, 792.0)


def hidden_by_rects(span: dict, page: tuple[float, float, float, float]) -> bool:
    """The geometric part of the test as it was written with PyMuPDF rectangles (white paper, black text)."""
    bbox, page_rect = pymupdf.Rect(span["bbox"]), pymupdf.Rect(page)
    if bbox.is_empty or not bbox.intersects(page_rect):
        return True
    inside = bbox & page_rect
    return inside.get_area() < 0.5 * bbox.get_area()


def spans(seed: int, n: int) -> list[dict]:
    rng = random.Random(seed)
    edges = [-50.0, -0.5, 0.0, 0.25, 100.0, 305.5, 611.75, 612.0, 612.5, 700.0, 791.9, 792.0, 800.0]
    out = []
    for _ in range(n):
        xs = [rng.choice(edges) if rng.random() < 0.4 else rng.uniform(-80, 700) for _ in range(2)]
        ys = [rng.choice(edges) if rng.random() < 0.4 else rng.uniform(-80, 880) for _ in range(2)]
        if rng.random() < 0.8:
            xs.sort()
            ys.sort()
        out.append({"bbox": (xs[0], ys[0], xs[1], ys[1]), "size": 10.0, "color": 0, "alpha": 255, "text": "x"})
    return out


def test_the_float_test_hides_exactly_the_spans_the_rectangle_test_hid() -> None:
    cases = spans(7, 5000) + [
        {"bbox": (10.0, 10.0, 10.0, 20.0), "size": 10.0, "color": 0, "text": "x"},  # no width
        {"bbox": (600.0, 10.0, 624.0, 20.0), "size": 10.0, "color": 0, "text": "x"},  # exactly half off the page
        {"bbox": (612.0, 10.0, 630.0, 20.0), "size": 10.0, "color": 0, "text": "x"},  # touching the edge outside
    ]
    for span in cases:
        assert span_is_hidden(span, PAGE, []) == hidden_by_rects(span, PAGE), span["bbox"]


def test_a_page_without_an_area_shows_no_span() -> None:
    span = {"bbox": (10.0, 10.0, 20.0, 20.0), "size": 10.0, "color": 0, "text": "x"}
    for page in ((0.0, 0.0, 0.0, 0.0), (0.0, 0.0, 612.0, 0.0)):
        assert span_is_hidden(span, page, []) and hidden_by_rects(span, page)


def test_small_and_invisible_spans_are_hidden_before_any_geometry() -> None:
    tiny = {"bbox": (10.0, 10.0, 20.0, 20.0), "size": MIN_READABLE_SIZE - 0.1, "color": 0, "text": "x"}
    invisible = {"bbox": (10.0, 10.0, 20.0, 20.0), "size": 10.0, "color": 0, "alpha": 0, "text": "x"}
    assert span_is_hidden(tiny, PAGE, []) and span_is_hidden(invisible, PAGE, [])
    assert not span_is_hidden(invisible, PAGE, [], invisible_ok=True)


def test_a_lines_box_is_the_union_pymupdf_forms() -> None:
    rng = random.Random(11)
    for _ in range(2000):
        boxes = []
        for _ in range(rng.randint(1, 6)):
            x0, y0 = rng.uniform(0, 600) + rng.random() / 3, rng.uniform(0, 780) + rng.random() / 7
            w, h = rng.uniform(0.1, 80) / 3, rng.uniform(0.1, 14) / 7
            kind = rng.random()  # now and then a box without width or height, or turned inside out
            if kind < 0.1:
                w = 0.0
            elif kind < 0.15:
                h = -h
            boxes.append((x0, y0, x0 + w, y0 + h))
        expected = reduce(operator.or_, (pymupdf.Rect(b) for b in boxes))
        assert _union(boxes) == tuple(expected), boxes


def test_translucent_fills_are_laid_over_what_lies_beneath_in_drawing_order() -> None:
    box = (10.0, 10.0, 20.0, 20.0)
    blue = _Rect(0, 0, 100, 100, (0.0, 0.0, 1.0))
    red_half = _Rect(0, 0, 100, 100, (1.0, 0.0, 0.0), 0.5)
    green_tint = _Rect(0, 0, 100, 100, (0.0, 1.0, 0.0), 0.2)
    assert _background(box, [blue, red_half]) == (0.5, 0.0, 0.5)
    assert _background(box, [red_half, blue]) == (0.0, 0.0, 1.0)  # an opaque fill hides what was under it
    r, g, b = _background(box, [blue, red_half, green_tint])  # red over blue first, then green over both
    assert (round(r, 6), round(g, 6), round(b, 6)) == (0.4, 0.2, 0.4)
    assert _background(box, [green_tint]) == (0.8, 1.0, 0.8)  # over white paper
    assert _background((200.0, 200.0, 210.0, 210.0), [blue]) == (1.0, 1.0, 1.0)  # not under it: paper
