"""Pages are chunked and embedded by segment while the PDF is still being read (issue 18;
``ingest.ahead``), and what is stored is exactly what reading every page first stores: the same
pages, chunks, texts, headings, flags and vectors, bit for bit. Real PDFs and a generated one whose running header becomes
running only after several pages, real child process, real embedder, real Postgres."""

from __future__ import annotations

import json
import os
import threading
import uuid
from pathlib import Path

import numpy as np
import pytest

from ingest import ahead as ahead_module
from ingest import isolate, passages, pipeline
from ingest.child import Child
from ingest.chunk import Chunker, chunk_pages
from ingest.mupdf import pymupdf
from ingest.pdf import RunningSoFar, document_title, extract, find_running_lines, page_parts
from ingest.progress import ProgressLog
from ingest.sources import read_path
from retrieval.store import db
from tests.conftest import DEV_PDFS
from tests.pdfgen import headed_pdf

RUN = uuid.uuid4().hex[:8]
PAGES = 30
PARTS = ("fuel selector", "oil pressure", "carburetor heat", "magnetos", "flaps", "trim", "mixture",
         "pitot heat", "alternator", "transponder", "landing light", "stall warning")


def _body(i: int) -> str:
    return " ".join(f"Step {i}.{j}: check the {PARTS[(i * 5 + j) % len(PARTS)]} and note {i * 31 + j * 7} in the log."
                    for j in range(22))


@pytest.fixture(scope="module")
def headed(tmp_path_factory) -> Path:
    """30 pages with a "Page N" footer; a bold header on pages 1-5 (5 of 30: page text, though it looks
    running while only a few pages are read) and another on pages 10-30 (running, but not until page 12)."""
    headers = ["Chapter One Overview" if i < 5 else "Operating Handbook Revision" if i >= 9 else None
               for i in range(PAGES)]
    return headed_pdf(tmp_path_factory.mktemp("overlap") / "headed-manual.pdf", [_body(i) for i in range(PAGES)],
                      headers)


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> Path:
    """30 pages with a "Page N" footer and no header."""
    return headed_pdf(tmp_path_factory.mktemp("overlap") / "plain-manual.pdf", [_body(i) for i in range(PAGES)],
                      [None] * PAGES)


def _stored(settings, collection: str) -> dict:
    """Everything stored for the one document in ``collection``, without ids, times and collection."""
    with db.connection(settings) as conn:
        doc = conn.execute("SELECT id, to_jsonb(d) - ARRAY['collection', 'id', 'ingested_at', 'added_by', "
                           "'added_via', 'added_workspace'] AS row FROM documents d WHERE collection = %s",
                           (collection,)).fetchone()
        key = (collection, doc["id"])
        return {
            "document": doc["row"],
            "pages": [r["row"] for r in conn.execute(
                "SELECT to_jsonb(p) - ARRAY['collection', 'document_id'] AS row FROM pages p "
                "WHERE collection = %s AND document_id = %s ORDER BY page_no", key)],
            "chunks": [r["row"] for r in conn.execute(
                "SELECT to_jsonb(c) - ARRAY['collection', 'id', 'document_id'] AS row FROM chunks c "
                "WHERE collection = %s AND document_id = %s ORDER BY ordinal", key)],
            "sentences": [tuple(r.values()) for r in conn.execute(
                "SELECT c.ordinal, s.sentence_no, s.embedding::text AS v FROM chunk_sentences s JOIN chunks c "
                "ON c.collection = s.collection AND c.id = s.chunk_id WHERE c.collection = %s AND c.document_id = %s "
                "ORDER BY 1, 2", key)],
            "lexemes": [tuple(r.values()) for r in conn.execute(
                "SELECT lexeme, df FROM document_lexemes WHERE collection = %s AND document_id = %s ORDER BY lexeme",
                key)],
        }


def _same_as_read_first(settings, embedder, pdf: Path, overlapped: str,
                        status: str = "ingested") -> pipeline.IngestResult:
    """Ingest ``pdf`` again with every page read before anything is chunked (``parsed=``), into a
    collection of its own (``overlapped``-read-first), and check the two stored documents are the same."""
    src = read_path(str(pdf), 10**8)
    reference = f"{overlapped}-read-first"
    first = pipeline.ingest_source(settings, embedder, src, reference, quiet=True,
                                   parsed=isolate.parse(src, pipeline.limits(settings)))
    assert first.status == status and first.ahead == 0
    a, b = _stored(settings, overlapped), _stored(settings, reference)
    assert a["document"] == b["document"]
    assert a["pages"] == b["pages"]
    assert len(a["chunks"]) == len(b["chunks"]) and a["chunks"] == b["chunks"]
    assert a["sentences"] == b["sentences"]
    assert a["lexemes"] == b["lexemes"]
    return first


