-- depends: 0006_bot_job_owner
-- Ingestion/removal jobs as a queue in Postgres: bot and worker processes claim queued jobs with
-- SELECT ... FOR UPDATE SKIP LOCKED, so several can share one database. Keyed by workspace (team id)
-- like the other bot tables.
--   payload       what to do and whom to tell (bot.queue.JobSpec); a URL's query string lives here
--                 only while the job is unfinished
--   attempts      how many times a worker has claimed it (a job whose worker died is retried once)
--   heartbeat_at  refreshed by the worker running it; a running job whose heartbeat stops is
--                 requeued (or failed after its last attempt)
ALTER TABLE bot_jobs ADD COLUMN payload jsonb NOT NULL DEFAULT '{}'::jsonb;
ALTER TABLE bot_jobs ADD COLUMN attempts integer NOT NULL DEFAULT 0;
ALTER TABLE bot_jobs ADD COLUMN heartbeat_at timestamptz;
CREATE INDEX bot_jobs_queued ON bot_jobs (created_at, workspace, id) WHERE status = 'queued';
CREATE INDEX bot_jobs_open ON bot_jobs (workspace) WHERE status IN ('queued', 'running');
