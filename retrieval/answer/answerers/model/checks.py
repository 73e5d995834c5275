"""What a model's verified draft must still pass before it is shown (``settled``, the model answerers'
``settle``); the extractive answerer's text is cut from the pages, so none of this applies to it.

- The optional support check (``support_filtered``, off by default): verified quotes the trained
  reader finds to say nothing towards the question are dropped, never emptying an answer.
- The answer-text check (``retrieval.answer.answerers.model.support.unsupported``): the model's own text
  is shown only when its verified quotes, as shown (joined), back every number, unit, negation and name in it;
  otherwise its verified quotes are shown alone and the text is kept in ``Answer.withheld_text``.
  A "No" to a yes/no question that no quote's negation backs (``rests_on_absence``) is a refusal
  instead: the quotes list what the documents have, not that the asked-for thing is missing.
- Adjacent quotes on one page are shown as one quote (``join_adjacent``), and a quote that ends by introducing
  an example, list or table goes on into it (``lead_ins_continued``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from retrieval.answer.answerers import Request, Response
from retrieval.answer.answerers.extractive.quotable import QUOTE_WORDS, introduces, lead_in_continued
from retrieval.answer.answerers.extractive.scoring import SentenceReader
from retrieval.answer.answerers.model.support import rests_on_absence, unsupported
from retrieval.answer.verify import Match, PageText, Verification, doubtful_in, locate
from retrieval.models import Answer, Citation
from retrieval.profile import Profile

log = logging.getLogger(__name__)


SUPPORT_MIN = 0.05  # a model's verified quote the reader rates below this is doubted


def support_doubts(citations: Sequence[Citation], question: str, reader: SentenceReader | None) -> set[int]:
    """Indices of the verified quotes the reader finds to say nothing towards the question (probability
    below ``SUPPORT_MIN``); none without a reader. The bar is low on purpose: a model may cite context
    beside the sentence that answers. What is done with a doubt is ``support_filtered``'s."""
    if reader is None or not citations:
        return set()
    probs = reader.score(question, [" ".join(c.quote.split()) for c in citations])
    return {i for i, p in enumerate(probs) if float(p) < SUPPORT_MIN}


MAX_JOIN_GAP = 120  # characters of page text between two quotes that are shown as one
MAX_JOINED = 700  # characters a joined quote may reach


def _placed(c: Citation, shown: Sequence[PageText]) -> tuple[PageText, Match] | None:
    for p in shown:
        if p.document == c.document and p.page == c.page and (m := locate(c.quote, p.text)) is not None:
            return p, m
    return None


def join_adjacent(citations: Sequence[Citation], shown: Sequence[PageText]) -> list[Citation]:
    """Verified quotes that follow each other closely on the same shown page become one quote, the
    page's own words from the first one's start to the second one's end: a reader sees "(1) During
    the day, ... 30 minutes; or (2) At night, ... 45 minutes." as the one passage it is, not two
    fragments. Only neighbours in the given order are joined, never across more than ``MAX_JOIN_GAP``
    characters of page text, never past ``MAX_JOINED``; a joined quote is located again, so it is
    verbatim page text like any other."""
    out: list[Citation] = []
    last: tuple[PageText, Match] | None = None
    for c in citations:
        here = _placed(c, shown)
        if last is not None and here is not None and here[0] is last[0]:
            page, prev = last
            start, end = min(prev.start, here[1].start), max(prev.end, here[1].end)
            gap = max(here[1].start - prev.end, prev.start - here[1].end, 0)
            near = gap <= MAX_JOIN_GAP and end - start <= MAX_JOINED
            joined = locate(page.text[start:end], page.text) if near else None
            if joined is not None:
                out[-1] = out[-1].model_copy(update={"quote": joined.text.strip(),
                                                     "ocr_doubtful": doubtful_in(joined.text, page.doubtful)})
                last = (page, Match(start, end, joined.text))
                continue
        out.append(c)
        last = here
    return out


