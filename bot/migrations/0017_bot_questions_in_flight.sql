-- depends: 0015_oauth_states
-- A question being answered is recorded with the event key that dedups it (bot_events), so a process
-- that dies while answering does not lose it: ``question`` holds what was asked (cleared once the reply
-- is delivered), the owner (host + PID namespace, PID) refreshes ``heartbeat_at`` while it works, and
-- the "Looking through…" placeholder's ts lets the next process replace it with the answer
-- (bot.inflight). Rows without a question (shared files, turned-away messages) are plain dedup keys.
ALTER TABLE bot_events ADD COLUMN question jsonb;
ALTER TABLE bot_events ADD COLUMN owner_host text;
ALTER TABLE bot_events ADD COLUMN owner_pid integer;
ALTER TABLE bot_events ADD COLUMN heartbeat_at timestamptz;
ALTER TABLE bot_events ADD COLUMN placeholder_ts text;
ALTER TABLE bot_events ADD COLUMN attempts integer NOT NULL DEFAULT 0;
CREATE INDEX bot_events_in_flight ON bot_events (heartbeat_at) WHERE question IS NOT NULL;
CREATE INDEX bot_turns_message ON bot_turns (workspace, channel, message_ts);
