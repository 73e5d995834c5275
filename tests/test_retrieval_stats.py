"""What search keeps at ingest (identifier terms, BM25 statistics, sentence vectors) and the default
reranker, on real PDFs, real Postgres and the real CLI."""

from __future__ import annotations

import json
import logging
import uuid

import pytest

from ingest.pipeline import ingest_source
from ingest.sources import read_path
from ingest.store import remove_document
from retrieval.store import db, pool
from retrieval.answer.answerers.extractive.keyterms import PhraseStats
from retrieval.search.filters import Scope
from chapterverse_lab.bm25 import bm25
from retrieval.search.rerank import SENTENCES, choose
from retrieval.search.search import search
from retrieval.encode.sentence_index import windows_of
from retrieval.settings import Settings
from tests.conftest import run_cli
from tests.pdfgen import text_pdf

RUN = uuid.uuid4().hex[:8]

# A small software manual: each identifier is on one page; the filler pages use its plain words a lot
# ("in", "gnu", "source", "vector", "c"), so only the identifier itself can rank its page first.
FILLER = ("The GNU project publishes source code in many languages. In this manual, source files are "
          "described in detail, and the source of each vector graphics example is in the appendix. "
          "Programs in C read a vector of numbers from the source file. ") * 3
MANUAL = [
    FILLER,
    "Value matching. The infix operator %in% returns a logical vector indicating if there is a match "
    "for each element of its left operand in its right operand.",
    FILLER,
    "Feature test macros. Define _GNU_SOURCE before including any header file to obtain every "
    "extension the C library offers.",
    "Containers. A std::vector grows as elements are appended; reserve the capacity in advance when "
    "the final size is known.",
    "Compilers. The manual's examples compile with any C++ compiler that supports the 2017 standard.",
    "Plotting. The command set xrange [0:10] fixes the horizontal axis; x11() opens a window on screen. "
    "Use strsplit to split character strings at a separator.",
]


@pytest.fixture(scope="module")
def manual(settings: Settings, embedder, tmp_path_factory) -> tuple[str, str]:
    """The generated manual ingested into its own collection; returns (collection, document name)."""
    path = text_pdf(tmp_path_factory.mktemp("manual") / f"manual-{RUN}.pdf", MANUAL)
    collection = f"manual-{RUN}"
    ingest_source(settings, embedder, read_path(str(path), 10_000_000), collection, quiet=True)
    return collection, path.name


def _top_text(settings: Settings, collection: str, query: str) -> str:
    with pool.connection(settings) as conn:
        hits = bm25(conn, query, 3, Scope.of([collection]))
        assert hits, f"no keyword hit for {query!r}"
        return conn.execute("SELECT text FROM chunks WHERE collection = %s AND id = %s",
                            (collection, hits[0].chunk_id)).fetchone()["text"]


@pytest.mark.parametrize("query, expected", [
    ("%in%", "%in%"), ("what does %in% return", "%in%"), ("GNU_SOURCE", "_GNU_SOURCE"),
    ("_GNU_SOURCE macro", "_GNU_SOURCE"), ("std::vector", "std::vector"), ("C++ compiler", "C++ compiler"),
    ("x11()", "x11()"), ("set xrange", "set xrange"), ("strsplit", "strsplit"),
])
def test_keyword_search_finds_identifiers(settings, manual, query, expected):
    assert expected in _top_text(settings, manual[0], query)


def test_prose_keeps_english_stemming(settings, manual):
    # "matches"/"extensions" are not in the text; their stems are
    assert "%in%" in _top_text(settings, manual[0], "matches for elements")
    assert "_GNU_SOURCE" in _top_text(settings, manual[0], "library extensions")


