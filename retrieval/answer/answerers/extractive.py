"""The extractive answerer: the best supporting sentence(s) of the shown pages, verbatim.

No model service is needed. The shown page slices are widened to whole sentences by
``retrieval.answer.ask``; every sentence of them is a candidate quote, except headings and contents
entries (``is_title``). A sentence that stops before its end ("... assuming normal cruising speed—")
continues into the following lines ("(1) During the day ...; or (2) At night, ... 45 minutes."), and
a table value ("1 statute mile ......") stays with the row label before it. Word lists (stopwords,
units, question words) come from the collection's ``retrieval.profile.Profile``.

Features (cheap lexical ones first; only the ``MAX_EMBEDDED`` most promising sentences are embedded):

- ``lex``: the share of the question's content words (stemmed, stopwords dropped) found in the
  sentence itself and its section heading, each word weighted by its inverse document frequency in
  the index (rare words weigh most), counting only words some shown passage uses — so a
  paraphrase's own words ("crowded town") neither help nor hurt, while a word the documents do use
  ("night") tells the night rule from the day rule;
- ``cos``: bi-encoder cosine of the question and the sentence *under its section heading*
  (``Passage.context``), so "400 feet AGL" under "Engine Failure After Liftoff" reads as what it is;
- the retrieval rank of the passage the sentence came from: ``RANK_PENALTY`` per rank below the first.

``evidence = cos + LEX_WEIGHT * lex - RANK_PENALTY * (rank - 1)``
(both cosines are the same one-vector-per-sentence cosine since the latency work).

Gates before any threshold (``retrieval.answer.answerers.evidence``, ``retrieval.answer.answerers.keyterms``):

- **answer type**: a quantity question ("how high", "what is the maximum weight", "which
  frequencies") only takes sentences that state a compatible quantity (a number with a unit of that
  kind); when none of the shown sentences does, the answerer refuses;
- **specific terms**: when a name or designator of the question ("Cessna", "172S") occurs nowhere
  in the searched collection (document frequency 0), the answerer refuses;
- **key terms**: when the question uses technical phrases the collection knows ("emergency locator
  transmitter", "light-sport"), a sentence is only eligible when its passage is about them;
- **about**: a sentence (with its heading) must carry at least ``MIN_COVERAGE`` of the question's
  weight, and every name of the form word + letter/number ("Class G", "Part 61") the shown text
  uses: "Class D" does not answer "Class G".

Then the best eligible sentence must score at least ``threshold`` (calibrated on the dev set with
``chapterverse eval answers ... --calibrate``; see ``chapterverse_lab.answer_eval.calibrate``), or, with
a second judge (``judge``: the reader of ``retrieval.reader``, scorer 'evidence+reader'), the reader,
scoring the same eligible sentences under their headings, must rank the same sentence first with
probability at least ``AGREEMENT_MIN``: two judges built differently that pick the same sentence are
right far more often than either alone at that score. The answer
quotes it and up to ``MAX_QUOTES - 1`` more eligible sentences from *other pages* that score within
``QUOTE_MARGIN`` of it, each with its neighbours in the same paragraph up to ``QUOTE_WORDS`` words
(``with_neighbours``): the sentence that matches the question's words best often only names the
topic, and the next or previous one states the answer. The answer text is the best sentence under the profile's lead naming its
page; every other word shown is a verified quote.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np

from retrieval.text.tables import is_table_row
from retrieval.answer.answerers import Draft
from retrieval.answer.answerers.evidence import expected_answer, satisfies, specific_terms
from retrieval.answer.answerers.keyterms import KeyTerm, PhraseStats, key_term_counts, key_terms, on_topic, passage_terms
from retrieval.answer.answerers.followup import followup_terms, standalone_without_model
from retrieval.answer.answerers.lexical import content_terms, coverage, terms_with_words
from retrieval.models import Turn
from retrieval.profile import DEFAULT_PROFILE, Profile
from retrieval.text.textnorm import normalize
from retrieval.answer.verify import Claim, PageText, Strictness, Verdict, too_short, verify_claim

LEX_WEIGHT = 0.75
RANK_PENALTY = 0.02  # per retrieval rank below the first
DEFAULT_THRESHOLD = 1.1253  # `chapterverse eval calibrate` over the probe runs of the two dev sets only (results/threshold_calibration.json)
QUOTE_MARGIN = 0.15  # further quotes (other pages) must score within this of the best
MAX_QUOTES = 3
MAX_SENTENCE_WORDS = 80
MIN_COVERAGE = 0.15  # share of the question's (shown) term weight a quote and its heading must carry
NAME_PIECES = 3  # a word the tokenizer cuts into this many pieces is a made-up name (``unfamiliar_words``)
MAX_EMBEDDED = 16  # sentences embedded per question (the rest lose on lexical features already)
QUOTE_WORDS = 50  # a chosen sentence is quoted with its paragraph neighbours up to this many words
# The reader (retrieval.reader), a cross-encoder trained here, is the second judge: it accepts a first
# quote below DEFAULT_THRESHOLD when it ranks that sentence first too, with at least this probability.
AGREEMENT_MIN = 0.8472  # the judge's probability for the evidence scorer's first sentence, when it ranks it first too: `eval calibrate` over the two dev sets only (results/agreement/)


class SentenceReader(Protocol):
    """Scores (question, sentence under its heading) pairs: probability the sentence states the answer."""

    name: str

    def score(self, question: str, texts: Sequence[str]) -> np.ndarray: ...

_TOC_ENTRY = re.compile(r"(?:\.{4,}|(?:\. ){4,}|…{2,})\s*(?:[0-9]+(?:-[0-9]+)?|[ivxlc]+|[0-9]+-[ivxlc]+)\s*$", re.IGNORECASE)
_SENT = re.compile(r"(?<=[.;?!])[\"')\]]?\s+(?=[\"'(\[§A-Z0-9])")
_SENT_LOWER = re.compile(r"(?<=[.?!])[\"')\]]?\s+(?=[a-z])")  # "… two major differences. refresh reformats …"
_LAST_WORD = re.compile(r"(\S+)[\"')\]]?\s*\Z")

Embed = Callable[[Sequence[str]], np.ndarray]  # texts → L2-normalised rows
DocFreq = Callable[[Sequence[str]], tuple[dict[str, int], int]]  # words → (chunks containing each, chunks)
WordPieces = Callable[[str], int]  # a word → how many pieces the embedding model's tokenizer makes of it


def term_weights(question: str, doc_freq: DocFreq | None, profile: Profile = DEFAULT_PROFILE) -> dict[str, float]:
    """Stemmed question terms → inverse document frequency (uniform without ``doc_freq``)."""
    terms = terms_with_words(question, profile)
    if doc_freq is None:
        return dict.fromkeys(terms, 1.0)
    df, n = doc_freq(list(terms.values()))
    return {t: math.log((n + 1) / (df.get(w, 0) + 0.5)) for t, w in terms.items()}


@dataclass(frozen=True)
class Candidate:
    slice_index: int  # into the shown PageTexts
    start: int
    end: int
    text: str  # verbatim slice of the page text


def evidence_score(cos: float, lex: float, rank: int) -> float:
    """A candidate sentence's evidence score (see the module docstring)."""
    return cos + LEX_WEIGHT * lex - RANK_PENALTY * (max(rank, 1) - 1)


