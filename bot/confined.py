"""A bot's ingest job in a process of its own, ``python -m bot.confined``, under an address-space
limit (``RLIMIT_AS``, CHAPTERVERSE_INGEST_MAX_MEMORY_MB), so one hostile document fails its own job, with
the limit named, instead of growing the bot (issue 32, item 1). The child is a fresh interpreter (none
of the bot's threads, sockets or Slack clients) that sets the limit before it loads anything.

The parent writes one JSON line (``ingest_confined``'s header) and the PDF's bytes on the child's
stdin; the child answers in JSON lines on a pipe of its own: ``note`` (the pipeline's progress text),
``state`` (where the ingest is), then ``result`` or ``error``. The document is written and the job
recorded done in one transaction, in the child (``bot.queue.record_done``); a job that stops being
this worker's while the child runs (its deadline, another worker) kills the child, and its
transaction, if one was open, is rolled back.
"""

from __future__ import annotations

import json
import os
import re
import resource
import select
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from pydantic import BaseModel, SecretStr

from bot.queue import Job, JobLost, claim_of, record_done
from ingest.pipeline import IngestResult
from ingest.progress import ProgressLog
from ingest.sources import InputError, Source
from ingest.store import Actor
from retrieval.encode.embed import ModelError
from retrieval.settings import Settings
from retrieval.store.db import DatabaseError, IndexUnavailable

STATE_EVERY_S = 0.5
_ERRORS: dict[str, type[Exception]] = {"input": InputError, "database": DatabaseError,
                                       "unavailable": IndexUnavailable, "model": ModelError}


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
    progress.pages_done = int(state.get("pages_done") or 0)  # may raise JobLost (SlackProgress)
    done = int(state.get("done") or 0)
    if done > progress.done:
        progress.advance(done - progress.done)


def _stopped(child: subprocess.Popen, settings: Settings, src: Source, last_words: str) -> Exception:
    code = child.returncode
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
    with tempfile.TemporaryFile() as errors:
        read_end, write_end = os.pipe()
        try:
            child = subprocess.Popen([sys.executable, "-m", "bot.confined", str(write_end), str(os.getpid())],
                                     stdin=subprocess.PIPE,
                                     stdout=errors, stderr=errors, close_fds=True, pass_fds=(write_end,))
        except BaseException:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)
        feeder = threading.Thread(target=_feed, args=(child, header, src.data), name="confined-feed", daemon=True)
        feeder.start()
        try:
            outcome = _listen(child, read_end, job, on_progress, progress)
        except BaseException:
            child.kill()
            raise
        finally:
            os.close(read_end)
            try:
                child.wait(30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        if outcome is None:
            errors.seek(0)
            tail = errors.read()[-4096:].decode("utf-8", "replace")
            raise _stopped(child, settings, src, tail)
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


def _feed(child: subprocess.Popen, header: dict[str, Any], data: bytes) -> None:
    try:
        child.stdin.write(json.dumps(header).encode() + b"\n")
        child.stdin.write(data)
        child.stdin.close()
    except (BrokenPipeError, OSError):
        pass  # it died: its exit status says how


def _listen(child: subprocess.Popen, fd: int, job: Job | None, on_progress: Callable[[str], None] | None,
            progress: ProgressLog | None) -> tuple[str, Any] | None:
    """The child's answer (("result", fields) or ("error", (kind, message))), None when it died
    without one. Raises JobLost (the child is killed by the caller) when the job stops being ours."""
    buffer = b""
    while True:
        if job is not None and job.lost.is_set():
            raise JobLost(job.id)
        ready, _, _ = select.select([fd], [], [], STATE_EVERY_S)
        if not ready:
            continue
        block = os.read(fd, 65536)
        if not block:
            return None
        buffer += block
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            try:
                msg = json.loads(line)
                kind = msg[0]
            except (ValueError, IndexError, TypeError, KeyError):
                return None
            if kind == "note" and on_progress is not None:
                on_progress(str(msg[1]))
            elif kind == "state" and progress is not None and isinstance(msg[1], dict):
                _apply(progress, msg[1])
            elif kind == "result" and isinstance(msg[1], dict):
                return "result", msg[1]
            elif kind == "error" and len(msg) == 3:
                return "error", (str(msg[1]), str(msg[2]))


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
# mapped), C++ (torch, onnxruntime)
_NO_MEMORY = re.compile(r"\balloc|out of memory|cannot allocate|failed to map segment|bad_alloc|ENOMEM",
                        re.IGNORECASE)


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
            "pages_total": progress.pages_total, "pages_done": progress.pages_done}


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


def _die_with_parent(parent: int) -> None:
    """SIGKILL this process when the job runner that started it goes (Linux ``PR_SET_PDEATHSIG``): a
    bot killed mid-job leaves no orphan to write the document its successor will write again."""
    try:
        import ctypes  # noqa: PLC0415

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it went before the call above
        os._exit(1)


def main() -> None:
    """``python -m bot.confined FD PARENT-PID``: the request on stdin, JSON lines on descriptor FD."""
    fd = int(sys.argv[1])
    if len(sys.argv) > 2:
        _die_with_parent(int(sys.argv[2]))
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    out = os.fdopen(fd, "w", encoding="utf-8")
    lock = threading.Lock()

    def send(msg: list) -> None:
        with lock:
            out.write(json.dumps(msg, default=str) + "\n")
            out.flush()

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
    except IndexUnavailable as exc:
        send(["error", "unavailable", str(exc)])
    except (InputError, DatabaseError, ModelError) as exc:
        kind = "input" if isinstance(exc, InputError) else "database" if isinstance(exc, DatabaseError) else "model"
        send(["error", kind, str(exc)])
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
