"""pgvector HNSW index sizing: bytes per vector and build time at the index's dimension.

    python -m chapterverse_lab.hnsw_sizing --sizes 10000 50000 --out results/hnsw_sizing.json

Builds the index the project uses (``hnsw (embedding vector_cosine_ops)``, pgvector defaults
m = 16, ef_construction = 64) over random unit vectors in a scratch database on the configured
server (embedded or ``DATABASE_URL``), and records heap and index size per vector and build time.
Random vectors are a worst case for build time (no cluster structure); sizes do not depend on the
values.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from retrieval.store import db
from retrieval.settings import Settings
from chapterverse_lab.results import write_result


def measure(url: str, n: int, dim: int, maintenance_work_mem: str) -> dict:
    rng = np.random.default_rng(0)
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        conn.execute("CREATE TABLE v (id bigint PRIMARY KEY, embedding vector(%s))" % dim)
        with conn.cursor() as cur, cur.copy("COPY v (id, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "vector"])
            for start in range(0, n, 10_000):
                block = rng.standard_normal((min(10_000, n - start), dim)).astype(np.float32)
                block /= np.linalg.norm(block, axis=1, keepdims=True)
                for i, vec in enumerate(block, start):
                    copy.write_row((i, vec))
        conn.execute(f"SET maintenance_work_mem = '{maintenance_work_mem}'")
        conn.execute("SET max_parallel_maintenance_workers = 0")
        t0 = time.perf_counter()
        conn.execute("CREATE INDEX v_hnsw ON v USING hnsw (embedding vector_cosine_ops)")
        build_s = time.perf_counter() - t0
        row = conn.execute("SELECT pg_relation_size('v') AS heap, pg_relation_size('v_hnsw') AS idx").fetchone()
        conn.execute("DROP TABLE v")
    heap, idx = int(row[0]), int(row[1])
    return {"vectors": n, "dim": dim, "build_s": round(build_s, 1), "heap_bytes": heap, "index_bytes": idx,
            "heap_bytes_per_vector": round(heap / n), "index_bytes_per_vector": round(idx / n),
            "maintenance_work_mem": maintenance_work_mem}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 50_000])
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--maintenance-work-mem", default="512MB")
    ap.add_argument("--out", type=Path, default=Path("results/hnsw_sizing.json"))
    opts = ap.parse_args(argv)
    settings = Settings()
    server = db.conninfo(settings)
    name = f"cv_hnsw_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
        url = psycopg.conninfo.make_conninfo(server, dbname=name)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        rows = []
        for n in opts.sizes:
            rows.append(measure(url, n, opts.dim, opts.maintenance_work_mem))
            print(json.dumps(rows[-1]), flush=True)
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    result = {"command": "python -m chapterverse_lab.hnsw_sizing " + " ".join(argv if argv is not None else sys.argv[1:]),
              "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "configuration": {"index": "hnsw (embedding vector_cosine_ops), m=16, ef_construction=64 (defaults)",
                                "vectors": "random unit vectors, float32", "parallel_maintenance_workers": 0,
                                "cpus": os.cpu_count(), "load_average_1_5_15_at_end": [round(x, 1) for x in os.getloadavg()]},
              "results": rows}
    write_result(opts.out, result)
    print(f"wrote {opts.out}")


if __name__ == "__main__":
    main()
