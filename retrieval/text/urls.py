"""URLs as they may be stored and shown (pure functions): never the parts that can carry
credentials (user info, query string, fragment). Used by ingest (what it stores and reports), the
bot (what it says) and quote verification (citation links)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

_URL_TAIL = re.compile(r"(https?://[^\s?#<>|`'\"]+)[?#][^\s<>|`'\"]*?([:.,;)]?)(?=[\s<>|`'\"]|$)", re.I)
_URL_USERINFO = re.compile(r"(https?://)[^/\s?#@<>|`'\"]*@", re.I)


def shown_url(url: str) -> str:
    """``url`` as it may be stored and shown: scheme, host, port and path only. The user info, the
    query string and the fragment are dropped: they may carry credentials (a signed URL's
    ``X-Amz-Signature``, a token parameter, ``user:password@``)."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc.rsplit("@", 1)[-1]
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    except ValueError:
        return redact_urls(url)


def redact_urls(text: str) -> str:
    """``text`` with the user info, query string and fragment of every http(s) URL in it removed
    (for error messages and reports that quote a URL)."""
    return _URL_TAIL.sub(r"\1\2", _URL_USERINFO.sub(r"\1", text))
