-- depends: 0013_bot_workspaces
-- When the weekly digest was last posted to each workspace's digest channel (bot.digest.DigestPoster):
-- a bot process posts only after claiming the row (posted_at older than the period), so several bot
-- processes and restarts never post the same week twice.
CREATE TABLE bot_digest_posts (
    workspace  text        NOT NULL,
    channel    text        NOT NULL,
    posted_at  timestamptz NOT NULL,
    PRIMARY KEY (workspace, channel)
);
