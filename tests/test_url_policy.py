"""The bot's URL policy (bot.urls), pure functions: private IPv4 addresses wrapped in IPv6 forms
(IPv4-mapped, NAT64, 6to4, Teredo, IPv4-compatible) are refused like the bare addresses, ports other
than 80/443 need CHAPTERVERSE_SLACK_ALLOW_PRIVATE_URLS, and URLs are shown without their query."""

from __future__ import annotations

import socket
from ipaddress import ip_address

import pytest

from bot import urls
from ingest.sources import InputError, fetch_url, redact_urls, shown_url
from retrieval.settings import Settings

STRICT = Settings(slack={"allow_private_urls": False})
OPEN = Settings(slack={"allow_private_urls": True})


@pytest.mark.parametrize(("address", "inner", "form"), [
    ("::ffff:127.0.0.1", "127.0.0.1", "IPv4-mapped"),
    ("::ffff:a9fe:a9fe", "169.254.169.254", "IPv4-mapped"),
    ("64:ff9b::a9fe:a9fe", "169.254.169.254", "NAT64"),  # well-known prefix, /96
    ("64:ff9b::10.0.0.1", "10.0.0.1", "NAT64"),
    ("64:ff9b:1::a9fe:a9fe", "169.254.169.254", "NAT64"),  # local-use prefix, /96 format
    ("64:ff9b:1:a9fe:a9:fe00::", "169.254.169.254", "NAT64"),  # local-use prefix, /48 format (u octet skipped)
    ("64:ff9b:1:c0:a8:101::", "192.168.1.1", "NAT64"),  # /56 format
    ("2002:a9fe:a9fe::1", "169.254.169.254", "6to4"),
    ("2002:7f00:1::", "127.0.0.1", "6to4"),
    ("2001:0:4136:e378:8000:63bf:f5ff:fffe", "10.0.0.1", "Teredo"),  # client 10.0.0.1, stored inverted
    ("::7f00:1", "127.0.0.1", "IPv4-compatible"),
])
def test_private_ipv4_inside_an_ipv6_form_is_refused(address: str, inner: str, form: str) -> None:
    why = urls.non_public(ip_address(address))
    assert why is not None and inner in why and form in why, why
    assert urls.address_refusal(STRICT, "files.example", address)  # what a name resolves to
    literal = urls.refusal(STRICT, f"http://[{address}]/m.pdf")  # an IP literal in the URL
    assert literal and "only download from public internet addresses" in literal and inner in literal, literal
    assert urls.address_refusal(OPEN, "files.example", address) is None  # the private-URL setting allows it
    assert urls.refusal(OPEN, f"http://[{address}]/m.pdf") is None


@pytest.mark.parametrize("address", ["8.8.8.8", "93.184.216.34", "2606:4700::1111", "::ffff:8.8.8.8",
                                     "64:ff9b::8.8.8.8", "64:ff9b:1::808:808", "2002:808:808::1"])
def test_public_addresses_and_public_ipv4_inside_translation_forms_are_allowed(address: str) -> None:
    assert urls.non_public(ip_address(address)) is None
    assert urls.address_refusal(STRICT, "files.example", address) is None


@pytest.mark.parametrize("address", ["127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.0.1", "169.254.169.254",
                                     "100.64.0.1", "0.0.0.0", "224.0.0.1", "255.255.255.255", "::1", "::",
                                     "fe80::1", "fc00::1", "ff02::1",
                                     "2001:0:4136:e378:8000:63bf:f7f7:f7f7"])  # Teredo: never global
def test_bare_private_loopback_link_local_and_reserved_addresses_are_refused(address: str) -> None:
    assert urls.non_public(ip_address(address)) is not None
    assert urls.address_refusal(STRICT, "files.example", address)


