"""Delivering a reply when rendering or Slack fails: the placeholder never stays "Looking through…".

A stub Slack client and store (no network, no database) drive ``bot.answer.Answering``.
"""

from __future__ import annotations

from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web import SlackResponse

import bot.answer as answer_mod
from bot.answer import Answering, Question
from bot.store import Claim, TurnRecord
from bot.render import SECTION_LIMIT, context, render_problem, section, sections
from retrieval.models import Answer, Citation
from retrieval.settings import Settings


def _error(method: str, code: str) -> SlackApiError:
    resp = SlackResponse(client=None, http_verb="POST", api_url=method, req_args={},
                         data={"ok": False, "error": code}, headers={}, status_code=200)
    return SlackApiError(f"{method} failed", resp)


class StubClient:
    """Records chat.* calls; ``fail[method]`` is how many of its next calls fail."""

    def __init__(self, **fail: int) -> None:
        self.fail = {k.replace("_", "."): v for k, v in fail.items()}
        self.messages: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self._n = 0
        self.reject: Any = None  # chat.postMessage kwargs -> True to fail that post


    def _call(self, method: str, kw: dict[str, Any]) -> None:
        self.calls.append((method, kw))
        if self.fail.get(method, 0) > 0:
            self.fail[method] -= 1
            raise _error(method, "msg_too_long")

    def chat_postMessage(self, **kw: Any) -> dict[str, Any]:  # noqa: N802
        self._call("chat.postMessage", kw)
        if self.reject is not None and self.reject(kw):
            raise _error("chat.postMessage", "invalid_blocks")
        self._n += 1
        ts = f"1.{self._n:06d}"
        self.messages[ts] = {"text": kw["text"], "blocks": kw.get("blocks"), "thread_ts": kw.get("thread_ts")}
        return {"ok": True, "channel": kw["channel"], "ts": ts}

    def chat_update(self, **kw: Any) -> dict[str, Any]:
        self._call("chat.update", kw)
        self.messages[kw["ts"]] = {**self.messages[kw["ts"]], "text": kw["text"], "blocks": kw["blocks"]}
        return {"ok": True}

    def chat_delete(self, **kw: Any) -> dict[str, Any]:
        self._call("chat.delete", kw)
        del self.messages[kw["ts"]]
        return {"ok": True}

    def texts(self) -> list[str]:
        return [m["text"] for m in self.messages.values()]


class StubStore:
    def __init__(self) -> None:
        self.reply_ts: dict[int, str] = {}

    def claim_event(self, team: str, key: str) -> bool:
        return True

    def claim_question(self, team: str, key: str, question: dict[str, str], **context: Any) -> Claim:
        return Claim(turn_id=42, titles={}, history=[])

    def set_placeholder(self, *a: Any) -> None:
        pass

    def finish_question(self, team: str, key: str, turn: TurnRecord | None, reply_ts: str | None) -> None:
        if turn is not None and turn.id is not None and reply_ts is not None:
            self.reply_ts[turn.id] = reply_ts


Q = Question(team="T1", channel="C1", user="U1", text="what?", ts="0.000001", thread_ts="0.000001")
GOOD = Answer(question="what?", refusal=False, answer="Three miles.",
              citations=[Citation(document="a.pdf", page=1, quote="three statute miles", url=None)])


def answering(client: StubClient, answer: Answer = GOOD) -> tuple[Answering, StubStore]:
    store = StubStore()
    return Answering(Settings(), lambda team: client, store, ask=lambda *a, **k: answer), store  # type: ignore[arg-type,return-value]


def no_placeholder_left(client: StubClient) -> bool:
    return not any(t.startswith("Looking through") for t in client.texts())


def test_normal_reply_replaces_the_placeholder() -> None:
    client = StubClient()
    a, store = answering(client)
    a.handle(Q)
    assert client.texts() == ["Three miles."] and store.reply_ts == {42: "1.000001"}


