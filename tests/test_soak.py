"""Soak: 200 mentions at 2 per second through the fake Slack to the real bot process, while its database
goes away twice (every connection cut, new ones refused for a few seconds: what a restart looks like
from the bot) and its Socket Mode connection is dropped three times, with ingest jobs queued in
between. Every mention gets exactly one reply (an answer, or a message saying why not and to ask
again), every job ends done with its document stored once, and the reply times go to
results/soak.json. Loopback only; a few minutes.

It runs only with ``CV_SOAK=1`` (not a CHAPTERVERSE_ variable: tests/conftest.py clears those) (it takes 3-5 minutes of both cores and rewrites
results/soak.json):
    CV_SOAK=1 python -m pytest -q tests/test_soak.py
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import statistics
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.answer import DB_DOWN
from bot.app import BUSY, RATE_LIMITED
from tests.fake_slack import FakeSlack, wait_for
from tests.test_bot_e2e import db_rows, handbook_pdf
from tests.test_bot_support import ROOT, BotProcess, PgProxy

pytestmark = pytest.mark.skipif(os.environ.get("CV_SOAK") != "1",
                                reason="soak test (3-5 min): set CV_SOAK=1")

MENTIONS, RATE_PER_S = 200, 2.0
USERS = 20  # 10 questions each in 100 s: under the per-person limit
DB_OUTAGES = (50, 130)  # at these mention numbers the database goes away ...
OUTAGE_S = 5.0  # ... for this long
SOCKET_DROPS = (30, 90, 160)
JOBS_AT = (20, 70, 120, 170)
ADMIN = "U0ALICE"
REDELIVER_S = 5.0  # Slack sends an unacknowledged envelope again (retry_attempt 1, 2, 3)
QUESTIONS = ("What is the maximum indicated airspeed permitted below 10,000 feet MSL?",
             "How much fuel reserve is needed for a VFR flight by day?",
             "What are the basic VFR weather minimums in Class G airspace?",
             "When must a pilot use supplemental oxygen?")
OUT = ROOT / "results" / "soak.json"


class RedeliveringSlack(FakeSlack):
    """The fake Slack, plus Slack's redelivery of events nobody acknowledged (a dropped socket)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: dict[str, tuple[str, dict[str, Any], int]] = {}
        self.redelivered = 0

    def send_envelope(self, kind: str, payload: dict[str, Any], *, retry_attempt: int = 0,
                      envelope_id: str | None = None, accepts_response_payload: bool = False) -> str:
        eid = super().send_envelope(kind, payload, retry_attempt=retry_attempt, envelope_id=envelope_id,
                                    accepts_response_payload=accepts_response_payload)
        if kind == "events_api":
            with self._lock:
                self.sent[eid] = (kind, payload, retry_attempt)
        return eid

    def redeliver_unacked(self) -> None:
        now = time.time()
        with self._lock:
            due = [(eid, v) for eid, v in self.sent.items()
                   if eid not in self.acks and now - self.sent_at[eid] > REDELIVER_S and v[2] < 3]
            for eid, _ in due:
                del self.sent[eid]
        for _, (kind, payload, attempt) in due:
            self.redelivered += 1
            self.send_envelope(kind, payload, retry_attempt=attempt + 1)


@pytest.fixture(scope="module")
def fake() -> Iterator[RedeliveringSlack]:
    f = RedeliveringSlack()
    f.start()
    yield f
    f.stop()


def _pct(values: list[float], q: float) -> float:
    return round(statistics.quantiles(values, n=100, method="inclusive")[q - 1], 2) if len(values) > 1 else values[0]


