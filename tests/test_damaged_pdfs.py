"""Damaged PDFs (issue 32, item 2): MuPDF repairs many a truncated file or broken xref table, and
prints its complaints on stdout while it does. The parser child's JSON lines travel on a pipe of
their own, so those complaints never read as a crash: what MuPDF recovers is ingested with a
warning naming the damage, and a file it cannot recover fails with a message that names the damage,
never "the PDF parser stopped without an answer". Real child processes, real PDFs (generated ones
and real manuals of the test corpora cut short), the real command and real Postgres."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from ingest.isolate import Limits, parse
from ingest.sources import InputError, Source
from retrieval.store import db
from tests.conftest import ROOT, run_cli
from tests.pdfgen import text_pdf

RUN = uuid.uuid4().hex[:8]
FRACTIONS = (0.5, 0.75, 0.9)
REAL = [ROOT / "tests" / "corpus12" / "reportlab-userguide.pdf",  # MuPDF recovers 75% and 90% of it
        ROOT / "tests" / "corpus" / "FAA-S-8081-29_Sport-Pilot-and-Sport-Pilot-Flight-Instructor-PTS.pdf",
        ROOT / "tests" / "corpus2" / "R-intro.pdf"]  # no page tree left once cut: refused, naming the damage


def _cut(src: Path, dest: Path, fraction: float) -> Path:
    data = src.read_bytes()
    dest.write_bytes(data[:int(len(data) * fraction)])
    return dest


def _stored(settings, collection: str) -> list[dict]:
    with db.connection(settings) as conn:
        return conn.execute("SELECT name, page_count FROM documents WHERE collection = %s ORDER BY name",
                            (collection,)).fetchall()


def test_truncated_small_pdfs_are_ingested_with_a_warning_naming_the_damage(settings, tmp_path: Path) -> None:
    collection = f"damaged-{RUN}"
    whole = text_pdf(tmp_path / "manual.pdf", [f"Section {i}. The carburetor heat knob on page {i} is pulled "
                                               "before the power is reduced for the descent. " * 4
                                               for i in range(1, 6)])
    cuts = [_cut(whole, tmp_path / f"cut{int(f * 100)}.pdf", f) for f in FRACTIONS]
    res = run_cli("ingest", *map(str, cuts), "--collection", collection)  # MuPDF prints "MuPDF error: ..." for them
    assert res.returncode == 0, res.stderr
    assert "stopped without an answer" not in res.stderr
    for cut in cuts:
        assert f"{cut.name}: ingested into '{collection}'" in res.stdout, res.stdout
        assert f"warning: {cut.name}: damaged PDF, repaired by the parser (format error: cannot find startxref" \
            in res.stderr, res.stderr
    assert "pages have no text" in res.stderr  # the half file lost the text of its last pages, and says so
    assert [r["name"] for r in _stored(settings, collection)] == sorted(c.name for c in cuts)
    as_json = run_cli("ingest", str(cuts[0]), "--collection", f"{collection}-json", "--json")
    assert as_json.returncode == 0, as_json.stderr
    result = json.loads(as_json.stdout)["results"][0]
    assert result["status"] == "ingested" and result["warning"].startswith("damaged PDF, repaired by the parser")


@pytest.mark.parametrize("fraction", FRACTIONS)
@pytest.mark.parametrize("manual", REAL, ids=lambda p: p.stem[:20])
def test_real_manuals_cut_short_give_what_mupdf_recovers_or_name_the_damage(manual: Path, fraction: float) -> None:
    data = manual.read_bytes()
    src = Source(manual.name, manual.name, data[:int(len(data) * fraction)], None)
    try:
        parsed = parse(src, Limits())
    except InputError as exc:
        message = str(exc)
        assert "stopped without an answer" not in message
        assert "damaged PDF" in message or "corrupt or unreadable PDF" in message, message
        assert "startxref" in message or "endobj" in message or "xref" in message, message  # what is damaged
        assert "\n" not in message
        return
    assert parsed.damage, "a cut file parsed without a word about its damage"
    assert sum(1 for p in parsed.pages if p.text.strip()) > len(parsed.pages) // 3
    assert parsed.damage_note().startswith("damaged PDF, repaired by the parser")


def test_reportlab_manual_cut_at_three_quarters_is_recovered() -> None:
    """At least one real manual is recovered rather than refused (MuPDF rebuilds its xref)."""
    data = REAL[0].read_bytes()
    parsed = parse(Source("reportlab.pdf", "reportlab.pdf", data[:int(len(data) * 0.75)], None), Limits())
    assert len(parsed.pages) == 134 and sum(1 for p in parsed.pages if p.text.strip()) >= 70
    assert any("startxref" in d for d in parsed.damage)


def test_a_two_page_file_cut_anywhere_near_half_is_ingested_or_names_the_damage(tmp_path: Path) -> None:
    """Whether MuPDF can repair a cut depends on the byte it falls on: each cut either parses, with
    the damage named, or is refused naming it; none is taken for a crash."""
    data = text_pdf(tmp_path / "two.pdf", ["Page one about carburetor icing. " * 5,
                                           "Page two about magnetos. " * 5]).read_bytes()
    outcomes = set()
    for cut in range(len(data) // 2 - 24, len(data) // 2 + 24, 8):
        try:
            parsed = parse(Source("two.pdf", "two.pdf", data[:cut], None), Limits())
            assert parsed.damage
            outcomes.add("parsed")
        except InputError as exc:
            assert "stopped without an answer" not in str(exc) and "startxref" in str(exc), str(exc)
            outcomes.add("refused")
    assert "parsed" in outcomes, outcomes


def test_a_file_mupdf_cannot_open_names_the_damage(tmp_path: Path) -> None:
    data = REAL[0].read_bytes()
    with pytest.raises(InputError) as caught:
        parse(Source("half.pdf", "half.pdf", data[:len(data) // 2], None), Limits())
    assert "stopped without an answer" not in str(caught.value)
    assert "corrupt or unreadable PDF" in str(caught.value) or "damaged PDF" in str(caught.value)


def test_a_sound_pdf_whose_fonts_make_mupdf_talk_is_not_called_damaged() -> None:
    """MuPDF warns about sound files too ("bogus font (Gpospec5) ascent/descent values" for 14 CFR
    Part 91): those are logged, and only a file MuPDF had to repair, or that lost a page, is damaged."""
    pdf = ROOT / "tests" / "corpus" / "14-CFR-Part-91_General-Operating-and-Flight-Rules.pdf"
    parsed = parse(Source(pdf.name, pdf.name, pdf.read_bytes(), None), Limits())
    assert parsed.damage == () and parsed.damage_note() == ""
