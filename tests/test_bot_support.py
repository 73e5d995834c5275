"""Support for the bot tests (no tests here). Run the real bot as a subprocess against the fake Slack, with a database link the test can cut.

``PgProxy`` forwards 127.0.0.1:PORT to the test Postgres (Unix socket or TCP). ``down()`` closes
every open connection and refuses new ones (what a bot sees when its database dies); ``up()`` lets
connections through again. ``BotProcess`` starts ``python -m bot -v`` with the fake's URL and tokens.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import psycopg

from tests.fake_slack import FakeSlack, wait_for

ROOT = Path(__file__).resolve().parent.parent


class PgProxy:
    def __init__(self, target_url: str) -> None:
        info = psycopg.conninfo.conninfo_to_dict(target_url)
        host, port = str(info.get("host") or "/tmp"), int(info.get("port") or 5432)
        self._target: tuple[int, Any] = ((socket.AF_UNIX, f"{host}/.s.PGSQL.{port}") if host.startswith("/")
                                         else (socket.AF_INET, (host, port)))
        self._info = {k: v for k, v in info.items() if k not in ("host", "port", "hostaddr")}
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._up = True
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True, name="pg-proxy").start()

    @property
    def url(self) -> str:
        user, dbname = self._info.get("user") or "postgres", self._info.get("dbname") or "postgres"
        return f"postgresql://{user}@127.0.0.1:{self.port}/{dbname}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if not self._up:
                client.close()
                continue
            upstream = socket.socket(self._target[0], socket.SOCK_STREAM)
            try:
                upstream.connect(self._target[1])
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def down(self) -> None:
        self._up = False
        with self._lock:
            socks, self._open = self._open, []
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass

    def up(self) -> None:
        self._up = True

    def close(self) -> None:
        self.down()
        self._listener.close()


class BotProcess:
    def __init__(self, fake: FakeSlack, env: dict[str, str], log_path: Path) -> None:
        self.fake, self.env, self.log_path = fake, env, log_path
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, wait_models: bool = True, wait_connected: bool = True) -> BotProcess:
        """The bot started, once connected over Socket Mode (or, without ``wait_connected``, once its
        WebSocket upgrade has reached the fake) and, with ``wait_models``, its models loaded."""
        opened, begun = self.fake.connections_opened, self.fake.handshakes_begun
        full = {**os.environ, **self.fake.env(), **self.env}
        for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
            full.pop(var, None)
        full["NO_PROXY"] = "127.0.0.1,localhost"
        self._log = open(self.log_path, "ab")  # noqa: SIM115  (closed in stop)
        self._offset = self.log_path.stat().st_size
        self.proc = subprocess.Popen([sys.executable, "-m", "bot", "-v"], cwd=ROOT, env=full,
                                     stdout=self._log, stderr=subprocess.STDOUT)
        if not wait_connected:
            wait_for(lambda: self.fake.handshakes_begun > begun or self._dead(), 90,
                     "the bot to begin its Socket Mode handshake")
            assert not self._dead(), self.log()
            return self
        wait_for(lambda: self.fake.connections_opened > opened and self.fake.live_sockets() > 0 or self._dead(),
                 90, "the bot to connect over Socket Mode")
        assert not self._dead(), self.log()
        if wait_models:
            wait_for(lambda: "models loaded" in self.log() or self._dead(), 180, "the bot to load its models")
            assert not self._dead(), self.log()
        return self

    def _dead(self) -> bool:
        return self.proc is not None and self.proc.poll() is not None

    def log(self) -> str:
        return self.log_path.read_bytes()[self._offset:].decode(errors="replace")

    def stop(self, timeout: float = 30) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            code = -9
        self._log.close()
        return code


def wait_reply(fake: FakeSlack, channel: str, thread_ts: str, timeout: float = 120, count: int = 1) -> list[dict]:
    """The bot's finished messages in a thread (placeholders replaced), once there are ``count``."""

    def done() -> list[dict] | None:
        msgs = [m for m in fake.bot_messages(channel, thread_ts) if not m["text"].startswith("Looking through")]
        return msgs if len(msgs) >= count else None

    return wait_for(done, timeout, f"the bot's reply in {channel}/{thread_ts}")
