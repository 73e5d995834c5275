"""The job queue in Postgres (``bot_jobs``, migrations 0002/0006/0009): enqueue, claim, heartbeat, finish.

Any number of bot and worker processes share one queue. A worker claims the oldest queued job with
``SELECT … FOR UPDATE SKIP LOCKED`` (two workers never get the same job and never wait for each
other), refreshes the job's heartbeat while it runs, and records the end. A job whose worker died
(no heartbeat for ``stale_s``) is put back in the queue once; after its last attempt it is failed
with a message saying so. The queue is bounded per workspace: ``enqueue`` refuses a job when
``limit`` jobs of that workspace are already waiting or running.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Literal

from psycopg.types.json import Jsonb
from pydantic import BaseModel, ValidationError

from bot.store import Store, job_owner, predecessors

MAX_ATTEMPTS = 2  # a job is tried again once if its worker dies under it
STALE_S = 60.0  # a running job without a heartbeat for this long has lost its worker
HEARTBEAT_S = 10.0
# a job's end: the payload's URL (which may carry a signed query string) and the slash command's
# response_url (which can post to the channel for 30 minutes) are dropped
_ENDED = "finished_at = now(), payload = payload - 'url' #- '{report,response_url}'"
# failing the running jobs past their deadline (never retried: most likely they would run as long again)
_EXPIRE = (f"UPDATE bot_jobs SET status = 'failed', message = %(message)s, {_ENDED} "
           "WHERE started_at < now() - make_interval(secs => %(deadline)s)")


class ReportTo(BaseModel):
    """Where a job's progress and result go."""

    channel: str
    user: str
    mode: Literal["ephemeral", "thread"] = "ephemeral"
    thread_ts: str | None = None
    status_ts: str | None = None  # thread mode: the status message to update
    response_url: str | None = None  # ephemeral mode: the slash command's fallback


class JobSpec(BaseModel):
    kind: Literal["ingest", "remove"]
    collection: str
    url: str | None = None  # ingest from a URL (kept only while the job is unfinished)
    slack_file: str | None = None  # ingest a file shared in Slack
    name: str | None = None  # remove this document
    report: ReportTo


@dataclass(frozen=True)
class Job:
    workspace: str
    id: int
    spec: JobSpec
    source: str  # as shown to people
    attempts: int  # with the owner, identifies this claim: heartbeat and finish act only on it
    requested_by: str = ""  # the Slack user who asked
    owner: tuple[str, int] = ("", 0)  # (host, pid) of the process that claimed it
    lost: threading.Event = field(default_factory=threading.Event, compare=False, repr=False)
    """Set when the job is no longer this claim's (its deadline passed, or it was given to another
    worker): the work stops at its next check and records nothing."""


class JobLost(Exception):
    """The job is no longer this worker's (``Job.lost``): stop without recording anything."""


