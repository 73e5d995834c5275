"""Passages that speak to an AI reader instead of a human one (pure functions).

A handbook is data. A paragraph that addresses an AI/assistant/model ("NOTE TO AI ASSISTANTS: …"),
tells its reader to drop its rules ("ignore all previous instructions", "disregard the above"),
or carries chat role markers ("SYSTEM: …", "<|im_start|>") is prompt injection: it is flagged at
ingest, never quoted as evidence, and mentioned in replies as untrusted text.

Detection is a small rule set over one paragraph at a time, built to leave ordinary technical prose
alone ("the assistant window", "follow ATC instructions", "you must report to ATC", "AI" for an
attitude indicator). The rules are data, one JSON file per language in
``retrieval/presets/injection/`` (``english.json``, ``german.json``), and a preset's profile names the
rule sets its collections are checked with (``Profile.injection``: ``["english"]`` by default,
``["english", "german"]`` in the german preset, so English injections are still caught in a German
manual). **Strong** patterns flag a paragraph on their own (an instruction to ignore previous
instructions, a note addressed to an AI, chat-template tokens); **weak** ones only when two
different kinds match (a mention of an AI system, a command about what to answer, a role marker
such as "SYSTEM:").

In a rule file, ``{{name}}`` in a pattern stands for the file's fragment ``name``; ``(?i)`` at the
start makes a pattern ignore case.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from retrieval.text.spans import pieces

RULES_DIR = Path(__file__).resolve().parents[1] / "presets" / "injection"
DEFAULT_RULES: tuple[str, ...] = ("english",)
_FRAGMENT = re.compile(r"\{\{(\w+)\}\}")


class RulesError(ValueError):
    """A rule set that cannot be found, read or compiled: one clear line."""


@dataclass(frozen=True)
class Rules:
    strong: tuple[re.Pattern[str], ...]
    weak: dict[str, tuple[re.Pattern[str], ...]]  # kind → patterns (two different kinds flag)


def rule_sets() -> list[str]:
    return sorted(p.stem for p in RULES_DIR.glob("*.json"))


def _compile(name: str, pattern: str, fragments: dict[str, str]) -> re.Pattern[str]:
    try:
        return re.compile(_FRAGMENT.sub(lambda m: fragments[m.group(1)], pattern))
    except KeyError as exc:
        raise RulesError(f"injection rules {name!r}: no fragment {exc.args[0]!r}") from None
    except re.error as exc:
        raise RulesError(f"injection rules {name!r}: {exc}: {pattern[:60]}") from None


@lru_cache(maxsize=16)
def rules(names: tuple[str, ...] = DEFAULT_RULES) -> Rules:
    """The rule sets ``names`` together (compiled once per process)."""
    strong: list[re.Pattern[str]] = []
    weak: dict[str, list[re.Pattern[str]]] = {}
    for name in names:
        path = RULES_DIR / f"{name}.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError:
            raise RulesError(f"no injection rules {name!r}; rule sets: {', '.join(rule_sets())}") from None
        except ValueError as exc:
            raise RulesError(f"injection rules {name!r}: {exc}") from None
        fragments = data.get("fragments", {})
        strong += [_compile(name, s["pattern"], fragments) for s in data.get("strong", [])]
        for kind, patterns in data.get("weak", {}).items():
            weak.setdefault(kind, []).extend(_compile(name, p, fragments) for p in patterns)
    return Rules(tuple(strong), {k: tuple(v) for k, v in weak.items()})


def is_injection(text: str, names: tuple[str, ...] = DEFAULT_RULES) -> bool:
    """Whether ``text`` (one paragraph) reads as prompt injection: a strong pattern matches, or weak
    patterns of two different kinds do."""
    r = rules(names)
    flat = " ".join(text.split())
    if any(pattern.search(flat) for pattern in r.strong):
        return True
    kinds = sum(any(p.search(text if kind == "role" else flat) for p in patterns) for kind, patterns in r.weak.items())
    return kinds >= 2


PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")  # a blank line


def untrusted_spans(text: str, start: int = 0, end: int | None = None,
                    names: tuple[str, ...] = DEFAULT_RULES) -> tuple[tuple[int, int], ...]:
    """Spans of the paragraphs of ``text[start:end]`` that read as prompt injection."""
    return tuple((s, e) for s, e in pieces(text, PARAGRAPH_BREAK, start, end) if is_injection(text[s:e], names))


def overlaps(spans: Sequence[tuple[int, int]], start: int, end: int) -> bool:
    return any(s < end and start < e for s, e in spans)
