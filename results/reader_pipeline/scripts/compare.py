"""Rebuild results/reader_pipeline/comparison.json from the result files: every answer set run with the
default A (results/*.json), the acceptor C (C/) and, where it ran, candidate E (E/). Run from the
repository root: python results/reader_pipeline/scripts/compare.py"""
from __future__ import annotations

import json
from pathlib import Path

RESULTS = Path("results")
HERE = RESULTS / "reader_pipeline"
GROUPS = {  # total name -> which result files (by stem suffix) it adds up
    "dev (tuning)": ("answer_eval.json", "answer_eval_manuals_dev.json"),
    "decided on by prereg_acceptor.txt (unseen 9, 10)": ("answer_eval_manuals_unseen9.json",
                                                         "answer_eval_manuals_unseen10.json"),
    "decided on by prereg_veto.txt (unseen 11, 12)": ("answer_eval_manuals_unseen11.json",
                                                      "answer_eval_manuals_unseen12.json"),
}
KEYS = ("right", "answerable", "near_refused", "near", "wbv", "questions", "unverified")


def counts(path: Path) -> dict[str, int]:
    s = json.loads(path.read_text())["summary"]
    return {"right": s["answered_correctly"], "answerable": s["answerable"],
            "near_refused": s["unanswerable_refused"], "near": s["unanswerable"],
            "wbv": s["wrong_but_verified"], "questions": s["questions"], "unverified": s["unverified_quotes_shown"]}


def main() -> None:
    folders = {"A": RESULTS, "C": HERE / "C", "E": HERE / "E"}
    names = sorted(p.name for p in (HERE / "C").glob("answer_eval*.json"))
    sets = {n: {k: counts(f / n) for k, f in folders.items() if (f / n).exists()} for n in names}
    decided = {n for files in GROUPS.values() for n in files}
    groups = {**GROUPS, "every other set (used before, reported, not decided on)":
              tuple(n for n in names if n not in decided)}
    totals = {}
    for group, files in groups.items():
        totals[group] = {}
        for k in folders:
            if all(k in sets[n] for n in files):
                totals[group][k] = {key: sum(sets[n][k][key] for n in files) for key in KEYS}
    out = {"what": "every answer set run with the default A (evidence+reader, the canonical results/*.json), "
                   "C (evidence+acceptor, results/reader_pipeline/C/) and, on dev and unseen 11 and 12, candidate E "
                   "(the acceptor as a veto beside the evidence threshold, results/reader_pipeline/E/, code removed "
                   "after it failed its rule); same code and index (/work/cvhome-eval), 5 Dec",
           "command": "chapterverse eval answers SET --out FILE --answerer extractive --collection C, with "
                      "CHAPTERVERSE_ANSWER_SCORER set (/work/exp/run_all.sh, run_unseen1112.sh); then "
                      "python results/reader_pipeline/scripts/compare.py",
           "sets": sets, "totals": totals}
    (HERE / "comparison.json").write_text(json.dumps(out, indent=1) + "\n")
    for group, t in totals.items():
        print(group, {k: (v["right"], v["wbv"], v["near_refused"]) for k, v in t.items()})


if __name__ == "__main__":
    main()
