"""Background jobs started from Slack: ingest a URL or a shared file, remove a document, list documents.

Each ingest/remove is a row of ``bot.queue``, run by whichever job runner claims it first (``bot.runner``).
Progress and the result go to the person who asked through a ``Reporter``: ephemeral messages for
slash commands, a status message in the thread for a shared file.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_exponential

from bot import slack, urls
from bot.progress import SlackProgress
from bot.queue import Job, JobLost, JobQueue, JobSpec, QueueFull, ReportTo
from bot.render import render_documents
from bot.scope import scope_for
from bot.store import Store
from ingest.progress import ocr_words
from ingest.sources import InputError, Source, fetch_url
from ingest.store import Actor
from retrieval.store.db import DatabaseError, IndexUnavailable
from retrieval.encode.embed import ModelError
from retrieval.settings import Settings
from retrieval.store.placement import placed
from retrieval.text.urls import redact_urls, shown_url

log = logging.getLogger(__name__)

Reporter = Callable[[str], None]
OUTAGE_RETRY_S = 120.0  # an ingest the database went away under is run again within this claim for this long
FINISH_RETRY_S = 30.0  # a job's end is recorded again for this long while the database is away (its
# heartbeat keeps running meanwhile, so the job is not given up for dead and run a second time)


@dataclass(frozen=True)
class Queued:
    """The outcome of queueing a job: whether it is in the queue, and what to tell the person."""

    ok: bool
    text: str


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


def status_reporter(client: WebClient, channel: str, user: str, thread_ts: str | None = None,
                    status_ts: str | None = None) -> Reporter:
    """One status message to ``user``, updated (chat.update) as the job goes on: in ``channel``'s thread
    ``thread_ts`` (``status_ts`` if already posted), or a direct message when ``channel`` is the user's
    id; posted on first use."""
    where = {"channel": channel, "ts": status_ts}

    def report(text: str) -> None:
        msg = status_message(user, text)
        try:
            if where["ts"]:
                slack.update(client, where["channel"], where["ts"], msg)
            else:
                where["channel"], where["ts"] = slack.post_to(client, channel, msg, thread_ts)
        except SlackApiError as exc:
            log.warning("could not show the job's status to %s: %s", user, exc.response.get("error"))

    return report


def status_message(user: str, text: str) -> slack.SlackMessage:
    return slack.SlackMessage(text, [{"type": "section", "text": {"type": "mrkdwn", "text": f"<@{user}> {text}"}}])


def webhook_respond(response_url: str) -> Callable[..., object]:
    """The slash command's response_url as a ``respond``-like callable (usable from any process)."""
    from slack_sdk.webhook import WebhookClient  # noqa: PLC0415

    def respond(**kw: object) -> None:
        resp = WebhookClient(response_url, timeout=10).send(**kw)  # type: ignore[arg-type]
        if resp.status_code >= 400:
            raise RuntimeError(f"response_url answered HTTP {resp.status_code}")

    return respond


def reporter_for(client: WebClient, to: ReportTo) -> Reporter:
    if to.mode == "thread":
        return status_reporter(client, to.channel, to.user, to.thread_ts or "", to.status_ts)
    respond = webhook_respond(to.response_url) if to.response_url else None
    return ephemeral_reporter(client, Requester("", to.channel, to.user), respond, to.thread_ts)


def _actor(job: Job) -> Actor:
    """Who the change is recorded for: the person who asked in Slack."""
    return Actor(job.requested_by or job.spec.report.user, "slack", job.workspace)


def _redacting(report: Reporter) -> Reporter:
    return lambda text: report(redact_urls(text))


