"""Slack installation tokens encrypted at rest with ``cryptography``'s Fernet (AES-128-CBC + HMAC-SHA256).

``CHAPTERVERSE_SECRET_KEY`` holds one Fernet key, or several separated by commas: the first encrypts,
every one decrypts, so a key can be rotated by putting the new one first (each bot start re-encrypts
the stored installations with it; ``PostgresInstallationStore.seal_stored``). Generate a key with
``python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"``.

Without the setting tokens are stored in plain text (as Bolt's own SQL stores do) and a warning is
logged at start: anyone who can read the database can then act as the bot in every workspace.
An encrypted token read without the key (or with none of the keys that made it) is an error that
says so; it is never sent to Slack as it is.
"""

from __future__ import annotations

from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

PREFIX = "fernet:"  # a stored value that starts with this is ciphertext
# Installation fields that are credentials (slack_sdk.oauth.installation_store.Installation)
SECRET_FIELDS = ("bot_token", "bot_refresh_token", "user_token", "user_refresh_token", "incoming_webhook_url")
KEY_HELP = ('generate one with: python -c "from cryptography.fernet import Fernet; '
            'print(Fernet.generate_key().decode())"')
WRONG_KEY = ("no key in CHAPTERVERSE_SECRET_KEY decrypts the stored Slack installation tokens; keep the old key "
             "after the new one while rotating")


class SecretKeyError(RuntimeError):
    """The secret key is malformed, missing for encrypted data, or not the one that encrypted it."""


class Sealer:
    def __init__(self, keys: str | None) -> None:
        parts = [k.strip() for k in (keys or "").split(",") if k.strip()]
        self._fernet: MultiFernet | None = None
        if parts:
            try:
                self._fernet = MultiFernet([Fernet(k.encode()) for k in parts])
            except (ValueError, TypeError) as exc:
                raise SecretKeyError("CHAPTERVERSE_SECRET_KEY is not a Fernet key (32 url-safe base64-encoded "
                                     f"bytes; several keys are separated by commas); {KEY_HELP}") from exc

    @property
    def enabled(self) -> bool:
        return self._fernet is not None

    def seal(self, value: str) -> str:
        """``value`` encrypted with the first key (unchanged when no key is set, or already sealed)."""
        if self._fernet is None or value.startswith(PREFIX):
            return value
        return PREFIX + self._fernet.encrypt(value.encode()).decode()

    def open(self, value: str) -> str:
        """The plain value of a stored one (plain text passes through: installs made without a key)."""
        if not value.startswith(PREFIX):
            return value
        if self._fernet is None:
            raise SecretKeyError("the stored Slack installation tokens are encrypted but CHAPTERVERSE_SECRET_KEY is "
                                 "not set; set it to the key they were encrypted with")
        try:
            return self._fernet.decrypt(value[len(PREFIX):].encode()).decode()
        except InvalidToken as exc:
            raise SecretKeyError(WRONG_KEY) from exc

    def seal_fields(self, data: dict[str, Any]) -> dict[str, Any]:
        return {k: (self.seal(v) if k in SECRET_FIELDS and isinstance(v, str) and v else v) for k, v in data.items()}

    def open_fields(self, data: dict[str, Any]) -> dict[str, Any]:
        return {k: (self.open(v) if k in SECRET_FIELDS and isinstance(v, str) else v) for k, v in data.items()}

    def reseal(self, value: str) -> str:
        """Plain text or ciphertext of any key → ciphertext of the first key (for rotation)."""
        if self._fernet is None:
            return value
        if not value.startswith(PREFIX):
            return self.seal(value)
        try:
            return PREFIX + self._fernet.rotate(value[len(PREFIX):].encode()).decode()
        except InvalidToken as exc:
            raise SecretKeyError(WRONG_KEY) from exc
