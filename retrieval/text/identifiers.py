"""Software identifiers that Postgres' English text search loses, as extra search terms (pure).

The default parser splits ``GNU_SOURCE`` into ``gnu`` + ``sourc``, reduces ``C++`` to ``c``, splits
``std::vector``, and drops ``%in%`` entirely (``in`` is a stop word). Dotted names (``as.numeric``,
``base.R``) and ``x11()`` already survive as one lexeme. ``identifier_terms`` finds the lost kinds
in a text, lower-cased, so they can be added to a chunk's tsvector at ingest (``chunks.terms``) and to
a query's lexemes at search time: the same function on both sides, so they meet exactly. The terms
carry punctuation, so they never collide with an English lexeme.
"""

from __future__ import annotations

import re

# Each alternative is a kind of identifier the English parser splits or drops.
_IDENT = re.compile(
    r"(?<![\w%])%[^\s%\d-][^\s%]{0,11}%"     # R infix operators: %in%, %*%, %>% (not "50%-75%")
    r"|(?<![\w:])\w+(?:::\w+)+"            # scoped names: std::vector, Foo::Bar::baz
    r"|(?<![\w+])\w+\+\+"                  # C++, g++
    r"|(?<![\w.])\w*[A-Za-z0-9]_\w*"       # names with an inner underscore: GNU_SOURCE, _GNU_SOURCE, max_len
    r"|(?<![\w.])_\w*[A-Za-z0-9]\w*"       # names with a leading underscore: _exit, __init
)
MAX_TERMS = 200


def identifier_terms(text: str) -> list[str]:
    """Distinct identifier terms of ``text`` in first-seen order, lower-cased; underscores at the
    ends are dropped (``_GNU_SOURCE`` and ``GNU_SOURCE`` meet)."""
    out: dict[str, None] = {}
    for m in _IDENT.finditer(text):
        term = m.group(0).lower()
        if "_" in term and not term.startswith("%"):
            term = term.strip("_")
            if "_" not in term or not term:
                continue  # "_exit" is the word "exit": the parser keeps it already
        out.setdefault(term, None)
        if len(out) >= MAX_TERMS:
            break
    return list(out)
