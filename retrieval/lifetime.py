"""A child process that dies with the process that started it (pure logic and one Linux call).

Parsers, ingest jobs and model exports run in child processes. Each asks Linux, first thing, to be
sent SIGKILL when its parent dies (``PR_SET_PDEATHSIG``; the signal comes when the *thread* that
started it ends, and every caller here waits for its child on that thread), so a parent killed with
SIGKILL leaves no child burning CPU. A child whose parent died before the request took hold has been
handed to a reaper, which need not be pid 1: the parent's pid, passed in ``PARENT_VARIABLE``, tells.
"""

from __future__ import annotations

import os
import signal
import sys
from contextlib import suppress

PARENT_VARIABLE = "INGEST_CHILD_PARENT_PID"  # the process a child must die with


def parent_env() -> dict[str, str]:
    """What a child's environment must hold for ``die_with_parent`` to know its parent: this process."""
    return {PARENT_VARIABLE: str(os.getpid())}


def orphaned(parent: str | None, ppid: int) -> bool:
    """Whether a child whose parent was ``parent`` (``PARENT_VARIABLE``, None when it was started some
    other way) lost it: its parent now is another process (``ppid``), or, without one, the init process."""
    return ppid != int(parent) if parent and parent.isdigit() else ppid == 1


def die_with_parent(parent: str | None = None) -> None:
    """Ask Linux to SIGKILL this process when its parent dies; exit at once when the parent is gone
    already. ``parent``: the parent's pid as given (default: ``PARENT_VARIABLE``)."""
    if sys.platform.startswith("linux"):
        with suppress(OSError, AttributeError):
            import ctypes  # noqa: PLC0415

            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1: PR_SET_PDEATHSIG
    if orphaned(parent if parent is not None else os.environ.get(PARENT_VARIABLE), os.getppid()):
        os._exit(1)