def test_bm25_statistics_are_kept_per_document_and_match_the_chunks(settings, dev_corpus, manual):
    with db.connection(settings) as conn:
        for collection in (dev_corpus, manual[0]):
            bad = conn.execute(
                "SELECT d.name FROM documents d WHERE d.collection = %s AND d.token_total <> "
                "(SELECT sum(c.token_count) FROM chunks c WHERE c.collection = d.collection AND c.document_id = d.id)",
                (collection,)).fetchall()
            assert not bad
        for lexeme in ("fuel", "night", "aircraft", "%in%", "gnu_source"):
            kept = conn.execute("SELECT coalesce(sum(df), 0) AS n FROM document_lexemes WHERE collection = ANY(%s) "
                                "AND lexeme = %s", ([dev_corpus, manual[0]], lexeme)).fetchone()["n"]
            counted = conn.execute("SELECT count(*) AS n FROM chunks c WHERE c.collection = ANY(%s) AND "
                                   "c.tsv @@ quote_literal(%s)::tsquery", ([dev_corpus, manual[0]], lexeme)).fetchone()["n"]
            assert kept == counted > 0, lexeme


def test_sentence_vectors_are_stored_at_ingest_and_search_embeds_nothing_else(settings, dev_corpus, embedder,
                                                                             monkeypatch):
    with db.connection(settings) as conn:
        rows = conn.execute(
            "SELECT c.id, c.context, c.text, (SELECT count(*) FROM chunk_sentences s WHERE s.collection = c.collection "
            "AND s.chunk_id = c.id) AS n FROM chunks c WHERE c.collection = %s ORDER BY c.id", (dev_corpus,)).fetchall()
    assert rows and all(r["n"] == len(windows_of(r["context"], r["text"])) for r in rows)
    s = settings.but(search={"reranker": SENTENCES})
    query = "How much fuel reserve is required for VFR flight at night?"
    calls: list[int] = []
    real_embed = type(embedder).embed
    monkeypatch.setattr(type(embedder), "embed", lambda self, texts, **kw: calls.append(len(texts))
                        or real_embed(self, texts, **kw))
    res = search(s, query, k=5, collections=[dev_corpus])
    assert calls == [], "the reranker embedded sentences at query time"
    assert res.reranker == SENTENCES and res.results[0].page == 28
    # the stored vectors are the windows pooled from the chunk's own pass (late chunking): scoring
    # them again gives the stored score, up to half precision and int8 scales that depend on the batch
    monkeypatch.undo()
    with db.connection(settings) as conn:
        indexed = {r["id"]: r["search_text"] for r in conn.execute(
            "SELECT id, search_text FROM chunks WHERE collection = %s AND id = ANY(%s)",
            (dev_corpus, [p.chunk_id for p in res.results]))}
    qv = embedder.embed_query(query)
    for p in res.results:
        _, windows = embedder.embed_chunks([indexed[p.chunk_id]], [(p.context, p.text)])
        assert len(windows[0]) == len(windows_of(p.context, p.text))
        assert abs(float((windows[0] @ qv).max()) - p.stages.rerank_score) < 0.03


def test_a_document_indexed_without_sentence_vectors_is_still_reranked(settings, manual):
    s = settings.but(search={"reranker": SENTENCES})
    query = "Which macro gives every C library extension?"
    before = search(s, query, k=3, collections=[manual[0]])
    with db.connection(settings) as conn:
        conn.execute("DELETE FROM chunk_sentences WHERE collection = %s", (manual[0],))
    after = search(s, query, k=3, collections=[manual[0]])
    assert [p.chunk_id for p in after.results] == [p.chunk_id for p in before.results]
    # reranked by windows embedded now, on their own (stored ones were pooled from the chunk's pass)
    assert all(p.stages.rerank_score is not None and p.stages.rerank_score > 0.2 for p in after.results)
    assert [p.stages.rerank_score for p in after.results] != [p.stages.rerank_score for p in before.results]


def test_removing_a_document_removes_its_statistics(settings, embedder, tmp_path):
    collection = f"gone-{RUN}"
    path = text_pdf(tmp_path / "gone.pdf", MANUAL[1:2] * 2)
    ingest_source(settings, embedder, read_path(str(path), 10_000_000), collection, quiet=True)
    count = ("SELECT (SELECT count(*) FROM document_lexemes WHERE collection = %(c)s) AS lexemes, "
             "(SELECT count(*) FROM chunk_sentences WHERE collection = %(c)s) AS sentences")
    with db.connection(settings) as conn:
        assert all(v > 0 for v in conn.execute(count, {"c": collection}).fetchone().values())
        assert remove_document(conn, "gone.pdf", collection) == [collection]
        assert all(v == 0 for v in conn.execute(count, {"c": collection}).fetchone().values())


