"""Record and replay a model's replies: a local server that speaks both providers' protocols.

The server listens on 127.0.0.1 and answers ``POST /v1/chat/completions`` (the OpenAI-compatible
answerer, real ``openai`` client) and ``POST /v1beta/models/{model}:generateContent`` (the Gemini
answerer, real ``google-genai`` client) from recorded replies. Nothing is ever invented: a request
with no recording is written to the pending folder (its system text, prompt and schema, exactly as
sent) and answered with HTTP 404 and a message naming its key, so the answerer fails loudly and the
evaluation counts it (``misses``).

**Key.** A reply is found by what was asked and shown, not by the prompt's wording, so a cosmetic
edit of the instructions does not orphan every recording: the request's kind (answer, repair,
rewrite), the question, and for each passage shown its document, page and a hash of its normalised
text; for a repair also each failed citation (document, page, quote); for a rewrite the conversation.
These are read back from the prompt's labelled sections (``sections``). A change in what the
model is shown (another passage, a wider slice) changes the key, as it must.

**Files.** Recordings are JSON lines (``*.jsonl`` in a folder): ``{"key", "kind", "question",
"reply", "source", "instructions"}`` (``instructions``: a hash of the system text and schema the reply was
written under; recordings made before it was kept have none, and a replay counts both) where ``reply`` is the JSON object the model returned and ``source`` says who
wrote it ("stand-in model" for replies written from the request text by a language model standing in
for the provider; see ``docs/model-path.md``). ``import_replies`` checks each reply written for a
pending request against the answerer's schema and appends it.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from retrieval.answer.answerers.model.prompt import CONVERSATION, END, FAILED, FOLLOW_UP, PASSAGES, QUESTION
from retrieval.answer.answerers.model.structured import ModelAnswer, StandaloneQuestion
from retrieval.text.textnorm import normalize

OPENAI_PATH = "/v1/chat/completions"
GEMINI_PATH = re.compile(r"^/v1(?:beta|alpha)?/models/(?P<model>[^/:]+):generateContent$")
SCHEMAS: dict[str, type[BaseModel]] = {"answer": ModelAnswer, "repair": ModelAnswer, "rewrite": StandaloneQuestion}


class ReplayError(ValueError):
    """A request this server cannot key, or a reply file that does not fit its request: one line."""


@dataclass(frozen=True)
class Request:
    kind: str  # answer | repair | rewrite
    key: str
    question: str


def sections(prompt: str) -> dict[str, str]:
    """The labelled sections of a prompt made by ``retrieval.answer.answerers.model.prompt``:
    {label: text}. Inverse of its builders, for finding a recorded reply by content."""
    labels = (PASSAGES, QUESTION, FAILED, CONVERSATION, FOLLOW_UP)
    found = sorted((prompt.find(f"{label}\n"), label) for label in labels if f"{label}\n" in prompt)
    out: dict[str, str] = {}
    for (at, label), nxt in zip(found, [f[0] for f in found[1:]] + [len(prompt)], strict=True):
        body = prompt[at + len(label) + 1:nxt]
        out[label] = body.split(END)[0].split("\n\nThe citations above")[0].strip()
    return out


def _hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, ensure_ascii=False, sort_keys=True).encode()).hexdigest()[:24]


def request_key(prompt: str) -> Request:
    """The recording key of a prompt built by ``retrieval.answer.answerers.model.prompt`` (module docstring)."""
    parts = sections(prompt)
    if FOLLOW_UP in parts:
        question = parts[FOLLOW_UP]
        return Request("rewrite", _hash(["rewrite", question, json.loads(parts.get(CONVERSATION) or "[]")]), question)
    if PASSAGES not in parts or QUESTION not in parts:
        raise ReplayError("the prompt has no PASSAGES and QUESTION sections: not a request this server can key")
    question = parts[QUESTION]
    shown = [(p["document"], p["page"], hashlib.sha256(normalize(p["text"]).encode()).hexdigest()[:16])
             for p in json.loads(parts[PASSAGES])]
    if FAILED in parts:
        failed = [(f["document"], f["page"], f["quote"]) for f in json.loads(parts[FAILED])]
        return Request("repair", _hash(["repair", question, shown, failed]), question)
    return Request("answer", _hash(["answer", question, shown]), question)


def instructions_hash(system: str, schema: dict[str, Any]) -> str:
    """What a reply was written under: the system instructions and the response schema (not part of the
    key, so a replay under changed instructions finds the old reply, and is reported: ``Replayer.stale``)."""
    return _hash([system, schema])


def load_replies(folder: Path) -> dict[str, dict[str, Any]]:
    """Every recording in ``folder``'s ``*.jsonl`` files, by key (a later line wins)."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("*.jsonl")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if line.strip():
                try:
                    rec = json.loads(line)
                    out[rec["key"]] = rec
                except (json.JSONDecodeError, KeyError, TypeError):
                    raise ReplayError(f"{path}:{n}: not a recording (a JSON object with 'key' and 'reply')") from None
    return out


