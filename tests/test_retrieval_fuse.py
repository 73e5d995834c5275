"""Pure functions of hybrid retrieval: RRF arithmetic, near-duplicate removal, page diversity, metrics."""

from __future__ import annotations

import pytest

from chapterverse_lab.evaluate import Question, first_hit, metrics, ndcg_at
from retrieval.search.fuse import Hit, Span, diversify, near_duplicates, overlap_chars, rrf
from retrieval.models import Passage
from retrieval.search.search import combine_ranks


def hits(*ids: int) -> list[Hit]:
    return [Hit(i, 1.0 / (n + 1)) for n, i in enumerate(ids)]


def test_rrf_is_sum_of_reciprocal_ranks_with_k_60():
    fused = rrf({"keyword": hits(10, 20, 30), "dense": hits(20, 40)})
    by_id = {f.chunk_id: f for f in fused}
    assert by_id[20].score == pytest.approx(1 / 62 + 1 / 61)
    assert by_id[10].score == pytest.approx(1 / 61)
    assert by_id[40].score == pytest.approx(1 / 62)
    assert by_id[30].score == pytest.approx(1 / 63)
    assert [f.chunk_id for f in fused] == [20, 10, 40, 30]
    assert by_id[20].ranks == {"keyword": 2, "dense": 1}


def test_rrf_ties_prefer_the_better_single_rank_then_lower_id():
    # 7 is 1st in one leg only; 8 is 1st in the other: equal scores, equal best rank -> lower id first
    fused = rrf({"a": hits(7, 9), "b": hits(8, 9)}, k=60)
    assert [f.chunk_id for f in fused] == [9, 7, 8]
    fused = rrf({"a": hits(5), "b": hits(6, 5)}, k=0)
    assert fused[0].chunk_id == 5 and fused[0].score == pytest.approx(1 + 1 / 2)


def test_rrf_rejects_negative_k_and_ignores_repeats_in_a_leg():
    with pytest.raises(ValueError):
        rrf({"a": hits(1)}, k=-1)
    fused = rrf({"a": [Hit(1, 1.0), Hit(1, 0.5), Hit(2, 0.1)]})
    assert {f.chunk_id: f.ranks["a"] for f in fused} == {1: 1, 2: 3}


def span(doc: int, p0: int, c0: int, p1: int, c1: int, text: str | None = None) -> Span:
    return Span(("dev", doc), p0, c0, p1, c1, text if text is not None else "x" * max(c1 - c0, 1))


def test_overlap_chars_same_page_and_other_documents():
    a, b = span(1, 3, 0, 3, 100), span(1, 3, 60, 3, 160)
    assert overlap_chars(a, b) == 40
    assert overlap_chars(a, span(2, 3, 0, 3, 100)) == 0
    assert overlap_chars(a, span(1, 4, 0, 4, 100)) == 0


def test_near_duplicates_drops_repeats_and_mostly_contained_spans():
    text = "Fuel reserve: 30 minutes by day. ".ljust(100, "z")
    spans = [span(1, 3, 0, 3, 100, text),
             span(1, 3, 10, 3, 90),  # 80 chars inside the first
             span(2, 9, 0, 9, 100, "  " + text.upper()),  # same text (case/space aside), another document
             span(1, 3, 80, 3, 300, "y" * 220)]  # overlaps by 20 of 220 chars: kept
    assert near_duplicates(spans) == [0, 3]


def test_diversify_puts_distinct_pages_first_and_keeps_everything():
    spans = [span(1, 5, 0, 5, 100), span(1, 5, 200, 5, 300), span(1, 6, 0, 6, 100),
             span(2, 5, 0, 5, 100), span(1, 6, 50, 6, 150)]
    order = diversify(spans, k=3)
    assert order[:3] == [0, 2, 3]
    assert sorted(order) == [0, 1, 2, 3, 4]
    # when there are not enough distinct pages the deferred ones fill the top k, best first
    assert diversify(spans[:2], k=2) == [0, 1]


def test_combine_ranks_weight_one_is_the_rerankers_order_and_zero_the_fused_order():
    order = [1, 2, 3]
    scores = {1: 0.1, 2: 0.9, 3: 0.5}
    assert combine_ranks(order, scores, 1.0) == [2, 3, 1]
    assert combine_ranks(order, scores, 0.0) == [1, 2, 3]


def passage(doc: str, page: int, page_end: int | None = None) -> Passage:
    return Passage(chunk_id=page, collection="dev", document=doc, page=page, page_end=page_end or page,
                   char_start=0, char_end=1, text="t")


def test_hits_need_the_right_document_and_a_covered_gold_page():
    q = Question(id="q", question="?", document="A.pdf", pages=[13, 14])
    results = [passage("B.pdf", 13), passage("A.pdf", 12), passage("A.pdf", 12, 13), passage("A.pdf", 14)]
    assert first_hit(results, q) == 3
    # gains: result 3 covers 13, result 4 covers 14; ideal covers both pages with the first two
    ideal = 1 + 1 / 1.584962500721156
    got = 1 / 2 + 1 / 2.321928094887362
    assert ndcg_at(results, q) == pytest.approx(got / ideal)
    assert ndcg_at([passage("A.pdf", 13), passage("A.pdf", 13)], q) == pytest.approx(1 / ideal)


def test_metrics_arithmetic():
    m = metrics([1, 3, None, 7], [1.0, 0.5, 0.0, 0.0])
    assert m.recall_at_1 == 0.25 and m.recall_at_5 == 0.5
    assert m.mrr_at_10 == pytest.approx((1 + 1 / 3 + 1 / 7) / 4)
    assert m.ndcg_at_5 == pytest.approx(0.375)
