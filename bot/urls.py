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


def _polite(host: str) -> str:
    return (f"Sorry, I only download from public internet addresses, and `{host}` is a private or local "
            "network address. Share the PDF with me in a mention instead.")


def refusal(settings: Settings, url: str) -> str | None:
    """Why the bot will not fetch ``url`` (one line for the person who asked), or None if it may.

    Only what the URL itself says is checked here (an IP literal or a local name: cheap enough for
    the socket thread). The addresses a name resolves to are checked by ``address_refusal`` at
    connect time, on the address actually connected to (``ingest.sources.fetch_url``).
    """
    if settings.slack_allow_private_urls:
        return None
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018  (raises ValueError on a bad port)
    except ValueError:
        return f"Sorry, `{shown(url)}` is not a URL I can read."
    if not host:
        return f"Sorry, `{shown(url)}` has no host name."
    host = host.rstrip(".").lower()
    if host in _LOCAL_NAMES or host.endswith((".localhost", ".local", ".internal")):
        return _polite(host)
    try:
        return None if _public(ipaddress.ip_address(host.split("%", 1)[0])) else _polite(host)
    except ValueError:
        return None  # a name: its addresses are checked when connecting


def address_refusal(settings: Settings, host: str, address: str) -> str | None:
    """Why the bot will not connect to ``address`` (what ``host`` resolved to), or None if it may."""
    if settings.slack_allow_private_urls:
        return None
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return _polite(host)
    return None if _public(ip) else _polite(host)
