"""Tenants placed by database, on real servers: two Slack workspaces' collections on two primaries (each
with a streaming standby), configured with ``CHAPTERVERSE_DB_PLACEMENT``. Each workspace's documents
are written only to its own primary, its questions are read only from its own servers, and neither
ever sees the other's documents."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import NamedTuple

import psycopg
import pytest

from chapterverse_lab.cluster import Cluster, Server, wait_caught_up
from retrieval.settings import Settings
from retrieval.store import db
from tests.conftest import run_cli
from tests.pdfgen import text_pdf
from tests.test_replicas import BALLAST, BALLAST_Q, FILLER, FUEL, FUEL_Q, _documents, _ingest

pytestmark = pytest.mark.slow

T1, T2 = "slack-T1", "slack-T2"  # the collections of workspaces T1 and T2 (bot.scope)


class Tenants(NamedTuple):
    settings: Settings  # T1 on DATABASE_URL, T2 placed on the second primary
    env: dict[str, str]
    a: list[Server]  # primary, standby
    b: list[Server]


def _rows(server: Server) -> set[tuple[str, str]]:
    with psycopg.connect(server.url) as conn:
        return set(conn.execute("SELECT collection, name FROM documents").fetchall())


@pytest.fixture(scope="module")
def tenants(embedder, tmp_path_factory) -> Iterator[Tenants]:
    pdfs = tmp_path_factory.mktemp("tenant-pdfs")
    text_pdf(pdfs / "fuel.pdf", [FILLER, FUEL + " " + FILLER])
    text_pdf(pdfs / "ballast.pdf", [FILLER, BALLAST + " " + FILLER])
    with Cluster() as one, Cluster(base_port=6432) as two:
        a, b = [one.primary(), one.standby()], [two.primary(), two.standby()]
        placement = {T2: {"url": b[0].url, "read_urls": [b[1].url]}}
        settings = Settings(db={"url": a[0].url, "read_urls": [a[1].url], "placement": placement})
        db.ready(settings)
        _ingest(settings, embedder, pdfs / "fuel.pdf", T1)
        _ingest(settings, embedder, pdfs / "ballast.pdf", T2)  # to the second primary: placed there
        wait_caught_up(one)
        wait_caught_up(two)
        env = {"DATABASE_URL": a[0].url, "CHAPTERVERSE_DB_READ_URLS": a[1].url,
               "CHAPTERVERSE_DB_PLACEMENT": json.dumps(placement), "CHAPTERVERSE_ANSWERER": "extractive"}
        yield Tenants(settings, env, a, b)


def _ask(settings: Settings, question: str, collections: list[str]):
    from retrieval.answer.ask import ask  # noqa: PLC0415

    return ask(settings, question, collections=collections, answerer="extractive")


def test_each_workspace_s_documents_are_on_its_own_primary_and_its_standby_only(tenants: Tenants) -> None:
    assert _rows(tenants.a[0]) == _rows(tenants.a[1]) == {(T1, "fuel.pdf")}
    assert _rows(tenants.b[0]) == _rows(tenants.b[1]) == {(T2, "ballast.pdf")}


def test_two_workspaces_on_two_primaries_never_see_each_other_s_documents(tenants: Tenants) -> None:
    own = _ask(tenants.settings, BALLAST_Q, [T2])
    assert not own.refusal and {c.document for c in own.citations} == {"ballast.pdf"}
    assert own.server == f"replica 1 {tenants.b[1].home}:{tenants.b[1].port}"  # T2's own standby
    mine = _ask(tenants.settings, FUEL_Q, [T1])
    assert not mine.refusal and {c.document for c in mine.citations} == {"fuel.pdf"}
    assert mine.server == f"replica 1 {tenants.a[1].home}:{tenants.a[1].port}"
    for question, workspace, foreign in ((BALLAST_Q, T1, "ballast.pdf"), (FUEL_Q, T2, "fuel.pdf")):
        answer = _ask(tenants.settings, question, [workspace])
        assert foreign not in _documents(answer), f"{workspace} saw {foreign}"
    both = _ask(tenants.settings, FUEL_Q, [T1, T2])
    assert both.refusal and "different databases" in both.reason and not both.citations


def test_commands_over_every_collection_reach_every_primary(tenants: Tenants) -> None:
    listed = run_cli("docs", "--json", env=tenants.env)
    assert listed.returncode == 0, listed.stderr
    assert [(d["collection"], d["name"]) for d in json.loads(listed.stdout)["documents"]] == \
        [(T1, "fuel.pdf"), (T2, "ballast.pdf")]
    collections = run_cli("collections", "list", "--json", env=tenants.env)
    assert collections.returncode == 0, collections.stderr
    assert [c["collection"] for c in json.loads(collections.stdout)["collections"]] == [T1, T2]
    changed = run_cli("collections", "set-preset", T2, "german", env=tenants.env)  # it used to say "no collection"
    assert changed.returncode == 0, changed.stderr
    with psycopg.connect(tenants.b[0].url) as conn:
        assert conn.execute("SELECT preset FROM collections WHERE collection = %s", (T2,)).fetchone() == ("german",)
    assert run_cli("collections", "set-preset", T2, "default", env=tenants.env).returncode == 0
    status = run_cli("db", "status", "--json", env=tenants.env)
    assert status.returncode == 0, status.stderr
    (other,) = json.loads(status.stdout)["placed"]
    assert other["server"].endswith(f":{tenants.b[0].port}") and other["documents"] == 1, other
    reembedded = run_cli("db", "reembed", env=tenants.env)
    assert reembedded.returncode == 0, reembedded.stderr
    assert "on 2 primaries" in reembedded.stdout, reembedded.stdout


def test_the_command_line_lists_searches_and_removes_on_the_collection_s_primary(tenants: Tenants) -> None:
    listed = run_cli("docs", "--collection", T2, "--json", env=tenants.env)
    assert listed.returncode == 0, listed.stderr
    assert [d["name"] for d in json.loads(listed.stdout)["documents"]] == ["ballast.pdf"]
    found = run_cli("search", BALLAST_Q, "--collection", T2, "--json", env=tenants.env)
    assert found.returncode == 0, found.stderr
    out = json.loads(found.stdout)
    assert out["server"].startswith("replica 1 ") and {r["document"] for r in out["results"]} == {"ballast.pdf"}
    mixed = run_cli("ask", FUEL_Q, "--collection", T1, "--collection", T2, env=tenants.env)
    assert mixed.returncode == 1 and "different databases" in mixed.stderr
    removed = run_cli("remove", "ballast.pdf", env=tenants.env)  # found on the second primary without --collection
    assert removed.returncode == 0, removed.stderr
    assert _rows(tenants.b[0]) == set() and _rows(tenants.a[0]) == {(T1, "fuel.pdf")}
