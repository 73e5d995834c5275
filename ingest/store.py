"""Write one document (pages, chunks, vectors) in a single transaction; list and remove documents."""

from __future__ import annotations

import getpass
import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import psycopg

from ingest.chunk import Chunk
from ingest.pdf import Page
from retrieval.settings import DEFAULT_PRESET, preset_profile
from retrieval.store.collections import mark_written, record_preset
from retrieval.store.index import copy_rows


@dataclass(frozen=True)
class Existing:
    name: str
    pipeline_version: str


@dataclass(frozen=True)
class Actor:
    """Who changes the index, recorded with the document and in ``document_audit`` (migration 0014)."""

    who: str  # a Slack user id, or user@host for the command line
    via: str = "cli"  # "slack" or "cli"
    workspace: str = ""  # the Slack team id

    @staticmethod
    def local() -> Actor:
        """The person running the command line: the operating-system user on this host."""
        try:
            user = getpass.getuser()
        except (KeyError, OSError):  # no passwd entry (some containers)
            user = f"uid {os.getuid()}" if hasattr(os, "getuid") else "unknown"
        return Actor(f"{user}@{socket.gethostname()}", "cli", "")


def _audit(conn: psycopg.Connection, actor: Actor, *, collection: str, action: str, document: str,
           sha256: str | None, outcome: str) -> None:
    conn.execute("INSERT INTO document_audit (collection, action, document, sha256, outcome, actor, via, workspace) "
                 "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                 (collection, action, document, sha256, outcome, actor.who, actor.via, actor.workspace))


def find_same_bytes(conn: psycopg.Connection, collection: str, sha256: str) -> Existing | None:
    row = conn.execute("SELECT name, pipeline_version FROM documents WHERE collection = %s AND sha256 = %s "
                       "ORDER BY name LIMIT 1", (collection, sha256)).fetchone()
    return Existing(row["name"], row["pipeline_version"]) if row else None


def _array(value: object) -> np.ndarray:
    """A pgvector value as read (``Vector``/``HalfVector``, or already an array) as float32."""
    to_numpy = getattr(value, "to_numpy", None)
    return np.asarray(to_numpy() if to_numpy else value, dtype=np.float32)


def reusable_vectors(conn: psycopg.Connection, collection: str, name: str,
                     pipeline_version: str) -> dict[tuple[str, str, str], tuple[np.ndarray, np.ndarray]]:
    """The vectors of the indexed document ``name`` (each chunk's, and its sentence windows' as one
    array), by the chunk's key (``ingest.passages.key_of``), when it was indexed by this pipeline
    (same model, same passes): a new edition then embeds only the chunks whose text changed. Empty
    when there is no such document or it is older."""
    doc = conn.execute("SELECT id FROM documents WHERE collection = %s AND name = %s AND pipeline_version = %s",
                       (collection, name, pipeline_version)).fetchone()
    if doc is None:
        return {}
    chunks = conn.execute("SELECT id, search_text, context, text, embedding FROM chunks "
                          "WHERE collection = %s AND document_id = %s", (collection, doc["id"])).fetchall()
    windows: dict[int, list[np.ndarray]] = {}
    for r in conn.execute("SELECT s.chunk_id, s.embedding FROM chunk_sentences s JOIN chunks c "
                          "ON c.collection = s.collection AND c.id = s.chunk_id "
                          "WHERE c.collection = %s AND c.document_id = %s ORDER BY s.chunk_id, s.sentence_no",
                          (collection, doc["id"])):
        windows.setdefault(int(r["chunk_id"]), []).append(_array(r["embedding"]))
    return {(c["search_text"], c["context"] or "", c["text"]):
            (_array(c["embedding"]), np.vstack(windows[int(c["id"])]))
            for c in chunks if c["embedding"] is not None and int(c["id"]) in windows}


def write_document(conn: psycopg.Connection, *, collection: str, name: str, sha256: str, source: str,
                   url: str | None, size: int, pages: Sequence[Page], chunks: Sequence[Chunk],
                   search_texts: Sequence[str], vectors: np.ndarray, pipeline_version: str,
                   title: str | None, terms: Sequence[Sequence[str]], sentence_vectors: Sequence[np.ndarray],
                   actor: Actor | None = None, preset: str = DEFAULT_PRESET,
                   before_commit: Callable[[psycopg.Connection, bool], None] | None = None) -> tuple[int, bool]:
    """Insert the document, replacing an older version of the same name atomically.

    Returns (document id, replaced). Nothing is visible to readers until the commit, and a failure
    anywhere rolls everything back, the old version included. Besides pages and chunks (with their
    identifier ``terms``) it writes what search keeps per document: the chunk lengths' total, each
    lexeme's chunk count (``document_lexemes``) and postings, and the chunks' sentence-window vectors.
    ``actor`` (default: the command line's user) is recorded with the document and in ``document_audit``.
    ``preset``: recorded as the collection's when this document creates it; the preset the collection
    records gives the text-search configuration of the chunks' tsvectors. ``before_commit(conn,
    replaced)`` runs last, inside the transaction: what it writes commits with the document, and when
    it raises nothing is written (a bot job records its end there: ``bot.queue.record_done``).
    """
    actor = actor or Actor.local()
    if not len(chunks) == len(vectors) == len(search_texts) == len(terms) == len(sentence_vectors):
        raise ValueError("chunks, search texts, terms and vectors differ in length")
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"chapterverse-doc:{collection}:{name}",))
        text_search = preset_profile(record_preset(conn, collection, preset)).text_search
        mark_written(conn, [collection])  # read your writes on standbys (retrieval.store.replicas)
        old = conn.execute("DELETE FROM documents WHERE collection = %s AND name = %s RETURNING id",
                           (collection, name)).fetchone()
        doc_id = conn.execute(
            "INSERT INTO documents (collection, name, sha256, source, url, bytes, page_count, chunk_count, "
            "pipeline_version, title, token_total, added_by, added_via, added_workspace, text_search) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
            (collection, name, sha256, source, url, size, len(pages), len(chunks), pipeline_version, title,
             sum(c.tokens for c in chunks), actor.who, actor.via, actor.workspace, text_search)
        ).fetchone()["id"]
        _audit(conn, actor, collection=collection, action="ingest", document=name, sha256=sha256,
               outcome="replaced" if old is not None else "ingested")
        with conn.cursor() as cur:
            with cur.copy("COPY pages (collection, document_id, page_no, label, text, body_start, body_end, "
                          "hidden_chars, read_by, ocr_confidence, ocr_doubtful) FROM STDIN") as copy:
                for p in pages:
                    s, e = p.body
                    copy.write_row((collection, doc_id, p.number, p.label, p.text, s, e, p.hidden_chars, p.read_by,
                                    p.ocr_confidence, list(p.ocr_doubtful)))
            with cur.copy("COPY chunks (collection, document_id, ordinal, page_start, char_start, page_end, "
                          "char_end, text, context, search_text, token_count, embedding, terms, ts_config) FROM STDIN") as copy:
                for c, st, v, t in zip(chunks, search_texts, vectors, terms, strict=True):
                    copy.write_row((collection, doc_id, c.ordinal, c.page_start, c.char_start, c.page_end,
                                    c.char_end, c.text, c.context, st, c.tokens, v, list(t), text_search))
        conn.execute(
            "INSERT INTO document_lexemes (collection, document_id, lexeme, df) "
            "SELECT c.collection, c.document_id, u.lexeme, count(*) FROM chunks c CROSS JOIN LATERAL unnest(c.tsv) u "
            "WHERE c.collection = %s AND c.document_id = %s GROUP BY c.collection, c.document_id, u.lexeme",
            (collection, doc_id))
        conn.execute("INSERT INTO lexeme_postings (collection, document_id, lexeme, block, base, postings) "
                     "SELECT * FROM lexeme_postings_of(%s, %s)", (collection, doc_id))  # retrieval.store.postings
        ids = {r["ordinal"]: int(r["id"]) for r in conn.execute(
            "SELECT ordinal, id FROM chunks WHERE collection = %s AND document_id = %s", (collection, doc_id))}
        copy_rows(conn, ((collection, ids[c.ordinal], i, vec) for c, sv in zip(chunks, sentence_vectors, strict=True)
                         for i, vec in enumerate(sv)))
        flagged = [c.ordinal for c in chunks if c.untrusted]  # prompt injection (retrieval.text.injection)
        if flagged:
            conn.execute("UPDATE chunks SET untrusted = true WHERE collection = %s AND document_id = %s "
                         "AND ordinal = ANY(%s)", (collection, doc_id, flagged))
        if before_commit is not None:
            before_commit(conn, old is not None)
    return doc_id, old is not None


