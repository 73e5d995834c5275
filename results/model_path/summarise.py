"""Pool the model-path runs in this folder into summary.json (run from the repository root:
``python results/model_path/summarise.py``). Reads only the result files written by
``chapterverse eval answers`` (see prereg.txt for the commands); stdlib only.

- per set and pooled over unseen 9-12, 13-14, 15-16, 17-18, 19-20, 21-22, 23-24 and 25-26: the issue-30 measures for the model path (support check on
  and off) and the extractive path;
- the support-check decision under prereg.txt: per question, on against off;
- every answer whose text was withheld, with what it was withheld for;
- what the answerer is shown, before (the extractive view the model used to get: 8 passages cut to
  sentences) and after (12 passages, whole pages or widened slices; 16 passages from 6 Dec, issue 38 item 1:
  the dev sets and unseen 15-20), in characters of passage text;
- where each set's files were measured: the commit, whether the tree had other changes, and the dates
  (the files' ``provenance``), which the docs name (``tests/test_doc_figures.py`` checks them).
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
SETS = ("faa_dev", "manuals_dev", "unseen9", "unseen10", "unseen11", "unseen12", "unseen13", "unseen14",
        "unseen15", "unseen16", "unseen17", "unseen18", "unseen19", "unseen20", "unseen21", "unseen22",
        "unseen23", "unseen24", "unseen25", "unseen26", "unseen27", "unseen28", "unseen29", "unseen30",
        "unseen31", "unseen32", "unseen33", "unseen34")
UNSEEN = SETS[2:6]  # run once under prereg.txt
ROUND2 = SETS[6:8]  # run once under prereg_round2.txt, with the code after the first run
ROUND3 = SETS[8:10]  # run once under prereg_round3.txt (16 passages, legs 32 deep): support check off and extractive
ROUND4 = SETS[10:12]  # run once under prereg_round4.txt (round 3's context, the answer-text check's question names)
ROUND5 = SETS[12:14]  # run once under prereg_round5.txt (title words by rate, next-page openings, yes/no by clause)
ROUND6 = SETS[14:16]  # run once under prereg_round6.txt (the answer-text check's names, digits and negations)
ROUND7 = SETS[16:18]  # run once under prereg_round7.txt (digits inside names, file-name words, a bare "No", em dashes)
ROUND8 = SETS[18:20]  # run once under prereg_round8.txt (names inside hyphenated words; the bare "No" and document names)
ROUND9 = SETS[20:22]  # run once under prereg_round9.txt (a word widened at a line-break hyphen stops at an em dash)
ROUND10 = SETS[22:24]  # run once under prereg_round10.txt (list items and units in the answer-text check; lead-ins continued)
ROUND11 = SETS[24:26]  # run once under prereg_round11.txt (a sentence cut by a page break read to its end)
ROUND12 = SETS[26:]  # run once under prereg_round12.txt (a number on a name's glued digits compared as the name)
LATER = {"15_to_16": ROUND3, "17_to_18": ROUND4, "19_to_20": ROUND5, "21_to_22": ROUND6, "23_to_24": ROUND7, "25_to_26": ROUND8,
         "27_to_28": ROUND9, "29_to_30": ROUND10, "31_to_32": ROUND11,
         "33_to_34": ROUND12}
K16 = ("faa_dev", "manuals_dev", *ROUND3, *ROUND4, *ROUND5, *ROUND6, *ROUND7, *ROUND8, *ROUND9, *ROUND10, *ROUND11, *ROUND12)  # measured with the model reading 16 passages (the others: 12)
ALL = ("check_on", "check_off", "extractive")


def variants(s: str) -> tuple[str, ...]:
    return ("check_off", "extractive") if any(s in sets for sets in LATER.values()) else ALL
BETTER = {("wrong_but_verified", "right_evidence_first"), ("wrong_but_verified", "refused"),
          ("false_refusal", "right_evidence_first")}


def rows(name: str) -> list[dict]:
    return json.loads((HERE / f"{name}.json").read_text())["per_question"]


def measures(rs: list[dict]) -> dict:
    ans = [r for r in rs if r["answerable"]]
    una = [r for r in rs if not r["answerable"]]
    answered = [r for r in rs if not r["refused"]]
    withheld = [r for r in answered if r.get("withheld")]
    shown = [c for r in rs for c in r["citations"]]
    out = {
        "questions": len(rs), "answerable": len(ans), "unanswerable": len(una),
        "first_quote_states_the_answer": sum(r["outcome"] == "right_evidence_first" for r in ans),
        "a_quote_on_a_right_page": sum(bool(r["any_quote_on_gold_page"]) for r in ans),
        "near_misses_refused": sum(r["refused"] for r in una),
        "wrong_but_verified": sum(r["outcome"] == "wrong_but_verified" for r in rs),
        "unverified_quotes_shown": sum(not c["holds_on_stored_page"] for c in shown), "quotes_shown": len(shown),
        "answer_context_recall": sum(bool(r.get("answer_context_has_gold_page")) for r in ans),
        "answered": len(answered), "answer_text_withheld": len(withheld),
        "model_calls": sum(r.get("model_calls", 0) for r in rs),
        "quotes_dropped_by_verification": sum(r["dropped_citations"] for r in rs),
        "quotes_dropped_by_support_check": sum(r.get("unsupported_dropped", 0) for r in rs),
    }
    out["rates"] = {
        "first_quote_states_the_answer": round(out["first_quote_states_the_answer"] / len(ans), 3),
        "near_misses_refused": round(out["near_misses_refused"] / len(una), 3),
        "wrong_but_verified_of_all": round(out["wrong_but_verified"] / len(rs), 3),
        "answer_context_recall": round(out["answer_context_recall"] / len(ans), 3),
        "answer_text_shown_of_answered": round(1 - len(withheld) / len(answered), 3) if answered else None,
        "model_calls_per_question": round(out["model_calls"] / len(rs), 3),
    }
    return out


def quantiles(values: list[int]) -> dict:
    v = sorted(values)
    return {"p10": v[len(v) // 10], "p50": v[len(v) // 2], "p90": v[int(len(v) * 0.9)], "max": v[-1],
            "mean": round(sum(v) / len(v))}


def measured(s: str) -> dict:
    """Where set ``s``'s three files were measured: their commits (short), whether any tree had other
    changes, and their first and last dates."""
    files = [json.loads((HERE / f"{s}_{v}.json").read_text()) for v in variants(s)]
    return {"commits": sorted({f["provenance"]["git_commit"][:7] for f in files}),
            "uncommitted_changes": any(f["provenance"].get("git_dirty") for f in files),
            "dates": [min(f["date"] for f in files), max(f["date"] for f in files)]}


def summary() -> dict:
    out: dict = {"replies": "stand-in model (tests/replies, docs/stand-in.md)", "rule": "prereg.txt", "sets": {}}
    for s in SETS:
        out["sets"][s] = {v: measures(rows(f"{s}_{v}")) for v in variants(s)}
    pooled = {v: measures(sum((rows(f"{s}_{v}") for s in UNSEEN), [])) for v in ("check_on", "check_off", "extractive")}
    out["unseen_9_to_12_pooled"] = pooled
    out["unseen_13_to_14_pooled"] = {v: measures(sum((rows(f"{s}_{v}") for s in ROUND2), []))
                                     for v in ("check_on", "check_off", "extractive")}
    for name, sets in LATER.items():  # rounds 3 on: support check off and extractive only
        out[f"unseen_{name}_pooled"] = {v: measures(sum((rows(f"{s}_{v}") for s in sets), []))
                                        for v in ("check_off", "extractive")}
        right_first = [r for s in sets for r in rows(f"{s}_check_off") if r["outcome"] == "right_evidence_first"]
        out[f"unseen_{name}_text_shown_of_right_first"] = {
            "right_first": len(right_first), "text_shown": sum(not r.get("withheld") for r in right_first)}
    gains, losses = [], []
    for s in UNSEEN:
        on = {r["id"]: r["outcome"] for r in rows(f"{s}_check_on")}
        for r in rows(f"{s}_check_off"):
            a, b = r["outcome"], on[r["id"]]
            if a != b:
                (gains if (a, b) in BETTER else losses).append({"set": s, "id": r["id"], "off": a, "on": b})
    out["support_check_decision"] = {
        "gains": gains, "losses": losses,
        "decision": "stays on" if len(gains) > len(losses) else "off by default (gains do not exceed losses)"}
    out["answer_text_withheld"] = [
        {"set": s, "id": r["id"], "outcome": r["outcome"], "for": r["withheld"], "text": r.get("withheld_text", "")}
        for s in SETS for r in rows(f"{s}_check_off") if r.get("withheld")]
    out["shown_chars"] = {
        "note": "characters of passage text sent per question (the prompt adds ~1,900 characters of instructions "
                "and JSON framing); about 4 characters per token for English text (no provider tokenizer offline)",
        "before_extractive_view_k8": quantiles([r["shown_chars"] for s in SETS for r in rows(f"{s}_extractive")]),
        "after_model_view_k12": quantiles([r["shown_chars"] for s in SETS if s not in K16
                                           for r in rows(f"{s}_check_off")]),
        "model_view_k16": quantiles([r["shown_chars"] for s in K16 for r in rows(f"{s}_check_off")]),
    }
    out["measured"] = {s: measured(s) for s in SETS}
    return out


def main() -> None:
    out = summary()
    pooled = out["unseen_9_to_12_pooled"]
    (HERE / "summary.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps({"pooled_unseen": {k: v["rates"] for k, v in pooled.items()},
                      "pooled_unseen_13_14": {k: v["rates"] for k, v in out["unseen_13_to_14_pooled"].items()},
                      **{f"pooled_unseen_{name}": {k: v["rates"] for k, v in out[f"unseen_{name}_pooled"].items()}
                         for name in LATER},
                      **{f"text_shown_of_right_first_{name}": out[f"unseen_{name}_text_shown_of_right_first"]
                         for name in LATER},
                      "support_check": out["support_check_decision"]["decision"],
                      "shown_chars": out["shown_chars"]}, indent=1))


if __name__ == "__main__":
    main()