def test_soak(fake: RedeliveringSlack, settings, dev_corpus: str, tmp_path: Path) -> None:
    proxy = PgProxy(settings.db.url.get_secret_value())
    env = {"DATABASE_URL": proxy.url, "CHAPTERVERSE_SLACK_WORKSPACE_COLLECTION": dev_corpus,
           "CHAPTERVERSE_SLACK_COLLECTION_SCOPE": "channel", "CHAPTERVERSE_SLACK_ADMINS": ADMIN,
           "CHAPTERVERSE_SLACK_PING_INTERVAL_S": "1", "CHAPTERVERSE_SLACK_ALLOW_PRIVATE_URLS": "1"}
    bot = BotProcess(fake, env, tmp_path / "bot.log").start()
    ch, jobs_ch = f"CSOAK{uuid.uuid4().hex[:6].upper()}", f"CJOBS{uuid.uuid4().hex[:6].upper()}"
    tag = uuid.uuid4().hex[:6]
    sent: dict[str, float] = {}  # thread ts -> when the mention was sent
    job_names: list[str] = []
    stop = threading.Event()

    def redeliver() -> None:
        while not stop.wait(1.0):
            fake.redeliver_unacked()

    threading.Thread(target=redeliver, daemon=True).start()
    t0 = time.monotonic()
    try:
        for i in range(MENTIONS):
            time.sleep(max(0.0, t0 + i / RATE_PER_S - time.monotonic()))
            if i in DB_OUTAGES:
                proxy.down()
                threading.Timer(OUTAGE_S, proxy.up).start()
            if i in SOCKET_DROPS:
                fake.drop_sockets()
            if i in JOBS_AT:
                name = f"soak-{tag}-{i}.pdf"
                url = fake.serve(name, handbook_pdf(f"The soak test fact number {i} of run {tag} is {i * 7} knots."))
                fake.slash(f"ingest <{url}>", user=ADMIN, channel=jobs_ch)
                job_names.append(name)
            ts, _ = fake.mention(ch, f"U0SOAK{i % USERS:02d}", QUESTIONS[i % len(QUESTIONS)])
            sent[ts] = time.time()
        sending_s = time.monotonic() - t0

        def final(ts: str) -> list[dict[str, Any]]:
            return [m for m in fake.bot_messages(ch, ts) if not m["text"].startswith("Looking through")]

        wait_for(lambda: all(final(ts) for ts in sent), 150, "a reply to every mention", interval=0.5)
        time.sleep(REDELIVER_S + 2)  # anything late (a second reply) would show up now
        stop.set()

        replies = {ts: fake.bot_messages(ch, ts) for ts in sent}
        extra = {ts: [m["text"][:60] for m in msgs] for ts, msgs in replies.items() if len(msgs) != 1}
        assert not extra, f"{len(extra)} mentions did not get exactly one reply: {list(extra.items())[:5]}"
        turns = db_rows(settings, "SELECT message_ts, count(*) AS n FROM bot_turns WHERE channel = %s "
                        "GROUP BY message_ts HAVING count(*) > 1", ch)
        assert not turns, turns

        # every job: done, its document stored once
        def jobs_done() -> list[dict[str, Any]] | None:
            rows = db_rows(settings, "SELECT source, status, attempts, message FROM bot_jobs WHERE channel = %s",
                           jobs_ch)
            return rows if len(rows) == len(job_names) and all(r["status"] in ("done", "failed") for r in rows) else None

        jobs = wait_for(jobs_done, 120, "every ingest job to end", interval=0.5)
        assert all(j["status"] == "done" and j["attempts"] == 1 for j in jobs), jobs  # no process died: one run each
        reports = [e["text"] for e in fake.ephemerals if e["channel"] == jobs_ch]
        for name in job_names:
            assert len(db_rows(settings, "SELECT 1 FROM documents WHERE name = %s", name)) == 1, name
            assert sum(f"`{name}` ingested" in t for t in reports) == 1, (name, reports)
        assert not [t for t in reports if ":x:" in t or "trying again" in t], reports

        # reply times: from the mention to the call that put its final text in the thread
        latencies: list[float] = []
        kinds = {"answered": 0, "database unavailable": 0, "busy": 0, "rate limited": 0, "other": 0}
        with fake._lock:
            calls = list(fake.calls)
        for ts, msgs in replies.items():
            msg = msgs[0]
            text = json.dumps(msg.get("blocks") or msg["text"])
            kind = ("database unavailable" if DB_DOWN[:40] in text else "busy" if BUSY[:40] in text else
                    "rate limited" if RATE_LIMITED[:30] in text else "answered" if "rich_text_quote" in text
                    or "do not support an answer" in text else "other")
            kinds[kind] += 1
            at = [c.at for c in calls if c.status == 200 and (
                (c.method == "chat.update" and c.params.get("ts") == msg["ts"]
                 and not str(c.params.get("text", "")).startswith("Looking through"))
                or (c.method == "chat.postMessage" and c.params.get("thread_ts") == ts
                    and not str(c.params.get("text", "")).startswith("Looking through")))]
            if at:
                latencies.append(max(0.0, min(at) - sent[ts]))
        assert kinds["other"] == 0, kinds
        assert kinds["answered"] >= MENTIONS // 2, kinds  # outages and bursts cost some, not most
        result = {
            "command": "CV_SOAK=1 python -m pytest -q tests/test_soak.py",
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
            "config": {"mentions": MENTIONS, "rate_per_s": RATE_PER_S, "users": USERS,
                       "database_outages": len(DB_OUTAGES), "outage_s": OUTAGE_S,
                       "database_outage_kind": "every connection cut and new ones refused (tests/test_bot_support.PgProxy)",
                       "socket_drops": len(SOCKET_DROPS), "ingest_jobs": len(job_names),
                       "answerer": "extractive", "slack_workers": 4, "answer_backlog": 20,
                       "redelivery_of_unacknowledged_events_s": REDELIVER_S},
            "sending_s": round(sending_s, 1),
            "replies": kinds, "exactly_one_reply_each": True, "events_redelivered": fake.redelivered,
            "reply_s": {"n": len(latencies), "p50": _pct(latencies, 50), "p95": _pct(latencies, 95),
                        "max": round(max(latencies), 2)},
            "jobs": {"done": sum(j["status"] == "done" for j in jobs), "attempts": [j["attempts"] for j in jobs]},
            "socket_connections_opened": fake.connections_opened,
        }
        OUT.write_text(json.dumps(result, indent=2) + "\n")
    finally:
        stop.set()
        proxy.up()
        bot.stop()
        proxy.close()
        for name in job_names:
            db_rows(settings, "DELETE FROM documents WHERE name = %s RETURNING 1", name)
