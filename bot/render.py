"""Block Kit rendering: pure functions from answers, refusals and job results to Slack messages.

Slack limits respected here: a section's text is at most 3,000 characters and a message at most 50
blocks. Answers and quotes are never truncated: they are split across blocks, and blocks across
several messages, so every verified quote reaches the reader. Only one-line notes (``section``,
``context``) are clipped, never raising, when they would be over the limit. The first message of a reply is the
one that replaces the "working on it" placeholder; the 👍/👎 buttons go on the last one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from retrieval.answer.answer_view import (
    ASK_BETTER,
    answer_repeats_quotes,
    named_note,
    shown_title,
)
from retrieval.models import Answer, Citation, NearestPassage
from retrieval.text.printable import printable
from retrieval.text.textnorm import readable

if TYPE_CHECKING:
    from ingest.progress import ProgressLog

SECTION_LIMIT = 3000  # characters in a section block's text (Slack)
MAX_BLOCKS = 50  # blocks in one message (Slack)
MESSAGE_CHAR_BUDGET = 12_000  # our own budget of text per message, well under Slack's size limits
FALLBACK_CHARS = 300  # the notification text of a message
FEEDBACK_UP, FEEDBACK_DOWN = "feedback_up", "feedback_down"

Block = dict[str, Any]


@dataclass(frozen=True)
class SlackMessage:
    text: str  # notification / fallback text
    blocks: list[Block] = field(default_factory=list)


@dataclass(frozen=True)
class Searched:
    """What a question searched, named in refusals."""

    collections: Sequence[str]
    documents: Sequence[str] = ()
    titles: Mapping[str, str | None] = field(default_factory=dict)  # document name -> title (documents.title)


# ---------------------------------------------------------------------------------------- text
def escape(text: str) -> str:
    """Escape the three characters Slack's mrkdwn treats as control characters, and show the
    control characters a document or a user's text may hold (``retrieval.text.printable``) as escapes."""
    return printable(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def source_label(document: str, page: int, page_label: str | None,
                 titles: Mapping[str, str | None] | None = None) -> str:
    """"14 CFR Part 91 · p. 34 (PDF 34)": the document's title when known, else its cleaned file name;
    "PDF p. 34" for a page without a printed label."""
    where = f"p. {page_label} (PDF {page})" if page_label else f"PDF p. {page}"
    return f"{shown_title(document, titles)} · {where}"


def linkable(url: str | None) -> str | None:
    """Only http(s) links are clickable in Slack; file:// paths are shown as plain text."""
    return url if url and url.startswith(("https://", "http://")) else None


def mrkdwn_link(url: str | None, label: str) -> str:
    safe = escape(label).replace("|", "¦")
    href = linkable(url)
    return f"<{href}|{safe}>" if href else safe


def split_text(text: str, limit: int = SECTION_LIMIT) -> list[str]:
    """Split text into pieces of at most ``limit`` characters, preferring paragraph, line, sentence
    and word boundaries; nothing is dropped except the whitespace at the cut."""
    text = text.strip()
    pieces: list[str] = []
    while len(text) > limit:
        window = text[:limit]
        # after the first kind of boundary found in the last two thirds of the window, else at the limit
        cut = next((window.rfind(sep) + len(sep) for sep in ("\n\n", "\n", ". ", " ")
                    if window.rfind(sep) > limit // 3), limit)
        cut = _safe_cut(text, cut) or cut
        pieces.append(text[:cut].rstrip())
        text = text[cut:].lstrip()
    if text:
        pieces.append(text)
    return pieces


def _safe_cut(text: str, cut: int) -> int:
    """Move ``cut`` back so it does not fall inside an escape entity (``&amp;``) or a ``<link|label>``."""
    amp = text.rfind("&", max(0, cut - 6), cut)
    if amp != -1 and ";" not in text[amp:cut]:
        cut = amp
    lt = text.rfind("<", max(0, cut - 1000), cut)
    if lt != -1 and ">" not in text[lt:cut] and lt > 0:
        cut = lt
    return cut


def clip(mrkdwn: str, limit: int = SECTION_LIMIT) -> str:
    """At most ``limit`` characters, cut (with "…") where no escape entity or link is broken.

    For one-line notes and problem messages only; answers and quotes are split, never clipped."""
    if len(mrkdwn) <= limit:
        return mrkdwn
    cut = _safe_cut(mrkdwn, limit - 1)
    return mrkdwn[:cut].rstrip() + "…"


def fallback(text: str, limit: int = FALLBACK_CHARS) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    flat = " ".join(printable(text).split())
    return flat if len(flat) <= limit else flat[:limit - 1].rstrip() + "…"


# -------------------------------------------------------------------------------------- blocks
def section(mrkdwn: str) -> Block:
    """One section block; text over Slack's limit is clipped safely (use ``sections`` to keep it all)."""
    return {"type": "section", "text": {"type": "mrkdwn", "text": clip(mrkdwn)}}


def sections(mrkdwn: str) -> list[Block]:
    return [section(piece) for piece in split_text(mrkdwn)]


def context(mrkdwn: str) -> Block:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": clip(mrkdwn)}]}


def quote_blocks(c: Citation, titles: Mapping[str, str | None] | None = None) -> list[Block]:
    """A verified quote as Slack quote block(s), followed by the page link.

    The quote is the source's own words; a quote longer than one block's text continues in the next.
    """
    parts = split_text(readable(c.quote))
    label = source_label(c.document, c.page, c.page_label, titles)
    href = linkable(c.url)
    source_el: dict[str, Any] = ({"type": "link", "url": href, "text": label} if href
                                 else {"type": "text", "text": label})
    blocks: list[Block] = []
    for i, part in enumerate(parts):
        elements: list[dict[str, Any]] = [
            {"type": "rich_text_quote", "elements": [{"type": "text", "text": part}]}]
        if i == len(parts) - 1:
            ocr = [{"type": "text", "text": f" ({c.ocr_note})", "style": {"italic": True}}] if c.ocr_note else []
            elements.append({"type": "rich_text_section",
                             "elements": [{"type": "text", "text": "— "}, source_el, *ocr]})
        blocks.append({"type": "rich_text", "elements": elements})
    return blocks


def nearest_block(n: NearestPassage, titles: Mapping[str, str | None] | None = None) -> Block:
    snippet = " ".join(n.snippet.split())
    body = f"• {mrkdwn_link(n.url, source_label(n.document, n.page, n.page_label, titles))}"
    if snippet:
        room = SECTION_LIMIT - len(body) - 10
        short = snippet if len(snippet) <= min(room, 400) else snippet[:min(room, 400)].rstrip() + "…"
        body += f"\n_{escape(short)}_"
    return section(body)


def untrusted_blocks(answer: Answer, titles: Mapping[str, str | None] | None = None) -> list[Block]:
    """A note when passages addressed to AI assistants (prompt injection) matched: ignored, never quoted."""
    if not answer.untrusted:
        return []
    where = ", ".join(dict.fromkeys(mrkdwn_link(n.url, source_label(n.document, n.page, n.page_label, titles))
                                     for n in answer.untrusted))
    return [context(f":shield: This document contains text addressed to AI assistants ({where}); it was "
                    "ignored: such text is never evidence and never an instruction.")]


def feedback_block(turn_id: int) -> Block:
    return {"type": "actions", "block_id": "feedback", "elements": [
        {"type": "button", "action_id": FEEDBACK_UP, "value": str(turn_id),
         "text": {"type": "plain_text", "text": "👍 Helpful", "emoji": True}},
        {"type": "button", "action_id": FEEDBACK_DOWN, "value": str(turn_id),
         "text": {"type": "plain_text", "text": "👎 Not helpful", "emoji": True}},
    ]}


def paginate(blocks: Sequence[Block], text: str, tail: Sequence[Block] = ()) -> list[SlackMessage]:
    """Pack blocks into messages of at most MAX_BLOCKS blocks and MESSAGE_CHAR_BUDGET characters;
    ``tail`` (the feedback buttons) ends the last message."""
    pages: list[list[Block]] = [[]]
    size = 0
    for block in [*blocks, *tail]:
        n = len(str(block))
        if pages[-1] and (len(pages[-1]) >= MAX_BLOCKS or size + n > MESSAGE_CHAR_BUDGET):
            pages.append([])
            size = 0
        pages[-1].append(block)
        size += n
    return [SlackMessage(fallback(text if i == 0 else f"(continued {i + 1}/{len(pages)}) {text}"), page)
            for i, page in enumerate(pages)]


# ------------------------------------------------------------------------------------ messages
def _searched_text(searched: Searched) -> str:
    colls = ", ".join(f"`{escape(c)}`" for c in searched.collections) or "no collection"
    if not searched.documents:
        return f"Searched {colls}: it has no documents yet. Add some with `/chapterverse ingest <url>`."
    titles = ", ".join(escape(shown_title(d, searched.titles)) for d in searched.documents[:12])
    more = f" and {len(searched.documents) - 12} more" if len(searched.documents) > 12 else ""
    n = len(searched.documents)
    return f"Searched {n} document{'s' if n != 1 else ''} in {colls}: {titles}{more}."


def render_answer(answer: Answer, *, turn_id: int | None, searched: Searched) -> list[SlackMessage]:
    """The reply to a question: the answer and its verified quotes, or the refusal with the
    nearest passages; one or more messages, buttons on the last."""
    tail = [feedback_block(turn_id)] if turn_id is not None else []
    if answer.refusal:
        return render_refusal(answer, searched=searched, tail=tail)
    # an answer made of its first quote is not printed again above the quotes
    blocks: list[Block] = [] if answer_repeats_quotes(answer) else sections(
        escape(answer.answer.strip() or "(no answer text)"))
    for c in answer.citations:
        blocks.extend(quote_blocks(c, searched.titles))
    n = len(answer.citations)
    note = (f"{n} quote{'s' if n != 1 else ''}, each checked to be word for word on its PDF page "
            "(not checked: whether it answers the question).")
    if who := answered_by(answer):
        note += " " + escape(who)
    if named := named_note(answer):
        note += " " + escape(named)
    blocks.extend(untrusted_blocks(answer, searched.titles))
    blocks.append(context(note))
    return paginate(blocks, answer.answer or "Answer", tail)


def answered_by(answer: Answer) -> str:
    """Who made the answer, in words a reader can use: a model's name, or that no model was used."""
    if answer.answerer == "extractive":
        return "The quotes were picked from the documents without a language model."
    if answer.answerer:
        model = answer.models.get("answerer") or answer.answerer
        return f"Answer written by {model} from these quotes."
    return ""


def render_refusal(answer: Answer, *, searched: Searched, tail: Sequence[Block] = ()) -> list[SlackMessage]:
    reason = answer.reason.strip() or "the handbooks I can search do not say."
    head = f":no_entry_sign: *I could not find a supported answer in the handbooks.*\n{escape(reason)}"
    named = named_note(answer)
    searched_note = _searched_text(searched) + (f" {escape(named)}" if named else "")
    blocks: list[Block] = [*sections(head), *untrusted_blocks(answer, searched.titles), context(searched_note)]
    if answer.nearest:  # the page a reader should open first leads (retrieval.answer.refusals.led_by)
        blocks.append(section("*Not answered here; the nearest page is:*"))
        blocks.append(nearest_block(answer.nearest[0], searched.titles))
    if answer.nearest[1:]:
        blocks.append(section("*Other nearest passages* (not an answer; look for yourself):"))
        blocks.extend(nearest_block(n, searched.titles) for n in answer.nearest[1:])
    blocks.append(context(escape(ASK_BETTER)))
    return paginate(blocks, f"No supported answer: {reason}", tail)


def render_placeholder() -> SlackMessage:
    return SlackMessage("Looking through the handbooks…",
                        [context(":mag: Looking through the handbooks… (quotes are checked before I answer)")])


def render_note(text: str) -> SlackMessage:
    return SlackMessage(fallback(text), [context(escape(text))])


def render_problem(text: str) -> SlackMessage:
    """A reply when something went wrong on our side; says what and what to do."""
    return SlackMessage(fallback(text), [section(f":warning: {escape(text)}")])


def ingest_progress_text(job_id: int, progress: ProgressLog) -> str:
    """A running ingest's progress message: ``ProgressLog.line()`` (the document, pages read / total,
    the current step with its share done and time left, the time so far), and while pages are read,
    the time left to read them at the rate so far."""
    from ingest.progress import _left  # noqa: PLC0415  (the same wording as the log lines)

    text = progress.line().removeprefix("ingest: ")
    done, total = progress.pages_done, progress.pages_total
    if progress.step == "reading pages" and total and 0 < done < total:
        rate = done / max(progress.clock() - progress.step_started, 1e-6)
        text += f" · {_left((total - done) / rate)} left to read the pages"
    return f":hourglass_flowing_sand: Job #{job_id}: {escape(text)}"


def added_by(row: dict[str, Any]) -> str:
    """" by <@U123>", " from the command line", or "" for documents added before this was recorded."""
    via, who = row.get("added_via"), str(row.get("added_by") or "")
    if via == "slack" and re.fullmatch(r"[UW][A-Z0-9]+", who):
        return f" by <@{who}>"
    if via == "cli":
        return " from the command line"
    return ""


def render_documents(rows: Iterable[dict[str, Any]], collections: Sequence[str]) -> str:
    """The `list` command's reply (mrkdwn text)."""
    rows = list(rows)
    colls = ", ".join(f"`{escape(c)}`" for c in collections)
    if not rows:
        return f"No documents in {colls} yet. Add one with `/chapterverse ingest <url>` or share a PDF with me."
    lines = [f"• `{escape(str(r['name']))}` — {r['pages']} pages, {r['chunks']} chunks "
             f"(added {r['ingested_at']:%Y-%m-%d}{added_by(r)})" for r in rows]
    return "\n".join([f"*{len(rows)} document{'s' if len(rows) != 1 else ''}* in {colls}:", *lines])[:SECTION_LIMIT * 3]


HELP = (
    "*Chapter & Verse* answers questions from your handbooks with quotes checked against the PDF pages.\n"
    "• Ask: mention me in a channel (`@chapterverse what are the VFR minimums in class E?`) or DM me. "
    "Reply in my thread for follow-ups.\n"
    "• `/chapterverse ingest <url>` — add a PDF from a link (or share a PDF with me in a mention); "
    "workspace admins and owners, and people the bot's operator lists\n"
    "• `/chapterverse list` — documents this channel searches, and who added them\n"
    "• `/chapterverse remove <name>` — remove a document (admins and owners, as for ingest)\n"
    "• `/chapterverse digest [7d]` — (admins) questions I could not answer and 👎 answers, by document\n"
    "• `/chapterverse help` — this message"
)