class Jobs:
    """Queues jobs (from any thread but the socket's) and runs claimed ones (``run``, on a job runner).

    ``clients(team)`` is the Web API client of a workspace (its own bot token in OAuth mode)."""

    def __init__(self, settings: Settings, clients: Callable[[str], WebClient], store: Store, queue: JobQueue,
                 wake: Callable[[], None] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        """``wake`` tells this process's job runner that a job was queued (no wait for its next poll).
        ``clock`` paces the progress updates of running ingests (``bot.progress``)."""
        self.settings, self.clients, self.store, self.queue = settings, clients, store, queue
        self._wake = wake or (lambda: None)
        self._clock = clock

    @property
    def limit(self) -> int:
        return self.settings.ingest.max_file_bytes

    # ---------------------------------------------------------------- queueing (any thread but the socket's)
    def submit(self, who: Requester, source: str, said: str, response_url: str | None, **spec: str) -> Queued:
        """Queue a job (``spec``: its ``JobSpec`` fields) on the channel's collection; what to tell the
        person: ``said`` with the {source}, the {collection} and the {job} filled in, once it is queued."""
        coll = scope_for(self.settings, who.team, who.channel).write
        report = ReportTo(channel=who.channel, user=who.user, response_url=response_url)
        try:
            job_id, ahead = self.queue.enqueue(who.team, who.user, source, JobSpec(collection=coll, report=report, **spec))
        except QueueFull as exc:
            return Queued(False, f":x: {exc}")
        except DatabaseError as exc:
            return Queued(False, f":x: Could not queue {redact_urls(source)}: {exc}. Please try again later.")
        self._wake()
        job = f"job #{job_id}" + (f", queued behind {ahead} job(s)" if ahead else "")
        return Queued(True, said.format(source=source, collection=coll, job=job))

    def ingest_url(self, who: Requester, url: str, response_url: str | None = None) -> Queued:
        """Queue the download of ``url`` (its query string lives only in the unfinished job's payload)."""
        return self.submit(who, shown_url(url), ":inbox_tray: Ingesting {source} into `{collection}` ({job}). "
                           "I'll tell you how it goes (only you see this).", response_url, kind="ingest", url=url)

    def ingest_files(self, who: Requester, files: list[tuple[str, str]], thread_ts: str, claim: str | None) -> bool:
        """PDFs shared in a thread, as (file id, name): queued with the message's event claim in one
        transaction, then a status message per file in the thread, which its job updates. False when
        the message was handled already."""
        client = self.clients(who.team)
        coll = scope_for(self.settings, who.team, who.channel).write
        to = ReportTo(channel=who.channel, user=who.user, mode="thread", thread_ts=thread_ts)
        specs = [(f"slack file {fid}", JobSpec(kind="ingest", collection=coll, slack_file=fid, report=to))
                 for fid, _ in files]
        try:
            queued = self.queue.enqueue_all(who.team, who.user, specs, claim=claim)
        except (QueueFull, DatabaseError) as exc:
            text = f":x: {exc}" if isinstance(exc, QueueFull) else (
                f":x: Could not queue {', '.join(f'`{n}`' for _, n in files)}: {exc}. Please try again later.")
            reporter_for(client, to)(text)
            return True
        if queued is None:
            return False
        for job_id, (_, name) in zip(queued[0], files, strict=True):
            try:
                status_ts = slack.post(client, who.channel, status_message(
                    who.user, f":inbox_tray: Got `{name}`; queued (job #{job_id})…"), thread_ts)
            except SlackApiError as exc:
                log.error("could not post the job status: %s", exc.response.get("error"))
                continue
            try:  # the job updates this message (unless a worker claimed it in the meantime: it posts its own)
                self.queue.set_status_ts(who.team, job_id, status_ts)
            except DatabaseError as exc:
                log.warning("job %s: status message not recorded: %s", job_id, exc)
        self._wake()
        return True

    def remove(self, who: Requester, name: str, response_url: str | None = None) -> Queued:
        return self.submit(who, name, ":wastebasket: Removing `{source}` from `{collection}` ({job})…", response_url,
                           kind="remove", name=name)

    def holding(self, collection: str) -> Store:
        """The store of the database holding ``collection``: the bot's own, unless it is placed on another
        primary (``retrieval.store.placement``; the jobs and every other bot table stay on the bot's)."""
        target = placed(self.settings, [collection])
        return self.store if target is self.settings else Store(target)

    def list_documents(self, who: Requester, report: Reporter) -> None:
        from ingest.store import list_documents  # noqa: PLC0415

        read = scope_for(self.settings, who.team, who.channel).read
        try:
            rows = [r for c in read for r in self.holding(c).run(lambda conn, c=c: list_documents(conn, c))]
        except DatabaseError as exc:
            report(f":x: Could not list documents: {exc}. Please try again later.")
            return
        report(render_documents(rows, read))

    # ---------------------------------------------------------------- running a claimed job (job runner)
    def on_lost(self, job: Job, why: str) -> None:
        """The runner's heartbeat found the job is no longer this worker's (``bot.runner``)."""
        if why == "expired":
            report = _redacting(reporter_for(self.clients(job.workspace), job.spec.report))
            report(f":x: Job #{job.id} {self.queue.deadline_message()}.")

    def run(self, job: Job) -> None:
        client = self.clients(job.workspace)
        report = _redacting(reporter_for(client, job.spec.report))
        if job.attempts > 1:
            report(f":repeat: Job #{job.id}: its worker stopped; trying again (attempt {job.attempts}).")
        if job.spec.kind == "remove":
            self._remove(job, report)
        elif job.spec.slack_file:
            file_id = job.spec.slack_file
            self._ingest_through_outages(job, lambda: self._download(client, file_id), report, client)
        elif job.spec.url:
            url = job.spec.url
            self._ingest_through_outages(job, lambda: fetch_url(
                url, self.limit, self.settings.ingest.download_timeout_s,
                check_url=lambda u: urls.refusal(self.settings, u),
                check_address=lambda host, ip: urls.address_refusal(self.settings, host, ip)), report, client)
        else:
            self._finish(job, ok=False, message="nothing to ingest")

    def _ingest_through_outages(self, job: Job, load: Callable[[], Source], report: Reporter,
                                client: WebClient) -> None:
        """``_ingest``, run again while the database is unreachable (a restart, a failover): the
        document is written in one transaction, so an attempt cut off wrote nothing. After
        ``OUTAGE_RETRY_S`` the job fails with the database's error."""
        retrying = Retrying(retry=retry_if_exception_type(IndexUnavailable), stop=stop_after_delay(OUTAGE_RETRY_S),
                            wait=wait_exponential(multiplier=1.0, min=2.0, max=15.0), reraise=True,
                            before_sleep=lambda state: log.warning("job %s: the database went away (%s); trying "
                                                                   "again", job.id, state.outcome.exception()))
        try:
            retrying(self._ingest, job, load, report, client)
        except IndexUnavailable as exc:
            self._finish(job, ok=False, message=str(exc))
            report(f":x: Job #{job.id} failed: {exc}")

    def _download(self, client: WebClient, file_id: str) -> Source:
        try:
            info = client.files_info(file=file_id)["file"]
        except SlackApiError as exc:
            raise InputError(f"Slack file {file_id}: cannot read it ({exc.response.get('error')}); "
                             "is the bot in this channel?") from exc
        name = str(info.get("name") or f"{file_id}.pdf")
        url = info.get("url_private_download") or info.get("url_private")
        if not url:
            raise InputError(f"{name}: Slack gave no download link")
        src = fetch_url(str(url), self.limit, self.settings.ingest.download_timeout_s,
                        headers={"Authorization": f"Bearer {client.token}"})
        return dataclasses.replace(src, name=name, origin=name, url=shown_url(str(info.get("url_private") or url)))

    def _live(self, job: Job, client: WebClient, report: Reporter) -> Reporter:
        """Where a running ingest's progress is shown in place: the thread's status message (the job's
        own reporter), or a direct message for a slash command, whose replies cannot be edited."""
        if job.spec.report.mode == "thread":
            return report
        return _redacting(status_reporter(client, job.spec.report.user, job.spec.report.user))

    def _ingest(self, job: Job, load: Callable[[], Source], report: Reporter, client: WebClient) -> None:
        """``job.source`` is what people are shown (no query string); every report is redacted too,
        since download errors quote the URL they were given. Pages read and the time left are shown
        in place while it runs (``bot.progress``); a progress DM gets the final word too."""
        from bot.confined import ingest_confined  # noqa: PLC0415  (PyMuPDF)

        collection = job.spec.collection

        def progress(text: str) -> None:
            """Report, unless the job stopped being ours: then stop before anything is written."""
            if job.lost.is_set():
                raise JobLost(job.id)
            report(f":hourglass_flowing_sand: Job #{job.id}: {text}…")

        show = self._live(job, client, report)
        live: SlackProgress | None = None

        def final(text: str) -> None:
            report(text)
            if show is not report and live is not None and live.updates:
                show(text)  # the progress DM ends with the result too

        progress(f"downloading {job.source}")
        try:
            src = load()
            progress(f"reading {src.name} ({len(src.data) / 1e6:.1f} MB)")
            with SlackProgress(job, src.name, self.settings.slack.progress_interval_s, show,
                               clock=self._clock) as live:
                # in a child process under CHAPTERVERSE_INGEST_MAX_MEMORY_MB (bot.confined): a hostile
                # file fails its own job; the document is written and the job recorded done in one
                # transaction there, only while the job is still this claim's and inside its deadline
                res = ingest_confined(self.settings, src, collection, actor=_actor(job), job=job,
                                      deadline_s=self.queue.deadline_s, on_progress=progress, progress=live)
        except (JobLost, IndexUnavailable):
            raise  # IndexUnavailable: _ingest_through_outages tries again
        except (InputError, DatabaseError, ModelError) as exc:
            self._finish(job, ok=False, message=redact_urls(str(exc)))
            final(f":x: Job #{job.id} failed: {exc}")
            return
        except Exception as exc:  # noqa: BLE001
            log.exception("ingest job %s failed", job.id)
            self._finish(job, ok=False, message=f"unexpected error: {type(exc).__name__}")
            final(f":x: Job #{job.id} failed: unexpected error ({type(exc).__name__}); nothing was stored.")
            return
        if res.status == "unchanged":  # nothing was written; a written document recorded its job's end with it
            self._finish(job, ok=True, message=res.status, pages=res.pages, chunks=res.chunks)
            final(f":white_check_mark: Job #{job.id}: `{res.name}` is unchanged ({res.message}); nothing to do.")
            return
        warning = f"\n:warning: {res.warning}." if res.warning else ""
        final(f":white_check_mark: Job #{job.id}: `{res.name}` {res.status} into `{collection}`: "
              f"{res.pages} pages{ocr_words(res.ocr_pages, res.ocr_confidence)}, {res.chunks} chunks in "
              f"{res.seconds:.0f} s. Ask away!{warning}")

    def _remove(self, job: Job, report: Reporter) -> None:
        from ingest.store import remove_document  # noqa: PLC0415

        name, collection = job.spec.name or "", job.spec.collection
        if job.lost.is_set():
            raise JobLost(job.id)
        try:
            removed = self.holding(collection).run(lambda conn: remove_document(conn, name, collection, actor=_actor(job)))
        except DatabaseError as exc:
            self._finish(job, ok=False, message=str(exc))
            report(f":x: Could not remove `{name}`: {exc}. Please try again later.")
            return
        if removed:
            self._finish(job, ok=True, message="removed")
            report(f":wastebasket: Removed `{name}` from `{collection}`.")
        else:
            self._finish(job, ok=False, message="no such document")
            report(f":x: No document named `{name}` in `{collection}`. `/chapterverse list` shows the names.")

    def _finish(self, job: Job, **kw: object) -> None:
        retrying = Retrying(retry=retry_if_exception_type(DatabaseError), stop=stop_after_delay(FINISH_RETRY_S),
                            wait=wait_exponential(multiplier=0.5, max=5.0), reraise=True)
        try:
            if not retrying(self.queue.finish, job, **kw):
                log.warning("job %s:%s ended but is no longer this worker's (deadline, or claimed elsewhere); "
                            "its end was not recorded", job.workspace, job.id)
        except DatabaseError as exc:
            log.warning("could not record the end of job %s: %s", job.id, exc)
