"""Passages that speak to an AI reader instead of a human one (pure functions).

A handbook is data. A paragraph that addresses an AI/assistant/model ("NOTE TO AI ASSISTANTS: …"),
tells its reader to drop its rules ("ignore all previous instructions", "disregard the above"),
or carries chat role markers ("SYSTEM: …", "<|im_start|>") is prompt injection: it is flagged at
ingest, never quoted as evidence, and mentioned in replies as untrusted text.

Detection is a small rule set over one paragraph at a time, built to leave ordinary technical prose
alone ("the assistant window", "follow ATC instructions", "you must report to ATC", "AI" for an
attitude indicator):

- **strong** cues flag a paragraph on their own: an instruction to ignore/disregard/forget previous
  (prior, above, your, system) instructions or rules; a note/message addressed to an AI, LLM,
  language model, chatbot or AI assistant; "if you are an AI …", "you are a language model";
  "system prompt"; chat-template tokens;
- **weak** cues flag only in combination (two different kinds): a mention of an AI system (LLM,
  ChatGPT, chatbot, language model, AI assistant/model); a command to the reader about what to
  answer ("you must answer/respond/say/report/confirm …", "do not mention this"); a role marker
  at the start of a line ("SYSTEM:", "ASSISTANT:"); "regardless of what the document says".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from retrieval.text.spans import pieces

_I = re.IGNORECASE

# Names of AI readers. Bare "AI" is not one (FAA: "attitude indicator (AI)"); it counts only where a
# note is addressed to it ("note to AI") or a word naming a system follows ("AI assistant").
_AI_SYSTEM = (r"(?:llms?|(?:large )?language[ -]models?|chat ?bots?|chatgpt|gpt-?\d\w*|"
              r"(?:ai|a\.i\.) (?:assistants?|models?|systems?|agents?|tools?|readers?|summari[sz]ers?)|"
              r"artificial[ -]intelligence)")

_OVERRIDE_VERB = r"(?:ignore|disregard|forget|override|bypass|skip|drop|abandon)"
_PRIOR = r"(?:previous|prior|preceding|above|earlier|foregoing|former|system|your|my|all)"
_RULES = r"(?:instructions?|prompts?|rules|directions|directives|guidelines|programming|training|constraints)"

STRONG: tuple[re.Pattern[str], ...] = (
    # "ignore all previous instructions", "disregard your rules", "forget the above instructions"
    re.compile(rf"\b{_OVERRIDE_VERB}\s+(?:all\s+|any\s+|of\s+)*(?:the\s+|these\s+|those\s+)?"
               rf"{_PRIOR}(?:\s+(?:and|or|,)?\s*{_PRIOR})*\s+(?:\w+\s+)?{_RULES}\b", _I),
    # "disregard the above", "ignore everything above"
    re.compile(rf"\b{_OVERRIDE_VERB}\s+(?:everything|anything|all|what(?:ever)? (?:is|was) (?:written|said))?\s*"
               r"(?:(?:the|that)\s+)?(?:above|before this|previously (?:said|stated|written))\b", _I),
    # "NOTE TO AI ASSISTANTS", "message for language models", "Attention, LLMs:" ("Warning: AI" alone is
    # an attitude indicator, so after a colon or comma only a named AI system counts)
    re.compile(r"\b(?:note|notes|message|messages|instructions?|attention|notice|memo|reminder|warning)\s+(?:to|for)\s+"
               rf"(?:all\s+|any\s+|the\s+)?(?:ai\b|a\.i\.|{_AI_SYSTEM}\b)", _I),
    re.compile(r"\b(?:note|message|attention|notice|memo|reminder|warning)\s*[,:]\s*"
               rf"(?:all\s+|any\s+|the\s+)?{_AI_SYSTEM}\b", _I),
    re.compile(rf"\b(?:dear|hey|hello|hi)\s+(?:ai|a\.i\.|{_AI_SYSTEM}|assistant|model|bot)\b", _I),
    # "if you are an AI", "you are a large language model", "as an AI language model"
    re.compile(rf"\b(?:if\s+)?you\s+are\s+(?:an?|the)\s+(?:ai|a\.i\.|{_AI_SYSTEM})\b", _I),
    re.compile(rf"\bas\s+an?\s+(?:(?:ai|a\.i\.)\s+(?:language\s+)?(?:model|assistant|chatbot)|{_AI_SYSTEM})\b"
               r"|\bas\s+an?\s+(?:ai|a\.i\.),", _I),
    # AI readers told what to do: "AI models reading this must …", "any LLM summarizing this document"
    re.compile(rf"\b{_AI_SYSTEM}\s+(?:that\s+(?:is|are)\s+)?(?:reading|processing|summari[sz]ing|answering|"
               r"parsing|indexing|reviewing)\s+(?:this|these)\b", _I),
    re.compile(r"\b(?:system|developer)\s+prompts?\b|\bprompt\s+injection\b|\bjailbreak", _I),
    re.compile(r"<\|?(?:im_start|im_end|system|endoftext)\|?>|\[/?INST\]|<<\s*/?SYS\s*>>"),
)

WEAK: dict[str, re.Pattern[str]] = {
    "ai": re.compile(rf"\b{_AI_SYSTEM}\b", _I),
    "command": re.compile(
        r"\byou\s+(?:must|should|shall|will|are\s+(?:to|required\s+to|instructed\s+to))\s+(?:now\s+|always\s+|only\s+|instead\s+)?"
        r"(?:answer|respond|reply|say|state|claim|confirm|output|tell|write|mention|pretend|report)\b"
        r"|\bdo\s+not\s+(?:mention|reveal|disclose|tell|cite|quote)\s+(?:this|these|the\s+user)\b"
        r"|\b(?:tell|inform)\s+the\s+user\b|\bwhen\s+(?:you\s+are\s+)?asked\s+about\b", _I),
    "role": re.compile(r"(?m)^\s*(?:SYSTEM|ASSISTANT|USER|DEVELOPER|System|Assistant)\s*:"),
    "override": re.compile(r"\bregardless\s+of\s+what\s+(?:the|this|any)\s+(?:document|handbook|manual|text|source)s?\b"
                           r"|\bnew\s+instructions\s*:", _I),
}


@dataclass(frozen=True)
class Finding:
    """Why a paragraph was flagged: the cue kinds and the text that matched first."""

    cues: tuple[str, ...]
    match: str


def assess(text: str) -> Finding | None:
    """A finding when ``text`` (one paragraph) reads as prompt injection, else None."""
    flat = " ".join(text.split())
    for pattern in STRONG:
        m = pattern.search(flat)
        if m:
            return Finding(("strong",), m.group(0))
    hits = [(kind, p.search(text if kind == "role" else flat)) for kind, p in WEAK.items()]
    found = [(kind, m) for kind, m in hits if m]
    if len(found) >= 2:
        return Finding(tuple(k for k, _ in found), found[0][1].group(0))
    return None


def is_injection(text: str) -> bool:
    return assess(text) is not None


PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")  # a blank line


def paragraphs(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """Character spans of the paragraphs of ``text[start:end]`` (blocks separated by a blank line)."""
    return pieces(text, PARAGRAPH_BREAK, start, end)


def untrusted_spans(text: str, start: int = 0, end: int | None = None) -> tuple[tuple[int, int], ...]:
    """Spans of the paragraphs of ``text[start:end]`` that read as prompt injection."""
    return tuple((s, e) for s, e in paragraphs(text, start, end) if is_injection(text[s:e]))


def overlaps(spans: Sequence[tuple[int, int]], start: int, end: int) -> bool:
    return any(s < end and start < e for s, e in spans)
