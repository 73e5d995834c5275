"""Trust, end to end with the real bot process and the fake Slack: with no allow list configured (the
default), a member cannot add or remove documents (slash command or shared PDF), a workspace admin
can, and every change is recorded with who did it; a signed URL's secret ingested by the admin shows
up in no table, no log line and no Slack payload, and the answer's links carry no query."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from tests.fake_slack import FakeSlack, wait_for
from tests.fake_slack import fake  # noqa: F401  (the module's fake Slack: a pytest fixture)
from tests.leaks import database_hits, text_of
from tests.test_bot_e2e import ACK_LIMIT_S, db_rows, handbook_pdf, quote_links
from tests.test_bot_e2e import text_of as blocks_text
from tests.test_bot_support import BotProcess, wait_reply

MEMBER, WS_ADMIN, OWNER = "U0MEMBER", "U0WSADMIN", "U0OWNER"  # the fake's users.info roles


@pytest.fixture(scope="module")
def coll() -> str:
    return f"trust-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def bot(fake: FakeSlack, settings, coll: str, tmp_path_factory) -> Iterator[BotProcess]:
    env = {"DATABASE_URL": settings.db.url.get_secret_value(),
           "CHAPTERVERSE_SLACK_WORKSPACE_COLLECTION": coll,
           "CHAPTERVERSE_SLACK_PING_INTERVAL_S": "1",
           "CHAPTERVERSE_SLACK_ALLOW_PRIVATE_URLS": "1"}  # the fake serves the PDF on 127.0.0.1
    proc = BotProcess(fake, env, tmp_path_factory.mktemp("trust-bot") / "bot.log").start()
    yield proc
    if proc.proc and proc.proc.poll() is None:
        proc.stop()
    with psycopg.connect(settings.db.url.get_secret_value(), autocommit=True) as conn:
        conn.execute("DELETE FROM documents WHERE collection = %s", (coll,))


def channel() -> str:
    return f"C{uuid.uuid4().hex[:8].upper()}"


def ephemerals(fake: FakeSlack, user: str, ch: str) -> list[str]:
    return [e["text"] for e in fake.ephemerals if e["user"] == user and e["channel"] == ch]


def test_members_are_refused_admins_allowed_and_changes_recorded_and_the_secret_appears_nowhere(
        fake: FakeSlack, bot: BotProcess, settings, coll: str) -> None:
    ch = channel()
    tag = uuid.uuid4().hex[:8]
    secret = f"secret{tag}"
    name = f"signed-{tag}.pdf"
    url = (fake.serve(name, handbook_pdf("The maximum aerotow speed of the Zephyr glider is 81 knots."))
           + f"?X-Amz-Credential=AKIA{tag}&X-Amz-Signature={secret}")
    plain = url.split("?", 1)[0]

    # a plain member: refused everything that changes documents, with a clear message, nothing queued
    for text in (f"ingest <{url}>", "remove 14-CFR-Part-91_General-Operating-and-Flight-Rules.pdf"):
        ack = fake.wait_ack(fake.slash(text, user=MEMBER, channel=ch), ACK_LIMIT_S + 2)
        said = ack.payload["text"]
        assert "only this workspace's admins and owners can add or remove documents" in said, said
        assert "you can still ask me anything" in said
    fid = fake.add_file(f"member-{tag}.pdf", handbook_pdf("Nothing."), user=MEMBER)
    fake.mention(ch, MEMBER, "please add this", files=[fid])
    wait_for(lambda: any("admins and owners" in t for t in ephemerals(fake, MEMBER, ch)), 30, "the refusal")
    assert fake.files[fid].downloads == []
    assert fake.static_requests.count(name) == 0
    assert not db_rows(settings, "SELECT 1 FROM bot_jobs WHERE requested_by = %s", MEMBER)

    # a workspace admin (users.info: is_admin): the job is a row in Postgres before the acknowledgement
    env = fake.slash(f"ingest <{url}>", user=WS_ADMIN, channel=ch)
    ack = fake.wait_ack(env, ACK_LIMIT_S + 2)
    assert ack.at - fake.sent_at[env] < ACK_LIMIT_S
    said = ack.payload["text"]
    assert "Ingesting" in said and f"`{coll}`" in said and plain in said, said
    job_id = int(re.search(r"job #(\d+)", said).group(1))  # type: ignore[union-attr]
    job = db_rows(settings, "SELECT requested_by, source FROM bot_jobs WHERE workspace = %s AND id = %s",
                  fake.team_id, job_id)
    assert job and job[0]["requested_by"] == WS_ADMIN and job[0]["source"] == plain
    done = wait_for(lambda: [t for t in ephemerals(fake, WS_ADMIN, ch) if "ingested" in t or "failed" in t],
                    240, "the ingest result")
    assert f"`{name}` ingested into `{coll}`" in done[0], done
    audit = db_rows(settings, "SELECT action, outcome, actor, via, workspace, at FROM document_audit "
                    "WHERE collection = %s AND document = %s ORDER BY id", coll, name)
    assert [(a["action"], a["outcome"], a["actor"], a["via"], a["workspace"]) for a in audit] == \
        [("ingest", "ingested", WS_ADMIN, "slack", fake.team_id)]

    # everyone may list (and sees who added it) and ask; the answer's links carry no query
    fake.wait_ack(fake.slash("list", user=MEMBER, channel=ch))
    listing = wait_for(lambda: [t for t in ephemerals(fake, MEMBER, ch) if name in t], 30, "the list")
    assert f"by <@{WS_ADMIN}>" in listing[0], listing
    ts, _ = fake.mention(ch, MEMBER, "What is the maximum aerotow speed of the Zephyr glider?")
    msgs = wait_reply(fake, ch, ts)
    assert "81 knots" in blocks_text(msgs)
    links = [link["url"] for link in quote_links(msgs)]
    assert links and all(u.startswith(f"{plain}#page=") for u in links), links

    # the secret: in no table, no log line, nothing the bot sent to Slack
    db_url = settings.db.url.get_secret_value()
    time.sleep(1.0)  # let the last Slack calls land
    assert database_hits(db_url, secret) == []
    assert database_hits(db_url, f"AKIA{tag}") == []
    sent = text_of([c.params for c in fake.calls], [a.payload for a in fake.acks.values()], fake.responses,
                   fake.ephemerals, fake.bot_messages(ch))
    assert plain in sent  # the scan looks at the right things
    assert secret not in sent and f"AKIA{tag}" not in sent
    assert secret not in bot.log() and "X-Amz" not in bot.log()

    # an owner removes it; the removal is recorded too
    rm = fake.slash(f"remove {name}", user=OWNER, channel=ch)
    assert "Removing" in fake.wait_ack(rm, ACK_LIMIT_S + 2).payload["text"]
    wait_for(lambda: any(f"Removed `{name}`" in t for t in ephemerals(fake, OWNER, ch)), 60, "the removal")
    audit = db_rows(settings, "SELECT action, actor FROM document_audit WHERE collection = %s AND document = %s "
                    "ORDER BY id", coll, name)
    assert [(a["action"], a["actor"]) for a in audit] == [("ingest", WS_ADMIN), ("remove", OWNER)]
    assert not db_rows(settings, "SELECT 1 FROM documents WHERE collection = %s AND name = %s", coll, name)