def test_a_reply_whose_record_failed_is_recorded_when_the_database_is_back() -> None:
    from retrieval.store.db import IndexUnavailable  # noqa: PLC0415

    client = StubClient()
    a, store = answering(client)
    down = [1]
    finish = store.finish_question

    def flaky(*args: Any) -> None:
        if down[0]:
            down[0] -= 1
            raise IndexUnavailable("the index database is unavailable: down")
        finish(*args)

    store.finish_question = flaky  # type: ignore[method-assign]
    a.handle(Q)
    assert client.texts() == ["Three miles."] and store.reply_ts == {}
    assert a.in_flight() == [(Q.team, Q.key)]  # still this process's: the keeper keeps its heartbeat
    a.retry_done()
    assert store.reply_ts == {42: "1.000001"} and a.in_flight() == []


def test_a_turn_that_cannot_be_recorded_still_ends_the_question() -> None:
    from retrieval.store.db import DatabaseError  # noqa: PLC0415

    client = StubClient()
    a, store = answering(client)
    ended: list[str] = []

    def refuse_turns(team: str, key: str, turn: Any, reply_ts: Any) -> None:
        if turn is not None:
            raise DatabaseError("database error: a turn it cannot take")
        ended.append(key)

    store.finish_question = refuse_turns  # type: ignore[method-assign]
    a.handle(Q)
    assert client.texts() == ["Three miles."] and ended == [Q.key] and a.in_flight() == []


def test_render_failure_becomes_a_problem_message(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*a: Any, **k: Any) -> None:
        raise ValueError("section text over Slack's limit")

    monkeypatch.setattr(answer_mod, "render_answer", boom)
    client = StubClient()
    a, _ = answering(client)
    a.handle(Q)
    assert no_placeholder_left(client)
    [text] = client.texts()
    assert "Something went wrong on my side" in text and "ValueError" in text


def test_failed_update_posts_the_answer_as_a_new_message() -> None:
    client = StubClient(chat_update=1)
    a, store = answering(client)
    a.handle(Q)
    assert client.texts() == ["Three miles."]  # the placeholder was deleted
    assert store.reply_ts[42] != "1.000001"  # the new message is the reply
    assert [m for m, _ in client.calls] == ["chat.postMessage", "chat.update", "chat.postMessage", "chat.delete"]


def test_failed_update_and_delete_leaves_a_pointer_not_a_placeholder() -> None:
    client = StubClient(chat_update=1, chat_delete=1)
    a, _ = answering(client)
    a.handle(Q)
    assert no_placeholder_left(client)
    assert sorted(client.texts()) == ["My reply is below.", "Three miles."]


def test_undeliverable_reply_becomes_a_problem_and_nothing_else_is_posted() -> None:
    many = Answer(question="q", refusal=False, answer="x",
                  citations=[Citation(document="a.pdf", page=1, quote=f"quote {i} " + "w " * 3000) for i in range(8)])
    client = StubClient(chat_update=1)
    client.reject = lambda kw: not kw["text"].startswith(("Looking through", "I had a reply"))  # type: ignore[attr-defined]
    a, store = answering(client, many)
    a.handle(Q)
    [text] = client.texts()
    assert "Slack would not accept it" in text  # the placeholder became the problem message
    assert sum(m == "chat.postMessage" for m, _ in client.calls) == 2  # placeholder, one failed try; no rest
    assert store.reply_ts == {}


def test_long_text_never_raises_and_quotes_are_split_not_cut() -> None:
    block = section("a" * 5000)
    assert len(block["text"]["text"]) <= SECTION_LIMIT and block["text"]["text"].endswith("…")
    assert len(context("b" * 5000)["elements"][0]["text"]) <= SECTION_LIMIT
    clipped = section("&amp;" * 1000)["text"]["text"]
    assert clipped.removesuffix("…").endswith("&amp;")  # no entity cut in half
    assert "".join(b["text"]["text"] for b in sections("&amp;" * 1000)) == "&amp;" * 1000
    assert len(render_problem("z" * 10_000).blocks[0]["text"]["text"]) <= SECTION_LIMIT
