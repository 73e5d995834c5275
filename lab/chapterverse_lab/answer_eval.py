"""Answer evaluation (``chapterverse eval answers``) and the extractive threshold calibration.

The rule: evidence first. An answerable question is answered correctly only when the answer is not a
refusal AND its FIRST quote is on a gold page of the gold document AND contains the question's
``answer_span`` -- the few words that state the answer, copied from the gold page when the question
was written (normalised containment on word boundaries, ``verify.locate``). Users read the first
quote: a verified quote that is on the right page but does not state the answer ("during the day"
for a question about the night) earns nothing. An unanswerable question is handled correctly only by
a refusal.

Each answer has exactly one ``outcome``:
- answerable: ``right_evidence_first``, ``false_refusal``, or ``wrong_but_verified`` (answered with
  verified quotes, but the first is off the gold pages or lacks the answer words);
- unanswerable: ``refused`` or ``wrong_but_verified`` (answered what the handbooks do not say).
Independently of the product's own verification, every quote shown is checked again against the
stored text of the page it cites (``unverified_quotes_shown``: a quote that is not on that page after
normalisation, or too short to be a citation; it must be 0). ``any_quote_on_gold_page`` keeps the
old lenient rule (some quote on a gold page) for comparison.

A question may carry a ``history``: the earlier turns of its thread (``[{"question", "answer"}]``),
for follow-ups such as "and at night?". It is asked with them, as the Slack thread asks it, and the
standalone question that was searched is reported with it.

Calibration (``calibrate``, with ``--calibrate``): every question is first asked with the extractive
threshold disabled (a probe run), which shows what the answerer would answer and with what evidence
score. The refusal threshold is the midpoint of the score interval that maximises correct decisions:
answers that are right (answerable, first quote states the answer) must score at or above it; every
answer that would be shown wrong must score below it -- an unanswerable question answered, and an
answerable one whose first quote does not state the answer, which a refusal serves better than a
verified quote that answers something else. Each wrong answer so costs as much as a right one gains.
The margin to the nearest question on each side is reported. Questions the probe already refused
(answer-type or absent-term gates) cannot be changed by a threshold and are only counted.
``chapterverse eval calibrate`` fits one threshold over the probe runs of several sets. The
calibrated value is reported, not applied: it becomes the answerer's ``DEFAULT_THRESHOLD`` by a
reviewed code change. The dev sets are the tuning sets, so their numbers are optimistic for unseen
documents and questions.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from unittest import mock

from pydantic import SecretStr

from retrieval.store import db
from retrieval.answer.answerers.extractive import EXTRACTIVE_PASSAGES
from retrieval.answer.ask import ask
from retrieval.models import Answer, Citation, Turn
from chapterverse_lab.results import provenance
from retrieval.settings import Settings
from retrieval.answer.verify import locate, too_short

RULE = "answerable: not refused, first quote on a gold page and containing answer_span; unanswerable: refused"
PageTexts = Mapping[tuple[str, int], Sequence[str]]  # (document, page) -> stored text of that page


def load_questions(path: Path) -> list[dict[str, Any]]:
    data = json.loads(path.read_text())
    if not isinstance(data, list) or not all("question" in q and "answerable" in q for q in data):
        raise ValueError(f"{path}: expected a JSON list of objects with 'question' and 'answerable'")
    for q in data:
        history(q)  # a malformed history is an error before anything runs
        if q["answerable"] and not (isinstance(q.get("answer_span"), str) and q["answer_span"].strip()):
            raise ValueError(f"{path}: answerable question {q.get('id')!r} has no 'answer_span' (the words on the "
                             "gold page that state the answer; the first quote must contain them)")
        if q["answerable"] and not (q.get("document") and q.get("pages")):
            raise ValueError(f"{path}: answerable question {q.get('id')!r} needs 'document' and 'pages'")
    return data


def history(q: dict[str, Any]) -> list[Turn]:
    """The earlier turns of a question's thread (none for a question asked on its own)."""
    turns = q.get("history") or []
    if not isinstance(turns, list):
        raise ValueError(f"question {q.get('id')}: 'history' must be a list of {{question, answer}} turns")
    return [Turn.model_validate(t) for t in turns]


def _ask(settings: Settings, q: dict[str, Any], **kwargs: Any) -> Answer:
    return ask(settings, q["question"], history=history(q), **kwargs)


