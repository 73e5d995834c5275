"""What a chunk becomes in the index: the text it is indexed by, and its vectors.

Each chunk is embedded in a forward pass of its own. Its vectors are a function of its indexed text,
heading and text only (``ingest.store.chunk_key``): the int8 passage encoder scales activations per
token (``retrieval.encode.passage_encoder.per_token_activations``), so no other chunk of a run can move
them. That is what lets vectors made at different times stand for each other: those of chunks embedded
while the PDF was still being read (``ingest.ahead``), those of an edition already indexed, and those
made now. One pass per chunk is also the cheaper way on
the passage encoder whose runs use one thread each, a chunk per core at once: 600 chunks of
gnuplot.pdf on a quiet 2-core machine took 5.7 CPU-s and 2.9 s so, against 6.3-6.5 CPU-s and
3.4-3.5 s in length-sorted batches of eight on a two-thread onnxruntime pool (batches of neighbouring
chunks, whose members would not depend on the rest of the document, did worse: their padding costs
more than the batch saves).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ingest.chunk import Chunk
from ingest.store import chunk_key
from retrieval.encode.embed import Embedder
from retrieval.text.textnorm import search_text

Key = tuple[str, str, str]  # ``ingest.store.chunk_key``
Vectors = tuple[np.ndarray, np.ndarray]  # the chunk's vector, and its sentence windows' (windows x dim)


class TokenCounts:
    """``count`` remembered per text: the chunks of a document are made twice when part of it was
    chunked while it was being read, and the second time meets the same sentences."""

    def __init__(self, count: Callable[[str], int]) -> None:
        self._count = count
        self._known: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        n = self._known.get(text)
        if n is None:
            n = self._known[text] = self._count(text)
        return n


def indexed_text(chunk: Chunk, title: str, embedder: Embedder, count: Callable[[str], int] | None = None) -> str:
    """What is embedded and keyword-indexed: the document title, the section headings in force and
    starting inside the chunk, then the cleaned chunk text. Headings, then the title, are left out
    when they would push the text past the embedder's token limit. ``count``: the embedder's
    ``count_tokens``, or a ``TokenCounts`` of it."""
    count = count or embedder.count_tokens
    headings = " · ".join(h for h in (chunk.context, *chunk.inner_titles) if h)
    for prefix in ([title, headings], [title], []):
        text = search_text("\n".join([p for p in prefix if p] + [chunk.text]))
        if not prefix or count(text) <= embedder.max_tokens:
            return text
    raise AssertionError("unreachable")


def key_of(chunk: Chunk, indexed: str) -> Key:
    return chunk_key(indexed, chunk.context, chunk.text)


def embed_each(embedder: Embedder, indexed: Sequence[str], chunks: Sequence[Chunk],
               on_chunk: Callable[[int], object] | None = None) -> list[Vectors]:
    """The vectors of each chunk (``indexed``: their indexed texts), each from a pass of its own
    (``Embedder.embed_each``)."""
    return embedder.embed_each(indexed, [(c.context, c.text) for c in chunks], on_chunk=on_chunk)
