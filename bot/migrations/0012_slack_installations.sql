-- depends: 0002_bot
-- Slack OAuth installations (multi-workspace mode; bot.installations.PostgresInstallationStore).
-- Keyed by the workspace first (team id; the enterprise id for an org-wide install), like every
-- other bot table. One row per installing user; the newest row with a bot token is the workspace's
-- bot. `installation` is slack_sdk's Installation as JSON, tokens included (like Bolt's own SQL
-- stores): protect the database like the tokens themselves.
CREATE TABLE slack_installations (
    workspace      text        NOT NULL,
    enterprise_id  text        NOT NULL DEFAULT '',
    user_id        text        NOT NULL DEFAULT '',
    installation   jsonb       NOT NULL,
    installed_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace, enterprise_id, user_id)
);
CREATE INDEX slack_installations_latest ON slack_installations (workspace, enterprise_id, installed_at DESC);
