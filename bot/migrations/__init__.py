"""The bot's tables (events, threads, turns, jobs, installations, workspaces, digest posts), migrated
with the index's by ``retrieval.store.db.migrate``, which finds this directory through the
``chapterverse.migrations`` entry point (pyproject.toml)."""
