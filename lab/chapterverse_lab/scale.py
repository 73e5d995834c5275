"""Search cost as a function of collection size, on synthetic collections (10k, 100k, 1M chunks).

Not a test: it builds, in a scratch database per size on the same server, a collection whose chunks
are the texts of a real collection (``--source``, e.g. the dev corpus) repeated and whose vectors
are random unit vectors (the dense leg then has no structure to exploit: a pessimistic case for
HNSW). Documents have ``DOC_CHUNKS`` chunks each; every chunk gets as many stored sentence vectors
as the source's chunks have on average. Statistics are built with the same statements as ingest
(``document_lexemes``, ``token_total``, the keyword postings of ``retrieval.store.postings``), the
HNSW index after the bulk load, then ``VACUUM``/``ANALYZE``.
It then times ``search_with`` for each question (real query embeddings) with the default search
(sentence reranker on stored vectors) and without reranking, the keyword leg alone (BM25 as searched,
in numpy over the stored postings, and the SQL reference scoring every candidate, with a check that
both return the same list), and records the index sizes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import psycopg
from pydantic import SecretStr

from retrieval.store import db, index, pool
from chapterverse_lab.bench import percentiles
from retrieval.encode.embed import get_embedder
from chapterverse_lab.evaluate import load_questions
from retrieval.search.filters import Scope
from chapterverse_lab.bm25 import bm25, bm25_all
from retrieval.search.search import default_config, search_with
from chapterverse_lab.results import machine, stamp
from retrieval.settings import Settings

DOC_CHUNKS = 1000
COLLECTION = "scale"
SIZES = (10_000, 100_000, 1_000_000)


def database_name(n: int, keyword_only: bool = False) -> str:
    return f"cv_scale_{n}_keyword" if keyword_only else f"cv_scale_{n}"


@contextmanager
def scale_settings(settings: Settings, n: int, keyword_only: bool = False) -> Iterator[Settings]:
    """Settings for the scratch database of size ``n`` (created when missing; kept for reruns)."""
    base = db.conninfo(settings)
    name = database_name(n, keyword_only)
    with psycopg.connect(base, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
    url = psycopg.conninfo.make_conninfo(base, dbname=name)
    yield settings.but(db={"url": SecretStr(url)})


def _source_rows(settings: Settings, source: str) -> tuple[list[tuple], float]:
    with db.connection(settings) as conn:
        rows = conn.execute("SELECT text, context, search_text, token_count, terms FROM chunks WHERE collection = %s "
                            "ORDER BY id", (source,)).fetchall()
        per_chunk = conn.execute(
            "SELECT count(*)::float8 / greatest((SELECT count(*) FROM chunks WHERE collection = %s), 1) AS r "
            "FROM chunk_sentences WHERE collection = %s", (source, source)).fetchone()["r"]
    if not rows:
        raise ValueError(f"collection {source!r} has no chunks to repeat")
    return [(r["text"], r["context"], r["search_text"], r["token_count"], r["terms"]) for r in rows], per_chunk


def build(settings: Settings, n: int, source_rows: Sequence[tuple], sentences_per_chunk: int, dim: int,
          model: str, vectors: bool = True) -> float | None:
    """Fill the scratch database with ``n`` synthetic chunks; seconds taken (None: already built, reused).
    ``vectors=False``: no chunk or sentence vectors and no HNSW index (what the keyword leg reads only)."""
    t0 = time.perf_counter()
    db.ready(settings)
    with db.connection(settings) as conn:
        have = conn.execute("SELECT count(*) AS n FROM chunks WHERE collection = %s", (COLLECTION,)).fetchone()["n"]
        if have == n:
            return None
        index.ensure_model(conn, model, dim)
        with conn.transaction():
            conn.execute("DELETE FROM documents WHERE collection = %s", (COLLECTION,))
            conn.execute("DROP INDEX IF EXISTS chunks_embedding_hnsw")
            conn.execute("DROP INDEX IF EXISTS chunks_tsv")  # built once after the load: faster than kept up
            conn.execute("DROP INDEX IF EXISTS lexeme_postings_lexeme")
            conn.execute("CREATE TEMP TABLE src (i int, text text, context text, search_text text, "
                         "token_count int, terms text[]) ON COMMIT DROP")
            with conn.cursor() as cur, cur.copy("COPY src FROM STDIN") as copy:
                for i, r in enumerate(source_rows):
                    copy.write_row((i, *r))
            docs = -(-n // DOC_CHUNKS)
            conn.execute(
                "INSERT INTO documents (collection, name, sha256, source, bytes, page_count, chunk_count, "
                "pipeline_version) SELECT %s, 'synthetic-' || g, md5(g::text), 'synthetic', 0, 1, "
                "least(%s, %s - (g - 1) * %s), 'synthetic' FROM generate_series(1, %s) g",
                (COLLECTION, DOC_CHUNKS, n, DOC_CHUNKS, docs))
            embedding = (f"l2_normalize(ARRAY(SELECT random() - 0.5 FROM generate_series(1, {int(dim)}) "
                         f"WHERE k.o >= 0)::vector({int(dim)}))" if vectors else "NULL")
            conn.execute(
                f"""INSERT INTO chunks (collection, document_id, ordinal, page_start, char_start, page_end, char_end,
                                       text, context, search_text, token_count, terms, embedding)
                SELECT %(c)s, d.id, k.o, 1, 0, 1, length(s.text), s.text, s.context, s.search_text,
                       s.token_count, s.terms,
                       {embedding}
                FROM documents d
                CROSS JOIN LATERAL generate_series(0, d.chunk_count - 1) k(o)
                JOIN src s ON s.i = ((d.id * {DOC_CHUNKS} + k.o) %% (SELECT count(*) FROM src))
                WHERE d.collection = %(c)s""", {"c": COLLECTION})
            conn.execute("UPDATE documents d SET token_total = (SELECT sum(c.token_count) FROM chunks c "
                         "WHERE c.collection = d.collection AND c.document_id = d.id) WHERE d.collection = %s",
                         (COLLECTION,))
            conn.execute("INSERT INTO document_lexemes (collection, document_id, lexeme, df) "
                         "SELECT c.collection, c.document_id, u.lexeme, count(*) FROM chunks c "
                         "CROSS JOIN LATERAL unnest(c.tsv) u WHERE c.collection = %s "
                         "GROUP BY c.collection, c.document_id, u.lexeme", (COLLECTION,))
            conn.execute("INSERT INTO lexeme_postings (collection, document_id, lexeme, block, base, postings) "
                         "SELECT p.* FROM documents d CROSS JOIN LATERAL lexeme_postings_of(d.collection, d.id) p "
                         "WHERE d.collection = %s", (COLLECTION,))  # the keyword postings (retrieval.store.postings)
            if vectors:
                conn.execute("INSERT INTO chunk_sentences (collection, chunk_id, sentence_no, embedding) "
                             "SELECT c.collection, c.id, g, c.embedding::halfvec FROM chunks c "
                             "CROSS JOIN generate_series(0, %s - 1) g WHERE c.collection = %s",
                             (sentences_per_chunk, COLLECTION))
        conn.execute("SET maintenance_work_mem = '2GB'")
        conn.execute("CREATE INDEX chunks_tsv ON chunks USING gin (tsv)")
        conn.execute("CREATE INDEX lexeme_postings_lexeme ON lexeme_postings (lexeme, collection) "
                     "INCLUDE (document_id, base, postings)")  # as in migration 0021
        if vectors:
            conn.execute("CREATE INDEX chunks_embedding_hnsw ON chunks USING hnsw (embedding vector_cosine_ops)")
        for table in ("lexeme_postings", "document_lexemes"):  # as autovacuum would: the visibility map that
            # index-only scans need, hint bits
            conn.execute(f"VACUUM (ANALYZE) {table}")
        conn.execute("ANALYZE")
    return time.perf_counter() - t0


def sizes(settings: Settings) -> dict[str, int]:
    """Bytes on disk of what the search uses (tables with their indexes and TOAST)."""
    with db.connection(settings) as conn:
        row = conn.execute(
            "SELECT pg_total_relation_size('chunks') AS chunks_total, "
            "coalesce(pg_relation_size(to_regclass('chunks_embedding_hnsw')), 0) AS hnsw_index, pg_relation_size('chunks_tsv') AS tsv_gin_index, "
            "pg_total_relation_size('document_lexemes') AS document_lexemes, "
            "pg_total_relation_size('lexeme_postings') AS lexeme_postings, "
            "pg_total_relation_size('chunk_sentences') AS chunk_sentences, "
            "pg_database_size(current_database()) AS database").fetchone()
    return {k: int(v) for k, v in row.items()}


def time_searches(settings: Settings, questions: Sequence[str], rounds: int, k: int = 5) -> dict[str, dict]:
    scope = Scope.of([COLLECTION])
    configs = {"default (sentence rerank, stored vectors)": default_config(settings),
               "no rerank": default_config(settings).model_copy(update={"reranker": "none"})}
    for cfg in configs.values():
        for q in questions[:3]:  # warm-up: model, pool, caches
            search_with(settings, q, k, scope, cfg)
    stages: dict[str, dict[str, list[float]]] = {name: {} for name in configs}
    for _ in range(rounds):
        for q in questions:
            for name, cfg in configs.items():
                for stage, ms in search_with(settings, q, k, scope, cfg).timings_ms.items():
                    stages[name].setdefault(stage, []).append(ms)
    return {name: {s: percentiles(v) for s, v in st.items()} for name, st in stages.items()}


def time_keyword(settings: Settings, questions: Sequence[str], rounds: int) -> dict[str, object]:
    """The keyword leg alone at the default depth: BM25 as searched (numpy over the stored postings) and
    the SQL statement scoring every chunk that has any query lexeme (the reference), each in its own
    passes over the questions (the reference reads the whole chunks table per question: timed in turns
    with it, the leg would be timed on the caches it leaves); and whether their top lists agree, chunk
    ids and unrounded scores."""
    scope = Scope.of([COLLECTION])
    limit = default_config(settings).depth
    legs = {"bm25 (numpy over stored postings, as searched)": bm25, "bm25 every candidate in SQL (reference)": bm25_all}
    ms: dict[str, list[float]] = {name: [] for name in legs}
    tops: dict[str, list[list[tuple[int, float]]]] = {name: [] for name in legs}
    with pool.connection(settings) as conn:
        for name, fn in legs.items():
            for q in questions[:3]:  # warm-up
                fn(conn, q, limit, scope)
            for r in range(rounds):
                for q in questions:
                    t = time.perf_counter()
                    hits = fn(conn, q, limit, scope)
                    ms[name].append((time.perf_counter() - t) * 1e3)
                    if r == 0:
                        tops[name].append([(h.chunk_id, h.score) for h in hits])
    searched, reference = tops.values()
    same = sum(a == b for a, b in zip(searched, reference, strict=True))
    return {"depth": limit, "same_top_list": f"{same}/{len(questions)}", "timing": "each leg in its own passes",
            "ms": {name: percentiles(v) for name, v in ms.items()}}


def run(settings: Settings, questions_path: Path, source: str, sizes_: Sequence[int] = SIZES, rounds: int = 1,
        command: str = "", keep: bool = True, keyword_only: bool = False) -> dict:
    """Build (or reuse) each size and time it. ``keyword_only``: collections without vectors, and only
    the keyword leg timed (a cheap way to the 1M point for that leg: no HNSW build, a tenth of the disk)."""
    questions = [q.question for q in load_questions(questions_path)]
    embedder = get_embedder(settings.search.embedding_model)
    rows, per_chunk = _source_rows(settings, source)
    sentences_per_chunk = max(1, round(per_chunk))
    out: dict[str, dict] = {}
    for n in sizes_:
        with scale_settings(settings, n, keyword_only) as s:
            built = build(s, n, rows, sentences_per_chunk, embedder.dim, embedder.name, vectors=not keyword_only)
            out[str(n)] = {"build_seconds": None if built is None else round(built, 1),
                           "reused_database": built is None, "bytes": sizes(s)}
            if not keyword_only:
                out[str(n)]["search_ms"] = time_searches(s, questions, rounds)
            out[str(n)]["keyword_leg"] = time_keyword(s, questions, rounds)
            pool.close_all()
        if not keep:
            with psycopg.connect(db.conninfo(settings), autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{database_name(n, keyword_only)}" WITH (FORCE)')
    return {
        **stamp(command),
        "questions_file": str(questions_path),
        "queries_per_size": len(questions) * rounds,
        "machine": machine(),
        "synthetic_collection": {
            "chunk_texts": f"the {len(rows)} chunks of collection {source!r}, repeated",
            "vectors": "none (keyword leg only)" if keyword_only
            else "random unit vectors (no clusters: pessimistic for HNSW)",
            "chunks_per_document": DOC_CHUNKS, "sentence_vectors_per_chunk": sentences_per_chunk,
            "hnsw": "pgvector defaults (m=16, ef_construction=64), built after the bulk load"},
        "configuration": {"embedding_model": embedder.name, "reranker": settings.search.reranker,
                          "database": "external (DATABASE_URL)" if settings.db.url else "embedded Postgres"},
        "sizes": out,
    }
