"""The model-path and shown-characters figures the docs state are read back from their result files
(issue 38 item 6, "a harness that cannot flatter"): results/model_path/summary.json must be what
results/model_path/summarise.py pools from the run files, and each figure README.md, docs/results.md and
results/model_path/README.md state (pooled rates and counts, which targets are missed, what the model is
shown, the commits the unseen runs were measured at) must equal summary.json's; so must the extractive
figures docs/results.md states from results/answer_eval*.json, and the replica drill run docs/scaling.md
shows from results/replicas/drill.json. A figure that drifts fails here, naming the file it should come
from. (The generated tables are checked by ``eval report --check``.)"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
MODEL_PATH = ROOT / "results" / "model_path"
SUMMARY_FILE = MODEL_PATH / "summary.json"
SUMMARY = json.loads(SUMMARY_FILE.read_text())
VARIANTS = ("extractive", "check_on", "check_off")  # the columns of the pooled tables, after the target
NUMBER_WORDS = {"no": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7}


def _summarise() -> ModuleType:
    spec = importlib.util.spec_from_file_location("model_path_summarise", MODEL_PATH / "summarise.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _flat(path: Path) -> str:
    return " ".join(path.read_text().split())


def _found(pattern: str, path: Path) -> re.Match[str]:
    match = re.search(pattern, _flat(path))
    assert match, f"{path.relative_to(ROOT)} no longer states /{pattern}/: update this test with the sentence"
    return match


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def _pooled(sets: tuple[str, ...], variant: str, key: str) -> int:
    return sum(SUMMARY["sets"][s][variant][key] for s in sets)


def test_summary_json_is_what_the_run_files_pool_to() -> None:
    assert _summarise().summary() == SUMMARY, f"{SUMMARY_FILE} is out of date: python results/model_path/summarise.py"


def _table(path: Path, first_cell: str) -> list[list[str]]:
    """The rows (cells stripped) of the table whose header's first cell starts with ``first_cell``."""
    lines = path.read_text().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(f"| {first_cell}")), None)
    assert start is not None, f"{path.relative_to(ROOT)} has no table starting '| {first_cell}'"
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return [r for r in rows if not set("".join(r)) <= set("-: ")]


# a row's label → (rate in "rates", count, denominator): counts as stated in "(n/d)" cells
ROWS = {
    "first quote states the answer": ("first_quote_states_the_answer", "first_quote_states_the_answer", "answerable"),
    "near misses refused": ("near_misses_refused", "near_misses_refused", "unanswerable"),
    "wrong-but-verified": ("wrong_but_verified_of_all", "wrong_but_verified", "questions"),
    "unverified quotes shown": (None, "unverified_quotes_shown", None),
    "model calls per question": ("model_calls_per_question", None, None),
    "answer-context recall": ("answer_context_recall", "answer_context_recall", "answerable"),
    "model's answer text shown": ("answer_text_shown_of_answered", "answer_text_shown", "answered"),
}
MODEL_ONLY = {"model_calls_per_question", "answer_text_shown_of_answered"}  # "–" for the extractive path


def _met(target: str, value: float) -> bool:
    bound = float(re.sub(r"[^\d.]", "", target))
    return value >= bound if "≥" in target else value <= bound if "≤" in target else value == bound


def _checked_table(first_cell: str, pooled: str, variants: tuple[str, ...]) -> int:
    """Check the pooled table whose first cell starts with ``first_cell`` in results/model_path/README.md
    against ``summary.json[pooled]`` (one column per variant, after the target); returns how many targets the
    default (support check off) misses. A target "all" is a rate of 1; "–" is no target."""
    readme = MODEL_PATH / "README.md"
    header, *rows = _table(readme, first_cell)
    figures = SUMMARY[pooled]
    default = figures["check_off"]
    stated = re.search(r"\((\d+) answerable, (\d+) near misses\)", header[0])
    assert stated and (int(stated[1]), int(stated[2])) == (default["answerable"], default["unanswerable"]), header[0]
    not_met = 0
    for label, target, *cells in rows:
        rate_key, count_key, of_key = next(v for k, v in ROWS.items() if label.startswith(k))
        if of_key == "questions":
            assert f"of all {default['questions']}" in label, f"{readme}: {label!r}, summary.json: {default['questions']}"
        for variant, cell in zip(variants, cells, strict=True):
            m = figures[variant]
            where = f"{readme.relative_to(ROOT)} {first_cell} / {label} / {variant}: {cell!r} against {SUMMARY_FILE.name}"
            if variant == "extractive" and rate_key in MODEL_ONLY:
                assert cell == "–", where
                continue
            value = m["rates"][rate_key] if rate_key else m[count_key]
            assert cell.strip("*").split()[0].strip("*") == (f"{value:.3f}" if rate_key else str(value)), where
            fraction = re.search(r"\((\d+)/(\d+)\)", cell)
            if fraction:
                count = m["answered"] - m["answer_text_withheld"] if count_key == "answer_text_shown" else m[count_key]
                assert (int(fraction[1]), int(fraction[2])) == (count, m[of_key]), where
            if variant == "check_off" and target != "–":
                met = value == 1.0 if target == "all" else _met(target, value)
                not_met += not met
                assert ("not met" in cell) == (not met), f"{where}: the target {target} is {'' if met else 'not '}met"
    return not_met


