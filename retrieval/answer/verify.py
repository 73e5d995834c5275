"""Mechanical quote verification (pure functions).

A quote counts as a citation only when, after ``textnorm.normalize``, it is a substring of the
normalised text of the page it cites *as the answerer was shown it* (``PageText``: one document
page, restricted to the slice of the page that a retrieved passage showed). Normalisation forgives
case, whitespace and line breaks, ligatures, curly quotes and dashes, and words hyphenated across
line breaks; nothing else. On top of the substring test the match must sit on word boundaries, so a
quoted "50 knots" does not verify against "250 knots" and "40 degrees" not against "-40 degrees".
Quotes too short to carry meaning are rejected; their length is counted in words as a reader
counts them (``reader_words``: "10,000", "x11()" and "%in%" are one word each). The citation shown to users carries the source's
own words: the normalised match is mapped back to the raw page text.

Two near-quotes are snapped to the page's own words rather than sent back for repair: a quote that
starts or ends inside a word the page broke across two lines with a hyphen ("… to have con-" for
"con-/trol") is widened to the whole word (letters only, never a number), and a quote whose words are
on another page of the same document that the answerer was shown is cited on that page.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from retrieval.answer.misquote import misquote_reason
from retrieval.models import Citation
from retrieval.text.tables import CELL_SEP, is_table_row
from retrieval.text.textnorm import normalize, normalize_with_map

MIN_QUOTE_WORDS = 4  # "a word or two" is not a citation
MIN_QUOTE_CHARS = 12  # normalised characters, so "a b c d" does not pass either

_ALNUM = re.compile(r"\w")
# characters that would extend a number across the match boundary ("1,000" vs ",000", "-40" vs "40")
_NUMBER_GLUE = "-.,"


@dataclass(frozen=True)
class PageText:
    """The text of one page as the answerer was shown it (a slice of the page's own text)."""

    document: str
    page: int  # 1-based PDF page index
    text: str
    page_label: str | None = None
    url: str | None = None
    passage_id: str = ""  # the id the answerer saw for the passage this slice came from
    read_by: str = "text"  # "ocr" / "scan-layer": the page's words were read by OCR (ingest.reading)
    doubtful: tuple[str, ...] = ()  # words with a digit that OCR read with low confidence, on the whole page


@dataclass(frozen=True)
class Claim:
    """A citation as an answerer proposed it: unverified."""

    document: str
    page: int
    quote: str


@dataclass(frozen=True)
class Verdict:
    claim: Claim
    citation: Citation | None  # set when verified: the source's own words
    reason: str = ""  # why it failed, in words a model (repair pass) and a person can act on

    @property
    def ok(self) -> bool:
        return self.citation is not None


@dataclass(frozen=True)
class Match:
    start: int  # raw offsets into the page text
    end: int
    text: str  # the source's own words


@dataclass
class Verification:
    verdicts: list[Verdict] = field(default_factory=list)

    @property
    def citations(self) -> list[Citation]:
        out: dict[tuple[str, int, str], Citation] = {}  # one per page and quote
        for c in (v.citation for v in self.verdicts if v.citation is not None):
            out.setdefault((c.document, c.page, normalize(c.quote)), c)
        return list(out.values())

    @property
    def failures(self) -> list[Verdict]:
        return [v for v in self.verdicts if not v.ok]


def reader_words(text: str) -> int:
    """Words as a reader counts them: whitespace-separated tokens with a letter or digit in them, so
    "10,000", "3.5", "x11()", "%in%" and "set-up" are one word each and a lone dash or bullet is none.
    A word broken across a line ("air- craft") is one word after normalisation."""
    return sum(1 for tok in normalize(text).split() if _ALNUM.search(tok))


def too_short(quote: str) -> bool:
    norm = normalize(quote)
    return reader_words(norm) < MIN_QUOTE_WORDS or len(norm) < MIN_QUOTE_CHARS


# an em dash between two words ("properties—this") is punctuation, not a word broken across a line:
# normalize joins the words around it as it joins "air-craft", yet a quote may start or end at it. An en
# dash between letters is not: it joins a name's parts ("ADS–B", "TSO–C166b"), and a quote cut there cuts the name
WORD_DASHES = "\u2014\u2015"


def _dash_between(raw: str, index: Sequence[int], at: int) -> bool:
    """The raw text between normalised characters ``at - 1`` and ``at`` holds an em dash."""
    return any(ch in WORD_DASHES for ch in raw[index[at - 1] + 1:index[at]])


def _boundary_ok(norm: str, start: int, end: int, raw: str = "", index: Sequence[int] = ()) -> bool:
    """The match [start, end) in ``norm`` neither starts nor ends inside a word or a number. With the
    ``raw`` text and its ``index`` (``normalize_with_map``), an em dash that ``normalize`` dropped between
    two letters is a boundary (``_dash_between``)."""
    first, last = norm[start], norm[end - 1]
    if start > 0 and first.isalnum() and not (index and _dash_between(raw, index, start)):
        before = norm[start - 1]
        if before.isalnum() or (first.isdigit() and before in _NUMBER_GLUE):
            return False
    if end < len(norm) and last.isalnum() and not (index and _dash_between(raw, index, end)):
        after = norm[end]
        # "3" cut out of "3-5", "3.5" or "3,500": the number (or range) goes on past the match
        if after.isalnum() or (last.isdigit() and after in _NUMBER_GLUE and end + 1 < len(norm)
                               and norm[end + 1].isdigit()):
            return False
    return True


_LAYOUT_GAP = " " * len(CELL_SEP)


def without_cell_joiners(text: str) -> str:
    """``text`` with the cell separator that ingest writes between the cells of a table row
    (``CELL_SEP``, " | ") turned back into the blank space the PDF has there; same length, so offsets
    stay valid. The stored text cannot tell a document's own " | " ("ls | grep") from a joiner, so
    it is layout too: a quote may omit it, never change a word around it."""
    if CELL_SEP not in text:
        return text
    return "".join(line.replace(CELL_SEP, _LAYOUT_GAP) if is_table_row(line) else line
                   for line in text.splitlines(keepends=True))


_LINE_BREAK_HYPHEN = re.compile(r"[^\W\d_]-[ \t]*\n[ \t]*$")  # "con-\n": a word the page broke at a line end


def _broken_before(plain: str, at: int) -> bool:
    """The raw text just before ``at`` ends a line with a word broken by a hyphen ("com-\n")."""
    return bool(_LINE_BREAK_HYPHEN.search(plain[max(0, at - 40):at]))


def _broken_after(plain: str, at: int) -> bool:
    """The raw text from ``at`` goes on with the hyphen of a word the page broke at a line end ("-\ntrol")."""
    return bool(re.match(r"-[ \t]*\n", plain[at:at + 40])) and at > 0 and plain[at - 1].isalpha()


def _snapped_cut_word(quote: str, plain: str, hay: str, index: list[int]) -> tuple[int, int] | None:
    """A quote that starts or ends inside a word the page broke across two lines ("… to have con-",
    "pact binary or text …" for "con-/trol", "com-/pact"): its normalised span in ``hay`` widened to the
    whole word, when that is the only difference. Letters only: a number is never widened."""
    needle = normalize(quote)
    cut_end = len(needle) > 1 and needle.endswith("-") and needle[-2].isalpha()
    if cut_end:
        needle = needle[:-1]
    pos = hay.find(needle)
    while pos >= 0:
        start, end = pos, pos + len(needle)
        if start > 0 and hay[start].isalpha() and hay[start - 1].isalpha() and not _dash_between(plain, index, start):
            if not _broken_before(plain, index[start]):
                start = -1
            else:  # back to the word's start: a letter, and no em dash between it and the next
                while start > 0 and hay[start - 1].isalpha() and not _dash_between(plain, index, start):
                    start -= 1
        if start >= 0 and end < len(hay) and hay[end].isalpha() and hay[end - 1].isalpha() \
                and not _dash_between(plain, index, end):
            if not _broken_after(plain, index[end - 1] + 1):
                start = -1
            else:  # on to the word's end, never across an em dash ("con-/trol—this" ends at "trol")
                while end < len(hay) and hay[end].isalpha() and not _dash_between(plain, index, end):
                    end += 1
        if start >= 0 and (start, end) != (pos, pos + len(needle)) and _boundary_ok(hay, start, end, plain, index):
            return start, end
        pos = hay.find(needle, pos + 1)
    return None


def locate(quote: str, source: str) -> Match | None:
    """Find ``quote`` in ``source`` after normalisation; return the source's own words, or None.

    The cell separators of table rows are layout, not words: the quote is found in the source with
    them turned back into blank space, whether the quote carries them (cut from the shown text) or
    not (the PDF's own words), and the words returned never contain them."""
    if not normalize(quote):
        return None
    plain = without_cell_joiners(source)
    hay, index = normalize_with_map(plain)
    for variant in dict.fromkeys((quote, quote.replace(CELL_SEP, _LAYOUT_GAP))):
        needle = normalize(variant)
        pos = hay.find(needle)
        while pos >= 0:
            end = pos + len(needle)
            if _boundary_ok(hay, pos, end, plain, index):
                raw_start, raw_end = index[pos], index[end - 1] + 1
                return Match(raw_start, raw_end, " ".join(plain[raw_start:raw_end].split(_LAYOUT_GAP)))
            pos = hay.find(needle, pos + 1)
    snapped = _snapped_cut_word(quote, plain, hay, index)
    if snapped is not None:  # the page's own whole words, never the model's fragment
        raw_start, raw_end = index[snapped[0]], index[snapped[1] - 1] + 1
        return Match(raw_start, raw_end, " ".join(plain[raw_start:raw_end].split(_LAYOUT_GAP)))
    return None


def doubtful_in(quote: str, doubtful: Sequence[str]) -> list[str]:
    """The words of ``doubtful`` (read by OCR with low confidence) that the quote holds as words."""
    words = {w.strip(".,;:()[]") for w in quote.split()}
    return [w for w in doubtful if w in words]


def verify_claim(claim: Claim, shown: Sequence[PageText]) -> Verdict:
    """Check one claim against the page texts the answerer was shown."""
    if too_short(claim.quote):
        return Verdict(claim, None, f"quote is too short to be a citation (needs at least {MIN_QUOTE_WORDS} words)")
    same_doc = [p for p in shown if p.document == claim.document]
    if not same_doc:
        return Verdict(claim, None, f"document {claim.document!r} was not among the passages provided")
    same_page = [p for p in same_doc if p.page == claim.page]
    # the cited page first; then the other pages of the document the answerer was shown (a passage that
    # runs onto the next page, a page-number slip): the quote is cited where its words are, with that
    # page's label and link
    others = sorted((p for p in same_doc if p.page != claim.page), key=lambda p: p.page)
    for p in [*same_page, *others]:
        m = locate(claim.quote, p.text)
        if m is not None:
            return Verdict(claim, Citation(document=p.document, page=p.page, page_label=p.page_label,
                                           quote=m.text.strip(), url=p.url, read_by=p.read_by,
                                           ocr_doubtful=doubtful_in(m.text, p.doubtful)))
    if not same_page:
        return Verdict(claim, None, f"page {claim.page} of {claim.document!r} was not among the passages provided")
    return Verdict(claim, None, misquote_reason(claim.quote, same_page[0].text, claim.page, claim.document))


def verify_claims(claims: Iterable[Claim], shown: Sequence[PageText]) -> Verification:
    return Verification([verify_claim(c, shown) for c in claims])
