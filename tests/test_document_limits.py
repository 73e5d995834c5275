"""What one document may cost the process that ingests it (issue 32, item 1). A 100 KB PDF of 500
pages that all draw one 180,000-character content stream is inside every per-page limit; it drove
the ingesting process to 2.8 GB. Now its text is bounded per document
(CHAPTERVERSE_PDF_MAX_DOCUMENT_CHARS) and its passages (CHAPTERVERSE_MAX_DOCUMENT_CHUNKS), so it
fails with the limit named while every process of the ingest stays small; and a bot's ingest job
runs in a child process under an address-space limit (CHAPTERVERSE_INGEST_MAX_MEMORY_MB), so a
document that needs more fails its own job, not the bot. The real command and real Postgres; peak
memory measured with psutil over the whole process tree."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import psycopg
import pytest

from bot.jobs import Jobs, Requester
from bot.queue import JobQueue
from bot.slack import make_client
from bot.store import Store
from retrieval.store import db
from tests.conftest import run_cli
from tests.fake_slack import BOT_TOKEN, FakeSlack, fake  # noqa: F401  (fake: a pytest fixture)
from tests.pdfgen import long_pdf, shared_stream_pdf

RUN = uuid.uuid4().hex[:8]
PEAK_LIMIT_MB = 1200
USER, CHANNEL = "U0ALICE", "C0GENERAL"


def _peak_rss_mb(args: list[str], timeout_s: float = 300) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run the real command; the largest resident size any of its processes reached (Postgres, run
    by the test fixtures, is not part of it)."""
    proc = subprocess.Popen([sys.executable, "-m", "retrieval.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    root = psutil.Process(proc.pid)
    peak = 0.0
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            for p in [root, *root.children(recursive=True)]:
                try:
                    peak = max(peak, p.memory_info().rss / 1e6)
                except psutil.Error:
                    pass
        except psutil.Error:
            pass
        time.sleep(0.05)
    if proc.poll() is None:
        proc.kill()
    out, err = proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), peak


def _progress(line: str) -> bool:
    return line.startswith("ingest: ") and " · " in line


def _documents(settings, collection: str) -> int:
    with db.connection(settings) as conn:
        return conn.execute("SELECT count(*) AS n FROM documents WHERE collection = %s", (collection,)).fetchone()["n"]


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("shared-stream")
    return {"500": shared_stream_pdf(root / "shared-500.pdf", 500),
            "5000": shared_stream_pdf(root / "shared-5000.pdf", 5000)}  # ten times larger, at the page limit


@pytest.mark.parametrize("size", ["500", "5000"])
def test_a_small_pdf_of_pages_sharing_one_huge_stream_fails_with_the_limit_named_and_stays_small(
        settings, shared, size: str) -> None:
    collection = f"shared-{size}-{RUN}"
    pdf = shared[size]
    assert pdf.stat().st_size < 1_000_000
    res, peak = _peak_rss_mb(["ingest", str(pdf), "--collection", collection])
    assert res.returncode == 1, res.stderr
    # a progress line ("ingest: shared-500.pdf: pages 66/500 read · 30.0 s") comes every 30 s: seen when a loaded
    # machine took that long to reach page 68 (three test workers on two cores)
    lines = [line for line in res.stderr.splitlines() if line.strip() and not _progress(line)]
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert "its text passes 12,000,000 characters at page 68; the limit is 12,000,000 " \
           "(CHAPTERVERSE_PDF_MAX_DOCUMENT_CHARS)" in lines[0], lines[0]
    assert peak <= PEAK_LIMIT_MB, f"peak RSS {peak:.0f} MB"
    assert _documents(settings, collection) == 0


def test_the_passage_limit_refuses_a_document_split_into_too_many(settings, tmp_path: Path) -> None:
    collection = f"chunks-{RUN}"
    pdf = long_pdf(tmp_path / "forty.pdf", 40)
    res = run_cli("ingest", str(pdf), "--collection", collection, env={"CHAPTERVERSE_MAX_DOCUMENT_CHUNKS": "10"})
    assert res.returncode == 1
    assert res.stderr.strip().endswith("passages; the limit is 10 (CHAPTERVERSE_MAX_DOCUMENT_CHUNKS)"), res.stderr
    assert _documents(settings, collection) == 0
    ok = run_cli("ingest", str(pdf), "--collection", collection)  # the default limit takes it
    assert ok.returncode == 0, ok.stderr
    assert _documents(settings, collection) == 1


def test_the_document_char_limit_is_checked_by_the_parent_too(tmp_path: Path) -> None:
    """The parser child's word is not taken for it: the parent counts the characters it receives."""
    from ingest import isolate  # noqa: PLC0415
    from ingest.sources import InputError, Source  # noqa: PLC0415

    pdf = long_pdf(tmp_path / "ten.pdf", 10)
    src = Source("ten.pdf", "ten.pdf", pdf.read_bytes(), None)
    with pytest.raises(InputError, match=r"its text passes 10,000 characters at page \d; the limit is 10,000 "
                                         r"\(CHAPTERVERSE_PDF_MAX_DOCUMENT_CHARS\)"):
        isolate.parse(src, isolate.Limits(max_document_chars=10_000))
    # a child that does not count (as a compromised parser would not) is still stopped by the parent
    real = isolate._too_long
    lying = isolate.Limits(max_document_chars=10_000)
    seen: list[int] = []

    def parent_only(page: int, limits: isolate.Limits) -> str:
        seen.append(page)
        return real(page, limits)

    child_limits = {**lying.__dict__, "max_document_chars": 10**9}
    original = isolate.asdict
    # the child is told a limit it will never reach (its OCR options go as they are)
    isolate.asdict = lambda given: child_limits if isinstance(given, isolate.Limits) else original(given)
    isolate._too_long = parent_only
    try:
        with pytest.raises(InputError, match="CHAPTERVERSE_PDF_MAX_DOCUMENT_CHARS"):
            isolate.parse(src, lying)
    finally:
        isolate.asdict = original
        isolate._too_long = real
    assert seen  # the parent's own count refused it


# ---------------------------------------------------------------------------------------------
# the bot: ingest jobs run in a limited child process

@pytest.fixture()
def jobs(settings, fake: FakeSlack) -> Iterator[tuple[Jobs, JobQueue, str]]:  # noqa: F811
    with psycopg.connect(settings.db.url.get_secret_value(), autocommit=True) as conn:
        conn.execute("DELETE FROM bot_jobs WHERE status IN ('queued', 'running')")
    collection = f"limits-bot-{uuid.uuid4().hex[:8]}"
    s = settings.but(slack={"api_url": fake.api_url, "workspace_collection": collection, "allow_private_urls": True})
    client = make_client(s, BOT_TOKEN)
    queue = JobQueue(Store(s), limit=5)
    yield Jobs(s, lambda team: client, Store(s), queue), queue, collection


def _share_and_run(j: Jobs, queue: JobQueue, fake: FakeSlack, name: str, data: bytes) -> tuple[str, dict]:  # noqa: F811
    fid = fake.add_file(name, data)
    thread_ts, _ = fake.post_user_message(CHANNEL, USER, "here is the manual")
    assert j.ingest_files(Requester(fake.team_id, CHANNEL, USER), [(fid, name)], thread_ts, None)
    job = queue.claim()
    assert job is not None
    j.run(job)
    with psycopg.connect(j.settings.db.url.get_secret_value(), autocommit=True) as conn:
        row = conn.execute("SELECT status, message FROM bot_jobs WHERE workspace = %s AND id = %s",
                           (job.workspace, job.id)).fetchone()
    texts = [m["text"] for m in fake.messages[CHANNEL] if m.get("thread_ts") == thread_ts]
    return texts[-1] if texts else "", {"status": row[0], "message": row[1]}


def test_a_hostile_shared_file_fails_its_job_in_a_child_and_the_bot_stays_small(jobs, fake, shared) -> None:  # noqa: F811
    j, queue, collection = jobs
    me = psutil.Process()
    before = me.memory_info().rss / 1e6
    children_seen: list[str] = []
    stop = False

    def watch() -> None:
        while not stop:
            for c in me.children(recursive=True):
                try:
                    children_seen.append(" ".join(c.cmdline()[1:3]))
                except psutil.Error:
                    pass
            time.sleep(0.05)

    import threading  # noqa: PLC0415

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        told, row = _share_and_run(j, queue, fake, "shared-500.pdf", shared["500"].read_bytes())
    finally:
        stop = True
        watcher.join()
    assert "-m bot.confined" in children_seen  # the ingest ran in its own process
    assert row["status"] == "failed" and "CHAPTERVERSE_PDF_MAX_DOCUMENT_CHARS" in row["message"], row
    assert ":x:" in told and "CHAPTERVERSE_PDF_MAX_DOCUMENT_CHARS" in told, told
    assert me.memory_info().rss / 1e6 - before < 150  # none of the document's cost landed in the bot
    # and the bot goes on: the next job, a good file, is ingested
    told, row = _share_and_run(j, queue, fake, "good.pdf", long_pdf(Path(os.environ.get("TMPDIR", "/tmp")) /
                                                                    f"good-{RUN}.pdf", 3).read_bytes())
    assert row["status"] == "done" and row["message"] == "ingested", row
    assert ":white_check_mark:" in told and "3 pages" in told, told


def test_an_ingest_over_its_memory_limit_fails_its_job_with_the_limit_named(jobs, fake, tmp_path) -> None:  # noqa: F811
    j, queue, collection = jobs
    j.settings = j.settings.but(ingest={"max_memory_mb": 512})  # less than the models need
    told, row = _share_and_run(j, queue, fake, "manual.pdf", long_pdf(tmp_path / "manual.pdf", 3).read_bytes())
    assert row["status"] == "failed", row
    assert "512 MB" in row["message"] and "CHAPTERVERSE_INGEST_MAX_MEMORY_MB" in row["message"], row
    assert "nothing was stored" in told and "\n" not in row["message"]
    with psycopg.connect(j.settings.db.url.get_secret_value(), autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM documents WHERE collection = %s", (collection,)).fetchone()[0] == 0


def test_embedding_while_reading_gives_up_when_it_falls_too_far_behind(embedder, monkeypatch) -> None:
    """The read-ahead queue is bounded: pages handed to the guessing thread faster than it takes them
    wait there up to ``MAX_QUEUED_CHARS``; beyond that it stops (the pipeline embeds once every page
    is in) instead of holding every page twice."""
    from ingest import ahead as ahead_mod  # noqa: PLC0415

    monkeypatch.setattr(ahead_mod, "MAX_QUEUED_CHARS", 50_000)
    guess = ahead_mod.EmbedAhead(embedder, functools.cache(embedder.count_tokens), 200, 40)
    page = ("The aircraft shall maintain a minimum altitude above the highest obstacle. " * 40, (), 0, None)
    guess.start(600, "A long manual")
    for _ in range(600):  # about 1.8 MB of text, handed over at once
        guess.page(page)
    assert guess.given_up
    t0 = time.monotonic()
    guess.stop()
    assert time.monotonic() - t0 < 60
    assert guess._queued <= 50_000 + len(page[0])  # what was queued never passed the bound by more than a page