@pytest.mark.parametrize(("first_cell", "pooled", "missed"), [
    ("unseen 9–12 pooled", "unseen_9_to_12_pooled", "on the first"),
    ("unseen 13–14 pooled", "unseen_13_to_14_pooled", "on this second pair"),
])
def test_the_pooled_tables_of_the_model_path_readme_are_summary_json(first_cell: str, pooled: str, missed: str) -> None:
    not_met = _checked_table(first_cell, pooled, VARIANTS)
    said = _found(r"Every target is met on this second pair and (\w+) are missed on the first", MODEL_PATH / "README.md")
    expected = {"on the first": NUMBER_WORDS[said[1]], "on this second pair": 0}[missed]
    assert not_met == expected, f"README: {not_met} targets missed {missed}, the text says {expected}"


def test_the_third_runs_table_and_figures_are_summary_json() -> None:
    """unseen 15–16 were run with the support check off and the extractive path only (prereg_round3.txt)."""
    readme = MODEL_PATH / "README.md"
    assert _checked_table("unseen 15–16 pooled", "unseen_15_to_16_pooled", ("extractive", "check_off")) == 3
    shown = SUMMARY["unseen_15_to_16_text_shown_of_right_first"]
    m = _found(r"Answer text shown where the first quote is right\*\* \(issue 38's measure\): (\d+) of (\d+)", readme)
    assert (int(m[1]), int(m[2])) == (shown["text_shown"], shown["right_first"])
    m = _found(r"first page shown\*\* \(a quote's, or a refusal's nearest page\): model (\d+)/60 \([\d.]+\), "
               r"extractive (\d+)/60", readme)
    assert (int(m[1]), int(m[2])) == _answer_page_first(("unseen15", "unseen16"))
    k16 = SUMMARY["shown_chars"]["model_view_k16"]
    m = _found(r"p50 ([\d,]+) characters of passage text a question \(p90 ([\d,]+); max ([\d,]+)", readme)
    assert [_int(x) for x in m.groups()] == [k16["p50"], k16["p90"], k16["max"]]


def test_the_fourth_runs_table_and_figures_are_summary_json() -> None:
    """unseen 17–18, run as unseen 15–16 were (prereg_round4.txt)."""
    readme = MODEL_PATH / "README.md"
    assert _checked_table("unseen 17–18 pooled", "unseen_17_to_18_pooled", ("extractive", "check_off")) == 3
    shown = SUMMARY["unseen_17_to_18_text_shown_of_right_first"]
    m = _found(r"Answer text shown where the first quote is right\*\*: (\d+) of (\d+)", readme)
    assert (int(m[1]), int(m[2])) == (shown["text_shown"], shown["right_first"])
    m = _found(r"answer is the first page shown\*\*: model (\d+)/60 \([\d.]+\), extractive (\d+)/60", readme)
    assert (int(m[1]), int(m[2])) == _answer_page_first(("unseen17", "unseen18"))
    both = [SUMMARY[p]["check_off"] for p in ("unseen_15_to_16_pooled", "unseen_17_to_18_pooled")]
    m = _found(r"Pooled over rounds 3 and 4 \(120 answerable, 48 near misses\): first quote right (\d+)/120 \([\d.]+\), "
               r"answer-context recall (\d+)/120 \([\d.]+\), wrong-but-verified (\d+)/168", readme)
    assert [int(x) for x in m.groups()] == [sum(b[k] for b in both) for k in (
        "first_quote_states_the_answer", "answer_context_recall", "wrong_but_verified")]


