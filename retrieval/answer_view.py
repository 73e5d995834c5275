"""How an Answer is printed by the CLI: DESIGN §3 JSON, and plain text for people (pure functions)."""

from __future__ import annotations

from typing import Any

from retrieval.models import Answer, Citation
from retrieval.textnorm import readable


def page_words(page: int, label: str | None) -> str:
    """"p. 6-12 (PDF p. 34)" when the printed label differs from the PDF index, else "p. 34"."""
    if label and label != str(page):
        return f"p. {label} (PDF p. {page})"
    return f"p. {page}"


def as_json(answer: Answer) -> dict[str, Any]:
    data = answer.model_dump()
    data["citations"] = [c.model_dump() for c in answer.citations]
    return data


def _quote_block(i: int, c: Citation) -> str:
    quote = readable(c.quote)
    link = f"\n   {c.url}" if c.url else ""
    return f"[{i}] “{quote}”\n   — {c.document}, {page_words(c.page, c.page_label)}{link}"


def named_note(answer: Answer) -> str:
    """Which documents were searched first because the question names them ("" when none)."""
    if not answer.named_documents:
        return ""
    return f"Searched {', '.join(answer.named_documents)} first: the question names it by its title."


def as_text(answer: Answer) -> str:
    lines: list[str] = []
    if answer.standalone_question and answer.standalone_question != answer.question:
        lines.append(f"(understood as: {answer.standalone_question})\n")
    if named := named_note(answer):
        lines.append(f"({named})\n")
    if answer.refusal:
        lines.append(answer.reason or "The documents do not support an answer to this question.")
        if answer.nearest:
            lines.append("\nNearest passages searched:")
            for n in answer.nearest:
                link = f"  {n.url}" if n.url else ""
                lines.append(f"  - {n.document}, {page_words(n.page, n.page_label)}{link}")
    else:
        lines.append(answer.answer)
        lines.append("")
        lines.extend(_quote_block(i, c) for i, c in enumerate(answer.citations, 1))
    for w in answer.warnings:
        lines.append(f"\nnote: {w}")
    ran = f"answerer: {answer.answerer or '-'}, reranker: {answer.reranker or '-'}"
    total = sum(v for k, v in answer.timings_ms.items() if "." not in k)
    lines.append(f"\n({ran}; {total / 1000:.1f} s)")
    return "\n".join(lines)
