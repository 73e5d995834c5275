"""Passages embedded while the PDF is still being read (issue 18): guess, then check.

The child process that parses a PDF (``ingest.isolate``) sends each page as soon as it has read it,
but what gets chunked of a page, its body, leaves out the running headers and footers, and those are
known only once every page is in (``ingest.pdf.find_running_lines``: lines at the page edges on 20%
of all pages). So ``EmbedAhead`` guesses: on a thread of its own, it bounds each page with the
running lines of the pages read so far (``ingest.pdf.RunningSoFar``; every page already come counts,
so the further embedding lags behind reading, the better the guess), chunks the pages in order
(``ingest.chunk.Chunker``, the chunker itself) and embeds each chunk it completes
(``ingest.passages.embed_each``).

When the last page is in, the pipeline stops it, bounds and chunks the pages as it always did, and
takes from here the vectors of every chunk that came out the same: a chunk's vectors are a function
of its indexed text, heading and text (``ingest.passages``), so a chunk made the same way here is the
same chunk. A guess that was wrong (a page bounded otherwise, and the chunks after it until the
chunking falls in step again) costs the embedding of those chunks and nothing else: what is stored
is what reading the whole PDF first would have stored.

Its failures are its own: an error here stops the guessing, and the pipeline embeds what is missing
and reports any error itself. Of progress it only counts the passages it embedded
(``ProgressLog.ahead``, a plain counter): a progress report may stop a job by raising, and that
belongs to the pipeline's thread.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import deque
from collections.abc import Container

from ingest.chunk import Chunker
from ingest.passages import Key, TokenCounts, Vectors, embed_each, indexed_text, key_of
from ingest.pdf import PageParts, RunningSoFar, page_from
from ingest.progress import ProgressLog
from retrieval.encode.embed import Embedder
from retrieval.text.injection import DEFAULT_RULES

log = logging.getLogger(__name__)


class EmbedAhead:
    """Chunks and vectors made from the pages read so far; ``start``, then ``page`` for each page in
    order (from the thread that reads them), then ``stop``, which returns the vectors by chunk key."""

    def __init__(self, embedder: Embedder, count: TokenCounts, budget: int, overlap: int,
                 known: Container[Key] = (), progress: ProgressLog | None = None,
                 injection: tuple[str, ...] = DEFAULT_RULES) -> None:
        self._injection = injection
        self._embedder = embedder
        self._count = count
        self._budget, self._overlap = budget, overlap
        self._known = known  # keys that need no vectors (an indexed edition has them)
        self._pages: queue.SimpleQueue[PageParts | None] = queue.SimpleQueue()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._title = ""
        self._progress = progress
        self.vectors: dict[Key, Vectors] = {}

    def start(self, total: int, title: str) -> None:
        """The document has ``total`` pages and this title (the chunks' indexed text starts with it)."""
        self._title = title
        self._thread = threading.Thread(target=self._run, name="cv-embed-ahead", daemon=True)
        self._thread.start()

    def page(self, parts: PageParts) -> None:
        self._pages.put(parts)

    def stop(self) -> dict[Key, Vectors]:
        """Stop after the chunk being embedded; the vectors made so far, by ``ingest.passages.key_of``."""
        self._stopping.set()
        self._pages.put(None)
        if self._thread is not None:
            self._thread.join()
        return self.vectors

    def _run(self) -> None:
        try:
            self._guess()
        except Exception:  # noqa: BLE001  (the pipeline embeds what is missing and reports its own errors)
            log.debug("embedding ahead stopped", exc_info=True)

    def _take(self, running: RunningSoFar, waiting: deque[PageParts]) -> bool:
        """Move every page come so far to ``waiting`` (waiting for one when there is none);
        False once stopped."""
        block = not waiting
        while True:
            try:
                parts = self._pages.get(block=block)
            except queue.Empty:
                return True
            if parts is None or self._stopping.is_set():
                return False
            running.add(parts[0])
            waiting.append(parts)
            block = False

    def _guess(self) -> None:
        running = RunningSoFar()
        chunker = Chunker(self._count, self._budget, self._overlap)
        waiting: deque[PageParts] = deque()
        number = 0
        while self._take(running, waiting):
            number += 1
            for chunk in chunker.add(page_from(number, waiting.popleft(), running, self._injection)):
                if self._stopping.is_set():
                    return
                text = indexed_text(chunk, self._title, self._embedder, self._count)
                key = key_of(chunk, text)
                if key not in self._known and key not in self.vectors:
                    self.vectors[key] = embed_each(self._embedder, [text], [chunk])[0]
                    if self._progress:
                        self._progress.ahead += 1
