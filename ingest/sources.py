"""Turn what the user named (files, directories, http(s) URLs) into PDF bytes, or one clear error."""

from __future__ import annotations

import hashlib
import math
import re
import socket
import threading
import time
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

import httpcore

from retrieval.text.urls import redact_urls, shown_url


class InputError(ValueError):
    """Bad input: the message is one line that says what is wrong with which input."""


HEADER_WINDOW = 1024  # PDF readers look for the %PDF- header within the first 1024 bytes (Acrobat's rule)


def readable(text: str) -> str:
    """``text`` as a name may be shown and stored: each byte of a file name that was not UTF-8 (kept
    by Python as a lone surrogate, which neither the database nor a UTF-8 terminal takes) is U+FFFD,
    and NUL, line breaks and the other control characters are gone."""
    return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text
                   if unicodedata.category(c) != "Cc").strip()


@dataclass(frozen=True)
class Source:
    name: str  # file name as ingested (the document's name)
    origin: str  # the path or URL the user gave
    data: bytes
    url: str | None  # http(s) URL the document can be opened at, if any

    def __post_init__(self) -> None:  # every way in (a path, a download, a Slack file) stores readable names
        object.__setattr__(self, "name", readable(self.name) or "document.pdf")
        object.__setattr__(self, "origin", readable(self.origin))

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


def expand(args: list[str]) -> Iterator[str]:
    """Directories expand to the PDFs inside them (recursively, sorted); other args pass through."""
    for arg in args:
        p = Path(arg).expanduser()
        if not is_url(arg) and p.is_dir():
            found = sorted(x for x in p.rglob("*") if x.is_file() and x.suffix.lower() == ".pdf")
            if not found:
                yield f"{arg}{'' if arg.endswith('/') else '/'}"  # reported as "no PDFs in directory"
            yield from (str(x) for x in found)
        else:
            yield arg


def is_url(arg: str) -> bool:
    """An http(s) URL, the scheme in any case (``HTTP://host/x.pdf`` is a URL, not a path)."""
    return arg[:8].lower().startswith(("http://", "https://"))


def _check_bytes(name: str, data: bytes, limit: int) -> None:
    if not data:
        raise InputError(f"{name}: empty file (0 bytes)")
    if len(data) > limit:
        raise InputError(f"{name}: {len(data) / 1e6:.1f} MB is over the {limit / 1e6:.0f} MB limit "
                         "(CHAPTERVERSE_MAX_FILE_MB)")
    if header_offset(data) is None:
        raise InputError(f"{name}: not a PDF (no %PDF- header in its first {HEADER_WINDOW:,} bytes)")


def header_offset(data: bytes) -> int | None:
    """Where the %PDF- header starts, when it does within ``HEADER_WINDOW`` bytes (what comes before it,
    a mail gateway's or a web server's junk, PDF readers skip); None otherwise."""
    at = data.find(b"%PDF-", 0, HEADER_WINDOW + 5)
    return at if at >= 0 else None


def read_path(given: str, limit: int) -> Source:
    arg = readable(given)  # what messages name: a name with bytes that are not UTF-8 is still shown
    p = Path(given).expanduser()
    if given.endswith("/") and p.is_dir():
        raise InputError(f"{arg}: no PDF files in this directory")
    if not p.exists():
        raise InputError(f"{arg}: no such file")
    if not p.is_file():
        raise InputError(f"{arg}: not a regular file")
    size = p.stat().st_size
    if size > limit:
        raise InputError(f"{arg}: {size / 1e6:.1f} MB is over the {limit / 1e6:.0f} MB limit "
                         "(CHAPTERVERSE_MAX_FILE_MB)")
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise InputError(f"{arg}: cannot read: {exc.strerror}") from exc
    _check_bytes(arg, data, limit)
    return Source(p.name, str(p.resolve()), data, None)


