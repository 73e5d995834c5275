"""Text from a document or a user made safe to print (pure).

A PDF's title, a file name, a page label or a quote can hold terminal control sequences: ESC (``\\x1b``)
starts sequences that clear the screen, move the cursor or retitle the terminal window, a C1 control
(``\\x9b`` is a one-byte CSI) does the same on some terminals, a carriage return overwrites the line
already shown, and the Unicode bidirectional overrides make text read backwards. ``printable`` shows
each such character as a visible escape (``\\x1b``, ``\\u202e``) instead of sending it: nothing is
hidden from the reader and nothing reaches the terminal or a Slack message as a control.
"""

from __future__ import annotations

import re

# C0 controls except tab and line feed, DEL, C1 controls, and the bidirectional embeddings,
# overrides and isolates (U+202A-U+202E, U+2066-U+2069).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_CONTROL_OR_BREAK = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _shown(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every control character but tab and line feed shown as an escape."""
    return _CONTROL.sub(_shown, text)


def one_line(text: str) -> str:
    """``printable`` for a value shown inside one line (a title, a name, a label): tabs and line
    breaks become spaces too."""
    return _CONTROL_OR_BREAK.sub(lambda m: " " if m.group() in "\t\n" else _shown(m), text)


_JSON_UNESCAPED = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def escaped_json(dumped: str) -> str:
    """JSON text (``json.dumps(..., ensure_ascii=False)``) with the controls it leaves raw (DEL, C1,
    bidirectional) written as ``\\uXXXX`` escapes: the same values to a JSON reader, nothing for a
    terminal to obey. Outside strings JSON has no such characters, so every match is inside one."""
    return _JSON_UNESCAPED.sub(lambda m: f"\\u{ord(m.group()):04x}", dumped)
