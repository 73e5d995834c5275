"""What a refusal offers instead of an answer (retrieval.answer.refusals): never a contents page."""

from __future__ import annotations

from retrieval.answer.refusals import nearest_of
from retrieval.answer.verify import PageText
from retrieval.text.contents import is_contents_entry, is_contents_text

CONTENTS = ("18 Installation . . . . . . . . . . . . . . . . 447\n18.1 Requirements . . . . . . . . . . 448\n"
            "18.3 Linux . . . . . . . . . . . . . . . . . 450\n18.4 CygWin . . . . . . . . . . . . . . 451")
PROSE = "To install on Linux, unpack the archive and run make install as root; the binaries go to /usr/local/bin."


def test_contents_lines_are_told_from_table_rows_and_prose() -> None:
    assert is_contents_entry("18.3 Linux . . . . . . . . 450") and is_contents_entry("Index ........ iv")
    assert not is_contents_entry("Flashing red ...... Taxi clear of runway")
    assert is_contents_text(CONTENTS) and not is_contents_text(PROSE)
    assert not is_contents_text(PROSE + "\nSee also . . . . . 12")  # one entry is not a contents page


def test_a_refusal_never_offers_a_contents_page_as_the_nearest_passage() -> None:
    shown = [PageText("m.pdf", 3, CONTENTS), PageText("m.pdf", 450, PROSE)]
    nearest = nearest_of(shown)
    assert [n.page for n in nearest] == [450] and ". . . ." not in nearest[0].snippet