@dataclass(frozen=True)
class Scored:
    candidate: Candidate
    cos: float  # question vs the section heading + the sentence
    lex: float  # idf-weighted coverage of the question's (shown) terms by the sentence and its heading
    rank: int  # retrieval rank of the passage the sentence came from (1 = best)
    typed: bool  # states the kind of quantity the question asks for (True when it asks for none)
    on_topic: bool = True  # its passage is about the question's key terms (``keyterms.on_topic``)
    about: bool = True  # covers at least MIN_COVERAGE of the question and every name like "Class G" it asks about
    complete: bool = True  # quoted with its neighbours, it does not stop at a lead-in ("... the following:")

    @property
    def eligible(self) -> bool:
        return self.typed and self.on_topic and self.about and self.complete

    @property
    def evidence(self) -> float:
        return evidence_score(self.cos, self.lex, self.rank)


def passage_rank(passage_id: str) -> int:
    """The retrieval rank in a shown passage id ("P3" → 3); 1 when the id carries none."""
    m = re.fullmatch(r"P(\d+)", passage_id)
    return int(m.group(1)) if m else 1


def _spans(text: str, breaks: Sequence[tuple[int, int]], start: int, end: int) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    pos = start
    for bs, be in breaks:
        out.append((pos, bs))
        pos = be
    out.append((pos, end))
    trimmed = []
    for s, e in out:
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if e > s:
            trimmed.append((s, e))
    return trimmed


