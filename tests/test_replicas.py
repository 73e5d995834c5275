"""Reads on hot standbys, on real servers: a primary and streaming standbys made with ``pg_basebackup -R``
from the embedded binaries (``chapterverse_lab.cluster``). Questions and searches are answered by the
standbys in turn, identically to the primary, and say which server answered; a standby that stops in the
middle of a question, or lags, costs the user nothing (the read runs again elsewhere, a warning is
logged); and a question right after an ingest or a removal never sees the collection as it was."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from chapterverse_lab.cluster import Cluster, Server, wait_caught_up
from chapterverse_lab.replica_drill import same, stopping_search
from retrieval.settings import Settings
from retrieval.store import db, replicas
from tests.conftest import run_cli
from tests.pdfgen import text_pdf

pytestmark = pytest.mark.slow

FILLER = "Pilots must review the weather reports and the checklists before each flight. " * 6
FUEL = ("Fuel reserves. No person may begin a flight at night unless there is enough fuel to fly to the first point "
        "of intended landing and to fly after that for at least 45 minutes at normal cruising speed.")
BALLAST = ("Nose ballast. The glider must carry at least 12 kilograms of ballast in the nose compartment when the "
           "pilot weighs less than 70 kilograms.")
FUEL_Q = "How much fuel reserve is required for a flight at night?"
BALLAST_Q = "How much nose ballast must the glider carry for a light pilot?"


class Servers(NamedTuple):
    cluster: Cluster
    primary: Settings  # the primary alone
    standbys: list[Server]
    delayed: Server  # applies each commit 2 s late
    pdfs: Path


def _ingest(settings: Settings, embedder, pdf: Path, collection: str = "manual") -> None:
    from ingest.pipeline import ingest_source  # noqa: PLC0415
    from ingest.sources import read_path  # noqa: PLC0415

    ingest_source(settings, embedder, read_path(str(pdf), 10_000_000), collection, quiet=True)


def _remove(settings: Settings, name: str, collection: str = "manual") -> None:
    from ingest.store import remove_document  # noqa: PLC0415

    with db.connection(settings) as conn:
        assert remove_document(conn, name, collection)


def _ask(settings: Settings, question: str, **kwargs):
    from retrieval.answer.ask import ask  # noqa: PLC0415

    return ask(settings, question, collections=["manual"], answerer="extractive", **kwargs)


def _documents(answer) -> set[str]:
    return {c.document for c in answer.citations} | {n.document for n in answer.nearest}


@pytest.fixture(scope="module")
def servers(embedder, tmp_path_factory) -> Iterator[Servers]:
    pdfs = tmp_path_factory.mktemp("replica-pdfs")
    text_pdf(pdfs / "fuel.pdf", [FILLER, FUEL + " " + FILLER, FILLER])
    text_pdf(pdfs / "ballast.pdf", [FILLER, BALLAST + " " + FILLER])
    with Cluster() as cluster:
        primary = Settings(db={"url": cluster.primary().url})
        db.ready(primary)
        standbys = [cluster.standby(), cluster.standby()]
        delayed = cluster.standby(recovery_min_apply_delay="2s")
        _ingest(primary, embedder, pdfs / "fuel.pdf")
        wait_caught_up(cluster)
        yield Servers(cluster, primary, standbys, delayed, pdfs)


@pytest.fixture(autouse=True)
def no_skipped_standbys() -> Iterator[None]:
    replicas._skipped.clear()  # noqa: SLF001  (each test starts with every standby usable)
    yield
    replicas._skipped.clear()  # noqa: SLF001


def _through(s: Servers, standbys: list[Server], **db_settings: object) -> Settings:
    return s.primary.but(db={"read_urls": [x.url for x in standbys], **db_settings})


def test_questions_and_searches_are_read_from_the_standbys_in_turn_identically(servers: Servers) -> None:
    from retrieval.search.search import search  # noqa: PLC0415

    alone = _ask(servers.primary, FUEL_Q)
    assert not alone.refusal and alone.server.startswith("primary ") and "fuel.pdf" in _documents(alone)
    through = _through(servers, servers.standbys)
    answers = [_ask(through, FUEL_Q) for _ in range(4)]
    assert {a.server.rsplit("/", 1)[-1] for a in answers} == {"standby1:5433", "standby2:5434"}
    assert all(a.server.startswith("replica ") for a in answers)
    assert all(same(a, alone) for a in answers)
    found, reference = search(through, FUEL_Q, k=3, collections=["manual"]), search(servers.primary, FUEL_Q, k=3,
                                                                                      collections=["manual"])
    assert found.server.startswith("replica ") and reference.server.startswith("primary ")
    assert [(p.document, p.page, p.text) for p in found.results] == [(p.document, p.page, p.text) for p in reference.results]


def test_the_json_of_ask_and_search_names_the_standby_that_answered(servers: Servers) -> None:
    env = {"DATABASE_URL": servers.primary.db.url.get_secret_value(),
           "CHAPTERVERSE_DB_READ_URLS": ",".join(s.url for s in servers.standbys), "CHAPTERVERSE_ANSWERER": "extractive"}
    asked = run_cli("ask", FUEL_Q, "--collection", "manual", "--json", env=env)
    assert asked.returncode == 0, asked.stderr
    answer = json.loads(asked.stdout)
    assert answer["server"].startswith("replica ") and not answer["refusal"]
    found = run_cli("search", FUEL_Q, "--collection", "manual", "--json", env=env)
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["server"].startswith("replica ")


def test_a_standby_stopped_in_the_middle_of_a_question_costs_the_user_nothing(servers: Servers, caplog) -> None:
    alone = _ask(servers.primary, FUEL_Q)
    through = _through(servers, servers.standbys)
    try:
        with caplog.at_level(logging.WARNING, logger="retrieval.store.replicas"):
            first = _ask(through, FUEL_Q, search_fn=stopping_search(servers.cluster, "immediate"))
            second = _ask(through, FUEL_Q, search_fn=stopping_search(servers.cluster, "fast"))
            third = _ask(through, FUEL_Q)  # both standbys down
        stopped = [s for s in servers.standbys if not servers.cluster.running(s)]
        assert len(stopped) == 2, "each question stopped the standby it was reading from"
        assert first.server.startswith("replica ") and same(first, alone)  # answered by the other standby
        assert same(second, alone) and same(third, alone)
        assert second.server.startswith("primary ") and third.server.startswith("primary ")
        skips = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
        assert len(skips) == 2 and all("reading from the primary instead" in m for m in skips)
    finally:
        for s in servers.standbys:
            if not servers.cluster.running(s):
                servers.cluster.start(s)
        wait_caught_up(servers.cluster)


def test_a_question_right_after_an_ingest_or_removal_sees_it(servers: Servers, embedder) -> None:
    impatient = _through(servers, [servers.delayed], read_wait_s=0.3)
    patient = _through(servers, [servers.delayed], read_wait_s=10.0)
    _ingest(servers.primary, embedder, servers.pdfs / "ballast.pdf")
    first = _ask(impatient, BALLAST_Q)  # the standby applies the ingest 2 s late: the primary answers
    assert first.server.startswith("primary ") and "ballast.pdf" in {c.document for c in first.citations}
    _remove(servers.primary, "ballast.pdf")
    second = _ask(patient, BALLAST_Q)  # waits for the standby to apply the removal
    assert second.server.startswith("replica ") and "ballast.pdf" not in _documents(second)
    assert 500 < second.timings_ms["replica.wait"] < 10_000
    assert same(second, _ask(servers.primary, BALLAST_Q))
    other = _ask(patient.but(db={"read_wait_s": 0.0}), FUEL_Q)  # a collection written long ago: no wait
    assert other.server.startswith("replica ") and other.timings_ms["replica.wait"] < 500


def test_a_question_right_after_a_preset_change_is_not_read_from_a_standby_that_has_not_replayed_it(
        servers: Servers) -> None:
    from retrieval.store.collections import set_preset  # noqa: PLC0415

    impatient = _through(servers, [servers.delayed], read_wait_s=0.3)
    with db.connection(servers.primary) as conn:
        preset = conn.execute("SELECT preset FROM collections WHERE collection = 'manual'").fetchone()["preset"]
        set_preset(conn, "manual", preset)  # the same preset: only the write counts here
    first = _ask(impatient, FUEL_Q)  # the standby applies the change 2 s late: the primary answers
    assert first.server.startswith("primary ") and not first.refusal


def test_a_standby_lagging_past_the_bound_is_skipped_with_a_warning(servers: Servers, embedder, caplog) -> None:
    # the standby replays the ingest's records at once and holds back only its commit record (2 s): a bound
    # of one byte is passed until then
    strict = _through(servers, [servers.delayed], max_lag_mb=1e-6)
    _ingest(servers.primary, embedder, servers.pdfs / "ballast.pdf")
    try:
        with caplog.at_level(logging.WARNING, logger="retrieval.store.replicas"):
            answer = _ask(strict, BALLAST_Q)
        assert answer.server.startswith("primary ") and "ballast.pdf" in {c.document for c in answer.citations}
        assert any("lags" in r.getMessage() and "CHAPTERVERSE_DB_MAX_LAG_MB" in r.getMessage() for r in caplog.records)
    finally:
        _remove(servers.primary, "ballast.pdf")
