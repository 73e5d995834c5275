"""Ingest one source: validate → extract visible pages → chunk → embed → store in one transaction."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import pymupdf
from tqdm import tqdm

from ingest import store
from ingest.chunk import Chunk, chunk_pages
from ingest.pdf import Page, document_title, extract
from ingest.progress import ProgressLog
from ingest.sources import InputError, Source
from retrieval import db, index
from retrieval.embed import Embedder
from retrieval.identifiers import identifier_terms
from retrieval.settings import Settings
from retrieval.textnorm import search_text

log = logging.getLogger(__name__)

MIN_TEXT_CHARS_PER_PAGE = 20  # below this on average, the PDF has no usable text layer
# Bump when extraction or chunking changes: documents indexed by an older pipeline are re-indexed
# when ingested again, instead of being skipped as unchanged.
PIPELINE_VERSION = "2026-12-04.1"  # .4 (12-04.1): chunk and sentence vectors from one int8 ONNX pass (retrieval.passage_encoder); .1: identifier terms, lexeme counts and sentence vectors at ingest; .2: table rows, prompt-injection flags; .3: one-word section titles set larger than the body text


@dataclass
class IngestResult:
    name: str
    origin: str
    collection: str
    status: str  # "ingested", "replaced", "unchanged"
    pages: int = 0
    chunks: int = 0
    seconds: float = 0.0
    message: str = ""
    reused: int = 0  # chunks whose vectors were kept from the edition replaced

    def as_dict(self) -> dict:
        return asdict(self)


def open_pdf(src: Source) -> pymupdf.Document:
    try:
        doc = pymupdf.open(stream=src.data, filetype="pdf")
    except Exception as exc:  # noqa: BLE001  (MuPDF raises several types for damaged files)
        raise InputError(f"{src.origin}: corrupt or unreadable PDF ({str(exc).splitlines()[0]})") from exc
    if doc.needs_pass or doc.is_encrypted:
        raise InputError(f"{src.origin}: encrypted PDF (password protected); decrypt it first")
    if doc.page_count == 0:
        raise InputError(f"{src.origin}: corrupt or unreadable PDF (no pages)")
    return doc


def extract_pages(src: Source, doc: pymupdf.Document, quiet: bool, progress: ProgressLog | None = None) -> list[Page]:
    bar = tqdm(range(doc.page_count), desc=f"{src.name}: pages", unit="page", disable=None if not quiet else True,
               leave=False)
    try:
        pages = extract(doc, progress.pages(doc.page_count, bar) if progress else bar)
    except Exception as exc:  # noqa: BLE001
        raise InputError(f"{src.origin}: corrupt or unreadable PDF ({str(exc).splitlines()[0]})") from exc
    finally:
        bar.close()
    visible = sum(len(p.text.strip()) for p in pages)
    if visible < MIN_TEXT_CHARS_PER_PAGE * len(pages) * 0.1 or visible < MIN_TEXT_CHARS_PER_PAGE:
        raise InputError(f"{src.origin}: no extractable text in {len(pages)} page(s); it looks scanned "
                         "(OCR is not supported yet)")
    return pages


def indexed_text(chunk: Chunk, title: str, embedder: Embedder) -> str:
    """What is embedded and keyword-indexed: the document title, the section headings in force and
    starting inside the chunk, then the cleaned chunk text. Headings, then the title, are left out
    when they would push the text past the embedder's token limit."""
    headings = " · ".join(h for h in (chunk.context, *chunk.inner_titles) if h)
    for prefix in ([title, headings], [title], []):
        text = search_text("\n".join([p for p in prefix if p] + [chunk.text]))
        if not prefix or embedder.count_tokens(text) <= embedder.max_tokens:
            return text
    raise AssertionError("unreachable")


def _counting(bar: tqdm, progress: ProgressLog | None) -> Callable[[int], object]:
    if progress is None:
        return bar.update
    return lambda n: (bar.update(n), progress.advance(n))


