"""A warm command line: ``chapterverse ask`` and ``search`` answered by a process that stays loaded.

A cold ``ask`` spends most of its two seconds before and after the question: importing, starting the
embedded Postgres, loading the query encoder and reranker, and stopping the server at exit. So the
console command (``main``, the ``chapterverse`` script) first offers ``ask`` and ``search`` to a warm
process of the same user, code and environment, over a Unix socket; when there is none it runs the
command itself as before and then starts one in the background for the next call. The warm process
holds the embedded server and the models, runs each command exactly as the cold path would (the same
Typer app, its output captured and returned with the exit status) one at a time, and exits after
``CHAPTERVERSE_DB_WARM_S`` seconds without a command (default 600; 0: never start one), stopping the
embedded server as the last process attached to it; ``chapterverse db stop`` stops it at once.

Safety:
* one socket per (user, code, environment): a changed ``CHAPTERVERSE_*``/``DATABASE_URL``/provider
  variable, another home or an edited source file means another process, never a stale answer;
* the sockets live in ``/tmp/chapterverse-cli-<uid>``, made 0700; a folder that is not a private
  directory of this user is never used (the command runs cold), and the peer of every connection
  must be the same user (``SO_PEERCRED``);
* a socket whose process is gone is removed by the next warm process (which holds a lock for its
  lifetime, so two never serve one socket); a client that cannot connect runs cold;
* before each command the warm process checks its database still answers; if not (the server was
  killed), it tells the client to run cold and exits;
* ``ask`` and ``search`` only read, so a command the warm process failed to finish is run cold again.

This module is imported by every command line call: it uses the standard library only.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
import struct
import subprocess
import sys
import time
from pathlib import Path

WARM_ENV = "CHAPTERVERSE_DB_WARM_S"
DEFAULT_IDLE_S = 600
SERVED = frozenset({"ask", "search"})
# the environment a command's result may depend on: a process serves only an identical one
_KEYED_ENV = ("CHAPTERVERSE_", "DATABASE_URL", "GEMINI_", "GOOGLE_", "OPENAI_", "HF_", "TRANSFORMERS_", "SLACK_",
              "HOME", "XDG_", "PG", "LANG", "LC_", "TZ", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy",
              "https_proxy", "no_proxy")
# set by the command line itself (setdefault) on its way: not part of what the user gave
_SET_BY_US = frozenset({"HF_HUB_OFFLINE", "HF_HUB_DISABLE_PROGRESS_BARS", "TRANSFORMERS_VERBOSITY", "XDG_RUNTIME_DIR"})
_CODE_DIRS = ("retrieval", "ingest")  # what ask and search import (ingest registers its commands)
_MAX_REPLY = 64 * 1024 * 1024


def idle_seconds(environ: dict[str, str] | os._Environ[str] = os.environ) -> int:
    """``CHAPTERVERSE_DB_WARM_S`` as seconds; 0 when off or not a whole number (the cold path's
    settings check then names the problem)."""
    raw = environ.get(WARM_ENV, str(DEFAULT_IDLE_S)).strip()
    return int(raw) if raw.isdigit() else 0


def eligible(argv: list[str]) -> bool:
    """Whether a warm process may run this command line: ``ask`` or ``search`` as the first word (no
    ``-v``, which configures logging per process), no help, no per-process timings, warm not off."""
    return (bool(argv) and argv[0] in SERVED and not {"--help", "-h"} & set(argv)
            and not os.environ.get("CHAPTERVERSE_TIMINGS") and idle_seconds() > 0)


def _code_stamp() -> list[tuple[str, int, int]]:
    root = Path(__file__).resolve().parents[1]
    out: list[tuple[str, int, int]] = []
    for name in _CODE_DIRS:
        for dirpath, _dirs, files in os.walk(root / name):
            for f in files:
                if f.endswith((".py", ".sql", ".json")):
                    st = os.stat(os.path.join(dirpath, f))
                    out.append((os.path.join(dirpath, f), st.st_mtime_ns, st.st_size))
    return sorted(out)


def key(environ: dict[str, str] | os._Environ[str] = os.environ) -> str:
    """What a warm process must share with a command to run it: the environment (virtualenv) and
    interpreter, the user, every source file's stamp and the keyed part of the environment variables."""
    env = sorted((k, v) for k, v in environ.items() if k.startswith(_KEYED_ENV) and k not in _SET_BY_US)
    blob = json.dumps([sys.prefix, os.path.realpath(sys.executable), os.getuid(), _code_stamp(), env])
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def socket_dir() -> Path:
    return Path("/tmp") / f"chapterverse-cli-{os.getuid()}"


