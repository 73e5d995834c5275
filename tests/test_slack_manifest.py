"""slack-app-manifest.yml agrees with the code: what a person pastes into "Create New App → From a
manifest" gives the bot every event, command, button and scope it uses, and nothing it does not.

The app under test is the real Bolt app (``bot.app.build_app``) built against the fake Slack; its
registered listeners are read back from Bolt and each is exercised with the request Slack would
send for the manifest's subscriptions. The scopes are compared with the ones the code asks for at
install (``CHAPTERVERSE_SLACK_SCOPES``) and with the Web API methods the code calls.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from slack_bolt.request import BoltRequest
from slack_bolt.response import BoltResponse

from bot.app import Bot, build_app
from bot.clients import Clients
from retrieval.settings import Settings
from tests.conftest import ROOT
from tests.fake_slack import BOT_TOKEN, FakeSlack

MANIFEST = ROOT / "slack-app-manifest.yml"

# Slack's documented scope for each bot event and Web API method the bot may use. A method or event
# missing here fails the test on purpose: add it with the scope Slack's docs give for it, and put
# that scope in the manifest and in Settings.slack_scopes.
EVENT_SCOPES = {
    "app_mention": {"app_mentions:read"},
    "message.channels": {"channels:history"},
    "message.groups": {"groups:history"},
    "message.im": {"im:history"},
    "message.mpim": {"mpim:history"},
}
CHANNEL_TYPE = {"message.channels": "channel", "message.groups": "group", "message.im": "im",
                "message.mpim": "mpim"}
METHOD_SCOPES = {
    "chat_postMessage": {"chat:write"},
    "chat_update": {"chat:write"},
    "chat_delete": {"chat:write"},
    "chat_postEphemeral": {"chat:write"},
    # threads in every kind of conversation the bot is subscribed to
    "conversations_replies": {"channels:history", "groups:history", "im:history", "mpim:history"},
    "files_info": {"files:read"},
    "auth_test": set(),
    "users_info": {"users:read"},  # bot.authz: is the person a workspace admin or owner
}
WEB_API_CALL = re.compile(r"\.((?:chat|conversations|files|reactions|users|pins|bookmarks|auth|team|usergroups|"
                          r"views|reminders|search|dnd|emoji|channels|groups|im|mpim)_[A-Za-z]+)\(")


@pytest.fixture(scope="module")
def manifest() -> dict[str, Any]:
    return yaml.safe_load(MANIFEST.read_text())


@pytest.fixture(scope="module")
def app() -> Iterator[Any]:
    """The bot's real Bolt app, built as `chapterverse bot` builds it (single workspace)."""
    fake = FakeSlack().start()
    try:
        settings = Settings(slack={"api_url": fake.api_url, "bot_token": BOT_TOKEN})
        bot = Bot(settings=settings, clients=Clients(settings, token=BOT_TOKEN), store=None, answering=None,
                  jobs=None, answers=None, quick=None)  # type: ignore[arg-type]  (not used to build)
        yield build_app(bot)
    finally:
        fake.stop()


def registered(app: Any) -> dict[str, list[Any]]:
    """What each Bolt listener was registered for, read from its matcher: {'event': ['app_mention', …],
    'command': [re.compile('^/.+')], 'action': ['feedback_up', …]}."""
    out: dict[str, list[Any]] = {}
    for listener in app._listeners:  # noqa: SLF001  (Bolt keeps no public list)
        for matcher in listener.matchers:
            names = inspect.getclosurevars(matcher.func).nonlocals
            for kind, key in (("event", "event_type"), ("command", "command"), ("action", "constraints")):
                if key in names:
                    out.setdefault(kind, []).append(names[key])
    return out


def request(body: dict[str, Any]) -> BoltRequest:
    return BoltRequest(body=body, mode="socket_mode")


def event_body(event_type: str, **fields: Any) -> dict[str, Any]:
    return {"type": "event_callback", "team_id": "T0FAKE", "api_app_id": "A0FAKE", "event_id": "Ev1",
            "event": {"type": event_type, "user": "U0ALICE", "text": "hello", "ts": "1.000001",
                      "channel": "C0GENERAL", **fields},
            "authorizations": [{"team_id": "T0FAKE", "user_id": "U0BOT", "is_bot": True}]}


def handled_by(app: Any, body: dict[str, Any]) -> list[Any]:
    return [lis for lis in app._listeners if lis.matches(req=request(body), resp=BoltResponse(status=200))]  # noqa: SLF001


def manifest_scopes(manifest: dict[str, Any]) -> set[str]:
    return set(manifest["oauth_config"]["scopes"]["bot"])


