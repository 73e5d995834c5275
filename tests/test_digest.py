"""`chapterverse digest` and `/chapterverse digest`: what readers could not get answered, by document.

Real Postgres (a scratch database), rows written by the bot's own store (``bot.store.Store``: the
thread, the turn with the full Answer as JSON, the votes), the workspace address recorded by a real
bot process at start against the fake Slack, the real command as a subprocess, and the slash command
through the fake Slack."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pymupdf
import pytest

from bot.store import Store
from retrieval.store import pool
from retrieval.models import Answer, Citation, NearestPassage
from retrieval.settings import Settings
from tests.bot_helpers import save_turn
from tests.conftest import run_cli, scratch_database
from tests.fake_slack import FakeSlack, wait_for
from tests.fake_slack import fake  # noqa: F401  (the module's fake Slack: a pytest fixture)
from tests.pdfgen import text_pdf
from tests.test_bot_support import BotProcess

TEAM, OTHER_TEAM = "T0FAKE", "T0OTHER"
FUEL, OPS = "fuel-handbook.pdf", "ops-manual.pdf"
ADMIN = "U0ADMIN"


def refusal(question: str, *, best: tuple[str, int] | None = None, nearest: list[tuple[str, int, str | None]] = (),
            reason: str = "The documents do not support an answer to this question.") -> Answer:
    return Answer(question=question, refusal=True, reason=reason,
                  nearest=[NearestPassage(document=d, page=p, page_label=lab, snippet="…") for d, p, lab in nearest],
                  best_evidence=NearestPassage(document=best[0], page=best[1]) if best else None)


def answered(question: str, document: str, page: int) -> Answer:
    return Answer(question=question, refusal=False, answer="The manual says so.",
                  citations=[Citation(document=document, page=page, quote="Checks are made at 1,700 RPM always.")])


class Asked:
    """Writes what the bot writes when it answers in a thread, through its own Store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.n = 0

    def __call__(self, answer: Answer, *, team: str = TEAM, channel: str = "C0GENERAL", thread_ts: str | None = None,
                 collections: tuple[str, ...] = ("slack-T0FAKE",), days_ago: float = 0) -> dict[str, Any]:
        self.n += 1
        ts = f"1764700{self.n:03d}.000100"
        thread = thread_ts or ts
        turn = save_turn(self.store, team, channel, thread, ts, "U0ASKER", answer, collections)
        if days_ago:
            self.store.run(lambda conn: conn.execute(
                "UPDATE bot_turns SET created_at = now() - make_interval(secs => %s) WHERE workspace = %s AND id = %s",
                (days_ago * 86400, team, turn)))
        return {"turn": turn, "ts": ts, "thread": thread, "team": team, "channel": channel}


