"""Language as data: a German manual, ingested into a collection whose profile file names the shipped
``german`` preset, is indexed with Postgres' German text search and answered and refused in German,
with no code of its own (``retrieval/presets/german.json``, ``CHAPTERVERSE_PROFILES_DIR``).

Known limit: the extractive refusal threshold is one number fitted on the English dev sets, not part
of a preset; German sentences score lower against the English MiniLM model, so some plain German
questions ("Wie viel Kraftstoff ist ausfliegbar?", evidence 1.08 < 1.13) are refused here."""

from __future__ import annotations

import json
import uuid

import pytest

from ingest.pipeline import ingest_source
from ingest.sources import read_path
from retrieval.answer.ask import ask
from retrieval.encode.embed import get_embedder
from retrieval.profile import ProfileError, load_profile, profile_for
from retrieval.search.filters import Scope
from retrieval.search.keyword import bm25
from retrieval.store import db
from tests.pdfgen import text_pdf

PAGES = [
    "Betriebshandbuch Motorsegler MS-30\n\n"
    "Kapitel 1 Allgemeines\n\n"
    "Dieses Handbuch beschreibt den Betrieb des Motorseglers MS-30. Der Motorsegler ist ein "
    "zweisitziger Tiefdecker mit einziehbarem Propeller. Die Spannweite beträgt 18 Meter. "
    "Der Pilot muss das Handbuch vor dem ersten Flug vollständig gelesen haben.",
    "Kapitel 2 Betriebsgrenzen\n\n"
    "Die Höchstgeschwindigkeit im Flug beträgt 240 km/h. Bei Turbulenz darf eine Geschwindigkeit "
    "von 170 km/h nicht überschritten werden. Die höchstzulässige Abflugmasse beträgt 850 Kilogramm. "
    "Kunstflug ist mit diesem Muster nicht zugelassen.",
    "Kapitel 3 Kraftstoffanlage\n\n"
    "Der Kraftstofftank im Rumpf fasst 55 Liter, davon sind 52 Liter ausfliegbar. Als Kraftstoff ist "
    "bleifreies Superbenzin mit mindestens 95 Oktan zu verwenden. Vor jedem Flug ist der Tank auf "
    "Wasser zu prüfen.",
    "Kapitel 4 Wartung\n\n"
    "Die Wartungsintervalle der Motoren betragen 50 Stunden. Die Zündkerzen werden alle 100 Stunden "
    "gewechselt. Der Propeller wird jährlich von einem Prüfer untersucht.",
]


@pytest.fixture()
def german(settings, tmp_path, monkeypatch) -> str:
    collection = f"handbuch-{uuid.uuid4().hex[:8]}"
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / f"{collection}.json").write_text(json.dumps({"preset": "german"}))
    monkeypatch.setenv("CHAPTERVERSE_PROFILES_DIR", str(profiles))
    pdf = text_pdf(tmp_path / "betriebshandbuch-ms30.pdf", PAGES)
    ingest_source(settings, get_embedder(settings.embedding_model), read_path(str(pdf), 10**7), collection, quiet=True)
    return collection


def test_the_german_collection_is_indexed_and_searched_with_german_text_search(settings, german, monkeypatch) -> None:
    assert profile_for([german]).text_search == "german"
    with db.connection(settings) as conn:
        from ingest.store import list_documents  # noqa: PLC0415

        assert [d["text_search"] for d in list_documents(conn, german)] == ["german"]  # `chapterverse docs` shows it
        configs = {r["c"] for r in conn.execute("SELECT DISTINCT ts_config::text AS c FROM chunks WHERE collection = %s",
                                                (german,))}
        assert configs == {"german"}
        # German stemming: "Motors" finds "Motoren", which English stemming keeps apart
        assert bm25(conn, "Motors", 5, Scope.of([german]))
        english = conn.execute("SELECT to_tsvector('english', 'Motoren') @@ plainto_tsquery('english', 'Motors') AS m"
                               ).fetchone()["m"]
        assert english is False
        # the index, not today's profile, decides how a question is parsed: without the profile file
        # the documents were still indexed with German text search, and are searched with it
        monkeypatch.delenv("CHAPTERVERSE_PROFILES_DIR")
        assert profile_for([german]).text_search == "english"
        assert bm25(conn, "Motors", 5, Scope.of([german]))


def test_a_german_question_is_answered_from_its_page_and_a_near_miss_is_refused(settings, german) -> None:
    answer = ask(settings, "Wie hoch ist die Höchstgeschwindigkeit im Flug?", collections=[german],
                 answerer="extractive")
    assert not answer.refusal, answer.reason
    assert answer.citations[0].page == 2 and "240 km/h" in answer.citations[0].quote
    assert answer.answer.startswith("Laut den Handbüchern")
    fuel = ask(settings, "Wie viele Liter Kraftstoff sind ausfliegbar?", collections=[german], answerer="extractive")
    assert not fuel.refusal and fuel.citations[0].page == 3 and "52 Liter" in fuel.citations[0].quote
    # "Motoren" in the text, "Motoren" asked; the expected answer is a time ("wie lange": the preset's how-words)
    service = ask(settings, "Wie lange sind die Wartungsintervalle der Motoren?", collections=[german],
                  answerer="extractive")
    assert not service.refusal and service.citations[0].page == 4 and "50 Stunden" in service.citations[0].quote
    near_miss = ask(settings, "Wie hoch ist der Reifendruck des Bugrads?", collections=[german],
                    answerer="extractive")
    assert near_miss.refusal and not near_miss.citations


def test_an_unknown_preset_is_one_clear_error(tmp_path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"preset": "klingon"}))
    with pytest.raises(ProfileError, match="no preset 'klingon'; presets: german"):
        load_profile(bad)
