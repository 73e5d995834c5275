"""URL downloads (ingest.sources.fetch_url) against local servers: the address checked is the address
connected to (no DNS rebinding), redirects are checked again, and the deadline covers the whole
download (a slow-drip server cannot hold a job).

"Public" addresses cannot be used here (no traffic leaves 127.0.0.0/8), so these tests stand
127.0.0.1 in for a public address and 127.0.0.2 for a private one, with an address check that
allows only the first; the bot's own policy (``bot.urls.address_refusal``) is tested on the real
addresses.
"""

from __future__ import annotations

import http.server as hs
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from bot import urls
from ingest.sources import InputError, fetch_url
from retrieval.settings import Settings

PUBLIC, PRIVATE = "127.0.0.1", "127.0.0.2"


def _pdf(tag: str) -> bytes:
    return b"%PDF-1.4\n% " + tag.encode() + b"\n" + b"0" * 200 + b"\n%%EOF\n"


class Site:
    """A small HTTP server on one address; records the requests it saw."""

    def __init__(self, address: str, port: int, routes: dict[str, tuple[int, dict[str, str], bytes]],
                 drip: bool = False) -> None:
        self.requests: list[dict[str, str]] = []
        site = self

        class Handler(hs.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                site.requests.append({"path": self.path, "host": self.headers.get("Host", ""),
                                      "authorization": self.headers.get("Authorization", "")})
                if drip:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/pdf")
                    self.end_headers()
                    try:
                        self.wfile.write(b"%PDF-1.4\n")
                        for _ in range(600):  # one byte every 0.1 s: each read is quick, the whole is not
                            time.sleep(0.1)
                            self.wfile.write(b"0")
                            self.wfile.flush()
                    except OSError:
                        pass
                    return
                status, headers, body = routes.get(self.path.split("?")[0], (404, {}, b"missing"))
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = hs.ThreadingHTTPServer((address, port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def two_sites(public_routes: dict, private_routes: dict, drip: bool = False) -> Iterator[tuple[Site, Site]]:
    """The same port on the 'public' and the 'private' address."""
    for _ in range(20):
        a = Site(PUBLIC, 0, public_routes, drip=drip)
        try:
            b = Site(PRIVATE, a.port, private_routes)
            break
        except OSError:
            a.close()
    else:
        pytest.skip("no port free on both loopback addresses")
    try:
        yield a, b
    finally:
        a.close()
        b.close()


@pytest.fixture
def dns(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """Names the fake resolver knows: each lookup of a name pops its next answer (the last repeats)."""
    answers: dict[str, list[str]] = {}
    real = socket.getaddrinfo

    def fake(host: str, port: object, *args: object, **kw: object) -> list:
        if host in answers:
            seq = answers[host]
            ip = seq.pop(0) if len(seq) > 1 else seq[0]
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, int(port)))]  # type: ignore[call-overload]
        return real(host, port, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    return answers


def only_public(host: str, address: str) -> str | None:
    return None if address == PUBLIC else f"refused {host} at {address}"


def test_rebinding_name_is_fetched_from_the_address_that_was_checked(dns: dict[str, list[str]]) -> None:
    """The name answers 'public' to the check, then 'private' to any later lookup: the download
    still comes from the checked address, and the private server never sees a request."""
    with two_sites({"/h.pdf": (200, {}, _pdf("public"))}, {"/h.pdf": (200, {}, _pdf("PRIVATE"))}) as (a, b):
        dns["rebind.example"] = [PUBLIC, PRIVATE]
        src = fetch_url(f"http://rebind.example:{a.port}/h.pdf", 10**6, 10, check_address=only_public)
        assert b"public" in src.data and b"PRIVATE" not in src.data
        assert a.requests[0]["host"] == f"rebind.example:{a.port}"  # the name, not the address, is sent
        assert b.requests == []
        # a second download resolves afresh: now the name points at the private address and is refused
        with pytest.raises(InputError, match="refused rebind.example at 127.0.0.2"):
            fetch_url(f"http://rebind.example:{a.port}/h.pdf", 10**6, 10, check_address=only_public)
        assert b.requests == []


def test_redirect_to_a_private_address_is_refused_before_connecting(dns: dict[str, list[str]]) -> None:
    dns["files.example"] = [PUBLIC]
    dns["intranet.example"] = [PRIVATE]
    routes: dict = {}
    with two_sites(routes, {"/secret.pdf": (200, {}, _pdf("secret"))}) as (a, b):
        routes["/start.pdf"] = (302, {"Location": f"http://intranet.example:{a.port}/secret.pdf"}, b"")
        with pytest.raises(InputError, match="refused intranet.example"):
            fetch_url(f"http://files.example:{a.port}/start.pdf", 10**6, 10, check_address=only_public)
        assert [r["path"] for r in a.requests] == ["/start.pdf"] and b.requests == []


def test_credentials_do_not_follow_a_redirect_to_another_host(dns: dict[str, list[str]]) -> None:
    dns["slack-files.example"] = [PUBLIC]
    dns["cdn.example"] = [PUBLIC]
    routes = {"/file.pdf": (302, {"Location": "/f2.pdf"}, b""), "/f2.pdf": (200, {}, _pdf("ok"))}
    with two_sites(routes, {}) as (a, _):
        routes["/away.pdf"] = (302, {"Location": f"http://cdn.example:{a.port}/f2.pdf"}, b"")
        fetch_url(f"http://slack-files.example:{a.port}/file.pdf", 10**6, 10, headers={"Authorization": "Bearer t"})
        fetch_url(f"http://slack-files.example:{a.port}/away.pdf", 10**6, 10, headers={"Authorization": "Bearer t"})
    auth = [(r["path"], r["authorization"]) for r in a.requests]
    assert auth == [("/file.pdf", "Bearer t"), ("/f2.pdf", "Bearer t"),  # same origin: kept
                    ("/away.pdf", "Bearer t"), ("/f2.pdf", "")]  # another host: dropped


def test_slow_drip_server_is_cut_at_the_total_deadline() -> None:
    site = Site(PUBLIC, 0, {}, drip=True)
    try:
        t0 = time.monotonic()
        with pytest.raises(InputError, match="took longer than 2 s"):
            fetch_url(f"http://{PUBLIC}:{site.port}/slow.pdf", 10**6, 2.0)
        took = time.monotonic() - t0
    finally:
        site.close()
    assert 1.9 < took < 10.0, took  # per-read timeouts alone would have let it run for a minute (slack: a loaded CI machine)


def test_bot_policy_refuses_private_addresses_a_public_name_resolves_to(dns: dict[str, list[str]]) -> None:
    strict = Settings(slack={"allow_private_urls": False})
    dns["sneaky.example"] = ["10.1.2.3"]
    url = "http://sneaky.example/a.pdf"
    assert urls.refusal(strict, url) is None  # a name: decided when connecting, on the address connected to
    with pytest.raises(InputError, match="only download from public internet addresses"):
        fetch_url(url, 10**6, 5, check_url=lambda u: urls.refusal(strict, u),
                  check_address=lambda h, ip: urls.address_refusal(strict, h, ip))
    for address in ("127.0.0.1", "169.254.169.254", "10.0.0.1", "192.168.1.1", "::1", "fc00::1", "::ffff:127.0.0.1"):
        assert urls.address_refusal(strict, "x", address), address
    assert urls.address_refusal(strict, "x", "93.184.216.34") is None
    assert urls.address_refusal(Settings(slack={"allow_private_urls": True}), "x", "127.0.0.1") is None