class QueueFull(Exception):
    """The workspace already has ``limit`` unfinished jobs."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"The job queue is full ({limit} jobs are waiting or running in this workspace). "
                         "Please try again when some have finished.")
        self.limit = limit


class JobQueue:
    def __init__(self, store: Store, limit: int, deadline_s: float | None = None) -> None:
        """``deadline_s``: how long a job may run (default ``CHAPTERVERSE_JOB_DEADLINE_S``)."""
        self.store, self.limit = store, limit
        self.deadline_s = deadline_s if deadline_s is not None else store.settings.jobs.deadline_s

    def enqueue(self, workspace: str, requested_by: str, source: str, spec: JobSpec) -> tuple[int, int]:
        """Queue a job; (its id, how many unfinished jobs of the workspace are ahead of it).
        Raises ``QueueFull`` when the workspace has ``limit`` unfinished jobs already."""
        (job_id,), ahead = self.enqueue_all(workspace, requested_by, [(source, spec)])  # type: ignore[misc]
        return job_id, ahead

    def enqueue_all(self, workspace: str, requested_by: str, jobs: list[tuple[str, JobSpec]],
                    claim: str | None = None) -> tuple[list[int], int] | None:
        """Queue several jobs (source, spec) in one transaction, all or none: (their ids, how many
        unfinished jobs were ahead). With ``claim`` (an event key, ``Store.claim_event``) the event is
        claimed in the same transaction: None when it was claimed before (nothing queued)."""
        def run(conn) -> tuple[list[int], int] | None:  # noqa: ANN001
            with conn.transaction():
                if claim is not None and conn.execute(
                        "INSERT INTO bot_events (workspace, event_key) VALUES (%s, %s) ON CONFLICT DO NOTHING "
                        "RETURNING event_key", (workspace, claim)).fetchone() is None:
                    return None
                # one enqueuer per workspace at a time, so the count below cannot be raced past the limit
                conn.execute("SELECT pg_advisory_xact_lock(hashtext('bot_jobs:' || %s))", (workspace,))
                ahead = conn.execute("SELECT count(*) AS n FROM bot_jobs WHERE workspace = %s "
                                     "AND status IN ('queued', 'running')", (workspace,)).fetchone()["n"]
                if ahead + len(jobs) > self.limit:
                    raise QueueFull(self.limit)
                ids = [int(conn.execute(
                    "INSERT INTO bot_jobs (workspace, kind, requested_by, channel, collection, source, payload) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id",
                    (workspace, spec.kind, requested_by, spec.report.channel, spec.collection, source,
                     Jsonb(spec.model_dump(mode="json")))).fetchone()["id"]) for source, spec in jobs]
            return ids, int(ahead)

        return self.store.run(run)

    def set_status_ts(self, workspace: str, job_id: int, status_ts: str) -> bool:
        """Record the thread message a queued job should update; False if a worker has it already."""
        return self.store.run(lambda conn: conn.execute(
            "UPDATE bot_jobs SET payload = jsonb_set(payload, '{report,status_ts}', to_jsonb(%s::text)) "
            "WHERE workspace = %s AND id = %s AND status = 'queued'", (status_ts, workspace, job_id)).rowcount == 1)

    def claim(self) -> Job | None:
        """The oldest queued job, now running and owned by this process; None when the queue is empty."""
        host, pid = job_owner()
        row = self.store.run(lambda conn: conn.execute(
            "UPDATE bot_jobs j SET status = 'running', started_at = now(), heartbeat_at = now(), "
            "attempts = j.attempts + 1, owner_host = %s, owner_pid = %s FROM ("
            "  SELECT workspace, id FROM bot_jobs WHERE status = 'queued' ORDER BY created_at, id "
            "  LIMIT 1 FOR UPDATE SKIP LOCKED) q "
            "WHERE j.workspace = q.workspace AND j.id = q.id "
            "RETURNING j.workspace, j.id, j.payload, j.source, j.attempts, j.requested_by", (host, pid)).fetchone())
        if row is None:
            return None
        try:
            spec = JobSpec.model_validate(row["payload"])
        except ValidationError:  # recorded before jobs carried their payload: nothing to run
            job = Job(row["workspace"], int(row["id"]), None, row["source"], int(row["attempts"]))  # type: ignore[arg-type]
            self.finish(job, ok=False, message="cannot run: recorded by an older version of the bot")
            return self.claim()
        return Job(workspace=row["workspace"], id=int(row["id"]), spec=spec, source=row["source"],
                   attempts=int(row["attempts"]), requested_by=row["requested_by"], owner=(host, pid))

    _MINE = ("workspace = %(ws)s AND id = %(id)s AND status = 'running' AND owner_host = %(host)s "
             "AND owner_pid = %(pid)s AND attempts = %(attempts)s")

    def heartbeat(self, job: Job) -> Literal["ok", "expired", "lost"]:
        """Refresh the job's heartbeat: "ok"; "expired" when this claim ran past its deadline (the job
        is failed here, by its own worker); "lost" when it is no longer this claim's (failed for its
        deadline by another worker, or requeued and claimed elsewhere). ``job.lost`` is set unless "ok"."""
        args = {**claim_of(job), "deadline": self.deadline_s, "message": self.deadline_message()}

        def run(conn) -> Literal["ok", "expired", "lost"]:  # noqa: ANN001
            with conn.transaction():
                expired = conn.execute(f"{_EXPIRE} AND {self._MINE} RETURNING id", args).fetchone()  # noqa: S608
                if expired:
                    return "expired"
                beat = conn.execute(f"UPDATE bot_jobs SET heartbeat_at = now() WHERE {self._MINE}",  # noqa: S608
                                    args).rowcount
                return "ok" if beat == 1 else "lost"

        state = self.store.run(run)
        if state != "ok":
            job.lost.set()
        return state

    def deadline_message(self) -> str:
        return (f"stopped: it ran longer than the job deadline ({self.deadline_s / 60:.0f} min, "
                "CHAPTERVERSE_JOB_DEADLINE_S); nothing was changed")

    def finish(self, job: Job, *, ok: bool, message: str, pages: int | None = None,
               chunks: int | None = None) -> bool:
        """Record the end (``_ENDED``), only if the job is still this claim's (False otherwise, and
        ``job.lost`` is set)."""
        args = {**claim_of(job), "status": "done" if ok else "failed", "message": message, "pages": pages,
                "chunks": chunks}
        cannot_run = job.spec is None or job.owner == ("", 0)  # a row that cannot run: claimed and failed at once
        where = "workspace = %(ws)s AND id = %(id)s" if cannot_run else self._MINE
        done = self.store.run(lambda conn: conn.execute(
            f"UPDATE bot_jobs SET status = %(status)s, message = %(message)s, pages = %(pages)s, chunks = %(chunks)s, "  # noqa: S608
            f"{_ENDED} WHERE {where}", args).rowcount == 1)
        if not done:
            job.lost.set()
        return done

    def recover(self, stale_s: float = STALE_S, *, starting: bool = False) -> tuple[int, int]:
        """Jobs whose worker is gone: requeued while attempts remain, else failed; jobs running past
        the deadline: failed. (requeued, failed).

        A running job's worker is gone when its heartbeat is older than ``stale_s``; when
        ``starting``, also when it was claimed on this host by a process that is no longer alive or
        that had this process's PID (a predecessor: in a container every bot is PID 1)."""
        host, _ = job_owner()

        def run(conn) -> tuple[int, int]:  # noqa: ANN001
            gone = predecessors(conn, "SELECT workspace, id AS key, owner_pid FROM bot_jobs WHERE status = 'running' "
                                "AND owner_host = %s", host) if starting else []
            lost = ("status = 'running' AND (workspace || ':' || id = ANY(%(gone)s) OR "
                    "coalesce(heartbeat_at, started_at, created_at) < now() - make_interval(secs => %(stale)s))")
            args = {"gone": gone, "stale": stale_s, "max": MAX_ATTEMPTS, "deadline": self.deadline_s,
                    "message": self.deadline_message()}
            with conn.transaction():
                expired = conn.execute(f"{_EXPIRE} AND status = 'running' RETURNING id", args).fetchall()  # noqa: S608
                requeued = conn.execute(
                    f"UPDATE bot_jobs SET status = 'queued', owner_host = NULL, owner_pid = NULL "  # noqa: S608
                    f"WHERE {lost} AND attempts < %(max)s RETURNING id", args).fetchall()
                failed = conn.execute(
                    f"UPDATE bot_jobs SET status = 'failed', {_ENDED}, "  # noqa: S608
                    f"message = 'interrupted: its worker stopped during each of ' || attempts || ' attempt(s)' "
                    f"WHERE {lost} RETURNING id", args).fetchall()
            return len(requeued), len(failed) + len(expired)

        return self.store.run(run)


