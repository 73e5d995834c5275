"""Storage: the connection pool (``pool``), the embedded Postgres (``embedded``), connections and the
index's migrations (``db``, ``migrations/``), the embedding model recorded with the index (``index``)
and the keyword postings kept at ingest (``postings``). The bot's own tables are migrated from
``bot/migrations`` (registered through the ``chapterverse.migrations`` entry point)."""