def stored_page_texts(settings: Settings, citations: Sequence[Citation],
                      collections: Sequence[str] | None) -> dict[tuple[str, int], list[str]]:
    """The stored text of every page the citations cite (one entry per collection holding it)."""
    keys = sorted({(c.document, c.page) for c in citations})
    out: dict[tuple[str, int], list[str]] = {}
    if not keys:
        return out
    sql = ("SELECT pg.text FROM pages pg JOIN documents d ON d.collection = pg.collection AND d.id = pg.document_id "
           "WHERE d.name = %s AND pg.page_no = %s" + (" AND pg.collection = ANY(%s)" if collections else ""))
    with db.connection(settings) as conn:
        for doc, page in keys:
            params: list[Any] = [doc, page] + ([list(collections)] if collections else [])
            out[(doc, page)] = [r["text"] for r in conn.execute(sql, params).fetchall()]
    return out


def quote_holds(c: Citation, page_texts: PageTexts) -> bool:
    """The quote is long enough to be a citation and is, after normalisation, on the page it cites."""
    return not too_short(c.quote) and any(locate(c.quote, t) for t in page_texts.get((c.document, c.page), ()))


def carries_evidence(c: Citation, q: dict[str, Any]) -> bool:
    """The citation is on a gold page of the gold document and its quote contains the answer span."""
    return (c.document == q.get("document") and c.page in set(q.get("pages") or [])
            and locate(q["answer_span"], c.quote) is not None)


def outcome(q: dict[str, Any], a: Answer) -> str:
    if not q["answerable"]:
        return "refused" if a.refusal else "wrong_but_verified"
    if a.refusal or not a.citations:
        return "false_refusal"
    return "right_evidence_first" if carries_evidence(a.citations[0], q) else "wrong_but_verified"


def first_page_shown(a: Answer) -> tuple[str, int] | None:
    """The first page a reader is pointed at: the first quote's when answered, else the first nearest page."""
    if not a.refusal and a.citations:
        return a.citations[0].document, a.citations[0].page
    return (a.nearest[0].document, a.nearest[0].page) if a.nearest else None


def judge(q: dict[str, Any], a: Answer, page_texts: PageTexts) -> dict[str, Any]:
    gold_pages = set(q.get("pages") or [])
    shown_gold = bool(q["answerable"]) and any(s.document == q.get("document") and s.page in gold_pages
                                                for s in a.shown_pages)
    on_gold = [c for c in a.citations if c.document == q.get("document") and c.page in gold_pages]
    result = outcome(q, a)
    first = first_page_shown(a)
    return {"id": q.get("id"), "question": q["question"], "answerable": q["answerable"],
            **({"history": q["history"], "standalone_question": a.standalone_question} if q.get("history") else {}),
            "gold_document": q.get("document"), "gold_pages": sorted(gold_pages), "answer_span": q.get("answer_span"),
            "refused": a.refusal, "outcome": result, "correct": result in ("right_evidence_first", "refused"),
            "any_quote_on_gold_page": not a.refusal and bool(on_gold),
            "reason": a.reason, "answer": a.answer,
            "citations": [{"document": c.document, "page": c.page, "page_label": c.page_label, "quote": c.quote,
                           "on_gold_page": c in on_gold,
                           "has_answer_span": bool(q["answerable"]) and carries_evidence(c, q),
                           "holds_on_stored_page": quote_holds(c, page_texts)} for c in a.citations],
            "evidence_score": a.evidence_score, "reader_agreement": a.reader_agreement, "proposed_citations": a.proposed_citations,
            "dropped_citations": a.dropped_citations, "repaired": a.repaired, "answerer": a.answerer,
            "best_sentence_page": a.best_evidence.page if a.best_evidence else None,
            "nearest_pages": [[n.document, n.page] for n in a.nearest],
            "first_page_holds_answer": (first is not None and first[0] == q.get("document") and first[1] in gold_pages)
            if q["answerable"] else None,
            "reranker": a.reranker, "sentence_scorer": a.models.get("sentence_scorer", ""), "warnings": a.warnings,
            "model_calls": a.model_calls, "unsupported_dropped": a.unsupported_dropped, "withheld": a.withheld, "withheld_text": a.withheld_text,
            "answer_context_has_gold_page": shown_gold if q["answerable"] else None,
            "shown_chars": sum(s.chars for s in a.shown_pages), "shown_items": len(a.shown_pages),
            "timings_ms": {k: round(v, 1) for k, v in a.timings_ms.items()}}


