"""A bot's ingest job in a process of its own, ``python -m bot.confined``, under an address-space
limit (``RLIMIT_AS``, CHAPTERVERSE_INGEST_MAX_MEMORY_MB), so one hostile document fails its own job, with
the limit named, instead of growing the bot (issue 32, item 1). The child is a fresh interpreter (none
of the bot's threads, sockets or Slack clients) that sets the limit before it loads anything.

The parent writes one JSON line (``ingest_confined``'s header) and the PDF's bytes on the child's
stdin; the child answers in JSON lines on a pipe of its own (``ingest.child``): ``note`` (the
pipeline's progress text), ``state`` (where the ingest is), then ``result`` or ``error``. The
document is written and the job recorded done in one transaction, in the child
(``bot.queue.record_done``); a job that stops being this worker's while the child runs (its
deadline, another worker) kills the child, and its transaction, if one was open, is rolled back.
"""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict
from typing import Any

from pydantic import BaseModel, SecretStr

from bot.queue import Job, JobLost, claim_of, record_done
from ingest import child
from ingest.child import answer_on
from retrieval.lifetime import die_with_parent
from ingest.pipeline import IngestResult
from ingest.progress import ProgressLog
from ingest.sources import InputError, Source
from ingest.store import Actor
from retrieval.encode.embed import ModelError
from retrieval.settings import Settings
from retrieval.store.db import DatabaseError, IndexUnavailable

STATE_EVERY_S = 0.5
# what the child's error messages name (IndexUnavailable, a DatabaseError, before DatabaseError)
_ERRORS: dict[str, type[Exception]] = {"input": InputError, "unavailable": IndexUnavailable,
                                       "database": DatabaseError, "model": ModelError}


def settings_payload(model: BaseModel) -> dict[str, Any]:
    """``model`` as JSON-able data that validates back to an equal model, secrets included (it goes
    to the child on a pipe, never to a file or the command line)."""
    out = model.model_dump(mode="json")
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, SecretStr):
            out[name] = value.get_secret_value()
        elif isinstance(value, BaseModel) and name != "profile":
            out[name] = settings_payload(value)
    return out


def memory_message(settings: Settings) -> str:
    return (f"ingesting it needs more than {settings.ingest.max_memory_mb:,} MB of memory "
            "(CHAPTERVERSE_INGEST_MAX_MEMORY_MB); nothing was stored")


# ---------------------------------------------------------------------------------------------
# the parent (the bot's job runner)

def _apply(progress: ProgressLog, state: dict[str, Any]) -> None:
    """Where the child's ingest is, on the job's own progress object (its Slack message)."""
    if state.get("step") != progress.step or state.get("total") != progress.total:
        progress.begin(str(state.get("step") or ""), state.get("total"), int(state.get("done_at_start") or 0))
    progress.pages_total = state.get("pages_total")
    progress.ahead = int(state.get("ahead") or 0)
    progress.ocr_pages = int(state.get("ocr_pages") or 0)
    progress.pages_done = int(state.get("pages_done") or 0)  # may raise JobLost (SlackProgress)
    done = int(state.get("done") or 0)
    if done > progress.done:
        progress.advance(done - progress.done)


def _stopped(code: int | None, settings: Settings, src: Source, last_words: str) -> Exception:
    if "MemoryError" in last_words or _NO_MEMORY.search(last_words):
        return InputError(f"{src.origin}: {memory_message(settings)}")
    how = f"signal {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit status {code}"
    return InputError(f"{src.origin}: the ingest process stopped ({how}), most likely over its "
                      f"{settings.ingest.max_memory_mb:,} MB memory limit (CHAPTERVERSE_INGEST_MAX_MEMORY_MB); "
                      "nothing was stored")


def ingest_confined(settings: Settings, src: Source, collection: str, *, actor: Actor, job: Job | None,
                    deadline_s: float, on_progress: Callable[[str], None] | None = None,
                    progress: ProgressLog | None = None) -> IngestResult:
    """``ingest_source`` in a limited child process; the same result or the same exceptions
    (InputError, DatabaseError, IndexUnavailable, ModelError, JobLost). With ``job``, the child
    records the job done in the document's transaction (``bot.queue.record_done``)."""
    header = {"settings": settings_payload(settings), "collection": collection, "actor": asdict(actor),
              "source": {"name": src.name, "origin": src.origin, "url": src.url}, "bytes": len(src.data),
              "job": None if job is None else claim_of(job),
              "deadline_s": deadline_s}
    with child.spawn("bot.confined", str(os.getpid()), stdin=[json.dumps(header).encode() + b"\n", src.data],
                     wait_s=30) as kid:
        outcome = _listen(kid.messages(STATE_EVERY_S), job, on_progress, progress)
    if outcome is None:
        raise _stopped(kid.process.returncode, settings, src, kid.last_words[-4096:])
    kind, payload = outcome
    if kind == "result":
        return IngestResult(**payload)
    error_kind, message = payload
    if error_kind == "lost":
        if job is not None:
            job.lost.set()
        raise JobLost(job.id if job is not None else 0)
    if error_kind == "memory":
        raise InputError(f"{src.origin}: {memory_message(settings)}")
    raise _ERRORS.get(error_kind, RuntimeError)(message)