def lead_ins_continued(citations: Sequence[Citation], shown: Sequence[PageText]) -> list[Citation]:
    """A verified quote that ends by introducing what follows on its page ("… can be done with '-lmpfr -lgmp'
    (in that order), for example:", "… the following table:") goes on into it, as the extractive answerer's
    quotes do (``quotable.lead_in_continued``): the example line, the rest of the paragraph or a table's first
    row, within ``2 * QUOTE_WORDS`` words, never into a heading. The page's own words, located again; another
    quote of the same page that the longer one now holds is not shown twice."""
    out: list[Citation] = []
    longer_ones: list[Citation] = []
    for c in citations:
        placed = _placed(c, shown)
        if placed is not None and introduces(placed[1].text):
            page, m = placed
            stop = lead_in_continued(page.text, m.start, m.end, "", 2 * QUOTE_WORDS)
            longer = locate(page.text[m.start:stop], page.text) if stop > m.end else None
            if longer is not None:
                c = c.model_copy(update={"quote": longer.text.strip(),
                                         "ocr_doubtful": doubtful_in(longer.text, page.doubtful)})
                longer_ones.append(c)
        out.append(c)
    return [c for c in out if not any(o is not c and (o.document, o.page) == (c.document, c.page)
                                      and locate(c.quote, o.quote) is not None for o in longer_ones)]


def quoted_pages(citations: Sequence[Citation], shown: Sequence[PageText]) -> list[str]:
    """The shown text of each page a citation is on (what backs a name the question states too)."""
    on = {(c.document, c.page) for c in citations}
    return [p.text for p in shown if (p.document, p.page) in on]


def support_filtered(verification: Verification, answer: str, question: str, support: SentenceReader | None,
                      profile: Profile, result: Answer, shown: Sequence[PageText]) -> Verification:
    """A model's verified quotes without those the reader doubts (``support_doubts``), only when
    an undoubted one remains and the answer text stays backed by what remains: the check never empties
    an answer, never calls the model again, and never cuts the quote that carries the answer's numbers."""
    citations = verification.citations
    doubted = support_doubts(citations, question, support)
    kept = [c for i, c in enumerate(citations) if i not in doubted]
    if not doubted or not kept:
        return verification
    if unsupported(answer, [c.quote for c in kept], profile, question=question, pages=quoted_pages(kept, shown)) \
            and not unsupported(answer, [c.quote for c in citations], profile, question=question,
                                pages=quoted_pages(citations, shown)):
        return verification
    result.unsupported_dropped += len(doubted)
    drop = {(c.document, c.page, c.quote) for i, c in enumerate(citations) if i in doubted}
    return Verification([v for v in verification.verdicts if v.citation is None
                         or (v.citation.document, v.citation.page, v.citation.quote) not in drop])


def settled(name: str, request: Request, response: Response, support: SentenceReader | None, profile: Profile,
            result: Answer) -> Response:
    """``response`` after the support check and the answer-text check, its quotes joined (module docstring)."""
    draft = response.draft
    verification = support_filtered(response.verification, draft.answer, request.question, support, profile, result,
                                    request.shown)
    # what the text is shown beside: adjacent quotes joined, a lead-in with what it introduces
    shown_quotes = lead_ins_continued(join_adjacent(verification.citations, response.shown), response.shown)
    problems = unsupported(draft.answer, [c.quote for c in shown_quotes], profile, question=request.question,
                           pages=quoted_pages(verification.citations, request.shown),
                           documents=sorted({c.document for c in verification.citations}))
    if rests_on_absence(draft.answer, request.question, problems):
        log.info("%s answered no with no quote saying so: refused", name)
        result.withheld = problems
        result.withheld_text = draft.answer
        cited = {(c.document, c.page) for c in verification.citations}
        refused = draft.model_copy(update={"refusal": True, "answer": "", "reason": (
            "none of the passages says so; a “no” read from what they leave out is not an answer")})
        return replace(response, draft=refused, verification=verification, citations=[],
                       shown=sorted(response.shown, key=lambda p: (p.document, p.page) not in cited))
    if problems:
        log.info("%s answer withheld: %s in none of its verified quotes", name, ", ".join(problems))
        result.withheld = problems
        result.withheld_text = draft.answer
        result.warnings.append(f"{name} answer withheld: it stated {', '.join(problems)}, which none of its "
                               "verified quotes states; the quotes are shown alone")
        draft = draft.model_copy(update={"answer": ""})  # the verified quotes alone
    return replace(response, draft=draft, verification=verification, citations=shown_quotes)
