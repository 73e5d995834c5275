"""`chapterverse ask --answerer openai` (the real command in a subprocess) against tests/fake_openai.py:
exit 2 with one line naming what is missing when the OpenAI-compatible answerer is selected but not
configured, and a verified answer when it is."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests import fake_openai as fo
from tests.conftest import run_cli
from tests.fake_gemini import Reply
from tests.test_gemini_failures import QUESTION, quote_from

UNSET = {"GEMINI_API_KEY": "", "OPENAI_API_KEY": "", "OPENAI_BASE_URL": "", "CHAPTERVERSE_OPENAI_API_KEY": "",
         "CHAPTERVERSE_OPENAI_BASE_URL": "", "CHAPTERVERSE_OPENAI_MODEL": "", "CHAPTERVERSE_ANSWERER": ""}


def one_error_line(res) -> str:
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and res.stdout == "" and "Traceback" not in res.stderr, (res.stdout, res.stderr)
    return lines[0]


@pytest.mark.parametrize(("env", "args", "said"), [
    ({}, ("--answerer", "openai"), ["--answerer openai", "CHAPTERVERSE_OPENAI_MODEL"]),
    ({"CHAPTERVERSE_ANSWERER": "openai"}, (), ["CHAPTERVERSE_ANSWERER=openai", "CHAPTERVERSE_OPENAI_MODEL"]),
    ({"CHAPTERVERSE_OPENAI_MODEL": "llama3.1"}, ("--answerer", "openai", "--json"),
     ["--answerer openai", "CHAPTERVERSE_OPENAI_BASE_URL", "OPENAI_API_KEY"]),
])
def test_openai_selected_but_unconfigured_exits_2(env, args, said) -> None:
    res = run_cli("ask", QUESTION, *args, env={**UNSET, **env})
    assert res.returncode == 2, res.stderr
    line = one_error_line(res)
    assert all(s in line for s in said), line


def test_extractive_named_overrides_an_unconfigured_setting(settings, dev_corpus) -> None:
    res = run_cli("ask", QUESTION, "--answerer", "extractive", "--collection", "dev", "--json",
                  env={**UNSET, "CHAPTERVERSE_ANSWERER": "openai"})
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["answerer"] == "extractive"


@pytest.fixture(scope="module")
def fake() -> Iterator[fo.FakeOpenAI]:
    with fo.running() as server:
        yield server


def test_ask_with_a_local_openai_compatible_server(settings, dev_corpus, fake) -> None:
    fake.script(lambda rec: Reply(200, fo.answer_body("250 knots.", [quote_from(rec, "250 knots (288 m.p.h.)")])))
    env = {**UNSET, "CHAPTERVERSE_OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": fake.api_key,
           "CHAPTERVERSE_OPENAI_MODEL": "qwen2.5:7b-instruct"}
    del env["CHAPTERVERSE_OPENAI_API_KEY"]  # set (even blank) it would be read before OPENAI_API_KEY
    res = run_cli("ask", QUESTION, "--answerer", "openai", "--collection", "dev", "--json", env=env)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["answerer"] == "openai" and out["refusal"] is False and out["answer"] == "250 knots.", out["warnings"]
    assert out["citations"][0]["page"] == 17 and "250 knots" in out["citations"][0]["quote"]
    assert len(fake.requests) == 1 and fake.requests[0].body["model"] == "qwen2.5:7b-instruct"


def test_bot_with_an_unconfigured_answerer_setting_exits_2_before_calling_slack(tmp_path) -> None:
    env = {**UNSET, "CHAPTERVERSE_ANSWERER": "openai", "CHAPTERVERSE_HOME": str(tmp_path / "h"), "DATABASE_URL": "",
           "SLACK_API_URL": "http://127.0.0.1:9/api/", "SLACK_BOT_TOKEN": "xoxb-1-not-a-real-token",
           "SLACK_APP_TOKEN": "xapp-1-not-a-real-token"}
    res = run_cli("bot", env=env, timeout=120)
    assert res.returncode == 2, res.stderr
    line = one_error_line(res)
    assert line.startswith("error: CHAPTERVERSE_ANSWERER=openai needs CHAPTERVERSE_OPENAI_MODEL"), line
    assert not (tmp_path / "h").exists()