def _check_run(sets: tuple[str, str], pooled: str, missed: int, shown_rate: str, first_rate: str) -> None:
    """A run of two unseen sets in results/model_path/README.md: its pooled table (``missed`` targets not met),
    the answer text shown of its right-first answers and the answer page shown first, against summary.json."""
    readme = MODEL_PATH / "README.md"
    label = f"unseen {sets[0].removeprefix('unseen')}–{sets[1].removeprefix('unseen')} pooled"
    assert _checked_table(label, f"{pooled}_pooled", ("extractive", "check_off")) == missed
    shown = SUMMARY[f"{pooled}_text_shown_of_right_first"]
    m = _found(rf"Answer text shown where the first quote is right\*\*: (\d+) of (\d+) \({re.escape(shown_rate)}", readme)
    assert (int(m[1]), int(m[2])) == (shown["text_shown"], shown["right_first"])
    said = re.findall(rf"answer is the first page shown\*\*: model (\d+)/60 \({re.escape(first_rate)}\), extractive (\d+)/60",
                      _flat(readme))
    assert _answer_page_first(sets) in [(int(a), int(b)) for a, b in said], f"{readme}: {said} for {sets}"


def _check_rounds_pooled(rounds: tuple[str, ...], said: str) -> None:
    """The sentence "Pooled over rounds …" (``said``: its words up to the first count) against summary.json."""
    pooled = [SUMMARY[f"{r}_pooled"]["check_off"] for r in rounds]
    answerable, near, questions = (sum(p[k] for p in pooled) for k in ("answerable", "unanswerable", "questions"))
    m = _found(rf"{said} \({answerable} answerable, {near} near misses\): first quote right (\d+)/{answerable} "
               rf"\([\d.]+\), answer-context recall (\d+)/{answerable} \([\d.]+\), wrong-but-verified (\d+)/{questions} "
               rf"\([\d.]+\), near misses refused (\d+)/{near}, answer text shown for (\d+) of (\d+) right-first answers "
               r"\([\d.]+\), (\d+) model calls", MODEL_PATH / "README.md")
    texts = [SUMMARY[f"{r}_text_shown_of_right_first"] for r in rounds]
    assert [int(x) for x in m.groups()] == [
        *(sum(p[k] for p in pooled) for k in ("first_quote_states_the_answer", "answer_context_recall",
                                             "wrong_but_verified", "near_misses_refused")),
        sum(t["text_shown"] for t in texts), sum(t["right_first"] for t in texts), sum(p["model_calls"] for p in pooled)]


def test_the_fifth_runs_table_and_figures_are_summary_json() -> None:
    """unseen 19–20, run once under prereg_round5.txt, and rounds 3–5 pooled."""
    _check_run(("unseen19", "unseen20"), "unseen_19_to_20", 0, "0.845", "0.967")
    _check_rounds_pooled(("unseen_15_to_16", "unseen_17_to_18", "unseen_19_to_20"), "Pooled over rounds 3, 4 and 5")


def test_the_sixth_runs_table_and_figures_are_summary_json() -> None:
    """unseen 21–22, run once under prereg_round6.txt, and rounds 3–6 pooled."""
    _check_run(("unseen21", "unseen22"), "unseen_21_to_22", 2, "0.946", "1.000")
    _check_rounds_pooled(("unseen_15_to_16", "unseen_17_to_18", "unseen_19_to_20", "unseen_21_to_22"),
                         "Pooled over rounds 3, 4, 5 and 6")


def _rows(s: str, variant: str) -> list[dict]:
    return json.loads((MODEL_PATH / f"{s}_{variant}.json").read_text())["per_question"]


def _answer_page_first(sets: tuple[str, ...]) -> tuple[int, int]:
    """Answerable questions of ``sets`` whose first page shown holds the answer: (model default, extractive)."""
    return tuple(sum(bool(r.get("first_page_holds_answer")) for s in sets for r in _rows(s, v) if r["answerable"])
                 for v in ("check_off", "extractive"))  # type: ignore[return-value]


def _recorded(sets: range | tuple[int, ...]) -> list[dict]:
    """The stand-in recordings of the unseen sets numbered ``sets`` (tests/replies/unseenN.jsonl)."""
    return [json.loads(line) for n in sets
            for line in (ROOT / "tests" / "replies" / f"unseen{n}.jsonl").read_text().splitlines() if line.strip()]