def claim_of(job: Job) -> dict[str, object]:
    """The job's claim as the values ``JobQueue._MINE`` matches (JSON-able: ``bot.confined`` sends it
    to its child)."""
    return {"ws": job.workspace, "id": job.id, "host": job.owner[0], "pid": job.owner[1], "attempts": job.attempts}


def record_done(conn, mine: dict[str, object], deadline_s: float, message: str,  # noqa: ANN001
                pages: int | None, chunks: int | None) -> None:
    """Record the job of claim ``mine`` (``claim_of``) done inside the caller's transaction (the
    document's write, ``ingest.store.write_document(before_commit=...)``, in ``bot.confined``'s child),
    only if it is still this claim's and inside its deadline (by the clock now, not the transaction's
    start); otherwise raise ``JobLost``, which rolls the write back. The job row stays locked until the
    commit, so a heartbeat that would fail it for its deadline waits, then finds it done: a document
    that commits is never reported as "nothing was changed", and one reported so never commits."""
    row = conn.execute(
        "UPDATE bot_jobs SET status = 'done', message = %(message)s, pages = %(pages)s, chunks = %(chunks)s, "  # noqa: S608
        f"{_ENDED} WHERE {JobQueue._MINE} AND started_at >= clock_timestamp() - make_interval(secs => %(deadline)s) "
        "RETURNING id", {**mine, "message": message, "pages": pages, "chunks": chunks,
                         "deadline": deadline_s}).fetchone()
    if row is None:
        raise JobLost(int(mine["id"]))  # type: ignore[call-overload]
