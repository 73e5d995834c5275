"""Latency of the bot against the fake Slack; writes results/slack_latency.json.

Run: ``CHAPTERVERSE_TEST_HOME=/tmp/cv-test-bot python -m tests.test_bot_bench`` (uses, and if needed
fills, the dev collection of that test database). Measures, per mention: the envelope ack latency
(envelope sent → ack received by the fake) and mention-to-reply (envelope sent → the placeholder
replaced by the answer), over 20 mentions asked one after another and 20 sent at once.
Pytest only runs the small check of the percentile helper below; timings are never asserted.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.fake_slack import FakeSlack, wait_for

ROOT = Path(__file__).resolve().parent.parent
QUESTIONS = ["What is the maximum indicated airspeed permitted below 10,000 feet MSL?",
             "How much fuel reserve must an airplane carry for a VFR flight by day?",
             "How high does a pilot have to stay when flying over a congested area?",
             "What is the recommended tire pressure for the nose gear of a Boeing 747-400 freighter?"]


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 100))))
    return ordered[rank - 1]


def test_percentile() -> None:
    assert percentile([5.0, 1.0, 3.0, 2.0, 4.0], 50) == 3.0
    assert percentile(list(map(float, range(1, 21))), 95) == 19.0
    assert percentile([7.0], 95) == 7.0


def _reply_at(fake: FakeSlack, channel: str, ts: str) -> float | None:
    placeholders = [m["ts"] for m in fake.bot_messages(channel, ts)]
    if not placeholders:
        return None
    done = [c.at for c in fake.calls_to("chat.update")
            if c.status == 200 and c.params.get("channel") == channel and c.params.get("ts") == placeholders[0]]
    return done[0] if done else None


def _measure(fake: FakeSlack, asks: list[tuple[str, str, list[str]]]) -> dict[str, float]:
    acks, replies = [], []
    for channel, ts, envelopes in asks:
        for env in envelopes:
            ack = fake.wait_ack(env, 30)
            acks.append((ack.at - fake.sent_at[env]) * 1e3)
        at = wait_for(lambda c=channel, t=ts: _reply_at(fake, c, t), 600, "a reply")
        replies.append((at - fake.sent_at[envelopes[-1]]) * 1e3)
    return {"n": len(replies), "ack_ms_p50": round(percentile(acks, 50), 1), "ack_ms_p95": round(percentile(acks, 95), 1),
            "ack_ms_max": round(max(acks), 1), "reply_ms_p50": round(percentile(replies, 50), 1),
            "reply_ms_p95": round(percentile(replies, 95), 1), "reply_ms_mean": round(statistics.mean(replies), 1)}


def _commit() -> str:
    """The commit measured, with "+uncommitted changes" when the working tree differs from it."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (" +uncommitted changes" if dirty else "")


def main() -> int:
    from bot.main import answer_workers  # noqa: PLC0415
    from retrieval.store import db  # noqa: PLC0415
    from retrieval.settings import Settings  # noqa: PLC0415
    from tests.conftest import DEV_PDFS  # noqa: PLC0415
    from tests.test_bot_support import BotProcess  # noqa: PLC0415

    home = Path(os.environ.get("CHAPTERVERSE_TEST_HOME") or tempfile.mkdtemp(prefix="cv-bench-", dir="/tmp"))
    home.mkdir(parents=True, exist_ok=True)
    settings = Settings(home=home)
    url = os.environ.get("DATABASE_URL") or db.conninfo(settings)
    settings = Settings(home=home, db={"url": url})
    db.ready(settings)
    from ingest.pipeline import ingest_source  # noqa: PLC0415
    from ingest.sources import read_path  # noqa: PLC0415
    from retrieval.encode.embed import get_embedder  # noqa: PLC0415

    for pdf in DEV_PDFS:  # a no-op when already ingested
        ingest_source(settings, get_embedder(settings.search.embedding_model), read_path(str(pdf), 200_000_000), "dev", quiet=True)

    load_start = round(os.getloadavg()[0], 1)
    fake = FakeSlack().start()
    env = {"DATABASE_URL": url, "CHAPTERVERSE_SLACK_WORKSPACE_COLLECTION": "dev"}
    bot = BotProcess(fake, env, home / "bench-bot.log").start()
    try:
        warm_ts, warm_env = fake.mention("C0WARM", "U0BENCH", QUESTIONS[0])
        _measure(fake, [("C0WARM", warm_ts, warm_env)])
        sequential = []
        for i in range(20):
            ts, envs = fake.mention("C0SEQ", f"U0B{i:02d}", QUESTIONS[i % len(QUESTIONS)])
            sequential.append(("C0SEQ", ts, envs))
            _measure(fake, sequential[-1:])
        seq = _measure(fake, sequential)
        t0 = time.monotonic()
        burst = [("C0BURST", *fake.mention("C0BURST", f"U0C{i:02d}", QUESTIONS[i % len(QUESTIONS)])) for i in range(20)]
        conc = _measure(fake, burst)
        conc["wall_s"] = round(time.monotonic() - t0, 1)
    finally:
        bot.stop()
        fake.stop()
    test_home = os.environ.get("CHAPTERVERSE_TEST_HOME")
    out = {"command": (f"CHAPTERVERSE_TEST_HOME={test_home} " if test_home else "") + "python -m tests.test_bot_bench",
           "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "commit": _commit(),
           "what": "ack = socket-mode envelope sent by the fake -> ack received; reply = envelope sent -> "
                   "placeholder replaced by the rendered answer (chat.update). Fake Slack on 127.0.0.1, "
                   "real bot subprocess, real ask() over the dev collection (3 FAA PDFs).",
           "config": {"answerer": "extractive (no GEMINI_API_KEY)", "slack_workers": answer_workers(settings),
                      "db_pool_size": settings.db.pool_size or 2 * answer_workers(settings) + 6,
                      "embedding_model": settings.search.embedding_model, "reranker_requested": settings.search.reranker,
                      "cpus": os.cpu_count(), "python": platform.python_version(),
                      "note": "machine shared with other engineers' jobs; figures vary run to run",
                      "load_average_1m": {"start": load_start, "end": round(os.getloadavg()[0], 1)}},
           "sequential_20": seq, "concurrent_20": conc}
    path = ROOT / "results" / "slack_latency.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
