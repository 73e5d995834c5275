"""Word and phrase chunk counts over a scope, read from the statistics kept at ingest.

``statistics`` gives what ``retrieval.answerers.keyterms.PhraseStats`` holds (used by the
extractive answerer to judge which question phrases are technical terms), with the same semantics
as counting chunks through the GIN index (``plainto_tsquery`` / ``phraseto_tsquery``, English):

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

from retrieval.answerers.keyterms import PhraseStats
from retrieval.filters import Scope


def _lexemes(conn: psycopg.Connection, texts: Sequence[str]) -> dict[str, list[str]]:
    if not texts:
        return {}
    rows = conn.execute("SELECT t, coalesce((SELECT array_agg(u.lexeme ORDER BY u.lexeme) FROM "
                        "unnest(to_tsvector('english', t)) u), '{}') AS lex FROM unnest(%s::text[]) t",
                        [list(dict.fromkeys(texts))]).fetchall()
    return {r["t"]: list(r["lex"]) for r in rows}


def statistics(conn: psycopg.Connection, phrases: Sequence[str], words: Sequence[str],
               scope: Scope = Scope()) -> PhraseStats:
    dcond = scope.documents_sql("d")
    params = scope.params()
    sizes: dict[str, int] = {r["name"]: int(r["n"]) for r in conn.execute(
        f"SELECT d.name, sum(d.chunk_count) AS n FROM documents d WHERE {dcond} GROUP BY d.name", params)}
    total = sum(sizes.values())
    lex = _lexemes(conn, [*words, *phrases])
    wanted = sorted({x for t in [*words, *phrases] for x in lex.get(t, [])})
    # lexeme -> document -> chunks having it
    per_doc: dict[str, dict[str, int]] = {}
    if wanted:
        for r in conn.execute(
                f"SELECT l.lexeme, d.name, sum(l.df) AS n FROM document_lexemes l JOIN documents d "
                f"ON d.collection = l.collection AND d.id = l.document_id WHERE {dcond} "
                f"AND l.lexeme = ANY(%(lexemes)s) GROUP BY l.lexeme, d.name", {**params, "lexemes": wanted}):
            per_doc.setdefault(r["lexeme"], {})[r["name"]] = int(r["n"])
    src, cond = scope.from_clause(), scope.sql()
    src = src if scope.needs_documents else (
        "chunks c JOIN documents d ON d.collection = c.collection AND d.id = c.document_id")

    def gin_count(query_fn: str, text: str, documents: Sequence[str]) -> dict[str, int]:
        rows = conn.execute(
            f"SELECT d.name, count(*) AS n FROM {src} WHERE {cond} AND d.name = ANY(%(names)s) "
            f"AND c.tsv @@ {query_fn}('english', %(text)s) GROUP BY d.name",
            {**params, "names": list(documents), "text": text}).fetchall()
        return {r["name"]: int(r["n"]) for r in rows}

    def documents_with_all(lexemes: Sequence[str]) -> list[str]:
        docs = [set(per_doc.get(x, {})) for x in lexemes]
        return sorted(set.intersection(*docs)) if docs else []

    word_df: dict[str, int] = {}
    for w in words:
        ls = lex.get(w, [])
        if len(ls) == 1:
            word_df[w] = sum(per_doc.get(ls[0], {}).values())
        else:
            docs = documents_with_all(ls)
            word_df[w] = sum(gin_count("plainto_tsquery", w, docs).values()) if docs else 0
    phrase_df: dict[str, int] = {}
    by_doc: dict[str, dict[str, float]] = {}
    for phrase in phrases:
        ls = lex.get(phrase, [])
        docs = documents_with_all(ls)
        if len(ls) == 1:
            hits = {d: per_doc[ls[0]][d] for d in docs}
        else:
            hits = gin_count("phraseto_tsquery", phrase, docs) if docs else {}
        phrase_df[phrase] = sum(hits.values())
        by_doc[phrase] = {name: n / sizes[name] for name, n in hits.items() if sizes.get(name)}
    return PhraseStats(int(total), phrase_df, word_df, by_doc)
