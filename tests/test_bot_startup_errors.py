"""`chapterverse bot` that cannot start says why in one line and exits 2: Slack unreachable, a bot
token Slack rejects, an app-level token Slack rejects. No library warnings, no stack traces, no
secrets. The real command as a subprocess, the real slack_sdk against the fake Slack."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.fake_slack import APP_TOKEN, BOT_TOKEN, FakeSlack

WRONG_BOT = "xoxb-999-wrong-token-abcdef"
WRONG_APP = "xapp-1-wrong-app-token-abcdef"
EMPTY = "or share a PDF with the bot in Slack"  # how the start line's warning of an empty collection ends


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    f = FakeSlack().start()
    yield f
    f.stop()


def free_port() -> int:
    """A 127.0.0.1 port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_bot(env: dict[str, str], home: Path, command: str = "bot"):
    # CHAPTERVERSE_HOME must never be created: the Slack check comes before the database
    return run_cli(command, env={"CHAPTERVERSE_HOME": str(home), "DATABASE_URL": "", **env}, timeout=120)


def only_line(res) -> str:
    out = res.stderr + res.stdout
    out = "\n".join(ln for ln in out.splitlines() if not ln.endswith(EMPTY))  # the start line's own warning
    assert "Traceback" not in out and "WARNING" not in out and "slack_sdk" not in out and "slack_bolt" not in out, out
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and res.stdout == "", out
    for secret in (BOT_TOKEN, APP_TOKEN, WRONG_BOT, WRONG_APP):
        assert secret not in out
    return lines[0]


def test_unreachable_slack_is_one_line_and_exit_2(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/api/"
    res = run_bot({"SLACK_API_URL": url, "SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_APP_TOKEN": APP_TOKEN}, tmp_path / "h")
    assert res.returncode == 2
    assert only_line(res) == f"error: could not reach Slack at {url} (Connection refused)"
    assert not (tmp_path / "h").exists()


@pytest.mark.parametrize("command", ["bot", "worker"])
def test_rejected_bot_token_is_one_line_and_exit_2(fake: FakeSlack, tmp_path: Path, command: str) -> None:
    res = run_bot({**fake.env(), "SLACK_BOT_TOKEN": WRONG_BOT}, tmp_path / "h", command)
    assert res.returncode == 2
    assert only_line(res) == "error: Slack rejected SLACK_BOT_TOKEN (invalid_auth)"
    assert [c.method for c in fake.calls] == ["auth.test"]  # asked once, no retries
    assert not (tmp_path / "h").exists()


def test_a_server_that_is_not_slack_is_named(tmp_path: Path) -> None:
    """A SLACK_API_URL that points at some other web server (a typo, a proxy page)."""

    class NotSlack(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = b"<html>not here</html>"
            self.send_response(404)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), NotSlack)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/api/"
        res = run_bot({"SLACK_API_URL": url, "SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_APP_TOKEN": APP_TOKEN},
                      tmp_path / "h")
    finally:
        server.shutdown()
    assert res.returncode == 2
    assert only_line(res) == (f"error: could not reach Slack at {url} (HTTP 404, not a Slack Web API answer; "
                              "check SLACK_API_URL)")


def test_rejected_app_token_is_named_and_exit_2(fake: FakeSlack, settings) -> None:
    """The app-level token is checked when the Socket Mode connection opens (after the database):
    a rejection is not retried forever but ends the process with one error line."""
    res = run_cli("bot", env={**fake.env(), "SLACK_APP_TOKEN": WRONG_APP}, timeout=180)
    assert res.returncode == 2, res.stderr
    out = res.stderr + res.stdout
    out = "\n".join(ln for ln in out.splitlines() if not ln.endswith(EMPTY))  # the start line's own warning
    assert "Traceback" not in out and "WARNING" not in out and "slack_sdk" not in out and "slack_bolt" not in out, out
    assert WRONG_APP not in out and BOT_TOKEN not in out
    # the bot's own progress lines (INFO bot: …) come first; the one error is the last line
    errors = [line for line in res.stderr.splitlines() if "error" in line.lower()]
    assert errors == ["error: Slack rejected SLACK_APP_TOKEN (invalid_auth); it must be an app-level token with "
                      "connections:write, and Socket Mode must be on"], res.stderr
    assert res.stderr.strip().splitlines()[-1] == errors[0]
    assert all(" INFO bot" in line or line.endswith(EMPTY) for line in res.stderr.strip().splitlines()[:-1]), res.stderr
    assert len(fake.calls_to("apps.connections.open")) == 1  # not retried


def test_a_working_start_shows_no_bolt_warning(fake: FakeSlack, settings, tmp_path: Path) -> None:
    """The token warning Bolt printed at every start ("As you gave `client` as well, `token` will be
    unused") is gone, and the log names the workspace and the collection questions search."""
    from tests.test_bot_support import BotProcess  # noqa: PLC0415

    bot = BotProcess(fake, {}, tmp_path / "bot.log").start(wait_models=False)
    try:
        log = bot.log()
    finally:
        assert bot.stop() == 0
    assert "questions search the collection 'default'" in log  # one workspace: the CLI's default collection
    log = "\n".join(ln for ln in log.splitlines() if not ln.endswith(EMPTY))  # the start line's own warning
    assert "will be unused" not in log and "WARNING" not in log, log
    assert BOT_TOKEN not in log and APP_TOKEN not in log


def test_a_stop_while_slack_is_slow_to_open_the_socket_exits_at_once(fake: FakeSlack, settings, tmp_path: Path) -> None:
    """SIGTERM while the WebSocket handshake is still unanswered (and the models still loading): the bot
    does not wait for Slack or the models; it exits 0 within seconds, logging that it stopped."""
    from tests.test_bot_support import BotProcess  # noqa: PLC0415

    fake.stall_handshakes(120)
    bot = BotProcess(fake, {}, tmp_path / "bot.log").start(wait_models=False, wait_connected=False)
    time.sleep(0.5)  # the client is now blocked reading the handshake's answer
    began = time.monotonic()
    code = bot.stop(timeout=60)
    took = time.monotonic() - began
    log = bot.log()
    assert code == 0, log
    assert took < 15, (took, log)
    assert "signal 15: shutting down" in log and "INFO bot: stopped" in log, log
    assert "connected to Slack" not in log, log
