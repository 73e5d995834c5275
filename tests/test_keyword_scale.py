"""The keyword leg as searched (chapterverse_lab.bm25.bm25: numpy over the packed postings of
retrieval.store.postings) returns exactly the ranking and the scores of the SQL statement scoring every
chunk that has any query lexeme, on the real collections and their real questions, with document and
multi-collection scopes, and after a document is added and removed (its postings come and go with it)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import psycopg
import pytest
from psycopg.rows import tuple_row

from chapterverse_lab.bm25 import bm25, bm25_all
from ingest.pipeline import ingest_source
from ingest.sources import read_path
from ingest.store import remove_document
from retrieval.store import pool
from retrieval.search.filters import Scope
from retrieval.search.keyword import bm25_params, postings_sql, top_scores
from retrieval.store.postings import POSTING, decode
from tests.corpus2_fixture import manuals_corpus  # noqa: F401  (fixture)
from tests.pdfgen import text_pdf

HERE = Path(__file__).resolve().parent
CFR = "14-CFR-Part-91_General-Operating-and-Flight-Rules.pdf"


def _questions(path: Path) -> list[str]:
    return [q["question"] for q in json.loads(path.read_text())]


def _ranking(hits) -> list[tuple[int, float, str | None]]:
    return [(h.chunk_id, h.score, h.collection) for h in hits]  # scores bit-equal, not rounded


@pytest.mark.parametrize("depth", [10, 50])
def test_bm25_ranks_the_faa_dev_questions_as_the_sql_reference(settings, dev_corpus, depth):
    scope = Scope.of([dev_corpus])
    with pool.connection(settings) as conn:
        for q in _questions(HERE / "corpus" / "dev_questions.json"):
            pruned = _ranking(bm25(conn, q, depth, scope))
            assert len(pruned) == depth, q
            assert pruned == _ranking(bm25_all(conn, q, depth, scope)), q


def test_bm25_ranks_the_manuals_questions_as_the_sql_reference(settings, manuals_corpus):
    scope = Scope.of([manuals_corpus])
    with pool.connection(settings) as conn:
        for q in _questions(HERE / "corpus2" / "dev_questions.json"):
            assert _ranking(bm25(conn, q, 10, scope)) == _ranking(bm25_all(conn, q, 10, scope)), q


def test_bm25_keeps_the_ranking_with_document_and_multi_collection_scopes(settings, dev_corpus, manuals_corpus):
    questions = _questions(HERE / "corpus" / "dev_questions.json")[:8] + ["what does %in% return", "strsplit"]
    scopes = [Scope.of([dev_corpus, manuals_corpus]), Scope.of([dev_corpus], [CFR])]
    with pool.connection(settings) as conn:
        for scope in scopes:
            for q in questions:
                assert _ranking(bm25(conn, q, 10, scope)) == _ranking(bm25_all(conn, q, 10, scope)), (scope, q)


def test_bm25_keeps_the_ranking_after_a_document_is_added_and_removed(settings, embedder, dev_corpus, tmp_path):
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
            tops += [cid for cid, _, _ in pruned]
        return tops

    ingest_source(settings, embedder, read_path(str(pdf), 10_000_000), extra, quiet=True)
    with pool.connection(settings) as conn:
        try:
            ids = {r["id"] for r in conn.execute("SELECT id FROM chunks WHERE collection = %s", (extra,))}
            rows = conn.execute("SELECT count(*) AS n FROM lexeme_postings WHERE collection = %s", (extra,)).fetchone()
            assert ids and rows["n"] > 0
            assert ids & set(same_rankings(conn)), "the added document should reach some top lists"
        finally:
            assert remove_document(conn, pdf.name, extra) == [extra]
        left = conn.execute("SELECT count(*) AS n FROM lexeme_postings WHERE collection = %s", (extra,)).fetchone()
        assert left["n"] == 0  # removed with the document
        assert not ids & set(same_rankings(conn))


def test_few_matches_return_every_match(settings, dev_corpus):
    # the rare words match fewer chunks than asked for: every match is returned, in order
    scope = Scope.of([dev_corpus])
    q = "zeppelinoid transponder flibbertigibbet"
    with pool.connection(settings) as conn:
        every = bm25_all(conn, q, 1000, scope)
        assert 0 < len(every) < 1000
        assert _ranking(bm25(conn, q, 1000, scope)) == _ranking(every)
        assert bm25(conn, "flibbertigibbet zeppelinoid", 10, scope) == []


def test_stored_postings_are_the_chunks_tsvectors(settings, dev_corpus):
    # every (chunk, lexeme) of the tsvectors once, with tf as BM25 counts it and the chunk's length
    with pool.connection(settings) as conn:
        doc = conn.execute("SELECT id FROM documents WHERE collection = %s ORDER BY id LIMIT 1", (dev_corpus,)).fetchone()["id"]
        expected = {(r["id"], r["lexeme"]): (r["tf"], r["dl"]) for r in conn.execute(
            "SELECT c.id, u.lexeme, coalesce(array_length(u.positions, 1), 1) AS tf, greatest(c.token_count, 1) AS dl "
            "FROM chunks c CROSS JOIN LATERAL unnest(c.tsv) u WHERE c.collection = %s AND c.document_id = %s",
            (dev_corpus, doc))}
        stored: dict[tuple[int, str], tuple[int, int]] = {}
        for r in conn.execute("SELECT lexeme, base, postings FROM lexeme_postings WHERE collection = %s "
                              "AND document_id = %s", (dev_corpus, doc), binary=True):
            recs = np.frombuffer(r["postings"], POSTING)
            ids, tf, dl = decode(np.array([r["base"]]), np.array([len(recs)]), recs)
            assert ids[0] == r["base"] and (np.diff(ids) > 0).all()  # in chunk id order, once each
            stored |= {(int(i), r["lexeme"]): (int(t), int(d)) for i, t, d in zip(ids, tf, dl)}
    assert stored == expected and len(expected) > 1000


def test_scattered_chunk_ids_and_collections_score_as_packed_ones(settings, dev_corpus, manuals_corpus):
    # the same rows with chunk ids spread far apart (no slot per id) give the same ranking, collections kept
    scope = Scope.of([dev_corpus, manuals_corpus])
    q = "What must the pilot in command check before a flight with the gnuplot terminal?"
    with pool.connection(settings) as conn, conn.cursor(row_factory=tuple_row) as cur:
        rows = cur.execute(postings_sql(scope), bm25_params(q, 10, scope), binary=True).fetchall()
    spread = []
    for o, w, avgdl, coll, base, postings in rows:
        recs = np.frombuffer(postings, POSTING).copy()
        recs["offset"] = recs["offset"] * 1_000_003
        spread.append((o, w, avgdl, coll, base * 1_000_003, recs.tobytes()))
    packed = top_scores(rows, 10)
    scattered = top_scores(spread, 10)
    assert [(h.chunk_id * 1_000_003, h.score, h.collection) for h in packed] == _ranking(scattered)
    assert {h.collection for h in packed} <= {dev_corpus, manuals_corpus} and len(packed) == 10


def test_eval_scale_keyword_only_times_both_rankings_and_finds_them_equal(settings, dev_corpus, tmp_path):
    from chapterverse_lab.scale import run  # noqa: PLC0415

    questions = json.loads((HERE / "corpus" / "dev_questions.json").read_text())[:4]
    path = tmp_path / "questions.json"
    path.write_text(json.dumps(questions))
    result = run(settings, path, dev_corpus, [3000], keyword_only=True, keep=False)
    size = result["sizes"]["3000"]
    assert "search_ms" not in size and size["bytes"]["hnsw_index"] == 0
    leg = size["keyword_leg"]
    assert leg["same_top_list"] == "4/4"
    assert all(v["n"] == 4 and v["p50"] > 0 for v in leg["ms"].values())
    with psycopg.connect(settings.db.url.get_secret_value()) as conn:
        gone = conn.execute("SELECT count(*) FROM pg_database WHERE datname = 'cv_scale_3000_keyword'").fetchone()[0]
    assert gone == 0
