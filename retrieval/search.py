"""Search the index: dense (pgvector) nearest neighbours, returned as Passages."""

from __future__ import annotations

import time
from collections.abc import Sequence

import psycopg

from retrieval import db, index
from retrieval.embed import get_embedder
from retrieval.models import Passage, SearchResult, StageScores
from retrieval.settings import Settings

PASSAGE_COLUMNS = """
    c.id AS chunk_id, c.collection, d.name AS document, d.url AS document_url, c.page_start, c.page_end,
    c.char_start, c.char_end, c.text, c.context,
    (SELECT p.label FROM pages p WHERE p.collection = c.collection AND p.document_id = c.document_id
       AND p.page_no = c.page_start) AS page_label
"""


def _filters(collections: Sequence[str] | None, documents: Sequence[str] | None) -> tuple[str, list]:
    where, params = [], []
    if collections:
        where.append("c.collection = ANY(%s)")
        params.append(list(collections))
    if documents:
        where.append("d.name = ANY(%s)")
        params.append(list(documents))
    return (" AND ".join(where) or "true"), params


def dense(conn: psycopg.Connection, vector, k: int, collections=None, documents=None) -> list[dict]:
    cond, params = _filters(collections, documents)
    conn.execute("SET hnsw.iterative_scan = relaxed_order")
    return conn.execute(
        f"SELECT {PASSAGE_COLUMNS}, 1 - (c.embedding <=> %s) AS score FROM chunks c "
        f"JOIN documents d ON d.collection = c.collection AND d.id = c.document_id "
        f"WHERE {cond} ORDER BY c.embedding <=> %s LIMIT %s",
        [vector, *params, vector, k]).fetchall()


def to_passage(row: dict, score: float, stages: StageScores) -> Passage:
    return Passage(chunk_id=row["chunk_id"], collection=row["collection"], document=row["document"],
                   document_url=row["document_url"], page=row["page_start"], page_end=row["page_end"],
                   page_label=row["page_label"], char_start=row["char_start"], char_end=row["char_end"],
                   text=row["text"], context=row["context"], score=score, stages=stages)


def search(settings: Settings, query: str, k: int = 5, collections: Sequence[str] | None = None,
           documents: Sequence[str] | None = None) -> SearchResult:
    t0 = time.perf_counter()
    embedder = get_embedder(settings.embedding_model)
    vec = embedder.embed_query(query)
    t1 = time.perf_counter()
    with db.connection(settings) as conn:
        index.ensure_model(conn, embedder.name, embedder.dim)
        rows = dense(conn, vec, k, collections, documents)
    t2 = time.perf_counter()
    results = [to_passage(r, float(r["score"]), StageScores(dense_rank=i + 1, dense_score=float(r["score"])))
               for i, r in enumerate(rows)]
    return SearchResult(query=query, results=results, reranker="none",
                        timings_ms={"embed_query": (t1 - t0) * 1e3, "vector": (t2 - t1) * 1e3})
