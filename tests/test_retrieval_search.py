"""Hybrid search against the real dev corpus in Postgres: BM25 behaviour, filters, dedup, rerankers, CLI."""

from __future__ import annotations

import json
import logging
import os
import string
import subprocess
import sys
from pathlib import Path

import pytest

from retrieval.store import pool
from retrieval.search.filters import Scope
from chapterverse_lab.bm25 import bm25
from retrieval.search.rerank import FALLBACK, choose
from retrieval.search.search import search
from retrieval.settings import Settings
from tests.conftest import ROOT, run_cli

CFR = "14-CFR-Part-91_General-Operating-and-Flight-Rules.pdf"
ACS = "FAA-S-ACS-6C_Private-Pilot-Airplane-ACS.pdf"


def _pages(settings: Settings, chunk_ids: list[int]) -> list[tuple[str, int, int]]:
    with pool.connection(settings) as conn:
        rows = conn.execute("SELECT c.id, d.name, c.page_start, c.page_end FROM chunks c JOIN documents d "
                            "ON d.collection = c.collection AND d.id = c.document_id WHERE c.id = ANY(%s)",
                            [chunk_ids]).fetchall()
    by_id = {r["id"]: (r["name"], r["page_start"], r["page_end"]) for r in rows}
    return [by_id[c] for c in chunk_ids]


def _covers(found: list[tuple[str, int, int]], doc: str, page: int) -> bool:
    return any(d == doc and p0 <= page <= p1 for d, p0, p1 in found)


def test_bm25_finds_the_passage_although_a_question_word_is_absent_from_the_corpus(settings, dev_corpus):
    question = ("Over a congested area of a city or an open air assembly of persons, what minimum altitude "
                "must a zeppelinoid flibbertigibbet keep above the highest obstacle?")
    with pool.connection(settings) as conn:
        assert conn.execute("SELECT count(*) AS n FROM chunks WHERE tsv @@ to_tsquery('english', 'flibbertigibbet')"
                            ).fetchone()["n"] == 0
        hits = bm25(conn, question, 5, Scope.of([dev_corpus]))
    assert hits, "an absent word must not empty the keyword results"
    assert _covers(_pages(settings, [h.chunk_id for h in hits]), CFR, 17)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_bm25_stems_so_word_forms_match(settings, dev_corpus):
    with pool.connection(settings) as conn:
        plural = bm25(conn, "emergency locator transmitter batteries replaced", 10, Scope.of([dev_corpus]))
        singular = bm25(conn, "emergency locator transmitters battery replacement", 10, Scope.of([dev_corpus]))
    assert [h.chunk_id for h in plural] == [h.chunk_id for h in singular]
    assert _covers(_pages(settings, [h.chunk_id for h in plural[:5]]), CFR, 46)


def test_bm25_weighs_rare_words_over_common_ones(settings, dev_corpus):
    with pool.connection(settings) as conn:
        hits = bm25(conn, "the pilot aircraft flight altimeter", 5, Scope.of([dev_corpus]))
        texts = conn.execute("SELECT text FROM chunks WHERE id = ANY(%s)", [[h.chunk_id for h in hits]]).fetchall()
    assert all("altimeter" in r["text"].lower() for r in texts)


def test_search_filters_by_collection_and_document(settings, dev_corpus):
    res = search(settings, "touchdown point for a short-field landing", k=5, collections=[dev_corpus],
                 documents=[ACS])
    assert len(res.results) == 5
    assert {p.document for p in res.results} == {ACS}
    assert {p.collection for p in res.results} == {dev_corpus}
    assert search(settings, "landing", k=5, collections=["no-such-collection"]).results == []
    assert search(settings, "landing", k=5, documents=["no-such.pdf"]).results == []


def test_filtered_dense_search_still_returns_k_rows(settings, dev_corpus, embedder):
    from retrieval.search import vector  # noqa: PLC0415

    vec = embedder.embed_query("sport pilot certificate age")
    with pool.connection(settings) as conn:
        hits = vector.dense(conn, vec, 8, Scope.of([dev_corpus], [ACS]))
        docs = conn.execute("SELECT DISTINCT d.name FROM chunks c JOIN documents d ON d.collection = c.collection "
                            "AND d.id = c.document_id WHERE c.id = ANY(%s)", [[h.chunk_id for h in hits]]).fetchall()
    assert len(hits) == 8 and [r["name"] for r in docs] == [ACS]