@pytest.fixture(scope="module")
def world(pg_url: str, fake: FakeSlack, tmp_path_factory) -> Iterator[dict[str, Any]]:
    """A scratch database; a bot that started against the fake Slack (so it recorded the workspace
    address); a real document with a title; and the questions below, stored as the bot stores them."""
    tmp = tmp_path_factory.mktemp("digest")
    with scratch_database(pg_url, "cv_digest") as url:
        env = {"DATABASE_URL": url, "CHAPTERVERSE_SLACK_ADMINS": ADMIN}
        pdf = text_pdf(tmp / FUEL, ["Fuel checks. Sump the tanks before the first flight of the day. " * 4])
        doc = pymupdf.open(pdf)
        doc.set_metadata({"title": "Fuel Handbook"})
        doc.saveIncr()
        doc.close()
        res = run_cli("ingest", str(pdf), "--collection", "slack-T0FAKE", env=env)
        assert res.returncode == 0, res.stderr

        bot = BotProcess(fake, env, tmp / "bot.log").start(wait_models=False)
        store = Store(Settings(db={"url": url}))
        ask = Asked(store)
        rows = {
            # refused: the answerer's best evidence was in the fuel handbook
            "best": ask(refusal("How much unusable fuel is in each tank?", best=(FUEL, 3),
                                nearest=[(OPS, 9, None), (FUEL, 3, "1-2")])),
            # refused, a follow-up in the same thread: only nearest passages listed
            "near": None,
            "nothing": ask(refusal("What does the purple knob do?",
                                   reason="The documents do not support an answer to this question. No passages "
                                          "were found in slack-T0FAKE.")),
            "old": ask(refusal("What is the oldest rule?", nearest=[(FUEL, 2, None)]), days_ago=10),
            "down": ask(answered("At what RPM is the magneto check?", OPS, 12),
                        collections=("slack-T0FAKE", "slack-T0FAKE:C0OPS"), channel="C0OPS"),
            "changed": ask(answered("Where is the fuel selector?", FUEL, 4)),
            "liked": ask(answered("Where is the oil dipstick?", OPS, 5)),
            "failed": ask(refusal("Is the index up?", reason="The index is unavailable, so nothing could be "
                                                             "searched: connection refused")),
            "other": ask(refusal("Which form do I file?", nearest=[(OPS, 1, None)]), team=OTHER_TEAM),
        }
        rows["near"] = ask(refusal("And in the left tank?", nearest=[(FUEL, 3, "1-2")]), thread_ts=rows["best"]["thread"])
        store.record_feedback(TEAM, rows["down"]["turn"], "U0A", -1)
        store.record_feedback(TEAM, rows["down"]["turn"], "U0B", 1)
        store.record_feedback(TEAM, rows["changed"]["turn"], "U0A", -1)
        store.record_feedback(TEAM, rows["changed"]["turn"], "U0A", 1)  # changed their mind
        store.record_feedback(TEAM, rows["liked"]["turn"], "U0C", 1)
        try:
            yield {"env": env, "rows": rows, "bot": bot, "url": url}
        finally:
            bot.stop()
            pool.close_all()


def digest_json(world: dict[str, Any], *args: str) -> dict[str, Any]:
    res = run_cli("digest", *args, "--json", env=world["env"])
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)  # exactly one JSON document: anything else on stdout fails here


def link(world: dict[str, Any], key: str) -> str:
    r = world["rows"][key]
    base = f"https://fake.slack.test/archives/{r['channel']}/p{r['ts'].replace('.', '')}"
    return base if r["ts"] == r["thread"] else f"{base}?thread_ts={r['thread']}&cid={r['channel']}"


def test_digest_groups_refusals_and_downvotes_by_nearest_document(world: dict[str, Any]) -> None:
    d = digest_json(world)
    assert d["totals"] == {"refused": 4, "downvoted": 1, "errors": 1, "documents": 2, "stale": 0}
    docs = [(g["document"], g["title"], g["refused"], g["downvoted"]) for g in d["documents"]]
    assert docs == [(FUEL, "Fuel Handbook", 2, 0), (OPS, None, 1, 1), (None, None, 1, 0)]
    fuel, ops, nothing = d["documents"]
    assert [i["question"] for i in fuel["items"]] == ["How much unusable fuel is in each tank?",
                                                      "And in the left tank?"]
    assert [(i["page"], i["page_label"]) for i in fuel["items"]] == [(3, "1-2"), (3, "1-2")]
    # links open the question's message in its thread, at the address the bot recorded at start
    assert [i["link"] for i in fuel["items"]] == [link(world, "best"), link(world, "near")]
    assert all(i["link_opens"] == "thread" for i in fuel["items"])
    down = next(i for i in ops["items"] if i["kind"] == "downvoted")
    assert (down["question"], down["downvotes"], down["upvotes"], down["page"]) == (
        "At what RPM is the magneto check?", 1, 1, 12)
    # another workspace, whose address the bot never saw: the link opens the channel
    other = next(i for i in ops["items"] if i["kind"] == "refused")
    assert other["link"] == "https://slack.com/app_redirect?team=T0OTHER&channel=C0GENERAL"
    assert other["link_opens"] == "channel"
    assert nothing["items"][0]["question"] == "What does the purple knob do?"
    # a failure is not about the documents; a vote changed back to 👍, a liked answer, and a refusal
    # older than the window are not there
    assert [i["question"] for i in d["errors"]] == ["Is the index up?"]
    asked = {i["question"] for g in d["documents"] for i in g["items"]}
    assert not asked & {"Where is the fuel selector?", "Where is the oil dipstick?", "What is the oldest rule?"}