def not_prose(line: str) -> bool:
    """A line that is no part of a sentence: a table-of-contents entry (dot leaders, then a page
    number) or a heading in capitals ("TAKEOFFS, LANDINGS, AND GO-AROUNDS"). Headings reach the
    answerer as the passage heading already; quoted, they would pass for an answer. (Dot leaders
    followed by words are a table row, "Flashing red ...... Taxi clear of runway", and stay.)"""
    if _TOC_ENTRY.search(line):
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
    start: int | None = None
    pos = 0
    for line in text.splitlines(keepends=True):
        if not line.strip() or not_prose(line):
            if start is not None:
                out.append((start, pos))
            start = None
        elif start is None:
            start = pos
        pos += len(line)
    if start is not None:
        out.append((start, pos))
    return out


def sentence_breaks(text: str, start: int, end: int, profile: Profile = DEFAULT_PROFILE) -> list[tuple[int, int]]:
    """Where sentences break in ``text[start:end]``: after ".", ";", "?" or "!" before a capital, a
    digit, a bracket or a quote; with ``profile.lowercase_sentence_starts`` also after ".", "?" or
    "!" before a lower-case word (software manuals open sentences with command names), unless the
    word before the stop is an abbreviation ("e.g. the", "cf. set") or a single letter ("x. y")."""
    breaks = [(m.start(), m.end()) for m in _SENT.finditer(text, start, end)]
    if profile.lowercase_sentence_starts:
        for m in _SENT_LOWER.finditer(text, start, end):
            last = _LAST_WORD.search(text, start, m.start() + 1)
            word = last.group(1).lower() if last else ""
            if word in profile.abbreviations or len(word.rstrip(".?!")) <= 1:
                continue
            breaks.append((m.start(), m.end()))
    return sorted(breaks)


def sentences(text: str, strictness: Strictness = Strictness(),
              profile: Profile = DEFAULT_PROFILE) -> list[tuple[int, int]]:
    """Sentence spans of a page slice; short pieces are joined so each is quotable, over-long ones
    are cut into word windows. A short piece that opens with a number is a value belonging to what
    precedes it (a table row "Day, except as provided in § 91.155(b). 1 statute mile ...... Clear of
    clouds."), so it is joined to the previous sentence; other short pieces go with the next."""
    out: list[tuple[int, int]] = []
    for ps, pe in blocks(text):
        pending: tuple[int, int] | None = None
        block: list[tuple[int, int]] = []
        for s, e in _spans(text, sentence_breaks(text, ps, pe, profile), ps, pe):
            if pending is not None:
                s = pending[0]
            short = too_short(text[s:e], strictness) or len(text[s:e].split()) < 6
            if short and pending is None and block and text[s].isdigit() \
                    and len(text[block[-1][0]:e].split()) <= MAX_SENTENCE_WORDS:
                block[-1] = (block[-1][0], e)
                continue
            if short:
                pending = (s, e)
                continue
            pending = None
            block.append((s, e))
        if pending is not None and not too_short(text[pending[0]:pending[1]], strictness):
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
    end = _lead_in_continued(text, start, end, heading, 2 * budget)
    if (start, end) == (cand.start, cand.end) or not verify_claim(Claim(page.document, page.page, text[start:end]),
                                                                  [page]).ok:
        return cand
    return Candidate(cand.slice_index, start, end, text[start:end])


_INTRODUCES = re.compile(r"[:—–]\s*$")
_PARAGRAPH_END = re.compile(r"\n[ \t]*\n|\Z")