def ingest_source(settings: Settings, embedder: Embedder, src: Source, collection: str,
                  quiet: bool = False, on_progress: Callable[[str], None] | None = None,
                  progress: ProgressLog | None = None, actor: store.Actor | None = None) -> IngestResult:
    """Ingest one PDF. Raises InputError (bad input, nothing stored) or db errors. ``progress``: where
    the work is, for the lines a ``ProgressLog`` writes off a terminal. ``actor``: who asked (recorded
    with the document; default the command line's user)."""
    t0 = time.perf_counter()
    with db.connection(settings) as conn:
        index.ensure_model(conn, embedder.name, embedder.dim)
        same = store.find_same_bytes(conn, collection, src.sha256)
    if same is not None and (same.pipeline_version == PIPELINE_VERSION or same.name != src.name):
        note = "already ingested" if same.name == src.name else f"same bytes already ingested as {same.name}"
        return IngestResult(src.name, src.origin, collection, "unchanged", message=note,
                            seconds=time.perf_counter() - t0)
    doc = open_pdf(src)
    try:
        pages = extract_pages(src, doc, quiet, progress)
        title = document_title(doc, src.name)
    finally:
        doc.close()
    if on_progress:
        on_progress(f"{src.name}: {len(pages)} pages extracted")
    if progress:
        progress.begin("splitting into passages")
    chunks = chunk_pages(pages, embedder.count_tokens, settings.chunk_tokens, settings.chunk_overlap_tokens)
    texts = [indexed_text(c, title, embedder) for c in chunks]
    keys = [store.chunk_key(t, c.context, c.text) for t, c in zip(texts, chunks, strict=True)]
    with db.connection(settings) as conn:  # a new edition keeps the vectors of its unchanged chunks
        reuse = store.reusable_vectors(conn, collection, src.name, PIPELINE_VERSION)
    todo = [i for i, k in enumerate(keys) if k not in reuse]
    bar = tqdm(total=len(todo), desc=f"{src.name}: embedding", unit="chunk",
               disable=None if not quiet else True, leave=False)
    if progress:
        progress.begin("embedding passages", len(todo))
    try:
        fresh, fresh_windows = embedder.embed_chunks([texts[i] for i in todo],
                                                     [(chunks[i].context, chunks[i].text) for i in todo],
                                                     on_batch=_counting(bar, progress))
    finally:
        bar.close()
    vectors = np.zeros((len(chunks), embedder.dim), dtype=np.float32)
    sentence_vectors: list[np.ndarray] = [np.zeros((0, embedder.dim), dtype=np.float32)] * len(chunks)
    for j, i in enumerate(todo):
        vectors[i], sentence_vectors[i] = fresh[j], fresh_windows[j]
    for i, k in enumerate(keys):
        if k in reuse:
            vectors[i], sentence_vectors[i] = reuse[k].vector, reuse[k].sentence_vectors
    if on_progress:
        on_progress(f"{src.name}: {len(chunks)} chunks embedded")
    if progress:
        progress.begin(f"writing {len(chunks):,} passages to the database")
    with db.connection(settings) as conn:
        _, replaced = store.write_document(
            conn, collection=collection, name=src.name, sha256=src.sha256, source=src.origin, url=src.url,
            size=len(src.data), pages=pages, chunks=chunks, search_texts=texts, vectors=vectors,
            pipeline_version=PIPELINE_VERSION, title=title, terms=[identifier_terms(t) for t in texts],
            sentence_vectors=sentence_vectors, actor=actor)
    status = "reindexed" if same is not None else "replaced" if replaced else "ingested"
    reused = len(chunks) - len(todo)
    return IngestResult(src.name, src.origin, collection, status, len(pages), len(chunks),
                        time.perf_counter() - t0, reused=reused,
                        message=f"{reused:,} of {len(chunks):,} passages unchanged, not embedded again" if reused else "")