def _name_from_response(url: str, headers: dict[str, str]) -> str:
    cd = headers.get("content-disposition", "")
    m = re.search(r"filename\*?=(?:UTF-8'')?\"?([^\";]+)\"?", cd, re.I)
    name = readable(Path(unquote(m.group(1))).name if m else Path(unquote(urlsplit(url).path)).name) or "document"
    if not name.lower().endswith(".pdf"):
        name += ".pdf"
    return name


AddressCheck = Callable[[str, str], "str | None"]  # (host, resolved IP) -> why not, or None
MAX_REDIRECTS = 5


class _Refused(Exception):
    """A connection was refused by the address check (carried out of httpcore as the cause)."""


class _PinnedBackend(httpcore.SyncBackend):
    """Resolves each host once, checks every address it resolves to, and connects to the checked
    address itself: what was vetted is what is connected to (no second lookup a rebinding DNS
    server could answer differently). Every socket opened is remembered so the download's total
    deadline can cut it, even in the middle of a slow-drip read."""

    def __init__(self, check_address: AddressCheck | None) -> None:
        self._check = check_address
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self.expired = False
        self.refusal: str | None = None
        self.connected: list[tuple[str, str, int]] = []  # (host, address, port), for logs and tests

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}") from exc
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
        for address in addresses:
            why = self._check(host, address) if self._check else None
            if why:
                self.refusal = why
                raise httpcore.ConnectError("address refused")
        last: Exception | None = None
        for address in addresses:
            with self._lock:
                if self.expired:
                    raise httpcore.ReadTimeout("deadline passed")
            try:  # an IP literal: connecting does not resolve anything again
                stream = super().connect_tcp(address, port, timeout, local_address, socket_options)
            except httpcore.ConnectError as exc:
                last = exc
                continue
            sock = stream.get_extra_info("socket")
            with self._lock:
                self._sockets.append(sock)
                expired = self.expired
            if expired:
                stream.close()
                raise httpcore.ReadTimeout("deadline passed")
            self.connected.append((host, address, port))
            return stream
        raise httpcore.ConnectError(f"cannot connect to {host}: {last}")

    def expire(self) -> None:
        """The deadline passed: cut every connection (a blocked read returns at once)."""
        with self._lock:
            self.expired = True
            sockets = list(self._sockets)
        for sock in sockets:
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be downloaded, for people ("port 99999 is out of range 1-65535"), or None
    (pure: nothing is resolved or connected to)."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # "Invalid IPv6 URL"
        return str(exc)[:1].lower() + str(exc)[1:]
    if parts.scheme.lower() not in ("http", "https"):
        return "only http and https"
    if not parts.hostname:
        return "no host"
    try:
        port = parts.port
    except ValueError:
        port = -1
    if port is not None and not 1 <= port <= 65535:
        given = parts.netloc.rsplit("@", 1)[-1].rsplit("]", 1)[-1].rpartition(":")[2]
        return f"port {given} is out of range 1-65535" if given.isdigit() else f"port {given!r} is not a number"
    return None


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port


