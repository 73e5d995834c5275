"""`chapterverse bot` is wired up and refuses to start without tokens, with one clear line."""

from __future__ import annotations

from tests.conftest import run_cli


def test_bot_command_needs_tokens() -> None:
    res = run_cli("bot", env={"SLACK_BOT_TOKEN": "", "SLACK_APP_TOKEN": ""}, timeout=120)
    assert res.returncode == 2
    assert "SLACK_BOT_TOKEN" in res.stderr and "SLACK_APP_TOKEN" in res.stderr


def test_bot_command_rejects_a_bot_token_as_app_token() -> None:
    res = run_cli("bot", env={"SLACK_BOT_TOKEN": "xoxb-1-2-abc", "SLACK_APP_TOKEN": "xoxb-1-2-abc"}, timeout=120)
    assert res.returncode == 2
    assert "must be an app-level token" in res.stderr
    assert "xoxb-1-2-abc" not in res.stderr + res.stdout


def test_worker_command_needs_a_bot_token_before_touching_the_database(tmp_path) -> None:
    res = run_cli("worker", env={"SLACK_BOT_TOKEN": "", "CHAPTERVERSE_HOME": str(tmp_path / "never")})
    assert res.returncode == 2 and "SLACK_BOT_TOKEN must be set" in res.stderr
    assert not (tmp_path / "never").exists()  # no embedded database was started for nothing
