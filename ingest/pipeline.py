"""Ingest one source: validate → extract visible pages → chunk → embed → store in one transaction."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import cache
from typing import Any

import numpy as np
import psycopg
from tqdm import tqdm

from ingest import legibility, store
from ingest.ahead import EmbedAhead
from ingest.chunk import chunk_pages
from ingest.isolate import Limits, Parsed, parse
from ingest.passages import Segment, Vectors, embed_segment, indexed_text, key_of, plan
from ingest.ocr import OcrOptions, mean_confidence
from ingest.pdf import Page, PageParts
from ingest.progress import ProgressLog, StageClock
from ingest.sources import InputError, Source
from retrieval.store import db, index
from retrieval.encode.embed import Embedder
from retrieval.text.identifiers import identifier_terms
from retrieval.settings import Settings
from retrieval.store.collections import ingest_profile
from retrieval.store.placement import placed
from retrieval.text.injection import DEFAULT_RULES

log = logging.getLogger(__name__)

# Bump when extraction or chunking changes: documents indexed by an older pipeline are re-indexed
# when ingested again, instead of being skipped as unchanged.
PIPELINE_VERSION = "2026-12-07.3"  # 12-07.3: a searchable scan's text layer is judged on its tokens that hold a letter or digit (a grammar's "::=" and "|" no longer send an exact layer to OCR; ingest.reading.layer_quality); 12-07.2: a page with a few words beside a rule or an ornament keeps its text layer instead of going to OCR (ingest.reading.how); 12-07.1: a translucent fill is blended over what lies beneath it when judging text contrast (a 30 % page tint no longer hides the page and sends it to OCR); 12-06.3: a row continuing a table may hold one cell of up to 16 words (retrieval.text.tables.RUN_CELL_WORDS); 12-06.2: text under 3 pt hidden, page labels cleaned and capped at 32 characters (issue 39); 12-06.1: pages without usable text read by OCR (ingest.reading); 12-05.1: no sentence (so no chunk) ends after an abbreviation before a digit ("(p. 181)"); .4 (12-04.1): chunk and sentence vectors from one int8 ONNX pass (retrieval.encode.passage_encoder); .1: identifier terms, lexeme counts and sentence vectors at ingest; .2: table rows, prompt-injection flags; .3: one-word section titles set larger than the body text
# (Embedding by segments of 256 pages, ingest.passages, is not a new version: a document of up to 256 pages
# is embedded bit for bit as before; a longer one differs only in which chunks share a batch.)


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
    ahead: int = 0  # chunks whose vectors were made while the pages were being read (``ingest.ahead``)
    warning: str = ""  # what the reader should know about what was stored: a damaged PDF, repaired
    ocr_pages: int = 0  # pages whose words were read by OCR (ours, or a searchable scan's own text layer)
    ocr_confidence: float | None = None  # our OCR's mean confidence over them (characters weighing)
    # wall and CPU seconds of each step ("start", "read", "split", "embed", "write"; ``StageClock``)
    stages: dict[str, dict[str, float]] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def ocr_options(settings: Settings) -> OcrOptions:
    return OcrOptions(**{**settings.ocr.model_dump(), "languages": tuple(settings.ocr.languages)})


def limits(settings: Settings) -> Limits:
    return Limits(memory_mb=settings.ingest.pdf_max_memory_mb, cpu_s=settings.ingest.pdf_max_cpu_s,
                  max_pages=settings.ingest.pdf_max_pages, max_page_content_mb=settings.ingest.pdf_max_page_content_mb,
                  max_page_chars=settings.ingest.pdf_max_page_chars,
                  max_document_chars=settings.ingest.pdf_max_document_chars)


def read_pdf(settings: Settings, src: Source, quiet: bool, progress: ProgressLog | None = None,
             ahead: EmbedAhead | None = None, injection: tuple[str, ...] = DEFAULT_RULES) -> Parsed:
    """Pages and title, parsed in a limited child process (``ingest.isolate``); InputError otherwise.
    ``ahead``: handed each page as it is read, to chunk and embed it meanwhile."""
    bar = tqdm(desc=f"{src.name}: pages", unit="page", disable=None if not quiet else True, leave=False)

    def start(n: int, title: str) -> None:
        bar.reset(total=n)
        if ahead:
            ahead.start(n, title)
        if progress:
            progress.pages_total, progress.pages_done = n, 0
            progress.begin("reading pages")

    def page(parts: PageParts) -> None:
        if ahead:
            ahead.page(parts)
        if parts.read_by != "text":
            ocr_read[0] += 1
            bar.set_postfix_str(f"{ocr_read[0]:,} read by OCR", refresh=False)
        bar.update(1)
        if progress:
            progress.ocr_pages = ocr_read[0]
            progress.pages_done += 1

    ocr_read = [0]
    try:
        return parse(src, limits(settings), on_start=start, on_page=page, injection=injection,
                     ocr=ocr_options(settings))
    finally:
        bar.close()


def _same_bytes(conn: psycopg.Connection, src: Source, collection: str) -> tuple[store.Existing | None, bool]:
    """The document already holding these bytes, and whether that makes this ingest a no-op."""
    same = store.find_same_bytes(conn, collection, src.sha256)
    return same, same is not None and (same.pipeline_version == PIPELINE_VERSION or same.name != src.name)


def parse_ahead(settings: Settings, src: Source, collection: str) -> Parsed | None:
    """Parse ``src`` now, for an ``ingest_source`` call to come (the command line parses the next PDF
    in its child process while the current one is embedded); None when that call will find it
    unchanged and parse nothing. Raises InputError like ``ingest_source``."""
    with db.connection(settings) as conn:
        if _same_bytes(conn, src, collection)[1]:
            return None
    return parse(src, limits(settings), injection=ingest_profile(settings, collection).injection,
                 ocr=ocr_options(settings))


def _status(same: store.Existing | None, replaced: bool) -> str:
    return "reindexed" if same is not None else "replaced" if replaced else "ingested"


def ingest_source(settings: Settings, embedder: Embedder, src: Source, collection: str,
                  quiet: bool = False, on_progress: Callable[[str], None] | None = None,
                  progress: ProgressLog | None = None, actor: store.Actor | None = None,
                  parsed: Parsed | None = None,
                  before_commit: Callable[[psycopg.Connection, str, int, int], None] | None = None) -> IngestResult:
    """Ingest one PDF. Raises InputError (bad input, nothing stored) or db errors. ``progress``: where
    the work is, for the lines a ``ProgressLog`` writes off a terminal. ``actor``: who asked (recorded
    with the document; default the command line's user). ``parsed``: its pages, already read by
    ``parse_ahead``; without them the pages are read here, and chunked and embedded as they come
    (``ingest.ahead``), for the same result as if they had all been read first. ``before_commit(conn,
    status, pages, chunks)``: run inside the document's transaction, last (``store.write_document``);
    raising there stores nothing."""
    t0 = time.perf_counter()
    clock = StageClock()
    settings = placed(settings, [collection])  # the collection's own primary (retrieval.store.placement)
    db.ready(settings)
    with db.connection(settings) as conn:
        index.ensure_model(conn, embedder.name, embedder.dim)
        same, unchanged = _same_bytes(conn, src, collection)
        # a new edition keeps the vectors of its unchanged chunks
        reuse = {} if unchanged else store.reusable_vectors(conn, collection, src.name, PIPELINE_VERSION)
    if unchanged:
        note = "already ingested" if same.name == src.name else f"same bytes already ingested as {same.name}"
        return IngestResult(src.name, src.origin, collection, "unchanged", message=note,
                            seconds=time.perf_counter() - t0)
    # token counts remembered per text: the chunks are made twice when some were made while the pages
    # were read (ingest.ahead), and the second time meets the same sentences
    count = cache(embedder.count_tokens)
    made_ahead: dict[int, Segment] = {}
    if embedder.passage_export_pending():  # said first: the pages' bar would otherwise stall at the first embedding
        if not quiet and sys.stderr.isatty():  # off a terminal the progress lines say it
            tqdm.write(f"{src.name}: preparing the embedding model for this machine (the first ingest only; "
                       "about 20 s on 2 cores)", file=sys.stderr)
        if progress:
            progress.begin("preparing the embedding model (the first ingest only)")
        embedder.passage_encoder()
    profile = ingest_profile(settings, collection)  # the collection's preset: injection rules, abbreviations
    clock.lap("start")
    ahead: EmbedAhead | None = None
    if parsed is None:
        injection = profile.injection
        ahead = EmbedAhead(embedder, count, settings.ingest.chunk_tokens, settings.ingest.chunk_overlap_tokens,
                           known=reuse, progress=progress, injection=injection,
                           max_chunks=settings.ingest.max_document_chunks, abbreviations=profile.abbreviations)
        try:
            parsed = read_pdf(settings, src, quiet, progress, ahead, injection)
        except BaseException:
            ahead.stop(abort=True)
            raise
    # between the last page and the embedding bar: the passages of the last pages are embedded and the
    # document is split; a line says so rather than no bar at all
    between = tqdm(desc=f"{src.name}: embedding", bar_format="{desc}: finishing the last pages' passages, then "
                   "splitting the document", disable=None if not quiet else True, leave=False)
    try:
        if ahead is not None:
            made_ahead = ahead.stop()
        clock.lap("read")  # with the embedding done while reading, finished here
        pages, title = parsed.pages, parsed.title
        if on_progress:
            on_progress(f"{src.name}: {len(pages)} pages extracted")
        if progress:
            progress.begin("splitting into passages")
        chunks = chunk_pages(pages, count, settings.ingest.chunk_tokens, settings.ingest.chunk_overlap_tokens,
                             profile.abbreviations)
    finally:
        between.close()
    if not chunks:  # nothing a search could find: refused rather than stored as an empty document
        raise InputError(nothing_searchable(src.origin, len(pages), settings.ocr.mode))
    if len(chunks) > settings.ingest.max_document_chunks:
        raise InputError(f"{src.origin}: {len(chunks):,} passages; the limit is {settings.ingest.max_document_chunks:,} "
                         "(CHAPTERVERSE_MAX_DOCUMENT_CHUNKS)")
    texts = [indexed_text(c, title, embedder, count) for c in chunks]
    keys = [key_of(c, t) for t, c in zip(texts, chunks, strict=True)]
    fresh: dict[int, Vectors] = {}  # by chunk index: the vectors made now or while the pages were read
    todo: list[list[int]] = []  # the segments still to embed
    right = 0
    for number, idx in plan(chunks, keys, reuse).items():
        guessed = made_ahead.get(number)
        if guessed is not None and guessed.keys == tuple(keys[i] for i in idx):
            fresh.update(zip(idx, guessed.vectors, strict=True))
            right += 1
        else:
            todo.append(idx)
    kept = len(fresh)
    to_embed = sum(map(len, todo))
    clock.lap("split")
    bar = tqdm(total=len(chunks), initial=len(chunks) - to_embed, desc=f"{src.name}: embedding", unit="chunk",
               disable=None if not quiet else True, leave=False)  # counted over every passage, as the result says
    if progress:  # counted over every passage: those embedded while reading (or kept) are done already
        progress.begin("embedding passages", len(chunks), done=len(chunks) - to_embed)
    counted = bar.update if progress is None else lambda n: (bar.update(n), progress.advance(n))
    try:
        for idx in todo:
            segment = embed_segment(embedder, [texts[i] for i in idx], [chunks[i] for i in idx],
                                    [keys[i] for i in idx], on_batch=counted)
            fresh.update(zip(idx, segment.vectors, strict=True))
    finally:
        bar.close()
    pairs = [fresh[i] if i in fresh else reuse[k] for i, k in enumerate(keys)]
    vectors = np.array([v for v, _ in pairs], dtype=np.float32).reshape(len(chunks), embedder.dim)
    sentence_vectors = [w for _, w in pairs]
    clock.lap("embed")
    log.info("%s: %d of %d passages embedded while its pages were read (%d of %d segments guessed right)",
             src.name, kept, len(chunks), right, len(made_ahead))
    if on_progress:
        on_progress(f"{src.name}: {len(chunks)} chunks embedded")
    if progress:
        progress.begin(f"writing {len(chunks):,} passages to the database")
    with db.connection(settings) as conn:
        _, replaced = store.write_document(
            conn, collection=collection, name=src.name, sha256=src.sha256, source=src.origin, url=src.url,
            size=len(src.data), pages=pages, chunks=chunks, search_texts=texts, vectors=vectors,
            pipeline_version=PIPELINE_VERSION, title=title, terms=[identifier_terms(t) for t in texts],
            sentence_vectors=sentence_vectors, actor=actor, preset=settings.preset,
            before_commit=None if before_commit is None else lambda c, old: before_commit(
                c, _status(same, old), len(pages), len(chunks)))
    clock.lap("write")
    status = _status(same, replaced)
    reused = len(chunks) - len(fresh)
    return IngestResult(src.name, src.origin, collection, status, len(pages), len(chunks),
                        time.perf_counter() - t0, reused=reused, ahead=kept,
                        message=f"{reused:,} of {len(chunks):,} passages unchanged, not embedded again" if reused else "",
                        warning="; ".join(n for n in (parsed.damage_note(), legibility.note(pages)) if n),
                        stages=clock.stages, **ocr_summary(pages))


def nothing_searchable(origin: str, pages: int, ocr_mode: str) -> str:
    """One line for a PDF whose pages give no passage: no body text once running headers and footers
    and text hidden from readers are set aside; what to try depends on ``ocr_mode``
    (CHAPTERVERSE_OCR_MODE)."""
    hint = {"off": "OCR is off: if its pages are scans, CHAPTERVERSE_OCR_MODE=auto reads them.",
            "auto": "If its pages are scans, CHAPTERVERSE_OCR_MODE=always reads every page by OCR."}.get(
        ocr_mode, "Not even OCR (CHAPTERVERSE_OCR_MODE=always) found any.")
    return (f"{origin}: nothing searchable found: its {pages:,} page(s) hold no text besides running headers and "
            f"footers (text hidden from readers does not count); nothing stored. {hint}")


def ocr_summary(pages: Sequence[Page]) -> dict[str, Any]:
    """How many pages were read by OCR and, for ours, the mean confidence (characters weighing)."""
    read = [p for p in pages if p.read_by != "text"]
    mean = mean_confidence((p.ocr_confidence, len(p.text)) for p in read if p.ocr_confidence is not None)
    return {"ocr_pages": len(read), "ocr_confidence": None if mean is None else round(mean, 3)}