@pytest.mark.parametrize("exact_max", [None, 0])  # the collection's own size; 0: every scope goes to HNSW
def test_a_small_collection_is_searched_exactly_whatever_the_planner_knows(settings, dev_corpus, embedder,
                                                                          monkeypatch, exact_max):
    """Left to the planner, the collection-filtered nearest-neighbour query ran exact until the first
    ANALYZE and on the approximate HNSW index after; a small scope is now always exact."""
    import numpy as np  # noqa: PLC0415

    from retrieval.search import vector  # noqa: PLC0415

    if exact_max is not None:
        monkeypatch.setattr(vector, "EXACT_MAX", exact_max)
    scope = Scope.of([dev_corpus])
    with pool.connection(settings) as conn:
        conn.execute("ANALYZE chunks")
        rows = conn.execute("SELECT id, embedding FROM chunks WHERE collection = %s", (dev_corpus,)).fetchall()
        ids = np.array([r["id"] for r in rows])
        mat = np.array([r["embedding"].to_numpy() for r in rows], dtype=np.float64)
        mat /= np.linalg.norm(mat, axis=1, keepdims=True)
        for question in ("How much fuel for a VFR flight at night?", "When must an ELT battery be replaced?",
                         "What does the examiner do if the practical test is discontinued?"):
            vec = embedder.embed_query(question)
            got = [h.chunk_id for h in vector.dense(conn, vec, 10, scope)]
            assert len(got) == 10
            if exact_max is None:
                nearest = ids[np.argsort(-(mat @ (vec / np.linalg.norm(vec))), kind="stable")][:10]
                assert got == [int(i) for i in nearest], question
        # while the table holds only this collection (this test alone, a fresh database) the planner scans
        # and sorts the large-scope branch too: the branch under test is the HNSW index's, so sorting is
        # made a last resort here (the exact branch's distance, "+ 0", cannot use the index: it still sorts)
        conn.execute("SET enable_sort = off")
        try:
            plan = "\n".join(next(iter(r.values())) for r in conn.execute(
                "EXPLAIN (ANALYZE, COSTS OFF) " + vector.nearest_sql(scope), {**scope.params(), "vec": vec, "limit": 10}))
        finally:
            conn.execute("RESET enable_sort")
    hnsw = [line for line in plan.splitlines() if "chunks_embedding_hnsw" in line]
    assert hnsw, plan  # the large-scope branch is planned ...
    assert ("never executed" in hnsw[0]) == (exact_max is None), plan  # ... and runs only past EXACT_MAX


@pytest.mark.parametrize("query", [
    "VFR weather minimums Class E airspace visibility cloud clearance",
    "Letter of Discontinuance practical test",
    "aerobatic flight prohibited",
])
def test_top_five_do_not_repeat_a_page_or_overlap(settings, dev_corpus, query):
    res = search(settings, query, k=5, collections=[dev_corpus])
    assert len(res.results) == 5
    starts = [(p.document, p.page) for p in res.results]
    assert len(set(starts)) == len(starts)
    for i, a in enumerate(res.results):
        for b in res.results[i + 1:]:
            if a.document == b.document and a.page == b.page_end == a.page_end == b.page:
                assert a.char_end <= b.char_start or b.char_end <= a.char_start


def test_result_reports_stage_ranks(settings, dev_corpus):
    res = search(settings, "When must ELT batteries be replaced?", k=3, collections=[dev_corpus])
    top = res.results[0]
    assert top.stages.fused_rank is not None
    assert top.stages.keyword_rank is not None or top.stages.dense_rank is not None
    assert {"embed_query", "legs", "fuse", "rerank", "total"} <= set(res.timings_ms)


def test_unloadable_reranker_falls_back_logs_once_and_is_reported(settings, dev_corpus, tmp_path, caplog):
    missing = str(tmp_path / "no-such-cross-encoder")
    s = settings.but(search={"reranker": missing})
    with caplog.at_level(logging.WARNING, logger="retrieval.search.rerank"):
        first = search(s, "fuel reserve for VFR flight at night", k=3, collections=[dev_corpus])
        second = search(s, "oxygen above 12,500 feet", k=3, collections=[dev_corpus])
    assert first.reranker == second.reranker == FALLBACK
    warnings = [r for r in caplog.records if missing in r.getMessage()]
    assert len(warnings) == 1 and FALLBACK in warnings[0].getMessage()
    assert len(first.results) == 3