def private_dir(create: bool) -> Path | None:
    """The sockets' folder when it is a private directory of this user (made so when ``create``), else None."""
    folder = socket_dir()
    if create:
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            pass
        except OSError:
            return None
    try:
        st = folder.lstat()
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None
    return folder


def socket_path(folder: Path, environ: dict[str, str] | os._Environ[str] = os.environ) -> Path:
    return folder / f"{key(environ)}.sock"


# ------------------------------------------------------------------------------------------ client
def _exchange(path: Path, request: dict[str, object], timeout_s: float | None = None) -> dict[str, object] | None:
    """Send one request and read the reply; None when no warm process answers (no socket, a stale one,
    a process that died before replying)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout_s)
            s.connect(str(path))
            s.sendall(json.dumps(request).encode())
            s.shutdown(socket.SHUT_WR)
            chunks: list[bytes] = []
            size = 0
            while chunk := s.recv(1 << 16):
                chunks.append(chunk)
                size += len(chunk)
                if size > _MAX_REPLY:
                    return None
    except OSError:
        return None
    try:
        reply = json.loads(b"".join(chunks))
    except ValueError:
        return None
    return reply if isinstance(reply, dict) else None


def run_warm(argv: list[str]) -> int | None:
    """Run ``argv`` in this user's warm process, printing what it printed; its exit status, or None
    when it must run cold (no warm process, or one that cannot serve it)."""
    folder = private_dir(create=False)
    if folder is None:
        return None
    path = socket_path(folder)
    if not path.exists():
        return None
    reply = _exchange(path, {"argv": argv})
    if reply is None or reply.get("retry") or not isinstance(reply.get("code"), int):
        return None
    sys.stdout.write(str(reply.get("stdout", "")))
    sys.stdout.flush()
    sys.stderr.write(str(reply.get("stderr", "")))
    sys.stderr.flush()
    return int(reply["code"])  # type: ignore[arg-type]


def start_warm(path: Path) -> None:
    """Start a warm process serving ``path`` in the background (it waits for this process to exit, so
    the embedded server this command started has stopped before it starts it again)."""
    idle = idle_seconds()
    folder = private_dir(create=True)
    if idle <= 0 or folder is None or path.parent != folder:
        return
    if _exchange(path, {"ping": True}, timeout_s=1.0) is not None:
        return  # one is serving already
    log = os.open(folder / f"{path.stem}.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        subprocess.Popen([sys.executable, "-m", "retrieval.warm", str(path), str(idle), str(os.getpid())],
                         stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, close_fds=True)
    except OSError:
        pass  # the next command runs cold again
    finally:
        os.close(log)


def stop_warm() -> bool:
    """Stop the warm process of this environment; whether one was running."""
    folder = private_dir(create=False)
    return folder is not None and _exchange(socket_path(folder), {"stop": True}, timeout_s=30.0) is not None


INTERRUPTED = 130  # a shell's status for a command ended by Ctrl-C


def main() -> None:
    """The ``chapterverse`` console command: warm when it can be, else the full command line. A Ctrl-C
    that reaches here (while Python loads the command, or during a warm exchange: a command's own
    handling comes first) ends it with one line and status 130, not a traceback, and starts no warm
    process."""
    argv = sys.argv[1:]
    warm = eligible(argv)
    path = socket_path(socket_dir()) if warm else None
    ran = False  # the cold command ran: a warm process is started for the next call
    try:
        if warm:
            code = run_warm(argv)
            if code is not None:
                sys.exit(code)
        from retrieval.cli import main as cold  # noqa: PLC0415

        ran = True
        cold()
    except KeyboardInterrupt:
        ran = False
        sys.stderr.write("interrupted\n")
        sys.exit(INTERRUPTED)
    finally:
        if path is not None and ran:
            start_warm(path)


# ------------------------------------------------------------------------------------- the process
class _CurrentStderr:
    """A stream that writes to whatever ``sys.stderr`` is now (a command's captured stderr)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def _peer_is_me(conn: socket.socket) -> bool:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid == os.getuid()


def _run(app: object, argv: list[str]) -> tuple[int, str, str]:
    """Run one command line in this process with its output captured: (exit status, stdout, stderr)."""
    import io  # noqa: PLC0415
    import traceback  # noqa: PLC0415
    from contextlib import redirect_stderr, redirect_stdout  # noqa: PLC0415

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            app(args=argv, prog_name="chapterverse")  # type: ignore[operator]
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except Exception:  # noqa: BLE001  (reported like the cold path's unexpected errors)
            traceback.print_exc()
            code = 1
    return code, out.getvalue(), err.getvalue()


def _database_answers() -> bool:
    from retrieval.settings import get_settings  # noqa: PLC0415
    from retrieval.store import db  # noqa: PLC0415

    try:
        with db.connect(get_settings(), timeout_s=2.0) as conn:
            conn.execute("SELECT 1")
    except Exception:  # noqa: BLE001  (down, killed, refusing: the client runs cold)
        return False
    return True


def _wait_for_exit(pid: int, limit_s: float = 30.0) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        except PermissionError:
            return
        time.sleep(0.05)


def serve(path: Path, idle_s: int, parent: int) -> None:
    """Serve ``ask`` and ``search`` on ``path`` until ``idle_s`` pass without one, or a stop."""
    import fcntl  # noqa: PLC0415
    import logging  # noqa: PLC0415

    _wait_for_exit(parent)
    lock = os.fdopen(os.open(path.with_suffix(".lock"), os.O_WRONLY | os.O_CREAT, 0o600), "w")  # held for life
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return  # another warm process serves this socket
    from retrieval.cli import app, register_plugins, setup_logging  # noqa: PLC0415

    register_plugins()
    setup_logging(False)
    root = logging.getLogger()
    for handler in root.handlers:
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(_CurrentStderr())  # type: ignore[arg-type]
    code, out, err = _run(app, ["search", "warm up", "--json"])  # loads the models and starts the database
    if code != 0:
        sys.stderr.write(f"warm-up failed ({code}): {err}\n")
        return
    path.unlink(missing_ok=True)  # a socket left by a process that is gone (we hold the lock)
    old = os.umask(0o177)
    try:
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(path))
    finally:
        os.umask(old)
    server.listen(16)
    server.settimeout(idle_s)
    try:
        while True:
            try:
                conn, _ = server.accept()
            except TimeoutError:
                return  # idle: exit, and the embedded server stops with the last process attached
            with conn:
                if not _serve_one(conn, app):
                    return
    finally:
        path.unlink(missing_ok=True)
        server.close()


def _serve_one(conn: socket.socket, app: object) -> bool:
    """Answer one connection; False when the process should exit."""
    conn.settimeout(30.0)
    if not _peer_is_me(conn):
        return True
    chunks: list[bytes] = []
    try:
        while chunk := conn.recv(1 << 16):
            chunks.append(chunk)
        request = json.loads(b"".join(chunks))
    except (OSError, ValueError):
        return True
    if not isinstance(request, dict):
        return True
    if request.get("ping"):
        reply: dict[str, object] = {"pong": True}
        keep = True
    elif request.get("stop"):
        reply, keep = {"stopped": True}, False
    elif not _database_answers():
        reply, keep = {"retry": True}, False
    else:
        argv = request.get("argv")
        if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv) and argv[0] in SERVED):
            return True
        code, out, err = _run(app, argv)
        reply, keep = {"code": code, "stdout": out, "stderr": err}, True
    try:
        conn.settimeout(None)
        conn.sendall(json.dumps(reply).encode("utf-8", "surrogatepass"))
    except OSError:
        pass  # the client went away (Ctrl-C)
    return keep


if __name__ == "__main__":
    serve(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