def test_ports_other_than_80_and_443_need_the_private_url_setting() -> None:
    for url in ("https://files.example/m.pdf", "http://files.example:80/m.pdf", "https://files.example:443/m.pdf",
                "http://8.8.8.8/m.pdf"):
        assert urls.refusal(STRICT, url) is None, url
    for url in ("http://files.example:8080/m.pdf", "https://files.example:22/m.pdf", "http://8.8.8.8:6379/m.pdf",
                "https://files.example:8443/m.pdf?X-Amz-Signature=secret"):
        why = urls.refusal(STRICT, url)
        assert why and "standard web ports (80 and 443)" in why, url
        assert "secret" not in why
        assert urls.refusal(OPEN, url) is None


def test_a_name_resolving_to_a_nat64_private_address_is_refused_before_connecting(
        monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    real = socket.getaddrinfo

    def fake(host: str, port: object, *args: object, **kw: object) -> list:
        if host == "metadata.example":
            asked.append(host)
            return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("64:ff9b::a9fe:a9fe", int(port), 0, 0))]  # type: ignore[call-overload]
        return real(host, port, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    with pytest.raises(InputError, match="only download from public internet addresses"):
        fetch_url("http://metadata.example/latest/m.pdf", 10**6, 5, check_url=lambda u: urls.refusal(STRICT, u),
                  check_address=lambda h, ip: urls.address_refusal(STRICT, h, ip))
    assert asked == ["metadata.example"]


def test_urls_are_shown_and_stored_without_query_fragment_or_user_info() -> None:
    assert shown_url("https://bucket.example/m.pdf?X-Amz-Signature=secret&X-Amz-Credential=k#page=3") == \
        "https://bucket.example/m.pdf"
    assert shown_url("https://user:pw@files.example:8443/a/b.pdf?token=secret") == "https://files.example:8443/a/b.pdf"
    text = "download of https://user:pw@b.example/m.pdf?X-Amz-Signature=secret failed, see http://x.example/?a=1."
    assert redact_urls(text) == "download of https://b.example/m.pdf failed, see http://x.example/."
    assert shown_url("http://127.0.0.1:9/m.pdf?sig=secret") == "http://127.0.0.1:9/m.pdf"


# issue 32, item 5 ------------------------------------------------------------------------------

@pytest.mark.parametrize("address", ["::ffff:0:7f00:1", "::ffff:0:a9fe:a9fe", "::ffff:0:808:808", "::ffff:0:0:0"])
def test_ipv4_translated_addresses_are_refused_by_policy(address: str) -> None:
    """``::ffff:0:0:0/96`` (RFC 2765): Python calls ``::ffff:0:7f00:1`` global; it reaches 127.0.0.1
    through a translator. Refused whatever it carries, by the policy, not at connect time."""
    why = urls.non_public(ip_address(address))
    assert why is not None and "IPv4-translated" in why, why
    assert urls.address_refusal(STRICT, "files.example", address)
    literal = urls.refusal(STRICT, f"http://[{address}]/m.pdf")
    assert literal and "only download from public internet addresses" in literal, literal
    assert urls.refusal(OPEN, f"http://[{address}]/m.pdf") is None


def test_an_upper_case_scheme_is_a_url_and_its_query_is_never_echoed(settings, tmp_path) -> None:
    from ingest.sources import is_url  # noqa: PLC0415
    from tests.conftest import run_cli  # noqa: PLC0415

    assert is_url("HTTP://files.example/x.pdf") and is_url("Https://files.example/x.pdf")
    assert redact_urls("see HTTP://files.example/x.pdf?sig=secret now") == "see HTTP://files.example/x.pdf now"
    assert urls.refusal(STRICT, "HTTP://127.0.0.1/x.pdf?sig=secret") is not None
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = run_cli("ingest", f"HTTP://127.0.0.1:{port}/x.pdf?sig=secret", "--collection", "upper-scheme", timeout=120)
    assert res.returncode == 1
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "download failed" in lines[0], res.stderr  # fetched as a URL, not opened as a path
    assert "no such file" not in res.stderr and "secret" not in res.stderr + res.stdout
