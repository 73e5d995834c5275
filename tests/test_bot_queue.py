"""The job queue in Postgres (bot.queue) and the separate worker process (`chapterverse worker`).

Real database; the worker test runs the real CLI against the fake Slack.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.rows import dict_row

from bot.queue import MAX_ATTEMPTS, JobQueue, JobSpec, QueueFull, ReportTo
from bot.store import Store, job_owner
from tests.fake_slack import BOT_TOKEN, FakeSlack, wait_for
from tests.test_bot_e2e import handbook_pdf


def spec(url: str = "https://example.org/a.pdf?sig=SECRET") -> JobSpec:
    return JobSpec(kind="ingest", collection="c", url=url, report=ReportTo(channel="C1", user="U1"))


def rows(settings, sql: str, *params) -> list[dict]:
    with psycopg.connect(settings.db.url.get_secret_value(), row_factory=dict_row, autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()


@pytest.fixture
def queue(settings) -> Iterator[JobQueue]:
    """An empty queue (unfinished jobs of earlier tests are removed: claim takes the oldest of all)."""
    rows(settings, "DELETE FROM bot_jobs WHERE status IN ('queued', 'running') RETURNING id")
    yield JobQueue(Store(settings), limit=3)
    rows(settings, "DELETE FROM bot_jobs WHERE status IN ('queued', 'running') RETURNING id")


def test_queue_is_bounded_per_workspace_with_a_clear_message(queue: JobQueue) -> None:
    ws, other = f"T{uuid.uuid4().hex[:8]}", f"T{uuid.uuid4().hex[:8]}"
    ahead = [queue.enqueue(ws, "U1", "a.pdf", spec())[1] for _ in range(3)]
    assert ahead == [0, 1, 2]
    with pytest.raises(QueueFull, match=r"job queue is full \(3 jobs are waiting or running"):
        queue.enqueue(ws, "U1", "a.pdf", spec())
    assert queue.enqueue(other, "U1", "a.pdf", spec())[1] == 0  # another workspace has its own room
    job = queue.claim()
    assert job is not None
    queue.finish(job, ok=True, message="done")
    queue.enqueue(job.workspace, "U1", "a.pdf", spec())  # a finished job makes room


def test_concurrent_claims_never_share_a_job_and_skip_locked_ones(queue: JobQueue, settings) -> None:
    queue.limit = 100
    ws = f"T{uuid.uuid4().hex[:8]}"
    ids = [queue.enqueue(ws, "U1", f"{i}.pdf", spec())[0] for i in range(12)]
    # a claimer holding the oldest job's row lock does not make others wait: they skip it
    with psycopg.connect(settings.db.url.get_secret_value()) as locker:
        locker.execute("SELECT 1 FROM bot_jobs WHERE workspace = %s AND id = %s FOR UPDATE", (ws, ids[0]))
        first = queue.claim()
        assert first is not None and first.id == ids[1]
        locker.rollback()
    got: list[int] = [first.id]
    lock = threading.Lock()

    def claim_all() -> None:
        while (job := queue.claim()) is not None:
            with lock:
                got.append(job.id)

    threads = [threading.Thread(target=claim_all) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(got) == sorted(ids)  # every job claimed exactly once
    status = {r["status"] for r in rows(settings, "SELECT status FROM bot_jobs WHERE workspace = %s", ws)}
    assert status == {"running"}


def test_job_of_a_dead_worker_is_retried_once_then_failed_clearly(queue: JobQueue, settings) -> None:
    ws = f"T{uuid.uuid4().hex[:8]}"
    job_id, _ = queue.enqueue(ws, "U1", "https://example.org/a.pdf", spec())
    host, _ = job_owner()
    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True).stdout)
    for attempt in range(1, MAX_ATTEMPTS + 1):
        job = queue.claim()
        assert job is not None and job.id == job_id and job.attempts == attempt
        # the worker dies: its PID is gone
        rows(settings, "UPDATE bot_jobs SET owner_pid = %s WHERE workspace = %s AND id = %s RETURNING id",
             dead, ws, job_id)
        assert queue.recover(starting=False) == (0, 0)  # heartbeat still fresh, other processes can't tell yet
        requeued, failed = queue.recover(starting=True)  # a process starting on the same host can
        assert (requeued, failed) == ((1, 0) if attempt < MAX_ATTEMPTS else (0, 1))
    row = rows(settings, "SELECT status, message, payload FROM bot_jobs WHERE workspace = %s AND id = %s",
               ws, job_id)[0]
    assert row["status"] == "failed"
    assert row["message"] == f"interrupted: its worker stopped during each of {MAX_ATTEMPTS} attempt(s)"
    assert "url" not in row["payload"]  # a signed URL is not kept after the job ends


def test_a_running_job_without_heartbeat_is_requeued_by_any_worker(queue: JobQueue, settings) -> None:
    ws = f"T{uuid.uuid4().hex[:8]}"
    job_id, _ = queue.enqueue(ws, "U1", "a.pdf", spec())
    job = queue.claim()
    assert job is not None
    queue.heartbeat(job)
    assert queue.recover(stale_s=60) == (0, 0)  # alive
    rows(settings, "UPDATE bot_jobs SET owner_host = 'elsewhere', heartbeat_at = now() - interval '5 minutes' "
         "WHERE workspace = %s AND id = %s RETURNING id", ws, job_id)
    assert queue.recover(stale_s=60) == (1, 0)
    again = queue.claim()
    assert again is not None and again.id == job_id and again.attempts == 2
    queue.finish(again, ok=True, message="ingested")
    row = rows(settings, "SELECT status, payload FROM bot_jobs WHERE workspace = %s AND id = %s", ws, job_id)[0]
    assert row["status"] == "done" and "url" not in row["payload"]


def test_worker_process_runs_a_queued_ingest_and_reports_in_slack(queue: JobQueue, settings,
                                                                 tmp_path) -> None:
    """`chapterverse worker` (no bot running) claims a job another process queued, ingests the URL
    and tells the requester; the queued job survives until a worker is there to run it."""
    fake = FakeSlack().start()
    ws, channel = f"T{uuid.uuid4().hex[:8]}", f"C{uuid.uuid4().hex[:8].upper()}"
    name = f"zephyr-worker-{uuid.uuid4().hex[:6]}.pdf"
    url = fake.serve(name, handbook_pdf("The Zephyr glider's maximum aerotow speed is 81 knots."))
    collection = f"worker-test-{uuid.uuid4().hex[:6]}"
    to = ReportTo(channel=channel, user="U0ALICE")
    job_id, _ = queue.enqueue(ws, "U0ALICE", url, JobSpec(kind="ingest", collection=collection, url=url, report=to))
    env = {**os.environ, "DATABASE_URL": settings.db.url.get_secret_value(), "SLACK_BOT_TOKEN": BOT_TOKEN,
           "SLACK_API_URL": fake.api_url, "CHAPTERVERSE_SLACK_ALLOW_PRIVATE_URLS": "1", "NO_PROXY": "127.0.0.1"}
    log = open(tmp_path / "worker.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen([str(Path(sys.executable).with_name("chapterverse")), "worker", "-v"], env=env, stdout=log,
                            stderr=subprocess.STDOUT)
    try:
        done = wait_for(lambda: [e for e in fake.ephemerals if e["channel"] == channel and
                                 ("ingested" in e["text"] or "failed" in e["text"])], 240, "the worker's report")
        assert f"`{name}` ingested into `{collection}`: 3 pages" in done[0]["text"], done
        job = rows(settings, "SELECT status, pages, owner_pid FROM bot_jobs WHERE workspace = %s AND id = %s",
                   ws, job_id)[0]
        assert job["status"] == "done" and job["pages"] == 3 and job["owner_pid"] == proc.pid
    finally:
        proc.terminate()
        code = proc.wait(30)
        log.close()
        fake.stop()
        rows(settings, "DELETE FROM documents WHERE collection = %s RETURNING id", collection)
    assert code == 0, (tmp_path / "worker.log").read_text()
