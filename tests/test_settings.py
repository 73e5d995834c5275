"""One nested settings model: sections by concern, each field under the environment name the README
documents, named presets as JSON (``Settings.from_name``), and a clear error for retired names."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from retrieval.settings import SECTIONS, Settings, SettingsError, environment_names, preset_names

README = Path(__file__).resolve().parents[1] / "README.md"
TOP_LEVEL = {"CHAPTERVERSE_HOME", "CHAPTERVERSE_PRESET", "CHAPTERVERSE_PRESETS_DIR"}
NOT_OURS = {"GOOGLE_GEMINI_BASE_URL"}  # read by google-genai itself


def documented() -> set[str]:
    """The variables of the tables of variables (first column) in the README and the pages under docs/
    (docs/configuration.md is generated from the settings; slack.md, providers.md, operations.md explain)."""
    text = "\n".join(page.read_text(encoding="utf-8") for page in [README, *sorted(README.parent.glob("docs/*.md"))])
    rows = [line.split("|")[1] for line in text.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", row)}


def test_every_documented_variable_is_a_setting_and_every_setting_is_documented() -> None:
    names = environment_names()
    assert documented() - NOT_OURS - TOP_LEVEL <= set(names), "documented but not read"
    firsts = {model.env_names(f, info)[0] for model in SECTIONS.values() for f, info in model.model_fields.items()}
    assert firsts <= documented(), "read but not documented"
    assert TOP_LEVEL <= documented()


def test_the_flat_names_of_before_still_reach_their_sections(monkeypatch) -> None:
    for var, value in {"DATABASE_URL": "postgresql://u@127.0.0.1:1/x", "GEMINI_API_KEY": "k1",
                       "CHAPTERVERSE_SLACK_WORKERS": "3", "CHAPTERVERSE_ANSWERER": "extractive",
                       "CHAPTERVERSE_MAX_FILE_MB": "5", "CHAPTERVERSE_JOB_QUEUE_LIMIT": "7",
                       "CHAPTERVERSE_WORKER_JOBS": "2", "CHAPTERVERSE_SECRET_KEY": "s", "SLACK_BOT_TOKEN": "xoxb-1",
                       "OPENAI_API_KEY": "o", "CHAPTERVERSE_RERANKER": "none"}.items():
        monkeypatch.setenv(var, value)
    s = Settings()
    assert s.db.url.get_secret_value() == "postgresql://u@127.0.0.1:1/x"
    assert s.answer.gemini_api_key.get_secret_value() == "k1" and s.answer.answerer == "extractive"
    assert (s.slack.workers, s.ingest.max_file_bytes, s.jobs.queue_limit, s.jobs.worker_jobs) == (3, 5_000_000, 7, 2)
    assert s.slack.secret_key.get_secret_value() == "s" and s.slack.bot_token.get_secret_value() == "xoxb-1"
    assert s.answer.openai_api_key.get_secret_value() == "o" and s.search.reranker == "none"
    monkeypatch.setenv("GEMINI_API_KEY", "  ")  # a template .env's empty line means unset
    assert Settings().answer.gemini_api_key is None


def test_keyword_arguments_beat_the_environment_which_beats_the_preset(tmp_path, monkeypatch) -> None:
    (tmp_path / "team.json").write_text(json.dumps({
        "extends": "german", "slack": {"workers": 7, "admins": "U1"}, "answer": {"answerer": "extractive"}}))
    monkeypatch.setenv("CHAPTERVERSE_PRESETS_DIR", str(tmp_path))
    assert "team" in preset_names()
    monkeypatch.setenv("CHAPTERVERSE_SLACK_WORKERS", "3")
    s = Settings.from_name("team")
    assert (s.preset, s.slack.workers, s.slack.admins, s.answer.answerer) == ("team", 3, "U1", "extractive")
    assert s.profile.text_search == "german" and s.profile.answer_lead == "Laut den Handbüchern"
    assert s.slack.ping_interval_s == 2.0  # not in the preset: the default
    assert Settings.from_name("team", slack={"workers": 9}).slack.workers == 9
    monkeypatch.setenv("CHAPTERVERSE_PRESET", "team")
    assert Settings().answer.answerer == "extractive"
    assert Settings().but(slack={"workers": "5"}).slack.workers == 5  # validated


def test_bad_values_and_retired_names_are_one_clear_error(monkeypatch) -> None:
    with pytest.raises(ValueError, match="workers"):
        Settings(slack={"workers": 0})
    with pytest.raises(SettingsError, match="no preset 'nope'"):
        Settings.from_name("nope")
    monkeypatch.setenv("CHAPTERVERSE_PROFILES_DIR", "/tmp")
    with pytest.raises(SettingsError, match="CHAPTERVERSE_PROFILES_DIR is no longer read"):
        Settings()


def test_the_bot_answers_more_at_once_when_a_model_answers(monkeypatch) -> None:
    """Issue 40, item 3: a model answerer's workers mostly wait for it, so unset the bot runs 12 of them
    (4 with the extractive answerer, whose work is CPU); CHAPTERVERSE_SLACK_WORKERS still decides."""
    from bot.main import answer_workers  # noqa: PLC0415

    for name in ("CHAPTERVERSE_SLACK_WORKERS", "CHAPTERVERSE_ANSWERER", "GEMINI_API_KEY", "CHAPTERVERSE_GEMINI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert answer_workers(Settings()) == 4
    assert answer_workers(Settings(answer={"answerer": "openai"})) == 24
    assert answer_workers(Settings(answer={"gemini_api_key": "k"})) == 24  # Gemini, chosen by its key
    assert answer_workers(Settings(answer={"answerer": "extractive", "gemini_api_key": "k"})) == 4
    monkeypatch.setenv("CHAPTERVERSE_SLACK_WORKERS", "3")
    assert answer_workers(Settings(answer={"answerer": "openai"})) == 3
    assert Settings().answer.model_concurrency == 24
