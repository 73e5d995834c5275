"""Issue 39, items 5, 7 and 4 (title): what a page shows and what it is called.

* Text set too small to read (a 2-pt sentence with a false answer) is hidden like white text: never
  stored, so never returned by search nor quoted on the extractive or the model path; footnotes in
  6 and 7 pt still are (``ingest.pdf.MIN_READABLE_SIZE``).
* Page labels are worked out in one pass (``ingest.labels``), the same as PyMuPDF's ``get_label()``
  on real and synthetic label rules; a 4,999-page PDF with 4,999 label ranges parses in seconds (it
  took 284 s); a label over 32 characters is dropped (the page is cited by its number).
* A PDF with no body text is refused in one line naming the file and what OCR could do, nothing stored.
* A NUL (and other control characters) in the declared title is stripped: the ingest succeeds.

Real PDFs made here with PyMuPDF, the real parser child, the real pipeline and embedded Postgres
(tests/conftest.py), the real command, and the fake Gemini (tests/fake_gemini.py).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymupdf
import pytest
from pydantic import SecretStr

from ingest.isolate import Limits, parse
from ingest.labels import MAX_LABEL_CHARS, expand, page_labels
import ingest.pdf
from ingest.pdf import extract, page_text
from ingest.pipeline import ingest_source
from ingest.sources import InputError, read_path
from retrieval.store import db
from tests.conftest import DEV_PDFS, ROOT, run_cli
from tests.pdfgen import many_pages_pdf

RUN = uuid.uuid4().hex[:6]

BODY_FACT = "Landings in direct crosswinds of up to 15 knots were demonstrated during certification."
BODY = (f"Crosswind limits. {BODY_FACT} Pilots should not attempt a landing in a stronger crosswind without "
        "additional training, and should divert to an airport with a runway more nearly aligned with the wind.")
TINY_MARK = "SBTINY"
TINY = f"Service bulletin {TINY_MARK}: the maximum demonstrated crosswind component is 45 knots."  # the best match
FOOTNOTE_6 = "Demonstrated crosswind values were measured on a dry paved runway with the flaps retracted."
FOOTNOTE_7 = "Tie-down rings must be inspected for corrosion every fifty hours of operation."
CROSSWIND = "What is the maximum demonstrated crosswind component?"


def _fine_print_pdf(path: Path) -> Path:
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_textbox(pymupdf.Rect(72, 72, 540, 200), BODY, fontsize=11)
    page.insert_text((72, 260), TINY, fontsize=2)  # black on white, on the page: only its size hides it
    page.insert_text((72, 700), "1 " + FOOTNOTE_6, fontsize=6)
    page.insert_text((72, 712), "2 " + FOOTNOTE_7, fontsize=7)
    doc.save(path)
    doc.close()
    return path


def _stored_text(settings, collection: str) -> tuple[str, str]:
    """All page texts and all chunk texts stored for ``collection``."""
    with db.connection(settings) as conn:
        pages = conn.execute("SELECT string_agg(text, ' ') AS t FROM pages WHERE collection = %s",
                             (collection,)).fetchone()["t"] or ""
        chunks = conn.execute("SELECT string_agg(text, ' ') AS t FROM chunks WHERE collection = %s",
                              (collection,)).fetchone()["t"] or ""
    return pages, chunks


def _documents(settings, collection: str) -> list[dict[str, Any]]:
    with db.connection(settings) as conn:
        return conn.execute("SELECT name, title FROM documents WHERE collection = %s", (collection,)).fetchall()


# ------------------------------------------------------------------------------------ item 5: fine print
def test_text_under_three_points_is_hidden_and_footnotes_and_small_print_are_not(tmp_path: Path) -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_textbox(pymupdf.Rect(72, 72, 540, 200), BODY, fontsize=11)
    for y, size in ((300, 2.9), (320, 3.0), (340, 3.5), (360, 4.1), (380, 5.0)):
        page.insert_text((72, y), f"Sample set in size{str(size).replace('.', 'p')} points.", fontsize=size)
    (got,) = extract(doc)
    assert "size2p9" not in got.text and got.hidden_chars >= len("Sample set in size2p9 points.")
    for size in ("3p0", "3p5", "4p1", "5p0"):  # the sizes real manuals use for fine print, marks and fractions
        assert f"size{size}" in got.text


SMALLEST = {"14-CFR": (29, 35, 158), "FAA-S-8081": (57, 58, 60), "FAA-S-ACS": (6, 26, 27)}  # 1-based pages


@pytest.mark.parametrize("pdf", DEV_PDFS, ids=lambda p: p.name[:14])
def test_the_faa_pdfs_smallest_text_is_kept(pdf: Path, monkeypatch) -> None:
    """The FAA PDFs' pages with their smallest text read as under the old 1.5-pt rule: 14 CFR's fraction
    digits and table footnote marks ("1⁄2 statute mile", 4.1-4.3 pt), the PTS's and ACS's V-speed
    subscripts (5-5.8 pt)."""
    numbers = next(v for k, v in SMALLEST.items() if pdf.name.startswith(k))
    with pymupdf.open(pdf) as doc:
        now = [page_text(doc[n - 1]) for n in numbers]
        monkeypatch.setattr(ingest.pdf, "MIN_READABLE_SIZE", 1.5)
        before = [page_text(doc[n - 1]) for n in numbers]
        sizes = [s["size"] for n in numbers for b in doc[n - 1].get_text("dict")["blocks"] for line in b.get("lines", ())
                 for s in line["spans"] if s["text"].strip()]
    assert now == before
    assert 4.0 < min(sizes) < 6.0  # these pages do hold the small text


@pytest.fixture(scope="module")
def fine_print(settings, embedder, tmp_path_factory) -> str:
    """The fine-print PDF ingested by the real pipeline into a collection of its own."""
    pdf = _fine_print_pdf(tmp_path_factory.mktemp("fine") / "skylark-fine-print.pdf")
    collection = f"fine-{RUN}"
    res = ingest_source(settings, embedder, read_path(str(pdf), 10_000_000), collection, quiet=True)
    assert res.status == "ingested" and res.chunks >= 1
    return collection


def test_two_point_text_is_never_stored_and_footnotes_are(settings, fine_print: str) -> None:
    pages, chunks = _stored_text(settings, fine_print)
    assert TINY_MARK not in pages and TINY_MARK not in chunks and "45 knots" not in pages
    for note in (FOOTNOTE_6, FOOTNOTE_7, "15 knots"):
        assert note in " ".join(pages.split()) and note in " ".join(chunks.split())


def test_search_never_returns_the_two_point_text_but_finds_the_footnotes(settings, fine_print: str) -> None:
    from retrieval.search.search import search  # noqa: PLC0415

    for query in (CROSSWIND, f"service bulletin {TINY_MARK} 45 knots"):
        found = search(settings, query, k=10, collections=[fine_print]).results
        assert found and all(TINY_MARK not in p.text and "45 knots" not in p.text for p in found)
    for note in (FOOTNOTE_6, FOOTNOTE_7):
        found = search(settings, note, k=3, collections=[fine_print]).results
        assert any(note in " ".join(p.text.split()) for p in found), note


def test_extractive_ask_answers_from_the_body_never_the_fine_print(settings, fine_print: str) -> None:
    from retrieval.answer.ask import ask  # noqa: PLC0415

    a = ask(settings, CROSSWIND, collections=[fine_print], answerer="extractive")
    assert not a.refusal, a.reason
    shown = a.answer + " ".join(c.quote for c in a.citations)
    assert "15 knots" in shown and "45" not in shown and TINY_MARK not in shown


@pytest.fixture(scope="module")
def gemini() -> Iterator[Any]:
    from tests import fake_gemini as fg  # noqa: PLC0415

    with fg.running() as server:
        yield server


def test_the_model_is_never_shown_the_two_point_text(settings, fine_print: str, gemini, monkeypatch) -> None:
    """A gullible model quotes the fine print when shown it, else the body. It is never shown it."""
    from retrieval.answer.ask import ask  # noqa: PLC0415
    from tests import fake_gemini as fg  # noqa: PLC0415
    from tests.test_gemini_failures import passages_in  # noqa: PLC0415

    def gullible(rec: fg.Recorded) -> fg.Reply:
        shown = passages_in(rec)
        tiny = next((p for p in shown if TINY_MARK in p["text"]), None)
        p, quote = (tiny, TINY) if tiny else (shown[0], BODY_FACT)
        return fg.Reply(200, fg.answer_body("45 knots." if tiny else "Up to 15 knots.", [
            {"id": p["id"], "document": p["document"], "page": p["page"], "quote": quote}]))

    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", gemini.base_url)
    gsettings = settings.but(answer={"gemini_api_key": SecretStr(gemini.api_key), "gemini_model": "gemini-test",
                                     "gemini_timeout_s": 5.0})
    gemini.script(gullible)
    a = ask(gsettings, CROSSWIND, collections=[fine_print], answerer="gemini")
    assert a.answerer == "gemini" and not a.refusal, (a.reason, a.warnings)
    assert "15 knots" in a.answer and all("45" not in c.quote for c in a.citations)
    assert gemini.requests and all(TINY_MARK not in rec.prompt for rec in gemini.requests)


# ------------------------------------------------------------------------------------ item 7: page labels
def _labelled(rules: list[dict[str, Any]], pages: int) -> pymupdf.Document:
    doc = pymupdf.open()
    for _ in range(pages):
        doc.new_page(width=100, height=100)
    doc.set_page_labels(rules)
    return pymupdf.open("pdf", doc.tobytes())  # as read from a file


SYNTHETIC = [  # page 0-1 before any rule: no label
    {"startpage": 2, "prefix": "", "style": "r", "firstpagenum": 1},
    {"startpage": 6, "prefix": "", "style": "R", "firstpagenum": 47},
    {"startpage": 9, "prefix": "A-", "style": "D", "firstpagenum": 1},
    {"startpage": 14, "prefix": "App. ", "style": "a", "firstpagenum": 1},
    {"startpage": 17, "prefix": "", "style": "A", "firstpagenum": 24},
    {"startpage": 20, "prefix": "Cover", "firstpagenum": 1},  # no style: the prefix alone
    {"startpage": 22, "prefix": "", "style": "D", "firstpagenum": 1000},
    {"startpage": 25, "prefix": "x", "style": "r", "firstpagenum": 3999},
]


def test_labels_are_get_labels_on_synthetic_rules() -> None:
    doc = _labelled(SYNTHETIC, 30)
    expected = [doc[i].get_label() or None for i in range(doc.page_count)]
    assert page_labels(doc) == expected
    assert expected[:4] == [None, None, "i", "ii"] and expected[6] == "XLVII" and expected[9] == "A-1"
    assert expected[14:20] == ["App. a", "App. b", "App. c", "X", "Y", "Z"] and expected[20] == "Cover"
    assert expected[25:27] == ["xmmmcmxcix", "xmmmm"]


@pytest.mark.parametrize("pdf", ["corpus/FAA-S-ACS-6C_Private-Pilot-Airplane-ACS.pdf", "corpus2/R-intro.pdf",
                                 "corpus5/doxygen_manual.pdf", "corpus9/valgrind_manual.pdf"])
def test_labels_are_get_labels_on_real_pdfs(pdf: str) -> None:
    with pymupdf.open(ROOT / "tests" / pdf) as doc:
        assert doc.get_page_labels()
        assert page_labels(doc) == [doc[i].get_label() or None for i in range(doc.page_count)]


def test_letters_past_z_follow_the_pdf_standard() -> None:
    """PDF 32000-1, 12.4.2: "a to z for the first 26 pages, aa to zz for the next 26, and so on"."""
    assert expand([{"startpage": 0, "style": "a", "firstpagenum": 25}], 5) == ["y", "z", "aa", "bb", "cc"]
    assert expand([{"startpage": 0, "style": "A", "firstpagenum": 53}], 1) == ["AAA"]


def test_long_odd_and_hostile_labels_are_dropped_or_cleaned() -> None:
    rules = [{"startpage": 0, "prefix": "L" * 5000, "style": "D", "firstpagenum": 1},
             {"startpage": 1, "prefix": "P" * (MAX_LABEL_CHARS - 1), "style": "D", "firstpagenum": 9},
             {"startpage": 2, "prefix": "P" * (MAX_LABEL_CHARS - 1), "style": "D", "firstpagenum": 10},
             {"startpage": 3, "prefix": "", "style": "r", "firstpagenum": 10 ** 12},  # a gigabyte of "m"
             {"startpage": 4, "prefix": "", "style": "D", "firstpagenum": 10 ** 5000},
             {"startpage": 5, "prefix": "", "style": "a", "firstpagenum": 10 ** 9},
             {"startpage": 6, "prefix": "A\x00-\n\t", "style": "D", "firstpagenum": 3},
             {"startpage": 7, "prefix": "  \x01 ", "firstpagenum": 1}]
    t0 = time.perf_counter()
    assert expand(rules, 8) == [None, "P" * 31 + "9", None, None, None, None, "A - 3", None]
    assert time.perf_counter() - t0 < 1


def test_a_4999_page_pdf_with_4999_label_ranges_parses_in_seconds(tmp_path: Path) -> None:
    doc = pymupdf.open(many_pages_pdf(tmp_path / "pages.pdf", 4999))  # one line of text a page
    rules = [{"startpage": i, "prefix": f"S{i}-", "style": "D", "firstpagenum": 1} for i in range(4999)]
    rules[7] = {"startpage": 7, "prefix": "Z" * 5000, "style": "D", "firstpagenum": 1}  # printed in every citation
    doc.set_page_labels(rules)
    path = tmp_path / "labels.pdf"
    doc.save(path)
    doc.close()
    t0 = time.perf_counter()
    parsed = parse(read_path(str(path), 100_000_000), Limits())
    seconds = time.perf_counter() - t0
    assert len(parsed.pages) == 4999
    assert [p.label for p in parsed.pages[:3]] == ["S0-1", "S1-1", "S2-1"] and parsed.pages[-1].label == "S4998-1"
    assert parsed.pages[7].label is None  # too long: cited by its page number
    assert seconds < 30, seconds  # 3-6 s here; PyMuPDF's get_label per page took 284 s


# ------------------------------------------------------------------------------ item 7: nothing to search
def _footer_only_pdf(path: Path) -> Path:
    """Pages whose only visible text is a running footer; their body is hidden (white) text."""
    doc = pymupdf.open()
    for _ in range(6):
        page = doc.new_page()
        page.insert_text((72, 300), "Hidden white text that nobody sees, about carburetor icing. " * 2, fontsize=11,
                         color=(1, 1, 1))
        page.insert_text((72, 770), "Skylark Aircraft Company - Company Confidential - Revision 3", fontsize=9)
    doc.save(path)
    doc.close()
    return path


def test_a_pdf_without_body_text_is_refused_naming_the_file_and_ocr(settings, tmp_path: Path) -> None:
    collection = f"empty-{RUN}"
    pdf = _footer_only_pdf(tmp_path / "footer-only.pdf")
    # no progress line: a loaded machine took 30 s to prepare the embedding model, and the line it wrote then
    # is not the refusal this test reads
    res = run_cli("ingest", str(pdf), "--collection", collection, env={"CHAPTERVERSE_PROGRESS_INTERVAL_S": "3600"})
    assert res.returncode == 1, (res.stdout, res.stderr)
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, res.stderr
    assert str(pdf) in lines[0] and "nothing searchable" in lines[0] and "CHAPTERVERSE_OCR_MODE=always" in lines[0]
    off = run_cli("ingest", str(pdf), "--collection", collection, env={"CHAPTERVERSE_OCR_MODE": "off"})
    assert off.returncode == 1 and "OCR is off" in off.stderr and "CHAPTERVERSE_OCR_MODE=auto" in off.stderr
    assert _documents(settings, collection) == []


def test_the_ingest_entry_refuses_it_too_and_stores_nothing(settings, embedder, tmp_path: Path) -> None:
    collection = f"empty-entry-{RUN}"
    pdf = _footer_only_pdf(tmp_path / "footer-only.pdf")
    with pytest.raises(InputError, match=r"footer-only\.pdf: nothing searchable found: its 6 page\(s\)"):
        ingest_source(settings, embedder, read_path(str(pdf), 10_000_000), collection, quiet=True)
    assert _documents(settings, collection) == []


# ------------------------------------------------------------------------------ item 4: the declared title
def test_control_characters_in_the_declared_title_are_stripped(settings, tmp_path: Path) -> None:
    doc = pymupdf.open()
    doc.new_page().insert_textbox(pymupdf.Rect(72, 72, 540, 700), "Carburetor icing can occur at temperatures "
                                  "up to 90 degrees Fahrenheit when the humidity is high. " * 4, fontsize=11)
    doc.set_metadata({"title": "placeholder"})
    info = int(doc.xref_get_key(-1, "Info")[1].split()[0])
    doc.xref_set_key(info, "Title", r"(Skylark\000 Pilot\001Handbook\r\nR\351vision 2)")
    path = tmp_path / "nul-title.pdf"
    doc.save(path)
    doc.close()
    with pymupdf.open(path) as check:
        assert "\x00" in check.metadata["title"]  # the PDF really declares it (MuPDF cuts an ASCII one at a NUL)
    collection = f"title-{RUN}"
    res = run_cli("ingest", str(path), "--collection", collection, "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["results"][0]["status"] == "ingested"
    assert [d["title"] for d in _documents(settings, collection)] == ["Skylark Pilot Handbook Révision 2"]
    from retrieval.cli import titles_of  # noqa: PLC0415  (what search and ask show instead of the file name)

    assert titles_of(settings, ["nul-title.pdf"]) == {"nul-title.pdf": "Skylark Pilot Handbook Révision 2"}

