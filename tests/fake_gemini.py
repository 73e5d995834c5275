"""A fake Gemini API on 127.0.0.1 for tests: the real google-genai client talks to it over HTTP.

It serves ``POST /v1beta/models/{model}:generateContent`` (and ``/v1/...``), checks the key in the
``x-goog-api-key`` header, records every request, and answers from a script: a queue of ``Reply``
objects (the last one repeats). A reply is a JSON body with a status, a delay before answering, or a
dropped connection. Helpers build the response shapes the real API uses.
"""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

from chapterverse_lab.replay import send_json
from chapterverse_lab.replay import serve_http as serving  # noqa: F401  (the OpenAI fake serves through it too)
from typing import Any

PATH = re.compile(r"^/v1(?:beta|alpha)?/models/(?P<model>[^/:]+):generateContent$")


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # JSON-serialisable, or raw str sent as is (for malformed JSON)
    delay_s: float = 0.0
    drop: bool = False  # close the connection without answering


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def prompt(self) -> str:
        return " ".join(p.get("text", "") for c in self.body.get("contents", []) for p in c.get("parts", []))


@dataclass
class Scripted:
    """A fake provider's script: replies played in order, the last one repeated; a callable reply is
    made from the request it answers. Shared by the Gemini and OpenAI-compatible fakes."""

    api_key: str
    replies: list[Any] = field(default_factory=list)  # Reply | Callable[[request], Reply]
    requests: list[Any] = field(default_factory=list)
    base_url: str = ""

    def script(self, *replies: Any) -> None:
        self.replies = list(replies)
        self.requests.clear()

    def unscripted(self) -> Reply:
        return Reply(500, {"error": "no script"})

    def next_reply(self, rec: Any) -> Reply:
        item = self.replies.pop(0) if len(self.replies) > 1 else (self.replies[0] if self.replies else self.unscripted())
        return item(rec) if callable(item) else item


@dataclass
class FakeGemini(Scripted):
    requests: list[Recorded] = field(default_factory=list)

    def unscripted(self) -> Reply:
        return Reply(500, error_body(500, "INTERNAL", "no script"))


def text_response(text: str, finish: str = "STOP") -> dict[str, Any]:
    return {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": finish,
                            "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
            "modelVersion": "fake"}


def json_response(obj: Any) -> dict[str, Any]:
    return text_response(json.dumps(obj))


def answer_body(answer: str, citations: list[dict[str, Any]], answerable: bool = True, reason: str = "") -> dict:
    return json_response({"answerable": answerable, "answer": answer, "citations": citations, "reason": reason})


def error_body(code: int, status: str, message: str, details: list[dict[str, Any]] | None = None) -> dict:
    return {"error": {"code": code, "message": message, "status": status, "details": details or []}}


def retry_info(delay: str) -> dict[str, Any]:
    return {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}


def blocked_prompt() -> dict[str, Any]:
    return {"promptFeedback": {"blockReason": "SAFETY",
                               "safetyRatings": [{"category": "HARM_CATEGORY_DANGEROUS_CONTENT",
                                                  "probability": "HIGH", "blocked": True}]},
            "modelVersion": "fake"}


def safety_stop() -> dict[str, Any]:
    return {"candidates": [{"finishReason": "SAFETY", "index": 0,
                            "safetyRatings": [{"category": "HARM_CATEGORY_HARASSMENT", "probability": "HIGH",
                                               "blocked": True}]}], "modelVersion": "fake"}


def play(handler: BaseHTTPRequestHandler, reply: Any, send: Callable[[], None]) -> None:
    """Deliver a scripted reply: after its ``delay_s``, or not at all when it says ``drop`` (the
    connection is cut); a client that gave up meanwhile (its timeout) is no error."""
    if reply.delay_s:
        time.sleep(reply.delay_s)
    if reply.drop:
        handler.close_connection = True
        try:
            handler.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        return
    try:
        send()
    except (BrokenPipeError, ConnectionResetError):
        pass  # the client gave up (timeout)


def _handler(fake: FakeGemini) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # keep test output quiet
            pass

        def _send(self, status: int, body: Any) -> None:
            send_json(self, status, body)

        def do_POST(self) -> None:  # noqa: N802  (http.server naming)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if not PATH.match(self.path.split("?", 1)[0]):
                self._send(404, error_body(404, "NOT_FOUND", f"no such method {self.path}"))
                return
            if self.headers.get("x-goog-api-key") != fake.api_key:
                self._send(403, error_body(403, "PERMISSION_DENIED", "bad API key"))
                return
            rec = Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, json.loads(raw or b"{}"))
            fake.requests.append(rec)
            reply = fake.next_reply(rec)
            play(self, reply, lambda: self._send(reply.status, reply.body))

    return Handler




@contextmanager
def running(api_key: str = "test-key-not-secret") -> Iterator[FakeGemini]:
    fake = FakeGemini(api_key)
    with serving(_handler(fake)) as base:
        fake.base_url = base
        yield fake
