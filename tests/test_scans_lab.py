"""The scanned-copy lab (``chapterverse_lab.scans``): the word comparison and the image-only copy."""

from __future__ import annotations

from pathlib import Path

from chapterverse_lab.scans import scan_copy, spread, word_agreement, words
from ingest.mupdf import pymupdf


def test_identical_text_agrees_fully() -> None:
    text = "Under 14 CFR 91.113, the aircraft with 10,000 hours has the right-of-way."
    a = word_agreement(text, text)
    assert a["ocr_in_reference"] == 1.0 and a["reference_in_ocr"] == 1.0
    assert a["reference_words"] == a["ocr_words"] == 12
    assert words(text)["91.113"] == words(text)["10,000"] == 1  # one word each, not split at the punctuation


def test_a_dropped_word_lowers_reference_in_ocr_only() -> None:
    a = word_agreement("the pilot shall maintain altitude", "the pilot maintain altitude")
    assert a["reference_words"] == 5 and a["ocr_words"] == 4
    assert a["reference_in_ocr"] == 0.8
    assert a["ocr_in_reference"] == 1.0


def test_words_count_as_multisets() -> None:
    a = word_agreement("the the the", "the")
    assert a["ocr_in_reference"] == 1.0 and abs(a["reference_in_ocr"] - 1 / 3) < 1e-9


def test_line_break_hyphen_and_case_are_forgiven() -> None:
    a = word_agreement("the air-\ncraft", "The aircraft")
    assert a["ocr_in_reference"] == 1.0 and a["reference_in_ocr"] == 1.0


def test_empty_sides() -> None:
    both = word_agreement("", "  ")
    assert both["ocr_in_reference"] == 1.0 and both["reference_in_ocr"] == 1.0
    missed = word_agreement("some words", "")
    assert missed["ocr_in_reference"] == 0.0 and missed["reference_in_ocr"] == 0.0


def test_spread_pages() -> None:
    assert spread(10, None) == list(range(10))
    assert spread(3, 5) == [0, 1, 2]
    assert spread(10, 3) == [0, 3, 7]


def _one_page_pdf(path: Path) -> None:
    with pymupdf.open() as doc:
        page = doc.new_page(width=300, height=200)
        page.insert_text((20, 50), "Aircraft right-of-way rules", fontsize=14)
        doc.set_metadata({"title": "Test handbook"})
        doc.save(path)


def test_scan_copy_has_one_full_page_image_and_no_text(tmp_path: Path) -> None:
    src, dest = tmp_path / "handbook.pdf", tmp_path / "scans" / "handbook.pdf"
    _one_page_pdf(src)
    assert scan_copy(src, dest, 72) == 1
    with pymupdf.open(dest) as doc:
        assert doc.page_count == 1
        assert doc.metadata["title"] == "Test handbook"
        page = doc[0]
        assert page.get_text().strip() == ""
        assert (page.rect.width, page.rect.height) == (300, 200)
        images = page.get_images(full=True)
        assert len(images) == 1
        assert page.get_image_rects(images[0][0]) == [page.rect]


def test_scan_copy_with_skew_noise_is_deterministic(tmp_path: Path) -> None:
    src = tmp_path / "handbook.pdf"
    _one_page_pdf(src)
    a, b = tmp_path / "a" / "handbook.pdf", tmp_path / "b" / "handbook.pdf"
    scan_copy(src, a, 72, skew_noise=True, seed=3)
    scan_copy(src, b, 72, skew_noise=True, seed=3)
    with pymupdf.open(a) as da, pymupdf.open(b) as db:
        assert da[0].get_text().strip() == ""
        image_a = da.extract_image(da[0].get_images()[0][0])["image"]
        assert image_a == db.extract_image(db[0].get_images()[0][0])["image"]
