"""Answer evaluation (``chapterverse eval answers``) and the extractive threshold calibration.

Correct, for an answerable question: not refused and at least one verified citation on a gold page of
the gold document. For an unanswerable one: refused. Reported: answered-correctly rate, refusal
precision/recall, false refusals, the share of proposed citations dropped by verification, and
per-question detail (with the extractive evidence score, so the threshold can be re-calibrated).

A question may carry a ``history``: the earlier turns of its thread (``[{"question", "answer"}]``),
for follow-ups such as "and at night?". It is asked with them, as the Slack thread asks it, and the
standalone question that was searched is reported with it.

Calibration (``calibrate``, with ``--calibrate``): every question is first asked with the extractive
threshold disabled (a probe run), which shows what the answerer would answer and with what evidence
score. The refusal threshold is the midpoint of the score interval that maximises correct decisions
(answerable questions whose probe answer has a verified quote on a gold page must score at or above
it; unanswerable ones that the probe answered must score below it); the margin to the nearest
question on each side is reported. Questions the probe already refused (answer-type or
absent-term gates) and answerable ones whose probe quotes miss the gold pages cannot be changed by a
threshold and are only counted. The calibrated value is reported, not applied: it becomes the
answerer's ``DEFAULT_THRESHOLD`` by a reviewed code change. The dev set is the tuning set, so its
numbers are optimistic for unseen documents and questions.
"""

from __future__ import annotations

import datetime as dt
import json
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from retrieval.ask import ASK_K, ask
from retrieval.models import Answer, Turn
from retrieval.settings import Settings


def load_questions(path: Path) -> list[dict[str, Any]]:
    data = json.loads(path.read_text())
    if not isinstance(data, list) or not all("question" in q and "answerable" in q for q in data):
        raise ValueError(f"{path}: expected a JSON list of objects with 'question' and 'answerable'")
    for q in data:
        history(q)  # a malformed history is an error before anything runs
    return data


def history(q: dict[str, Any]) -> list[Turn]:
    """The earlier turns of a question's thread (none for a question asked on its own)."""
    turns = q.get("history") or []
    if not isinstance(turns, list):
        raise ValueError(f"question {q.get('id')}: 'history' must be a list of {{question, answer}} turns")
    return [Turn.model_validate(t) for t in turns]


def _ask(settings: Settings, q: dict[str, Any], **kwargs: Any) -> Answer:
    return ask(settings, q["question"], history=history(q), **kwargs)


def judge(q: dict[str, Any], a: Answer) -> dict[str, Any]:
    gold_pages = set(q.get("pages") or [])
    on_gold = [c for c in a.citations if c.document == q.get("document") and c.page in gold_pages]
    correct = (not a.refusal and bool(on_gold)) if q["answerable"] else a.refusal
    return {"id": q.get("id"), "question": q["question"], "answerable": q["answerable"],
            **({"history": q["history"], "standalone_question": a.standalone_question} if q.get("history") else {}),
            "gold_document": q.get("document"), "gold_pages": sorted(gold_pages),
            "refused": a.refusal, "correct": correct, "reason": a.reason, "answer": a.answer,
            "citations": [{"document": c.document, "page": c.page, "page_label": c.page_label,
                           "quote": c.quote, "on_gold_page": c in on_gold} for c in a.citations],
            "evidence_score": a.evidence_score, "proposed_citations": a.proposed_citations,
            "dropped_citations": a.dropped_citations, "repaired": a.repaired, "answerer": a.answerer,
            "best_sentence_page": a.best_evidence.page if a.best_evidence else None,
            "reranker": a.reranker, "warnings": a.warnings, "timings_ms": {k: round(v, 1) for k, v in a.timings_ms.items()}}


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    ans = [r for r in rows if r["answerable"]]
    una = [r for r in rows if not r["answerable"]]
    refused = [r for r in rows if r["refused"]]
    proposed = sum(r["proposed_citations"] for r in rows)
    dropped = sum(r["dropped_citations"] for r in rows)
    true_refusals = sum(1 for r in una if r["refused"])
    return {
        "questions": len(rows), "answerable": len(ans), "unanswerable": len(una),
        "answered_correctly": sum(r["correct"] for r in ans),
        "answered_correctly_rate": round(sum(r["correct"] for r in ans) / len(ans), 4) if ans else None,
        "answered_wrong_page": sum(1 for r in ans if not r["refused"] and not r["correct"]),
        "false_refusals": sum(1 for r in ans if r["refused"]),
        "unanswerable_refused": true_refusals,
        "refusal_recall": round(true_refusals / len(una), 4) if una else None,
        "refusal_precision": round(true_refusals / len(refused), 4) if refused else None,
        "accuracy": round(sum(r["correct"] for r in rows) / len(rows), 4) if rows else None,
        "citations_proposed": proposed, "citations_dropped": dropped,
        "citations_dropped_share": round(dropped / proposed, 4) if proposed else 0.0,
    }


