"""Load benchmark of the bot through the fake Slack: a burst of mentions, then a steady stream.

Run (writes results/speed/mentions_load.json and .md; one answerer at a time, each run kept beside the
other's):
    flock /tmp/chapterverse-bench.lock python -m tests.test_mention_load --answerer extractive
    flock /tmp/chapterverse-bench.lock python -m tests.test_mention_load --answerer model

The real bot process (``python -m bot``, slack-bolt's Socket Mode client) against the fake Slack on
127.0.0.1 (tests/fake_slack.py), over the dev collection (the three FAA PDFs, ingested into a
temporary home, or the one of ``CHAPTERVERSE_TEST_HOME``). 20 mentions within one second, then 2 a
second for 5 minutes, from enough different people that none reaches the per-person limit. With
``--answerer model`` the bot uses the OpenAI-compatible answerer against tests/fake_openai.py, whose
every reply takes ``--model-delay-s`` (2 s) and quotes a passage it was shown word for word.

Measured per mention: mention-to-answer (the fake sends the ``app_mention`` envelope -> the bot's
first message with a final text in that thread: its placeholder replaced, or a new message), how
many final replies it got (0: lost, 2+: answered twice) and what kind (an answer, a refusal, busy,
rate-limited). Over time: the bot process's RSS (``/proc/<pid>/status``) and the queue depth as
seen from outside (mentions sent and not yet answered; the bot does not expose its own queue).
Pytest runs only the checks of the pure helpers below; timings are never asserted.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.test_bot_bench import _commit, percentile

ROOT = Path(__file__).resolve().parent.parent
OUT_JSON = ROOT / "results" / "speed" / "mentions_load.json"
OUT_MD = ROOT / "results" / "speed" / "mentions_load.md"
PLACEHOLDER = "Looking through"  # the bot's "Looking through the handbooks…" message (bot.render)
BURST, BURST_WINDOW_S = 20, 1.0
RATE_PER_S, STEADY_S = 2.0, 300.0
USERS = 40  # steady-state askers, round robin: 3 questions a minute each, under the per-person limit
CHANNELS = 4
FINDINGS = "## Findings"  # the .md's hand-written part from this heading on is kept when a run rewrites the table
GRACE_S = 6.0  # after the last reply: a second reply to anything would show up by then


# ------------------------------------------------------------------------------------ pure helpers
@dataclass(frozen=True)
class Delivery:
    """A final reply in a thread: when the fake Slack received it, and its text (for its kind)."""

    at: float
    text: str


@dataclass
class Tally:
    """Per-mention outcome: the latency of the first final reply, and which got none or several."""

    latency_s: dict[tuple[str, str], float] = field(default_factory=dict)
    lost: list[tuple[str, str]] = field(default_factory=list)
    doubled: list[tuple[str, str]] = field(default_factory=list)
    first_text: dict[tuple[str, str], str] = field(default_factory=dict)


def deliveries(calls: Iterable[tuple[str, dict[str, Any], float, int]],
               placeholder_thread: dict[tuple[str, str], str]) -> dict[tuple[str, str], list[Delivery]]:
    """The final replies of each thread (channel, thread ts), from the Web API calls the fake received
    (method, params, time, HTTP status): a ``chat.update`` of a bot placeholder (``placeholder_thread``:
    (channel, placeholder ts) -> thread ts) to a text that is not the placeholder's, or a
    ``chat.postMessage`` into a thread with such a text. Calls that failed (not 200) do not count."""
    out: dict[tuple[str, str], list[Delivery]] = {}
    for method, params, at, status in calls:
        text = str(params.get("text", ""))
        if status != 200 or text.startswith(PLACEHOLDER):
            continue
        channel = str(params.get("channel", ""))
        if method == "chat.update":
            thread = placeholder_thread.get((channel, str(params.get("ts", ""))))
        elif method == "chat.postMessage":
            thread = str(params["thread_ts"]) if params.get("thread_ts") else None
        else:
            continue
        if thread is not None:
            body = text + (" " + json.dumps(params["blocks"]) if params.get("blocks") else "")
            out.setdefault((channel, thread), []).append(Delivery(at, body))
    return out


def tally(sent: dict[tuple[str, str], float], delivered: dict[tuple[str, str], list[Delivery]]) -> Tally:
    """Match each mention sent (thread key -> when) with its final replies."""
    result = Tally()
    for key, at in sent.items():
        got = sorted(delivered.get(key, []), key=lambda d: d.at)
        if not got:
            result.lost.append(key)
            continue
        if len(got) > 1:
            result.doubled.append(key)
        result.latency_s[key] = max(0.0, got[0].at - at)
        result.first_text[key] = got[0].text
    return result


def depth_over_time(sent: Sequence[float], answered: Sequence[float], start: float, end: float,
                    step_s: float) -> list[tuple[float, int]]:
    """Mentions sent and not yet answered, the most at any moment of each ``step_s`` from ``start``:
    [(seconds since start at the step's beginning, depth)]."""
    events = sorted([(t, 1) for t in sent] + [(t, -1) for t in answered], key=lambda e: (e[0], e[1]))
    out: list[tuple[float, int]] = []
    depth, i = 0, 0
    t = start
    while t < end:
        worst = depth
        while i < len(events) and events[i][0] < t + step_s:
            depth += events[i][1]
            worst = max(worst, depth)
            i += 1
        out.append((round(t - start, 3), worst))
        t += step_s
    return out


def window_mean(samples: Sequence[tuple[float, float]], lo: float, hi: float) -> float | None:
    """The mean of the samples (time, value) with lo <= time < hi; None when there are none."""
    values = [v for t, v in samples if lo <= t < hi]
    return sum(values) / len(values) if values else None


def summary(values: Sequence[float]) -> dict[str, float | int]:
    if not values:
        return {"n": 0}
    return {"n": len(values), "p50": round(percentile(list(values), 50), 3),
            "p95": round(percentile(list(values), 95), 3), "max": round(max(values), 3)}


STAGES = ("search.total", "answer", "repair", "verify", "load_pages")


def stage_summary(timings: Sequence[dict[str, float]], waits_s: Sequence[float]) -> dict[str, Any]:
    """Where a mention's time went: the pipeline's own stages (``timings_ms`` of each recorded turn,
    ms) and the rest of mention-to-answer (``waits_s``: queueing for a worker, Slack calls), each p50/p95."""
    out: dict[str, Any] = {}
    for stage in STAGES:
        values = [t[stage] / 1000 for t in timings if stage in t]
        if values:
            out[stage + "_s"] = summary(values)
    out["outside_pipeline_s"] = summary(list(waits_s))
    return out


def kind_of(text: str) -> str:
    from bot.answer import DB_DOWN  # noqa: PLC0415
    from bot.app import BUSY, RATE_LIMITED  # noqa: PLC0415

    if BUSY[:40] in text:
        return "busy"
    if RATE_LIMITED[:30] in text:
        return "rate limited"
    if DB_DOWN[:40] in text:
        return "database unavailable"
    if "rich_text_quote" in text:
        return "answered"
    if "could not find a supported answer" in text or text.startswith("No supported answer"):
        return "refused"
    return "other"


def test_deliveries_count_final_replies_not_placeholders() -> None:
    calls = [("chat.postMessage", {"channel": "C1", "thread_ts": "1.1", "text": PLACEHOLDER + " the handbooks…"}, 1.0, 200),
             ("chat.update", {"channel": "C1", "ts": "9.1", "text": "250 knots"}, 2.0, 200),
             ("chat.update", {"channel": "C1", "ts": "9.2", "text": "failed"}, 2.5, 500),  # not delivered
             ("chat.update", {"channel": "C1", "ts": "9.3", "text": "again"}, 3.0, 200),
             ("chat.postMessage", {"channel": "C2", "thread_ts": "2.2", "text": "posted anew"}, 4.0, 200),
             ("reactions.add", {"channel": "C2", "timestamp": "2.2"}, 4.5, 200)]
    got = deliveries(calls, {("C1", "9.1"): "1.1", ("C1", "9.2"): "1.1", ("C1", "9.3"): "1.1"})
    assert {k: [d.at for d in v] for k, v in got.items()} == {("C1", "1.1"): [2.0, 3.0], ("C2", "2.2"): [4.0]}


def test_tally_finds_lost_and_doubled_mentions() -> None:
    sent = {("C", "1"): 10.0, ("C", "2"): 11.0, ("C", "3"): 12.0}
    got = {("C", "1"): [Delivery(12.5, "b"), Delivery(10.5, "a")], ("C", "3"): [Delivery(12.25, "c")]}
    t = tally(sent, got)
    assert t.lost == [("C", "2")] and t.doubled == [("C", "1")]
    assert t.latency_s == {("C", "1"): 0.5, ("C", "3"): 0.25} and t.first_text[("C", "1")] == "a"


def test_depth_over_time_counts_what_waits() -> None:
    sent, answered = [0.0, 0.1, 0.2, 1.5], [0.9, 1.2, 2.5, 2.6]
    assert depth_over_time(sent, answered, 0.0, 3.0, 1.0) == [(0.0, 3), (1.0, 2), (2.0, 2)]
    # a reply at the same instant as the next mention: the reply counts first
    assert depth_over_time([0.0, 1.0], [1.0, 1.5], 0.0, 2.0, 1.0) == [(0.0, 1), (1.0, 1)]


def test_stage_summary_splits_pipeline_and_waiting() -> None:
    got = stage_summary([{"answer": 2000.0, "search.total": 100.0}, {"answer": 4000.0, "search.total": 300.0}],
                        [0.5, 1.5])
    assert got["answer_s"]["max"] == 4.0 and got["search.total_s"]["p50"] == 0.1
    assert got["outside_pipeline_s"]["p95"] == 1.5 and "repair_s" not in got


def test_window_mean_and_summary() -> None:
    samples = [(0.0, 100.0), (30.0, 110.0), (250.0, 120.0), (290.0, 130.0)]
    assert window_mean(samples, 0, 60) == 105.0 and window_mean(samples, 240, 300) == 125.0
    assert window_mean(samples, 60, 240) is None
    s = summary([float(v) for v in range(1, 21)])
    assert (s["n"], s["p50"], s["p95"], s["max"]) == (20, 10.0, 19.0, 20.0)
    assert summary([]) == {"n": 0}


# ------------------------------------------------------------------------------------ the run
def rss_kb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return float(line.split()[1])
    except OSError:
        return None
    return None


def cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of the process so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Sampler:
    """Samples the bot's RSS and CPU time every ``every_s`` on a thread: [(monotonic time, value)]."""

    def __init__(self, pid: int, every_s: float = 1.0) -> None:
        self.pid, self.every_s = pid, every_s
        self.rss: list[tuple[float, float]] = []
        self.cpu: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            if (kb := rss_kb(self.pid)) is not None:
                self.rss.append((now, kb))
            if (c := cpu_s(self.pid)) is not None:
                self.cpu.append((now, c))
            self._stop.wait(self.every_s)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def questions() -> list[str]:
    from tests.conftest import DEV_QUESTIONS  # noqa: PLC0415

    return [q["question"] for q in json.loads(DEV_QUESTIONS.read_text())]


def quoting_reply(delay_s: float) -> Any:
    """A reply of the fake model server: after ``delay_s``, an answer quoting twelve words of the first
    passage shown (copied from the request, so it verifies)."""
    from tests import fake_openai as fo  # noqa: PLC0415

    def reply(rec: Any) -> Any:
        for p in shown_passages(rec.prompt):
            words = p["text"].split()
            if len(words) >= 14:
                cite = {"id": p["id"], "document": p["document"], "page": p["page"], "quote": " ".join(words[1:13])}
                return fo.Reply(200, fo.answer_body("The manual says so in the quoted passage.", [cite]),
                                delay_s=delay_s)
        return fo.Reply(200, fo.answer_body("", [], answerable=False, reason="nothing to quote"), delay_s=delay_s)

    return reply


def shown_passages(prompt: str) -> list[dict[str, Any]]:
    """The passages a model request shows (its "PASSAGES (data, JSON):" section)."""
    start = prompt.index("PASSAGES (data, JSON):\n") + len("PASSAGES (data, JSON):\n")
    return json.loads(prompt[start:prompt.index("\n\nQUESTION", start)])


def prepare_home() -> tuple[Any, str]:
    """Settings and database URL of the test home, the dev collection ingested (a no-op if it is)."""
    from ingest.pipeline import ingest_source  # noqa: PLC0415
    from ingest.sources import read_path  # noqa: PLC0415
    from retrieval.encode.embed import get_embedder  # noqa: PLC0415
    from retrieval.settings import Settings  # noqa: PLC0415
    from retrieval.store import db  # noqa: PLC0415
    from tests.conftest import DEV_PDFS  # noqa: PLC0415

    home = Path(os.environ.get("CHAPTERVERSE_TEST_HOME") or tempfile.mkdtemp(prefix="cv-load-", dir="/tmp"))
    home.mkdir(parents=True, exist_ok=True)
    home.chmod(0o755)
    url = os.environ.get("DATABASE_URL") or db.conninfo(Settings(home=home))
    settings = Settings(home=home, db={"url": url})
    db.ready(settings)
    for pdf in DEV_PDFS:
        ingest_source(settings, get_embedder(settings.search.embedding_model), read_path(str(pdf), 200_000_000), "dev",
                      quiet=True)
    return settings, url


def drive(fake: Any, steady_s: float, log_every_s: float = 30.0,
          depth_now: Any = None) -> tuple[dict[tuple[str, str], float], float, float]:
    """Send the burst, then the steady stream; (thread key -> when its mention was sent, start, end of sending)."""
    asked = questions()
    sent_env: dict[tuple[str, str], str] = {}
    t0 = time.monotonic()
    n = 0

    def send(at: float, user: str) -> None:
        nonlocal n
        time.sleep(max(0.0, at - time.monotonic()))
        channel = f"C0LOAD{n % CHANNELS}"
        ts, envelopes = fake.mention(channel, user, asked[n % len(asked)])
        sent_env[(channel, ts)] = envelopes[-1]  # the app_mention envelope
        n += 1

    for i in range(BURST):
        send(t0 + i * BURST_WINDOW_S / BURST * 0.9, f"U0BURST{i:02d}")
    start = t0 + BURST_WINDOW_S
    last_log = time.monotonic()
    for j in range(int(steady_s * RATE_PER_S)):
        send(start + j / RATE_PER_S, f"U0LOAD{j % USERS:02d}")
        if depth_now is not None and time.monotonic() - last_log >= log_every_s:
            last_log = time.monotonic()
            print(f"  {time.monotonic() - t0:5.0f} s: {n} sent, {depth_now()}", flush=True)
    end = time.monotonic()
    with fake._lock:
        sent = {key: fake.sent_at[env] for key, env in sent_env.items()}
    return sent, t0, end


def snapshot(fake: Any) -> tuple[list[tuple[str, dict[str, Any], float, int]], dict[tuple[str, str], str]]:
    """The fake's Web API calls and its map of bot message (channel, ts) -> thread ts."""
    with fake._lock:
        calls = [(c.method, c.params, c.at, c.status) for c in fake.calls]
        threads = {(ch, m["ts"]): str(m["thread_ts"]) for ch, msgs in fake.messages.items() for m in msgs
                   if m.get("user") == fake.bot_user_id and m.get("thread_ts")}
    return calls, threads


def run(answerer: str, steady_s: float, model_delay_s: float, extra_env: dict[str, str]) -> dict[str, Any]:
    from tests.fake_openai import running  # noqa: PLC0415
    from tests.fake_slack import FakeSlack, wait_for  # noqa: PLC0415
    from bot.main import answer_workers  # noqa: PLC0415
    from tests.test_bot_support import BotProcess  # noqa: PLC0415

    settings, url = prepare_home()
    bot_settings = settings.but(answer={"answerer": "openai" if answerer == "model" else "extractive"})
    os.environ.pop("CHAPTERVERSE_RERANKER", None)  # tests/conftest.py's stand-in: the bot runs its default
    env = {"DATABASE_URL": url, "CHAPTERVERSE_SLACK_WORKSPACE_COLLECTION": "dev", **extra_env}
    load = {"start": open("/proc/loadavg").read().split()[:3]}
    with running() as model:
        model.script(quoting_reply(model_delay_s))
        if answerer == "model":
            env.update({"CHAPTERVERSE_ANSWERER": "openai", "CHAPTERVERSE_OPENAI_BASE_URL": model.base_url,
                        "CHAPTERVERSE_OPENAI_API_KEY": model.api_key, "CHAPTERVERSE_OPENAI_MODEL": "fake-replay-2s"})
        fake = FakeSlack().start()
        bot = BotProcess(fake, env, Path(settings.home) / f"load-bot-{answerer}.log").start()
        assert bot.proc is not None
        sampler = Sampler(bot.proc.pid).start()
        try:
            # one question first, so the first measured one does not pay for the first search
            ts, _ = fake.mention("C0WARM", "U0WARM", questions()[0])
            wait_for(lambda: deliveries(*snapshot(fake)).get(("C0WARM", ts)), 120, "the warm-up reply")
            model_calls_before = len(model.requests)

            def depth_now() -> str:
                calls, threads = snapshot(fake)
                done = deliveries(calls, threads)
                with fake._lock:
                    asked = [(f"C0LOAD{ch}", m["ts"]) for ch in range(CHANNELS) for m in fake.messages.get(f"C0LOAD{ch}", [])
                             if m.get("user") != fake.bot_user_id]
                waiting = sum(1 for key in asked if key not in done)
                rss = sampler.rss[-1][1] / 1024 if sampler.rss else 0
                return f"{waiting} waiting for a reply, bot RSS {rss:.0f} MB"

            sent, t0, sending_end = drive(fake, steady_s, depth_now=depth_now)
            wait_for(lambda: len(deliveries(*snapshot(fake)).keys() & sent.keys()) == len(sent), 180,
                     "a reply to every mention", interval=0.5)
            time.sleep(GRACE_S)
        finally:
            sampler.stop()
            log_tail = bot.log()
            bot.stop()
            fake.stop()
        model_calls = len(model.requests) - model_calls_before
    load["end"] = open("/proc/loadavg").read().split()[:3]

    calls, threads = snapshot(fake)
    t = tally(sent, deliveries(calls, threads))
    stages = pipeline_stages(settings, sent, t.latency_s)
    burst_keys = sorted(sent, key=lambda k: sent[k])[:BURST]
    # sent_at and call times are wall-clock (time.time()); the sampler's are monotonic: align on t0
    wall0 = min(sent.values())
    answered_at = [sent[k] + lat for k, lat in t.latency_s.items()]
    depth = depth_over_time(list(sent.values()), answered_at, wall0, max(answered_at, default=wall0) + 1, 5.0)
    rss = [(at - t0, kb / 1024) for at, kb in sampler.rss]
    cpu = [(at - t0, c) for at, c in sampler.cpu]
    run_s = sending_end - t0
    kinds: dict[str, int] = {}
    for text in t.first_text.values():
        kinds[kind_of(text)] = kinds.get(kind_of(text), 0) + 1
    lat = t.latency_s
    steady = [lat[k] for k in sent if k in lat and k not in burst_keys]
    cpu_used = (cpu[-1][1] - cpu[0][1]) if len(cpu) > 1 else None
    return {
        "answerer": answerer if answerer == "extractive" else f"openai-compatible fake (tests/fake_openai.py), "
                                                              f"{model_delay_s:g} s per call",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "commit": _commit(),
        "config": {"burst": BURST, "burst_window_s": BURST_WINDOW_S, "rate_per_s": RATE_PER_S, "steady_s": steady_s,
                   "users": USERS, "channels": CHANNELS, "extra_env": extra_env,
                   "slack_workers": int(extra_env.get("CHAPTERVERSE_SLACK_WORKERS", answer_workers(bot_settings))),
                   "answer_backlog": int(extra_env.get("CHAPTERVERSE_SLACK_ANSWER_BACKLOG", settings.slack.answer_backlog)),
                   "model_concurrency": int(extra_env.get("CHAPTERVERSE_MODEL_CONCURRENCY",
                                                          settings.answer.model_concurrency)),
                   "cpus": os.cpu_count(), "python": platform.python_version()},
        "load_average": load,
        "mentions": len(sent), "lost": len(t.lost), "answered_twice": len(t.doubled),
        "reply_kinds": kinds,
        "model_calls": model_calls if answerer == "model" else 0,
        "mention_to_answer_s": {"all": summary(list(lat.values())),
                                "burst": summary([lat[k] for k in burst_keys if k in lat]),
                                "steady": summary(steady)},
        "queue_depth": {"what": "mentions sent and not yet answered (seen from the fake Slack; the bot does "
                                "not expose its own queue), the most in each 5 s",
                        "max": max((d for _, d in depth), default=0), "every_5s": [d for _, d in depth]},
        "rss_mb": {"first_minute_mean": _r(window_mean(rss, 0, 60)),
                   "last_minute_mean": _r(window_mean(rss, run_s - 60, run_s)),
                   "max": _r(max((v for _, v in rss), default=None)),
                   "every_10s": [round(v, 1) for _, v in rss[::10]]},
        "where_the_time_went": stages,
        "bot_cpu_s": _r(cpu_used), "sending_s": round(run_s, 1),
        "lost_keys": t.lost[:10], "doubled_keys": t.doubled[:10],
        "bot_log_warnings": [line for line in log_tail.splitlines() if " WARNING " in line or " ERROR " in line][:20],
    }


def pipeline_stages(settings: Any, sent: dict[tuple[str, str], float],
                    latency_s: dict[tuple[str, str], float]) -> dict[str, Any]:
    """The recorded turns of these mentions (bot_turns: their pipeline timings, and when each was
    recorded, just after its reply went out): stage_summary of the pipeline vs the rest."""
    import psycopg  # noqa: PLC0415
    from psycopg.rows import dict_row  # noqa: PLC0415

    with psycopg.connect(settings.db.url.get_secret_value(), row_factory=dict_row) as conn:
        rows = conn.execute("SELECT channel, message_ts, result->'timings_ms' AS t FROM bot_turns "
                            "WHERE channel LIKE 'C0LOAD%%' AND message_ts = ANY(%s)",
                            ([ts for _, ts in sent],)).fetchall()
    timed = {(r["channel"], r["message_ts"]): r["t"] or {} for r in rows if (r["channel"], r["message_ts"]) in sent}
    waits = [latency_s[k] - sum(v for stage, v in t.items() if "." not in stage) / 1000
             for k, t in timed.items() if k in latency_s]
    beyond = [latency_s[k] - (t.get("answer", 0.0) + t.get("repair", 0.0)) / 1000 for k, t in timed.items()
              if k in latency_s]
    return {"turns": len(timed), "what": "pipeline stages from each turn's timings_ms; outside_pipeline = "
            "mention-to-answer minus the pipeline's top-level stages (waiting for a worker, claim, Slack calls); "
            "beyond_answer_stages = mention-to-answer minus the answer and repair stages (with a model: minus "
            "the model calls' own time)",
            **stage_summary(list(timed.values()), waits), "beyond_answer_stages_s": summary(beyond)}


def _r(v: float | None) -> float | None:
    return round(v, 1) if v is not None else None


def markdown(runs: dict[str, Any]) -> str:
    lines = ["# Twenty mentions at once, then 2 a second (issue 40, item 3)", "",
             "Written by `python -m tests.test_mention_load` (see its docstring); figures in mentions_load.json.",
             "Real bot process and Bolt client against the fake Slack on 127.0.0.1; dev collection (3 FAA PDFs).",
             "Queue depth = mentions sent and not yet answered, seen from the fake Slack.", "",
             "| run | mentions | lost | twice | kinds | p50 s | p95 s | max s | burst p95 s | steady p95 s "
             "| depth max | RSS 1st min → last min MB | load avg start → end |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in runs.items():
        m = r["mention_to_answer_s"]
        lines.append(
            f"| {name} | {r['mentions']} | {r['lost']} | {r['answered_twice']} | "
            f"{', '.join(f'{k} {v}' for k, v in sorted(r['reply_kinds'].items()))} | {m['all'].get('p50')} | "
            f"{m['all'].get('p95')} | {m['all'].get('max')} | {m['burst'].get('p95')} | {m['steady'].get('p95')} | "
            f"{r['queue_depth']['max']} | {r['rss_mb']['first_minute_mean']} → {r['rss_mb']['last_minute_mean']} | "
            f"{' '.join(r['load_average']['start'])} → {' '.join(r['load_average']['end'])} |")
    lines += ["", "Commands and configuration of each run are in the JSON (`command`, `config`, `commit`, `date`).", ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.test_mention_load")
    parser.add_argument("--answerer", choices=("extractive", "model"), required=True)
    parser.add_argument("--steady-s", type=float, default=STEADY_S)
    parser.add_argument("--model-delay-s", type=float, default=2.0)
    parser.add_argument("--name", help="key of this run in the JSON (default: the answerer)")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="extra bot environment")
    args = parser.parse_args(argv)
    extra = dict(e.split("=", 1) for e in args.env)
    result = run(args.answerer, args.steady_s, args.model_delay_s, extra)
    result["command"] = "flock /tmp/chapterverse-bench.lock python -m tests.test_mention_load " + " ".join(
        argv if argv is not None else sys.argv[1:])
    runs = json.loads(OUT_JSON.read_text()) if OUT_JSON.exists() else {}
    runs[args.name or args.answerer] = result
    OUT_JSON.parent.mkdir(parents=True, exist_ok=True)
    OUT_JSON.write_text(json.dumps(runs, indent=2) + "\n")
    kept = OUT_MD.read_text().partition(FINDINGS)[1:] if OUT_MD.exists() else ("", "")
    OUT_MD.write_text(markdown(runs) + "".join(kept))
    shown = {k: v for k, v in result.items() if k not in ("queue_depth", "rss_mb")}
    print(json.dumps(shown, indent=2))
    print("queue depth every 5 s:", result["queue_depth"]["every_5s"])
    print("RSS MB every 10 s:", result["rss_mb"]["every_10s"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
