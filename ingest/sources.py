"""Turn what the user named (files, directories, http(s) URLs) into PDF bytes, or one clear error."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

import httpx


class InputError(ValueError):
    """Bad input: the message is one line that says what is wrong with which input."""


@dataclass(frozen=True)
class Source:
    name: str  # file name as ingested (the document's name)
    origin: str  # the path or URL the user gave
    data: bytes
    url: str | None  # http(s) URL the document can be opened at, if any

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
    return arg.startswith(("http://", "https://"))


def _check_bytes(name: str, data: bytes, limit: int) -> None:
    if not data:
        raise InputError(f"{name}: empty file (0 bytes)")
    if len(data) > limit:
        raise InputError(f"{name}: {len(data) / 1e6:.1f} MB is over the {limit / 1e6:.0f} MB limit "
                         "(CHAPTERVERSE_MAX_FILE_MB)")
    if not data.lstrip()[:5].startswith(b"%PDF-"):
        raise InputError(f"{name}: not a PDF (no %PDF- header)")


def read_path(arg: str, limit: int) -> Source:
    p = Path(arg).expanduser()
    if arg.endswith("/") and p.is_dir():
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


def _name_from_response(url: str, resp: httpx.Response) -> str:
    cd = resp.headers.get("content-disposition", "")
    m = re.search(r"filename\*?=(?:UTF-8'')?\"?([^\";]+)\"?", cd, re.I)
    if m:
        name = Path(unquote(m.group(1))).name
    else:
        name = Path(unquote(urlsplit(str(resp.url)).path)).name or "document"
    if not name.lower().endswith(".pdf"):
        name += ".pdf"
    return name


def fetch_url(url: str, limit: int, timeout_s: float, headers: dict[str, str] | None = None,
              check_url: Callable[[str], str | None] | None = None) -> Source:
    """Download a PDF, refusing bodies over ``limit`` bytes without reading them whole.

    ``check_url`` sees every URL requested, redirects included, and returns why it must not be
    fetched (or None); the Slack bot uses it to keep downloads off private networks."""

    def vet(request: httpx.Request) -> None:
        reason = check_url(str(request.url)) if check_url else None
        if reason:
            raise InputError(reason)

    try:
        with httpx.Client(follow_redirects=True, timeout=timeout_s, headers=headers or {},
                          event_hooks={"request": [vet]}) as client, \
                client.stream("GET", url) as resp:
            if resp.status_code >= 400:
                raise InputError(f"{url}: download failed: HTTP {resp.status_code}")
            try:
                declared = int(resp.headers.get("content-length") or 0)
            except ValueError:
                declared = 0  # a malformed length: the streamed size check below still applies
            if declared > limit:
                raise InputError(f"{url}: {declared / 1e6:.1f} MB is over the {limit / 1e6:.0f} MB limit "
                                 "(CHAPTERVERSE_MAX_FILE_MB)")
            buf = bytearray()
            for part in resp.iter_bytes():
                buf.extend(part)
                if len(buf) > limit:
                    raise InputError(f"{url}: over the {limit / 1e6:.0f} MB limit (CHAPTERVERSE_MAX_FILE_MB)")
            name = _name_from_response(url, resp)
    except httpx.TimeoutException as exc:
        raise InputError(f"{url}: download failed: timed out after {timeout_s:.0f} s") from exc
    except httpx.InvalidURL as exc:
        raise InputError(f"{url}: not a valid URL ({exc})") from exc
    except httpx.HTTPError as exc:
        raise InputError(f"{url}: download failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")) from exc
    data = bytes(buf)
    _check_bytes(url, data, limit)
    return Source(name, url, data, url)


def load(arg: str, limit: int, timeout_s: float) -> Source:
    return fetch_url(arg, limit, timeout_s) if is_url(arg) else read_path(arg, limit)
