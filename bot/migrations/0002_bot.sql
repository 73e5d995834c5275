-- depends: 0001_init
-- Slack bot state: delivered events (dedup), threads the bot takes part in, question/answer turns,
-- feedback and background jobs. Every table is keyed by the Slack workspace (team id) first, like the
-- index tables are keyed by collection, so both can be distributed the same way.

-- One row per message the bot has taken on. The key is the message (channel:ts), not the event id:
-- a redelivery (retry_attempt) and the app_mention/message pair Slack sends for one message share it.
CREATE TABLE bot_events (
    workspace    text        NOT NULL,
    event_key    text        NOT NULL,
    received_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace, event_key)
);
CREATE INDEX bot_events_received ON bot_events (received_at);

-- Threads the bot answers in: replies there are follow-ups even without a mention.
CREATE TABLE bot_threads (
    workspace   text        NOT NULL,
    channel     text        NOT NULL,
    thread_ts   text        NOT NULL,
    started_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace, channel, thread_ts)
);

CREATE TABLE bot_turns (
    workspace    text        NOT NULL,
    id           bigint      GENERATED ALWAYS AS IDENTITY,
    channel      text        NOT NULL,
    thread_ts    text        NOT NULL,
    message_ts   text        NOT NULL,               -- the question's message
    user_id      text        NOT NULL,
    question     text        NOT NULL,
    answer       text        NOT NULL DEFAULT '',    -- answer text, or the refusal's reason
    refusal      boolean     NOT NULL,
    collections  text[]      NOT NULL,               -- what was searched
    result       jsonb       NOT NULL,               -- the full Answer as returned by ask()
    reply_ts     text,                               -- the bot's first reply message
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace, id),
    FOREIGN KEY (workspace, channel, thread_ts) REFERENCES bot_threads (workspace, channel, thread_ts)
        ON DELETE CASCADE
);
CREATE INDEX bot_turns_thread ON bot_turns (workspace, channel, thread_ts, id);

-- One vote per person per answer; voting again changes it.
CREATE TABLE bot_feedback (
    workspace   text        NOT NULL,
    turn_id     bigint      NOT NULL,
    user_id     text        NOT NULL,
    rating      smallint    NOT NULL CHECK (rating IN (-1, 1)),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace, turn_id, user_id),
    FOREIGN KEY (workspace, turn_id) REFERENCES bot_turns (workspace, id) ON DELETE CASCADE
);

CREATE TABLE bot_jobs (
    workspace     text        NOT NULL,
    id            bigint      GENERATED ALWAYS AS IDENTITY,
    kind          text        NOT NULL CHECK (kind IN ('ingest', 'remove')),
    requested_by  text        NOT NULL,
    channel       text        NOT NULL,
    collection    text        NOT NULL,
    source        text        NOT NULL,               -- URL, Slack file id or document name
    status        text        NOT NULL DEFAULT 'queued'
                              CHECK (status IN ('queued', 'running', 'done', 'failed')),
    message       text        NOT NULL DEFAULT '',
    pages         integer,
    chunks        integer,
    created_at    timestamptz NOT NULL DEFAULT now(),
    started_at    timestamptz,
    finished_at   timestamptz,
    PRIMARY KEY (workspace, id)
);
CREATE INDEX bot_jobs_status ON bot_jobs (status) WHERE status IN ('queued', 'running');
