"""Slack OAuth installations in Postgres: slack-sdk's ``InstallationStore`` for multi-workspace mode.

Bolt calls ``save`` when a workspace installs the app (the OAuth flow), ``find_bot`` /
``find_installation`` to authorize every incoming event, and ``delete_*`` when a workspace
uninstalls the app or revokes its tokens. The bot and the job worker use ``find_bot`` to get a
workspace's own token (``bot.clients``). Rows live in ``slack_installations`` (migration 0012),
keyed by workspace. Their tokens are encrypted with ``CHAPTERVERSE_SECRET_KEY`` when it is set
(``bot.sealed``); ``PostgresOAuthStateStore`` keeps the install flow's one-time states in
``slack_oauth_states`` (migration 0015), so any bot process can finish an install another began.
"""

from __future__ import annotations

import datetime as dt
import logging
import secrets
from typing import Any

from psycopg.types.json import Jsonb
from slack_sdk.oauth.installation_store import Bot, Installation, InstallationStore
from slack_sdk.oauth.state_store import OAuthStateStore

from bot.sealed import SECRET_FIELDS, Sealer
from bot.store import Store

log = logging.getLogger(__name__)


def _workspace(enterprise_id: str | None, team_id: str | None, is_enterprise_install: bool | None) -> str:
    """The row key: the team, or the enterprise for an org-wide install (which has no team)."""
    return (enterprise_id or "") if is_enterprise_install or not team_id else team_id


def _json(value: Any) -> Any:
    return value.isoformat() if isinstance(value, dt.datetime) else value


