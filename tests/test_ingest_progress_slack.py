"""A long ingest started from Slack shows its progress in one message updated in place (chat.update):
pages read / total and the time left, at most every CHAPTERVERSE_SLACK_PROGRESS_INTERVAL_S, ending with
the result. Real job queue (Postgres), real ingest pipeline and embedder, the real slack_sdk client
against the fake Slack; the jobs' clock is a counter (one second per look), so when an update is due
does not depend on how fast this machine is."""

from __future__ import annotations

import itertools
import re
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from bot.jobs import Jobs, Requester
from bot.queue import JobQueue
from bot.slack import make_client
from bot.store import Store
from tests.fake_slack import (
    BOT_TOKEN,
    FakeSlack,
    fake,  # noqa: F401  (the module's fake Slack: a pytest fixture)
)
from tests.pdfgen import long_pdf

PAGES = 40
PROGRESS = re.compile(r"pages (\d+)/(\d+) read")
USER, CHANNEL = "U0ALICE", "C0GENERAL"


@pytest.fixture()
def jobs(settings, embedder, fake: FakeSlack) -> Iterator[tuple[Jobs, JobQueue]]:  # noqa: F811
    """Jobs writing to a fresh collection, with an empty queue and a counting clock."""
    with psycopg.connect(settings.db.url.get_secret_value(), autocommit=True) as conn:
        conn.execute("DELETE FROM bot_jobs WHERE status IN ('queued', 'running')")
    s = settings.but(slack={"api_url": fake.api_url, "progress_interval_s": 5.0, "workspace_collection": f"progress-{uuid.uuid4().hex[:8]}", "allow_private_urls": True})
    client = make_client(s, BOT_TOKEN)
    ticks = itertools.count()
    queue = JobQueue(Store(s), limit=5)
    yield Jobs(s, lambda team: client, Store(s), queue, clock=lambda: float(next(ticks))), queue


def run_claimed(jobs: Jobs, queue: JobQueue) -> None:
    job = queue.claim()
    assert job is not None
    jobs.run(job)


def updates_of(fake: FakeSlack, channel: str, ts: str) -> list[str]:  # noqa: F811
    return [c.params.get("text", "") for c in fake.calls
            if c.method == "chat.update" and c.params.get("channel") == channel and c.params.get("ts") == ts]


def assert_progress_then_result(texts: list[str]) -> None:
    counts = [(int(m.group(1)), int(m.group(2))) for t in texts if (m := PROGRESS.search(t))]
    assert len(counts) >= 2, texts
    done = [d for d, _ in counts]
    assert all(total == PAGES for _, total in counts)
    assert done == sorted(done) and len(set(done)) >= 2 and done[-1] == PAGES, done  # increasing, to the end
    assert any("left" in t for t in texts if PROGRESS.search(t)), texts  # an estimate of the time left
    assert texts[-1].count(":white_check_mark:") == 1 and f"{PAGES} pages" in texts[-1], texts[-1]


def test_shared_file_status_message_shows_pages_and_time_left(jobs, fake: FakeSlack, tmp_path) -> None:  # noqa: F811
    j, queue = jobs
    fid = fake.add_file("long-manual.pdf", long_pdf(tmp_path / "long-manual.pdf", PAGES).read_bytes())
    thread_ts, _ = fake.post_user_message(CHANNEL, USER, "here is the manual")
    assert j.ingest_files(Requester(fake.team_id, CHANNEL, USER), [(fid, "long-manual.pdf")], thread_ts, None)
    status = next(m for m in fake.messages[CHANNEL] if m.get("thread_ts") == thread_ts and "queued" in m["text"])
    run_claimed(j, queue)
    texts = updates_of(fake, CHANNEL, status["ts"])
    assert_progress_then_result(texts)
    assert all("long-manual.pdf" in t for t in texts if PROGRESS.search(t))


def test_slash_command_ingest_shows_progress_in_one_direct_message(jobs, fake: FakeSlack, tmp_path) -> None:  # noqa: F811
    j, queue = jobs
    url = fake.serve(f"manual-{uuid.uuid4().hex[:6]}.pdf", long_pdf(tmp_path / "m.pdf", PAGES).read_bytes())
    queued = j.ingest_url(Requester(fake.team_id, CHANNEL, USER), url)
    assert queued.ok, queued.text
    before = len(fake.messages.get(USER, []))
    run_claimed(j, queue)
    dms = fake.messages.get(USER, [])[before:]
    assert len(dms) == 1, dms  # one message, updated in place
    posted = [c.params["text"] for c in fake.calls if c.method == "chat.postMessage" and c.params.get("channel") == USER]
    texts = [posted[-1], *updates_of(fake, USER, dms[0]["ts"])]
    assert_progress_then_result(texts)
    assert dms[0]["text"] == texts[-1]  # the message ends with the result
    # the result is still told the usual way too (ephemeral)
    assert any(":white_check_mark:" in e.get("text", "") for e in fake.ephemerals)


def test_quick_ingest_posts_no_progress_message(jobs, fake: FakeSlack, tmp_path) -> None:  # noqa: F811
    """Within one interval nothing is due: no direct message for a one-page document."""
    j, queue = jobs
    j._clock = lambda: 0.0  # time stands still: never due
    url = fake.serve(f"short-{uuid.uuid4().hex[:6]}.pdf", long_pdf(tmp_path / "s.pdf", 1).read_bytes())
    assert j.ingest_url(Requester(fake.team_id, CHANNEL, USER), url).ok
    before = len(fake.messages.get(USER, []))
    run_claimed(j, queue)
    assert fake.messages.get(USER, [])[before:] == []
