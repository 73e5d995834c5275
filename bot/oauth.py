"""Multi-workspace mode: Bolt's OAuth flow with installations in Postgres, and its install pages.

Socket Mode still carries the events (one app-level token for every workspace); only the browser
steps of installing need HTTP: ``/slack/install`` (the "Add to Slack" page) and
``/slack/oauth_redirect`` (where Slack sends the browser back with a code, which Bolt exchanges for
the workspace's bot token and saves through ``PostgresInstallationStore``). The one-time states
that tie the two steps together live in Postgres too (``PostgresOAuthStateStore``), so the
redirect may reach a different bot process than the install page. ``serve_install_pages``
serves just those two paths on ``CHAPTERVERSE_SLACK_OAUTH_HOST:PORT``; put it behind the https URL
configured as the app's redirect URL.
"""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from slack_bolt import BoltRequest, BoltResponse
from slack_bolt.oauth import OAuthFlow
from slack_bolt.oauth.oauth_settings import OAuthSettings
from bot.installations import PostgresInstallationStore, PostgresOAuthStateStore
from retrieval.settings import Settings

log = logging.getLogger(__name__)
STATE_TTL_S = 600  # an install link is good for ten minutes


def multi_workspace(settings: Settings) -> bool:
    return settings.slack.multi_workspace or oauth_enabled(settings)


def oauth_enabled(settings: Settings) -> bool:
    return bool(settings.slack.client_id and settings.slack.client_secret)


def app_auth(settings: Settings, installations: PostgresInstallationStore) -> dict[str, Any]:
    """``App`` arguments for multi-workspace mode: every event is authorized with its workspace's bot
    token from the store; with a client id and secret, the OAuth flow that fills the store."""
    auth: dict[str, Any] = {"installation_store": installations}
    if not oauth_enabled(settings):
        auth["installation_store_bot_only"] = True  # events are answered with the workspace's bot token
    else:
        assert settings.slack.client_secret is not None
        auth["oauth_settings"] = OAuthSettings(
            client_id=settings.slack.client_id, client_secret=settings.slack.client_secret.get_secret_value(),
            scopes=[s.strip() for s in settings.slack.scopes.split(",") if s.strip()],
            redirect_uri=settings.slack.redirect_uri, installation_store=installations,
            installation_store_bot_only=True,
            state_store=PostgresOAuthStateStore(installations.store, STATE_TTL_S),
            install_path="/slack/install", redirect_uri_path="/slack/oauth_redirect")
    return auth


def serve_install_pages(flow: OAuthFlow, host: str, port: int) -> ThreadingHTTPServer:
    """Serve the install and redirect pages on a daemon thread; returns the server (``.server_address``)."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt: str, *args: Any) -> None:
            log.info("install pages: %s", (fmt % args).split("?", 1)[0])  # no codes or states in logs

        def do_GET(self) -> None:  # noqa: N802
            path, _, query = self.path.partition("?")
            page = {flow.install_path: flow.handle_installation, flow.redirect_uri_path: flow.handle_callback}.get(path)
            self._send(page(BoltRequest(body="", query=query, headers=self._headers())) if page
                       else BoltResponse(status=404, body="Not found"))

        def _headers(self) -> dict[str, list[str]]:
            out: dict[str, list[str]] = {}
            for k, v in self.headers.items():
                out.setdefault(k.lower(), []).append(v)
            return out

        def _send(self, resp: BoltResponse) -> None:
            body = (resp.body if isinstance(resp.body, str) else json.dumps(resp.body)).encode()
            self.send_response(resp.status)
            for k, values in resp.headers.items():
                if k.lower() == "content-length":
                    continue
                for v in values:
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="install-pages", daemon=True).start()
    log.info("install pages at http://%s:%d%s", host, server.server_address[1], flow.install_path)
    return server
