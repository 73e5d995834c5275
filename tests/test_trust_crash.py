"""No accepted work lost: the real bot process (fake Slack, fake Gemini, the test Postgres) is killed
with SIGKILL while it answers a question and runs an ingest job; a new process answers the question in
place of its "Looking through…" placeholder and finishes the job, each exactly once."""

from __future__ import annotations

import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pymupdf
import pytest

from bot.answer import ASK_AGAIN
from tests import fake_gemini as fg
from tests.fake_slack import FakeSlack, wait_for
from tests.fake_slack import fake  # noqa: F401  (the module's fake Slack: a pytest fixture)
from tests.test_bot_e2e import ANSWERABLE, db_rows, text_of
from tests.test_bot_support import BotProcess
from tests.test_gemini_failures import good_reply

ADMIN = "U0ALICE"


@pytest.fixture(scope="module")
def gemini() -> Iterator[fg.FakeGemini]:
    with fg.running() as server:
        yield server


@pytest.fixture(scope="module")
def bot_env(gemini: fg.FakeGemini, settings, dev_corpus: str) -> dict[str, str]:
    return {"DATABASE_URL": settings.db.url.get_secret_value(),
            "CHAPTERVERSE_SLACK_WORKSPACE_COLLECTION": dev_corpus,
            "CHAPTERVERSE_SLACK_COLLECTION_SCOPE": "channel",  # ingests go to dev:<channel>, not to dev
            "CHAPTERVERSE_SLACK_ADMINS": ADMIN, "CHAPTERVERSE_SLACK_PING_INTERVAL_S": "1",
            "CHAPTERVERSE_SLACK_ALLOW_PRIVATE_URLS": "1",  # the fake serves the PDF on 127.0.0.1
            "GEMINI_API_KEY": gemini.api_key, "GOOGLE_GEMINI_BASE_URL": gemini.base_url,
            "CHAPTERVERSE_GEMINI_MODEL": "gemini-test", "CHAPTERVERSE_GEMINI_TIMEOUT_S": "120"}


def long_manual(pages: int, tag: str) -> bytes:
    """A text PDF long enough that its ingest is still running when the bot is killed."""
    doc = pymupdf.open()
    for i in range(pages):
        page = doc.new_page(width=612, height=792)
        body = " ".join(f"Section {i + 1}.{j}: the {tag} winch cable of the glider is inspected for frayed strands, "
                        f"kinks and corrosion every {j + 3} launches, and replaced after {100 + i * 7 + j} launches."
                        for j in range(12))
        page.insert_textbox(pymupdf.Rect(54, 54, 558, 738), body, fontsize=9)
    data = doc.tobytes()
    doc.close()
    return data


def kill9(proc: BotProcess) -> None:
    assert proc.proc is not None
    proc.proc.send_signal(signal.SIGKILL)
    proc.proc.wait(30)  # reaped: its PID is gone, as after a crash
    proc._log.close()


def test_sigkill_mid_question_and_mid_ingest_both_finish_exactly_once_after_restart(
        fake: FakeSlack, gemini: fg.FakeGemini, bot_env: dict[str, str], settings, tmp_path: Path) -> None:
    # the first model call never answers in time: the bot is mid-question when it dies
    gemini.script(fg.Reply(200, fg.answer_body("late", []), delay_s=300), good_reply)
    first = BotProcess(fake, bot_env, tmp_path / "first.log").start()
    ch_q, ch_i = (f"C{uuid.uuid4().hex[:8].upper()}" for _ in range(2))
    tag = uuid.uuid4().hex[:6]
    name = f"winch-{tag}.pdf"
    url = fake.serve(name, long_manual(60, tag))
    try:
        ts, _ = fake.mention(ch_q, ADMIN, ANSWERABLE)
        wait_for(lambda: gemini.requests, 120, "the question to reach the model")
        placeholder = wait_for(lambda: fake.bot_messages(ch_q, ts), 30, "the placeholder")
        assert "Looking through" in placeholder[0]["text"]

        fake.wait_ack(fake.slash(f"ingest <{url}>", user=ADMIN, channel=ch_i), 10)
        job = wait_for(lambda: db_rows(settings, "SELECT id, workspace FROM bot_jobs WHERE source = %s "
                                       "AND status = 'running'", url), 120, "the ingest job to run")[0]
        wait_for(lambda: "reading" in " ".join(e["text"] for e in fake.ephemerals if e["channel"] == ch_i),
                 60, "the ingest to be reading the PDF")
    finally:
        kill9(first)
    status = db_rows(settings, "SELECT status, attempts FROM bot_jobs WHERE workspace = %s AND id = %s",
                     job["workspace"], job["id"])[0]
    assert status == {"status": "running", "attempts": 1}  # killed mid-ingest, not after it
    assert not db_rows(settings, "SELECT 1 FROM documents WHERE name = %s", name)

    second = BotProcess(fake, bot_env, tmp_path / "second.log").start(wait_models=False)
    try:
        # the question: answered once, in place of the dead process's placeholder
        def answered() -> list[dict] | None:
            msgs = fake.bot_messages(ch_q, ts)
            return msgs if msgs and "Looking through" not in msgs[0]["text"] else None

        msgs = wait_for(answered, 120, "the interrupted question's answer")
        assert "250 knots" in text_of(msgs) and ASK_AGAIN not in text_of(msgs)
        assert msgs[0]["ts"] == placeholder[0]["ts"]  # the placeholder became the answer
        assert db_rows(settings, "SELECT question, attempts FROM bot_events WHERE event_key = %s",
                       f"{ch_q}:{ts}") == [{"question": None, "attempts": 2}]

        # the job: run again and finished, one document, one success report
        wait_for(lambda: db_rows(settings, "SELECT 1 FROM bot_jobs WHERE workspace = %s AND id = %s AND status "
                                 "IN ('done', 'failed')", job["workspace"], job["id"]), 300, "the job to finish")
        row = db_rows(settings, "SELECT status, attempts, message FROM bot_jobs WHERE workspace = %s AND id = %s",
                      job["workspace"], job["id"])[0]
        assert (row["status"], row["attempts"]) == ("done", 2), row
        docs = db_rows(settings, "SELECT collection FROM documents WHERE name = %s", name)
        assert docs == [{"collection": f"dev:{ch_i}"}]
        # the job is recorded done in the document's own transaction (issue 32), just before it is reported
        wait_for(lambda: any(f"`{name}` ingested" in e["text"] for e in fake.ephemerals if e["channel"] == ch_i),
                 60, "the success report")
        reports = [e["text"] for e in fake.ephemerals if e["channel"] == ch_i]
        assert sum(f"`{name}` ingested" in t for t in reports) == 1, reports
        assert any("trying again (attempt 2)" in t for t in reports), reports

        # nothing more arrives later (no second answer, no second run)
        wait_for(lambda: "models loaded" in second.log(), 120, "the models")
        assert len(fake.bot_messages(ch_q, ts)) == 1
        assert len(db_rows(settings, "SELECT 1 FROM bot_turns WHERE channel = %s AND message_ts = %s", ch_q, ts)) == 1
    finally:
        second.stop()
        db_rows(settings, "DELETE FROM documents WHERE name = %s RETURNING 1", name)
