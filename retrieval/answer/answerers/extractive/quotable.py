"""What the extractive answerer can quote (pure functions): the sentences of the shown page slices
(``candidates``), told apart from titles, contents lines and lead-ins, and quoted with their paragraph
neighbours (``with_neighbours``)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from retrieval.answer.verify import Claim, PageText, too_short, verify_claim
from retrieval.profile import DEFAULT_PROFILE, Profile
from retrieval.text.contents import is_contents_entry
from retrieval.text.spans import split_sentences
from retrieval.text.tables import is_table_row
from retrieval.text.textnorm import normalize

MAX_SENTENCE_WORDS = 80
QUOTE_WORDS = 50  # a chosen sentence is quoted with its paragraph neighbours up to this many words


@dataclass(frozen=True)
class Candidate:
    slice_index: int  # into the shown PageTexts
    start: int
    end: int
    text: str  # verbatim slice of the page text


def not_prose(line: str) -> bool:
    """A line that is no part of a sentence: a table-of-contents entry (dot leaders, then a page
    number) or a heading in capitals ("TAKEOFFS, LANDINGS, AND GO-AROUNDS"). Headings reach the
    answerer as the passage heading already; quoted, they would pass for an answer. (Dot leaders
    followed by words are a table row, "Flashing red ...... Taxi clear of runway", and stay.)"""
    if is_contents_entry(line):
        return True
    letters = [c for c in line if c.isalpha()]
    words = [w for w in line.split() if any(c.isalpha() for c in w)]
    return (len(letters) >= 10 and len(words) >= 2 and not any(c.islower() for c in letters)) or title_case(line)


_WORD = re.compile(r"[^\W\d_][\w'’-]*")
MAX_HEADING_WORDS = 8


def title_case(line: str) -> bool:
    """A short line in title case with no closing punctuation: a heading ("Demos and Online
    Examples", "B. Turns To Headings") or a label cell ("Airplane – Single-Engine Land"), which says
    nothing by itself. Every word of four letters or more is capitalised, and there are two such."""
    text = line.strip().strip("|").strip()
    if not text or text[-1] in ".:;?!,)" or "|" in text.replace(" | ", ""):
        return False
    cells = [c.strip() for c in text.split(" | ")]
    words = [w for c in cells for w in _WORD.findall(c)]
    long = [w for w in words if len(w) >= 4]
    return (0 < len(words) <= MAX_HEADING_WORDS and len(long) >= 2
            and all(w[0].isupper() for w in long) and not any(ch.isdigit() for ch in text))


def blocks(text: str) -> list[tuple[int, int]]:
    """Spans of running text: paragraphs, cut at lines that are no part of a sentence (``not_prose``)."""
    out: list[tuple[int, int]] = []
    pos = 0
    for line in text.splitlines(keepends=True):
        if line.strip() and not not_prose(line):
            if out and out[-1][1] == pos:  # the paragraph goes on
                out[-1] = (out[-1][0], pos + len(line))
            else:
                out.append((pos, pos + len(line)))
        pos += len(line)
    return out


def sentences(text: str, profile: Profile = DEFAULT_PROFILE) -> list[tuple[int, int]]:
    """Sentence spans of a page slice; short pieces are joined so each is quotable, over-long ones
    are cut into word windows. A short piece that opens with a number is a value belonging to what
    precedes it (a table row "Day, except as provided in § 91.155(b). 1 statute mile ...... Clear of
    clouds."), so it is joined to the previous sentence; other short pieces go with the next."""
    out: list[tuple[int, int]] = []
    for ps, pe in blocks(text):
        pending: tuple[int, int] | None = None
        block: list[tuple[int, int]] = []
        for s, e in split_sentences(text, ps, pe, lowercase_starts=profile.lowercase_sentence_starts,
                                    abbreviations=profile.abbreviations):
            if pending is not None:
                s = pending[0]
            short = too_short(text[s:e]) or len(text[s:e].split()) < 6
            if short and pending is None and block and text[s].isdigit() \
                    and len(text[block[-1][0]:e].split()) <= MAX_SENTENCE_WORDS:
                block[-1] = (block[-1][0], e)
                continue
            if short:
                pending = (s, e)
                continue
            pending = None
            block.append((s, e))
        if pending is not None and not too_short(text[pending[0]:pending[1]]):
            block.append(pending)
        for s, e in block:
            out.extend(_windows(text, s, e))
    return _continued(text, out)


_ENDS_SENTENCE = re.compile(r"[.?!][\"')\]]?$")


def _continued(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Spans joined to the next when they stop before their sentence does and only blank space
    separates them: "... assuming normal cruising speed—" + "(1) During the day, ...; or" +
    "(2) At night, ... 45 minutes." is one quote, not three (up to ``MAX_SENTENCE_WORDS`` words)."""
    out: list[tuple[int, int]] = []
    for s, e in spans:
        if out:
            ps, pe = out[-1]
            if (pe <= s and not text[pe:s].strip() and not _ENDS_SENTENCE.search(text[ps:pe].rstrip())
                    and not is_table_row(text[ps:pe])  # a table row (retrieval/text/tables.py) is complete
                    and len(text[ps:e].split()) <= MAX_SENTENCE_WORDS):
                out[-1] = (ps, e)
                continue
        out.append((s, e))
    return out


def _windows(text: str, s: int, e: int) -> list[tuple[int, int]]:
    words = [(m.start() + s, m.end() + s) for m in re.finditer(r"\S+", text[s:e])]
    if len(words) <= MAX_SENTENCE_WORDS:
        return [(s, e)]
    step = MAX_SENTENCE_WORDS // 2
    return [(words[i][0], words[min(i + MAX_SENTENCE_WORDS, len(words)) - 1][1])
            for i in range(0, len(words) - step, step)]


_SECTION_NO = re.compile(r"(?:^|(?<=\s))(?:§+\s*)?[0-9A-Z]+(?:\.[0-9A-Za-z]+)+\.?(?=\s|$)")
MAX_TITLE_WORDS = 12
_HYPHENATED_BEFORE = re.compile(r"[A-Za-z]-\s*\Z")


def is_title(sentence: str, heading: str = "") -> bool:
    """A heading or contents entry rather than a statement: the passage's own section heading, or
    text that opens with a section number ("§ 91.151", "3.2", "PA.I.D.K3c") where every piece
    between section numbers is a short title ("91.151 Fuel requirements for flight in VFR
    conditions."). Quoted, it would pass for an answer while saying nothing."""
    text = " ".join(sentence.split())
    norm, head = normalize(text), normalize(" ".join(heading.split()))
    if head and (norm == head or (len(head) >= 12 and head in norm and len(norm) <= len(head) + 20)
                 or (len(norm) >= 12 and norm in head)):
        return True
    first = _SECTION_NO.match(text)
    if first is None:
        return False
    pieces = [x for x in _SECTION_NO.split(text) if x.strip()]
    limit = MAX_TITLE_WORDS if len(pieces) < 2 else 2 * MAX_TITLE_WORDS  # a list of titles: longer ones too
    return all(len(x.split()) <= limit for x in pieces)


def with_neighbours(page: PageText, cand: Candidate, budget: int = QUOTE_WORDS,
                    heading: str = "", profile: Profile = DEFAULT_PROFILE) -> Candidate:
    """``cand`` widened to the sentences around it in the same paragraph — the next one first, then
    the one before, alternately — while the quote stays within ``budget`` words. The sentence that
    matches a question best often names its topic ("The paste() function takes ... arguments") while
    its neighbour states the answer ("The arguments are by default separated ... by a single blank
    character"). A table row, a heading or a sentence from another paragraph is never added."""
    text = page.text
    if is_table_row(cand.text):
        return cand
    spans = sentences(text, profile=profile)
    at = next((j for j, (s, e) in enumerate(spans) if s == cand.start and e == cand.end), None)
    block = next(((bs, be) for bs, be in blocks(text) if bs <= cand.start < be), None)
    if at is None or block is None:
        return cand

    def joinable(j: int) -> bool:
        s, e = spans[j]
        piece = text[s:e]
        return (block[0] <= s and e <= block[1] and not is_table_row(piece) and not is_title(piece, heading)
                and not _HYPHENATED_BEFORE.search(text, 0, s))

    start, end, nxt, prv = cand.start, cand.end, at + 1, at - 1
    grew = True
    while grew:
        grew = False
        if nxt < len(spans) and joinable(nxt) and len(text[start:spans[nxt][1]].split()) <= budget:
            end, nxt, grew = spans[nxt][1], nxt + 1, True
        if prv >= 0 and joinable(prv) and len(text[spans[prv][0]:end].split()) <= budget:
            start, prv, grew = spans[prv][0], prv - 1, True
    end = lead_in_continued(text, start, end, heading, 2 * budget)
    if (start, end) == (cand.start, cand.end) or not verify_claim(Claim(page.document, page.page, text[start:end]),
                                                                  [page]).ok:
        return cand
    return Candidate(cand.slice_index, start, end, text[start:end])


_INTRODUCES = re.compile(r"[:—–]\s*$")
_PARAGRAPH_END = re.compile(r"\n[ \t]*\n|\Z")


def lead_in_continued(text: str, start: int, end: int, heading: str, budget: int) -> int:
    """Where a quote ending in a lead-in ("... as shown in the following table:", "Draw only the left
    and bottom borders:") ends once it goes on into what it introduces: the rest of its paragraph
    and the next one (an example line such as "set border 3", a list item), or only the first line of a
    table that follows. Unchanged when what follows is a heading or would pass ``budget`` words."""
    pos = len(text) - len(text[end:].lstrip())  # where what it introduces starts
    if pos >= len(text):
        return end
    first_line = text[pos:].split("\n", 1)[0]
    if not introduces(text[start:end]):
        return _sentence_completed(text, start, end, pos, first_line, heading, budget)
    if is_table_row(first_line):
        stop = pos + len(first_line.rstrip())
    else:
        para = _PARAGRAPH_END.search(text, pos)
        stop = para.start() if para else len(text)
        if any(not_prose(line) or is_title(line, heading) for line in text[pos:stop].splitlines() if line.strip()):
            return end
    return end if len(text[start:stop].split()) > budget else stop


_STOPS_MID_SENTENCE = re.compile(r"[^\W\d_]\Z")  # ends on a letter: no stop, colon, dash or bracket


def _sentence_completed(text: str, start: int, end: int, pos: int, line: str, heading: str, budget: int) -> int:
    """Where a quote that stops mid-sentence ("A suitable command is then") ends once it takes the line
    that completes it, set apart on its own ("Rscript Analysis.R", often in a face the page layout
    reads as a heading): that one line when a blank line or the page's end follows it, it is not the
    section heading or a contents entry, and the quote stays within ``budget`` words; else ``end``."""
    quote = text[start:end].rstrip()
    if not _STOPS_MID_SENTENCE.search(quote) or is_table_row(quote.rsplit("\n", 1)[-1]):
        return end
    after = pos + len(line)
    alone = not text[after:].strip() or text[after:].startswith("\n") and not text[after + 1:].split("\n", 1)[0].strip()
    if (not line.strip() or not alone or is_title(line, heading) or is_contents_entry(line)
            or len(text[start:after].split()) > budget):
        return end
    return pos + len(line.rstrip())


def introduces(quote: str) -> bool:
    """The quote ends by introducing what follows ("the following table:", "speed—"): by itself it
    promises an answer it does not contain."""
    return _INTRODUCES.search(quote.rstrip()) is not None


def candidates(shown: Sequence[PageText], headings: Mapping[str, str] | None = None,
               profile: Profile = DEFAULT_PROFILE) -> list[Candidate]:
    """Every sentence of the shown slices that would pass verification as a quote of its page
    (a sentence can start inside a word the PDF hyphenated across a block break: such is dropped),
    headings and contents entries aside (``is_title``)."""
    headings = headings or {}
    out = []
    for i, p in enumerate(shown):
        heading = headings.get(p.passage_id, "")
        for s, e in sentences(p.text, profile=profile):
            if is_title(p.text[s:e], heading) or _HYPHENATED_BEFORE.search(p.text, 0, s):
                continue  # a heading, or a span starting inside a word hyphenated across lines ("heli-\ncopters")
            if verify_claim(Claim(p.document, p.page, p.text[s:e]), [p]).ok:
                out.append(Candidate(i, s, e, p.text[s:e]))
    return out
