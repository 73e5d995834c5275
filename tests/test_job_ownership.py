"""Jobs belong to the claim that runs them (bot.queue, bot.runner): heartbeat and finish act only while
the job is still that claim's, every job has a deadline (CHAPTERVERSE_JOB_DEADLINE_S), and a job past
it is failed once, not retried, with its worker told to stop before writing anything."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg.rows import dict_row

from bot.queue import JobLost, JobQueue, JobSpec, ReportTo, claim_of, record_done
from bot.runner import JobRunner
from bot.store import Store


def spec() -> JobSpec:
    return JobSpec(kind="ingest", collection="c", url="https://example.org/a.pdf?X-Amz-Signature=secret",
                   report=ReportTo(channel="C1", user="U1", response_url="https://hooks.slack.com/commands/x"))


def rows(settings, sql: str, *params) -> list[dict]:
    with psycopg.connect(settings.db.url.get_secret_value(), row_factory=dict_row, autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()


def job_row(settings, ws: str, job_id: int) -> dict:
    return rows(settings, "SELECT status, message, payload, attempts, owner_pid FROM bot_jobs "
                "WHERE workspace = %s AND id = %s", ws, job_id)[0]


@pytest.fixture
def clean(settings) -> Iterator[None]:
    rows(settings, "DELETE FROM bot_jobs WHERE status IN ('queued', 'running') RETURNING id")
    yield
    rows(settings, "DELETE FROM bot_jobs WHERE status IN ('queued', 'running') RETURNING id")


def test_heartbeat_and_finish_of_a_claim_that_lost_its_job_change_nothing(settings, clean) -> None:
    queue = JobQueue(Store(settings), limit=5)
    ws = f"T{uuid.uuid4().hex[:8]}"
    job_id, _ = queue.enqueue(ws, "U1", "https://example.org/a.pdf", spec())
    mine = queue.claim()
    assert mine is not None and mine.id == job_id and mine.owner[1] > 0
    assert queue.heartbeat(mine) == "ok" and not mine.lost.is_set()
    # the job was requeued (this worker looked dead) and another worker claimed it
    rows(settings, "UPDATE bot_jobs SET owner_host = 'other-host', owner_pid = 4242, attempts = attempts + 1 "
         "WHERE workspace = %s AND id = %s RETURNING id", ws, job_id)
    assert queue.heartbeat(mine) == "lost" and mine.lost.is_set()
    assert queue.finish(mine, ok=False, message="my late failure") is False
    row = job_row(settings, ws, job_id)
    assert row["status"] == "running" and row["owner_pid"] == 4242 and row["message"] == ""  # the other's


def test_a_job_past_its_deadline_is_failed_once_with_a_clear_message_and_not_retried(settings, clean) -> None:
    queue = JobQueue(Store(settings), limit=5, deadline_s=60)
    ws = f"T{uuid.uuid4().hex[:8]}"
    job_id, _ = queue.enqueue(ws, "U1", "https://example.org/a.pdf", spec())
    job = queue.claim()
    assert job is not None
    rows(settings, "UPDATE bot_jobs SET started_at = now() - interval '2 minutes' WHERE workspace = %s AND id = %s "
         "RETURNING id", ws, job_id)
    assert queue.heartbeat(job) == "expired" and job.lost.is_set()  # its own worker fails it
    row = job_row(settings, ws, job_id)
    assert row["status"] == "failed" and "url" not in row["payload"] and "response_url" not in row["payload"]["report"]
    assert row["message"] == "stopped: it ran longer than the job deadline (1 min, CHAPTERVERSE_JOB_DEADLINE_S); " \
                             "nothing was changed"
    assert queue.finish(job, ok=True, message="ingested") is False  # a late success is not recorded
    assert job_row(settings, ws, job_id)["status"] == "failed"
    assert queue.recover(stale_s=3600, starting=True) == (0, 0) and queue.claim() is None  # not retried


def test_any_worker_fails_a_job_that_ran_past_its_deadline(settings, clean) -> None:
    queue = JobQueue(Store(settings), limit=5, deadline_s=60)
    ws = f"T{uuid.uuid4().hex[:8]}"
    job_id, _ = queue.enqueue(ws, "U1", "https://example.org/a.pdf", spec())
    assert queue.claim() is not None
    rows(settings, "UPDATE bot_jobs SET owner_host = 'elsewhere', started_at = now() - interval '2 minutes' "
         "WHERE workspace = %s AND id = %s RETURNING id", ws, job_id)  # its worker is alive and beating
    assert queue.recover(stale_s=3600) == (0, 1)
    assert job_row(settings, ws, job_id)["status"] == "failed"


def test_the_runner_stops_a_job_at_its_deadline_and_says_so(settings, clean) -> None:
    queue = JobQueue(Store(settings), limit=5, deadline_s=1)
    ws = f"T{uuid.uuid4().hex[:8]}"
    job_id, _ = queue.enqueue(ws, "U1", "https://example.org/a.pdf", spec())
    told: list[tuple[int, str]] = []
    stopped = threading.Event()

    def execute(job) -> None:  # noqa: ANN001  (a job that would run for ever, checking as ingest does)
        while True:
            if job.lost.wait(0.1):
                stopped.set()
                raise JobLost(job.id)

    reported = threading.Event()

    def on_lost(job, why: str) -> None:  # noqa: ANN001
        told.append((job.id, why))
        reported.set()

    runner = JobRunner(queue, execute, heartbeat_s=0.3, poll_s=0.1, on_lost=on_lost).start()
    try:
        assert stopped.wait(30), "the job was not stopped"
        # the heartbeat sets job.lost, then reports: the job may see the first before the second
        assert reported.wait(5), "the runner did not say why the job stopped"
    finally:
        runner.stop()
    assert told == [(job_id, "expired")]
    row = job_row(settings, ws, job_id)
    assert row["status"] == "failed" and "job deadline" in row["message"]
    time.sleep(0.5)
    assert queue.claim() is None


# ---------------------------------------------------------------------------------------------
# issue 32, item 6: the ownership and deadline check is inside the document's transaction

def _ingest_for(settings, embedder, job, queue: JobQueue, pdf, collection: str, during_commit=None):  # noqa: ANN001, ANN201
    from ingest.pipeline import ingest_source  # noqa: PLC0415
    from ingest.sources import read_path  # noqa: PLC0415

    def before_commit(conn, status: str, pages: int, chunks: int) -> None:  # noqa: ANN001
        try:  # as bot.confined's child does; its parent marks the job lost
            record_done(conn, claim_of(job), queue.deadline_s, status, pages, chunks)
        except JobLost:
            job.lost.set()
            raise
        if during_commit is not None:
            during_commit()

    return ingest_source(settings, embedder, read_path(str(pdf), 10**8), collection, quiet=True,
                         before_commit=before_commit)


def _documents(settings, collection: str) -> int:
    return rows(settings, "SELECT count(*) AS n FROM documents WHERE collection = %s", collection)[0]["n"]


def test_a_deadline_that_fires_during_the_write_never_marks_a_committed_document_unchanged(
        settings, embedder, clean, tmp_path) -> None:
    from tests.pdfgen import long_pdf  # noqa: PLC0415

    queue = JobQueue(Store(settings), limit=5, deadline_s=600)
    ws, collection = f"T{uuid.uuid4().hex[:8]}", f"race-{uuid.uuid4().hex[:8]}"
    job_id, _ = queue.enqueue(ws, "U1", "race.pdf", spec())
    job = queue.claim()
    assert job is not None
    expiring = JobQueue(Store(settings), limit=5, deadline_s=0.001)  # whose heartbeat finds the deadline passed
    told: list[str] = []

    def deadline_fires_now() -> None:
        """Inside the write's transaction, after its check: the heartbeat fails the job for its
        deadline, from another thread and connection (it waits for the row the write holds)."""
        beat = threading.Thread(target=lambda: told.append(expiring.heartbeat(job)))
        beat.start()
        beat.join(1.0)
        assert beat.is_alive(), "the heartbeat did not wait for the write's transaction"
        threads.append(beat)

    threads: list[threading.Thread] = []
    res = _ingest_for(settings, embedder, job, queue, long_pdf(tmp_path / "race.pdf", 2), collection,
                      deadline_fires_now)
    threads[0].join(30)
    assert res.status == "ingested" and _documents(settings, collection) == 1
    row = job_row(settings, ws, job_id)
    assert row["status"] == "done" and row["message"] == "ingested", row  # never "nothing was changed"
    assert told == ["lost"]  # the heartbeat found it done: no "stopped ... nothing was changed" report


def test_a_deadline_that_fired_before_the_write_commits_stores_nothing(settings, embedder, clean, tmp_path) -> None:
    from tests.pdfgen import long_pdf  # noqa: PLC0415

    queue = JobQueue(Store(settings), limit=5, deadline_s=600)
    ws, collection = f"T{uuid.uuid4().hex[:8]}", f"race-{uuid.uuid4().hex[:8]}"
    job_id, _ = queue.enqueue(ws, "U1", "race.pdf", spec())
    job = queue.claim()
    assert job is not None
    # the job's last ownership check before the write passed; then its deadline passes
    assert not job.lost.is_set()
    rows(settings, "UPDATE bot_jobs SET started_at = now() - interval '20 minutes' WHERE workspace = %s AND id = %s "
         "RETURNING id", ws, job_id)
    with pytest.raises(JobLost):
        _ingest_for(settings, embedder, job, queue, long_pdf(tmp_path / "late.pdf", 2), collection)
    assert _documents(settings, collection) == 0 and job.lost.is_set()  # rolled back with the document
    assert JobQueue(Store(settings), limit=5, deadline_s=600).heartbeat(job) == "expired"
    row = job_row(settings, ws, job_id)
    assert row["status"] == "failed" and "nothing was changed" in row["message"]
    assert _documents(settings, collection) == 0  # which is true
