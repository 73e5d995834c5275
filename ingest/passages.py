"""What a chunk becomes in the index: the text it is indexed by, and its vectors, made segment by segment.

The passage encoder runs chunks sorted by length in batches, and its int8 activations are scaled per
batch, so a chunk's vectors depend a little on the chunks embedded with it (two batch-independent
variants were measured and lost answers: ``results/ingest_per_chunk_quality.json``,
``results/ingest_per_token_quality.json``). A document's chunks are therefore embedded in
**segments**: the chunks that start on pages 1-256 together, then those on pages 257-512, and so on
(``SEGMENT_PAGES``). A segment's vectors are a function of the list of chunks it embeds, and nothing
else; that is what lets the pipeline take the vectors of a segment embedded while the PDF was still
being read (``ingest.ahead``) whenever the final chunks of that segment are the same list. A
document of up to 256 pages is one segment: its chunks are embedded all together, as before there
were segments, bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ingest.chunk import Chunk
from retrieval.encode.embed import Embedder
from retrieval.text.textnorm import search_text

# Pages per segment. Larger keeps more documents whole (a document of up to this many pages is
# embedded exactly as before segments) but starts the overlap with reading later: the first segment
# is embedded once its pages and the next page are read. 256 covers every PDF of the dev corpus.
SEGMENT_PAGES = 256

Key = tuple[str, str, str]  # ``key_of``
Vectors = tuple[np.ndarray, np.ndarray]  # the chunk's vector, and its sentence windows' (windows x dim)


def indexed_text(chunk: Chunk, title: str, embedder: Embedder, count: Callable[[str], int] | None = None) -> str:
    """What is embedded and keyword-indexed: the document title, the section headings in force and
    starting inside the chunk, then the cleaned chunk text. Headings, then the title, are left out
    when they would push the text past the embedder's token limit. ``count``: the embedder's
    ``count_tokens``, or a ``functools.cache`` of it."""
    count = count or embedder.count_tokens
    headings = " · ".join(h for h in (chunk.context, *chunk.inner_titles) if h)
    for prefix in ([title, headings], [title], []):
        text = search_text("\n".join([p for p in prefix if p] + [chunk.text]))
        if not prefix or count(text) <= embedder.max_tokens:
            return text
    raise AssertionError("unreachable")


def key_of(chunk: Chunk, indexed: str) -> Key:
    """What a chunk's vectors are a function of: the indexed text one pass reads, and the heading
    and text its sentence windows come from (``retrieval.encode.sentence_index.late_chunk``); the
    index's chunks are keyed so too (``ingest.store.reusable_vectors``)."""
    return indexed, chunk.context or "", chunk.text


def segment_of(chunk: Chunk) -> int:
    """The segment a chunk is embedded in: by the page it starts on."""
    return (chunk.page_start - 1) // SEGMENT_PAGES


@dataclass(frozen=True)
class Segment:
    """One segment's embedded chunks (by key, in document order) and their vectors, in that order."""
    keys: tuple[Key, ...]
    vectors: tuple[Vectors, ...]


def plan(chunks: Sequence[Chunk], keys: Sequence[Key], known: Iterable[Key] | None = None) -> dict[int, list[int]]:
    """Which chunks each segment embeds: by segment, the indexes of its chunks whose keys are not
    ``known`` (an indexed edition has their vectors), in document order."""
    have = set(known or ())
    out: dict[int, list[int]] = {}
    for i, (chunk, key) in enumerate(zip(chunks, keys, strict=True)):
        if key not in have:
            out.setdefault(segment_of(chunk), []).append(i)
    return out


def embed_segment(embedder: Embedder, indexed: Sequence[str], chunks: Sequence[Chunk], keys: Sequence[Key],
                  on_batch: Callable[[int], object] | None = None, workers: int | None = None) -> Segment:
    """Embed one segment's chunks (``indexed``: their indexed texts) in one ``Embedder.embed_chunks``
    call: sorted by length, in batches (``workers`` of them at once; default one per core)."""
    vectors, windows = embedder.embed_chunks(indexed, [(c.context, c.text) for c in chunks], on_batch=on_batch,
                                             workers=workers)
    return Segment(tuple(keys), tuple(zip(vectors, windows, strict=True)))
