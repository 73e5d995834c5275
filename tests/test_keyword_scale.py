"""The keyword leg's pruning (retrieval.search.keyword.bm25_sql, bounded by the postings bands of
retrieval.store.postings) returns exactly the ranking of scoring every chunk that has any query lexeme, on
the real collections and their real questions, also after a document is added and removed, while
scoring fewer chunks."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from ingest.pipeline import ingest_source
from ingest.sources import read_path
from ingest.store import remove_document
from retrieval.store import pool
from retrieval.search.filters import Scope
from retrieval.search.keyword import bm25, bm25_all, bm25_all_sql, bm25_params, bm25_sql
from tests.corpus2_fixture import manuals_corpus  # noqa: F401  (fixture)
from tests.pdfgen import text_pdf

HERE = Path(__file__).resolve().parent
CFR = "14-CFR-Part-91_General-Operating-and-Flight-Rules.pdf"


def _questions(path: Path) -> list[str]:
    return [q["question"] for q in json.loads(path.read_text())]


def _ranking(hits) -> list[tuple[int, float]]:
    return [(h.chunk_id, round(h.score, 9)) for h in hits]


def _chunks_read(conn: psycopg.Connection, sql: str, params: dict) -> int:
    """Rows the statement read from ``chunks`` (the candidates it scored), from EXPLAIN ANALYZE."""
    plan = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params).fetchone()
    total = 0

    def walk(node: dict) -> None:
        nonlocal total
        if node.get("Relation Name") == "chunks":
            total += int(node["Actual Rows"] * node.get("Actual Loops", 1))
        for child in node.get("Plans", []):
            walk(child)

    walk(next(iter(plan.values()))[0]["Plan"])
    return total


@pytest.mark.parametrize("depth", [10, 50])
def test_pruned_bm25_ranks_the_faa_dev_questions_as_scoring_every_candidate(settings, dev_corpus, depth):
    scope = Scope.of([dev_corpus])
    with pool.connection(settings) as conn:
        for q in _questions(HERE / "corpus" / "dev_questions.json"):
            pruned = _ranking(bm25(conn, q, depth, scope))
            assert len(pruned) == depth, q
            assert pruned == _ranking(bm25_all(conn, q, depth, scope)), q


def test_pruned_bm25_ranks_the_manuals_questions_as_scoring_every_candidate(settings, manuals_corpus):
    scope = Scope.of([manuals_corpus])
    with pool.connection(settings) as conn:
        for q in _questions(HERE / "corpus2" / "dev_questions.json"):
            assert _ranking(bm25(conn, q, 10, scope)) == _ranking(bm25_all(conn, q, 10, scope)), q


def test_pruning_keeps_the_ranking_with_document_and_multi_collection_scopes(settings, dev_corpus, manuals_corpus):
    questions = _questions(HERE / "corpus" / "dev_questions.json")[:8] + ["what does %in% return", "strsplit"]
    scopes = [Scope.of([dev_corpus, manuals_corpus]), Scope.of([dev_corpus], [CFR])]
    with pool.connection(settings) as conn:
        for scope in scopes:
            for q in questions:
                assert _ranking(bm25(conn, q, 10, scope)) == _ranking(bm25_all(conn, q, 10, scope)), (scope, q)


def test_pruning_keeps_the_ranking_after_a_document_is_added_and_removed(settings, embedder, dev_corpus, tmp_path):
    # a document made of the questions' own words competes for every top list and changes the scope's
    # IDF and average length; its postings come and go with it
    questions = _questions(HERE / "corpus" / "dev_questions.json")
    extra = "dev-postings-extra"
    pages = [" ".join(questions[i:i + 4]) * 3 for i in range(0, len(questions), 4)]
    pdf = text_pdf(tmp_path / "questions-as-manual.pdf", pages)
    scope = Scope.of([dev_corpus, extra])

    def same_rankings(conn: psycopg.Connection) -> list[int]:
        tops: list[int] = []
        for q in questions:
            pruned = _ranking(bm25(conn, q, 10, scope))
            assert pruned == _ranking(bm25_all(conn, q, 10, scope)), q
            tops += [cid for cid, _ in pruned]
        return tops

    ingest_source(settings, embedder, read_path(str(pdf), 10_000_000), extra, quiet=True)
    with pool.connection(settings) as conn:
        try:
            ids = {r["id"] for r in conn.execute("SELECT id FROM chunks WHERE collection = %s", (extra,))}
            bands = conn.execute("SELECT count(*) AS n FROM lexeme_bands WHERE collection = %s", (extra,)).fetchone()
            assert ids and bands["n"] > 0
            assert ids & set(same_rankings(conn)), "the added document should reach some top lists"
        finally:
            assert remove_document(conn, pdf.name, extra) == [extra]
        left = conn.execute("SELECT count(*) AS n FROM lexeme_bands WHERE collection = %s", (extra,)).fetchone()
        assert left["n"] == 0  # removed with the document
        assert not ids & set(same_rankings(conn))


def test_few_matches_fall_back_to_every_candidate(settings, dev_corpus):
    # the rare words match fewer chunks than asked for: the threshold is 0 and every match is returned
    scope = Scope.of([dev_corpus])
    q = "zeppelinoid transponder flibbertigibbet"
    with pool.connection(settings) as conn:
        every = bm25_all(conn, q, 1000, scope)
        assert 0 < len(every) < 1000
        assert _ranking(bm25(conn, q, 1000, scope)) == _ranking(every)
        assert bm25(conn, "flibbertigibbet zeppelinoid", 10, scope) == []


def test_pruning_scores_fewer_chunks_on_common_word_questions(settings, dev_corpus):
    scope = Scope.of([dev_corpus])
    q = "What must the pilot in command of an aircraft check before a flight?"
    params = bm25_params(q, 10, scope)
    with pool.connection(settings) as conn:
        every = _chunks_read(conn, bm25_all_sql(scope), params)
        pruned = _chunks_read(conn, bm25_sql(scope), params)
        total = conn.execute("SELECT count(*) AS n FROM chunks WHERE collection = %s", (dev_corpus,)).fetchone()["n"]
    assert every > total / 2, (every, total)  # common words: most chunks are candidates
    assert pruned < every / 4, (pruned, every)


def test_eval_scale_keyword_only_times_both_rankings_and_finds_them_equal(settings, dev_corpus, tmp_path):
    from retrieval.eval.scale import run  # noqa: PLC0415

    questions = json.loads((HERE / "corpus" / "dev_questions.json").read_text())[:4]
    path = tmp_path / "questions.json"
    path.write_text(json.dumps(questions))
    result = run(settings, path, dev_corpus, [3000], keyword_only=True, keep=False)
    size = result["sizes"]["3000"]
    assert "search_ms" not in size and size["bytes"]["hnsw_index"] == 0
    leg = size["keyword_leg"]
    assert leg["same_top_list"] == "4/4"
    assert all(v["n"] == 4 and v["p50"] > 0 for v in leg["ms"].values())
    with psycopg.connect(settings.database_url.get_secret_value()) as conn:
        gone = conn.execute("SELECT count(*) FROM pg_database WHERE datname = 'cv_scale_3000_keyword'").fetchone()[0]
    assert gone == 0
