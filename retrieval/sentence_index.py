"""Sentence-window vectors kept at ingest for the bi-encoder sentence reranker.

The reranker scores a passage by the best cosine between the query and one of its sentence windows
(``retrieval.rerank.sentences`` over ``rerank_text``). Embedding those windows per query cost about
half a second; here they are embedded once at ingest (``windows_of`` decides what, for ingest and
search alike), stored as pgvector ``halfvec`` rows in ``chunk_sentences`` keyed by
(collection, chunk id), and scored inside Postgres with one statement per query (``stored_scores``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np
import psycopg

from retrieval.rerank import sentences


def rerank_text(context: str | None, text: str) -> str:
    """What the reranker reads for a chunk: its section heading, then its text."""
    return f"{context}\n{text}" if context else text


def windows_of(context: str | None, text: str) -> list[str]:
    """The sentence windows of a chunk that the reranker compares with the query."""
    return sentences(rerank_text(context, text))


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


def copy_rows(conn: psycopg.Connection, rows: Iterable[tuple[str, int, int, np.ndarray]]) -> None:
    """COPY (collection, chunk id, sentence no, vector) rows into ``chunk_sentences``."""
    from pgvector import HalfVector  # noqa: PLC0415
    from pgvector.psycopg import register_vector  # noqa: PLC0415

    register_vector(conn)
    with conn.cursor() as cur:
        with cur.copy("COPY chunk_sentences (collection, chunk_id, sentence_no, embedding) FROM STDIN") as copy:
            for collection, chunk_id, no, vec in rows:
                copy.write_row((collection, chunk_id, no, HalfVector(vec)))


def stored_scores(conn: psycopg.Connection, keys: Sequence[tuple[str, int]],
                  query_vector: np.ndarray) -> dict[int, float]:
    """Best sentence-window cosine per chunk, for the chunks that have stored windows (a chunk
    indexed before sentence vectors existed is absent from the result)."""
    if not keys:
        return {}
    from pgvector import HalfVector  # noqa: PLC0415

    collections = sorted({c for c, _ in keys})
    ids = [i for _, i in keys]
    rows = conn.execute(
        "SELECT chunk_id, -min(embedding <#> %s) AS score FROM chunk_sentences "
        "WHERE collection = ANY(%s) AND chunk_id = ANY(%s) GROUP BY chunk_id",
        [HalfVector(np.asarray(query_vector, dtype=np.float32)), collections, ids]).fetchall()
    return {int(r["chunk_id"]): float(r["score"]) for r in rows}