def _lead_in_continued(text: str, start: int, end: int, heading: str, budget: int) -> int:
    """Where a quote ending in a lead-in ("... as shown in the following table:", "Draw only the left
    and bottom borders:") ends once it goes on into what it introduces: the rest of its paragraph
    and the next one (an example line such as "set border 3", a list item), or only the first line of a
    table that follows. Unchanged when what follows is a heading or would pass ``budget`` words."""
    if not introduces(text[start:end]):
        return end
    pos = end
    while pos < len(text) and text[pos].isspace():
        pos += 1
    if pos >= len(text):
        return end
    first_line = text[pos:].split("\n", 1)[0]
    if is_table_row(first_line):
        stop = pos + len(first_line.rstrip())
    else:
        para = _PARAGRAPH_END.search(text, pos)
        stop = para.start() if para else len(text)
        if any(not_prose(line) or is_title(line, heading) for line in text[pos:stop].splitlines() if line.strip()):
            return end
    if len(text[start:stop].split()) > budget:
        return end
    return stop


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


def topical_passages(shown: Sequence[PageText], headings: Mapping[str, str], terms: Sequence[KeyTerm],
                     profile: Profile = DEFAULT_PROFILE) -> set[str]:
    """The shown passage ids whose text (all its slices) and heading are about ``terms``
    (``keyterms.on_topic``)."""
    texts: dict[str, list[str]] = {}
    documents: dict[str, str] = {}
    for p in shown:
        texts.setdefault(p.passage_id, [headings.get(p.passage_id, "")]).append(p.text)
        documents[p.passage_id] = p.document
    return {pid for pid, parts in texts.items()
            if on_topic(passage_terms("\n\n".join(parts), profile), documents[pid], terms)}


_DESIGNATOR = re.compile(r"\b([A-Za-z]{3,})[ \t]+([A-Z]|[0-9]{1,3})\b(?![.,]?[0-9])")


def designators(question: str, profile: Profile = DEFAULT_PROFILE) -> list[str]:
    """Names made of a word and a letter or short number ("Class G", "Part 61", "Figure 3"),
    normalised. "Class G" and "Class D" differ only in what content terms drop (a single letter),
    so such a name is matched as a phrase."""
    out: list[str] = []
    for m in _DESIGNATOR.finditer(question):
        if m.group(1).lower() in profile.stopwords:
            continue
        phrase = normalize(f"{m.group(1)} {m.group(2)}")
        if phrase not in out:
            out.append(phrase)
    return out


def _has_phrase(norm_text: str, phrase: str) -> bool:
    return re.search(rf"(?<![a-z0-9]){re.escape(phrase)}(?![a-z0-9])", norm_text) is not None


def _lexical(question: str, shown: Sequence[PageText], headings: Mapping[str, str], doc_freq: DocFreq | None,
             profile: Profile) -> tuple[list[Candidate], list[str], list[str], list[set[str]], dict[str, float]]:
    """The candidates of ``shown`` with their text and heading (whitespace collapsed), the content
    terms of each (sentence and heading), and the question's term weights restricted to those terms."""
    cands = candidates(shown, headings, profile)
    texts = [" ".join(c.text.split()) for c in cands]
    heads = [" ".join(headings.get(shown[c.slice_index].passage_id, "").split()) for c in cands]
    terms = [set(content_terms(t, profile)) | set(content_terms(h, profile)) for t, h in zip(texts, heads, strict=True)]
    weights = shown_weights(term_weights(question, doc_freq, profile), terms) if cands else {}
    return cands, texts, heads, terms, weights


