-- depends: 0012_slack_installations
-- The Slack OAuth flow's one-time states (bot.installations.PostgresOAuthStateStore): issued by the
-- install page, consumed once by the redirect within ten minutes, whichever bot process serves each
-- (they were files under CHAPTERVERSE_HOME, which a second process could not see). Keyed by the
-- state itself: a row belongs to no workspace until the install finishes.
CREATE TABLE slack_oauth_states (
    state      text        PRIMARY KEY,
    issued_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX slack_oauth_states_issued ON slack_oauth_states (issued_at);
