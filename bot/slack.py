"""The Slack Web API client and the few calls the bot makes, in terms of rendered messages."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

from slack_sdk import WebClient
from slack_sdk.http_retry.builtin_handlers import ConnectionErrorRetryHandler, RateLimitErrorRetryHandler

from bot.render import SlackMessage
from retrieval.settings import Settings

TOKEN_PATTERN = re.compile(r"\bx(?:ox[abposr]|app)-[A-Za-z0-9-]+")


class RedactTokens(logging.Filter):
    """Belt and braces: no Slack token reaches a log line, whoever logs it."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if TOKEN_PATTERN.search(message):
            record.msg = TOKEN_PATTERN.sub("[redacted token]", message)
            record.args = None
        return True


class Leave(logging.Filter):
    """Leaves out the records ``unwanted(record)`` picks: a library's noise the bot says better itself."""

    def __init__(self, unwanted: Callable[[logging.LogRecord], bool]) -> None:
        super().__init__()
        self.unwanted = unwanted

    def filter(self, record: logging.LogRecord) -> bool:
        return not self.unwanted(record)


def make_client(settings: Settings, bot_token: str | None) -> WebClient:
    """A WebClient on SLACK_API_URL that waits out HTTP 429 (Retry-After) and retries dropped connections
    (no token: the base client of multi-workspace mode, which Bolt copies per request)."""
    base = settings.slack.api_url if settings.slack.api_url.endswith("/") else settings.slack.api_url + "/"
    return WebClient(token=bot_token, base_url=base, timeout=30,
                     retry_handlers=[ConnectionErrorRetryHandler(max_retry_count=2),
                                     RateLimitErrorRetryHandler(max_retry_count=5)])


def post(client: WebClient, channel: str, msg: SlackMessage, thread_ts: str | None = None) -> str:
    """Post a message (in a thread when ``thread_ts``); returns its ts."""
    return post_to(client, channel, msg, thread_ts)[1]


def post_to(client: WebClient, channel: str, msg: SlackMessage, thread_ts: str | None = None) -> tuple[str, str]:
    """``post``, returning (channel id, ts): a message to a user's id goes to a direct message channel."""
    resp = client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=msg.text, blocks=msg.blocks or None,
                                   unfurl_links=False, unfurl_media=False)
    return str(resp["channel"]), str(resp["ts"])


def update(client: WebClient, channel: str, ts: str, msg: SlackMessage) -> None:
    client.chat_update(channel=channel, ts=ts, text=msg.text, blocks=msg.blocks)


def ephemeral(client: WebClient, channel: str, user: str, text: str, thread_ts: str | None = None) -> None:
    client.chat_postEphemeral(channel=channel, user=user, text=text, thread_ts=thread_ts)