def fetch_url(url: str, limit: int, timeout_s: float, headers: dict[str, str] | None = None,
              check_url: Callable[[str], str | None] | None = None,
              check_address: AddressCheck | None = None) -> Source:
    """Download a PDF within ``timeout_s`` seconds in total, refusing bodies over ``limit`` bytes
    without reading them whole.

    ``timeout_s`` is a deadline for the whole download, redirects included: a server that sends a
    byte now and then cannot hold it longer. ``check_url`` sees every URL requested, redirects
    included; ``check_address`` sees every address a host resolves to, and the connection goes to
    that same address (each returns why it must not be fetched, or None). The Slack bot uses them to
    keep downloads off private networks. Environment proxies are not used: the address connected
    to is the address checked.
    """
    shown = readable(shown_url(url))  # what messages and the stored document carry: never the query string
    backend = _PinnedBackend(check_address)
    deadline = time.monotonic() + timeout_s
    timer = threading.Timer(timeout_s, backend.expire)
    timer.daemon = True
    if math.isfinite(timeout_s):  # an infinite one (CHAPTERVERSE_DOWNLOAD_TIMEOUT_S=inf) means no deadline
        timer.start()
    try:
        with httpcore.ConnectionPool(network_backend=backend, max_connections=2) as pool:
            data, name = _get(pool, url, dict(headers or {}), limit, deadline, timeout_s, check_url)
    except httpcore.TimeoutException as exc:
        raise InputError(f"{shown}: download failed: took longer than {timeout_s:.0f} s") from exc
    except httpcore.UnsupportedProtocol as exc:
        raise InputError(f"{shown}: not a valid URL ({redact_urls(str(exc))})") from exc
    except (httpcore.ConnectError, httpcore.NetworkError, httpcore.ProtocolError) as exc:
        if backend.refusal:
            raise InputError(backend.refusal) from exc
        if backend.expired:
            raise InputError(f"{shown}: download failed: took longer than {timeout_s:.0f} s") from exc
        detail = redact_urls(str(exc).splitlines()[0]) if str(exc) else ""
        raise InputError(f"{shown}: download failed: {type(exc).__name__}: {detail}".rstrip(": ")) from exc
    finally:
        timer.cancel()
    if backend.expired:
        raise InputError(f"{shown}: download failed: took longer than {timeout_s:.0f} s")
    _check_bytes(shown, data, limit)
    return Source(name, shown, data, shown)


def _get(pool: httpcore.ConnectionPool, url: str, headers: dict[str, str], limit: int, deadline: float,
         timeout_s: float, check_url: Callable[[str], str | None] | None) -> tuple[bytes, str]:
    """GET ``url`` following up to MAX_REDIRECTS redirects; (body, file name)."""
    for _ in range(MAX_REDIRECTS + 1):
        reason = check_url(url) if check_url else None
        if reason:
            raise InputError(redact_urls(reason))
        shown = readable(shown_url(url))
        if (problem := url_problem(url)) is not None:  # the URL given, and each redirect's
            raise InputError(f"{shown}: not a valid URL ({problem})")
        left = max(0.001, deadline - time.monotonic())
        per_step = min(timeout_s, left) if math.isfinite(timeout_s) else None  # None: no timeout (sockets take no inf)
        ext = {"timeout": {"connect": per_step, "read": per_step, "write": per_step, "pool": per_step}}
        with pool.stream("GET", url, headers=list(headers.items()), extensions=ext) as resp:
            got = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in resp.headers}
            if resp.status in (301, 302, 303, 307, 308) and "location" in got:
                nxt = urljoin(url, got["location"])
                if _origin(nxt) != _origin(url):
                    headers.pop("Authorization", None)  # credentials stay with the origin they were for
                url = nxt
                continue
            if resp.status >= 400:
                raise InputError(f"{shown}: download failed: HTTP {resp.status}")
            try:
                declared = int(got.get("content-length") or 0)
            except ValueError:
                declared = 0  # a malformed length: the streamed size check below still applies
            if declared > limit:
                raise InputError(f"{shown}: {declared / 1e6:.1f} MB is over the {limit / 1e6:.0f} MB limit "
                                 "(CHAPTERVERSE_MAX_FILE_MB)")
            buf = bytearray()
            for part in resp.iter_stream():
                buf.extend(part)
                if len(buf) > limit:
                    raise InputError(f"{shown}: over the {limit / 1e6:.0f} MB limit (CHAPTERVERSE_MAX_FILE_MB)")
                if time.monotonic() > deadline:
                    raise httpcore.ReadTimeout("deadline passed")
            return bytes(buf), _name_from_response(url, got)
    raise InputError(f"{shown_url(url)}: download failed: more than {MAX_REDIRECTS} redirects")


def load(arg: str, limit: int, timeout_s: float) -> Source:
    return fetch_url(arg, limit, timeout_s) if is_url(arg) else read_path(arg, limit)
