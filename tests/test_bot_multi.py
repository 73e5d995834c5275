"""Multi-workspace mode: one bot process serves several workspaces, each with its own bot token (from
the Postgres installation store) and its own collection (`slack-<team id>`).

Real bot subprocess, real Bolt OAuth flow and install pages, fake Slack on 127.0.0.1.
"""

from __future__ import annotations

import re
import socket
import time
import uuid
from collections.abc import Iterator

import httpx
import psycopg
import pytest
from cryptography.fernet import Fernet
from slack_sdk.oauth.installation_store import Installation

from bot.installations import PostgresInstallationStore
from bot.store import Store
from ingest.sources import Source
from tests.fake_slack import FakeSlack
from tests.leaks import database_hits
from tests.test_bot_e2e import handbook_pdf, text_of
from tests.test_bot_support import BotProcess, wait_reply

QUESTION = "What is the maximum winch launch speed of the Zephyr glider?"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def teams(settings, embedder) -> Iterator[dict[str, dict[str, str]]]:
    """Two installed workspaces, each with a handbook in its own collection saying something different."""
    from ingest.pipeline import ingest_source  # noqa: PLC0415

    tag = uuid.uuid4().hex[:6].upper()
    out = {f"T0A{tag}": {"token": f"xoxb-alpha-{tag}", "speed": "67 knots"},
           f"T0B{tag}": {"token": f"xoxb-beta-{tag}", "speed": "58 knots"}}
    store = PostgresInstallationStore(Store(settings))
    for team, info in out.items():
        store.save(Installation(app_id="A0FAKE", team_id=team, team_name=team, bot_token=info["token"],
                                bot_id="B0BOT", bot_user_id="U0BOT", bot_scopes="chat:write", user_id="U0INSTALLER"))
        pdf = handbook_pdf(f"The maximum winch launch speed of the Zephyr glider is {info['speed']}.")
        ingest_source(settings, embedder, Source(f"zephyr-{team}.pdf", "test", pdf, None), f"slack-{team}", quiet=True)
    yield out
    with psycopg.connect(settings.db.url.get_secret_value(), autocommit=True) as conn:
        for team in out:
            conn.execute("DELETE FROM documents WHERE collection = %s", (f"slack-{team}",))
            conn.execute("DELETE FROM slack_installations WHERE workspace = %s", (team,))


def test_installation_store_finds_each_workspaces_bot_and_forgets_on_uninstall(settings) -> None:
    store = PostgresInstallationStore(Store(settings))
    team = f"T0S{uuid.uuid4().hex[:6].upper()}"
    store.save(Installation(team_id=team, bot_token="xoxb-old", bot_id="B1", bot_user_id="U1", user_id="U0FIRST",
                            installed_at=1_700_000_000.0))
    store.save(Installation(team_id=team, bot_token="xoxb-new", bot_id="B1", bot_user_id="U1", user_id="U0SECOND",
                            installed_at=1_700_000_100.0))
    bot = store.find_bot(enterprise_id=None, team_id=team)
    assert bot is not None and bot.bot_token == "xoxb-new"  # the latest installation's bot
    first = store.find_installation(enterprise_id=None, team_id=team, user_id="U0FIRST")
    assert first is not None and first.user_id == "U0FIRST" and first.bot_token == "xoxb-new"
    assert store.find_bot(enterprise_id=None, team_id="T0NOBODY") is None
    store.delete_bot(enterprise_id=None, team_id=team)
    assert store.find_bot(enterprise_id=None, team_id=team) is None
    store.delete_all(enterprise_id=None, team_id=team)
    assert store.find_installation(enterprise_id=None, team_id=team) is None


def test_each_workspace_is_answered_with_its_token_from_its_collection_and_new_installs_work(
        settings, teams: dict[str, dict[str, str]], tmp_path) -> None:
    fake = FakeSlack().start()
    for team, info in teams.items():
        fake.add_team(team, info["token"])
    port = free_port()
    env = {"DATABASE_URL": settings.db.url.get_secret_value(), "SLACK_BOT_TOKEN": "",
           "SLACK_CLIENT_ID": "1234.5678", "SLACK_CLIENT_SECRET": "fake-client-secret",
           "CHAPTERVERSE_SLACK_OAUTH_PORT": str(port), "CHAPTERVERSE_SLACK_PING_INTERVAL_S": "1",
           # the teams' installations were stored in plain text (before a key was set): the bot
           # encrypts them at start, and the new install is stored encrypted
           "CHAPTERVERSE_SECRET_KEY": Fernet.generate_key().decode()}
    gamma, gamma_token = f"T0G{uuid.uuid4().hex[:6].upper()}", f"xoxb-gamma-{uuid.uuid4().hex[:6]}"
    bot = BotProcess(fake, env, tmp_path / "bot.log").start()
    try:
        for team, info in teams.items():
            channel = f"C{uuid.uuid4().hex[:8].upper()}"
            ts, _ = fake.post_user_message(channel, "U0ASKER", f"<@U0BOT> {QUESTION}", team=team)
            text = text_of(wait_reply(fake, channel, ts))
            others = [i["speed"] for t, i in teams.items() if t != team]
            assert info["speed"] in text and not any(o in text for o in others), text
            writes = [c for c in fake.calls if c.method in ("chat.postMessage", "chat.update")
                      and c.params.get("channel") == channel]
            assert writes and {c.team for c in writes} == {team}, [(c.method, c.team) for c in writes]

        # a third workspace installs the app through the install pages; its questions are then answered
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", trust_env=False) as web:
            page = web.get("/slack/install")
            assert page.status_code == 200 and "client_id=1234.5678" in page.text, page.text[:300]
            state = re.search(r"state=([\w-]+)", page.text).group(1)  # type: ignore[union-attr]
            # the state cookie is marked Secure (the real pages sit behind https): send it as a browser would
            cookie = page.headers["set-cookie"].split(";", 1)[0]
            done = web.get("/slack/oauth_redirect", params={"code": fake.install_code(gamma, gamma_token),
                                                           "state": state}, headers={"Cookie": cookie})
            assert done.status_code == 200, done.text[:300]
        with psycopg.connect(settings.db.url.get_secret_value()) as conn:
            row = conn.execute("SELECT installation->>'bot_token' FROM slack_installations WHERE workspace = %s",
                               (gamma,)).fetchone()
        assert row is not None and row[0].startswith("fernet:"), row
        for token in [gamma_token, *(i["token"] for i in teams.values())]:
            assert database_hits(settings.db.url.get_secret_value(), token) == [], token
        channel = f"C{uuid.uuid4().hex[:8].upper()}"
        ts, _ = fake.post_user_message(channel, "U0ASKER", f"<@U0BOT> {QUESTION}", team=gamma)
        text = text_of(wait_reply(fake, channel, ts))
        assert f"slack-{gamma}" in text  # its own (empty) collection: a refusal naming what was searched
        assert not any(i["speed"] in text for i in teams.values())
        assert {c.team for c in fake.calls if c.params.get("channel") == channel} == {gamma}

        # a workspace that never installed the app gets nothing (no token to answer with)
        stranger = f"C{uuid.uuid4().hex[:8].upper()}"
        fake.post_user_message(stranger, "U0ASKER", f"<@U0BOT> {QUESTION}", team="T0STRANGER")
        time.sleep(3)
        assert not fake.bot_messages(stranger)
    finally:
        assert bot.stop() == 0, bot.log()
        fake.stop()
        with psycopg.connect(settings.db.url.get_secret_value(), autocommit=True) as conn:
            conn.execute("DELETE FROM slack_installations WHERE workspace = %s", (gamma,))