def score_candidates(question: str, shown: Sequence[PageText], embed: Embed,
                     doc_freq: DocFreq | None = None, headings: Mapping[str, str] | None = None,
                     terms_required: Sequence[KeyTerm] = (), profile: Profile = DEFAULT_PROFILE) -> list[Scored]:
    """The quotable sentences of ``shown`` worth embedding, with their features, best first.
    ``headings``: the section heading of each shown passage, by passage id; ``terms_required``: the
    question's key terms, which the passage of an on-topic sentence uses.

    Lexical features come first and are cheap; only the ``MAX_EMBEDDED`` eligible sentences that
    cover most of the question (then by retrieval rank) are embedded."""
    headings = headings or {}
    cands, texts, heads, terms, weights = _lexical(question, shown, headings, doc_freq, profile)
    if not cands:
        return []
    expected = expected_answer(question, profile)
    topical = topical_passages(shown, headings, terms_required, profile) if terms_required else set()
    norms = [normalize(f"{h} {t}") for h, t in zip(heads, texts, strict=True)]
    names = [d for d in designators(question, profile) if any(_has_phrase(x, d) for x in norms)]
    # a follow-up's own terms ("and at night?"), where the shown text uses them, must be in the quote
    focus = {t for t in followup_terms(question, profile) if any(t in ts for ts in terms)}
    rows = []
    for i, c in enumerate(cands):
        pid = shown[c.slice_index].passage_id
        lex = coverage(weights, terms[i])
        rows.append((i, lex, passage_rank(pid), satisfies(expected, c.text, profile),
                     not terms_required or pid in topical,
                     lex >= MIN_COVERAGE and all(_has_phrase(norms[i], d) for d in names)
                     and (not focus or bool(focus & terms[i]))))
    ok = [r for r in rows if r[3] and r[4] and r[5]]
    pool = ok if ok else rows
    keep = sorted(pool, key=lambda r: (-r[1], r[2]))[:MAX_EMBEDDED]
    with_heads = [f"{heads[r[0]]}: {texts[r[0]]}" if heads[r[0]] else texts[r[0]] for r in keep]
    vecs = embed([question, *with_heads])  # one vector per sentence (under its heading): latency
    cos = vecs[1:] @ vecs[0]
    out = [Scored(cands[i], float(cos[k]), lex, rank, typed, on, about)
           for k, (i, lex, rank, typed, on, about) in enumerate(keep)]
    return sorted(out, key=lambda s: s.evidence, reverse=True)


def under_heading(heading: str, text: str) -> str:
    """A sentence as the reader reads it: whitespace collapsed, after its section heading."""
    heading, text = " ".join(heading.split()), " ".join(text.split())
    return f"{heading}: {text}" if heading else text


def agreement(question: str, first: Scored, eligible: Sequence[Scored], shown: Sequence[PageText],
              headings: Mapping[str, str], judge: SentenceReader) -> float:
    """The judge's probability for ``first`` when it ranks ``first`` best among ``eligible`` (which
    holds it), else 0.0."""
    texts = [under_heading(headings.get(shown[s.candidate.slice_index].passage_id, ""), s.candidate.text)
             for s in eligible]
    probs = judge.score(question, texts)
    at = eligible.index(first)
    return float(probs[at]) if int(np.argmax(probs)) == at else 0.0


def shown_weights(weights: Mapping[str, float], texts_terms: Sequence[set[str]]) -> dict[str, float]:
    """The question's term weights restricted to terms some shown sentence or heading uses: a
    paraphrase's own words ("crowded town") are no evidence either way; the terms the documents do
    use tell one sentence from the next ("at night" vs "during the day")."""
    used = set().union(*texts_terms) if texts_terms else set()
    kept = {t: w for t, w in weights.items() if t in used}
    return kept or dict(weights)


def absent_terms(question: str, doc_freq: DocFreq | None, profile: Profile = DEFAULT_PROFILE,
                 word_pieces: WordPieces | None = None) -> list[str]:
    """The question's specific terms that the collection never uses: names, designators and numbers
    (``specific_terms``), and — given the embedding model's tokenizer as ``word_pieces`` — words its
    general vocabulary does not know either (``unfamiliar_words``: "strsplit", "dplyr", "ggsave").
    A question about a function, package or product the documents never name is not answered by a
    sentence about something else."""
    specific = specific_terms(question, profile)
    if word_pieces is not None:
        specific += [w for w in unfamiliar_words(question, word_pieces, profile) if w not in specific]
    if doc_freq is None or not specific:
        return []
    df, _ = doc_freq(specific)
    return [t for t in specific if df.get(t, 0) == 0]


