"""The answer-evaluation rule (first quote on a gold page and carrying the answer words), the result
writer's provenance, the README report, and the question sets' own consistency."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pymupdf
import pytest

from chapterverse_lab.answer_eval import judge, load_questions, outcome, quote_holds, summarise
from retrieval.answer.ask import ask
from retrieval.models import Answer, Citation
from chapterverse_lab.report import END, START, load_columns, render, update_readme
from chapterverse_lab.results import provenance, write_result
from retrieval.text.textnorm import normalize
from tests.conftest import run_cli
from tests.corpus2_fixture import CORPUS2, dev_questions, manuals_corpus  # noqa: F401  (session fixture)

ROOT = Path(__file__).resolve().parents[1]
CFR = "14-CFR-Part-91_General-Operating-and-Flight-Rules.pdf"
PAGE = ("(a) No person may begin a flight in an airplane under VFR conditions unless there is enough fuel "
        "to fly to the first point of intended landing and, assuming normal cruising speed— (1) During the "
        "day, to fly after that for at least 30 minutes; or (2) At night, to fly after that for at least "
        "45 minutes.")
DAY = "During the day, to fly after that for at least 30 minutes"
NIGHT = "At night, to fly after that for at least 45 minutes"
Q = {"id": "n", "question": "How much fuel reserve for VFR at night?", "answerable": True, "document": CFR,
     "pages": [28], "answer_span": "at least 45 minutes"}


def _answer(*quotes: tuple[int, str], refusal: bool = False) -> Answer:
    return Answer(question="q", refusal=refusal,
                  citations=[Citation(document=CFR, page=p, quote=t) for p, t in quotes])


# --- the rule, on constructed answers -----------------------------------------------------------

def test_only_the_first_quote_counts() -> None:
    assert outcome(Q, _answer((28, NIGHT), (28, DAY))) == "right_evidence_first"
    # the night rule is shown, but second: a reader sees the day rule first
    assert outcome(Q, _answer((28, DAY), (28, NIGHT))) == "wrong_but_verified"


def test_right_words_on_the_wrong_page_or_a_refusal_are_not_correct() -> None:
    assert outcome(Q, _answer((29, NIGHT))) == "wrong_but_verified"
    assert outcome(Q, _answer(refusal=True)) == "false_refusal"
    una = {"id": "u", "question": "x", "answerable": False}
    assert outcome(una, _answer(refusal=True)) == "refused"
    assert outcome(una, _answer((28, DAY))) == "wrong_but_verified"


def test_evidence_must_match_on_word_boundaries() -> None:
    q = {**Q, "answer_span": "5 minutes"}
    assert outcome(q, _answer((28, NIGHT))) == "wrong_but_verified"  # "45 minutes" does not contain "5 minutes"


def test_shown_quotes_are_checked_against_the_stored_page() -> None:
    texts = {(CFR, 28): [PAGE]}
    assert quote_holds(Citation(document=CFR, page=28, quote=NIGHT), texts)
    assert not quote_holds(Citation(document=CFR, page=28, quote="At night, to fly for at least 30 minutes"), texts)
    assert not quote_holds(Citation(document=CFR, page=29, quote=NIGHT), texts)
    assert not quote_holds(Citation(document=CFR, page=28, quote="45 minutes."), texts)  # too short to cite
    rows = [judge(Q, _answer((28, NIGHT), (28, "At night, to fly for at least 30 minutes")), texts)]
    s = summarise(rows)
    assert (s["quotes_shown"], s["unverified_quotes_shown"], s["answers_with_unverified_quotes"]) == (2, 1, 1)
    assert (s["answered_correctly"], s["wrong_but_verified"], s["any_quote_on_gold_page"]) == (1, 0, 1)


def test_an_answerable_question_without_answer_span_is_an_error(tmp_path: Path) -> None:
    f = tmp_path / "q.json"
    f.write_text(json.dumps([{k: v for k, v in Q.items() if k != "answer_span"}]))
    with pytest.raises(ValueError, match="answer_span"):
        load_questions(f)


# --- the rule, on real components -----------------------------------------------------------------

def _words_not_quoted(page_text: str, quotes: list[str], n: int = 6) -> str:
    """Six consecutive words of the page that no quote contains (so a reader was not shown them)."""
    shown = " ".join(normalize(q) for q in quotes)
    words = [w for w in page_text.split() if re.fullmatch(r"[A-Za-z][a-z]+[,.;]?", w)]
    for i in range(len(words) - n):
        span = " ".join(words[i:i + n])
        if normalize(span) not in shown and normalize(span) in normalize(page_text):
            return span
    raise AssertionError("no unquoted run of words on the page")


def test_cli_counts_an_answer_correct_only_when_its_first_quote_carries_the_evidence(settings, manuals_corpus,  # noqa: F811
                                                                                      tmp_path) -> None:
    # a real answer from the real index (the first R-intro dev question the answerer answers)
    for q in dev_questions("R-intro.pdf"):
        a = ask(settings, q["question"], collections=[manuals_corpus], answerer="extractive")
        if not a.refusal and a.citations:
            question = q["question"]
            break
    else:
        raise AssertionError("the extractive answerer refused every R-intro dev question")
    first = a.citations[0]
    page_text = pymupdf.open(CORPUS2 / first.document)[first.page - 1].get_text()
    in_first = " ".join(first.quote.split()[:5])          # words the first quote shows
    elsewhere = _words_not_quoted(page_text, [c.quote for c in a.citations])  # words on the page, not shown
    base = {"question": question, "answerable": True, "document": first.document, "pages": [first.page]}
    qfile, out = tmp_path / "q.json", tmp_path / "out.json"
    qfile.write_text(json.dumps([{**base, "id": "shown", "answer_span": in_first},
                                 {**base, "id": "not_shown", "answer_span": elsewhere},
                                 {"id": "u", "question": "What is the best glide speed of a Piper PA-28 Cherokee?",
                                  "answerable": False}]))
    res = run_cli("eval", "answers", str(qfile), "--out", str(out), "--collection", manuals_corpus,
                  "--answerer", "extractive")
    assert res.returncode == 0, res.stderr
    report = json.loads(out.read_text())
    rows = {r["id"]: r for r in report["per_question"]}
    assert rows["shown"]["outcome"] == "right_evidence_first" and rows["shown"]["correct"]
    # same answer, same gold page: the old rule calls it correct, the evidence rule does not
    assert rows["not_shown"]["any_quote_on_gold_page"]
    assert rows["not_shown"]["outcome"] == "wrong_but_verified" and not rows["not_shown"]["correct"]
    s = report["summary"]
    assert (s["answered_correctly"], s["wrong_but_verified_answerable"]) == (1, 1)
    assert s["unverified_quotes_shown"] == 0 and s["quotes_shown"] >= 2
    assert all(c["holds_on_stored_page"] for r in rows.values() for c in r["citations"])
    assert re.fullmatch(r"[0-9a-f]{40}", report["provenance"]["git_commit"])
    assert "right evidence first 1/2" in res.stdout


# --- provenance and the README report ------------------------------------------------------------

def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                   capture_output=True)


def test_results_record_the_commit_and_whether_the_tree_was_dirty(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "a.py").write_text("x = 1\n")
    _git(repo, "add", "a.py")
    _git(repo, "commit", "-q", "-m", "one")
    clean = provenance(repo)
    assert re.fullmatch(r"[0-9a-f]{40}", clean["git_commit"]) and clean["git_dirty"] is False
    (repo / "a.py").write_text("x = 2\n")
    written = write_result(tmp_path / "out" / "r.json", {"command": "c"}, repo=repo)
    stored = json.loads((tmp_path / "out" / "r.json").read_text())
    assert stored == written and stored["command"] == "c"
    assert stored["provenance"]["git_commit"] == clean["git_commit"]
    assert stored["provenance"]["git_dirty"] is True and stored["provenance"]["dirty_paths"] == ["a.py"]
    kept = write_result(tmp_path / "r2.json", {"provenance": clean}, repo=repo)  # taken when the run started
    assert kept["provenance"] == clean
    assert provenance(tmp_path / "out")["git_commit"] is None  # not a checkout: said so, not guessed


def _result(questions_file: str, right: int, date: str) -> dict:
    summary = summarise([judge(Q, _answer((28, NIGHT)) if i < right else _answer((28, DAY)),
                               {(CFR, 28): [PAGE]}) for i in range(2)])
    return {"command": "chapterverse eval answers ...", "date": date, "questions_file": questions_file,
            "config": {"answerer": ["extractive"]}, "summary": summary, "per_question": [],
            "provenance": {"git_commit": "a" * 40, "git_dirty": False}}


def test_report_puts_faa_and_manuals_side_by_side_and_rewrites_only_its_table(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    for name, qf, right, date in [("answer_eval.json", "tests/corpus/dev_questions.json", 1, "2026-01-01T00:00"),
                                  ("answer_eval_manuals_dev.json", "tests/corpus2/dev_questions.json", 2, "2026-01-02T00:00"),
                                  ("answer_eval_first_run.json", "tests/corpus/dev_questions.json", 0, "2027-01-01T00:00")]:
        (results / name).write_text(json.dumps(_result(qf, right, date)))
    cols, older = load_columns(results, ROOT)
    assert [(c.corpus, c.set_key) for c in cols] == [("FAA", "dev"), ("manuals", "dev")]
    assert [c.path.name for c in older] == ["answer_eval_first_run.json"]  # not the set's file, though newer
    table = render(cols, older)
    assert "| measure | FAA dev (tuning) | R + gnuplot dev (tuning) |" in table
    assert "| answered with the right evidence first | 1/2 (0.50) | 2/2 (1.00) |" in table
    assert "| unverified quotes shown | 0/2 (0.00) | 0/2 (0.00) |" in table
    from chapterverse_lab.report import MODEL_END, MODEL_START, SETS_END, SETS_START  # noqa: PLC0415

    readme, page = tmp_path / "README.md", tmp_path / "results.md"
    readme.write_text(f"# T\nbefore\n{MODEL_START}\nstale-brief\n{MODEL_END}\nafter\n")
    page.write_text(f"# R\n{SETS_START}\nstale-sets\n{SETS_END}\n{START}\nstale\n{END}\nafter\n")
    both = ("--results", str(results), "--readme", str(readme), "--results-page", str(page))
    res = run_cli("eval", "report", *both, "--check")
    assert res.returncode == 1 and "out of date" in res.stderr and str(page) in res.stderr
    res = run_cli("eval", "report", *both)
    assert res.returncode == 0, res.stderr
    text, brief = page.read_text(), readme.read_text()
    assert text.startswith("# R\n") and text.endswith(f"{END}\nafter\n") and "stale" not in text
    assert brief.startswith("# T\nbefore\n") and "stale" not in brief and "No model-path evaluations" in brief
    assert table in text
    assert not update_readme(page, table)  # regenerating changes nothing
    assert run_cli("eval", "report", *both, "--check").returncode == 0


def test_the_readme_shows_both_answer_paths_pooled_by_where_the_replies_came_from(tmp_path: Path) -> None:
    from chapterverse_lab.report import render_paths, render_paths_brief  # noqa: PLC0415

    folder = tmp_path / "model_path"
    folder.mkdir()
    for key in ("faa_dev", "manuals_dev", "unseen9", "unseen10", "unseen11", "unseen12"):
        for suffix, right in (("extractive", 1), ("check_off", 2), ("check_on", 2)):
            data = _result("tests/corpus/dev_questions.json", right, "2026-12-05T00:00")
            data["config"]["model_replies"] = {"source": "stand-in model"}
            (folder / f"{key}_{suffix}.json").write_text(json.dumps(data))
    brief = render_paths_brief(folder, check_on=False)
    assert "| extractive (no model) | unseen 9–12 (run once) | 4/8 (0.50) |" in brief
    assert "| model, stand-in replies | unseen 9–12 (run once) | 8/8 (1.00) |" in brief
    assert all(len(line) <= 160 for line in brief.splitlines())
    assert "stand-in model" in render_paths(folder, check_on=False)


# --- the question sets ---------------------------------------------------------------------------

def test_the_set_checker_fails_an_answer_span_the_evaluation_could_never_match(tmp_path: Path) -> None:
    """An answer span cut inside a number ("version 3" of "version 3.0") is on the page as text but no quote
    can ever be scored as containing it (unseen 32's v10): the checker says so; ended on the whole number it passes."""
    from tests.pdfgen import text_pdf  # noqa: PLC0415

    text_pdf(tmp_path / "lib.pdf", ["To use the public-key functions you must install GMP, at least version 3.0, "
                                    "before compiling the library and linking your program."])
    def check(span: str) -> subprocess.CompletedProcess[str]:
        q = {"id": "x01", "document": "lib.pdf", "question": "Which GMP?", "answerable": True, "pages": [1],
             "evidence": "you must install GMP, at least version 3.0, before compiling the library", "answer_span": span,
             "answer": "GMP 3.0 or later", "kind": "numeric"}
        (tmp_path / "q.json").write_text(json.dumps([q]))
        return subprocess.run([sys.executable, str(ROOT / "tests" / "corpus" / "check_questions.py"), "--questions",
                               str(tmp_path / "q.json")], capture_output=True, text=True, cwd=ROOT, timeout=120)
    cut = check("you must install GMP, at least version 3")
    assert cut.returncode == 1 and "only inside a longer number or word" in cut.stdout
    assert check("you must install GMP, at least version 3.0").returncode == 0


@pytest.mark.slow  # re-reads every question set's PDFs: ~30 s
def test_every_question_set_checks_out_against_its_pdfs() -> None:
    """Gold pages exist, evidence and answer spans are on them, unanswerables' terms are absent."""
    res = subprocess.run([sys.executable, str(ROOT / "tests" / "corpus" / "check_questions.py")],
                         capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:]
    assert "tests/corpus2/dev_questions.json" in res.stdout and "ALL CHECKS PASSED" in res.stdout
    unseen = ("tests/corpus/unseen_questions.json", "tests/corpus2/unseen_questions.json",
              "tests/corpus/unseen2_questions.json", "tests/corpus2/unseen2_questions.json",
              "tests/corpus/unseen3_questions.json", "tests/corpus2/unseen3_questions.json")  # kept unseen until the end
    res = subprocess.run([sys.executable, str(ROOT / "tests" / "corpus" / "check_questions.py"),
                          *(arg for name in unseen for arg in ("--questions", name))],
                         capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert res.returncode == 0 and "ALL CHECKS PASSED" in res.stdout, res.stdout[-3000:]
    for name in unseen:  # each set checked, with its own result line
        assert f"== {name}: 42 questions" in res.stdout, res.stdout[-3000:]
        assert len(load_questions(ROOT / name)) == 42