def test_what_the_model_is_shown_is_summary_json_shown_chars() -> None:
    shown = SUMMARY["shown_chars"]
    before, after = shown["before_extractive_view_k8"], shown["after_model_view_k12"]
    m = _found(r"p50 ([\d,]+) → ([\d,]+) characters \(p90 ([\d,]+) → ([\d,]+); max ([\d,]+) → ([\d,]+)\), "
               r"about ([\d.]+)k → ([\d.]+)k tokens at ~4 characters per token", MODEL_PATH / "README.md")
    assert [_int(x) for x in m.groups()[:6]] == [before["p50"], after["p50"], before["p90"], after["p90"],
                                                 before["max"], after["max"]], f"against {SUMMARY_FILE}: {shown}"
    assert [float(m[7]), float(m[8])] == [round(before["p50"] / 4000, 1), round(after["p50"] / 4000, 1)]


def test_the_withheld_answer_text_counts_are_summary_json() -> None:
    unseen = ("unseen9", "unseen10", "unseen11", "unseen12")
    withheld = [w for w in SUMMARY["answer_text_withheld"] if w["set"] in unseen]
    m = _found(r"(\d+) of (\d+) answered on unseen 9–12; (\d+) of them had a right first quote", MODEL_PATH / "README.md")
    assert (int(m[1]), int(m[2]), int(m[3])) == (
        len(withheld), SUMMARY["unseen_9_to_12_pooled"]["check_off"]["answered"],
        sum(w["outcome"] == "right_evidence_first" for w in withheld)), f"against {SUMMARY_FILE} answer_text_withheld"


def test_the_readme_opening_figures_are_the_unseen_11_and_12_files() -> None:
    sets = ("unseen11", "unseen12")
    m = _found(r"on unseen sets 11 and 12 the first quote stated the answer for (\d+) of (\d+) answerable questions, "
               r"and (\d+) of (\d+) questions got a verified but wrong answer; with a model \(([^)]*)\) "
               r"(\d+) of (\d+) and (\d+) of (\d+)", ROOT / "README.md")
    expected = [_pooled(sets, "extractive", "first_quote_states_the_answer"), _pooled(sets, "extractive", "answerable"),
                _pooled(sets, "extractive", "wrong_but_verified"), _pooled(sets, "extractive", "questions"),
                _pooled(sets, "check_off", "first_quote_states_the_answer"), _pooled(sets, "check_off", "answerable"),
                _pooled(sets, "check_off", "wrong_but_verified"), _pooled(sets, "check_off", "questions")]
    assert [int(x) for i, x in enumerate(m.groups()) if i != 4] == expected, f"README.md against {SUMMARY_FILE}"
    assert "stand-in" in m[5] and "not reproducible at HEAD" in m[5]


def test_the_results_page_names_where_the_unseen_model_path_figures_were_measured() -> None:
    measured = SUMMARY["measured"]
    results_page = ROOT / "docs" / "results.md"
    m = _found(r"recorded on (\d+) Dec and measured at older commits, each with uncommitted changes: "
               r"unseen 9–12 at `(\w+)`, unseen 13–14 at `(\w+)`", results_page)
    groups = [("unseen9", "unseen10", "unseen11", "unseen12"), ("unseen13", "unseen14")]
    for named, sets in zip(m.groups()[1:], groups, strict=True):
        assert {c for s in sets for c in measured[s]["commits"]} == {named}, f"docs/results.md names {named} for {sets}"
        assert all(measured[s]["uncommitted_changes"] for s in sets)
    assert {d[8:10] for sets in groups for s in sets for d in measured[s]["dates"]} == {m[1].zfill(2)}
    m = _found(r"Unseen 15–16 were measured on (\d+) Dec at `(\w+)`, unseen 17–18 at `(\w+)`; unseen 19–20 on (\d+) Dec "
               r"at `(\w+)`, unseen 21–22 at `(\w+)`, unseen 23–24 at `(\w+)`, unseen 25–26 at `(\w+)`, unseen 27–28 "
               r"at `(\w+)`, unseen 29–30 at `(\w+)`, unseen 31–32 at `(\w+)`, unseen 33–34 at `(\w+)`, the dev sets' model "
               r"path at `(\w+)` \(their "
               r"extractive files at "
               r"`(\w+)`\)", results_page)
    runs = [(m[1], {m[2]}, ("unseen15", "unseen16")), (m[1], {m[3]}, ("unseen17", "unseen18")),
            (m[4], {m[5]}, ("unseen19", "unseen20")), (m[4], {m[6]}, ("unseen21", "unseen22")),
            (m[4], {m[7]}, ("unseen23", "unseen24")), (m[4], {m[8]}, ("unseen25", "unseen26")),
            (m[4], {m[9]}, ("unseen27", "unseen28")), (m[4], {m[10]}, ("unseen29", "unseen30")),
            (m[4], {m[11]}, ("unseen31", "unseen32")), (m[4], {m[12]}, ("unseen33", "unseen34")),
            (m[4], {m[13], m[14]}, ("faa_dev", "manuals_dev"))]
    for day, commits, sets in runs:
        assert {c for s in sets for c in measured[s]["commits"]} == commits, f"docs/results.md names {commits} for {sets}"
        assert {d[8:10] for s in sets for d in measured[s]["dates"]} == {day.zfill(2)}, f"{sets} were not measured on {day}"
    dev = [json.loads((MODEL_PATH / f"{s}_{v}.json").read_text())["provenance"]["git_commit"][:7]
           for s in ("faa_dev", "manuals_dev") for v in ("check_off", "extractive")]
    assert dev == [m[13], m[14], m[13], m[14]], "docs/results.md names the dev sets' model-path and extractive commits"