def test_since_collection_and_workspace_narrow_it(world: dict[str, Any]) -> None:
    wide = digest_json(world, "--since", "14d")
    fuel = next(g for g in wide["documents"] if g["document"] == FUEL)
    assert fuel["refused"] == 3 and "What is the oldest rule?" in [i["question"] for i in fuel["items"]]

    ops_channel = digest_json(world, "--collection", "slack-T0FAKE:C0OPS")
    assert ops_channel["totals"] == {"refused": 0, "downvoted": 1, "errors": 0, "documents": 1, "stale": 0}
    assert ops_channel["collection"] == "slack-T0FAKE:C0OPS"

    other = digest_json(world, "--workspace", OTHER_TEAM)
    assert [(g["document"], g["refused"]) for g in other["documents"]] == [(OPS, 1)]

    assert digest_json(world, "--since", "1m")["since"] > wide["since"]


def test_digest_text_for_people(world: dict[str, Any]) -> None:
    res = run_cli("digest", env=world["env"])
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert out.startswith("Not answered since ") and "4 refused questions, 1 👎 answer, 1 failed" in out
    assert f"Fuel Handbook ({FUEL}): 2 refused" in out
    assert f"{OPS}: 1 refused, 1 👎" in out and "No document came close: 1 refused" in out
    assert "“How much unusable fuel is in each tank?” · nearest p. 1-2 (PDF p. 3)" in out
    assert link(world, "best") in out and link(world, "near") in out
    assert out.index("Fuel Handbook") < out.index(OPS) < out.index("No document came close")


def test_bad_since_is_bad_input(world: dict[str, Any]) -> None:
    res = run_cli("digest", "--since", "last tuesday", env=world["env"])
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr.strip() == ("error: --since 'last tuesday': use a duration (7d, 12h, 2w, 90m) or a date "
                                  "(2026-12-01)")


def test_slash_digest_for_admins_only(world: dict[str, Any], fake: FakeSlack) -> None:
    before = len(fake.ephemerals)
    ack = fake.wait_ack(fake.slash("digest", user="U0ALICE"))
    assert "only the admins" in (ack.payload or {}).get("text", ""), ack.payload
    assert len(fake.ephemerals) == before  # nothing else was sent to a non-admin

    fake.wait_ack(fake.slash("digest 7d", user=ADMIN))
    msg = wait_for(lambda: next((e for e in fake.ephemerals[before:] if e.get("user") == ADMIN), None), 30,
                   "the digest for the admin")
    text = msg["text"]
    assert "4 refused" not in text  # the other workspace's question is not shown in this one
    assert "3 refused questions, 1 👎 answer, 1 failed" in text
    assert "*Fuel Handbook*: 2 refused" in text
    assert f"<{link(world, 'best')}|How much unusable fuel is in each tank?>" in text
    assert "Which form do I file?" not in text


def test_digest_with_nothing_to_report(pg_url: str) -> None:
    with scratch_database(pg_url, "cv_digest_empty") as url:
        res = run_cli("digest", "--json", env={"DATABASE_URL": url})
        assert res.returncode == 0, res.stderr
        d = json.loads(res.stdout)
        assert d["documents"] == [] and d["errors"] == [] and d["totals"]["refused"] == 0
        text = run_cli("digest", env={"DATABASE_URL": url})
        assert "Nothing: every question in this period was answered" in text.stdout
