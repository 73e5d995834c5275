"""A fake OpenAI-compatible API on 127.0.0.1 for tests: the real ``openai`` client talks to it over HTTP.

It serves ``POST /v1/chat/completions`` (what Ollama, vLLM, llama.cpp's server, LM Studio and OpenAI
all serve), checks the bearer key, records every request, and answers from a script like
``tests/fake_gemini.py`` (whose ``Reply`` it uses): a queue of replies, the last one repeating; a
reply is a JSON body with a status, headers, a delay, or a dropped connection.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from chapterverse_lab.replay import send_json
from tests.fake_gemini import Reply, Scripted, play, serving

PATH = "/v1/chat/completions"


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    def content(self, role: str) -> str:
        return "\n".join(m.get("content") or "" for m in self.body.get("messages", []) if m.get("role") == role)

    @property
    def prompt(self) -> str:
        """The user message (the Gemini fake's ``prompt``: tests share ``passages_in``)."""
        return self.content("user")


@dataclass
class FakeOpenAI(Scripted):
    requests: list[Recorded] = field(default_factory=list)

    def unscripted(self) -> Reply:
        return Reply(500, error_body("no script"))


def completion(content: str | None, finish: str = "stop", refusal: str | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": "fake",
            "choices": [{"index": 0, "finish_reason": finish,
                         "message": {"role": "assistant", "content": content, "refusal": refusal}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


def json_completion(obj: Any) -> dict[str, Any]:
    return completion(json.dumps(obj))


def answer_body(answer: str, citations: list[dict[str, Any]], answerable: bool = True, reason: str = "") -> dict:
    return json_completion({"answerable": answerable, "answer": answer, "citations": citations, "reason": reason})


def error_body(message: str, kind: str = "server_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


@dataclass
class Headed(Reply):
    """A reply with extra HTTP headers (e.g. ``Retry-After``)."""

    headers: dict[str, str] = field(default_factory=dict)


def _handler(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # keep test output quiet
            pass

        def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            send_json(self, status, body, headers)

        def do_POST(self) -> None:  # noqa: N802  (http.server naming)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if self.path.split("?", 1)[0] != PATH:
                self._send(404, error_body(f"no such route {self.path}", "not_found"))
                return
            if self.headers.get("Authorization") != f"Bearer {fake.api_key}":
                self._send(401, error_body("bad API key", "invalid_request_error"))
                return
            rec = Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, json.loads(raw or b"{}"))
            fake.requests.append(rec)
            reply = fake.next_reply(rec)
            play(self, reply, lambda: self._send(reply.status, reply.body, getattr(reply, "headers", None)))

    return Handler


@contextmanager
def running(api_key: str = "test-openai-key-not-secret") -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI(api_key)
    with serving(_handler(fake)) as base:
        fake.base_url = f"{base}/v1"
        yield fake