# ------------------------------------------------------------------------------------------------ pure parts

def test_running_so_far_is_find_running_lines_of_the_pages_so_far(headed):
    doc = pymupdf.open(headed)
    texts = [page_parts(doc[i])[0] for i in range(doc.page_count)]
    so_far = RunningSoFar()
    for n, text in enumerate(texts, 1):
        so_far.add(text)
        expected = find_running_lines(texts[:n])
        signatures = set(so_far.counts) | {""}
        assert {s for s in signatures if s in so_far} == expected, n


def test_chunking_page_by_page_gives_the_chunks_of_all_pages(embedder):
    pages = extract(pymupdf.open(DEV_PDFS[0]), range(40))
    whole = chunk_pages(pages, embedder.count_tokens, 120, 30)
    chunker = Chunker(embedder.count_tokens, 120, 30)
    made = [c for p in pages for c in chunker.add(p)]
    assert made and made + chunker.finish() == whole


@pytest.mark.parametrize("pdf", [*DEV_PDFS, None], ids=lambda p: p.name if p else "headed")
def test_pages_sent_one_by_one_are_the_pages_extracted_whole(settings, headed, pdf):
    pdf = pdf or headed
    seen: list[tuple] = []
    got = isolate.parse(read_path(str(pdf), 10**8), pipeline.limits(settings),
                        on_start=lambda n, title: seen.append(("start", n, title)),
                        on_page=lambda parts: seen.append(parts))
    doc = pymupdf.open(pdf)
    assert got.pages == extract(doc)
    assert got.title == document_title(doc, pdf.name)
    assert seen[0] == ("start", doc.page_count, got.title)
    assert seen[1:] == [page_parts(doc[i]) for i in range(doc.page_count)]


@pytest.mark.parametrize("lines, reason", [
    (['["pages", 2, "T"]', '["page", 2, "text", [], 0, null]'], None),  # out of order
    (['["pages", 1, "T"]', '["page", 1, 5, [], 0, null]'], None),  # not text
    (['["pages", 2, "T"]', '["page", 1, "text", [], 0, null]', '["done"]'], None),  # a page short
    (['["refused", "encrypted PDF (password protected); decrypt it first"]'], "encrypted PDF"),
])
def test_a_child_that_breaks_the_protocol_is_a_crash(lines, reason):
    messages = [json.loads(line) for line in lines]
    result = isolate._converse(messages, lambda: None, None, None, [], isolate.Limits(), "", [])
    if reason is None:
        assert result is None  # parse() then says how the child ended ("stopped without an answer")
    else:
        assert isinstance(result, str) and reason in result


def test_a_line_that_is_not_our_protocol_ends_the_childs_messages():
    read_end, write_end = os.pipe()
    os.write(write_end, b'["pages", 1, "T"]\nMuPDF error: not JSON\n["done"]\n')
    os.close(write_end)
    try:
        assert list(Child(None, read_end).messages()) == [["pages", 1, "T"]]  # type: ignore[arg-type]
    finally:
        os.close(read_end)


# ------------------------------------------------------------------------------------------------ the pipeline

@pytest.fixture
def small_segments(monkeypatch):
    """Segments of a few pages, so that documents of the test corpus have several."""
    monkeypatch.setattr(passages, "SEGMENT_PAGES", 30)
    return 30


