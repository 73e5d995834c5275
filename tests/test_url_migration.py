"""Migration 0013 drops the query strings, fragments and user info that older versions stored with
URL-ingested documents, finished jobs and saved answers (citation links keep their #page=N), and a
citation link is built without a query whatever is stored."""

from __future__ import annotations

from importlib import resources

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from retrieval.store import db
from retrieval.settings import Settings
from retrieval.answer.context import page_url
from tests.conftest import scratch_database
from tests.leaks import database_hits

SIGNED = "https://user:pw@bucket.example/m.pdf?X-Amz-Credential=AKIAOLD&X-Amz-Signature=secretOLD"


def test_citation_links_never_carry_the_stored_query() -> None:
    assert page_url("m.pdf", 3, SIGNED, None) == "https://bucket.example/m.pdf#page=3"
    assert page_url("m.pdf", 3, None, "https://files.example/docs/") == "https://files.example/docs/m.pdf#page=3"
    assert page_url("m.pdf", 3, None, None) is None


def test_migration_0013_removes_queries_older_versions_stored(pg_url: str) -> None:
    with scratch_database(pg_url, "cv_urlmig") as url:
        db.migrate(Settings(db={"url": url}))
        with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
            conn.execute("INSERT INTO documents (collection, name, sha256, source, url, bytes, page_count, chunk_count) "
                         "VALUES ('c', 'm.pdf', 'x', %s, %s, 1, 1, 1)", (SIGNED, SIGNED))
            conn.execute("INSERT INTO bot_jobs (workspace, kind, requested_by, channel, collection, source, status, "
                         "message, payload) VALUES ('T1', 'ingest', 'U1', 'C1', 'c', %s, 'failed', %s, %s)",
                         (SIGNED, f"{SIGNED}: download failed: HTTP 404",
                          Jsonb({"url": SIGNED, "kind": "ingest", "report": {
                              "channel": "C1", "user": "U1", "response_url": "https://hooks.slack.com/x/secretOLD"}})))
            conn.execute("INSERT INTO bot_jobs (workspace, kind, requested_by, channel, collection, source, payload) "
                         "VALUES ('T1', 'ingest', 'U1', 'C1', 'c', 'https://bucket.example/n.pdf', %s)",
                         (Jsonb({"url": "https://bucket.example/n.pdf?sig=stillqueued"}),))
            conn.execute("INSERT INTO bot_threads (workspace, channel, thread_ts) VALUES ('T1', 'C1', '1.0')")
            result = {"citations": [{"document": "m.pdf", "page": 3, "url": SIGNED.split("?")[0].replace(
                "user:pw@", "") + "?X-Amz-Signature=secretOLD#page=3"}], "answer": "see https://b.example/x?token=secretOLD."}
            conn.execute("INSERT INTO bot_turns (workspace, channel, thread_ts, message_ts, user_id, question, refusal, "
                         "collections, result) VALUES ('T1', 'C1', '1.0', '1.0', 'U1', 'q', false, '{c}', %s)",
                         (Jsonb(result),))
            for sql in ((resources.files("retrieval.store") / "migrations" / "0013_url_queries.sql").read_text(),
                        (resources.files("bot.migrations") / "0013_url_queries_bot.sql").read_text()):
                conn.execute(sql)  # the migrations' statements again, now over rows an older version wrote
            doc = conn.execute("SELECT source, url FROM documents WHERE collection = 'c'").fetchone()
            assert doc == {"source": "https://bucket.example/m.pdf", "url": "https://bucket.example/m.pdf"}
            jobs = conn.execute("SELECT status, source, message, payload FROM bot_jobs ORDER BY id").fetchall()
            assert jobs[0]["source"] == "https://bucket.example/m.pdf" and "url" not in jobs[0]["payload"]
            assert jobs[0]["payload"]["report"] == {"channel": "C1", "user": "U1"}
            assert jobs[0]["message"] == "https://bucket.example/m.pdf: download failed: HTTP 404"
            assert jobs[1]["payload"]["url"].endswith("?sig=stillqueued")  # an unfinished job keeps it
            turn = conn.execute("SELECT result FROM bot_turns").fetchone()["result"]
            assert turn["citations"][0]["url"] == "https://bucket.example/m.pdf#page=3"
            assert turn["answer"] == "see https://b.example/x."
        assert database_hits(url, "secretOLD") == [] and database_hits(url, "AKIAOLD") == []