def unfamiliar_words(question: str, word_pieces: WordPieces, profile: Profile = DEFAULT_PROFILE) -> list[str]:
    """Plain words of the question that the tokenizer splits into ``NAME_PIECES`` or more pieces
    both as written and stemmed ("supposed" is one piece, its stem "suppos" three): made-up names rather than English ("strsplit" → st·rs·pl·it,
    "dplyr", "matplotlib"), where ordinary words, rare ones and inflections included, are one or two
    pieces ("helicopter", "checkride[s]" → check·ride). Only worth anything for words the collection
    never uses (``absent_terms`` checks that); a paraphrase's own English words stay out of it.
    Known limit: long compounds of Latin parts are cut into three pieces too ("autorotation",
    "superimposed"), so a question using one that the documents never use is refused."""
    asked = question.lower().replace("\u2019", "'")
    return [word for term, word in terms_with_words(question, profile).items()
            if word.isalpha() and min(word_pieces(word), word_pieces(term)) >= NAME_PIECES
            and re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", asked)]  # as written, not "single-seat"


def choose_quotes(scored: Sequence[Scored], shown: Sequence[PageText], margin: float = QUOTE_MARGIN) -> list[Scored]:
    """The best eligible sentence, plus up to ``MAX_QUOTES - 1`` eligible ones from other pages
    scoring within ``margin`` of it (``scored`` is best first)."""
    eligible = [s for s in scored if s.eligible]
    if not eligible:
        return []
    best = eligible[0]
    chosen = [best]
    pages = {_page_of(best, shown)}
    for s in eligible[1:]:
        if len(chosen) >= MAX_QUOTES or s.evidence < best.evidence - margin:
            break
        if _page_of(s, shown) in pages:
            continue
        pages.add(_page_of(s, shown))
        chosen.append(s)
    return chosen


def _widened(s: Scored, shown: Sequence[PageText], headings: Mapping[str, str], profile: Profile) -> Scored:
    page = shown[s.candidate.slice_index]
    return replace(s, candidate=with_neighbours(page, s.candidate, heading=headings.get(page.passage_id, ""),
                                                profile=profile))


def _page_of(s: Scored, shown: Sequence[PageText]) -> tuple[str, int]:
    p = shown[s.candidate.slice_index]
    return p.document, p.page


def _claim(s: Scored, shown: Sequence[PageText]) -> Claim:
    p = shown[s.candidate.slice_index]
    return Claim(p.document, p.page, s.candidate.text)


def lead(best: Scored, shown: Sequence[PageText], more: int, profile: Profile = DEFAULT_PROFILE) -> str:
    """The answer text: a fixed framing naming the page, then the best sentence in the source's words."""
    p = shown[best.candidate.slice_index]
    where = f"{p.document}, p. {p.page_label} (PDF p. {p.page})" if p.page_label and p.page_label != str(p.page) \
        else f"{p.document}, p. {p.page}"
    also = " " + profile.more_quoted.format(n=more, s="s" if more > 1 else "") if more else ""
    return f"{profile.answer_lead} ({where}): {' '.join(best.candidate.text.split())}{also}"


class ExtractiveAnswerer:
    name = "extractive"

    def __init__(self, embed: Embed, model: str, threshold: float | None = None,
                 profile: Profile = DEFAULT_PROFILE, word_pieces: WordPieces | None = None,
                 judge: SentenceReader | None = None) -> None:
        """The evidence score picks and accepts the first quote (refusal below ``threshold``, default
        ``DEFAULT_THRESHOLD``); ``judge`` (the reader), when given, accepts a first quote below it when
        it ranks that sentence first too with at least ``AGREEMENT_MIN``."""
        self._embed = embed
        self.judge = judge
        self.scorer = f"evidence+{judge.name}" if judge is not None else "evidence"
        self._word_pieces = word_pieces
        self.profile = profile
        self.model = model
        self.threshold = DEFAULT_THRESHOLD if threshold is None else threshold

    def counts_needed(self, question: str) -> tuple[list[str], list[str]]:
        """(phrases, words) whose chunk counts ``answer`` uses for ``question``: the caller reads them
        all at once (``retrieval.answer.term_stats.statistics``, one statement) and passes them in."""
        phrases, pair_words = key_term_counts(question, self.profile)
        unfamiliar = unfamiliar_words(question, self._word_pieces, self.profile) if self._word_pieces else []
        words = [*terms_with_words(question, self.profile).values(), *specific_terms(question, self.profile),
                 *unfamiliar, *pair_words]
        return phrases, list(dict.fromkeys(words))

    def answer(self, question: str, shown: Sequence[PageText], headings: Mapping[str, str] | None = None,
               stats: PhraseStats | None = None) -> Draft:
        """The draft for ``question`` from the ``shown`` page texts, a function of its arguments:
        ``headings`` (section heading by passage id) and ``stats``, the collection's counts of
        ``counts_needed(question)`` (without them every word weighs the same and no term gate runs)."""
        doc_freq = stats.doc_freq if stats is not None else None
        required = key_terms(question, stats, self.profile)
        scored = score_candidates(question, shown, self._embed, doc_freq, headings, required, self.profile)
        if not scored:
            return Draft(refusal=True, reason="no quotable text in the retrieved passages")
        # each eligible sentence as it would be quoted (with its neighbours), widened once: one that
        # still stops at a lead-in is not eligible, and the chosen ones are quoted so
        quoted = {s.candidate: _widened(s, shown, headings or {}, self.profile).candidate for s in scored if s.eligible}
        scored = [replace(s, complete=not introduces(quoted[s.candidate].text)) if s.candidate in quoted else s
                  for s in scored]
        chosen = choose_quotes(scored, shown, QUOTE_MARGIN)
        top = chosen[0] if chosen else scored[0]
        best_claim = _claim(top, shown)
        score = chosen[0].evidence if chosen else None
        absent = absent_terms(question, doc_freq, self.profile, self._word_pieces)
        if absent:
            return Draft(refusal=True, evidence_score=score, best=best_claim,
                         reason="the searched documents never mention " + ", ".join(f"“{t}”" for t in absent))
        if not chosen and any(s.typed and s.on_topic and s.about for s in scored):
            return Draft(refusal=True, best=best_claim,
                         reason="the best retrieved sentences only introduce a list, table or example that the "
                                "retrieved text does not show")
        if not chosen and any(s.typed and s.on_topic for s in scored):
            names = designators(question, self.profile)
            also = f" and names {', '.join(f'“{n}”' for n in names)}" if names else ""
            return Draft(refusal=True, best=best_claim,
                         reason=f"no retrieved sentence covers enough of the question's terms{also}")
        if not chosen and any(s.typed for s in scored):
            terms = ", ".join(f"“{t.text}”" for t in required)
            return Draft(refusal=True, best=best_claim,
                         reason=f"no retrieved passage that could answer it is about {terms}")
        if not chosen:
            expected = expected_answer(question, self.profile)  # not None: only a quantity question makes sentences ineligible
            what = f"{expected.describe()} (“{expected.cue}”)" if expected else "a quantity"
            return Draft(refusal=True, best=best_claim,
                         reason=f"the question asks for {what}, and no retrieved sentence states one")
        eligible = [s for s in scored if s.eligible]
        agreed = None if self.judge is None else agreement(question, top, eligible, shown, headings or {}, self.judge)
        if top.evidence < self.threshold and (agreed is None or agreed < AGREEMENT_MIN):
            return Draft(refusal=True, evidence_score=top.evidence, agreement=agreed, best=best_claim,
                         reason="no retrieved sentence states the answer clearly enough to quote it as one")
        chosen = [replace(s, candidate=quoted[s.candidate]) for s in chosen]
        top = chosen[0]
        claims = [_claim(s, shown) for s in chosen]
        return Draft(refusal=False, answer=lead(top, shown, len(chosen) - 1, self.profile), claims=claims,
                     evidence_score=top.evidence, agreement=agreed, best=best_claim)

    def repair(self, question: str, shown: Sequence[PageText], draft: Draft,
               failures: Sequence[Verdict]) -> Draft:
        # Its quotes are cut from the shown text, so there is nothing a second attempt would fix.
        return Draft(refusal=True, reason="extractive quotes failed verification", evidence_score=draft.evidence_score)

    def standalone(self, question: str, history: Sequence[Turn]) -> str:
        return standalone_without_model(question, history, self.profile)