def test_manifest_turns_on_socket_mode_and_the_dm_tab(manifest: dict[str, Any]) -> None:
    settings = manifest["settings"]
    assert settings["socket_mode_enabled"] is True  # `chapterverse bot` connects over Socket Mode only
    assert "request_url" not in settings.get("event_subscriptions", {})
    assert manifest["features"]["app_home"]["messages_tab_enabled"] is True  # DMs are questions too
    assert manifest["features"]["app_home"]["messages_tab_read_only_enabled"] is False
    assert manifest["display_information"]["name"] and manifest["features"]["bot_user"]["display_name"]


def test_every_listener_has_its_event_subscribed_and_every_subscription_a_listener(
        manifest: dict[str, Any], app: Any) -> None:
    events = manifest["settings"]["event_subscriptions"]["bot_events"]
    listened = set(registered(app)["event"])
    assert listened == {"app_mention", "message"}, f"the bot listens to {listened}: update the manifest and this test"
    subscribed_types = {e.split(".", 1)[0] for e in events}
    assert subscribed_types == listened, "subscribe to exactly the event types the bot listens to"
    for event in events:
        fields = {"channel_type": CHANNEL_TYPE[event]} if event in CHANNEL_TYPE else {}
        if event == "message.im":
            fields["channel"] = "D0ALICE"
        assert handled_by(app, event_body(event.split(".", 1)[0], **fields)), f"nothing in bot/ handles {event}"
    # the message listener answers in every kind of conversation (channels, private channels, DMs,
    # group DMs), so every kind is subscribed
    assert set(events) == set(EVENT_SCOPES), f"subscribe to {set(EVENT_SCOPES) - set(events)}"


def test_the_slash_command_and_the_feedback_buttons_are_reachable(manifest: dict[str, Any], app: Any) -> None:
    from bot import render  # noqa: PLC0415

    commands = [c["command"] for c in manifest["features"]["slash_commands"]]
    assert commands == ["/chapterverse"]
    for cmd in commands:
        body = {"command": cmd, "text": "help", "team_id": "T0FAKE", "channel_id": "C0GENERAL",
                "user_id": "U0ALICE", "response_url": "http://127.0.0.1:9/x", "trigger_id": "1"}
        assert handled_by(app, body), f"no listener for {cmd}"
    actions = set(registered(app)["action"])
    assert actions == {render.FEEDBACK_UP, render.FEEDBACK_DOWN}
    assert manifest["settings"]["interactivity"]["is_enabled"] is True, "the 👍/👎 buttons need interactivity"
    for action_id in actions:
        body = {"type": "block_actions", "team": {"id": "T0FAKE"}, "user": {"id": "U0ALICE"},
                "channel": {"id": "C0GENERAL"}, "container": {"type": "message", "channel_id": "C0GENERAL"},
                "actions": [{"action_id": action_id, "block_id": "feedback", "value": "1", "type": "button"}]}
        assert handled_by(app, body), f"no listener for the {action_id} button"
    hint = manifest["features"]["slash_commands"][0]["usage_hint"]
    for verb in re.findall(r"(?:^|\| )([a-z]+)", hint):
        assert f"/chapterverse {verb}" in render.HELP, f"`{verb}` is in the usage hint but not in the help"


def test_scopes_are_the_ones_the_code_asks_for_and_cover_what_it_does(manifest: dict[str, Any]) -> None:
    scopes = manifest_scopes(manifest)
    asked = {s.strip() for s in Settings().slack.scopes.split(",") if s.strip()}
    assert scopes == asked, "the manifest and CHAPTERVERSE_SLACK_SCOPES' default (OAuth installs) must agree"
    for event in manifest["settings"]["event_subscriptions"]["bot_events"]:
        assert event in EVENT_SCOPES, f"{event}: add its scope to EVENT_SCOPES"
        assert EVENT_SCOPES[event] <= scopes, f"{event} needs {EVENT_SCOPES[event] - scopes}"
    assert "commands" in scopes  # the slash command

    called = {m for path in sorted((ROOT / "bot").glob("*.py")) for m in WEB_API_CALL.findall(path.read_text())}
    assert {"chat_postMessage", "files_info"} <= called, called  # the scan finds the calls it should
    unknown = called - METHOD_SCOPES.keys()
    assert not unknown, f"bot/ calls {unknown}: add each with its scope to METHOD_SCOPES (and the manifest)"
    needed = set().union(*(METHOD_SCOPES[m] for m in called))
    assert needed <= scopes, f"missing scopes for the Web API calls in bot/: {needed - scopes}"
    # nothing asked for that nothing uses (a reviewer installing the app sees every scope)
    used = needed | set().union(*EVENT_SCOPES.values()) | {"commands"}
    assert scopes <= used, f"scopes nothing uses: {scopes - used}"


def test_readme_points_to_the_manifest() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "slack-app-manifest.yml" in readme and "From a manifest" in readme
    assert Path(MANIFEST).exists()