def _listen(messages: Iterator[list | None], job: Job | None, on_progress: Callable[[str], None] | None,
            progress: ProgressLog | None) -> tuple[str, Any] | None:
    """The child's answer (("result", fields) or ("error", (kind, message))), None when it died
    without one. Raises JobLost (the child is killed on the way out) when the job stops being ours."""
    for msg in messages:
        if job is not None and job.lost.is_set():
            raise JobLost(job.id)
        if msg is None:
            continue
        kind, body = msg[0], msg[1:]
        if kind == "note" and len(body) == 1 and on_progress is not None:
            on_progress(str(body[0]))
        elif kind == "state" and len(body) == 1 and isinstance(body[0], dict) and progress is not None:
            _apply(progress, body[0])
        elif kind == "result" and len(body) == 1 and isinstance(body[0], dict):
            return "result", body[0]
        elif kind == "error" and len(body) == 2:
            return "error", (str(body[0]), str(body[1]))
    return None


# ---------------------------------------------------------------------------------------------
# the child

def _limit(settings: Settings) -> None:
    """The address-space limit, soft only: the PDF parser child (``ingest.isolate``) sets its own,
    smaller or larger, on itself."""
    mem = settings.ingest.max_memory_mb * 1024 * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (mem if hard == resource.RLIM_INFINITY else min(mem, hard), hard))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


# how running out of address space reads: Python, glibc, the dynamic loader (a library that cannot be
# mapped), C++ (torch, onnxruntime), and a thread whose stack finds no room ("can't start new thread")
_NO_MEMORY = re.compile(r"\balloc|out of memory|cannot allocate|failed to map segment|bad_alloc|ENOMEM|"
                        r"can't start new thread|pthread_create", re.IGNORECASE)


def _out_of_memory(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or what caused it) is the address-space limit speaking."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, MemoryError) or _NO_MEMORY.search(str(exc)):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def _state(progress: ProgressLog) -> dict[str, Any]:
    return {"step": progress.step, "total": progress.total, "done": progress.done, "ahead": progress.ahead,
            "done_at_start": progress.done_at_start,
            "pages_total": progress.pages_total, "pages_done": progress.pages_done, "ocr_pages": progress.ocr_pages}


class _Forwarding(ProgressLog):
    """The pipeline's progress in the child: each page read, step begun and batch embedded is sent
    to the parent as it happens (the job's Slack progress paces its own updates)."""

    def __init__(self, name: str, send: Callable[[list], None]) -> None:
        super().__init__(name, 10 ** 9, stream=sys.stderr)  # its own timer never writes
        self._send = send

    def _changed(self) -> None:
        self._send(["state", _state(self)])

    def pages_changed(self) -> None:
        self._changed()

    def begin(self, step: str, total: int | None = None, done: int = 0) -> None:
        super().begin(step, total, done)
        self._changed()

    def advance(self, n: int) -> None:
        super().advance(n)
        self._changed()


def main() -> None:
    """``python -m bot.confined FD PARENT-PID``: the request on stdin, JSON lines on descriptor FD
    (``ingest.child``)."""
    send = answer_on(int(sys.argv[1]))
    die_with_parent(sys.argv[2])  # the job runner that started it (retrieval.lifetime)
    request = json.loads(sys.stdin.buffer.readline())
    settings = Settings.model_validate(request["settings"])
    _limit(settings)
    data = sys.stdin.buffer.read(int(request["bytes"]))
    s = request["source"]
    src = Source(s["name"], s["origin"], data, s["url"])
    mine, deadline_s = request["job"], float(request["deadline_s"])
    progress = _Forwarding(src.name, send)
    done = threading.Event()

    def states() -> None:
        while not done.wait(STATE_EVERY_S):
            send(["state", _state(progress)])

    def before_commit(conn: Any, status: str, pages: int, chunks: int) -> None:
        if mine is not None:
            record_done(conn, mine, deadline_s, status, pages, chunks)

    threading.Thread(target=states, name="confined-state", daemon=True).start()
    try:
        from ingest.pipeline import ingest_source  # noqa: PLC0415  (PyMuPDF, the models: under the limit)
        from retrieval.encode.embed import get_embedder  # noqa: PLC0415

        embedder = get_embedder(settings.search.embedding_model)
        res = ingest_source(settings, embedder, src, request["collection"], quiet=True,
                            on_progress=lambda text: send(["note", text]), progress=progress,
                            actor=Actor(**request["actor"]), before_commit=before_commit)
        done.set()
        send(["state", _state(progress)])
        send(["result", res.as_dict()])
    except JobLost:
        send(["error", "lost", "the job is no longer this worker's"])
    except MemoryError:
        send(["error", "memory", ""])
    except (InputError, DatabaseError, ModelError) as exc:
        send(["error", next(kind for kind, error in _ERRORS.items() if isinstance(exc, error)), str(exc)])
    except Exception as exc:  # noqa: BLE001
        if _out_of_memory(exc):
            send(["error", "memory", ""])
        else:
            import traceback  # noqa: PLC0415

            traceback.print_exc()
            send(["error", "unexpected", f"unexpected error ({type(exc).__name__})"])
    finally:
        done.set()


if __name__ == "__main__":
    main()
