"""Sentence-window vectors kept at ingest for the bi-encoder sentence reranker.

The reranker scores a passage by the best cosine between the query and one of its sentence windows
(``retrieval.text.spans.sentences`` over ``rerank_text``). Embedding those windows per query cost about
half a second; here they are made once at ingest (``windows_of`` decides what, for ingest and
search alike), stored as pgvector ``halfvec`` rows in ``chunk_sentences`` keyed by
(collection, chunk id), and scored inside Postgres in the statement that fetches the candidates (``STORED_SCORE_SQL``).

With the ONNX passage encoder (``retrieval.encode.passage_encoder``) a window's vector is pooled from the
tokens of the chunk's own forward pass: ``window_spans`` finds where each window lies in the text
that pass reads (title, headings, then the chunk, normalised by ``search_text``), and
``late_chunk`` embeds every chunk once. Without it, ``embed_windows`` embeds each window again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from retrieval.text.spans import sentence_spans, sentences
from retrieval.text.textnorm import search_text

if TYPE_CHECKING:
    from retrieval.encode.passage_encoder import PassageEncoder


def rerank_text(context: str | None, text: str) -> str:
    """What the reranker reads for a chunk: its section heading, then its text."""
    return f"{context}\n{text}" if context else text


def windows_of(context: str | None, text: str) -> list[str]:
    """The sentence windows of a chunk that the reranker compares with the query."""
    return sentences(rerank_text(context, text))


def window_spans(indexed: str, context: str | None, text: str) -> list[list[tuple[int, int]]]:
    """Where each of ``windows_of(context, text)`` lies in ``indexed`` (the chunk's indexed text:
    ``search_text`` of title, headings and ``text``), as character spans: a window's part inside
    the heading is looked for from the start (the heading sits in the indexed text's prefix), its
    part inside ``text`` after the previous window's. A window found nowhere gets no span, and the
    caller embeds it on its own."""
    whole = rerank_text(context, text)
    body = len(whole) - len(text)  # where ``text`` starts in ``whole``
    head = len(context) if context else 0
    tail = search_text(text)
    cursor = len(indexed) - len(tail) if tail and indexed.endswith(tail) else 0  # the chunk's own text
    found: list[list[tuple[int, int]]] = []
    spans = sentence_spans(whole)
    for s, e in spans or [(0, len(whole))]:
        pieces: list[tuple[int, int]] = []
        parts = [(s, min(e, head), 0), (max(s, body), e, None)]
        for a, b, start in parts:
            needle = search_text(whole[a:b]) if b > a else ""
            if not needle:
                continue
            at = indexed.find(needle, cursor if start is None else start)
            if at < 0:
                pieces = []
                break
            pieces.append((at, at + len(needle)))
            if start is None:
                cursor = at + len(needle)
        found.append(pieces)
    return found


def late_chunk(encoder: PassageEncoder, indexed: Sequence[str], sources: Sequence[tuple[str | None, str]],
               on_batch: Callable[[int], object] | None = None,
               workers: int | None = None) -> tuple[np.ndarray, list[np.ndarray]]:
    """Chunk vectors and their sentence-window vectors from one pass over each chunk's indexed
    text. ``sources``: each chunk's (context, text); ``workers``: ``PassageEncoder.encode``'s. Windows whose tokens the pass does not hold
    (not found, or cut by truncation) are embedded on their own."""
    spans = [window_spans(t, c, x) for t, (c, x) in zip(indexed, sources, strict=True)]
    out = encoder.encode(indexed, spans, on_batch=on_batch, workers=workers)
    if out.missing:
        texts = [windows_of(*sources[i])[w] for i, w in out.missing]
        again = encoder.encode(texts, workers=workers).vectors
        for (i, w), v in zip(out.missing, again, strict=True):
            out.windows[i][w] = v
    return out.vectors, out.windows


def embed_windows(per_chunk: Sequence[Sequence[str]],
                  embed: Callable[[Sequence[str]], np.ndarray]) -> list[np.ndarray]:
    """One (windows x dim) array per chunk; each distinct window text is embedded once (overlapping
    chunks repeat sentences)."""
    distinct = list(dict.fromkeys(w for ws in per_chunk for w in ws))
    if not distinct:
        return [np.zeros((0, 0), dtype=np.float32) for _ in per_chunk]
    vecs = embed(distinct)
    row = {w: i for i, w in enumerate(distinct)}
    return [vecs[[row[w] for w in ws]] if ws else np.zeros((0, vecs.shape[1]), dtype=np.float32)
            for ws in per_chunk]


# The best sentence-window cosine of chunk ``c`` against the query vector (the statement's parameter;
# ``<#>`` is the negative inner product of unit vectors), read inside the statement that fetches the rows.
STORED_SCORE_SQL = ("(SELECT -min(s.embedding <#> %s) FROM chunk_sentences s "
                    "WHERE s.collection = c.collection AND s.chunk_id = c.id)")


def half_vector(vector: np.ndarray):
    """The query vector as the half-precision parameter ``STORED_SCORE_SQL`` compares with."""
    from pgvector import HalfVector  # noqa: PLC0415

    return HalfVector(np.asarray(vector, dtype=np.float32))
