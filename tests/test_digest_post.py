"""The digest posted to a channel once a period (CHAPTERVERSE_SLACK_DIGEST_CHANNEL): real Postgres (a scratch
database), turns written by the bot's own store, the real slack_sdk client against the fake Slack."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.digest import DigestPoster, digest_channels
from bot.slack import make_client
from bot.store import Store
from retrieval.store import db, pool
from retrieval.models import Answer, NearestPassage
from retrieval.settings import Settings
from tests.bot_helpers import save_turn
from tests.conftest import scratch_database
from tests.fake_slack import (
    BOT_TOKEN,
    FakeSlack,
    fake,  # noqa: F401  (the module's fake Slack: a pytest fixture)
)

TEAM, CHANNEL = "T0FAKE", "C0DIGEST"


def test_digest_channels_per_workspace() -> None:
    assert digest_channels("C1", "T1") == ["C1"]
    assert digest_channels("T1:C1, T2:C2 C3", "T2") == ["C2", "C3"]
    assert digest_channels("", "T1") == []


def test_the_digest_is_posted_once_a_period_whatever_the_number_of_bots(pg_url, fake: FakeSlack) -> None:  # noqa: F811
    with scratch_database(pg_url, "cv_digestpost") as url:
        settings = Settings(db={"url": url}, slack={"api_url": fake.api_url, "digest_channel": CHANNEL})
        db.ready(settings)
        try:
            store = Store(settings)
            save_turn(store, TEAM, "C0GENERAL", "1764900001.000100", "1764900001.000100", "U0ASKER",
                      Answer(question="Where is the purple knob?", refusal=True,
                             reason="The documents do not support an answer to this question.",
                             nearest=[NearestPassage(document="ops.pdf", page=3, snippet="…")]),
                      ("slack-T0FAKE",))
            with db.connection(settings) as conn:
                conn.execute("INSERT INTO bot_workspaces (workspace, name, url) VALUES (%s, 'Fake', "
                             "'https://fake.slack.com/')", [TEAM])
            client = make_client(settings, BOT_TOKEN)
            first, second = DigestPoster(settings, lambda team: client), DigestPoster(settings, lambda team: client)
            now = datetime.now(UTC)

            def posts() -> list[dict]:
                return [c.params for c in fake.calls if c.method == "chat.postMessage" and c.params.get("channel") == CHANNEL]

            assert first.post_due(now) == [(TEAM, CHANNEL)]
            assert second.post_due(now) == []  # another bot process: already posted this period
            assert first.post_due(now + timedelta(days=1)) == []
            assert len(posts()) == 1
            text = str(posts()[0]["blocks"])
            assert "Where is the purple knob?" in text and "1 refused" in posts()[0]["text"]
            assert "https://fake.slack.com/archives/C0GENERAL/p1764900001000100" in text
            assert second.post_due(now + timedelta(days=7, minutes=1)) == [(TEAM, CHANNEL)]  # next week
            assert len(posts()) == 2 and "0 refused" in posts()[1]["text"]  # that question is a week old now
        finally:
            pool.close_all()