@dataclass
class Replayer:
    """Recorded replies by key; what was asked and what was missing."""

    replies: dict[str, dict[str, Any]]
    pending: Path | None = None
    misses: list[Request] = field(default_factory=list)
    served: list[Request] = field(default_factory=list)
    stale: list[Request] = field(default_factory=list)  # served a reply written under other instructions
    unstamped: list[Request] = field(default_factory=list)  # served a reply recorded before instructions were kept
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def reply(self, system: str, prompt: str) -> tuple[Request, str | None]:
        """The request's key and its recorded reply as JSON text (None: no recording, written to pending)."""
        req = request_key(prompt)
        rec = self.replies.get(req.key)
        with self._lock:
            (self.served if rec else self.misses).append(req)
            if rec is not None and "instructions" not in rec:
                self.unstamped.append(req)
            elif rec is not None and rec["instructions"] != instructions_hash(system, SCHEMAS[req.kind].model_json_schema()):
                self.stale.append(req)
        if rec is not None:
            return req, json.dumps(rec["reply"], ensure_ascii=False)
        if self.pending is not None:
            self.pending.mkdir(parents=True, exist_ok=True)
            path = self.pending / f"{req.key}.request.json"
            if not path.exists():
                path.write_text(json.dumps({"key": req.key, "kind": req.kind, "question": req.question,
                                            "system": system, "prompt": prompt,
                                            "schema": SCHEMAS[req.kind].model_json_schema()},
                                           ensure_ascii=False, indent=1))
                schema = json.dumps(SCHEMAS[req.kind].model_json_schema(), ensure_ascii=False)
                (self.pending / f"{req.key}.request.txt").write_text(
                    f"SYSTEM INSTRUCTIONS:\n{system}\n\nUSER MESSAGE:\n{prompt}\n\nRESPONSE SCHEMA (JSON):\n{schema}\n")
        return req, None

    def misses_since(self, mark: int) -> list[Request]:
        with self._lock:
            return self.misses[mark:]


def _openai_request(body: dict[str, Any]) -> tuple[str, str]:
    msgs = body.get("messages") or []
    text = {role: "\n".join(m.get("content") or "" for m in msgs if m.get("role") == role) for role in ("system", "user")}
    return text["system"], text["user"]


def _gemini_request(body: dict[str, Any]) -> tuple[str, str]:
    system = " ".join(p.get("text", "") for p in (body.get("systemInstruction") or {}).get("parts", []))
    prompt = "".join(p.get("text", "") for c in body.get("contents", []) for p in c.get("parts", []))
    return system, prompt


def _openai_reply(text: str) -> dict[str, Any]:
    return {"id": "chatcmpl-replay", "object": "chat.completion", "created": 0, "model": "replay",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text, "refusal": None}}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}


def _gemini_reply(text: str) -> dict[str, Any]:
    return {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP",
                            "index": 0}], "modelVersion": "replay"}


