"""Table rows as units (retrieval/text/tables.py): recovered by line grouping, written one row per line of
page text, so a row can be retrieved and quoted verbatim and the quote check finds it; two-column
prose is never taken for a table."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest

from ingest.pdf import extract
from retrieval.text.tables import Line, find_tables
from retrieval.answer.verify import locate
from tests.conftest import DEV_PDFS
from tests.pdfgen import LIMITATIONS_HEADER, LIMITATIONS_ROWS, aircraft_manual_pdf

ROW = "VNE | Never-exceed speed | 149 KIAS"


def grid(rows: list[list[str]], xs: list[float], top: float = 100, step: float = 20) -> list[Line]:
    """Lines laid out as a table: cell text at column x positions, one row per ``step`` points."""
    out = []
    for r, cells in enumerate(rows):
        for c, text in enumerate(cells):
            out.append(Line(text, xs[c], top + r * step, xs[c] + 5.5 * len(text), top + r * step + 11))
    return out


def test_aligned_short_cells_are_a_table_with_a_header_row() -> None:
    lines = grid([list(LIMITATIONS_HEADER), *map(list, LIMITATIONS_ROWS)], [72, 152, 392])
    tables = find_tables(lines)
    assert len(tables) == 1
    rows = tables[0].row_texts(lines)
    assert rows[0] == "Symbol | Airspeed | KIAS"
    assert ROW in rows


def test_two_aligned_lines_and_two_column_prose_are_not_tables() -> None:
    assert find_tables(grid([["VNE", "149 KIAS"], ["VNO", "128 KIAS"]], [72, 200])) == []
    prose = [["(a) No person may operate a civil air-", "(c) The pilot in command of an"],
             ["craft unless it is in an airworthy con-", "aircraft is responsible for determining"],
             ["dition. The pilot in command shall dis-", "whether that aircraft is in condition"],
             ["continue the flight when unairworthy", "for safe flight. The pilot in command"]]
    assert find_tables(grid(prose, [72, 320])) == []


def test_a_row_continuing_a_table_may_hold_one_longer_remarks_cell() -> None:
    """The POH's maneuvering-speed row has an 11-word remarks cell: it stays a row of the table above it
    (it was cut off, and the flap row after it with it), but a band standing alone with such a cell is no
    row, and a row whose longer cell spoils the table is left out rather than taking the table with it."""
    head = [["Airspeed", "KIAS", "Remarks"], ["VNE never exceed", "149", "Do not exceed"],
            ["VNO cruising", "118", "Smooth air only"]]
    long = ["VA maneuvering speed", "97", "Do not make full or abrupt control movements above this speed"]
    lines = grid([*head, long, ["VFE flaps", "85", "Flaps extended only"]], [72, 250, 300])
    rows = [r for t in find_tables(lines) for r in t.row_texts(lines)]
    assert "VA maneuvering speed | 97 | Do not make full or abrupt control movements above this speed" in rows
    assert "VFE flaps | 85 | Flaps extended only" in rows and len(rows) == 5
    alone = grid([long, ["VFE flaps", "85", "Flaps extended only"], ["VX", "62", "Best angle"]], [72, 250, 300])
    assert find_tables(alone) == [] or all(  # a long cell does not start a table
        "VA maneuvering" not in r for t in find_tables(alone) for r in t.row_texts(alone))
    two_long = ["VA maneuvering", "97 and more words than any cell of a row should have in a table", long[2]]
    assert find_tables(grid([*head, two_long], [72, 250, 300]))[0].rows.__len__() == 3  # two long cells: no row
    # the VA row set 60 points below the rows above (their gaps are 20): with it the rows are unevenly spaced
    spoiler = grid(head, [72, 250, 300]) + grid([long, ["VFE flaps", "85", "Flaps extended only"]],
                                                [72, 250, 300], top=100 + 2 * 20 + 60)
    kept = [r for t in find_tables(spoiler) for r in t.row_texts(spoiler)]
    assert "Airspeed | KIAS | Remarks" in kept and not any(r.startswith("VA ") for r in kept)


def test_generated_limitations_table_rows_are_lines_of_the_page_text(tmp_path: Path) -> None:
    with pymupdf.open(aircraft_manual_pdf(tmp_path / "skylark.pdf")) as doc:
        page = extract(doc)[0]
    for cells in (LIMITATIONS_HEADER, *LIMITATIONS_ROWS):
        assert " | ".join(cells) in page.text.split("\n")
    m = locate(ROW, page.text)  # what verify does with a quoted row
    assert m is not None and m.text == " ".join(ROW.split(" | "))  # the PDF's words: no inserted "|"
    # header cells are not section headings; the section title before the table still is
    assert [h.text for h in page.headings] == ["Skylark 150 Pilot Operating Handbook", "Section 2 Airspeed Limitations"]


def test_table_written_column_by_column_is_read_row_by_row(tmp_path: Path) -> None:
    """The PDF draws the first column top to bottom, then the next: text extraction alone yields
    "VNE VNO VA … Never-exceed speed …"; the rows come back in reading order."""
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_textbox(pymupdf.Rect(72, 60, 540, 100), "Operating limitations of the glider.", fontsize=10)
    rows = [LIMITATIONS_HEADER, *LIMITATIONS_ROWS]
    for c, x in enumerate((72, 152, 392)):
        for r, cells in enumerate(rows):
            page.insert_text((x, 130 + 18 * r), cells[c], fontsize=10)
    path = tmp_path / "columns.pdf"
    doc.save(path)
    doc.close()
    with pymupdf.open(path) as d:
        plain = d[0].get_text()
        text = extract(d)[0].text
    assert ROW not in plain  # the problem this solves
    assert ROW in text.split("\n")
    assert text.index("Operating limitations") < text.index("Symbol | Airspeed | KIAS") < text.index(ROW)


@pytest.mark.parametrize("pdf", [p for p in DEV_PDFS if "CFR" in p.name], ids=lambda p: p.name[:12])
def test_two_column_regulation_pages_have_no_tables(pdf: Path) -> None:
    """14 CFR Part 91 is set in two narrow columns: no line of it may be joined with its neighbour
    in the other column."""
    with pymupdf.open(pdf) as doc:
        pages = extract(doc, range(0, 40))
    assert not any(" | " in p.text for p in pages)
