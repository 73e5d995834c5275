"""Word and phrase chunk counts over a scope, read from the statistics kept at ingest.

``statistics`` gives what ``retrieval.answer.answerers.extractive.keyterms.PhraseStats`` holds (used by the
extractive answerer to judge which question phrases are technical terms), with the same semantics
as counting chunks through the GIN index (``plainto_tsquery`` / ``phraseto_tsquery`` with each
chunk's text-search configuration):

* chunks per document and in all: ``documents.chunk_count`` (no scan of the chunks);
* a word that is one lexeme: the sum of its per-document counts in ``document_lexemes``; a word
  the parser splits into several lexemes (``GNU_SOURCE``) is counted through the GIN index;
* a phrase: zero without a query when one of its lexemes occurs nowhere in the scope (the common
  case for a question's word pairs); otherwise its chunks are counted through the GIN index, only
  in the documents that have every one of its lexemes.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from retrieval.answer.answerers.extractive.keyterms import PhraseStats
from retrieval.search.filters import Scope


# The module docstring in one statement (lexemes under every text-search configuration the scope's
# documents were indexed with). Rows: ('size', document, NULL, chunks) and (kind, text, document, n).
_STATISTICS = """
WITH docs AS MATERIALIZED (
    SELECT d.collection, d.id, d.name, d.chunk_count, d.text_search FROM documents d WHERE {scope}),
items AS MATERIALIZED (
    SELECT i.kind, i.txt, ARRAY(SELECT DISTINCT u.lexeme FROM (SELECT DISTINCT text_search AS c FROM docs) cfg
                                CROSS JOIN LATERAL unnest(to_tsvector(cfg.c, i.txt)) u) AS lex
    FROM (SELECT DISTINCT 'word' AS kind, w AS txt FROM unnest(%(words)s::text[]) w
          UNION SELECT DISTINCT 'phrase', p FROM unnest(%(phrases)s::text[]) p) i),
kept AS MATERIALIZED (
    SELECT l.lexeme, docs.collection, docs.id, docs.name, l.df FROM document_lexemes l
    JOIN docs ON docs.collection = l.collection AND docs.id = l.document_id
    WHERE l.lexeme = ANY(ARRAY(SELECT DISTINCT x FROM items, unnest(items.lex) x))),
having_all AS (
    SELECT it.kind, it.txt, it.lex, k.collection, k.id, min(k.name) AS name, sum(k.df) AS df
    FROM items it JOIN kept k ON k.lexeme = ANY(it.lex)
    GROUP BY it.kind, it.txt, it.lex, k.collection, k.id
    HAVING count(DISTINCT k.lexeme) = cardinality(it.lex))
SELECT 'size' AS kind, name AS txt, NULL AS document, sum(chunk_count)::bigint AS n FROM docs GROUP BY name
UNION ALL
SELECT h.kind, h.txt, h.name, sum(CASE WHEN cardinality(h.lex) = 1 THEN h.df ELSE (
        SELECT count(*) FROM chunks c WHERE c.collection = h.collection AND c.document_id = h.id
        AND c.tsv @@ CASE h.kind WHEN 'word' THEN plainto_tsquery(c.ts_config, h.txt)
                                 ELSE phraseto_tsquery(c.ts_config, h.txt) END) END)::bigint
FROM having_all h GROUP BY h.kind, h.txt, h.name
"""


def statistics(conn: psycopg.Connection, phrases: Sequence[str], words: Sequence[str],
               scope: Scope = Scope()) -> PhraseStats:
    """What the extractive answerer needs to judge a question's terms, in one round trip."""
    rows = conn.execute(_STATISTICS.format(scope=scope.documents_sql("d")),
                        {**scope.params(), "words": list(words), "phrases": list(phrases)}).fetchall()
    sizes: dict[str, int] = {}
    counts: dict[tuple[str, str], dict[str, int]] = {}
    for r in rows:
        if r["kind"] == "size":
            sizes[r["txt"]] = int(r["n"])
        elif r["n"]:
            counts.setdefault((r["kind"], r["txt"]), {})[r["document"]] = int(r["n"])
    word_df = {w: sum(counts.get(("word", w), {}).values()) for w in words}
    phrase_df = {p: sum(counts.get(("phrase", p), {}).values()) for p in phrases}
    by_doc = {p: {name: n / sizes[name] for name, n in counts.get(("phrase", p), {}).items() if sizes.get(name)}
              for p in phrases}
    return PhraseStats(int(sum(sizes.values())), phrase_df, word_df, by_doc)