def send_json(handler: BaseHTTPRequestHandler, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
    """One HTTP response with a JSON body (a str is sent as it is: a test may send malformed JSON).
    Shared by this server and the tests' scripted provider fakes."""
    data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json; charset=UTF-8")
    handler.send_header("Content-Length", str(len(data)))
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(data)


def _handler(replayer: Replayer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, body: dict[str, Any]) -> None:
            send_json(self, status, body)

        def do_POST(self) -> None:  # noqa: N802  (http.server naming)
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            path = self.path.split("?", 1)[0]
            gemini = GEMINI_PATH.match(path) is not None
            if path != OPENAI_PATH and not gemini:
                self._send(404, {"error": {"message": f"no such route {path}", "code": 404, "status": "NOT_FOUND"}})
                return
            try:
                body = json.loads(raw or b"{}")
                system, prompt = (_gemini_request if gemini else _openai_request)(body)
                req, text = replayer.reply(system, prompt)
            except (ReplayError, json.JSONDecodeError, KeyError, TypeError) as exc:
                self._send(400, {"error": {"message": f"replay: {exc}", "code": 400, "status": "INVALID_ARGUMENT"}})
                return
            if text is None:
                self._send(404, {"error": {"message": f"replay: no recorded reply for this {req.kind} request "
                                                      f"(key {req.key})", "code": 404, "status": "NOT_FOUND"}})
                return
            self._send(200, _gemini_reply(text) if gemini else _openai_reply(text))

    return Handler


@contextmanager
def serve_http(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A threaded HTTP server on 127.0.0.1 (a free port) while the block runs; yields its base URL.
    Shared by the replay server and the tests' scripted provider fakes."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="local-http", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def serving(replayer: Replayer) -> Iterator[str]:
    """Run the replay server on 127.0.0.1 (a free port) while the block runs; yields its base URL."""
    with serve_http(_handler(replayer)) as url:
        yield url


def pending_requests(pending: Path) -> list[dict[str, Any]]:
    """The requests waiting for a reply in ``pending`` (those with no ``<key>.reply.json`` beside them)."""
    out = []
    for path in sorted(pending.glob("*.request.json")):
        key = path.name.removesuffix(".request.json")
        if not (pending / f"{key}.reply.json").exists():
            out.append(json.loads(path.read_text()))
    return out


def import_replies(pending: Path, into: Path, source: str) -> tuple[int, list[str]]:
    """Append every reply written in ``pending`` (``<key>.reply.json``) to the recording file ``into``,
    checked against its request's schema; the imported pairs are removed from ``pending``. Returns
    (imported, problems); a reply that does not fit stays where it is and is named in ``problems``."""
    known = load_replies(into.parent) if into.parent.exists() else {}
    imported, problems, lines = 0, [], []
    for path in sorted(pending.glob("*.reply.json")):
        key = path.name.removesuffix(".reply.json")
        req_path = pending / f"{key}.request.json"
        if not req_path.exists():
            problems.append(f"{path.name}: no request {req_path.name} beside it")
            continue
        req = json.loads(req_path.read_text())
        try:
            reply = SCHEMAS[req["kind"]].model_validate_json(path.read_text())
        except ValidationError as exc:
            problems.append(f"{path.name}: does not match the {req['kind']} schema ({exc.error_count()} error(s): "
                            f"{exc.errors()[0].get('msg', '')})")
            continue
        if key not in known:
            lines.append(json.dumps({"key": key, "kind": req["kind"], "question": req["question"],
                                     "reply": reply.model_dump(), "source": source,
                                     "instructions": instructions_hash(req["system"], req["schema"])},
                                    ensure_ascii=False))
            imported += 1
        for done in (path, req_path, pending / f"{key}.request.txt"):
            done.unlink(missing_ok=True)
    if lines:
        into.parent.mkdir(parents=True, exist_ok=True)
        with into.open("a") as f:
            f.write("\n".join(lines) + "\n")
    return imported, problems
