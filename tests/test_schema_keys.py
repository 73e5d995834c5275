"""Scale path: every table can be distributed (Citus) by the column it is scoped by.

Citus requires a distributed table's primary key, every unique key and every foreign key to include
its distribution column; keeping it *first* also makes each key's index serve the per-collection
lookups every query does. Two colocation groups exist:

* ``collection``: the index (documents and everything derived from them). Searches, page loads and
  removals all filter by collection, so each runs on the shards of the collections searched.
* ``workspace``: the Slack bot's state (threads, turns, feedback, event dedup, ingestion jobs,
  installations). A thread may search several collections (the workspace's and a channel's), so
  the bot's rows belong to the workspace, not to one collection; the bot never joins them with the
  index in SQL (it calls search), so the two groups need not be colocated.

Reference (or coordinator-local) tables, listed here so a new table must be classified on purpose:
``embedding_model`` is one row (the model and dimension every vector was made with) read by every
search: a reference table, replicated to every node. yoyo's bookkeeping tables stay on the
coordinator, where migrations run.
"""

from __future__ import annotations

import pytest

from retrieval.store import db
from retrieval.settings import Settings
from tests.conftest import scratch_database

BY_COLLECTION = {"documents", "pages", "chunks", "chunk_sentences", "document_lexemes", "document_audit",
                 "lexeme_postings", "collections"}
BY_WORKSPACE = {"bot_threads", "bot_turns", "bot_feedback", "bot_events", "bot_jobs", "slack_installations",
                "bot_workspaces", "bot_digest_posts"}
BY_OWN_KEY = {"slack_oauth_states": "state"}  # no workspace yet; distributed by its own key, never joined
REFERENCE = {"embedding_model"}
MIGRATION_BOOKKEEPING = {"_yoyo_log", "_yoyo_migration", "_yoyo_version", "yoyo_lock"}

KEYS = """
SELECT t.relname AS tbl, i.relname AS index, ix.indisprimary AS primary,
       (SELECT array_agg(a.attname ORDER BY k.ord) FROM unnest(ix.indkey) WITH ORDINALITY k(attnum, ord)
        JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum) AS cols
FROM pg_index ix
JOIN pg_class t ON t.oid = ix.indrelid
JOIN pg_class i ON i.oid = ix.indexrelid
JOIN pg_namespace n ON n.oid = t.relnamespace
WHERE n.nspname = 'public' AND (ix.indisunique OR ix.indisprimary)
"""
FOREIGN_KEYS = """
SELECT conrelid::regclass::text AS tbl, confrelid::regclass::text AS ref, conname,
       (SELECT array_agg(a.attname ORDER BY k.ord) FROM unnest(conkey) WITH ORDINALITY k(attnum, ord)
        JOIN pg_attribute a ON a.attrelid = conrelid AND a.attnum = k.attnum) AS cols
FROM pg_constraint WHERE contype = 'f' AND connamespace = 'public'::regnamespace
"""


def distribution_column(table: str) -> str | None:
    if table in BY_COLLECTION:
        return "collection"
    if table in BY_WORKSPACE:
        return "workspace"
    return BY_OWN_KEY.get(table)


@pytest.fixture(scope="module")
def schema(pg_url):
    """A fresh database with every migration applied."""
    with scratch_database(pg_url, "cv_keys") as url:
        s = Settings(db={"url": url})
        db.migrate(s)
        with db.connection(s) as conn:
            tables = {r["tablename"] for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
            keys = list(conn.execute(KEYS))
            fks = list(conn.execute(FOREIGN_KEYS))
        yield tables, keys, fks


def test_every_table_is_classified(schema):
    tables, _, _ = schema
    known = BY_COLLECTION | BY_WORKSPACE | set(BY_OWN_KEY) | REFERENCE | MIGRATION_BOOKKEEPING
    assert tables - known == set(), "new table: give it a distribution column or list it as a reference table"
    assert BY_COLLECTION <= tables and REFERENCE <= tables


def test_primary_and_unique_keys_start_with_the_distribution_column(schema):
    tables, keys, _ = schema
    with_pk = {k["tbl"] for k in keys if k["primary"]}
    assert (BY_COLLECTION | BY_WORKSPACE | set(BY_OWN_KEY)) & tables <= with_pk, "every distributed table needs a primary key"
    wrong = [(k["tbl"], k["index"], k["cols"]) for k in keys
             if (col := distribution_column(k["tbl"])) and (not k["cols"] or k["cols"][0] != col)]
    assert wrong == [], f"keys not led by the distribution column: {wrong}"


def test_foreign_keys_stay_inside_one_colocation_group(schema):
    _, _, fks = schema
    for fk in fks:
        col = distribution_column(fk["tbl"])
        assert col is not None and distribution_column(fk["ref"]) == col, fk
        assert fk["cols"][0] == col, fk
