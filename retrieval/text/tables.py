"""Table rows as units (pure functions over positioned text lines).

PDF text extraction returns a table cell by cell, often column by column ("VNE\\nVNO\\nVA" and then
"149 KIAS\\n128 KIAS\\n104 KIAS"), so no passage holds a row and no quote can state it. Here rows are
recovered by line grouping: lines whose vertical centres agree form a band; a band of two or more
short cells, separated by clear horizontal gaps, is a row candidate; three or more consecutive row
candidates with the same number of cells at the same horizontal positions are a table, unless one of
its columns reads as running text (``prose_column``: several words per line, and words hyphenated at
line ends, justified lines, or lines that go on with the sentence above): that is a page set in two
columns. The first row is taken as the
column headers.

Each row is written as one line of page text, its cells in reading order joined by ``CELL_SEP``
("VNE | Never-exceed speed | 149 KIAS"), so it can be retrieved and quoted verbatim, and the quote
check (which compares against the stored page text) finds it. Two-column prose is left alone: its
lines are long, and cells of a table row are short (``MAX_CELL_WORDS``). PyMuPDF's ``find_tables``
was measured first: ~0.35 s of CPU per page on the dev corpus (more than embedding) and it ran the
words of cells together ("Currentaltimetersetting"), so it is not used.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

CELL_SEP = " | "
MAX_CELL_WORDS = 8  # a table cell is short; a line of running prose usually is not
RUN_CELL_WORDS = 16  # a row that continues a table already found may hold one longer cell (a remarks column)
MIN_ROWS = 3  # header + two rows: two aligned lines alone are too weak a sign
MIN_GAP = 6.0  # points of white space between neighbouring cells
ALIGN = 4.0  # points: cells of one column start (or end) within this of each other
PROSE_MIN_WORDS = 3.0  # mean words per line from which a column may be running text
SPACING = 1.8  # rows of a table are evenly spaced: the widest gap at most this times the narrowest
JUSTIFIED_SLACK = 3.0  # points: a justified line is this close to the widest line of its column


@dataclass(frozen=True)
class Line:
    """One visible text line with its box (x0, y0, x1, y1) in page points."""

    text: str
    x0: float
    y0: float
    x1: float
    y1: float

    @property
    def cy(self) -> float:
        return (self.y0 + self.y1) / 2

    @property
    def height(self) -> float:
        return max(self.y1 - self.y0, 1.0)


@dataclass(frozen=True)
class Table:
    """Rows of line indices (cells left to right); ``rows[0]`` is the header row."""

    rows: tuple[tuple[int, ...], ...]

    @property
    def lines(self) -> frozenset[int]:
        return frozenset(i for row in self.rows for i in row)

    def row_texts(self, lines: Sequence[Line]) -> list[str]:
        return [CELL_SEP.join(" ".join(lines[i].text.split()) for i in row) for row in self.rows]


def bands(lines: Sequence[Line]) -> list[list[int]]:
    """Line indices grouped by vertical centre (top to bottom), each band left to right."""
    order = sorted(range(len(lines)), key=lambda i: (lines[i].cy, lines[i].x0))
    out: list[list[int]] = []
    for i in order:
        if out:
            ref = lines[out[-1][0]]
            if abs(lines[i].cy - ref.cy) <= 0.4 * min(ref.height, lines[i].height):
                out[-1].append(i)
                continue
        out.append([i])
    return [sorted(b, key=lambda i: lines[i].x0) for b in out]


def is_row(band: Sequence[int], lines: Sequence[Line], continues: bool = False) -> bool:
    """A band of two or more short cells with clear gaps between them. ``continues``: the band would
    extend a run of ``MIN_ROWS`` rows already aligned, so one of its cells may be up to
    ``RUN_CELL_WORDS`` words ("VA | maneuvering speed | 97 | Do not make full or abrupt control
    movements above this speed"); a band standing alone keeps the short-cell rule."""
    if len(band) < 2:
        return False
    cells = [lines[i] for i in band]
    words = sorted(len(c.text.split()) for c in cells)
    if not all(c.text.strip() for c in cells) or words[-1] > (RUN_CELL_WORDS if continues else MAX_CELL_WORDS):
        return False
    if words[-2] > MAX_CELL_WORDS:  # only one cell may be long (a band has two or more)
        return False
    return all(b.x0 - a.x1 >= MIN_GAP for a, b in zip(cells, cells[1:]))


def _aligned(a: Sequence[int], b: Sequence[int], lines: Sequence[Line]) -> bool:
    return len(a) == len(b) and all(
        abs(lines[i].x0 - lines[j].x0) <= ALIGN or abs(lines[i].x1 - lines[j].x1) <= ALIGN for i, j in zip(a, b))


_CONTINUES = re.compile(r"[a-z](?![.)]\s)")


def prose_column(cells: Sequence[Line]) -> bool:
    """Cells that look like a column of running text (a two-column page), not table cells: several
    words per line and either words hyphenated at line ends or justified lines of equal width."""
    words = sum(len(c.text.split()) for c in cells) / len(cells)
    if words < PROSE_MIN_WORDS:
        return False
    hyphenated = sum(1 for c in cells if re.search(r"[a-z]-$", c.text.rstrip())) / len(cells)
    widest = max(c.x1 - c.x0 for c in cells)
    justified = sum(1 for c in cells if (c.x1 - c.x0) >= widest - JUSTIFIED_SLACK) / len(cells)
    # the next line goes on with the sentence ("… at least 3 statute" / "miles."), not "a. Route"
    goes_on = sum(1 for c in cells[1:] if _CONTINUES.match(c.text.strip())) / max(len(cells) - 1, 1)
    return hyphenated >= 0.2 or justified >= 0.6 or goes_on >= 0.3


def _regular(rows: Sequence[Sequence[int]], lines: Sequence[Line]) -> bool:
    """Rows evenly spaced: no gap between neighbouring rows more than ``SPACING`` times another."""
    ys = [lines[r[0]].cy for r in rows]
    gaps = [b - a for a, b in zip(ys, ys[1:])]
    return len(gaps) < 1 or max(gaps) <= SPACING * max(min(gaps), 1.0)


def _table(run: Sequence[Sequence[int]], lines: Sequence[Line]) -> Table | None:
    rows = run if _regular(run, lines) else run[1:]  # a header far above the rows is no header
    if len(rows) >= MIN_ROWS and _regular(rows, lines) and not any(
            prose_column([lines[row[c]] for row in rows]) for c in range(len(rows[0]))):
        return Table(tuple(tuple(r) for r in rows))
    return None


def _tables(run: Sequence[Sequence[int]], longer: Sequence[int], lines: Sequence[Line]) -> list[Table]:
    """The table a run of rows makes; when rows admitted with a longer cell (``longer``: their indices)
    spoil it (uneven spacing, a column reading as prose), the rows before the first of them and
    those after it are tried on their own, as if it had not been admitted."""
    found = _table(run, lines)
    if found is not None or not longer:
        return [found] if found is not None else []
    first = longer[0]
    return _tables(run[:first], [], lines) + _tables(run[first + 1:], [i - first - 1 for i in longer[1:]], lines)


def find_tables(lines: Sequence[Line]) -> list[Table]:
    """Runs of at least ``MIN_ROWS`` consecutive, aligned row bands whose columns are not running text."""
    tables: list[Table] = []
    run: list[list[int]] = []
    longer: list[int] = []  # rows of the run admitted only with a longer cell (is_row(continues=True))
    for band in bands(lines):
        aligned = bool(run) and _aligned(run[-1], band, lines)
        if is_row(band, lines) and (not run or aligned):
            run.append(band)
            continue
        if aligned and len(run) >= MIN_ROWS and is_row(band, lines, continues=True):
            longer.append(len(run))
            run.append(band)
            continue
        tables += _tables(run, longer, lines)
        run, longer = ([band] if is_row(band, lines) else []), []
    return tables + _tables(run, longer, lines)


def is_table_row(text: str) -> bool:
    """Whether ``text`` is (or ends with) a table row as written into page text: a row is a unit of
    its own, complete without sentence punctuation, so a quote of it does not run on into the next."""
    last = text.rstrip().rsplit("\n", 1)[-1]
    return CELL_SEP in last and all(cell.strip() for cell in last.split(CELL_SEP))


def column_headers(text: str, row_start: int) -> tuple[str, ...]:
    """The header cells of the table whose row starts at ``row_start`` in ``text``: the first of the
    rows with as many cells that run up to it (blank lines between rows allowed); () when the row is
    the first one ``text`` shows of its table, or is no row."""
    row = text[row_start:].split("\n", 1)[0]
    if not is_table_row(row):
        return ()
    width = row.count(CELL_SEP)
    header: str | None = None
    for line in reversed(text[:row_start].splitlines()):
        if not line.strip():
            continue
        if not is_table_row(line) or line.count(CELL_SEP) != width:
            break
        header = line
    return tuple(cell.strip() for cell in header.split(CELL_SEP)) if header is not None else ()


def under_headers(row: str, headers: Sequence[str]) -> str:
    """A row's cells each followed by its column's header ("149 KIAS" for "149" under "KIAS"), so
    what a value measures is read with it; the row as it is without headers or with other cells."""
    cells = row.strip().split(CELL_SEP)
    if not headers or len(cells) != len(headers):
        return row
    return CELL_SEP.join(f"{cell.strip()} {head}" for cell, head in zip(cells, headers, strict=True))
