"""What a question or query typed at the command line must be before it is searched (pure)."""

from __future__ import annotations

_CONTROL = {chr(c) for c in range(32)} - {"\t", "\n", "\r"} | {"\x7f"}


def text_problem(text: str, what: str = "question") -> str | None:
    """Why ``text`` cannot be searched (one line), or None. Python hands a command-line argument
    that is not UTF-8 over with its bytes as lone surrogates (``$'\\xff\\xfe'`` is
    ``"\\udcff\\udcfe"``); a NUL cannot be stored in Postgres text."""
    bad = [c for c in text if "\udc80" <= c <= "\udcff"]
    if bad:
        shown = " ".join(f"0x{ord(c) - 0xDC00:02x}" for c in bad[:3])
        return f"the {what} is not valid UTF-8 text (bytes {shown}); check the terminal's encoding"
    if any("\ud800" <= c <= "\udfff" for c in text):
        return f"the {what} is not valid Unicode text"
    if "\x00" in text:
        return f"the {what} contains a NUL character; type it again without it"
    return None


def without_control(text: str) -> str:
    """``text`` without NUL and the other control characters (a chat message's stray bytes)."""
    return "".join(c for c in text if c not in _CONTROL) if any(c in _CONTROL for c in text) else text
