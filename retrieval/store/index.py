"""The embedding model recorded with the index: record it once, refuse a different one."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import psycopg

from retrieval.store.db import DatabaseError


class ModelMismatch(DatabaseError):
    pass


def recorded_model(conn: psycopg.Connection) -> tuple[str, int] | None:
    row = conn.execute("SELECT name, dim FROM embedding_model").fetchone()
    return (row["name"], row["dim"]) if row else None


def ensure_model(conn: psycopg.Connection, name: str, dim: int) -> None:
    """Record (name, dim) for an empty index, or check it matches what the index was built with (a read
    only, once recorded: a hot standby can check it)."""
    rec = recorded_model(conn)
    if rec is None:
        with conn.transaction():
            conn.execute("LOCK TABLE embedding_model IN EXCLUSIVE MODE")
            rec = recorded_model(conn)
            if rec is None:  # the column takes this model's dimension, and the HNSW index is built on it
                conn.execute("DROP INDEX IF EXISTS chunks_embedding_hnsw")
                conn.execute(f"ALTER TABLE chunks ALTER COLUMN embedding TYPE vector({int(dim)})")
                conn.execute("CREATE INDEX chunks_embedding_hnsw ON chunks USING hnsw (embedding vector_cosine_ops)")
                conn.execute("INSERT INTO embedding_model (name, dim) VALUES (%s, %s)", (name, dim))
                return
    if rec != (name, dim):
        raise ModelMismatch(
            f"the index was built with embedding model {rec[0]} ({rec[1]} dims) but "
            f"{name} ({dim} dims) is configured; set CHAPTERVERSE_EMBEDDING_MODEL={rec[0]} to use the "
            f"index as it is, or run `chapterverse db reembed` to re-embed every chunk with {name}"
        )


def reembed(conn: psycopg.Connection, name: str, dim: int, vectors_for: "callable") -> int:  # type: ignore[valid-type]
    """Re-embed every chunk, and its stored sentence windows, with a new model in one transaction;
    returns the number of chunks. ``vectors_for(indexed texts, (heading, text) pairs)`` gives
    (chunk vectors, sentence-window vectors per chunk): ``Embedder.embed_chunks``."""
    with conn.transaction():
        conn.execute("LOCK TABLE chunks IN EXCLUSIVE MODE")
        rows = conn.execute("SELECT collection, id, search_text, context, text FROM chunks "
                            "ORDER BY collection, id").fetchall()
        vecs, sentence_vecs = vectors_for([r["search_text"] for r in rows], [(r["context"], r["text"]) for r in rows])
        conn.execute("DROP INDEX IF EXISTS chunks_embedding_hnsw")
        conn.execute("ALTER TABLE chunks ALTER COLUMN embedding TYPE vector USING NULL")
        conn.execute(f"ALTER TABLE chunks ALTER COLUMN embedding TYPE vector({int(dim)})")
        with conn.cursor() as cur:
            cur.executemany("UPDATE chunks SET embedding = %s WHERE collection = %s AND id = %s",
                            [(v, r["collection"], r["id"]) for v, r in zip(vecs, rows, strict=True)])
        conn.execute("CREATE INDEX chunks_embedding_hnsw ON chunks USING hnsw (embedding vector_cosine_ops)")
        conn.execute("DELETE FROM chunk_sentences")
        copy_rows(conn, ((r["collection"], r["id"], i, v) for r, sv in zip(rows, sentence_vecs, strict=True)
                         for i, v in enumerate(sv)))
        conn.execute("DELETE FROM embedding_model")
        conn.execute("INSERT INTO embedding_model (name, dim) VALUES (%s, %s)", (name, dim))
        conn.execute("UPDATE collections SET written_lsn = pg_current_wal_insert_lsn()")  # every one changed: read your writes
    return len(rows)


def copy_rows(conn: psycopg.Connection, rows: Iterable[tuple[str, int, int, np.ndarray]]) -> None:
    """COPY (collection, chunk id, sentence no, vector) rows into ``chunk_sentences``."""
    from pgvector import HalfVector  # noqa: PLC0415
    from pgvector.psycopg import register_vector  # noqa: PLC0415

    register_vector(conn)
    # binary COPY: pgvector's text form of a vector is a Python loop per number (a third of
    # ingest's writing time); the binary form is one numpy conversion
    with conn.cursor() as cur, cur.copy("COPY chunk_sentences (collection, chunk_id, sentence_no, embedding) "
                                        "FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["text", "bigint", "smallint", "halfvec"])
        for collection, chunk_id, no, vec in rows:
            copy.write_row((collection, chunk_id, no, HalfVector(vec)))