def _rate(n: int, d: int) -> float | None:
    return round(n / d, 4) if d else None


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    ans = [r for r in rows if r["answerable"]]
    una = [r for r in rows if not r["answerable"]]
    refused = [r for r in rows if r["refused"]]
    count = {k: sum(1 for r in rows if r["outcome"] == k)
             for k in ("right_evidence_first", "false_refusal", "wrong_but_verified", "refused")}
    wrong_ans = sum(1 for r in ans if r["outcome"] == "wrong_but_verified")
    shown = [c for r in rows for c in r["citations"]]
    unverified = [c for c in shown if not c["holds_on_stored_page"]]
    proposed = sum(r["proposed_citations"] for r in rows)
    dropped = sum(r["dropped_citations"] for r in rows)
    return {
        "rule": RULE,
        "questions": len(rows), "answerable": len(ans), "unanswerable": len(una),
        "answered_correctly": count["right_evidence_first"],
        "answered_correctly_rate": _rate(count["right_evidence_first"], len(ans)),
        "false_refusals": count["false_refusal"], "false_refusal_rate": _rate(count["false_refusal"], len(ans)),
        "wrong_but_verified": count["wrong_but_verified"],
        "wrong_but_verified_rate": _rate(count["wrong_but_verified"], len(rows)),
        "wrong_but_verified_answerable": wrong_ans,
        "wrong_but_verified_unanswerable": count["wrong_but_verified"] - wrong_ans,
        "unanswerable_refused": count["refused"], "refusal_recall": _rate(count["refused"], len(una)),
        "refusal_precision": _rate(count["refused"], len(refused)),
        "quotes_shown": len(shown), "unverified_quotes_shown": len(unverified),
        "answers_with_unverified_quotes": sum(1 for r in rows if any(not c["holds_on_stored_page"]
                                                                    for c in r["citations"])),
        "any_quote_on_gold_page": sum(1 for r in ans if r["any_quote_on_gold_page"]),
        "accuracy": _rate(sum(r["correct"] for r in rows), len(rows)),
        "citations_proposed": proposed, "citations_dropped": dropped,
        "citations_dropped_share": round(dropped / proposed, 4) if proposed else 0.0,
        **model_path_summary(rows),
    }


