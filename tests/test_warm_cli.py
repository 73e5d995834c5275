"""Issue 40, item 1: a warm ``ask``. The real ``chapterverse`` console command, on its own embedded
home: the first ``ask`` runs cold and leaves a warm process behind; later ``ask`` and ``search`` print
exactly what the cold command prints, through it; a killed database, a killed warm process, another
home, a folder that is not private and ``CHAPTERVERSE_DB_WARM_S`` (idle stop, 0 = off) all behave."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pymupdf
import pytest

from retrieval import warm
from tests.conftest import seed_home

SCRIPT = Path(sys.executable).with_name("chapterverse")
QUESTION = "What is the maximum aerotow speed of the Zephyr glider?"


def _env(home: Path, idle: str = "120") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CHAPTERVERSE_HOME")}
    return env | {"CHAPTERVERSE_HOME": str(home), "CHAPTERVERSE_DB_WARM_S": idle}


def _cv(env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=timeout)


def _cold(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "retrieval.cli", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def _sock(env: dict[str, str]) -> Path:
    return warm.socket_path(warm.socket_dir(), env)


def _serving(env: dict[str, str], timeout: float = 180) -> int:
    """The pid of the warm process serving ``env``, once it answers."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _sock(env).exists() and warm._exchange(_sock(env), {"ping": True}, timeout_s=2) is not None:
            return _pid_on(_sock(env))
        time.sleep(0.3)
    raise AssertionError(f"no warm process for {env['CHAPTERVERSE_HOME']}; log: {_log(env)}")


def _log(env: dict[str, str]) -> str:
    log = _sock(env).with_suffix(".log")
    return log.read_text() if log.exists() else "(none)"


def _pid_on(sock: Path) -> int:
    """The process listening on ``sock`` (from /proc: the socket inode in /proc/net/unix)."""
    inode = next(line.split()[6] for line in Path("/proc/net/unix").read_text().splitlines()[1:]
                 if line.split()[-1:] == [str(sock)])
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if any(os.readlink(fd) == f"socket:[{inode}]" for fd in (proc / "fd").iterdir()):
                    return int(proc.name)
            except OSError:
                continue
    raise AssertionError(f"nobody listens on {sock}")


def _gone(pid: int, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            if Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] == "Z":
                return True
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


def _postmaster(home: Path) -> int | None:
    pidfile = home / "pgdata" / "postmaster.pid"
    if not pidfile.exists():
        return None
    pid = int(pidfile.read_text().split()[0])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    return pid


@pytest.fixture(scope="module")
def homes(encoder_exports) -> Iterator[tuple[Path, tuple[Path, ...]]]:
    """A folder for homes under world-readable parents (the embedded server runs as another user for root),
    and the session's encoder exports each new home starts with (nothing here checks the one-time export)."""
    root = Path(tempfile.mkdtemp(prefix="cv-warm-", dir="/tmp"))
    root.chmod(0o755)
    yield root, encoder_exports
    shutil.rmtree(root, ignore_errors=True)


def _home(homes: tuple[Path, tuple[Path, ...]], name: str, fact: str) -> tuple[Path, dict[str, str], Path]:
    tmp_path, exports = homes
    home = seed_home(tmp_path / name, exports)
    pdf = tmp_path / f"{name}.pdf"
    doc = pymupdf.open()
    for i in range(2):
        text = fact if i == 1 else "Zephyr glider general description, cockpit layout and checklists. " * 3
        doc.new_page().insert_textbox(pymupdf.Rect(72, 72, 540, 720), text * 3, fontsize=11)
    doc.save(pdf)
    env = _env(home)
    assert _cold(env, "ingest", str(pdf)).returncode == 0
    return home, env, pdf


def _stop(env: dict[str, str]) -> None:
    _cold(env, "db", "stop")


def _stopped(home: Path, env: dict[str, str]) -> None:
    """Stop the home's warm process and wait for its embedded server to be gone: the state the home's
    ingest left it in (the next test starts cold, as on a fresh home)."""
    _stop(env)
    deadline = time.monotonic() + 30
    while _postmaster(home) is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _postmaster(home) is None, "the embedded server of the shared home still runs"


@pytest.fixture(scope="module")
def zephyr_home(homes):
    """One home holding the Zephyr manual, made once for the module (each test gets it stopped)."""
    home, env, _ = _home(homes, "zephyr", "The maximum aerotow speed of the Zephyr glider is 81 knots. ")
    _stopped(home, env)
    yield home, env
    _stop(env)


@pytest.fixture
def zephyr(zephyr_home):
    home, env = zephyr_home
    assert _postmaster(home) is None and not _sock(env).exists()  # as its ingest left it: nothing running
    yield home, env
    _stopped(home, env)