class PostgresInstallationStore(InstallationStore):
    def __init__(self, store: Store, sealer: Sealer | None = None) -> None:
        """``sealer``: how tokens are encrypted at rest (default: ``CHAPTERVERSE_SECRET_KEY``; a
        malformed key raises ``bot.sealed.SecretKeyError`` here, at start)."""
        self.store = store
        self.sealer = sealer or Sealer(store.settings.slack.secret_key.get_secret_value() if store.settings.slack.secret_key
                                       else None)

    def seal_stored(self) -> int:
        """Encrypt the tokens stored in plain text (or under an older key) with the current first key;
        how many rows changed. Without a key: warn if plain-text tokens are stored, change nothing."""
        def run(conn) -> int:  # noqa: ANN001
            changed = 0
            with conn.transaction():
                for r in conn.execute("SELECT workspace, enterprise_id, user_id, installation FROM "
                                      "slack_installations FOR UPDATE").fetchall():
                    data = r["installation"]
                    tokens = {k: v for k, v in data.items() if k in SECRET_FIELDS and isinstance(v, str) and v}
                    new = {**data, **{k: self.sealer.reseal(v) for k, v in tokens.items()}}
                    if not self.sealer.enabled:
                        changed += bool(tokens)  # plain-text tokens, to warn about
                    elif new != data:
                        conn.execute("UPDATE slack_installations SET installation = %s WHERE workspace = %s "
                                     "AND enterprise_id = %s AND user_id = %s",
                                     (Jsonb(new), r["workspace"], r["enterprise_id"], r["user_id"]))
                        changed += 1
            return changed

        n = self.store.run(run)
        if not self.sealer.enabled and n:
            log.warning("%d Slack installation(s) are stored with plain-text tokens: set CHAPTERVERSE_SECRET_KEY "
                        "to encrypt them (README, Several workspaces)", n)
            return 0
        if n:
            log.info("encrypted the tokens of %d Slack installation(s) with the current secret key", n)
        return n

    @property
    def logger(self) -> logging.Logger:
        return log

    def save(self, installation: Installation) -> None:
        data = self.sealer.seal_fields({k: _json(v) for k, v in installation.to_dict_for_copying().items()})
        key = (_workspace(installation.enterprise_id, installation.team_id, installation.is_enterprise_install),
               installation.enterprise_id or "", installation.user_id or "")
        self.store.run(lambda conn: conn.execute(
            "INSERT INTO slack_installations (workspace, enterprise_id, user_id, installation, installed_at) "
            "VALUES (%s, %s, %s, %s, to_timestamp(%s)) ON CONFLICT (workspace, enterprise_id, user_id) "
            "DO UPDATE SET installation = EXCLUDED.installation, installed_at = EXCLUDED.installed_at",
            (*key, Jsonb(data), installation.installed_at)))

    def save_bot(self, bot: Bot) -> None:
        """Bolt saves bots through ``save``; a bare bot is stored as an installation without a user."""
        self.save(Installation(**bot.to_dict_for_copying(), user_id=""))

    def _latest(self, enterprise_id: str | None, team_id: str | None, is_enterprise_install: bool | None,
                user_id: str | None = None, with_bot: bool = False) -> Installation | None:
        row = self.store.run(lambda conn: conn.execute(  # any user's row when user_id is None
            "SELECT installation FROM slack_installations WHERE workspace = %s AND enterprise_id = %s "
            "AND user_id = coalesce(%s, user_id) AND (NOT %s OR installation->>'bot_token' IS NOT NULL) "
            "ORDER BY installed_at DESC LIMIT 1",
            (_workspace(enterprise_id, team_id, is_enterprise_install), enterprise_id or "", user_id, with_bot)
        ).fetchone())
        return Installation(**self.sealer.open_fields(row["installation"])) if row else None

    def find_bot(self, *, enterprise_id: str | None, team_id: str | None,
                 is_enterprise_install: bool | None = False) -> Bot | None:
        found = self._latest(enterprise_id, team_id, is_enterprise_install, with_bot=True)
        return found.to_bot() if found else None

    def find_installation(self, *, enterprise_id: str | None, team_id: str | None, user_id: str | None = None,
                          is_enterprise_install: bool | None = False) -> Installation | None:
        found = self._latest(enterprise_id, team_id, is_enterprise_install, user_id)
        if found is None or user_id is None:
            return found
        bot = self.find_bot(enterprise_id=enterprise_id, team_id=team_id, is_enterprise_install=is_enterprise_install)
        if bot is not None and bot.bot_token != found.bot_token:  # a user's row keeps the workspace's current bot
            data = found.to_dict_for_copying()
            data.update(bot_token=bot.bot_token, bot_id=bot.bot_id, bot_user_id=bot.bot_user_id,
                        bot_scopes=bot.bot_scopes, bot_refresh_token=bot.bot_refresh_token,
                        bot_token_expires_at=bot.bot_token_expires_at)
            found = Installation(**data)
        return found

    def delete_bot(self, *, enterprise_id: str | None, team_id: str | None) -> None:
        ws = _workspace(enterprise_id, team_id, False)  # the team, else the enterprise
        self.store.run(lambda conn: conn.execute(
            "UPDATE slack_installations SET installation = installation - 'bot_token' - 'bot_refresh_token' "
            "WHERE workspace = %s AND enterprise_id = %s", (ws, enterprise_id or "")))

    def delete_installation(self, *, enterprise_id: str | None, team_id: str | None,
                            user_id: str | None = None) -> None:
        ws = _workspace(enterprise_id, team_id, False)  # the team, else the enterprise
        self.store.run(lambda conn: conn.execute(  # every user's row when user_id is None
            "DELETE FROM slack_installations WHERE workspace = %s AND enterprise_id = %s "
            "AND user_id = coalesce(%s, user_id)", (ws, enterprise_id or "", user_id)))


class PostgresOAuthStateStore(OAuthStateStore):
    """The OAuth flow's one-time ``state`` values in Postgres: issued by the install page, consumed
    (once, within ``expiration_seconds``) by the redirect, whichever bot process serves each."""

    def __init__(self, store: Store, expiration_seconds: int) -> None:
        self.store, self.expiration_seconds = store, expiration_seconds

    @property
    def logger(self) -> logging.Logger:
        return log

    def issue(self, *args: Any, **kwargs: Any) -> str:
        state = secrets.token_urlsafe(32)

        def run(conn) -> None:  # noqa: ANN001
            conn.execute("DELETE FROM slack_oauth_states WHERE issued_at < now() - make_interval(secs => %s)",
                         (self.expiration_seconds,))
            conn.execute("INSERT INTO slack_oauth_states (state) VALUES (%s)", (state,))

        self.store.run(run)
        return state

    def consume(self, state: str) -> bool:
        row = self.store.run(lambda conn: conn.execute(
            "DELETE FROM slack_oauth_states WHERE state = %s RETURNING issued_at > now() - make_interval(secs => %s) "
            "AS fresh", (state, self.expiration_seconds)).fetchone())
        return bool(row and row["fresh"])
