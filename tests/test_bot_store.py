"""The bot's own state in Postgres (real database; no Slack). Jobs: tests/test_bot_queue.py."""

from __future__ import annotations

import uuid

import psycopg

from bot.store import Store


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
