-- depends: 0008_untrusted
-- A URL's query string (a signed URL's X-Amz-Signature, a token parameter), fragment and user info
-- are no longer stored with a document, nor shown in its citation links: ingest keeps
-- scheme://host[:port]/path only (ingest.sources.shown_url). This drops them from what older
-- versions stored in documents' source and url; the bot's copies (jobs, saved answers) are
-- cleaned by bot/migrations/0013_url_queries_bot.sql.
UPDATE documents SET
    url = regexp_replace(regexp_replace(url, '^(https?://)[^/?#@]*@', '\1', 'i'), '[?#].*$', '')
    WHERE url ~* '^https?://' AND (url ~ '[?#]' OR url ~* '^https?://[^/?#@]*@');
UPDATE documents SET
    source = regexp_replace(regexp_replace(source, '^(https?://)[^/?#@]*@', '\1', 'i'), '[?#].*$', '')
    WHERE source ~* '^https?://' AND (source ~ '[?#]' OR source ~* '^https?://[^/?#@]*@');
