"""Background jobs started from Slack: ingest a URL or a shared file, remove a document, list documents.

Each ingest/remove is a row in ``bot_jobs`` (queued → running → done/failed) and runs on the job
worker (one at a time: embedding is CPU bound). Progress and the result go to the person who asked
through a ``Reporter``: ephemeral messages for slash commands, a status message in the thread for a
shared file.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot import slack, urls
from bot.render import render_documents
from bot.scope import scope_for
from bot.store import Store
from bot.workers import WorkerPool
from ingest.sources import InputError, Source, fetch_url
from retrieval.db import DatabaseError
from retrieval.embed import ModelError
from retrieval.settings import Settings

log = logging.getLogger(__name__)

Reporter = Callable[[str], None]


@dataclass(frozen=True)
class Requester:
    team: str
    channel: str
    user: str


def ephemeral_reporter(client: WebClient, who: Requester, respond: Callable[..., object] | None = None,
                       thread_ts: str | None = None) -> Reporter:
    """Messages only the requester sees: chat.postEphemeral, else the slash command's response_url,
    else a DM."""

    def report(text: str) -> None:
        try:
            slack.ephemeral(client, who.channel, who.user, text, thread_ts)
            return
        except SlackApiError as exc:
            log.info("postEphemeral failed (%s); trying another way", exc.response.get("error"))
        try:
            if respond is not None:
                respond(text=text, response_type="ephemeral", replace_original=False)
                return
        except Exception as exc:  # noqa: BLE001  (response_url expired or unreachable)
            log.info("response_url failed: %s", type(exc).__name__)
        try:
            client.chat_postMessage(channel=who.user, text=text)
        except SlackApiError as exc:
            log.error("could not report to %s: %s", who.user, exc.response.get("error"))

    return report


def thread_reporter(client: WebClient, channel: str, thread_ts: str, user: str) -> Reporter:
    """One status message in the thread, updated as the job goes on."""
    state: dict[str, str] = {}

    def report(text: str) -> None:
        msg = slack.SlackMessage(text, [{"type": "section", "text": {"type": "mrkdwn", "text": f"<@{user}> {text}"}}])
        try:
            if "ts" in state:
                slack.update(client, channel, state["ts"], msg)
            else:
                state["ts"] = slack.post(client, channel, msg, thread_ts)
        except SlackApiError as exc:
            log.error("could not report job status: %s", exc.response.get("error"))

    return report


def _redacting(report: Reporter) -> Reporter:
    return lambda text: report(urls.redact(text))


class Jobs:
    def __init__(self, settings: Settings, client: WebClient, store: Store, bot_token: str,
                 pool: WorkerPool, quick: WorkerPool) -> None:
        self.settings, self.client, self.store = settings, client, store
        self.pool, self.quick = pool, quick  # long jobs; quick reads that must not wait behind them
        self._bot_token = bot_token

    @property
    def limit(self) -> int:
        return self.settings.max_file_bytes

    # ---------------------------------------------------------------- entry points (any thread)
    def ingest_url(self, who: Requester, url: str, report: Reporter) -> int:
        """Queue an ingestion; returns how many jobs are ahead of it. The URL's host is checked on the
        job thread (DNS can be slow): a private/local address is refused and no job is recorded."""
        return self.pool.submit(self._ingest_url, who, url, report)

    def ingest_file(self, who: Requester, file_id: str, report: Reporter) -> int:
        return self.pool.submit(self._ingest, who, f"slack file {file_id}", lambda: self._download(file_id), report)

    def remove(self, who: Requester, name: str, report: Reporter) -> int:
        return self.pool.submit(self._remove, who, name, report)

    def list_documents(self, who: Requester, report: Reporter) -> None:
        self.quick.submit(self._list, who, report)

    # ---------------------------------------------------------------- the work (job thread)
    def _download(self, file_id: str) -> Source:
        try:
            info = self.client.files_info(file=file_id)["file"]
        except SlackApiError as exc:
            raise InputError(f"Slack file {file_id}: cannot read it ({exc.response.get('error')}); "
                             "is the bot in this channel?") from exc
        name = str(info.get("name") or f"{file_id}.pdf")
        url = info.get("url_private_download") or info.get("url_private")
        if not url:
            raise InputError(f"{name}: Slack gave no download link")
        src = fetch_url(str(url), self.limit, self.settings.download_timeout_s,
                        headers={"Authorization": f"Bearer {self._bot_token}"})
        return dataclasses.replace(src, name=name, origin=name, url=str(info.get("url_private") or url))

    def _ingest_url(self, who: Requester, url: str, report: Reporter) -> None:
        why = urls.refusal(self.settings, url)
        if why:
            log.info("refused to fetch %s: not a public address", urls.shown(url))
            report(why)
            return
        self._ingest(who, urls.shown(url),
                     lambda: fetch_url(url, self.limit, self.settings.download_timeout_s,
                                       check_url=lambda u: urls.refusal(self.settings, u)), report)

    def _ingest(self, who: Requester, source: str, load: Callable[[], Source], report: Reporter) -> None:
        """``source`` is what people are shown (no query string); every report is redacted too,
        since download errors quote the URL they were given."""
        from ingest.pipeline import ingest_source  # noqa: PLC0415  (PyMuPDF, torch)
        from retrieval.embed import get_embedder  # noqa: PLC0415

        report = _redacting(report)
        collection = scope_for(self.settings, who.team, who.channel).write
        try:
            job_id = self.store.create_job(who.team, "ingest", who.user, who.channel, collection, source)
            self.store.start_job(who.team, job_id)
        except DatabaseError as exc:
            report(f":x: Could not start ingesting {source}: {exc}. Please try again later.")
            return
        report(f":hourglass_flowing_sand: Job #{job_id}: downloading {source}…")
        try:
            src = load()
            report(f":hourglass_flowing_sand: Job #{job_id}: reading {src.name} ({len(src.data) / 1e6:.1f} MB)…")
            embedder = get_embedder(self.settings.embedding_model)
            res = ingest_source(self.settings, embedder, src, collection, quiet=True,
                                on_progress=lambda m: report(f":hourglass_flowing_sand: Job #{job_id}: {m}…"))
        except (InputError, DatabaseError, ModelError) as exc:
            self._finish(who, job_id, ok=False, message=urls.redact(str(exc)))
            report(f":x: Job #{job_id} failed: {exc}")
            return
        except Exception as exc:  # noqa: BLE001
            log.exception("ingest job %s failed", job_id)
            self._finish(who, job_id, ok=False, message=f"unexpected error: {type(exc).__name__}")
            report(f":x: Job #{job_id} failed: unexpected error ({type(exc).__name__}); nothing was stored.")
            return
        if res.status == "unchanged":
            text = f":white_check_mark: Job #{job_id}: `{res.name}` is unchanged ({res.message}); nothing to do."
        else:
            text = (f":white_check_mark: Job #{job_id}: `{res.name}` {res.status} into `{collection}`: "
                    f"{res.pages} pages, {res.chunks} chunks in {res.seconds:.0f} s. Ask away!")
        self._finish(who, job_id, ok=True, message=res.status, pages=res.pages, chunks=res.chunks)
        report(text)

    def _remove(self, who: Requester, name: str, report: Reporter) -> None:
        from ingest.store import remove_document  # noqa: PLC0415

        collection = scope_for(self.settings, who.team, who.channel).write
        try:
            job_id = self.store.create_job(who.team, "remove", who.user, who.channel, collection, name)
            self.store.start_job(who.team, job_id)
            removed = self.store.run(lambda conn: remove_document(conn, name, collection))
        except DatabaseError as exc:
            report(f":x: Could not remove `{name}`: {exc}. Please try again later.")
            return
        if removed:
            self._finish(who, job_id, ok=True, message="removed")
            report(f":wastebasket: Removed `{name}` from `{collection}`.")
        else:
            self._finish(who, job_id, ok=False, message="no such document")
            report(f":x: No document named `{name}` in `{collection}`. `/chapterverse list` shows the names.")

    def _list(self, who: Requester, report: Reporter) -> None:
        from ingest.store import list_documents  # noqa: PLC0415

        read = scope_for(self.settings, who.team, who.channel).read
        try:
            rows = [r for c in read for r in self.store.run(lambda conn, c=c: list_documents(conn, c))]
        except DatabaseError as exc:
            report(f":x: Could not list documents: {exc}. Please try again later.")
            return
        report(render_documents(rows, read))

    def _finish(self, who: Requester, job_id: int, **kw: object) -> None:
        try:
            self.store.finish_job(who.team, job_id, **kw)  # type: ignore[arg-type]
        except DatabaseError as exc:
            log.warning("could not record the end of job %s: %s", job_id, exc)
