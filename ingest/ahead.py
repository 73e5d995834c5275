"""Segments embedded while the PDF is still being read (issue 18): guess, then check.

The child process that parses a PDF (``ingest.isolate``) sends each page as soon as it has read it,
but what gets chunked of a page, its body, leaves out the running headers and footers, and those are
known only once every page is in (``ingest.pdf.find_running_lines``: lines at the page edges on 20%
of all pages). Chunks are embedded by segment (``ingest.passages``: those starting on pages 1-256,
257-512, ...), so ``EmbedAhead`` guesses, on a thread of its own: once the first segment's pages and
the page after them are read, it bounds each page read with the running lines of the pages read so
far (``ingest.pdf.RunningSoFar``: at least 257 of them), chunks the pages in order
(``ingest.chunk.Chunker``, the chunker itself) and embeds each segment as soon as a chunk of a later
segment shows it complete. A document of one segment is not guessed at all.

When the last page is in, the pipeline stops it (the segment being embedded is finished), chunks the
pages as it always did, and takes from here each segment whose list of chunks came out the same: a
segment's vectors are a function of that list (``ingest.passages``), so what is stored is what
reading the whole PDF first would have stored. A wrong guess (a page bounded otherwise) costs the
embedding of its segment and nothing else.

Its failures are its own: an error here stops the guessing, and the pipeline embeds what is missing
and reports any error itself. Of progress it only counts the passages it embedded
(``ProgressLog.ahead``, a plain counter): a progress report may stop a job by raising, and that
belongs to the pipeline's thread.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Collection, Container

from ingest.chunk import Chunk, Chunker
from ingest import passages
from ingest.passages import Key, Segment, embed_segment, indexed_text, key_of, segment_of
from ingest.pdf import PageParts, RunningSoFar, page_from
from ingest.progress import ProgressLog
from retrieval.encode.embed import Embedder
from retrieval.text.injection import DEFAULT_RULES

log = logging.getLogger(__name__)


# Characters of pages read and not yet taken by the guessing thread: the reading (a child process)
# can run far ahead of the embedding, and each page waits here; beyond this the guessing stops.
MAX_QUEUED_CHARS = 8_000_000


class _Stopped(Exception):
    """Raised inside an embedding to drop it (the ingest failed or was cancelled)."""


class EmbedAhead:
    """Segments embedded from the pages read so far; ``start``, then ``page`` for each page in order
    (from the thread that reads them), then ``stop``, which returns the segments by number."""

    def __init__(self, embedder: Embedder, count: Callable[[str], int], budget: int, overlap: int,
                 known: Container[Key] = (), progress: ProgressLog | None = None,
                 injection: tuple[str, ...] = DEFAULT_RULES, max_chunks: int | None = None,
                 abbreviations: Collection[str] = ()) -> None:
        self._injection = injection
        self._abbreviations = abbreviations
        self._max_chunks = max_chunks  # past this many chunks the pipeline refuses the document: stop guessing
        self._queued = 0  # characters of the pages handed over and not yet taken (``MAX_QUEUED_CHARS``)
        self._queued_lock = threading.Lock()
        self.given_up = False
        self._embedder = embedder
        self._count = count
        self._budget, self._overlap = budget, overlap
        self._known = known  # keys that need no vectors (an indexed edition has them)
        self._pages: queue.SimpleQueue[PageParts | None] = queue.SimpleQueue()
        self._stopping = threading.Event()
        self._abort = threading.Event()
        self._thread: threading.Thread | None = None
        self._title = ""
        self._progress = progress
        self.segments: dict[int, Segment] = {}

    def start(self, total: int, title: str) -> None:
        """The document has ``total`` pages and this title (the chunks' indexed text starts with it)."""
        self._title = title
        if total > passages.SEGMENT_PAGES:  # one segment is embedded once every page is in, by the pipeline
            self._thread = threading.Thread(target=self._run, name="cv-embed-ahead", daemon=True)
            self._thread.start()

    def page(self, parts: PageParts) -> None:
        """Hand over one page; when the guessing falls ``MAX_QUEUED_CHARS`` behind the reading, it
        stops (its queue is dropped) and the pipeline embeds once every page is in."""
        if self._thread is None or self.given_up:
            return
        with self._queued_lock:
            self._queued += len(parts[0])
            behind = self._queued > MAX_QUEUED_CHARS
        if behind:
            self.given_up = True
            log.info("embedding while reading stopped: it fell %d characters behind the reading", self._queued)
            self._stopping.set()
            self._pages.put(None)
            return
        self._pages.put(parts)

    def stop(self, abort: bool = False) -> dict[int, Segment]:
        """Stop once the segment being embedded is done (``abort``: drop it after the batch being
        run); the segments embedded, by number."""
        self._stopping.set()
        if abort:
            self._abort.set()
        self._pages.put(None)
        if self._thread is not None:
            self._thread.join()
        return self.segments

    def _run(self) -> None:
        try:
            self._guess()
        except _Stopped:
            pass
        except Exception:  # noqa: BLE001  (the pipeline embeds what is missing and reports its own errors)
            log.warning("embedding while reading stopped; the pages are embedded once all are read", exc_info=True)

    def _guess(self) -> None:
        running = RunningSoFar()
        chunker = Chunker(self._count, self._budget, self._overlap, self._abbreviations)
        read: list[PageParts | None] = []  # every page come so far (None once bounded)
        bounded = 0
        current = 0  # the segment whose chunks are being collected
        pending: list[tuple[Chunk, str, Key]] = []
        made = 0
        while (parts := self._pages.get()) is not None:
            with self._queued_lock:
                self._queued -= len(parts[0])
            read.append(parts)
            running.add(parts[0])
            if self._stopping.is_set():
                return
            # take every page come so far first; bound nothing before the running lines rest on more
            # than a segment's pages
            if not self._pages.empty() or len(read) <= passages.SEGMENT_PAGES:
                continue
            for number in range(bounded + 1, len(read) + 1):
                page = page_from(number, read[number - 1], running, self._injection)
                read[number - 1] = None
                for chunk in chunker.add(page):
                    made += 1
                    if self._max_chunks is not None and made > self._max_chunks:
                        return  # the pipeline refuses the document (CHAPTERVERSE_MAX_DOCUMENT_CHUNKS)
                    if segment_of(chunk) != current:
                        self._embed(current, pending)
                        current, pending = segment_of(chunk), []
                    text = indexed_text(chunk, self._title, self._embedder, self._count)
                    key = key_of(chunk, text)
                    if key not in self._known:
                        pending.append((chunk, text, key))
            bounded = len(read)

    def _embed(self, number: int, pending: list[tuple[Chunk, str, Key]]) -> None:
        if self._stopping.is_set():
            raise _Stopped
        if not pending:
            return

        def batch(n: int) -> None:
            if self._abort.is_set():
                raise _Stopped
            if self._progress:
                self._progress.ahead += n

        self.segments[number] = embed_segment(self._embedder, [t for _, t, _ in pending],
                                              [c for c, _, _ in pending], [k for _, _, k in pending], on_batch=batch)
