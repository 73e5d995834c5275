"""Block Kit rendering and the pure helpers of the bot (no Slack, no database)."""

from __future__ import annotations

import json

from bot.app import unwrap_url
from bot.answer import strip_mentions
from bot.render import (MAX_BLOCKS, SECTION_LIMIT, Searched, escape, render_answer, render_documents, source_label,
                        split_text)
from bot.scope import scope_for
from retrieval.answer.answer_view import readable_name
from retrieval.models import Answer, Citation, NearestPassage
from retrieval.settings import Settings


def _texts(blocks: list[dict]) -> list[str]:
    """Every piece of text a block carries (section text, rich text elements, context elements)."""
    out: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("text"), str):
                out.append(node["text"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(blocks)
    return out


def cite(quote: str, page: int = 34, label: str | None = "34") -> Citation:
    return Citation(document="14-CFR-Part-91_General-Operating-and-Flight-Rules.pdf", page=page, page_label=label,
                    quote=quote, url=f"https://docs.example/14-CFR-Part-91.pdf#page={page}")


def test_titles_and_labels() -> None:
    assert readable_name("14-CFR-Part-91_General-Operating-and-Flight-Rules.pdf") == "14 CFR Part 91"
    assert readable_name("FAA-S-ACS-6C_Private-Pilot-Airplane-ACS.pdf") == "FAA-S-ACS-6C"
    assert readable_name("handbook.pdf") == "handbook"
    assert source_label("14-CFR-Part-91_X.pdf", 34, "34") == "14 CFR Part 91 · p. 34 (PDF 34)"
    assert source_label("manual.pdf", 12, None) == "manual · PDF p. 12"
    assert source_label("manual.pdf", 12, "iv") == "manual · p. iv (PDF 12)"


def test_answer_has_text_quotes_with_page_links_and_buttons() -> None:
    ans = Answer(question="q", refusal=False, answer="Visibility 3 statute miles <b>",
                 citations=[cite("Flight visibility 3 statute miles"), cite("Clouds 500 feet below", 35, None)],
                 answerer="extractive")
    msgs = render_answer(ans, turn_id=7, searched=Searched(["dev"]))
    assert len(msgs) == 1
    blocks = msgs[0].blocks
    assert blocks[0]["type"] == "section" and "&lt;b&gt;" in blocks[0]["text"]["text"]
    quotes = [b for b in blocks if b["type"] == "rich_text"]
    assert len(quotes) == 2
    q0 = quotes[0]["elements"]
    assert q0[0]["type"] == "rich_text_quote" and q0[0]["elements"][0]["text"] == "Flight visibility 3 statute miles"
    link = q0[1]["elements"][1]
    assert link == {"type": "link", "url": "https://docs.example/14-CFR-Part-91.pdf#page=34",
                    "text": "14 CFR Part 91 · p. 34 (PDF 34)"}
    assert quotes[1]["elements"][1]["elements"][1]["text"] == "14 CFR Part 91 · PDF p. 35"
    actions = blocks[-1]
    assert actions["type"] == "actions"
    assert [e["value"] for e in actions["elements"]] == ["7", "7"]


def test_file_urls_are_not_links() -> None:
    c = Citation(document="a.pdf", page=1, quote="some words here", url="file:///srv/a.pdf#page=1")
    msgs = render_answer(Answer(question="q", refusal=False, answer="x", citations=[c]), turn_id=None,
                         searched=Searched(["dev"]))
    src = msgs[0].blocks[1]["elements"][1]["elements"][1]
    assert src == {"type": "text", "text": "a · PDF p. 1"}
    assert all(b["type"] != "actions" for b in msgs[0].blocks)  # no turn id: no buttons


def test_long_answers_are_split_without_losing_quotes() -> None:
    quotes = [f"quote number {i} " + "word " * 700 for i in range(60)]  # 60 quotes of ~3.5k chars
    ans = Answer(question="q", refusal=False, answer="A " * 4000, citations=[cite(q) for q in quotes])
    msgs = render_answer(ans, turn_id=1, searched=Searched(["dev"]))
    assert len(msgs) > 1
    for m in msgs:
        assert len(m.blocks) <= MAX_BLOCKS
        for b in m.blocks:
            for t in _texts([b]):
                assert len(t) <= SECTION_LIMIT
    joined = " ".join(_texts([b for m in msgs for b in m.blocks]))
    for i in range(60):
        assert f"quote number {i} " in joined
    # every word of every quote survives the split
    assert joined.count("word") >= 60 * 700
    assert msgs[-1].blocks[-1]["type"] == "actions"
    assert sum(b["type"] == "actions" for m in msgs for b in m.blocks) == 1


def test_refusal_names_what_was_searched_and_nearest_passages() -> None:
    ans = Answer(question="q", refusal=True, reason="The documents do not support an answer.",
                 nearest=[NearestPassage(document="14-CFR-Part-91_X.pdf", page=9, page_label="9",
                                         url="https://d.example/x.pdf#page=9", snippet="Aircraft speed | limits")])
    msgs = render_answer(ans, turn_id=3, searched=Searched(["dev"], ["14-CFR-Part-91_X.pdf", "b.pdf"]))
    text = json.dumps(msgs[0].blocks, ensure_ascii=False)
    assert "could not find a supported answer" in text
    assert "The documents do not support an answer." in text
    assert "Searched 2 documents in `dev`: 14 CFR Part 91, b." in text
    assert "<https://d.example/x.pdf#page=9|14 CFR Part 91 · p. 9 (PDF 9)>" in text
    assert msgs[0].blocks[-1]["type"] == "actions"


def test_refusal_with_empty_collection_says_so() -> None:
    msgs = render_answer(Answer(question="q", refusal=True, reason="nothing"), turn_id=None,
                         searched=Searched(["slack-T1"]))
    assert "has no documents yet" in json.dumps(msgs[0].blocks)


def test_split_text_keeps_everything() -> None:
    text = ("Sentence one is here. " * 400).strip()
    parts = split_text(text, 1000)
    assert all(len(p) <= 1000 for p in parts)
    assert " ".join(parts).split() == text.split()
    assert split_text("x" * 2500, 1000) == ["x" * 1000, "x" * 1000, "x" * 500]


def test_escape_and_helpers() -> None:
    assert escape("a < b & c > d") == "a &lt; b &amp; c &gt; d"
    assert strip_mentions("<@U0BOT> what is  VFR? <@U0BOT|cv>", "U0BOT") == "what is VFR?"
    assert strip_mentions("<@U0BOT> ask <@U0ALICE>", "U0BOT") == "ask <@U0ALICE>"
    assert unwrap_url("<https://x.example/a.pdf>") == "https://x.example/a.pdf"
    assert unwrap_url("<https://x.example/a.pdf|a.pdf>") == "https://x.example/a.pdf"
    assert unwrap_url("https://x.example/a.pdf") == "https://x.example/a.pdf"


def test_scopes() -> None:
    ws = Settings(slack={"collection_scope": "workspace", "multi_workspace": True})  # one collection per workspace
    assert scope_for(ws, "T1", "C1").read == ("slack-T1",) and scope_for(ws, "T1", "C1").write == "slack-T1"
    assert scope_for(Settings(), "T1", "C1").read == ("default",)  # one workspace: the CLI's default collection
    fixed = Settings(slack={"workspace_collection": "dev"})
    assert scope_for(fixed, "T1", "C1").read == ("dev",)
    ch = Settings(slack={"collection_scope": "channel", "workspace_collection": "dev"})
    s = scope_for(ch, "T1", "C9")
    assert s.read == ("dev", "dev:C9") and s.write == "dev:C9"


def test_document_list() -> None:
    import datetime as dt

    text = render_documents([{"name": "a.pdf", "pages": 3, "chunks": 9, "ingested_at": dt.datetime(2025, 1, 2)}],
                            ["dev"])
    assert "*1 document* in `dev`" in text and "`a.pdf` — 3 pages, 9 chunks (added 2025-01-02)" in text
    rows = [{"name": "b.pdf", "pages": 1, "chunks": 2, "ingested_at": dt.datetime(2025, 1, 3), "added_by": "U0ALICE",
             "added_via": "slack"},
            {"name": "c.pdf", "pages": 1, "chunks": 2, "ingested_at": dt.datetime(2025, 1, 4), "added_by": "me@host",
             "added_via": "cli"}]
    text = render_documents(rows, ["dev"])
    assert "`b.pdf` — 1 pages, 2 chunks (added 2025-01-03 by <@U0ALICE>)" in text
    assert "`c.pdf` — 1 pages, 2 chunks (added 2025-01-04 from the command line)" in text and "me@host" not in text
    assert "No documents in `dev`" in render_documents([], ["dev"])


def test_urls_are_shown_without_secrets() -> None:
    from retrieval.text.urls import redact_urls, shown_url

    assert shown_url("https://u:pw@x.example:8443/a/b.pdf?X-Amz-Signature=abc#p=2") == "https://x.example:8443/a/b.pdf"
    assert redact_urls("https://x.example/a.pdf?sig=abc: download failed: HTTP 404") == \
        "https://x.example/a.pdf: download failed: HTTP 404"
    assert redact_urls("no url here?") == "no url here?"


def test_private_addresses_are_refused_unless_allowed() -> None:
    """What the URL itself says is checked at once; the addresses of names when connecting
    (tests/test_bot_fetch.py)."""
    from bot.urls import refusal

    strict, lax = Settings(), Settings(slack={"allow_private_urls": True})
    for url in ("http://127.0.0.1:8080/a.pdf", "http://169.254.169.254/latest/", "http://10.1.2.3/a.pdf",
                "http://[::1]/a.pdf", "http://[::ffff:192.168.0.1]/a.pdf", "http://LOCALHOST./a.pdf",
                "http://100.64.0.7/a.pdf", "http://0.0.0.0/a.pdf", "http://metadata.google.internal/x"):
        assert "public internet addresses" in (refusal(strict, url) or ""), url
        assert refusal(lax, url) is None
    assert refusal(strict, "https://93.184.215.14/a.pdf") is None
    assert refusal(strict, "https://sneaky.example/a.pdf") is None  # a name: its addresses are checked on connect
    assert "not a URL I can read" in (refusal(strict, "http://x.example:99999/a.pdf") or "")


def _context_text(msgs) -> str:
    return " ".join(e["text"] for m in msgs for b in m.blocks if b["type"] == "context" for e in b["elements"])


def test_the_context_line_says_who_made_the_answer_in_words_a_reader_can_use() -> None:
    quote = cite("Flight visibility 3 statute miles")
    extractive = Answer(question="q", refusal=False, answer="x", citations=[quote], answerer="extractive")
    text = _context_text(render_answer(extractive, turn_id=None, searched=Searched(["dev"])))
    assert "without a language model" in text and "Answerer:" not in text and "extractive" not in text
    model = Answer(question="q", refusal=False, answer="x", citations=[quote], answerer="gemini",
                   models={"answerer": "gemini-2.5-flash-lite"})
    text = _context_text(render_answer(model, turn_id=None, searched=Searched(["dev"])))
    assert "Answer written by gemini-2.5-flash-lite" in text and "word for word" in text
