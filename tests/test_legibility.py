"""A text layer that cannot be searched as it reads is ingested with a warning that says so
(``ingest.legibility``): Cyrillic read as Latin-1 letters by an old PDF, and text in a script written
without spaces between words. Ordinary manuals in English, German or French get no warning. The real
command, parse child and Postgres for the ingest; pure functions for the rest."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from ingest import legibility
from ingest.pdf import Page
from tests.conftest import run_cli
from tests.pdfgen import text_pdf

RUN = uuid.uuid4().hex[:8]
# "Исходные файлы LaTeX — это обычные текстовые файлы" as an old pdfTeX file's cp1251 bytes read as Latin-1
MOJIBAKE = "Èñõîäíûå ôàéëû LaTeX — ýòî îáû÷íûå òåêñòîâûå ôàéëû. Ïðîáåëû è ïåðåâîäû ñòðîê èãðàþò ðîëü ïðîáåëà."


def _pages(*texts: str) -> list[Page]:
    return [Page(number=i, label=None, text=t) for i, t in enumerate(texts, 1)]


def test_cyrillic_read_as_latin1_is_named_with_its_words_and_pages() -> None:
    note = legibility.note(_pages("Preface", MOJIBAKE, MOJIBAKE * 3))
    assert "mis-encoded" in note and "“Èñõîäíûå”" in note and "p. 2, p. 3" in note, note


def test_accented_european_text_is_not_mis_encoded() -> None:
    french = "Le pilote vérifie la météo et le carburant avant chaque vol; à l'arrivée, il ferme le réservoir."
    german = "Der Pilot prüft vor jedem Flug das Wetter und den Kraftstoff. Größere Höhen verlängern die Startstrecke."
    icelandic = "Flugmaðurinn athugar veðrið og eldsneytið fyrir hvert flug; á leiðinni þarf hann að fylgjast með."
    assert legibility.note(_pages(french, german, icelandic)) == ""


def test_japanese_text_is_named_and_a_few_characters_in_english_text_are_not() -> None:
    japanese = "グラフィカルなログイン画面が表示されます。ユーザー名とパスワードを入力してください。" * 3
    assert "without spaces between words" in legibility.note(_pages(japanese, "Debian reference, chapter 1"))
    english = "The terminal prints 日本語 correctly once the locale is set to ja_JP.UTF-8 and the font has the glyphs. " * 5
    assert legibility.note(_pages(english)) == ""


@pytest.mark.slow  # the real command: ~20 s
def test_a_mis_encoded_manual_is_ingested_with_the_warning(settings, tmp_path: Path) -> None:
    pdf = text_pdf(tmp_path / "lshort-old.pdf", [MOJIBAKE * 4, MOJIBAKE * 4])
    res = run_cli("ingest", str(pdf), "--collection", f"legibility-{RUN}", "--json")
    assert res.returncode == 0, res.stderr
    result = json.loads(res.stdout)["results"][0]
    assert result["status"] == "ingested"
    assert "its text layer looks mis-encoded" in result["warning"] and "“Èñõîäíûå”" in result["warning"], result
