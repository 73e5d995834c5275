"""Ingest's passage encoder (retrieval.encode.passage_encoder through Embedder.embed_chunks): one int8
ONNX pass per chunk gives the chunk's vector (close to torch's) and every sentence window's vector;
an ingest with the export in place never imports torch; a model that is not mean-pooled, or a
damaged export, falls back to torch (re-exported), never a crash or a wrong vector."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pymupdf
import pytest

from ingest.chunk import chunk_pages
from ingest.pdf import document_title, extract
from ingest.passages import indexed_text
from retrieval.encode import passage_encoder as pe
from retrieval.encode import query_encoder as qe
from retrieval.encode.embed import BUNDLED, Embedder, resolve_model_path
from retrieval.encode.sentence_index import window_spans, windows_of
from retrieval.text.textnorm import search_text

CORPUS = Path(__file__).parent / "corpus"
MODEL_PATH = resolve_model_path(BUNDLED)


def test_windows_are_found_in_the_indexed_text_heading_included():
    context = "Preflight action"
    text = ("Each pilot in command shall, before beginning a flight, become familiar with all available "
            "information concerning that flight. This information must in-\nclude weather reports and "
            "forecasts.\n\nFuel requirements. For a flight under IFR, alternatives.")
    indexed = search_text(f"14 CFR Part 91\n{context} · Operating rules\n{text}")
    spans = window_spans(indexed, context, text)
    windows = windows_of(context, text)
    assert len(spans) == len(windows) == 3
    # the heading is found in the prefix, the first sentence after it; nothing is read twice
    found = [" ".join(indexed[a:b] for a, b in pieces) for pieces in spans]
    assert found[0].startswith("Preflight action Each pilot in command")
    assert "must include weather reports" in found[1]  # the line-break hyphen joined, as indexed
    assert found[2] == "Fuel requirements. For a flight under IFR, alternatives."
    ends = [pieces[-1][1] for pieces in spans]
    assert ends == sorted(ends) and ends[-1] == len(indexed)


def test_a_window_missing_from_the_indexed_text_gets_no_span():
    spans = window_spans("a different text entirely", None, "Short first sentence here. And another one follows.")
    assert spans == [[], []]


@pytest.fixture(scope="module")
def cfr_chunks(embedder):
    doc = pymupdf.open(CORPUS / "14-CFR-Part-91_General-Operating-and-Flight-Rules.pdf")
    pages = extract(doc)[30:36]
    title = document_title(doc, "14-CFR-Part-91.pdf")
    chunks = chunk_pages(pages, embedder.count_tokens, 200, 40)
    return [indexed_text(c, title, embedder) for c in chunks], [(c.context, c.text) for c in chunks]


def test_one_int8_pass_gives_the_chunk_vectors_and_every_window(embedder, cfr_chunks, settings):
    texts, sources = cfr_chunks
    vectors, windows = embedder.embed_chunks(texts, sources)
    meta = pe.read_meta(qe.export_dir(settings.home / "passage-encoder", qe.model_key(MODEL_PATH, pe.FORMAT)))
    assert meta is not None and meta.precision == "int8" and meta.probe_cosine >= pe.INT8_MIN_COSINE
    torch_vectors = embedder.embed(texts)
    cos = np.sum(vectors * torch_vectors, axis=1)
    assert cos.min() > 0.97, cos.min()
    assert [len(w) for w in windows] == [len(windows_of(c, t)) for c, t in sources]
    for w in windows:
        assert not np.isnan(w).any()
        assert np.allclose(np.linalg.norm(w, axis=1), 1, atol=1e-3)
    # a window's vector is about its own sentence: among the chunk's windows, its own sentence's
    # standalone embedding is the closest for most windows (68% on these pages; chance is ~1 in 7),
    # not all, since every token has read its neighbours
    hits = total = 0
    for (c, t), w in zip(sources, windows, strict=True):
        own = embedder.embed(windows_of(c, t))
        if len(own) > 1:
            hits += int(np.sum(np.argmax(w @ own.T, axis=1) == np.arange(len(own))))
            total += len(own)
    assert hits / total > 0.5, (hits, total)


def test_ingest_with_the_export_in_place_does_not_import_torch(embedder, settings, cfr_chunks, tmp_path):
    embedder.embed_chunks(*cfr_chunks)  # the export exists in the test home now
    code = (
        "import sys; from retrieval.encode.embed import Embedder, passage_cache_root, query_cache_root\n"
        f"e = Embedder({BUNDLED!r}, query_cache=query_cache_root(), passage_cache=passage_cache_root())\n"
        "v, w = e.embed_chunks(['Fuel requirements for flight in VFR conditions. At night, 45 minutes.'],"
        " [('Fuel', 'Fuel requirements for flight in VFR conditions. At night, 45 minutes.')])\n"
        "print(v.shape, len(w[0]), 'torch' in sys.modules)\n")
    env = {"PATH": "/usr/bin:/bin", "CHAPTERVERSE_HOME": str(settings.home), "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300,
                         cwd=Path(__file__).parent.parent, check=True).stdout.split()
    assert out == ["(1,", "384)", "2", "False"]


def test_a_first_ingest_writes_the_exports_in_a_child_and_never_imports_torch(tmp_path):
    """No export yet (a fresh install): the query and passage exports are written by a process of
    their own, so the ingest process stays without torch (it peaked at 1.14 GB when it exported
    itself) and gets the same int8 graph the in-process export writes."""
    code = (
        "import sys; from pathlib import Path; from retrieval.encode.embed import Embedder\n"
        f"e = Embedder({BUNDLED!r}, query_cache=Path(sys.argv[1]) / 'q', passage_cache=Path(sys.argv[1]) / 'p')\n"
        "v, w = e.embed_chunks(['Fuel requirements for flight in VFR conditions. At night, 45 minutes.'],"
        " [('Fuel', 'Fuel requirements for flight in VFR conditions. At night, 45 minutes.')])\n"
        "print(v.shape, e.passage_encoder_status().split()[:2], 'torch' in sys.modules)\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, env=env,
                         timeout=600, cwd=Path(__file__).parent.parent, check=True).stdout.split()
    assert out == ["(1,", "384)", "['onnx',", "'int8']", "False"]
    key = qe.model_key(MODEL_PATH)
    assert qe.read_meta(qe.export_dir(tmp_path / "q", key)) is not None  # the query encoder too
    assert pe.read_meta(qe.export_dir(tmp_path / "p", qe.model_key(MODEL_PATH, pe.FORMAT))).probe_cosine >= pe.INT8_MIN_COSINE


def test_a_damaged_export_is_replaced_and_vectors_stay_right(tmp_path, cfr_chunks):
    cache = tmp_path / "passages"
    first = Embedder(BUNDLED, passage_cache=cache)
    texts, sources = cfr_chunks[0][:4], cfr_chunks[1][:4]
    good, _ = first.embed_chunks(texts, sources)
    graph = next(cache.glob("*/passages.onnx"))
    data = bytearray(graph.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte in the weights
    graph.write_bytes(bytes(data))
    second = Embedder(BUNDLED, passage_cache=cache)
    again, _ = second.embed_chunks(texts, sources)
    assert np.sum(again * good, axis=1).min() > 0.99
    assert second.passage_encoder_status().startswith("onnx int8")  # re-exported, checksum good again


def test_a_model_that_is_not_mean_pooled_is_embedded_with_torch(tmp_path, cfr_chunks):
    local = tmp_path / "cls-model"
    shutil.copytree(MODEL_PATH, local)
    conf = local / "1_Pooling" / "config.json"
    settings = json.loads(conf.read_text())
    settings.update({"pooling_mode_mean_tokens": False, "pooling_mode_cls_token": True})
    conf.write_text(json.dumps(settings))
    emb = Embedder(str(local), passage_cache=tmp_path / "passages")
    texts, sources = cfr_chunks[0][:3], cfr_chunks[1][:3]
    vectors, windows = emb.embed_chunks(texts, sources)
    assert "not the mean of token states" in emb.passage_encoder_status()
    assert np.allclose(vectors, emb.embed(texts), atol=1e-5)
    assert np.allclose(windows[0], emb.embed(windows_of(*sources[0])), atol=1e-5)
