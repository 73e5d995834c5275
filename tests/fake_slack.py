"""A fake Slack that the real slack-sdk / slack-bolt code talks to over HTTP and WebSocket on 127.0.0.1.

It serves the Web API methods the bot uses (``auth.test``, ``apps.connections.open``,
``chat.postMessage``/``update``/``delete``/``postEphemeral``, ``reactions.add``, ``conversations.replies``,
``files.info``, ``users.info``), a private file download URL, slash-command ``response_url``s, and a Socket Mode
WebSocket (hello, envelopes, acks, ping/pong). Tests drive it from their own thread:

- ``post_user_message`` stores a message and delivers the events Slack would (``message``, plus
  ``app_mention`` when the bot is mentioned outside a DM); ``send_event`` delivers any event,
  ``slash`` a slash command, ``click`` a button press.
- ``fail`` makes the next N calls of a method answer ``ok: false`` with an error code.
- ``rate_limit`` makes the next N calls of a method answer HTTP 429 with ``Retry-After``;
  ``stall_handshakes`` holds each later WebSocket upgrade unanswered for a while;
  ``drop_sockets`` closes every WebSocket (the client sees a close frame); ``freeze_sockets`` makes
  the open ones silent, like a dead TCP path (no pongs, no acks delivered).
- Every Web API call, ack and download is recorded with its time.

Everything runs on one asyncio loop in a daemon thread; the public methods are thread-safe.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

import pytest
from aiohttp import WSMsgType, web

BOT_TOKEN = "xoxb-fake-bot-token-0123456789"
APP_TOKEN = "xapp-fake-app-token-9876543210"


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    at: float
    status: int = 200
    team: str | None = None  # the workspace whose bot token made the call


@dataclass
class Ack:
    envelope_id: str
    payload: dict[str, Any] | None
    at: float


@dataclass
class _Socket:
    ws: web.WebSocketResponse
    opened_at: float
    frozen: bool = False


@dataclass
class FakeFile:
    id: str
    name: str
    data: bytes
    mimetype: str = "application/pdf"
    user: str = "U0ALICE"
    downloads: list[dict[str, str]] = field(default_factory=list)


class FakeSlack:
    def __init__(self, *, team_id: str = "T0FAKE", bot_user_id: str = "U0BOT", bot_id: str = "B0BOT",
                 echo_bot_messages: bool = True) -> None:
        self.team_id, self.bot_user_id, self.bot_id = team_id, bot_user_id, bot_id
        self.echo_bot_messages = echo_bot_messages
        self.calls: list[Call] = []
        self.acks: dict[str, Ack] = {}
        self.sent_at: dict[str, float] = {}
        self.messages: dict[str, list[dict[str, Any]]] = {}  # channel -> messages in order
        self.ephemerals: list[dict[str, Any]] = []
        self.responses: list[dict[str, Any]] = []  # posts to response_url
        self.reactions: list[dict[str, Any]] = []
        self.files: dict[str, FakeFile] = {}
        # users.info: every user is a plain member unless listed here (flags such as is_admin, is_owner)
        self.users: dict[str, dict[str, Any]] = {"U0OWNER": {"is_owner": True, "is_primary_owner": True},
                                                 "U0WSADMIN": {"is_admin": True}}
        self.static: dict[str, bytes] = {}  # public downloads (for /chapterverse ingest <url>)
        self.static_requests: list[str] = []  # names asked for at /static/, served or not
        self.connections_opened = 0
        self._sockets: list[_Socket] = []
        self.handshake_delay_s = 0.0  # how long a WebSocket upgrade waits before it is answered (``stall_handshakes``)
        self.handshakes_begun = 0
        self._pending: list[str] = []  # envelopes waiting for a live socket
        self._rate_limits: dict[str, list[int]] = {}  # method -> [remaining, retry_after]
        self._failures: dict[str, list[Any]] = {}  # method -> [remaining, error code, channel or None]
        self._lock = threading.RLock()
        self.tokens: dict[str, str] = {BOT_TOKEN: team_id}  # bot token -> its workspace
        self.oauth_codes: dict[str, tuple[str, str]] = {}  # install code -> (team id, bot token)
        self._team = team_id  # workspace of the Web API call being handled
        self._ts = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> FakeSlack:
        ready = threading.Event()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(self._serve())
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="fake-slack", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("fake Slack did not start")
        return self

    def stop(self) -> None:
        if self._loop is None:
            return
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread:
            self._thread.join(5)

    async def _serve(self) -> None:
        self._closing = asyncio.Event()  # set on stop: a stalled handshake gives up at once
        app = web.Application(client_max_size=200 * 1024 * 1024)
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_get("/link/", self._socket)
        app.router.add_get("/files-pri/{file_id}/{name}", self._download)
        app.router.add_post("/respond/{token}", self._respond)
        app.router.add_get("/static/{name}", self._static)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def _shutdown(self) -> None:
        self._closing.set()
        for s in list(self._sockets):
            await s.ws.close()
        if self._runner:
            await self._runner.cleanup()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_url(self) -> str:
        return f"{self.base}/api/"

    def env(self) -> dict[str, str]:
        """Environment for a bot process talking to this fake."""
        return {"SLACK_API_URL": self.api_url, "SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_APP_TOKEN": APP_TOKEN}

    # ------------------------------------------------------------------ Web API
    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params: dict[str, Any] = dict(request.query)
        if request.can_read_body:
            raw = await request.read()
            if request.content_type == "application/json":
                params.update(json.loads(raw or b"{}"))
            else:
                params.update(dict(parse_qsl(raw.decode(), keep_blank_values=True)))
        for key in ("blocks", "attachments"):
            if isinstance(params.get(key), str):
                params[key] = json.loads(params[key])
        auth = request.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ").strip() or params.pop("token", "")
        params.pop("token", None)
        with self._lock:
            limited = self._rate_limits.get(method)
            if limited and limited[0] > 0:
                limited[0] -= 1
                self.calls.append(Call(method, params, time.time(), 429))
                return web.json_response({"ok": False, "error": "ratelimited"}, status=429,
                                         headers={"Retry-After": str(limited[1])})
            failing = self._failures.get(method)
            if (failing and failing[0] > 0 and token == BOT_TOKEN
                    and failing[2] in (None, str(params.get("channel")))):
                failing[0] -= 1
                self.calls.append(Call(method, params, time.time(), 200))
                return web.json_response({"ok": False, "error": failing[1]})
            self.calls.append(Call(method, params, time.time(), team=self.tokens.get(token)))
        if method == "apps.connections.open":
            authorized = token == APP_TOKEN
        elif method == "api.test":
            authorized = True  # Slack's api.test needs no token
        else:
            authorized = token in self.tokens or method == "oauth.v2.access"  # that one uses the client secret
        if not authorized:
            return web.json_response({"ok": False, "error": "invalid_auth"})
        handler: Callable[[dict[str, Any]], dict[str, Any]] | None = getattr(
            self, "_m_" + method.replace(".", "_"), None)
        if handler is None:
            return web.json_response({"ok": False, "error": "unknown_method"})
        with self._lock:
            self._team = self.tokens.get(token, self.team_id)
            body = handler(params)
        return web.json_response(body)

    def _next_ts(self) -> str:
        return f"{int(time.time())}.{next(self._ts):06d}"

    def add_team(self, team_id: str, bot_token: str) -> None:
        """Another workspace the app is installed in (multi-workspace mode), with its own bot token."""
        with self._lock:
            self.tokens[bot_token] = team_id

    def install_code(self, team_id: str, bot_token: str) -> str:
        """A code Slack would hand the browser after someone installs the app in ``team_id``."""
        code = uuid.uuid4().hex
        with self._lock:
            self.oauth_codes[code] = (team_id, bot_token)
        return code

    def _m_oauth_v2_access(self, p: dict[str, Any]) -> dict[str, Any]:
        found = self.oauth_codes.pop(str(p.get("code")), None)
        if found is None:
            return {"ok": False, "error": "invalid_code"}
        team, token = found
        self.tokens[token] = team
        return {"ok": True, "app_id": "A0FAKE", "authed_user": {"id": "U0INSTALLER"}, "scope": "chat:write",
                "token_type": "bot", "access_token": token, "bot_user_id": self.bot_user_id,
                "team": {"id": team, "name": f"Team {team}"}, "enterprise": None, "is_enterprise_install": False}

    def _m_api_test(self, p: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "args": {k: v for k, v in p.items() if k != "token"}}

    def _m_auth_test(self, p: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "url": "https://fake.slack.test/", "team": "Fake", "user": "chapterverse",
                "team_id": self._team, "user_id": self.bot_user_id, "bot_id": self.bot_id,
                "is_enterprise_install": False}

    def _m_apps_connections_open(self, p: dict[str, Any]) -> dict[str, Any]:
        self.connections_opened += 1
        return {"ok": True, "url": f"ws://127.0.0.1:{self.port}/link/?ticket={uuid.uuid4().hex}"}

    def _m_chat_postMessage(self, p: dict[str, Any]) -> dict[str, Any]:
        channel = str(p.get("channel", ""))
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        msg = {"type": "message", "user": self.bot_user_id, "bot_id": self.bot_id, "text": p.get("text", ""),
               "blocks": p.get("blocks") or [], "ts": self._next_ts(), "channel": channel, "team": self._team}
        if p.get("thread_ts"):
            msg["thread_ts"] = str(p["thread_ts"])
        self.messages.setdefault(channel, []).append(msg)
        if self.echo_bot_messages:
            event = {k: v for k, v in msg.items() if k != "blocks"}
            event["channel_type"] = "im" if channel.startswith("D") else "channel"
            self._deliver_event(event, self._team)
        return {"ok": True, "channel": channel, "ts": msg["ts"], "message": msg}

    def _m_chat_update(self, p: dict[str, Any]) -> dict[str, Any]:
        for msg in self.messages.get(str(p.get("channel")), []):
            if msg["ts"] == str(p.get("ts")):
                msg["text"] = p.get("text", msg["text"])
                msg["blocks"] = p.get("blocks") or []
                msg["edited"] = True
                return {"ok": True, "channel": p["channel"], "ts": msg["ts"], "text": msg["text"]}
        return {"ok": False, "error": "message_not_found"}

    def _m_chat_delete(self, p: dict[str, Any]) -> dict[str, Any]:
        msgs = self.messages.get(str(p.get("channel")), [])
        for i, msg in enumerate(msgs):
            if msg["ts"] == str(p.get("ts")):
                if msg.get("user") != self.bot_user_id:
                    return {"ok": False, "error": "cant_delete_message"}
                del msgs[i]
                return {"ok": True, "channel": p["channel"], "ts": msg["ts"]}
        return {"ok": False, "error": "message_not_found"}

    def _m_chat_postEphemeral(self, p: dict[str, Any]) -> dict[str, Any]:
        self.ephemerals.append({**p, "at": time.time()})
        return {"ok": True, "message_ts": self._next_ts()}

    def _m_reactions_add(self, p: dict[str, Any]) -> dict[str, Any]:
        self.reactions.append(dict(p))
        return {"ok": True}

    def _m_conversations_replies(self, p: dict[str, Any]) -> dict[str, Any]:
        root = str(p.get("ts"))
        msgs = [m for m in self.messages.get(str(p.get("channel")), [])
                if m["ts"] == root or m.get("thread_ts") == root]
        if not msgs:
            return {"ok": False, "error": "thread_not_found"}
        return {"ok": True, "messages": msgs, "has_more": False}

    def _m_users_info(self, p: dict[str, Any]) -> dict[str, Any]:
        user = str(p.get("user", ""))
        if not user.startswith(("U", "W")):
            return {"ok": False, "error": "user_not_found"}
        flags = {"is_admin": False, "is_owner": False, "is_primary_owner": False, "is_restricted": False,
                 "is_ultra_restricted": False, "is_bot": False, "deleted": False, **self.users.get(user, {})}
        return {"ok": True, "user": {"id": user, "team_id": self._team, "name": user.lower(), **flags}}

    def set_user(self, user: str, **flags: Any) -> None:
        """What users.info says about ``user`` (e.g. ``is_admin=True``)."""
        with self._lock:
            self.users[user] = dict(flags)

    def _m_files_info(self, p: dict[str, Any]) -> dict[str, Any]:
        f = self.files.get(str(p.get("file")))
        if f is None:
            return {"ok": False, "error": "file_not_found"}
        return {"ok": True, "file": self._file_object(f)}

    def _file_object(self, f: FakeFile) -> dict[str, Any]:
        url = f"{self.base}/files-pri/{f.id}/{f.name}"
        return {"id": f.id, "name": f.name, "title": f.name, "mimetype": f.mimetype, "filetype": "pdf",
                "size": len(f.data), "user": f.user, "url_private": url, "url_private_download": url,
                "permalink": f"{self.base}/files/{f.id}"}

    async def _download(self, request: web.Request) -> web.Response:
        f = self.files.get(request.match_info["file_id"])
        with self._lock:
            if f is not None:
                f.downloads.append({"authorization": request.headers.get("Authorization", "")})
        if f is None:
            return web.Response(status=404)
        if request.headers.get("Authorization") != f"Bearer {BOT_TOKEN}":
            return web.Response(status=403, text="login required")
        return web.Response(body=f.data, content_type=f.mimetype)

    async def _static(self, request: web.Request) -> web.Response:
        with self._lock:
            self.static_requests.append(request.match_info["name"])
        data = self.static.get(request.match_info["name"])
        if data is None:
            return web.Response(status=404, text="not found")
        return web.Response(body=data, content_type="application/pdf")

    def serve(self, name: str, data: bytes) -> str:
        """Publish ``data`` at a plain http URL (not a Slack file); returns the URL."""
        with self._lock:
            self.static[name] = data
        return f"{self.base}/static/{name}"

    async def _respond(self, request: web.Request) -> web.Response:
        body = await request.json()
        with self._lock:
            self.responses.append({"token": request.match_info["token"], **body, "at": time.time()})
        return web.Response(text="ok")

    # ------------------------------------------------------------------ Socket Mode
    async def _socket(self, request: web.Request) -> web.StreamResponse:
        with self._lock:
            self.handshakes_begun += 1
            delay = self.handshake_delay_s
        if delay:
            try:
                await asyncio.wait_for(self._closing.wait(), delay)
                return web.Response(status=503, text="fake Slack stopping")
            except asyncio.TimeoutError:
                pass
        ws = web.WebSocketResponse(autoping=False)
        await ws.prepare(request)
        sock = _Socket(ws, time.time())
        with self._lock:
            self._sockets.append(sock)
            pending, self._pending = self._pending, []
        await ws.send_str(json.dumps({"type": "hello", "num_connections": 1,
                                      "debug_info": {"host": "fake-slack", "approximate_connection_time": 3600},
                                      "connection_info": {"app_id": "A0FAKE"}}))
        for raw in pending:
            await ws.send_str(raw)
        try:
            async for msg in ws:
                if sock.frozen:
                    continue
                if msg.type == WSMsgType.PING:
                    await ws.pong(msg.data)
                elif msg.type == WSMsgType.TEXT:
                    data = json.loads(msg.data)
                    if "envelope_id" in data:
                        with self._lock:
                            self.acks[data["envelope_id"]] = Ack(data["envelope_id"], data.get("payload"),
                                                                 time.time())
        finally:
            with self._lock:
                if sock in self._sockets:
                    self._sockets.remove(sock)
        return ws

    def live_sockets(self) -> int:
        with self._lock:
            return sum(1 for s in self._sockets if not s.frozen and not s.ws.closed)

    def drop_sockets(self) -> None:
        """Close every open WebSocket from the server side (the client receives a close frame)."""
        assert self._loop is not None

        async def close_all() -> None:
            for s in list(self._sockets):
                await s.ws.close(code=1001, message=b"going away")

        asyncio.run_coroutine_threadsafe(close_all(), self._loop).result(5)

    def stall_handshakes(self, seconds: float) -> None:
        """Answer each later WebSocket upgrade only after ``seconds`` (Slack slow to open a connection)."""
        with self._lock:
            self.handshake_delay_s = seconds

    def freeze_sockets(self) -> None:
        """Make the open WebSockets silent: no pongs, acks dropped, nothing delivered (a dead path)."""
        with self._lock:
            for s in self._sockets:
                s.frozen = True

    def _send_raw(self, raw: str) -> None:
        assert self._loop is not None
        with self._lock:
            live = [s for s in self._sockets if not s.frozen and not s.ws.closed]
            if not live:
                self._pending.append(raw)
                return
            target = live[-1]
        self._loop.call_soon_threadsafe(lambda: asyncio.ensure_future(target.ws.send_str(raw)))

    def send_envelope(self, kind: str, payload: dict[str, Any], *, retry_attempt: int = 0,
                      envelope_id: str | None = None, accepts_response_payload: bool = False) -> str:
        envelope_id = envelope_id or uuid.uuid4().hex
        env = {"envelope_id": envelope_id, "type": kind, "payload": payload,
               "accepts_response_payload": accepts_response_payload}
        if kind == "events_api":
            env["retry_attempt"] = retry_attempt
            env["retry_reason"] = "timeout" if retry_attempt else ""
        with self._lock:
            self.sent_at[envelope_id] = time.time()
        self._send_raw(json.dumps(env))
        return envelope_id

    def send_event(self, event: dict[str, Any], *, event_id: str | None = None, retry_attempt: int = 0,
                   team: str | None = None) -> str:
        team = team or self.team_id
        payload = {"token": "verification-unused", "team_id": team, "api_app_id": "A0FAKE",
                   "event": event, "type": "event_callback", "event_id": event_id or f"Ev{uuid.uuid4().hex[:10]}",
                   "event_time": int(time.time()),
                   "authorizations": [{"enterprise_id": None, "team_id": team,
                                       "user_id": self.bot_user_id, "is_bot": True,
                                       "is_enterprise_install": False}]}
        return self.send_envelope("events_api", payload, retry_attempt=retry_attempt)

    def _deliver_event(self, event: dict[str, Any], team: str | None = None) -> None:
        if self._loop is not None:
            self.send_event(event, team=team)

    # ------------------------------------------------------------------ what users do
    def post_user_message(self, channel: str, user: str, text: str, *, thread_ts: str | None = None,
                          files: list[str] | None = None, team: str | None = None) -> tuple[str, list[str]]:
        """Store a user's message (in ``team``, default the fake's own) and deliver its events;
        returns (ts, envelope ids)."""
        im = channel.startswith("D")
        team = team or self.team_id
        with self._lock:
            ts = self._next_ts()
            msg: dict[str, Any] = {"type": "message", "user": user, "text": text, "ts": ts, "channel": channel,
                                   "team": team}
            if thread_ts:
                msg["thread_ts"] = thread_ts
            if files:
                msg["files"] = [self._file_object(self.files[f]) for f in files]
                msg["subtype"] = "file_share"
            self.messages.setdefault(channel, []).append(msg)
        envelopes = [self.send_event({**msg, "channel_type": "im" if im else "channel", "event_ts": ts}, team=team)]
        if not im and f"<@{self.bot_user_id}>" in text:
            mention = {k: v for k, v in msg.items() if k != "subtype"}
            envelopes.append(self.send_event({**mention, "type": "app_mention", "event_ts": ts}, team=team))
        return ts, envelopes

    def mention(self, channel: str, user: str, question: str, **kw: Any) -> tuple[str, list[str]]:
        return self.post_user_message(channel, user, f"<@{self.bot_user_id}> {question}", **kw)

    def slash(self, text: str, *, user: str = "U0ALICE", channel: str = "C0GENERAL",
              command: str = "/chapterverse") -> str:
        token = uuid.uuid4().hex
        payload = {"token": "verification-unused", "team_id": self.team_id, "team_domain": "fake",
                   "channel_id": channel, "channel_name": "general", "user_id": user, "user_name": user.lower(),
                   "command": command, "text": text, "api_app_id": "A0FAKE", "is_enterprise_install": "false",
                   "response_url": f"{self.base}/respond/{token}", "trigger_id": uuid.uuid4().hex}
        return self.send_envelope("slash_commands", payload, accepts_response_payload=True)

    def click(self, action_id: str, value: str, *, user: str, channel: str, message_ts: str,
              thread_ts: str | None = None) -> str:
        payload = {"type": "block_actions", "user": {"id": user, "username": user.lower(), "team_id": self.team_id},
                   "api_app_id": "A0FAKE", "token": "verification-unused", "team": {"id": self.team_id},
                   "channel": {"id": channel, "name": "general"}, "trigger_id": uuid.uuid4().hex,
                   "container": {"type": "message", "message_ts": message_ts, "channel_id": channel,
                                 "is_ephemeral": False, "thread_ts": thread_ts},
                   "message": {"ts": message_ts, "thread_ts": thread_ts},
                   "response_url": f"{self.base}/respond/{uuid.uuid4().hex}",
                   "actions": [{"action_id": action_id, "block_id": "feedback", "value": value, "type": "button",
                                "action_ts": str(time.time())}]}
        return self.send_envelope("interactive", payload)

    def add_file(self, name: str, data: bytes, *, mimetype: str = "application/pdf", user: str = "U0ALICE") -> str:
        fid = f"F{uuid.uuid4().hex[:10].upper()}"
        with self._lock:
            self.files[fid] = FakeFile(fid, name, data, mimetype, user)
        return fid

    def fail(self, method: str, error: str, times: int = 1, channel: str | None = None) -> None:
        """Make the next ``times`` calls of ``method`` (in ``channel``, if given) answer
        ``{"ok": false, "error": error}``."""
        with self._lock:
            self._failures[method] = [times, error, channel]

    def rate_limit(self, method: str, times: int = 1, retry_after: int = 1) -> None:
        with self._lock:
            self._rate_limits[method] = [times, retry_after]

    # ------------------------------------------------------------------ inspection
    def calls_to(self, method: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.method == method]

    def bot_messages(self, channel: str, thread_ts: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(m) for m in self.messages.get(channel, [])
                    if m.get("user") == self.bot_user_id and (thread_ts is None or m.get("thread_ts") == thread_ts)]

    def wait_ack(self, envelope_id: str, timeout: float = 10) -> Ack:
        wait_for(lambda: envelope_id in self.acks, timeout, f"ack of {envelope_id}")
        return self.acks[envelope_id]


def wait_for(predicate: Callable[[], Any], timeout: float, what: str = "condition", interval: float = 0.05) -> Any:
    """Poll until ``predicate()`` is truthy; return its value or fail with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeSlack]:
    """A fake Slack for the test module that imports this fixture (one server per module)."""
    f = FakeSlack().start()
    yield f
    f.stop()
