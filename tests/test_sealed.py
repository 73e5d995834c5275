"""Installation tokens encrypted at rest (bot.sealed, Fernet) and the OAuth flow's states in Postgres
(bot.installations.PostgresOAuthStateStore), against the test database."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from cryptography.fernet import Fernet
from slack_sdk.oauth.installation_store import Installation

from bot.installations import PostgresInstallationStore, PostgresOAuthStateStore
from bot.sealed import PREFIX, Sealer, SecretKeyError
from bot.store import Store
from tests.leaks import database_hits

KEY, OLD_KEY = Fernet.generate_key().decode(), Fernet.generate_key().decode()


def store_with(settings, key: str | None) -> PostgresInstallationStore:
    return PostgresInstallationStore(Store(settings), Sealer(key))


def install(team: str, token: str) -> Installation:
    return Installation(app_id="A0FAKE", team_id=team, bot_token=token, bot_id="B1", bot_user_id="U1",
                        user_id="U0INSTALLER", user_token=f"xoxp-{token}", bot_refresh_token=f"xoxe-{token}")


def raw_rows(settings, team: str) -> list[dict]:
    with psycopg.connect(settings.db.url.get_secret_value(), row_factory=psycopg.rows.dict_row) as conn:
        return conn.execute("SELECT installation FROM slack_installations WHERE workspace = %s", (team,)).fetchall()


def delete(settings, team: str) -> None:
    with psycopg.connect(settings.db.url.get_secret_value(), autocommit=True) as conn:
        conn.execute("DELETE FROM slack_installations WHERE workspace = %s", (team,))


def test_sealer_round_trip_rotation_and_bad_keys() -> None:
    sealer = Sealer(KEY)
    sealed = sealer.seal("xoxb-123")
    assert sealed.startswith(PREFIX) and "xoxb-123" not in sealed
    assert sealer.open(sealed) == "xoxb-123" and sealer.seal(sealed) == sealed
    assert Sealer(None).seal("xoxb-123") == "xoxb-123" and sealer.open("xoxb-plain") == "xoxb-plain"
    rotated = Sealer(f"{KEY},{OLD_KEY}")
    old = Sealer(OLD_KEY).seal("xoxb-9")
    assert rotated.open(old) == "xoxb-9" and Sealer(KEY).open(rotated.reseal(old)) == "xoxb-9"
    with pytest.raises(SecretKeyError, match="not a Fernet key"):
        Sealer("correct horse battery staple")
    with pytest.raises(SecretKeyError, match="not set"):
        Sealer(None).open(sealed)
    with pytest.raises(SecretKeyError, match="no key in CHAPTERVERSE_SECRET_KEY decrypts"):
        Sealer(OLD_KEY).open(sealed)


def test_tokens_are_encrypted_at_rest_with_a_key_and_read_back(settings) -> None:
    team, token = f"T0E{uuid.uuid4().hex[:6].upper()}", f"xoxb-enc-{uuid.uuid4().hex}"
    try:
        store = store_with(settings, KEY)
        store.save(install(team, token))
        assert database_hits(settings.db.url.get_secret_value(), token) == []  # not even the user token
        stored = raw_rows(settings, team)[0]["installation"]
        assert stored["bot_token"].startswith(PREFIX) and stored["user_token"].startswith(PREFIX)
        assert stored["team_id"] == team  # only the credentials are encrypted
        bot = store.find_bot(enterprise_id=None, team_id=team)
        assert bot is not None and bot.bot_token == token
        found = store.find_installation(enterprise_id=None, team_id=team, user_id="U0INSTALLER")
        assert found is not None and found.user_token == f"xoxp-{token}"
        with pytest.raises(SecretKeyError, match="not set"):  # never handed to Slack as ciphertext
            store_with(settings, None).find_bot(enterprise_id=None, team_id=team)
        store.delete_bot(enterprise_id=None, team_id=team)
        assert store.find_bot(enterprise_id=None, team_id=team) is None
    finally:
        delete(settings, team)


def test_plain_text_tokens_from_before_are_encrypted_at_start_and_keys_rotate(settings) -> None:
    team, token = f"T0P{uuid.uuid4().hex[:6].upper()}", f"xoxb-plain-{uuid.uuid4().hex}"
    db_url = settings.db.url.get_secret_value()
    try:
        store_with(settings, None).save(install(team, token))  # a bot without a key stored it in plain text
        assert raw_rows(settings, team)[0]["installation"]["bot_token"] == token
        assert store_with(settings, None).seal_stored() == 0  # no key: nothing changes (a warning is logged)
        assert store_with(settings, OLD_KEY).seal_stored() >= 1
        assert database_hits(db_url, token) == []
        rotated = store_with(settings, f"{KEY},{OLD_KEY}")
        assert rotated.find_bot(enterprise_id=None, team_id=team).bot_token == token  # type: ignore[union-attr]
        assert rotated.seal_stored() >= 1  # re-encrypted with the new first key
        assert store_with(settings, KEY).find_bot(enterprise_id=None, team_id=team).bot_token == token  # type: ignore[union-attr]
    finally:
        delete(settings, team)


def test_oauth_states_are_shared_by_processes_used_once_and_expire(settings) -> None:
    one = PostgresOAuthStateStore(Store(settings), expiration_seconds=600)
    other = PostgresOAuthStateStore(Store(settings), expiration_seconds=600)  # another bot process
    state = one.issue()
    assert len(state) >= 32
    assert other.consume(state) is True
    assert one.consume(state) is False and other.consume(state) is False  # once only
    assert other.consume("never-issued") is False
    stale = one.issue()
    with psycopg.connect(settings.db.url.get_secret_value(), autocommit=True) as conn:
        conn.execute("UPDATE slack_oauth_states SET issued_at = now() - interval '11 minutes' WHERE state = %s",
                     (stale,))
    assert other.consume(stale) is False
