"""A new user's first hour in Slack (issue 39, item 9): documents ingested as the README says are the
ones the bot answers from.

- One workspace (SLACK_BOT_TOKEN + SLACK_APP_TOKEN, Socket Mode): the real bot process against the fake
  Slack and its own database; its start line names the index (never the password) and warns that the
  collection is empty; a PDF ingested with the real `chapterverse ingest` (into `default`, no option)
  is then quoted in the answer to an @mention, and a `/chapterverse ingest <url>` lands in `default` too.
- An older one-workspace deployment whose documents are in `slack-<team id>` keeps that collection
  (``bot.startup.settle`` on a real database).
- Several workspaces (OAuth): each keeps its own `slack-<team id>`; workspace A's documents are not
  searched for workspace B. The whole OAuth bot process, answering each workspace from its own
  collection, is tests/test_bot_multi.py.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from bot.scope import scope_for, workspace_collection
from bot.startup import settle, start_line
from bot.store import Store
from retrieval.settings import Settings
from tests.conftest import run_cli, scratch_database
from tests.fake_slack import FakeSlack, wait_for
from tests.pdfgen import text_pdf
from tests.test_bot_e2e import text_of
from tests.test_bot_support import BotProcess, wait_reply

FACT = "The maximum winch launch speed of the Zephyr glider is 67 knots."
QUESTION = "What is the maximum winch launch speed of the Zephyr glider?"
PASSWORD = "hunter2-not-for-logs"
ADMIN = "U0ALICE"


def manual(path: Path, fact: str) -> Path:
    filler = ("Zephyr Glider Flight Manual. General description of the glider, its cockpit layout and the "
              "checklists a pilot follows before launch and after landing. ") * 3
    return text_pdf(path, [filler, f"Zephyr Glider Flight Manual, limitations. {fact} " + filler, filler])


@pytest.fixture
def fresh_db(pg_url: str) -> Iterator[str]:
    """An empty database of its own, its URL carrying a password (the test server does not ask for one)."""
    with scratch_database(pg_url, "cv_slack_first") as url:
        yield psycopg.conninfo.make_conninfo(url, password=PASSWORD)


def collections_of(url: str) -> dict[str, str]:
    with psycopg.connect(url) as conn:
        return {r[0]: r[1] for r in conn.execute("SELECT name, collection FROM documents").fetchall()}


def test_readme_order_ingest_then_bot_answers_in_slack_from_default(fresh_db: str, tmp_path: Path) -> None:
    # the README's first block: `chapterverse ingest` with no --collection
    res = run_cli("ingest", str(manual(tmp_path / "zephyr-manual.pdf", FACT)), env={"DATABASE_URL": fresh_db})
    assert res.returncode == 0, res.stderr
    assert collections_of(fresh_db) == {"zephyr-manual.pdf": "default"}

    # then the bot, one workspace (SLACK_BOT_TOKEN + SLACK_APP_TOKEN), no other setting about collections
    fake = FakeSlack().start()
    env = {"DATABASE_URL": fresh_db, "CHAPTERVERSE_SLACK_ADMINS": ADMIN, "CHAPTERVERSE_SLACK_ALLOW_PRIVATE_URLS": "1",
           "CHAPTERVERSE_SLACK_PING_INTERVAL_S": "1"}
    bot = BotProcess(fake, env, tmp_path / "bot.log").start(wait_models=False)
    try:
        start = bot.log()
        line = [ln for ln in start.splitlines() if "questions search the collection" in ln]
        assert len(line) == 1 and " INFO bot: " in line[0], start
        assert "questions search the collection 'default' (1 document) in the index of DATABASE_URL " in line[0]
        assert "OS user " in line[0] and PASSWORD not in start

        channel = f"C{uuid.uuid4().hex[:8].upper()}"
        ts, _ = fake.mention(channel, "U0ASKER", QUESTION)
        text = text_of(wait_reply(fake, channel, ts, timeout=180))
        assert "67 knots" in text and "zephyr" in text.lower(), text

        # a slash-command ingest fills the collection the bot answers from
        supplement = manual(tmp_path / "zephyr-supplement.pdf", "The tow rope weak link is rated at 500 daN.")
        url = fake.serve("zephyr-supplement.pdf", supplement.read_bytes())
        ack = fake.wait_ack(fake.slash(f"ingest <{url}>", user=ADMIN, channel=channel), 10)
        assert "into `default`" in ack.payload["text"], ack.payload
        wait_for(lambda: [e for e in fake.ephemerals if e["user"] == ADMIN and "ingested" in e["text"]], 180,
                 "the slash ingest")
        assert collections_of(fresh_db) == {"zephyr-manual.pdf": "default", "zephyr-supplement.pdf": "default"}
        assert PASSWORD not in bot.log()
    finally:
        assert bot.stop() == 0, bot.log()
        fake.stop()


def test_an_empty_collection_is_a_warning_saying_what_to_do(fresh_db: str, caplog: pytest.LogCaptureFixture) -> None:
    """A bot run as another OS user (or with another CHAPTERVERSE_HOME or DATABASE_URL) than `chapterverse
    ingest` opens another index, with nothing in it: the start line says so, naming the index."""
    settings = Settings(db={"url": fresh_db}, slack={"bot_token": "xoxb-1", "app_token": "xapp-1"})
    store = Store(settings)
    store.ensure_ready()
    with caplog.at_level(logging.INFO, logger="bot"):
        settle(settings, store, "T0FAKE")
    [record] = [r for r in caplog.records if "questions search" in r.getMessage()]
    said = record.getMessage()
    assert record.levelno == logging.WARNING
    assert said.startswith("questions search the collection 'default', which holds no documents in the index of "
                           "DATABASE_URL "), said
    assert "(OS user " in said and "`chapterverse ingest FILE.pdf` run as this OS user" in said
    assert "share a PDF with the bot in Slack" in said and PASSWORD not in said
    embedded = Settings(home=Path("/srv/cv-home"), db={"url": None},
                        slack={"bot_token": "xoxb-1", "app_token": "xapp-1"})
    from bot.startup import index_location  # noqa: PLC0415

    assert index_location(embedded) == "the embedded Postgres in CHAPTERVERSE_HOME /srv/cv-home"


def _ingest(settings: Settings, embedder, collection: str, name: str, tmp_path: Path) -> None:  # noqa: ANN001
    from ingest.pipeline import ingest_source  # noqa: PLC0415
    from ingest.sources import read_path  # noqa: PLC0415

    pdf = manual(tmp_path / name, FACT)
    ingest_source(settings, embedder, read_path(str(pdf), 10_000_000), collection, quiet=True)


def test_a_deployment_with_documents_in_slack_team_keeps_them(fresh_db: str, embedder, tmp_path: Path,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    settings = Settings(db={"url": fresh_db}, slack={"bot_token": "xoxb-1", "app_token": "xapp-1"})
    store = Store(settings)
    store.ensure_ready()
    _ingest(settings, embedder, "slack-T0OLD", "old-manual.pdf", tmp_path)
    _ingest(settings, embedder, "default", "cli-manual.pdf", tmp_path)
    with caplog.at_level(logging.INFO, logger="bot"):
        kept = settle(settings, store, "T0OLD")
        fresh = settle(settings, store, "T0NEW")  # another workspace's token: nothing of its own there
    old = scope_for(kept, "T0OLD", "C1")
    assert old.read == ("slack-T0OLD",) and old.write == "slack-T0OLD"  # questions, ingests and removals
    assert workspace_collection(fresh, "T0NEW") == "default"
    said = [r.getMessage() for r in caplog.records]
    assert any("questions search the collection 'slack-T0OLD' (1 document)" in s and "kept because" in s
               and "CHAPTERVERSE_SLACK_WORKSPACE_COLLECTION=default" in s and "'default' (1 document, not searched)"
               in s for s in said), said
    assert any("questions search the collection 'default' (1 document) in the index of DATABASE_URL" in s
               for s in said), said
    assert not any(PASSWORD in s for s in said)
    # named explicitly: what is named, whatever else holds documents
    named = settle(settings.but(slack={"workspace_collection": "default"}), store, "T0OLD")
    assert workspace_collection(named, "T0OLD") == "default"


def test_several_workspaces_keep_their_documents_apart(fresh_db: str, embedder, tmp_path: Path) -> None:
    settings = Settings(db={"url": fresh_db}, slack={"app_token": "xapp-1", "client_id": "1.2",
                                                     "client_secret": "s"})
    store = Store(settings)
    store.ensure_ready()
    _ingest(settings, embedder, "default", "cli-manual.pdf", tmp_path)
    _ingest(settings, embedder, "slack-T0A", "alpha-manual.pdf", tmp_path)
    settled = settle(settings, store, "")
    a, b = scope_for(settled, "T0A", "C1"), scope_for(settled, "T0B", "C1")
    assert a.read == ("slack-T0A",) and a.write == "slack-T0A"
    assert b.read == ("slack-T0B",) and b.write == "slack-T0B"
    assert settled.slack.workspace_collection is None


def _slack_section() -> str:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = readme[readme.index("## Connect Slack"):readme.index("## Choose a model provider")]
    return " ".join(section.split())


def test_readme_says_what_a_first_install_needs_from_admins_the_network_and_the_os_user() -> None:
    """Issue 39, item 12: admin approval, outbound-only network, and where the bot's data lives for the
    OS user it runs as; the start line it quotes is the one the bot writes."""
    text = _slack_section()
    assert "Request to Install" in text and "admin approves" in text
    assert "no inbound port" in text and "outbound HTTPS and WebSocket" in text and "*.slack.com" in text
    assert "The index belongs to an OS user" in text and "CHAPTERVERSE_HOME" in text and "DATABASE_URL" in text
    assert "Run `ingest` and the bot as the same user" in text
    assert "invisible in Slack" not in text  # the documents of the README's first block are answered
    quoted = start_line("default", "the embedded Postgres in CHAPTERVERSE_HOME /home/ops/.local/share/chapterverse",
                        "ops", 3, default_collection="default").text
    assert f"`{quoted}`" in text, quoted
    assert "which holds no documents" in start_line("default", "x", "ops", 0, default_collection="default").text


def test_a_database_down_at_start_is_a_warning_and_the_bot_still_starts(caplog: pytest.LogCaptureFixture) -> None:
    """The bot starts while its database is away (answers resume when it is back): the start line says the
    documents could not be counted, and how to keep an older slack-<team id> collection meanwhile."""
    import socket  # noqa: PLC0415

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = Settings(db={"url": f"postgresql://postgres:{PASSWORD}@127.0.0.1:{port}/cv"},
                        slack={"bot_token": "xoxb-1", "app_token": "xapp-1"})
    with caplog.at_level(logging.INFO, logger="bot"):
        settled = settle(settings, Store(settings), "T0FAKE")
    assert workspace_collection(settled, "T0FAKE") == "default"
    [record] = [r for r in caplog.records if "questions search" in r.getMessage()]
    said = record.getMessage()
    assert record.levelno == logging.WARNING and PASSWORD not in said
    assert said.startswith("questions search the collection 'default' in the index of DATABASE_URL "
                           f"127.0.0.1:{port}/cv"), said
    assert "its documents could not be counted (" in said
    assert "set CHAPTERVERSE_SLACK_WORKSPACE_COLLECTION=slack-T0FAKE" in said


def test_a_workspace_collection_placed_on_another_primary_is_kept_without_counting() -> None:
    from bot.startup import keeps_per_workspace  # noqa: PLC0415

    one = {"bot_token": "xoxb-1", "app_token": "xapp-1"}
    placed = Settings(db={"placement": {"slack-T0P": {"url": "postgresql://u@10.0.0.9/cv"}}}, slack=one)
    assert keeps_per_workspace(placed, "T0P", 0) and not keeps_per_workspace(placed, "T0Q", 0)
    assert keeps_per_workspace(Settings(slack=one), "T0P", 2) and not keeps_per_workspace(Settings(slack=one), "T0P", 0)
    oauth = Settings(slack={"app_token": "xapp-1", "multi_workspace": True})
    assert not keeps_per_workspace(oauth, "T0P", 5)  # each workspace has its own anyway