def test_a_document_of_one_segment_is_embedded_all_together(settings, embedder):
    """Up to ``SEGMENT_PAGES`` pages, a document's vectors are those of all its chunks embedded in one
    call (sorted by length, in batches), as before there were segments; nothing is embedded ahead."""
    pdf = next(p for p in DEV_PDFS if "ACS-6C" in p.name)  # 87 pages
    collection = f"overlap-{RUN}-one-segment"
    src = read_path(str(pdf), 10**8)
    res = pipeline.ingest_source(settings, embedder, src, collection, quiet=True)
    assert res.status == "ingested" and res.ahead == 0 and res.pages <= passages.SEGMENT_PAGES
    parsed = isolate.parse(src, pipeline.limits(settings))
    chunks = chunk_pages(parsed.pages, embedder.count_tokens, settings.ingest.chunk_tokens,
                         settings.ingest.chunk_overlap_tokens)
    texts = [passages.indexed_text(c, parsed.title, embedder) for c in chunks]
    vectors, windows = embedder.embed_chunks(texts, [(c.context, c.text) for c in chunks])
    with db.connection(settings) as conn:
        stored = conn.execute("SELECT c.embedding FROM chunks c JOIN documents d ON d.collection = c.collection "
                              "AND d.id = c.document_id WHERE c.collection = %s ORDER BY c.ordinal",
                              (collection,)).fetchall()
        sentences = conn.execute("SELECT c.ordinal, s.embedding FROM chunk_sentences s JOIN chunks c "
                                 "ON c.collection = s.collection AND c.id = s.chunk_id WHERE c.collection = %s "
                                 "ORDER BY c.ordinal, s.sentence_no", (collection,)).fetchall()
    assert np.array_equal(np.array([r["embedding"].to_numpy() for r in stored]), vectors)
    by_chunk: dict[int, list] = {}
    for r in sentences:
        by_chunk.setdefault(r["ordinal"], []).append(r["embedding"].to_numpy())
    for ordinal, w in enumerate(windows):
        assert np.array_equal(np.array(by_chunk.get(ordinal, [])).reshape(w.shape), w.astype(np.float16)), ordinal  # stored as halfvec


@pytest.mark.parametrize("pdf", [p for p in DEV_PDFS if "Part-91" not in p.name], ids=lambda p: p.name)
def test_a_real_pdf_embedded_while_read_is_stored_as_if_read_first(settings, embedder, pdf, small_segments):
    collection = f"overlap-{RUN}-{pdf.stem[:20]}"
    res = pipeline.ingest_source(settings, embedder, read_path(str(pdf), 10**8), collection, quiet=True)
    assert res.status == "ingested"
    _same_as_read_first(settings, embedder, pdf, collection)


def test_guesses_right_and_wrong_and_the_stored_document_is_the_same(settings, embedder, plain, monkeypatch):
    """Segments of 5 pages; pages handed over one at a time, each once the guesser has taken (and,
    past the first segment, bounded) the one before, so its guesses are the same on every run. Page 8
    is bounded wrongly on purpose (as if its footer were not known to run yet): the segment of pages
    6-10 is guessed wrong and embedded again, the others are kept; what is stored is what reading
    every page first stores."""
    monkeypatch.setattr(passages, "SEGMENT_PAGES", 5)
    events: list[str] = []
    guessed: list[int] = []  # chunks per segment embedded ahead
    state = {"taken": 0, "bounded": 0}
    changed = threading.Condition()
    real_page_from, real_embed, real_parse = ahead_module.page_from, ahead_module.embed_segment, pipeline.parse
    real_add = RunningSoFar.add

    def add(self, text):
        real_add(self, text)
        with changed:
            state["taken"] += 1
            changed.notify_all()

    def page_from(number, parts, running, injection):
        page = real_page_from(number, parts, set() if number == 8 else running, injection)
        with changed:
            state["bounded"] = number
            changed.notify_all()
        return page

    def embed_segment(embedder_, indexed, chunks, keys, on_batch=None):
        events.append("embed")
        guessed.append(len(chunks))
        return real_embed(embedder_, indexed, chunks, keys, on_batch=on_batch)

    def parse(src, limits, on_start=None, on_page=None, injection=(), **ocr):
        def page(parts):
            read = events.count("read")
            with changed:  # page n+1 once page n is taken and bounded (a safety timeout, not a timing test)
                assert changed.wait_for(lambda: state["taken"] >= read and (read <= 6 or state["bounded"] >= read),
                                        timeout=300), "the guesser did not keep up"
            events.append("read")
            on_page(parts)
        return real_parse(src, limits, on_start, page, injection, **ocr)

    monkeypatch.setattr(RunningSoFar, "add", add)
    monkeypatch.setattr(ahead_module, "page_from", page_from)
    monkeypatch.setattr(ahead_module, "embed_segment", embed_segment)
    monkeypatch.setattr(pipeline, "parse", parse)
    collection = f"overlap-{RUN}-plain"
    progress = ProgressLog(plain.name, 3600)
    res = pipeline.ingest_source(settings, embedder, read_path(str(plain), 10**8), collection, quiet=True,
                                 progress=progress)
    monkeypatch.setattr(ahead_module, "embed_segment", real_embed)
    monkeypatch.setattr(pipeline, "parse", real_parse)

    assert res.status == "ingested" and res.pages == PAGES
    last_read = len(events) - 1 - events[::-1].index("read")
    assert "embed" in events[:last_read], events  # embedding began before the last page came
    assert progress.ahead == sum(guessed) and progress.pages_done == PAGES
    assert guessed[0] <= res.ahead < sum(guessed), (res.ahead, guessed)  # the first kept, the second not
    reference = _same_as_read_first(settings, embedder, plain, collection)
    assert res.chunks == reference.chunks


