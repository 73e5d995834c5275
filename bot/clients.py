"""The Slack Web API client to use for a workspace.

Single-workspace mode (``SLACK_BOT_TOKEN``): one client for everything. Multi-workspace mode (OAuth;
``bot.installations``): each workspace's own bot token from the installation store, one client per
token, made on first use and kept (a workspace's token is looked up again every
``TEAM_CACHE_S`` seconds).
"""

from __future__ import annotations

import threading
import time

from slack_sdk import WebClient
from slack_sdk.oauth.installation_store import InstallationStore

from bot.slack import make_client
from retrieval.settings import Settings


TEAM_CACHE_S = 30.0  # a workspace's token is looked up again after this long (reinstalls, revocations)


class NotInstalled(LookupError):
    """No installation (bot token) for this workspace."""


class Clients:
    def __init__(self, settings: Settings, *, token: str | None = None,
                 installations: InstallationStore | None = None) -> None:
        if (token is None) == (installations is None):
            raise ValueError("give either a bot token or an installation store")
        self.settings, self.installations = settings, installations
        self._fixed = make_client(settings, token) if token is not None else None
        self._by_token: dict[str, WebClient] = {}
        self._by_team: dict[str, tuple[float, WebClient]] = {}
        self._lock = threading.Lock()

    def for_team(self, team: str) -> WebClient:
        if self._fixed is not None:
            return self._fixed
        assert self.installations is not None
        now = time.monotonic()
        with self._lock:
            known = self._by_team.get(team)
        if known is not None and now - known[0] < TEAM_CACHE_S:
            return known[1]
        bot = self.installations.find_bot(enterprise_id=None, team_id=team)
        if bot is None or not bot.bot_token:
            raise NotInstalled(f"the app is not installed in workspace {team}")
        with self._lock:
            client = self._by_token.get(bot.bot_token)
            if client is None:
                client = self._by_token[bot.bot_token] = make_client(self.settings, bot.bot_token)
            self._by_team[team] = (now, client)
        return client

    __call__ = for_team
