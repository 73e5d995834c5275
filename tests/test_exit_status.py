"""Exit statuses a script can trust, for `chapterverse ask` and `search` (the real command, real Postgres):
0 answered or refused, 1 bad input, 2 misconfiguration; an error is one line on stderr and nothing on
stdout, even with --json."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.conftest import run_cli, scratch_database
from tests.pdfgen import text_pdf

FACT = ("Section 4.2 Ground checks. Magneto checks are performed at 1,700 RPM during the run-up, "
        "and the maximum drop on either magneto is 125 RPM. ")
OTHER = "Chapter 2 Cabin. The cabin heater is controlled by the red knob below the panel. "


@pytest.fixture(scope="module")
def env(pg_url: str, tmp_path_factory) -> Iterator[dict[str, str]]:
    """A database holding two collections, 'dev' and 'mine', ingested with the real command."""
    tmp = tmp_path_factory.mktemp("exit")
    with scratch_database(pg_url, "cv_exit") as url:
        env = {"DATABASE_URL": url, "GEMINI_API_KEY": ""}  # set but empty counts as unset
        for name, body, coll in (("ground-checks.pdf", FACT, "dev"), ("cabin.pdf", OTHER, "mine")):
            res = run_cli("ingest", str(text_pdf(tmp / name, [body * 3])), "--collection", coll, env=env)
            assert res.returncode == 0, res.stderr
        yield env


def one_error_line(res) -> str:
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert "Traceback" not in res.stderr and res.stdout == "", (res.stdout, res.stderr)
    return lines[0]


def test_answered_and_refused_both_exit_0(env: dict[str, str]) -> None:
    answered = run_cli("ask", "What is the maximum magneto drop?", "--collection", "dev", "--json", env=env)
    assert answered.returncode == 0, answered.stderr
    out = json.loads(answered.stdout)
    assert out["refusal"] is False and "125 RPM" in out["citations"][0]["quote"]

    refused = run_cli("ask", "What is the never-exceed speed of the aircraft?", "--json", env=env)
    assert refused.returncode == 0, refused.stderr
    assert json.loads(refused.stdout)["refusal"] is True

    found = run_cli("search", "magneto drop", "--collection", "dev", "--collection", "mine", "--json", env=env)
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["results"][0]["document"] == "ground-checks.pdf"


@pytest.mark.parametrize("args", [
    ("ask", ""), ("ask", "   \n"), ("ask", "", "--json"), ("search", ""), ("search", " ", "--json"),
])
def test_an_empty_question_or_query_exits_1(env: dict[str, str], args: tuple[str, ...]) -> None:
    res = run_cli(*args, env=env)
    assert res.returncode == 1
    assert "is empty" in one_error_line(res)


@pytest.mark.parametrize("args", [("ask",), ("search",), ("ask", "q", "--answerer", "gpt"), ("search", "q", "--k", "0"),
                                  ("ask", "q", "--no-such-option")])
def test_usage_mistakes_are_bad_input_exit_1(env: dict[str, str], args: tuple[str, ...]) -> None:
    res = run_cli(*args, env=env)
    assert res.returncode == 1, res.stderr
    assert res.stdout == "" and "Traceback" not in res.stderr


def test_gemini_without_a_key_exits_2(env: dict[str, str]) -> None:
    for args in (("ask", "What is the maximum magneto drop?"), ("ask", "What is the maximum magneto drop?", "--json")):
        res = run_cli(*args, "--answerer", "gemini", env=env)
        assert res.returncode == 2
        line = one_error_line(res)
        assert "--answerer gemini" in line and "GEMINI_API_KEY" in line


def test_an_unknown_collection_exits_2_and_names_the_ones_there_are(env: dict[str, str]) -> None:
    for args in (("ask", "What is the maximum magneto drop?"), ("search", "magneto"),
                 ("ask", "What is the maximum magneto drop?", "--json"), ("search", "magneto", "--json")):
        res = run_cli(*args, "--collection", "nosuch", env=env)
        assert res.returncode == 2, res.stderr
        assert one_error_line(res) == "error: no collection 'nosuch'; collections: dev, mine"
    # one known and one unknown: still an error, naming the unknown one only
    res = run_cli("search", "magneto", "--collection", "dev", "--collection", "nosuch", env=env)
    assert res.returncode == 2 and one_error_line(res) == "error: no collection 'nosuch'; collections: dev, mine"


def test_an_embedding_model_that_cannot_load_exits_2(env: dict[str, str]) -> None:
    for cmd in ("ask", "search"):
        res = run_cli(cmd, "magneto drop", env={**env, "CHAPTERVERSE_EMBEDDING_MODEL": "/nonexistent/model"})
        assert res.returncode == 2, res.stderr
        assert "/nonexistent/model" in one_error_line(res)


def test_help_documents_the_exit_statuses() -> None:
    for cmd in ("ask", "search"):
        res = run_cli(cmd, "--help", env={"COLUMNS": "200"})
        assert res.returncode == 0
        text = " ".join(res.stdout.split())
        assert "1 bad input" in text and "2 misconfiguration" in text
        assert "nothing ingested yet" in text
        if cmd == "ask":
            assert "--collection that does not exist" in text
            assert "Exit status: 0 answered or refused" in text and "GEMINI_API_KEY" in text
        else:  # search has no answerer: its help says nothing of one (issue 32, item 11)
            assert "Exit status: 0 passages found, or none" in text and "GEMINI_API_KEY" not in text
            assert "a --collection or --document that does not exist" in text


# issue 32, item 8: small things a user sees ---------------------------------------------------

def test_db_status_names_the_highest_numbered_migration(env: dict[str, str]) -> None:
    from retrieval.store.db import migration_sources, schema_version  # noqa: PLC0415

    files = [f.name.rsplit(".", 1)[0] for d in migration_sources() for f in d.iterdir()
             if f.name.endswith(".sql")]
    res = run_cli("db", "status", "--json", env=env)
    assert res.returncode == 0, res.stderr
    schema = json.loads(res.stdout)["schema"]
    assert schema == schema_version(files) and schema[:4].isdigit() and schema != "__init__", schema
    assert schema_version(["0009_job_queue", "0022_collection_presets", "__init__", "0013_url_queries"]) == \
        "0022_collection_presets"


@pytest.mark.parametrize("args", [("search", "q", "--k", "0"), ("ask",), ("search",), ("ask", "q", "--no-such-option"),
                                  ("docs", "--nope")])
def test_usage_mistakes_are_one_line(env: dict[str, str], args: tuple[str, ...]) -> None:
    res = run_cli(*args, env=env)
    assert res.returncode == 1, res.stderr
    line = one_error_line(res)
    assert line.startswith("error: ") and "--help" in line and "╭" not in res.stderr, res.stderr


def test_a_bad_setting_is_one_line_naming_the_variable(env: dict[str, str]) -> None:
    res = run_cli("docs", env={**env, "CHAPTERVERSE_SLACK_WORKERS": "abc"})
    assert res.returncode == 2
    assert one_error_line(res) == ("error: bad configuration: CHAPTERVERSE_SLACK_WORKERS='abc': Input should be a "
                                   "valid integer, unable to parse string as an integer")


@pytest.mark.parametrize("args", [("docs", "--collection", ""), ("docs", "--collection", "a\nb"),
                                  ("ask", "What is the maximum magneto drop?", "--collection", ""),
                                  ("search", "magneto", "--collection", "dev\nmine"),
                                  ("remove", "cabin.pdf", "--collection", " "),
                                  ("collections", "set-preset", "", "default")])
def test_an_empty_or_multi_line_collection_name_is_bad_input(env: dict[str, str], args: tuple[str, ...]) -> None:
    res = run_cli(*args, env=env)
    assert res.returncode == 1, res.stderr
    line = one_error_line(res)
    assert "collection name is empty" in line or "cannot hold line breaks" in line or "spaces" in line, line


def test_an_ambiguous_remove_is_bad_input_exit_1(pg_url: str, tmp_path) -> None:
    with scratch_database(pg_url, "cv_ambiguous") as url:
        e = {"DATABASE_URL": url}
        pdf = text_pdf(tmp_path / "shared.pdf", [FACT * 3])
        for coll in ("one", "two"):
            assert run_cli("ingest", str(pdf), "--collection", coll, env=e).returncode == 0
        res = run_cli("remove", "shared.pdf", env=e)
        assert res.returncode == 1, res.stderr
        assert one_error_line(res) == ("error: 'shared.pdf' is in several collections (one, two); say which with "
                                       "--collection")
        ok = run_cli("remove", "shared.pdf", "--collection", "two", env=e)
        assert ok.returncode == 0 and "removed shared.pdf from 'two'" in ok.stdout
