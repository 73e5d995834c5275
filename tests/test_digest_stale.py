"""Stale answers in the digest: when a document is replaced by a new edition, past answers whose quotes
are no longer in it are listed (real Postgres in a scratch database, the real ingest pipeline for both
editions, turns written by the bot's own store, the real `chapterverse digest` command)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from bot.digest import STALE_HEADING, as_mrkdwn, as_text, digest
from bot.store import Store
from ingest.pipeline import ingest_source
from ingest.sources import read_path
from retrieval.store import db, pool
from retrieval.models import Answer, Citation
from retrieval.settings import Settings
from tests.bot_helpers import save_turn
from tests.conftest import run_cli, scratch_database
from tests.pdfgen import text_pdf

COLL, TEAM, NAME = "slack-T0FAKE", "T0FAKE", "fuel-handbook.pdf"
KEPT = "Sump the tanks before the first flight of the day."
DROPPED = "Fuel is checked with the dipstick at each stop."
NEW = "Fuel quantity is read from the electronic gauge at each stop."


def answered(question: str, quote: str, page: int = 1) -> Answer:
    return Answer(question=question, refusal=False, answer=quote,
                  citations=[Citation(document=NAME, page=page, quote=quote)])


def test_answers_whose_quotes_left_the_new_edition_are_listed_as_stale(pg_url, embedder, tmp_path) -> None:
    with scratch_database(pg_url, "cv_stale") as url:
        settings = Settings(db={"url": url})
        db.ready(settings)
        try:
            (tmp_path / "v1").mkdir()
            (tmp_path / "v2").mkdir()
            v1 = text_pdf(tmp_path / "v1" / NAME, [f"Fuel checks. {KEPT} {DROPPED} " * 3])
            ingest_source(settings, embedder, read_path(str(v1), 10**8), COLL, quiet=True)
            store = Store(settings)
            turns = {}
            for i, (key, answer) in enumerate([("kept", answered("When are the tanks sumped?", KEPT)),
                                               ("dropped", answered("How is fuel checked at a stop?", DROPPED)),
                                               ("refused", Answer(question="Purple knob?", refusal=True))]):
                ts = f"1764800{i:03d}.000100"
                turns[key] = save_turn(store, TEAM, "C0GENERAL", ts, ts, "U0ASKER", answer, (COLL,))
            before = datetime.now(UTC)
            with db.connection(settings) as conn:
                assert digest(conn, before - timedelta(days=7))["stale"] == []  # nothing replaced yet

            v2 = text_pdf(tmp_path / "v2" / NAME, [f"Fuel checks. {KEPT} {NEW} " * 3])
            res = ingest_source(settings, embedder, read_path(str(v2), 10**8), COLL, quiet=True)
            assert res.status != "unchanged"

            with db.connection(settings) as conn:
                d = digest(conn, before - timedelta(days=7))
                later = digest(conn, datetime.now(UTC) + timedelta(minutes=1))  # replaced before the window
            stale = d["stale"]
            assert [s["question"] for s in stale] == ["How is fuel checked at a stop?"]
            assert stale[0]["missing_quotes"][0]["quote"] == DROPPED and stale[0]["document"] == NAME
            assert d["totals"]["stale"] == 1 and later["stale"] == []
            text = as_text(d)
            assert STALE_HEADING in text and "How is fuel checked at a stop?" in text and DROPPED in text
            assert "When are the tanks sumped?" not in text
            assert "How is fuel checked" in as_mrkdwn(d)

            out = run_cli("digest", "--since", "7d", "--json", env={"DATABASE_URL": url})
            assert out.returncode == 0, out.stderr
            assert [s["question"] for s in json.loads(out.stdout)["stale"]] == ["How is fuel checked at a stop?"]
        finally:
            pool.close_all()
