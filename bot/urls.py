"""URLs people give the bot: which it may fetch, and how they are shown back.

``/chapterverse ingest <url>`` makes the bot's host fetch a URL, so by default it only fetches from
public internet addresses: a host that is, or resolves to, a loopback, private, link-local (cloud
metadata), CGNAT, multicast or reserved address is refused, unless
``CHAPTERVERSE_SLACK_ALLOW_PRIVATE_URLS`` is set. Slack's own file downloads are not checked here.

URLs are shown without user info, query string or fragment: those may carry tokens.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from urllib.parse import urlsplit, urlunsplit

from retrieval.settings import Settings

_URL_TAIL = re.compile(r"(https?://[^\s?#<>|`'\"]+)[?#][^\s<>|`'\"]*?([:.,;)]?)(?=[\s<>|`'\"]|$)")
_LOCAL_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")


def shown(url: str) -> str:
    """The URL as shown to people: scheme, host, port and path only."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc.rsplit("@", 1)[-1]
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    except ValueError:
        return _URL_TAIL.sub(r"\1\2", url)


def redact(text: str) -> str:
    """``text`` with the query string and fragment of every http(s) URL in it removed."""
    return _URL_TAIL.sub(r"\1\2", text)


def _public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def refusal(settings: Settings, url: str, *, resolve: bool = True) -> str | None:
    """Why the bot will not fetch ``url`` (one line for the person who asked), or None if it may.

    With ``resolve=False`` only what the URL itself says is checked (an IP literal or a local name:
    cheap enough for the socket thread); with ``resolve=True`` every address the host resolves to
    must be public.
    """
    if settings.slack_allow_private_urls:
        return None
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return f"Sorry, `{shown(url)}` is not a URL I can read."
    if not host:
        return f"Sorry, `{shown(url)}` has no host name."
    polite = (f"Sorry, I only download from public internet addresses, and `{host}` is a private or local "
              "network address. Share the PDF with me in a mention instead.")
    host = host.rstrip(".").lower()
    if host in _LOCAL_NAMES or host.endswith((".localhost", ".local", ".internal")):
        return polite
    try:
        return None if _public(ipaddress.ip_address(host.split("%", 1)[0])) else polite
    except ValueError:
        pass  # a name, not an address
    if not resolve:
        return None
    try:
        infos = socket.getaddrinfo(host, port or (443 if parts.scheme == "https" else 80), type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return f"Sorry, I can't find the host `{host}`; please check the link."
    for info in infos:
        try:
            ip = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        except ValueError:
            return polite
        if not _public(ip):
            return polite
    return None