def test_default_reranker_is_the_measured_one_and_db_status_names_it(settings, embedder, monkeypatch, caplog):
    monkeypatch.delenv("CHAPTERVERSE_RERANKER", raising=False)
    assert Settings().search.reranker == SENTENCES
    with caplog.at_level(logging.INFO, logger="retrieval.search.rerank"):
        choice = choose(Settings().search.reranker, embedder)
    assert choice.name == SENTENCES and not choice.note
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    out = run_cli("db", "status", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["reranker"] == SENTENCES
    missing = "/nonexistent/cross-encoder"
    out = run_cli("db", "status", env={"CHAPTERVERSE_RERANKER": missing})
    assert out.returncode == 0, out.stderr
    line = [x for x in out.stdout.splitlines() if x.startswith("reranker:")]
    assert len(line) == 1 and SENTENCES in line[0] and missing in line[0]


def test_search_statistics_tables_are_keyed_by_collection_first(settings):
    with db.connection(settings) as conn:
        for table in ("document_lexemes", "chunk_sentences"):
            first = conn.execute(
                "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
                "AND a.attnum = i.indkey[0] WHERE i.indrelid = %s::regclass AND i.indisprimary", (table,)).fetchone()
            assert first["attname"] == "collection", table


def _counted_through_the_gin_index(settings, phrases, words, collections) -> PhraseStats:
    """The oracle: every count made by scanning the chunks (what the answerer did before the
    statistics kept at ingest were read instead)."""
    with pool.connection(settings) as conn:
        sizes = {r["name"]: int(r["n"]) for r in conn.execute(
            "SELECT d.name, count(*) AS n FROM chunks c JOIN documents d ON d.collection = c.collection "
            "AND d.id = c.document_id WHERE c.collection = ANY(%s) GROUP BY d.name", [collections])}
        word_df = {w: int(conn.execute("SELECT count(*) AS n FROM chunks c WHERE c.collection = ANY(%s) "
                                       "AND c.tsv @@ plainto_tsquery('english', %s)", [collections, w]).fetchone()["n"])
                   for w in words}
        per_doc = {p: {r["name"]: int(r["n"]) for r in conn.execute(
            "SELECT d.name, count(*) AS n FROM chunks c JOIN documents d ON d.collection = c.collection "
            "AND d.id = c.document_id WHERE c.collection = ANY(%s) AND c.tsv @@ phraseto_tsquery('english', %s) "
            "GROUP BY d.name", [collections, p])} for p in phrases}
    return PhraseStats(sum(sizes.values()), {p: sum(v.values()) for p, v in per_doc.items()}, word_df,
                       {p: {name: n / sizes[name] for name, n in v.items()} for p, v in per_doc.items()})


def test_term_statistics_from_kept_counts_equal_counting_the_chunks(settings, dev_corpus, manual):
    from retrieval.answer.term_stats import statistics  # noqa: PLC0415

    phrases = ["fuel reserve", "pilot in command", "emergency locator transmitter", "zebra crossing", "aircraft",
               "gnu_source", "%in% operator"]
    words = ["fuel", "night", "the", "transmitter", "zebra", "GNU_SOURCE", "%in%", "std::vector", "flight"]
    collections = [dev_corpus, manual[0]]
    with pool.connection(settings) as conn:
        fast = statistics(conn, phrases, words, Scope.of(collections))
    slow = _counted_through_the_gin_index(settings, phrases, words, collections)
    assert fast.chunks == slow.chunks > 0
    assert dict(fast.phrase_df) == dict(slow.phrase_df)
    assert dict(fast.word_df) == dict(slow.word_df)
    assert {p: dict(v) for p, v in fast.share_by_document.items()} == \
        {p: dict(v) for p, v in slow.share_by_document.items()}