def test_no_unseen_recording_carries_the_instructions_it_was_written_under() -> None:
    """docs/results.md says a replay at HEAD counts every unseen recording as recorded without instructions."""
    assert "none of those recordings carries the hash of the instructions" in _flat(ROOT / "docs" / "results.md")
    recorded = _recorded(range(9, 15))
    assert len(recorded) > 200 and not any("instructions" in r for r in recorded)
    later = _recorded(range(15, 35))
    assert later and all("instructions" in r for r in later)  # recorded after the hash was kept: they replay at HEAD


def test_the_results_page_extractive_figures_are_the_answer_files() -> None:
    results = ROOT / "results"
    files = {f.name: json.loads(f.read_text())["summary"] for f in sorted(results.glob("answer_eval*.json"))}
    non_dev = [s for name, s in files.items() if name not in ("answer_eval.json", "answer_eval_manuals_dev.json")]
    m = _found(r"On the (\d+) non-dev answer sets, with the default: (\d+)/(\d+) right evidence first, (\d+)/(\d+) "
               r"wrong-but-verified", ROOT / "docs" / "results.md")
    assert [int(x) for x in m.groups()] == [len(non_dev), sum(s["answered_correctly"] for s in non_dev),
                                            sum(s["answerable"] for s in non_dev),
                                            sum(s["wrong_but_verified"] for s in non_dev),
                                            sum(s["questions"] for s in non_dev)], "against results/answer_eval*.json"
    newest = [files["answer_eval_manuals_unseen11.json"], files["answer_eval_manuals_unseen12.json"]]
    m = _found(r"On the two newest unseen sets \(11 and 12\): (\d+)/(\d+) right, (\d+)/(\d+) near misses refused, "
               r"(\d+)/(\d+) wrong", ROOT / "docs" / "results.md")
    assert [int(x) for x in m.groups()] == [sum(s[k] for s in newest) for k in (
        "answered_correctly", "answerable", "unanswerable_refused", "unanswerable", "wrong_but_verified", "questions")]


