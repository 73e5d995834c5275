-- depends: 0022_collection_presets
-- Read your writes on standbys (retrieval.store.replicas): every ingest and removal sets its collection's
-- written_lsn, in its own transaction, to the primary's WAL position at that moment. A standby whose copy
-- of the row shows the same position has replayed that transaction, so it holds the collection as it is.
ALTER TABLE collections ADD COLUMN written_lsn pg_lsn NOT NULL DEFAULT '0/0';
