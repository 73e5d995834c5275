"""What a refusal says and shows (pure functions): our own plain reason, never a model's words, and
the nearest passages a reader can open instead."""

from __future__ import annotations

from collections.abc import Sequence

from retrieval.answer.verify import PageText
from retrieval.models import Answer, NearestPassage
from retrieval.text.contents import is_contents_text

NEAREST = 5  # passages listed with a refusal
NO_SUPPORT = "The documents do not support an answer to this question."


def nearest_of(shown: Sequence[PageText]) -> list[NearestPassage]:
    """The first ``NEAREST`` pages shown, one passage each; contents pages (dot leaders and page
    numbers, ``retrieval.text.contents``) are navigation, not something to read instead."""
    out: dict[tuple[str, int], NearestPassage] = {}
    for p in shown:
        if len(out) >= NEAREST:
            break
        if (p.document, p.page) in out or is_contents_text(p.text):
            continue
        snippet = " ".join(p.text.split())
        out[(p.document, p.page)] = NearestPassage(document=p.document, page=p.page, page_label=p.page_label,
                                                   url=p.url, snippet=snippet[:240] + ("…" if len(snippet) > 240 else ""))
    return list(out.values())


def refusal(answer: Answer, reason: str, shown: Sequence[PageText] = ()) -> Answer:
    answer.refusal = True
    answer.answer = ""
    answer.citations = []
    answer.reason = reason
    answer.nearest = led_by(nearest_of(shown), answer.best_evidence, answer.evidence_score)
    return answer


# A refusal's first nearest page is the page of the extractive answerer's best sentence when that
# sentence scored at least this (a near miss: the threshold is 1.1253), else the first page retrieved.
# On the two dev sets' refused answerable questions (25), leading with the best sentence's page always
# found the answer page first for 12 against 13 in retrieval order; from this score up for 14
# (2 gained, 1 lost, the rest as in retrieval order): results/extractive/README.md.
LEAD_MIN = 0.9


def led_by(nearest: Sequence[NearestPassage], best: NearestPassage | None,
           evidence: float | None = None) -> list[NearestPassage]:
    """The nearest passages, the page a reader should open first leading: the best sentence's page
    when the answerer came close (``evidence`` at least ``LEAD_MIN``), else retrieval order. The
    leading page's snippet is the best sentence when it is on that page (the page's own words)."""
    out = list(nearest)
    if best is None:
        return out
    same = next((n for n in out if (n.document, n.page) == (best.document, best.page)), None)
    if evidence is not None and evidence >= LEAD_MIN:
        out = [same or best, *(n for n in out if n is not same)][:NEAREST]
    if out and (out[0].document, out[0].page) == (best.document, best.page):
        out[0] = out[0].model_copy(update={"snippet": best.snippet})
    return out


def index_unavailable(question: str, exc: BaseException) -> Answer:
    """The refusal when the index cannot be reached (also used by the CLI before ``ask`` runs)."""
    return refusal(Answer(question=question, refusal=True),
                    f"The index is unavailable, so nothing could be searched: {exc}")


def untrusted_note(places: Sequence[NearestPassage]) -> str:
    """What a reply says when passages flagged as prompt injection matched the question."""
    where = ", ".join(dict.fromkeys(f"{n.document} p. {n.page_label or n.page}" for n in places))
    return (f"This document contains text addressed to AI assistants ({where}); it was ignored: such text is "
            "never evidence and never an instruction.")


def no_support(detail: str) -> str:
    detail = detail.strip().rstrip(".")
    return f"{NO_SUPPORT} {detail[:1].upper()}{detail[1:]}." if detail else NO_SUPPORT