def test_a_cross_encoder_that_is_not_there_falls_back_without_loading_torch() -> None:
    """A configured cross-encoder that is neither a folder nor in the Hugging Face cache is not tried:
    importing sentence-transformers only to fail cost every cold command about 4 s."""
    code = ("import sys\n"
            "from retrieval.search import rerank\n"
            "class Stub:\n    name = 'stub'\n"
            "choice = rerank.choose('/nonexistent/cross-encoder', Stub())\n"
            "print(choice.name, 'torch' in sys.modules, 'sentence_transformers' in sys.modules)\n")
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [FALLBACK, "False", "False"], out.stdout + out.stderr
    assert "could not be loaded" in out.stderr and "nothing is downloaded" in out.stderr, out.stderr


def test_none_reranker_keeps_fused_order(settings, dev_corpus):
    s = settings.but(search={"reranker": "none"})
    res = search(s, "supplemental oxygen cabin pressure altitude", k=5, collections=[dev_corpus])
    assert res.reranker == "none"
    fused = [p.stages.fused_rank for p in res.results]
    assert all(p.stages.rerank_rank is None for p in res.results)
    assert fused[0] == 1


def _tiny_cross_encoder(path: Path) -> Path:
    """A randomly initialised 2-layer BERT cross-encoder with a word-piece vocabulary, saved locally."""
    from sentence_transformers import CrossEncoder  # noqa: PLC0415
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast  # noqa: PLC0415

    words = ["fuel", "reserve", "night", "day", "minutes", "flight", "pilot", "altitude", "oxygen", "feet"]
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *string.ascii_lowercase, *string.digits,
             *string.punctuation, *words, *(f"##{c}" for c in string.ascii_lowercase + string.digits)]
    path.mkdir(parents=True, exist_ok=True)
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tok = BertTokenizerFast(vocab_file=str(path / "vocab.txt"), do_lower_case=True)
    cfg = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=512, num_labels=1)
    BertForSequenceClassification(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    model = CrossEncoder(str(path), device="cpu", num_labels=1)
    model.save(str(path))
    return path


def test_cross_encoder_path_with_a_tiny_model(settings, dev_corpus, tmp_path):
    model_dir = _tiny_cross_encoder(tmp_path / "tiny-ce")
    s = settings.but(search={"reranker": str(model_dir)})
    choice = choose(str(model_dir), __import__("retrieval.encode.embed", fromlist=["x"]).get_embedder(s.search.embedding_model))
    assert choice.name == f"cross-encoder:{model_dir}" and not choice.note
    res = search(s, "fuel reserve for a VFR flight at night", k=5, collections=[dev_corpus])
    assert res.reranker == f"cross-encoder:{model_dir}"
    assert len(res.results) == 5
    scores = [p.stages.rerank_score for p in res.results]
    assert all(sc is not None for sc in scores)
    # the final order follows the cross-encoder's scores (diversity may only move repeats of a page down)
    ranks = [p.stages.rerank_rank for p in res.results]
    assert ranks == sorted(ranks) or len({(p.document, p.page) for p in res.results}) == 5
    assert [p.score for p in res.results] == scores


def test_cli_search_json_shape(settings, dev_corpus):
    out = run_cli("search", "How much fuel reserve is required for VFR flight at night?", "--k", "3", "--json",
                  "--collection", dev_corpus)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["query"].startswith("How much fuel")
    assert doc["reranker"] == FALLBACK
    assert len(doc["results"]) == 3
    for i, r in enumerate(doc["results"], 1):
        assert r["rank"] == i
        assert {"document", "page", "page_label", "text", "score", "stages"} <= set(r)
        assert {"keyword_rank", "dense_rank", "fused_rank", "rerank_rank"} <= set(r["stages"])
    assert doc["results"][0]["document"] == CFR and doc["results"][0]["page"] == 28


def test_cli_search_plain_output_names_the_reranker(settings, dev_corpus):
    out = run_cli("search", "aerobatic flight", "--k", "2", "--collection", dev_corpus)
    assert out.returncode == 0, out.stderr
    assert "1. " in out.stdout and f"the {FALLBACK} reranker's rank" in out.stdout