def list_documents(conn: psycopg.Connection, collection: str | None = None) -> list[dict]:
    return conn.execute(
        "SELECT collection, name, title, page_count AS pages, chunk_count AS chunks, sha256, source, url, bytes, "
        "ingested_at, added_by, added_via, added_workspace, text_search::text AS text_search FROM documents "
        "WHERE %(c)s::text IS NULL OR collection = %(c)s ORDER BY collection, name",
        {"c": collection or None}).fetchall()


class AmbiguousName(ValueError):
    """The name exists in several collections and none was given."""

    def __init__(self, name: str, found: list[str]) -> None:
        super().__init__(f"{name!r} is in several collections ({', '.join(found)}); say which with --collection")


def collections_with(conn: psycopg.Connection, name: str) -> list[str]:
    """The collections holding a document named ``name``."""
    return [r["collection"] for r in conn.execute(
        "SELECT collection FROM documents WHERE name = %s ORDER BY collection", (name,))]


def remove_document(conn: psycopg.Connection, name: str, collection: str | None = None,
                    actor: Actor | None = None) -> list[str]:
    """Remove by name from ``collection``; without one, only when exactly one collection has the name.
    Returns the collections touched (empty: no such document). The removal is recorded in
    ``document_audit`` with ``actor`` (default: the command line's user) in the same transaction."""
    actor = actor or Actor.local()
    with conn.transaction():
        if collection is None:
            found = collections_with(conn, name)
            if len(found) > 1:
                raise AmbiguousName(name, found)
            if not found:
                return []
            collection = found[0]
        rows = conn.execute("DELETE FROM documents WHERE name = %s AND collection = %s RETURNING collection, sha256",
                            (name, collection)).fetchall()
        for r in rows:
            _audit(conn, actor, collection=r["collection"], action="remove", document=name, sha256=r["sha256"],
                   outcome="removed")
        mark_written(conn, [r["collection"] for r in rows])
    return [r["collection"] for r in rows]
