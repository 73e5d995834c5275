-- depends: 0002_bot
-- The Slack workspaces the bot runs in, with their web address (auth.test's `url`, e.g.
-- https://acme.slack.com/), recorded at start, so `chapterverse digest` can link to the threads of
-- refused and 👎-voted questions (https://acme.slack.com/archives/C…/p…) without calling Slack.
CREATE TABLE bot_workspaces (
    workspace  text        NOT NULL PRIMARY KEY,
    name       text        NOT NULL DEFAULT '',
    url        text        NOT NULL,
    seen_at    timestamptz NOT NULL DEFAULT now()
);
