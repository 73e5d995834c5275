-- depends: 0002_bot
-- The bot process that recorded a job: its host (host name and PID namespace) and PID. A starting
-- bot fails only the unfinished jobs whose process is gone, not those other bot processes still run.
ALTER TABLE bot_jobs ADD COLUMN owner_host text;
ALTER TABLE bot_jobs ADD COLUMN owner_pid integer;