def test_later_calls_are_served_warm_and_print_what_the_cold_command_prints(zephyr) -> None:
    home, env = zephyr
    first = _cv(env, "ask", QUESTION)
    assert first.returncode == 0 and "81 knots" in first.stdout, first.stderr
    pid = _serving(env)
    cold = _cold(env, "ask", QUESTION)
    warmed = _cv(env, "ask", QUESTION)
    assert _pid_on(_sock(env)) == pid  # the same warm process, still serving
    strip = lambda out: out.rsplit("(answerer:", 1)[0]  # noqa: E731  (the timing line differs)
    assert warmed.returncode == 0 and strip(warmed.stdout) == strip(cold.stdout) and "81 knots" in warmed.stdout
    searched = _cv(env, "search", "aerotow speed", "--json")
    assert searched.returncode == 0 and '"page"' in searched.stdout
    bad = _cv(env, "search", "aerotow", "--k", "0")  # a usage error: same one line and status as cold
    cold_bad = _cold(env, "search", "aerotow", "--k", "0").stderr.replace("python -m retrieval.cli", "chapterverse")
    assert (bad.returncode, bad.stderr) == (1, cold_bad)
    unknown = _cv(env, "ask", QUESTION, "--collection", "defualt")
    cold_unknown = _cold(env, "ask", QUESTION, "--collection", "defualt")
    assert (unknown.returncode, unknown.stderr) == (cold_unknown.returncode, cold_unknown.stderr) != (0, "")
    not_utf8 = subprocess.run([str(SCRIPT), "ask", b"fuel \xff\xfe"], capture_output=True, text=True, env=env)
    assert not_utf8.returncode == 1 and "not valid UTF-8 text (bytes 0xff 0xfe)" in not_utf8.stderr
    stat = os.stat(_sock(env))
    assert stat.st_mode & 0o077 == 0 and os.stat(warm.socket_dir()).st_mode & 0o077 == 0
    assert _cold(env, "db", "stop").stdout.startswith("stopped the warm process")
    assert _gone(pid) and not _sock(env).exists()
    deadline = time.monotonic() + 30
    while _postmaster(home) is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _postmaster(home) is None  # the embedded server stopped with it


def test_a_killed_database_or_warm_process_costs_one_cold_call(zephyr) -> None:
    home, env = zephyr
    _cv(env, "ask", QUESTION)
    pid = _serving(env)
    postmaster = _postmaster(home)
    assert postmaster is not None
    os.kill(postmaster, signal.SIGKILL)
    assert _gone(postmaster)
    after = _cv(env, "ask", QUESTION)  # the warm process finds its database gone: cold, then warm again
    assert after.returncode == 0 and "81 knots" in after.stdout, after.stdout + after.stderr
    assert _gone(pid)
    pid = _serving(env)
    os.kill(pid, signal.SIGKILL)  # its socket stays behind
    assert _gone(pid) and _sock(env).exists()
    again = _cv(env, "ask", QUESTION)
    assert again.returncode == 0 and "81 knots" in again.stdout
    assert _serving(env) != pid


def test_two_homes_answer_from_their_own_documents(zephyr, homes) -> None:
    _, env = zephyr
    _, other_env, _ = _home(homes, "kestrel", "The maximum aerotow speed of the Zephyr glider is 64 knots. ")
    try:
        for e in (env, other_env):
            _cv(e, "ask", QUESTION)
        assert _serving(env) != _serving(other_env)
        assert "81 knots" in _cv(env, "ask", QUESTION).stdout
        assert "64 knots" in _cv(other_env, "ask", QUESTION).stdout
        changed = env | {"CHAPTERVERSE_ANSWERER": "extractive"}
        assert _sock(changed) != _sock(env)  # another environment is another process, never a stale one
    finally:
        _stop(other_env)


def test_idle_stop_and_off(zephyr) -> None:
    home, env = zephyr  # a home holding "81 knots", nothing running (it had a home of its own with the same text)
    short = env | {"CHAPTERVERSE_DB_WARM_S": "3"}
    _cv(short, "ask", QUESTION)
    pid = _serving(short)
    assert _gone(pid, timeout=60), "the warm process did not stop when idle"
    deadline = time.monotonic() + 30
    while _postmaster(home) is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _postmaster(home) is None
    off = env | {"CHAPTERVERSE_DB_WARM_S": "0"}
    assert "81 knots" in _cv(off, "ask", QUESTION).stdout
    time.sleep(3)
    assert not _sock(off).exists() and _postmaster(home) is None  # nothing left running


def test_a_socket_folder_that_is_not_private_is_never_used(zephyr) -> None:
    _, env = zephyr
    folder = warm.socket_dir()
    folder.mkdir(mode=0o700, exist_ok=True)
    folder.chmod(0o777)  # someone opened it
    try:
        res = _cv(env, "ask", QUESTION)
        assert res.returncode == 0 and "81 knots" in res.stdout
        time.sleep(2)
        assert not _sock(env).exists()
        assert warm.private_dir(create=True) is None and warm.run_warm(["ask", QUESTION]) is None
    finally:
        folder.chmod(0o700)