def calibrate(probe: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Best refusal threshold from a probe run's judged rows (threshold disabled; module docstring)."""
    pos = sorted(r["evidence_score"] for r in probe if r["answerable"] and r["correct"]
                 and r["evidence_score"] is not None)
    neg = sorted(r["evidence_score"] for r in probe if not r["answerable"] and not r["refused"]
                 and r["evidence_score"] is not None)
    gated = {"unanswerable_refused_by_gates": sum(1 for r in probe if not r["answerable"] and r["refused"]),
             "answerable_refused_by_gates": sum(1 for r in probe if r["answerable"] and r["refused"]),
             "answerable_off_gold_page": sum(1 for r in probe if r["answerable"] and not r["refused"]
                                             and not r["correct"])}
    cuts = sorted(set(pos + neg))
    best: tuple[int, float, float] | None = None
    for lo, hi in zip([cuts[0] - 0.01] + cuts, cuts + [cuts[-1] + 0.01], strict=True) if cuts else []:
        t = (lo + hi) / 2
        good = sum(1 for s in pos if s >= t) + sum(1 for s in neg if s < t)
        if best is None or good > best[0] or (good == best[0] and hi - lo > best[2]):
            best = (good, t, hi - lo)
    if best is None:
        return {"threshold": None, **gated}
    t = best[1]
    kept = min((s for s in pos if s >= t), default=None)
    refused = max((s for s in neg if s < t), default=None)
    return {"threshold": round(t, 4), "correct_decisions": best[0], "of": len(pos) + len(neg), **gated,
            "lowest_answerable_kept": None if kept is None else round(kept, 4),
            "highest_unanswerable_refused": None if refused is None else round(refused, 4),
            "margin_above": None if kept is None else round(kept - t, 4),
            "margin_below": None if refused is None else round(t - refused, 4),
            "answerable_scores_on_gold": [round(s, 4) for s in pos],
            "unanswerable_scores": [round(s, 4) for s in neg],
            "per_question": [{"id": r["id"], "answerable": r["answerable"], "refused": r["refused"],
                              "correct": r["correct"], "evidence_score": r["evidence_score"]} for r in probe]}


def evaluate(settings: Settings, questions_path: Path, *, answerer: str | None, collections: Sequence[str] | None,
             command: str, calibrate_threshold: bool = False) -> dict[str, Any]:
    questions = load_questions(questions_path)
    rows: list[dict[str, Any]] = []
    for q in questions:
        a = _ask(settings, q, collections=collections, answerer=answerer)
        rows.append(judge(q, a))
    answerer_ran = sorted({r["answerer"] for r in rows})
    out: dict[str, Any] = {
        "command": command, "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "questions_file": str(questions_path),
        "config": {"answerer": answerer_ran, "embedding_model": settings.embedding_model,
                   "reranker_configured": settings.reranker,
                   "reranker_ran": sorted({a for a in _rerankers(rows)}) or None,
                   "gemini_model": settings.gemini_model if "gemini" in answerer_ran else None,
                   "k": ASK_K, "collections": list(collections) if collections else None,
                   "python": platform.python_version()},
        "summary": summarise(rows), "per_question": rows,
    }
    if "extractive" in answerer_ran:
        from retrieval.answerers import extractive  # noqa: PLC0415

        out["config"]["extractive"] = {"threshold": extractive.DEFAULT_THRESHOLD, "lex_weight": extractive.LEX_WEIGHT,
                                       "cos_weight": extractive.COS_WEIGHT, "rank_penalty": extractive.RANK_PENALTY,
                                       "quote_margin": extractive.QUOTE_MARGIN, "max_quotes": extractive.MAX_QUOTES}
    if calibrate_threshold and "extractive" in answerer_ran:
        probe = [judge(q, _ask(settings, q, collections=collections, answerer=answerer,
                               extractive_threshold=float("-inf"))) for q in questions]
        out["calibration"] = {**calibrate(probe), "note": "threshold fitted on this question set: when it is the "
                              "tuning (dev) set, its numbers are optimistic for unseen documents and questions"}
    return out


def _rerankers(rows: Sequence[dict[str, Any]]) -> list[str]:
    return [r.get("reranker", "") for r in rows if r.get("reranker")]
