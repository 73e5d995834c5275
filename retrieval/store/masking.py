"""Connection strings as they may be shown: never their password (pure functions).

A libpq connection string carries its password in one of three places: the user info of a URL
(``postgresql://user:PASSWORD@host/db``), a ``password=`` parameter of a URL's query string, or a
``password=`` keyword of the key=value form (``password='two words'``). libpq's and psycopg's own
messages about a string they cannot read quote it whole (``missing "=" after "<the string>" in
connection info string``) or quote a piece of it (``invalid percent-encoded token: "<piece>"``).

``masked`` is the one function every message, log line and reply that may show a connection string
(or an error about one) goes through: it replaces every password found in the text by its form, and
every password of the connection strings the text is about wherever it appears, with ``***``.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

MASK = "***"
MIN_FREE_TEXT = 4  # a shorter password is masked only where it stands (user info, password=), not as any substring

_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*://", re.I)
_RUN_END = re.compile(r"[\s'\"]")
# password=VALUE in the key=value form (quoted, with \' escapes, or up to white space) or a URL's query
_KEYWORD = re.compile(r"(?P<key>\bpassword\s*=\s*)(?P<value>'(?:[^'\\]|\\.)*'?|[^\s&#'\"]*)", re.I)


def _userinfo_passwords(text: str) -> list[tuple[int, int]]:
    """(start, end) of the password of every URL's user info in ``text`` (``scheme://user:PASSWORD@``):
    up to the last ``@`` before the URL's query, so a password holding ``/``, ``:`` or ``@`` is covered whole."""
    spans = []
    for m in _SCHEME.finditer(text):
        end = _RUN_END.search(text, m.end())
        run = text[m.end():end.start() if end else len(text)]
        authority = run.split("?", 1)[0]
        if "@" not in authority:
            continue
        userinfo = authority[:authority.rfind("@")]
        if ":" in userinfo:
            start = m.end() + userinfo.index(":") + 1
            spans.append((start, m.end() + len(userinfo)))
    return spans


def _unquoted(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return re.sub(r"\\(.)", r"\1", value[1:-1])
    return value


def passwords(conninfo: str) -> set[str]:
    """Every password ``conninfo`` may carry, as written and decoded (percent-encoding, quotes), found
    by its form even when the string cannot be parsed; empty ones left out."""
    found = {conninfo[a:b] for a, b in _userinfo_passwords(conninfo)}
    found |= {m.group("value") for m in _KEYWORD.finditer(conninfo)}
    found |= {unquote(p) for p in found} | {_unquoted(p) for p in found}
    return {p for p in found if p and p != "''"}


def masked(text: str, *conninfos: str) -> str:
    """``text`` with every password in it shown as ``***``: those standing where a connection string
    keeps one, and (when at least ``MIN_FREE_TEXT`` characters long) those of ``conninfos`` anywhere."""
    for a, b in reversed(_userinfo_passwords(text)):
        if b > a:
            text = text[:a] + MASK + text[b:]
    text = _KEYWORD.sub(lambda m: m.group("key") + MASK if m.group("value") else m.group(0), text)
    secrets = {p for info in conninfos for p in passwords(info) if len(p) >= MIN_FREE_TEXT and p != MASK}
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text
