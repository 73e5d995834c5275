"""Who may add and remove documents from Slack (``/chapterverse ingest``, ``remove``, shared PDFs).

Default deny. Allowed are:

- the workspace's admins and owners, as Slack says in ``users.info`` (``is_admin``, ``is_owner``,
  ``is_primary_owner``; the app needs the ``users:read`` scope);
- the people ``CHAPTERVERSE_SLACK_ADMINS`` lists: ``U123`` (in every workspace the bot serves) or
  ``T123:U456`` (only in workspace ``T123``); ``*`` (or ``T123:*``) lets everyone in, which was the
  old default and must now be asked for.

Everyone may ask questions and list documents. A role is looked up once per ``ROLE_CACHE_S`` per
person; when Slack cannot say (``missing_scope``, an outage, a slow answer) the change is refused
with a message that says so, never allowed.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from retrieval.store.db import DatabaseError
from retrieval.settings import Settings

log = logging.getLogger(__name__)

ROLE_CACHE_S = 300.0  # a person's role is asked again after this long (promotions, demotions)
LOOKUP_TIMEOUT_S = 2  # users.info runs before a slash command is acknowledged (Slack allows 3 s)
EVERYONE = "*"


@dataclass(frozen=True)
class Decision:
    allowed: bool
    why: str  # allowed: "listed", "workspace admin", ...; refused: the message for the person


def allow_list(settings: Settings) -> dict[str, frozenset[str]]:
    """CHAPTERVERSE_SLACK_ADMINS by workspace: {"": ids allowed everywhere, "T123": ids allowed in T123}."""
    pairs = [entry.rpartition(":") for entry in re.split(r"[\s,;]+", settings.slack.admins.strip()) if entry]
    return {team: frozenset(user for t, _, user in pairs if t == team) for team, _, _ in pairs}


def listed_for(settings: Settings, team: str) -> frozenset[str]:
    """The ids allowed in ``team`` by the setting (EVERYONE means anyone)."""
    lists = allow_list(settings)
    return lists.get("", frozenset()) | lists.get(team, frozenset())


def role(user: dict[str, Any]) -> str | None:
    """The workspace role that may change documents, from a ``users.info`` user object; None if none."""
    if user.get("deleted") or user.get("is_bot") or user.get("is_restricted") or user.get("is_ultra_restricted"):
        return None
    for flag, name in (("is_primary_owner", "workspace primary owner"), ("is_owner", "workspace owner"),
                       ("is_admin", "workspace admin")):
        if user.get(flag):
            return name
    return None


def refusal(settings: Settings, team: str) -> str:
    names = sorted(u for u in listed_for(settings, team) if u != EVERYONE)
    extra = f" and {', '.join(f'<@{u}>' for u in names)}" if names else ""
    return (f"Sorry, only this workspace's admins and owners{extra} can add or remove documents here. "
            "Please ask one of them; you can still ask me anything about the documents.")


class Authorizer:
    """``check(team, user)``: may this person add and remove documents in this workspace?

    ``clients(team)`` is the workspace's Web API client (its bot token); ``users.info`` is called on
    a copy with a short timeout and no retries, so a check stays within Slack's 3-second
    acknowledgement window."""

    def __init__(self, settings: Settings, clients: Callable[[str], WebClient], *, cache_s: float = ROLE_CACHE_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.settings, self.clients = settings, clients
        self.cache_s, self.clock = cache_s, clock
        self._roles: dict[tuple[str, str], tuple[float, str | None]] = {}
        self._lock = threading.Lock()

    def check(self, team: str, user: str) -> Decision:
        listed = listed_for(self.settings, team)
        if EVERYONE in listed:
            return Decision(True, "anyone (CHAPTERVERSE_SLACK_ADMINS=*)")
        if user in listed:
            return Decision(True, "listed in CHAPTERVERSE_SLACK_ADMINS")
        try:
            found = self._role(team, user)
        except LookupFailed as exc:
            return Decision(False, "Sorry, I couldn't check whether you may add or remove documents here "
                                   f"({exc}). Please try again in a minute, or ask a workspace admin.")
        if found:
            return Decision(True, found)
        return Decision(False, refusal(self.settings, team))

    def _role(self, team: str, user: str) -> str | None:
        key = (team, user)
        now = self.clock()
        with self._lock:
            cached = self._roles.get(key)
        if cached is not None and now - cached[0] < self.cache_s:
            return cached[1]
        try:
            base = self.clients(team)
            quick = WebClient(token=base.token, base_url=base.base_url, timeout=LOOKUP_TIMEOUT_S,
                              retry_handlers=[])
            resp = quick.users_info(user=user)
        except SlackApiError as exc:
            error = str(exc.response.get("error") or "error")
            if error == "missing_scope":
                log.warning("cannot check who may change documents: the app lacks the users:read scope "
                            "(add it and reinstall, or list people in CHAPTERVERSE_SLACK_ADMINS)")
            else:
                log.warning("users.info failed for %s in %s: %s", user, team, error)
            raise LookupFailed(f"Slack said `{error}`") from exc
        except DatabaseError as exc:  # multi-workspace mode: the workspace's token is in the database
            log.warning("cannot check %s in %s: %s", user, team, exc)
            raise LookupFailed("my database is unavailable") from exc
        except Exception as exc:  # noqa: BLE001  (timeouts, connection errors, no installation)
            log.warning("users.info failed for %s in %s: %s", user, team, type(exc).__name__)
            raise LookupFailed("Slack did not answer in time") from exc
        found = role(dict(resp.get("user") or {}))
        with self._lock:
            self._roles[key] = (now, found)
        return found


class LookupFailed(RuntimeError):
    """Slack could not tell the person's role."""