def _quantiles(values: Sequence[int]) -> dict[str, int]:
    v = sorted(values)
    if not v:
        return {}
    return {"p50": v[len(v) // 2], "p90": v[min(len(v) - 1, int(len(v) * 0.9))], "max": v[-1]}


def model_path_summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What a model answerer adds to the summary: calls, what each check removed, what it was shown."""
    ans = [r for r in rows if r["answerable"]]
    answered = [r for r in rows if not r["refused"]]
    out: dict[str, Any] = {
        "any_quote_on_gold_page_rate": _rate(sum(1 for r in ans if r["any_quote_on_gold_page"]), len(ans)),
        # a page holding the answer is the first page shown: the first quote's, or a refusal's first nearest page
        "answer_page_first_rate": _rate(sum(1 for r in ans if r.get("first_page_holds_answer")), len(ans)),
        "answer_context_recall": _rate(sum(1 for r in ans if r.get("answer_context_has_gold_page")), len(ans)),
        "shown_chars": _quantiles([r.get("shown_chars", 0) for r in rows]),
    }
    if not any(r.get("model_calls") for r in rows):
        return out
    withheld = [r for r in answered if r.get("withheld")]
    out |= {
        "model_calls": sum(r.get("model_calls", 0) for r in rows),
        "model_calls_per_question": _rate(sum(r.get("model_calls", 0) for r in rows), len(rows)),
        "questions_with_a_second_call": sum(1 for r in rows if r.get("repaired")),
        "quotes_dropped_by_verification": sum(r["dropped_citations"] for r in rows),
        "quotes_dropped_by_support_check": sum(r.get("unsupported_dropped", 0) for r in rows),
        "answers_withheld": len(withheld),
        "answer_text_shown_rate": _rate(len(answered) - len(withheld), len(answered)),
        "answers_withheld_right_first_quote": sum(1 for r in withheld if r["outcome"] == "right_evidence_first"),
        "answers_withheld_wrong": sum(1 for r in withheld if r["outcome"] == "wrong_but_verified"),
        "fell_back_to_extractive": sum(1 for r in rows if r.get("answerer") == "extractive"),
        "unrecorded_requests": sum(len(r.get("unrecorded") or []) for r in rows),
    }
    return out


def best_cut(pos: Sequence[float], neg: Sequence[float]) -> tuple[int, float] | None:
    """The cut that keeps most of ``pos`` (at or above it) and refuses most of ``neg`` (below it):
    (decisions right, cut), the cut in the middle of the widest gap among equally good ones."""
    cuts = sorted(set(pos) | set(neg))
    best: tuple[int, float, float] | None = None
    for lo, hi in zip([cuts[0] - 0.01] + cuts, cuts + [cuts[-1] + 0.01], strict=True) if cuts else []:
        t = (lo + hi) / 2
        good = sum(1 for s in pos if s >= t) + sum(1 for s in neg if s < t)
        if best is None or good > best[0] or (good == best[0] and hi - lo > best[2]):
            best = (good, t, hi - lo)
    return None if best is None else (best[0], best[1])


def calibrate(probe: Sequence[dict[str, Any]], threshold: float | None = None) -> dict[str, Any]:
    """Best refusal threshold from a probe run's judged rows (threshold disabled; module docstring),
    or ``threshold`` held as given; then, when the rows carry a second judge's agreement
    (``reader_agreement``), the agreement that best accepts the answers below the threshold."""
    # Every answer that would be shown wrong is a negative: an unanswerable question answered, and an
    # answerable one whose first quote does not state the answer (refusing it is the better outcome).
    right = [r for r in probe if r["answerable"] and r["correct"] and r["evidence_score"] is not None]
    wrong = [r for r in probe if not r["refused"] and not r["correct"] and r["evidence_score"] is not None]
    pos = sorted(r["evidence_score"] for r in right)
    neg = sorted(r["evidence_score"] for r in wrong)
    gated = {"unanswerable_refused_by_gates": sum(1 for r in probe if not r["answerable"] and r["refused"]),
             "answerable_refused_by_gates": sum(1 for r in probe if r["answerable"] and r["refused"]),
             "answerable_wrong_evidence": sum(1 for r in probe if r["answerable"] and not r["refused"]
                                              and not r["correct"])}
    fitted = best_cut(pos, neg)
    if fitted is None:
        return {"threshold": None, **gated}
    t = fitted[1] if threshold is None else threshold
    good = sum(1 for s in pos if s >= t) + sum(1 for s in neg if s < t)
    kept = min((s for s in pos if s >= t), default=None)
    refused = max((s for s in neg if s < t), default=None)
    out = {"threshold": round(t, 4), "threshold_held": threshold is not None, "correct_decisions": good,
           "of": len(pos) + len(neg), **gated,
           "lowest_answerable_kept": None if kept is None else round(kept, 4),
           "highest_unanswerable_refused": None if refused is None else round(refused, 4),
           "margin_above": None if kept is None else round(kept - t, 4),
           "margin_below": None if refused is None else round(t - refused, 4),
           "right_answer_scores": [round(s, 4) for s in pos],
           "wrong_answer_scores": [round(s, 4) for s in neg],
           "per_question": [{"id": r["id"], "answerable": r["answerable"], "refused": r["refused"],
                             "correct": r["correct"], "evidence_score": r["evidence_score"],
                             "reader_agreement": r.get("reader_agreement")} for r in probe]}
    below_right = [r["reader_agreement"] for r in right if r["evidence_score"] < t and r.get("reader_agreement") is not None]
    below_wrong = [r["reader_agreement"] for r in wrong if r["evidence_score"] < t and r.get("reader_agreement") is not None]
    agreed = best_cut(below_right, below_wrong)
    if agreed is not None:
        # a cut above every agreement (1.01) accepts nothing more: the agreement rule off
        a = agreed[1]
        out["agreement"] = {
            "min": round(a, 4), "correct_decisions_below_threshold": agreed[0],
            "of": len(below_right) + len(below_wrong),
            "answers_gained_right": sum(1 for x in below_right if x >= a),
            "answers_gained_wrong": sum(1 for x in below_wrong if x >= a),
            "right_agreements": sorted(round(x, 4) for x in below_right),
            "wrong_agreements": sorted(round(x, 4) for x in below_wrong)}
    return out


def replay_settings(settings: Settings, base_url: str) -> Settings:
    """``settings`` with both model answerers pointed at the replay server (``chapterverse_lab.replay``)."""
    key = SecretStr("replay")
    answer = settings.answer.model_copy(update={"openai_base_url": f"{base_url}/v1", "openai_model": "replay",
                                                "openai_api_key": key, "gemini_api_key": key})
    return settings.model_copy(update={"answer": answer})


def evaluate(settings: Settings, questions_path: Path, *, answerer: str | None, collections: Sequence[str] | None,
             command: str, calibrate_threshold: bool = False, replay: Path | None = None,
             pending: Path | None = None, source: str = "") -> dict[str, Any]:
    """Ask every question and judge the answers. ``replay``: a folder of recorded model replies served to
    the model answerer by the replay server (``chapterverse_lab.replay``); requests with no recording are
    written to ``pending`` and counted, never answered."""
    if replay is None:
        return _evaluate(settings, questions_path, answerer, collections, command, calibrate_threshold)
    from chapterverse_lab import replay as rp  # noqa: PLC0415

    replayer = rp.Replayer(rp.load_replies(replay), pending)
    with rp.serving(replayer) as url, mock.patch.dict(os.environ, {"GOOGLE_GEMINI_BASE_URL": url}):
        out = _evaluate(replay_settings(settings, url), questions_path, answerer, collections, command,
                        calibrate_threshold, replayer)
    out["config"]["model_replies"] = {
        "folder": str(replay), "source": source or "recorded replies", "served": len(replayer.served),
        "unrecorded": len(replayer.misses),
        "unrecorded_requests": [{"kind": m.kind, "key": m.key, "question": m.question} for m in replayer.misses],
        # replies found by their key but written under other system instructions or schema than this run's
        "under_other_instructions": len(replayer.stale), "under_other_instructions_keys": [m.key for m in replayer.stale],
        "recorded_without_instructions": len(replayer.unstamped)}
    return out


def _evaluate(settings: Settings, questions_path: Path, answerer: str | None, collections: Sequence[str] | None,
              command: str, calibrate_threshold: bool, replayer: Any = None) -> dict[str, Any]:
    questions = load_questions(questions_path)
    started = {**provenance(), "taken": "at start"}  # the code this run loaded, before any long wait
    rows: list[dict[str, Any]] = []
    for q in questions:
        mark = len(replayer.misses) if replayer is not None else 0
        a = _ask(settings, q, collections=collections, answerer=answerer)
        rows.append(judge(q, a, stored_page_texts(settings, a.citations, collections)))
        if replayer is not None:
            rows[-1]["unrecorded"] = [m.kind for m in replayer.misses_since(mark)]
    answerer_ran = sorted({r["answerer"] for r in rows})
    out: dict[str, Any] = {
        "command": command, "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "questions_file": str(questions_path),
        "config": {"answerer": answerer_ran, "embedding_model": settings.search.embedding_model,
                   "reranker_configured": settings.search.reranker,
                   "reranker_ran": sorted({a for a in _rerankers(rows)}) or None,
                   "gemini_model": settings.answer.gemini_model if "gemini" in answerer_ran else None,
                   "k": EXTRACTIVE_PASSAGES, "collections": list(collections) if collections else None,
                   "python": platform.python_version()},
        "summary": summarise(rows), "per_question": rows, "provenance": started,
    }
    if "extractive" in answerer_ran:
        from retrieval.answer.answerers import extractive  # noqa: PLC0415
        from retrieval.answer.answerers.extractive import scoring  # noqa: PLC0415

        scorers = sorted({r["sentence_scorer"] for r in rows if r.get("sentence_scorer")})
        out["config"]["extractive"] = {
            "sentence_scorer": scorers, "threshold": extractive.DEFAULT_THRESHOLD,
            "quote_margin": scoring.QUOTE_MARGIN, "max_quotes": scoring.MAX_QUOTES,
            "lex_weight": scoring.LEX_WEIGHT, "rank_penalty": scoring.RANK_PENALTY}
        if any(s.startswith("evidence+") for s in scorers):
            from retrieval import reader  # noqa: PLC0415

            card = reader.Card.model_validate_json((reader.reader_dir(settings.answer.reader_model) / "card.json").read_text())
            out["config"]["extractive"] |= {"agreement_min": extractive.AGREEMENT_MIN, "judge": card.name,
                                            "judge_sha256": card.onnx_sha256}
    if calibrate_threshold and "extractive" in answerer_ran:
        from retrieval.answer.answerers.registry import build_extractive  # noqa: PLC0415
        from retrieval.store.collections import collection_profile  # noqa: PLC0415

        # an answerer of its own with the refusal threshold disabled: what would it answer, how sure
        probe = build_extractive(settings, collection_profile(settings, collections), threshold=float("-inf"))
        rows_probe = []
        for q in questions:
            a = _ask(settings, q, collections=collections, answerer=probe)
            rows_probe.append(judge(q, a, stored_page_texts(settings, a.citations, collections)))
        out["calibration"] = {**calibrate(rows_probe), "note": "threshold fitted on this question set: when it is the "
                              "tuning (dev) set, its numbers are optimistic for unseen documents and questions"}
    return out


def _rerankers(rows: Sequence[dict[str, Any]]) -> list[str]:
    return [r.get("reranker", "") for r in rows if r.get("reranker")]
