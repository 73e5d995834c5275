"""URLs people give the bot: which it may fetch, and how they are shown back.

``/chapterverse ingest <url>`` makes the bot's host fetch a URL, so by default it only fetches from
public internet addresses on the standard web ports: a host that is, or resolves to, a loopback,
private, link-local (cloud metadata), CGNAT, multicast or reserved address is refused, and so is an
IPv6 address that carries such an IPv4 address inside it (IPv4-mapped ``::ffff:a.b.c.d``, NAT64
``64:ff9b::/96`` and ``64:ff9b:1::/48``, 6to4 ``2002::/16``, Teredo ``2001::/32``, IPv4-compatible
``::a.b.c.d``): those reach the IPv4 address through a translator or tunnel, and Python's
``is_global`` calls several of them global. IPv4-translated addresses (``::ffff:0:a.b.c.d``,
``::ffff:0:0:0/96``, RFC 2765) are refused whatever they carry: Python calls them global, and they
only ever reach an IPv4 host through a translator. A port other than 80 or 443 is refused too. Setting
``CHAPTERVERSE_SLACK_ALLOW_PRIVATE_URLS`` lifts both rules. Slack's own file downloads are not
checked here.

URLs are shown and stored without user info, query string or fragment: those may carry tokens
(``retrieval.text.urls.shown_url``).
"""

from __future__ import annotations

import ipaddress
from ipaddress import IPv4Address, IPv6Address, ip_network
from urllib.parse import urlsplit

from retrieval.settings import Settings
from retrieval.text.urls import shown_url

_LOCAL_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")
WEB_PORTS = (80, 443)

_MAPPED = ip_network("::ffff:0:0/96")
_TRANSLATED = ip_network("::ffff:0:0:0/96")  # RFC 2765 IPv4-translated addresses (SIIT): never a public host
_COMPATIBLE = ip_network("::/96")  # deprecated IPv4-compatible addresses (::a.b.c.d)
_NAT64 = ip_network("64:ff9b::/96")  # RFC 6052 well-known prefix
_NAT64_LOCAL = ip_network("64:ff9b:1::/48")  # RFC 8215 local-use prefix
_6TO4 = ip_network("2002::/16")
_TEREDO = ip_network("2001::/32")


def _nat64_local(packed: bytes) -> list[IPv4Address]:
    """The IPv4 addresses an address in 64:ff9b:1::/48 may carry (RFC 6052 section 2.2: the
    operator's prefix may be /48, /56, /64 or /96 inside it). A format counts when its structure
    holds (the "u" octet, bits 64-71, is zero and the suffix after the IPv4 bits is zero; /96 always
    counts); an all-zero candidate is only kept when it is the only one."""
    b = packed
    found: list[IPv4Address] = []
    if b[8] == 0:
        if not any(b[11:]):
            found.append(IPv4Address(b[6:8] + b[9:11]))  # /48
        if not any(b[12:]):
            found.append(IPv4Address(b[7:8] + b[9:12]))  # /56
        if not any(b[13:]):
            found.append(IPv4Address(b[9:13]))  # /64
    found.append(IPv4Address(b[12:16]))  # /96
    nonzero = [a for a in found if int(a)]
    return list(dict.fromkeys(nonzero or found))


def embedded_ipv4(ip: IPv6Address) -> tuple[str, list[IPv4Address]] | None:
    """(the form, the IPv4 addresses it carries) when ``ip`` is an IPv6 form that reaches IPv4
    addresses through a translator or tunnel; None for an ordinary IPv6 address."""
    for form, prefix in (("IPv4-mapped", _MAPPED), ("IPv4-translated", _TRANSLATED), ("NAT64", _NAT64)):
        if ip in prefix:  # the IPv4 address in the last 32 bits
            return form, [IPv4Address(ip.packed[12:])]
    if ip in _NAT64_LOCAL:
        return "NAT64", _nat64_local(ip.packed)
    if ip in _6TO4:
        return "6to4", [IPv4Address(ip.packed[2:6])]
    if ip in _TEREDO:
        server, client = ip.teredo  # type: ignore[misc]  (the client address is stored inverted)
        return "Teredo", [client, server]
    if ip in _COMPATIBLE and int(ip) > 1:  # :: and ::1 are the unspecified and loopback addresses
        return "IPv4-compatible", [IPv4Address(ip.packed[12:])]
    return None


def _a(form: str) -> str:
    return f"an {form}" if form.startswith("IPv4") else f"a {form}"


def _global(ip: IPv4Address | IPv6Address) -> bool:
    return ip.is_global and not ip.is_multicast


def non_public(ip: IPv4Address | IPv6Address) -> str | None:
    """Why ``ip`` is not a public internet address the bot may connect to (e.g. "10.0.0.1 inside a
    Teredo address"), or None when it is. Pure."""
    if isinstance(ip, IPv6Address):
        wrapped = embedded_ipv4(ip)
        if wrapped is not None:
            form, inner = wrapped
            for v4 in inner:
                if not _global(v4):
                    return f"{v4} inside {_a(form)} address"
            if form in ("IPv4-mapped", "NAT64"):  # the prefix only says "through the translator"
                return None
            if form in ("Teredo", "IPv4-compatible", "IPv4-translated"):  # refused by policy: not globally
                return f"{_a(form)} address"  # reachable (RFC 6890), or only through a translator (RFC 2765)
    if not _global(ip):
        return str(ip)
    return None


def _polite(host: str, why: str | None = None) -> str:
    detail = f" ({why})" if why and why != host else ""
    return (f"Sorry, I only download from public internet addresses, and `{host}` is a private or local "
            f"network address{detail}. Share the PDF with me in a mention instead.")


def refusal(settings: Settings, url: str) -> str | None:
    """Why the bot will not fetch ``url`` (one line for the person who asked), or None if it may.

    Only what the URL itself says is checked here (an IP literal or a local name, the port: cheap
    enough for the socket thread). The addresses a name resolves to are checked by
    ``address_refusal`` at connect time, on the address actually connected to
    (``ingest.sources.fetch_url``).
    """
    if settings.slack.allow_private_urls:
        return None
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return f"Sorry, `{shown_url(url)}` is not a URL I can read."
    if not host:
        return f"Sorry, `{shown_url(url)}` has no host name."
    host = host.rstrip(".").lower()
    if host in _LOCAL_NAMES or host.endswith((".localhost", ".local", ".internal")):
        return _polite(host)
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        ip = None  # a name: its addresses are checked when connecting
    why = non_public(ip) if ip is not None else None
    if why:
        return _polite(host, why)
    if port is not None and port not in WEB_PORTS:
        return (f"Sorry, I only download from the standard web ports (80 and 443), and `{shown_url(url)}` uses "
                f"port {port}. Share the PDF with me in a mention instead.")
    return None


def address_refusal(settings: Settings, host: str, address: str) -> str | None:
    """Why the bot will not connect to ``address`` (what ``host`` resolved to), or None if it may."""
    if settings.slack.allow_private_urls:
        return None
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return _polite(host)
    return _polite(host) if non_public(ip) else None  # what a name resolved to is not told
