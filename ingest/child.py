"""A worker process that answers in JSON lines on a pipe of its own: ``ingest.isolate`` (the PDF
parser) and ``bot.confined`` (a bot's ingest job) both run one.

The child is ``python -m <module> FD ARGS…``, a fresh interpreter (none of the parent's threads,
sockets or models), with at most two malloc arenas (``MALLOC_ARENA_MAX=2``: OCR's threads otherwise
reserve 64 MB of address space each, and the parser runs under an address-space limit; measured on
five ACS pages, peak address space 1.92 → 1.45 GB, same speed). Its request comes on stdin; its answer goes as JSON lines (lists whose first item
names the message) on descriptor FD, not stdout: a library in the child may print there (MuPDF prints
its warnings on stdout), so in the child stdout is stderr, and both go to a temporary file whose end
the parent reads once the child has exited. Standard library only: the parser child imports nothing
heavy before it has limited itself.

A child never outlives the process that started it: it runs in a process group of its own (a
terminal's Ctrl-C reaches the command, which stops its children, ``stop_all``, instead of each
child handling it, or not, in the middle of C code), and Linux kills it when its parent dies
(``PR_SET_PDEATHSIG``, asked for by the child itself first thing; the signal comes when the *thread*
that started the child exits, and ``spawn`` holds that thread until the child has exited).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

from retrieval.lifetime import die_with_parent, parent_env

_running: set[subprocess.Popen] = set()  # every child ``spawn`` started that has not been waited for
_running_lock = threading.Lock()


@dataclass
class Child:
    process: subprocess.Popen
    fd: int  # the read end of the child's JSON-line pipe
    last_words: str = ""  # the end of what it wrote on stdout and stderr, once it has exited

    def messages(self, tick_s: float | None = None) -> Iterator[list[Any] | None]:
        """The child's messages as they come; with ``tick_s``, None after each ``tick_s`` seconds
        without one (so the caller can check on other things). Ends when the child closes the pipe
        (it exited) or sends a line that is not a non-empty JSON list (not our protocol)."""
        buffer = b""
        while True:
            if tick_s is not None and not select.select([self.fd], [], [], tick_s)[0]:
                yield None
                continue
            block = os.read(self.fd, 65536)
            if not block:
                return
            *lines, buffer = (buffer + block).split(b"\n")
            for line in lines:
                try:
                    msg = json.loads(line)
                except ValueError:
                    return
                if not isinstance(msg, list) or not msg:
                    return
                yield msg


@contextmanager
def spawn(module: str, *args: str, stdin: Sequence[bytes], wait_s: float) -> Iterator[Child]:
    """Run ``python -m module FD *args`` with ``stdin`` written to it (on a thread of its own, so a
    child that stops reading holds nothing up). On the way out the child is waited for ``wait_s``
    seconds, then killed (at once when the caller raised), and ``last_words`` is read."""
    with tempfile.TemporaryFile() as errors:
        read_end, write_end = os.pipe()
        try:
            process = subprocess.Popen([sys.executable, "-m", module, str(write_end), *args], stdin=subprocess.PIPE,
                                       stdout=errors, stderr=errors, close_fds=True, pass_fds=(write_end,),
                                       process_group=0,  # its own: Ctrl-C is the parent's to handle
                                       env={**os.environ, "MALLOC_ARENA_MAX": "2", **parent_env()})
        except BaseException:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)  # the child holds its copy: end of file here when it exits
        with _running_lock:
            _running.add(process)
        threading.Thread(target=_feed, args=(process, stdin), name=f"{module}-stdin", daemon=True).start()
        child = Child(process, read_end)
        try:
            yield child
        except BaseException:
            stop(process)
            raise
        finally:
            os.close(read_end)
            try:
                process.wait(wait_s)
            except subprocess.TimeoutExpired:
                stop(process)
                process.wait()
            with _running_lock:
                _running.discard(process)
            errors.seek(0)
            child.last_words = errors.read()[-8192:].decode("utf-8", "replace")


def stop(process: subprocess.Popen) -> None:
    """Kill a child and whatever it started in its process group (SIGKILL; nothing if it has exited)."""
    if process.poll() is None:  # not waited for yet: its process group is still its own
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


def stop_all() -> None:
    """Kill every child ``spawn`` started that is still running (an interrupted command: the thread
    waiting on a child reads its end at once, instead of the command waiting for it to finish)."""
    with _running_lock:
        running = list(_running)
    for process in running:
        stop(process)


def _feed(process: subprocess.Popen, chunks: Sequence[bytes]) -> None:
    with suppress(OSError):  # it died: its exit status says how
        for chunk in chunks:
            process.stdin.write(chunk)
        process.stdin.close()


def answer_on(fd: int) -> Callable[[list[Any]], None]:
    """In the child, first thing: it dies with its parent (``retrieval.lifetime``); stdout becomes
    stderr, where nothing can break the protocol; returns ``send(msg)``, which writes one JSON line on
    descriptor ``fd`` (from any thread)."""
    die_with_parent()
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    out = os.fdopen(fd, "w", encoding="utf-8")
    lock = threading.Lock()

    def send(msg: list[Any]) -> None:
        with lock:
            out.write(json.dumps(msg, default=str) + "\n")
            out.flush()

    return send