def test_a_failed_read_stops_the_guesser_and_stores_nothing(settings, embedder, headed, monkeypatch):
    """The reader fails on page 20 of 30 (after segments were embedded ahead): the error is the
    ingest's, the guessing thread is gone, and nothing of the document is stored."""
    monkeypatch.setattr(passages, "SEGMENT_PAGES", 5)
    real_parse = pipeline.parse

    def parse(src, limits, on_start=None, on_page=None, injection=(), **ocr):
        def page(parts):
            if len(seen) == 19:
                raise RuntimeError("reader broke on page 20")
            seen.append(parts)
            on_page(parts)
        return real_parse(src, limits, on_start, page, injection, **ocr)

    seen: list = []
    monkeypatch.setattr(pipeline, "parse", parse)
    collection = f"overlap-{RUN}-failed"
    with pytest.raises(RuntimeError, match="page 20"):
        pipeline.ingest_source(settings, embedder, read_path(str(headed), 10**8), collection, quiet=True)
    assert not [t for t in threading.enumerate() if t.name == "cv-embed-ahead"]
    with db.connection(settings) as conn:
        assert conn.execute("SELECT count(*) AS n FROM documents WHERE collection = %s", (collection,)).fetchone()["n"] == 0


def test_a_guesser_that_fails_costs_only_time(settings, embedder, plain, monkeypatch, caplog):
    """The guessing thread's embedding raises: the failure is logged, the pipeline embeds every
    segment itself, and the stored document is the one reading every page first stores."""
    monkeypatch.setattr(passages, "SEGMENT_PAGES", 5)

    def broken(*args, **kwargs):
        raise RuntimeError("encoder broke")

    monkeypatch.setattr(ahead_module, "embed_segment", broken)
    collection = f"overlap-{RUN}-broken-guesser"
    with caplog.at_level("WARNING", logger="ingest.ahead"):
        res = pipeline.ingest_source(settings, embedder, read_path(str(plain), 10**8), collection, quiet=True)
    assert res.status == "ingested" and res.ahead == 0
    assert "embedding while reading stopped" in caplog.text
    _same_as_read_first(settings, embedder, plain, collection)


def test_a_new_edition_keeps_vectors_and_matches_a_read_first_edition(settings, embedder, headed, tmp_path,
                                                                       monkeypatch):
    """A changed page of an indexed document: the passages the edition had are not embedded again
    (neither ahead nor after), and the result is the one the same edition read whole stores over
    the same first edition."""
    monkeypatch.setattr(passages, "SEGMENT_PAGES", 5)
    collection = f"overlap-{RUN}-edition"
    v1 = read_path(str(headed), 10**8)
    pipeline.ingest_source(settings, embedder, v1, collection, quiet=True)
    pipeline.ingest_source(settings, embedder, v1, f"{collection}-read-first", quiet=True,
                           parsed=isolate.parse(v1, pipeline.limits(settings)))
    headers = ["Chapter One Overview" if i < 5 else "Operating Handbook Revision" if i >= 9 else None
               for i in range(PAGES)]
    bodies = [_body(i) for i in range(PAGES)]
    bodies[20] = bodies[20].replace("Step 20.3:", "Revised step 20.3:")
    v2 = headed_pdf(tmp_path / headed.name, bodies, headers)
    res = pipeline.ingest_source(settings, embedder, read_path(str(v2), 10**8), collection, quiet=True)
    assert res.status == "replaced" and 0 < res.reused < res.chunks
    _same_as_read_first(settings, embedder, v2, collection, status="replaced")
