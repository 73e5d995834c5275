"""Which unfinished jobs a starting bot marks failed (real database; no Slack)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import psycopg

from bot.store import Store, job_owner


def test_only_jobs_of_gone_processes_or_stale_jobs_are_failed(settings) -> None:
    ws = f"T{uuid.uuid4().hex[:8]}"
    host, me = job_owner()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    dead_pid = int(gone.stdout)
    cases = {  # source: (owner_host, owner_pid, age, failed?)
        "dead pid here": (host, dead_pid, "1 minute", True),
        "my pid here (a predecessor)": (host, me, "1 minute", True),
        "live pid here": (host, os.getppid(), "1 minute", False),
        "other host, recent": ("elsewhere/pid:[1]", dead_pid, "1 hour", False),
        "other host, stale": ("elsewhere/pid:[1]", 12345, "2 days", True),
        "no owner, recent": (None, None, "1 hour", False),
        "no owner, stale": (None, None, "25 hours", True),
    }
    url = settings.database_url.get_secret_value()
    with psycopg.connect(url) as conn:
        for source, (owner_host, pid, age, _) in cases.items():
            conn.execute("INSERT INTO bot_jobs (workspace, kind, requested_by, channel, collection, source, status, "
                         "owner_host, owner_pid, created_at) VALUES (%s, 'ingest', 'U1', 'C1', 'c', %s, 'running', "
                         "%s, %s, now() - %s::interval)", (ws, source, owner_host, pid, age))
    Store(settings).fail_interrupted_jobs()
    with psycopg.connect(url) as conn:
        status = dict(conn.execute("SELECT source, status FROM bot_jobs WHERE workspace = %s", (ws,)).fetchall())
        conn.execute("DELETE FROM bot_jobs WHERE workspace = %s", (ws,))
    assert status == {s: ("failed" if c[3] else "running") for s, c in cases.items()}


def test_new_jobs_record_their_process(settings) -> None:
    ws = f"T{uuid.uuid4().hex[:8]}"
    store = Store(settings)
    job_id = store.create_job(ws, "remove", "U1", "C1", "c", "x.pdf")
    with psycopg.connect(settings.database_url.get_secret_value()) as conn:
        row = conn.execute("SELECT owner_host, owner_pid FROM bot_jobs WHERE workspace = %s AND id = %s",
                           (ws, job_id)).fetchone()
        conn.execute("DELETE FROM bot_jobs WHERE workspace = %s", (ws,))
    assert row == job_owner()


def test_event_keys_dedup_and_old_keys_are_forgotten(settings) -> None:
    ws = f"T{uuid.uuid4().hex[:8]}"
    url = settings.database_url.get_secret_value()
    with psycopg.connect(url) as conn:
        conn.execute("INSERT INTO bot_events (workspace, event_key, received_at) VALUES "
                     "(%s, 'C1:old', now() - interval '2 days'), (%s, 'C1:recent', now() - interval '1 hour')",
                     (ws, ws))
    store = Store(settings)
    assert store.claim_event(ws, "C1:new")  # the first claim also prunes keys older than a day
    assert not store.claim_event(ws, "C1:new")  # a redelivery
    assert not store.claim_event(ws, "C1:recent")
    with psycopg.connect(url) as conn:
        keys = {r[0] for r in conn.execute("SELECT event_key FROM bot_events WHERE workspace = %s", (ws,))}
        conn.execute("DELETE FROM bot_events WHERE workspace = %s", (ws,))
    assert keys == {"C1:new", "C1:recent"}