def _short(value: object) -> object:
    """A drill figure as docs/scaling.md shows it: the cluster's temporary directory as "…/"."""
    if isinstance(value, dict):
        return {k: _short(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_short(v) for v in value]
    return re.sub(r"/tmp/cv-cluster-[^/]+/", "…/", value) if isinstance(value, str) else value


def _within(shown: object, measured: object, where: str) -> None:
    """Every figure ``shown`` states is ``measured``'s (``shown`` may leave keys out)."""
    if isinstance(shown, dict):
        assert isinstance(measured, dict), where
        for key, value in shown.items():
            assert key in measured, f"{where}.{key} is not in the result file"
            _within(value, measured[key], f"{where}.{key}")
    elif isinstance(shown, list):
        assert isinstance(measured, list) and len(shown) == len(measured), where
        for i, (a, b) in enumerate(zip(shown, measured, strict=True)):
            _within(a, b, f"{where}[{i}]")
    else:
        assert shown == measured, f"{where}: docs/scaling.md says {shown!r}, results/replicas/drill.json {measured!r}"


def test_the_drill_run_shown_in_scaling_md_is_results_replicas_drill_json() -> None:
    measured = json.loads((ROOT / "results" / "replicas" / "drill.json").read_text())
    text = (ROOT / "docs" / "scaling.md").read_text()
    m = re.search(r"\[results/replicas/drill\.json\]\(\.\./results/replicas/drill\.json\), (\d{4}-\d\d-\d\d)[^)]*\):\s*"
                  r"```json\n(.*?)```", text, re.S)
    assert m, "docs/scaling.md shows no drill run from results/replicas/drill.json"
    assert m[1] == measured["date"][:10]
    _within(json.loads(m[2]), _short(measured), "drill")


def test_the_seventh_runs_table_and_figures_are_summary_json() -> None:
    """unseen 23–24, run once under prereg_round7.txt, and rounds 3–7 pooled."""
    _check_run(("unseen23", "unseen24"), "unseen_23_to_24", 2, "0.898", "1.000")
    _check_rounds_pooled(("unseen_15_to_16", "unseen_17_to_18", "unseen_19_to_20", "unseen_21_to_22", "unseen_23_to_24"),
                         "Pooled over rounds 3, 4, 5, 6 and 7")


def test_the_eighth_runs_table_and_figures_are_summary_json() -> None:
    """unseen 25–26, run once under prereg_round8.txt, and rounds 3–8 pooled."""
    _check_run(("unseen25", "unseen26"), "unseen_25_to_26", 2, "0.898", "0.967")
    _check_rounds_pooled(("unseen_15_to_16", "unseen_17_to_18", "unseen_19_to_20", "unseen_21_to_22", "unseen_23_to_24",
                          "unseen_25_to_26"), "Pooled over rounds 3, 4, 5, 6, 7 and 8")


def test_the_ninth_runs_table_and_figures_are_summary_json() -> None:
    """unseen 27–28, run once under prereg_round9.txt, and rounds 3–9 pooled."""
    _check_run(("unseen27", "unseen28"), "unseen_27_to_28", 3, "0.868", "0.933")
    _check_rounds_pooled(("unseen_15_to_16", "unseen_17_to_18", "unseen_19_to_20", "unseen_21_to_22", "unseen_23_to_24",
                          "unseen_25_to_26", "unseen_27_to_28"), "Pooled over rounds 3, 4, 5, 6, 7, 8 and 9")


def test_the_tenth_runs_table_and_figures_are_summary_json() -> None:
    """unseen 29–30, run once under prereg_round10.txt, and rounds 3–10 pooled."""
    _check_run(("unseen29", "unseen30"), "unseen_29_to_30", 3, "0.936", "0.867")
    _check_rounds_pooled(("unseen_15_to_16", "unseen_17_to_18", "unseen_19_to_20", "unseen_21_to_22", "unseen_23_to_24",
                          "unseen_25_to_26", "unseen_27_to_28", "unseen_29_to_30"),
                         "Pooled over rounds 3, 4, 5, 6, 7, 8, 9 and 10")


def test_the_eleventh_runs_table_and_figures_are_summary_json() -> None:
    """unseen 31–32, run once under prereg_round11.txt, and rounds 3–11 pooled."""
    _check_run(("unseen31", "unseen32"), "unseen_31_to_32", 2, "0.906", "0.950")
    _check_rounds_pooled(("unseen_15_to_16", "unseen_17_to_18", "unseen_19_to_20", "unseen_21_to_22", "unseen_23_to_24",
                          "unseen_25_to_26", "unseen_27_to_28", "unseen_29_to_30", "unseen_31_to_32"),
                         "Pooled over rounds 3, 4, 5, 6, 7, 8, 9, 10 and 11")


def test_the_twelfth_runs_table_and_figures_are_summary_json() -> None:
    """unseen 33–34, run once under prereg_round12.txt, and rounds 3–12 pooled."""
    _check_run(("unseen33", "unseen34"), "unseen_33_to_34", 1, "0.870", "0.933")
    _check_rounds_pooled(("unseen_15_to_16", "unseen_17_to_18", "unseen_19_to_20", "unseen_21_to_22", "unseen_23_to_24",
                          "unseen_25_to_26", "unseen_27_to_28", "unseen_29_to_30", "unseen_31_to_32", "unseen_33_to_34"),
                         "Pooled over rounds 3, 4, 5, 6, 7, 8, 9, 10, 11 and 12")
