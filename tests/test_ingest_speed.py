"""Issue 40 item 2: the passage encoder runs its batches side by side on every core
(``retrieval.encode.side_by_side``) and stores exactly what one batch at a time stored: the same
chunk and sentence-window vectors, bit for bit, for a real PDF's passages; results come back in
order, and a progress callback that raises stops the work."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pymupdf
import pytest

from ingest.chunk import chunk_pages
from ingest.passages import embed_segment, indexed_text, key_of
from ingest.pdf import document_title, extract
from retrieval.encode.side_by_side import in_order

CORPUS = Path(__file__).parent / "corpus"


@pytest.fixture(scope="module")
def cfr(embedder):
    doc = pymupdf.open(CORPUS / "14-CFR-Part-91_General-Operating-and-Flight-Rules.pdf")
    pages = extract(doc)[40:52]
    title = document_title(doc, "14-CFR-Part-91.pdf")
    chunks = chunk_pages(pages, embedder.count_tokens, 200, 40)
    texts = [indexed_text(c, title, embedder) for c in chunks]
    return chunks, texts, [key_of(c, t) for c, t in zip(chunks, texts, strict=True)]


def test_side_by_side_batches_store_the_same_vectors_as_one_at_a_time(embedder, cfr):
    chunks, texts, keys = cfr
    assert len(chunks) > 3 * 8  # several batches, so several run at once
    one = embed_segment(embedder, texts, chunks, keys, workers=1)
    both = embed_segment(embedder, texts, chunks, keys, workers=2)
    assert one.keys == both.keys
    for (v1, w1), (v2, w2) in zip(one.vectors, both.vectors, strict=True):
        assert np.array_equal(v1, v2)
        assert np.array_equal(w1, w2)


def test_progress_is_counted_for_every_passage_and_a_raising_callback_stops_the_work(embedder, cfr):
    chunks, texts, keys = cfr
    counted: list[int] = []
    embed_segment(embedder, texts, chunks, keys, on_batch=counted.append, workers=2)
    assert sum(counted) == len(chunks)

    class Stop(Exception):
        pass

    def stop_after_first(n: int) -> None:
        raise Stop

    with pytest.raises(Stop):
        embed_segment(embedder, texts, chunks, keys, on_batch=stop_after_first, workers=2)
    assert not [t for t in threading.enumerate() if t.name.startswith("cv-encode")]  # no run outlives the call


def test_results_come_back_in_order_and_runs_overlap():
    running, most = [0], [0]
    lock = threading.Lock()

    def run(x: int) -> int:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.02 * (5 - x % 5))  # later items finish first
        with lock:
            running[0] -= 1
        return x * x

    with in_order(run, list(range(12)), workers=2) as results:
        assert list(results) == [x * x for x in range(12)]
    assert most[0] == 2
    with in_order(run, list(range(4)), workers=1) as results:
        assert list(results) == [0, 1, 4, 9]
