-- depends: 0012_slack_installations 0009_job_queue
-- The bot's copies of URL query strings, fragments and user info (see the index's 0013_url_queries):
-- finished jobs' payloads (with the slash command's response_url, which can post to the channel for
-- 30 minutes) and messages, and the citation links saved with answers (their #page=N fragments stay).
-- Split out of 0013_url_queries when the bot's tables moved to bot/migrations; idempotent, so a
-- database that ran the combined migration is unchanged by it.
UPDATE bot_jobs SET payload = payload - 'url' #- '{report,response_url}' WHERE status IN ('done', 'failed');
UPDATE bot_jobs SET
    source = regexp_replace(regexp_replace(source, '(https?://)[^/?#@\s]*@', '\1', 'gi'),
                            '(https?://[^\s?#"<>|`'']+)[?#]([^\s"<>|`'']*[^\s"<>|`'':.,;)])?', '\1', 'gi'),
    message = regexp_replace(regexp_replace(message, '(https?://)[^/?#@\s]*@', '\1', 'gi'),
                             '(https?://[^\s?#"<>|`'']+)[?#]([^\s"<>|`'']*[^\s"<>|`'':.,;)])?', '\1', 'gi')
    WHERE source ~* 'https?://' OR message ~* 'https?://';
UPDATE bot_turns SET
    result = regexp_replace(regexp_replace(result::text, '(https?://)[^/?#@\s"]*@', '\1', 'gi'),
                            '(https?://[^\s?#"<>|`'']+)\?([^\s"<>|`''#]*[^\s"<>|`''#:.,;)])?', '\1', 'gi')::jsonb
    WHERE result::text ~* 'https?://[^"\s]*(\?|@)';
