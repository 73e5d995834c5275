-- depends: 0012_slack_installations 0009_job_queue
-- A URL's query string (a signed URL's X-Amz-Signature, a token parameter), fragment and user info
-- are no longer stored with a document, nor shown in its citation links: ingest keeps
-- scheme://host[:port]/path only (ingest.sources.shown_url). This drops them from what older
-- versions stored: documents' source and url, finished jobs' payloads (with the slash command's
-- response_url, which can post to the channel for 30 minutes) and messages, and the
-- citation links saved with answers (their #page=N fragments stay).
UPDATE documents SET
    url = regexp_replace(regexp_replace(url, '^(https?://)[^/?#@]*@', '\1', 'i'), '[?#].*$', '')
    WHERE url ~* '^https?://' AND (url ~ '[?#]' OR url ~* '^https?://[^/?#@]*@');
UPDATE documents SET
    source = regexp_replace(regexp_replace(source, '^(https?://)[^/?#@]*@', '\1', 'i'), '[?#].*$', '')
    WHERE source ~* '^https?://' AND (source ~ '[?#]' OR source ~* '^https?://[^/?#@]*@');
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
