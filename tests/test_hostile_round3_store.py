"""Hostile configuration, round 3, store and settings side (issue 39 items 2, 4b and 8's settings).

2. No message, log line (-v included) or reply shows a password from a connection string: a standby that
   libpq cannot use is skipped with a warning naming it masked (reads go to the primary); a malformed
   DATABASE_URL is one configuration line (exit 2), masked.
4b. A CHAPTERVERSE_HOME with a space, and one too long for a Unix socket path, start the embedded server.
8. CHAPTERVERSE_DEFAULT_COLLECTION with a control character, a float setting that is inf, nan or not
   positive, and an empty HOME are one configuration line (exit 2) naming what to set.

Real components: the real command in a subprocess, the embedded Postgres (the conftest fixtures and, for
the homes, a server of their own), PDFs made with tests/pdfgen.py.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest

from retrieval.clikit import configuration_error
from retrieval.settings import SECTIONS, Settings
from retrieval.store import db, embedded, replicas
from tests.conftest import ROOT, run_cli
from tests.pdfgen import LOREM, text_pdf

SECRET = "SECRETPW"
# the forms of issue 39 item 2: a JSON list (read as one string before), a port that is no number, no URL
# at all, a key=value string with an unknown keyword, an unterminated IPv6 host, a bad percent escape
MALFORMED = [
    f'["postgresql://u:{SECRET}@127.0.0.1:1/db"]',
    f"postgresql://u:{SECRET}@host:notaport/db",
    "notaurl",
    f"host=127.0.0.1 password={SECRET} bogus=1",
    f"postgresql://u:{SECRET}@[::1/db",
    f"postgresql://u:{SECRET}%zz@127.0.0.1/db",
]
COLLECTION = "r3store"


def _one_line(res: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    return lines[0]


# --- 2: passwords ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "shown"), [
    (f"postgresql://u:{SECRET}@127.0.0.1:1/db", "postgresql://u:***@127.0.0.1:1/db"),
    (f'missing "=" after "["postgresql://u:{SECRET}@h/db"]" in connection info string',
     'missing "=" after "["postgresql://u:***@h/db"]" in connection info string'),
    (f"host=h password={SECRET} bogus=1", "host=h password=*** bogus=1"),
    (f"host=h password='two {SECRET} words' port=1", "host=h password=*** port=1"),
    (f"postgresql://u@h/db?sslmode=require&password={SECRET}&x=1", "postgresql://u@h/db?sslmode=require&password=***&x=1"),
    (f"postgresql://u:p/w@{SECRET}@h/db", "postgresql://u:***@h/db"),  # '/' and '@' in the password
    ("postgresql://h:5432/db", "postgresql://h:5432/db"),  # nothing to hide
])
def test_masked_hides_a_password_wherever_a_connection_string_keeps_one(text: str, shown: str) -> None:
    from retrieval.store.masking import masked  # noqa: PLC0415

    assert masked(text) == shown


def test_masked_hides_the_passwords_of_the_strings_a_message_is_about() -> None:
    from retrieval.store.masking import passwords  # noqa: PLC0415

    url = f"postgresql://u:{SECRET}%zz@h/db"  # libpq quotes only the bad piece: 'invalid percent-encoded token'
    with pytest.raises(psycopg.ProgrammingError) as err:
        psycopg.conninfo.conninfo_to_dict(url)
    assert SECRET in str(err.value)
    assert SECRET not in db.first_line(err.value, url) and "***" in db.first_line(err.value, url)
    assert passwords("postgresql://u:p%40ss@h/db") == {"p%40ss", "p@ss"}  # as written and decoded


@dataclass
class _Read:
    server: str = ""
    timings_ms: dict[str, float] = field(default_factory=dict)


def test_a_standby_libpq_cannot_use_is_skipped_with_a_masked_warning(settings, caplog) -> None:
    """In the process: each malformed standby is skipped, the read runs on the (real) primary."""
    standbys = [*MALFORMED[1:], "postgresql://ok@127.0.0.1:1/db"]
    s = settings.but(db={"read_urls": standbys})
    replicas._skipped.clear()
    with caplog.at_level(logging.INFO):
        result = replicas.read(s, None, lambda _: _Read())
    replicas._skipped.clear()
    assert result.server.startswith("primary"), result.server
    warnings = [r.getMessage() for r in caplog.records if r.name == "retrieval.store.replicas"]
    assert len(warnings) == len(standbys), warnings
    assert all("reading from the primary instead" in w for w in warnings)
    assert SECRET not in caplog.text
    assert "replica 4 (postgresql://u:***@[::1/db)" in caplog.text and "replica 2 (notaurl)" in caplog.text


@pytest.fixture(scope="module")
def fuel_collection(settings, embedder, tmp_path_factory) -> str:
    from ingest.pipeline import ingest_source  # noqa: PLC0415
    from ingest.sources import read_path  # noqa: PLC0415

    pdf = text_pdf(tmp_path_factory.mktemp("r3store") / "fuel.pdf", [LOREM.format(n=n) * 4 for n in (500, 1000)])
    ingest_source(settings, embedder, read_path(str(pdf), 10_000_000), COLLECTION, quiet=True)
    return COLLECTION


@pytest.mark.slow  # an ingest and two commands that load the models
def test_malformed_standbys_never_break_search_or_ask_nor_show_a_password(fuel_collection: str) -> None:
    """The real command, -v: every malformed form at once (a JSON array, as the issue wrote it)."""
    env = {"CHAPTERVERSE_DB_READ_URLS": json.dumps([json.loads(MALFORMED[0])[0], *MALFORMED[1:]])}
    for args in (("-v", "search", "fuel requirements", "--collection", fuel_collection),
                 ("-v", "ask", "What must pilots review before each flight?", "--collection", fuel_collection)):
        res = run_cli(*args, env=env, timeout=120)
        out = res.stdout + res.stderr
        assert res.returncode == 0, out
        assert SECRET not in out and "Traceback" not in out and "went wrong" not in out, out
        assert "fuel" in res.stdout.lower(), res.stdout
        assert "replica 3 (notaurl) skipped" in res.stderr and "postgresql://u:***@host:notaport/db" in res.stderr


@pytest.mark.parametrize("url", [MALFORMED[0], MALFORMED[1], f"host=h password={SECRET} bogus=1",
                                 f"postgresql://u:{SECRET}@[::1/db"])
def test_a_malformed_database_url_is_one_masked_configuration_line(url: str) -> None:
    for args in (("ask", "fuel"),) if url != MALFORMED[0] else (("ask", "fuel"), ("search", "fuel"), ("docs",)):
        res = run_cli(*args, env={"DATABASE_URL": url}, timeout=60)
        line = _one_line(res)
        assert res.returncode == 2, (args, res.stdout, res.stderr)
        assert SECRET not in res.stdout + res.stderr
        assert line.startswith("error: bad configuration: DATABASE_URL: ") and "postgresql://USER:PASSWORD@" in line


def test_a_malformed_placement_url_is_a_configuration_error(monkeypatch) -> None:
    monkeypatch.setenv("CHAPTERVERSE_DB_PLACEMENT", json.dumps({"t2": {"url": f"postgresql://u:{SECRET}@h:x/db"}}))
    with pytest.raises(ValueError) as info:
        Settings()
    assert SECRET not in configuration_error(info.value) and SECRET not in str(info.value)
    assert "CHAPTERVERSE_DB_PLACEMENT" in configuration_error(info.value)


# --- 4b: homes ---------------------------------------------------------------------------------------


def _docs_in(home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CHAPTERVERSE_HOME": str(home), "DATABASE_URL": ""}
    return subprocess.run([sys.executable, "-m", "retrieval.cli", "docs"], capture_output=True, text=True,
                          env=env, timeout=120)


def test_a_home_with_a_space_starts_the_embedded_database() -> None:
    parent = Path(tempfile.mkdtemp(prefix="cv r3 ", dir="/tmp"))
    parent.chmod(0o755)
    home = parent / "cv space home"
    try:
        assert embedded.fits_socket(home / "pgdata")  # the socket is in the data directory, its path quoted
        res = _docs_in(home)
        assert res.returncode == 0, res.stderr
        assert "no documents yet" in res.stdout.lower(), res.stdout
        assert "invalid argument" not in res.stderr and "Traceback" not in res.stderr, res.stderr
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def test_a_home_too_long_for_a_socket_path_starts_with_its_socket_in_a_private_folder() -> None:
    parent = Path(tempfile.mkdtemp(prefix="cv-r3-", dir="/tmp"))
    parent.chmod(0o755)
    home = parent / ("a-rather-long-folder-name-" * 3) / ("and-another-one-" * 3) / "chapterverse"
    pgdata = (home / "pgdata").absolute()
    sock = None
    try:
        sock = embedded.short_socket_dir(pgdata)
        assert not embedded.fits_socket(pgdata) and len(str(pgdata)) > embedded.SOCKET_PATH_MAX
        res = _docs_in(home)
        assert res.returncode == 0, res.stderr
        assert "no documents yet" in res.stdout.lower(), res.stdout
        st = sock.lstat()
        assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700
        owner = "embedded_postgres" if embedded.is_root() else None
        assert st.st_uid == (embedded._server_uid(owner))
    finally:
        shutil.rmtree(parent, ignore_errors=True)
        if sock is not None:
            shutil.rmtree(sock, ignore_errors=True)


def test_a_socket_folder_that_is_not_private_is_refused_in_one_line(tmp_path: Path) -> None:
    shared = tmp_path / "sock"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    with pytest.raises(embedded.EmbeddedError) as err:
        embedded.private_dir(shared, os.geteuid(), tmp_path / "home")
    assert "\n" not in str(err.value) and "remove it, or choose a shorter CHAPTERVERSE_HOME" in str(err.value)
    made = embedded.private_dir(tmp_path / "new", os.geteuid(), tmp_path / "home")
    assert stat.S_IMODE(made.stat().st_mode) == 0o700


def test_a_home_the_servers_start_commands_cannot_take_is_refused_before_anything_is_made(tmp_path: Path) -> None:
    home = tmp_path / 'cv$USER`x"q'
    with pytest.raises(embedded.EmbeddedError) as err:
        embedded.check_home(home)
    assert "\n" not in str(err.value) and "choose a directory without them" in str(err.value)
    assert not home.exists()


# --- 8: settings -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a\nb", "tab\there", "bell\x07", "", "  ", " padded"])
def test_a_default_collection_that_cannot_be_a_collection_name_is_refused(name: str, monkeypatch) -> None:
    monkeypatch.setenv("CHAPTERVERSE_DEFAULT_COLLECTION", name)
    with pytest.raises(ValueError) as info:
        Settings()
    line = configuration_error(info.value)
    assert line.startswith("CHAPTERVERSE_DEFAULT_COLLECTION") and "\n" not in line
    from retrieval.settings import collection_name_problem  # noqa: PLC0415

    assert collection_name_problem(name) is not None and collection_name_problem("handbooks") is None


def test_a_default_collection_with_a_line_break_is_one_configuration_line_from_the_command() -> None:
    res = run_cli("collections", "list", env={"CHAPTERVERSE_DEFAULT_COLLECTION": "hand\nbooks"}, timeout=60)
    assert res.returncode == 2, res.stderr
    line = _one_line(res)
    assert "CHAPTERVERSE_DEFAULT_COLLECTION" in line and "line breaks" in line and "e.g. 'default'" in line


def _float_settings() -> list[tuple[str, str]]:
    return [(section, name) for section, model in SECTIONS.items() for name, f in model.model_fields.items()
            if f.annotation is float]


def test_every_float_setting_refuses_inf_nan_and_negative_values(monkeypatch) -> None:
    from retrieval.settings import environment_names  # noqa: PLC0415

    names = {key: var for var, key in reversed(environment_names().items())}
    floats = _float_settings()
    assert len(floats) >= 10, floats
    for key in floats:
        var = names[key]
        for bad in ("inf", "-inf", "nan", "-1", "1e999", "1e300"):
            monkeypatch.setenv(var, bad)
            with pytest.raises(ValueError) as info:
                Settings()
            assert configuration_error(info.value).startswith(f"{var}='{bad}'"), (var, bad)
        monkeypatch.delenv(var)
        default = Settings().model_dump()[key[0]][key[1]]
        assert math.isfinite(default) and default >= 0


def test_an_infinite_download_timeout_is_one_configuration_line() -> None:
    res = run_cli("docs", env={"CHAPTERVERSE_DOWNLOAD_TIMEOUT_S": "inf"}, timeout=60)
    assert res.returncode == 2, res.stderr
    assert _one_line(res) == ("error: bad configuration: CHAPTERVERSE_DOWNLOAD_TIMEOUT_S='inf': "
                              "Input should be a finite number")


def test_home_for_refuses_an_empty_home_only_where_it_would_be_used() -> None:
    from retrieval.settings import home_for  # noqa: PLC0415

    with pytest.raises(ValueError, match="HOME is empty.*set CHAPTERVERSE_HOME"):
        home_for(None, "", root=False)
    with pytest.raises(ValueError, match="HOME is empty"):
        home_for("  ", "  ", root=False)
    assert home_for(None, "/home/ann", root=False) == Path("/home/ann/.local/share/chapterverse")
    assert home_for("/data", "", root=False) == Path("/data/chapterverse")  # XDG_DATA_HOME: HOME is not used
    assert home_for(None, "", root=True) == Path("/var/lib/chapterverse")  # root's default does not use HOME


def test_an_empty_home_is_one_configuration_line_from_the_command(tmp_path: Path) -> None:
    """The real command as a user that is not root (the test may run as root: the user id is faked)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("CHAPTERVERSE_HOME", "XDG_DATA_HOME", "DATABASE_URL")}
    code = ("import os, sys; os.geteuid = lambda: 1000; sys.argv = ['chapterverse', 'docs']; "
            "from retrieval.cli import main; main()")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60,
                         env={**env, "HOME": "", "PYTHONPATH": str(ROOT)})
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert _one_line(res) == ("error: bad configuration: HOME is empty, so there is no default state directory: "
                              "set CHAPTERVERSE_HOME to a directory this user can write to (or set HOME)")
    assert list(tmp_path.iterdir()) == []
