"""CHAPTERVERSE_HOME edge cases (issue 32, item 3): a file, an immutable folder and an empty value.
Each is one line and exit status 2 (misconfiguration), and nothing is created or chmod-ed on the way;
an empty value counts as unset. The real command, without DATABASE_URL (the embedded database)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from tests.conftest import run_cli

NO_DB = {"DATABASE_URL": ""}  # set but empty counts as unset: the embedded Postgres under the home


def _one_line(res: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    return lines[0]


def test_a_home_that_is_a_file_is_one_line_and_its_mode_is_untouched(tmp_path: Path) -> None:
    home = tmp_path / "notes.txt"
    home.write_text("my notes\n")
    home.chmod(0o600)
    for args in (("docs",), ("db", "status")):
        res = run_cli(*args, env={**NO_DB, "CHAPTERVERSE_HOME": str(home)})
        assert res.returncode == 2, res.stderr
        assert _one_line(res) == (f"error: CHAPTERVERSE_HOME {home} is a file, not a directory; point it at a "
                                  "directory (it is created if missing), or set DATABASE_URL")
    assert stat.S_IMODE(home.stat().st_mode) == 0o600 and home.read_text() == "my notes\n"
    under = run_cli("docs", env={**NO_DB, "CHAPTERVERSE_HOME": str(home / "state")})
    assert under.returncode == 2 and "which is a file" in _one_line(under)


def test_an_immutable_home_is_one_line_and_nothing_is_written(tmp_path: Path) -> None:
    home = tmp_path / "frozen"
    home.mkdir()
    home.chmod(0o755)
    if os.geteuid() == 0:  # root writes anywhere but into an immutable directory
        subprocess.run(["chattr", "+i", str(home)], check=True)
    else:
        home.chmod(0o555)
    try:
        res = run_cli("docs", env={**NO_DB, "CHAPTERVERSE_HOME": str(home)})
    finally:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(home)], check=True)
        home.chmod(0o755)
    assert res.returncode == 2, res.stderr
    line = _one_line(res)
    assert line.startswith(f"error: CHAPTERVERSE_HOME {home} cannot be written (") and "set DATABASE_URL" in line
    assert list(home.iterdir()) == []


def test_an_empty_home_means_unset_not_the_current_folder(tmp_path: Path) -> None:
    code = "from retrieval.settings import Settings, default_home; s = Settings(); print(s.home == default_home(), s.home)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "CHAPTERVERSE_HOME": "", "PYTHONPATH": str(Path(__file__).parents[1])})
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("True "), res.stdout
    assert Path(res.stdout.split(" ", 1)[1].strip()) != Path(".")
    blank = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                           env={**os.environ, "CHAPTERVERSE_HOME": "   ", "PYTHONPATH": str(Path(__file__).parents[1])})
    assert blank.stdout.startswith("True "), blank.stdout
    assert list(tmp_path.iterdir()) == []  # nothing appeared in the current folder
