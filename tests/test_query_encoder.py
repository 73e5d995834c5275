"""The ONNX query encoder (retrieval.encode.query_encoder via retrieval.encode.embed.Embedder): the vectors are
torch's, a query process does not import torch, and a missing, corrupt or foreign export falls back
to torch and is rewritten, never a crash or a wrong vector. Real model, real export, real CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from retrieval.encode import query_encoder as qe
from retrieval.encode.embed import BUNDLED, Embedder, query_cache_root, resolve_model_path

MODEL_PATH = resolve_model_path(BUNDLED)

QUERIES = [
    "What is the maximum indicated airspeed below 10,000 feet MSL?",
    "VFR minimums class E",
    "x",
    "%in%",
    "How do I use `x %in% table` and `match()` in R?",
    "gnuplot: set logscale y 10; plot 'data.dat' using 1:2 with linespoints",
    "Ünïcödé: naïve café — “curly quotes” ‘single’, the ﬁ and ﬂ ligatures, Ωμέγα, 飛行機, 🚀✈️",
    "  leading and trailing whitespace\tand\ttabs\n  ",
    "ALL CAPITALS QUESTION ABOUT NOTAMS?",
    # far beyond the 256 word pieces the model reads: truncation must cut in the same place
    "Each person operating an aircraft shall, when the aircraft is in motion, maintain vigilance so as "
    "to see and avoid other aircraft; see 14 CFR 91.113(b) and §91.111. " * 20,
    " ".join(f"identifier_{i}%in%x{i}" for i in range(300)),
]


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.fixture(scope="module")
def torch_embedder() -> Embedder:
    """The reference: torch only (no query cache)."""
    emb = Embedder(BUNDLED)
    emb.prepare_queries()
    return emb


@pytest.fixture(scope="module")
def reference(torch_embedder: Embedder) -> np.ndarray:
    return np.vstack([torch_embedder.embed_query(q) for q in QUERIES])


@pytest.fixture(scope="module")
def exported(tmp_path_factory, torch_embedder: Embedder) -> Path:
    """A cache directory holding the bundled model's export (written from the loaded torch model)."""
    root = tmp_path_factory.mktemp("query-encoder")
    meta = qe.export(torch_embedder.model, MODEL_PATH, root)
    assert meta.unsupported is None, meta.unsupported
    return root


def _copy_cache(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _run_threads(work: Callable[[int], None], n: int, timeout: float | None = None) -> list[BaseException]:
    """Run ``work(0)`` … ``work(n - 1)`` on n threads at once; the exceptions they raised (a thread
    still running after ``timeout`` counts as one, a hang)."""
    errors: list[BaseException] = []

    def guarded(i: int) -> None:
        try:
            work(i)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=timeout)
    errors += [TimeoutError(f"{th.name} still running") for th in threads if th.is_alive()]
    return errors


def _export_path(root: Path) -> Path:
    return qe.export_dir(root, qe.model_key(MODEL_PATH))


def test_onnx_vectors_match_torch_one_by_one_and_batched(exported: Path, reference: np.ndarray) -> None:
    emb = Embedder(BUNDLED, query_cache=exported)
    singles = np.vstack([emb.embed_query(q) for q in QUERIES])
    assert emb._encoder is not None and emb._model is None  # ONNX answered; torch never loaded
    assert singles.dtype == np.float32 and singles.shape == (len(QUERIES), 384)
    assert _cosines(singles, reference).min() >= 0.9999
    batch = emb.embed_queries(QUERIES)  # padded batch, as the extractive answerer sends
    assert _cosines(batch, reference).min() >= 0.9999
    assert np.allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)
    assert emb.embed_queries([]).shape == (0, 384)


def test_long_queries_are_truncated_where_sentence_transformers_truncates(exported: Path, torch_embedder) -> None:
    emb = Embedder(BUNDLED, query_cache=exported)
    long = QUERIES[-2]
    assert len(torch_embedder.model.tokenizer(long)["input_ids"]) > 256
    # a different tail beyond the window does not change the vector; a different head does
    tail = long + " completely different words at the end that the model never reads"
    assert float(emb.embed_query(long) @ emb.embed_query(tail)) > 0.99999
    assert float(emb.embed_query(long) @ emb.embed_query("Different head. " + long)) < 0.9999


def test_concurrent_queries_from_several_threads(exported: Path, reference: np.ndarray) -> None:
    emb = Embedder(BUNDLED, query_cache=exported)
    out: dict[int, np.ndarray] = {}

    def work(t: int) -> None:
        for r in range(3):
            i = (t + r) % len(QUERIES)
            out[t * 10 + r] = (i, emb.embed_query(QUERIES[i]))

    assert not _run_threads(work, 8)
    assert len(out) == 24
    for i, vec in out.values():
        assert float(vec @ reference[i]) >= 0.9999
    assert emb._model is None


def test_concurrent_first_queries_without_an_export(tmp_path: Path, reference: np.ndarray) -> None:
    """Threads that all arrive before any export exists: one torch load and one export, every thread
    gets the right vector (no deadlock between loading, exporting and embedding)."""
    root = tmp_path / "cache"
    emb = Embedder(BUNDLED, query_cache=root)
    out: list[tuple[int, np.ndarray]] = []

    def work(i: int) -> None:
        out.append((i, emb.embed_query(QUERIES[i]) if i % 2 else emb.embed_queries([QUERIES[i]])[0]))

    assert not _run_threads(work, 6, timeout=120)
    assert sorted(i for i, _ in out) == list(range(6))
    assert all(float(v @ reference[i]) >= 0.9999 for i, v in out)
    assert [p.name for p in root.iterdir()] == [qe.model_key(MODEL_PATH)]
    assert qe.load(root, MODEL_PATH) is not None


@pytest.mark.parametrize("damage", ["missing", "truncated", "same-size garbage", "another model's files",
                                    "unreadable meta"])
def test_broken_export_falls_back_to_torch_and_is_rewritten(tmp_path: Path, exported: Path, reference: np.ndarray,
                                                            damage: str) -> None:
    root = _copy_cache(exported, tmp_path / "cache")
    target = _export_path(root)
    onnx = target / "model.onnx"
    if damage == "missing":
        onnx.unlink()
    elif damage == "truncated":
        onnx.write_bytes(onnx.read_bytes()[: onnx.stat().st_size // 2])
    elif damage == "same-size garbage":  # weights scrambled in place: only the probe check can tell
        data = bytearray(onnx.read_bytes())
        rng = np.random.default_rng(0)
        start = len(data) // 3
        data[start:start + 4_000_000] = rng.integers(0, 256, 4_000_000, dtype=np.uint8).tobytes()
        onnx.write_bytes(bytes(data))
    elif damage == "another model's files":
        meta = json.loads((target / "meta.json").read_text())
        meta["key"] = "0" * 24
        (target / "meta.json").write_text(json.dumps(meta))
    else:
        (target / "meta.json").write_text("{not json")
    with pytest.raises(qe.QueryEncoderError):
        qe.load(root, MODEL_PATH)

    emb = Embedder(BUNDLED, query_cache=root)
    vec = emb.embed_query(QUERIES[0])  # torch, then export for the next process
    assert emb._model is not None
    assert float(vec @ reference[0]) >= 0.9999
    assert qe.load(root, MODEL_PATH) is not None  # rewritten and trustworthy again
    assert not [p for p in root.iterdir() if p.name.startswith(".")]  # no temporary or stale directory left
    batch = emb.embed_queries(QUERIES)  # this process now uses the fresh export
    assert emb._encoder is not None
    assert _cosines(batch, reference).min() >= 0.9999


def test_a_failing_tracer_writes_nothing(tmp_path: Path, torch_embedder: Embedder, monkeypatch) -> None:
    """torch.onnx failing (e.g. the onnx package missing) leaves no file and no verdict, so a later
    process, in a mended environment, exports."""
    def broken(*_a, **_k):
        raise ModuleNotFoundError("Module onnx is not installed!")

    monkeypatch.setattr(qe, "trace", broken)
    root = tmp_path / "cache"
    with pytest.raises(qe.QueryEncoderError, match="onnx is not installed"):
        qe.export(torch_embedder.model, MODEL_PATH, root)
    assert list(root.iterdir()) == []


def test_changed_model_files_select_another_export(tmp_path: Path) -> None:
    """A user's local copy of a model is keyed by its own files; touching one of them invalidates it."""
    local = tmp_path / "my-model"
    shutil.copytree(MODEL_PATH, local, ignore=shutil.ignore_patterns("model.safetensors"))
    (local / "model.safetensors").symlink_to(Path(MODEL_PATH) / "model.safetensors")
    assert qe.model_key(local) != qe.model_key(MODEL_PATH)
    before = qe.model_key(local)
    os.utime(local / "config.json", ns=(1, 1))
    assert qe.model_key(local) != before
    assert qe.model_key("sentence-transformers/some-hub-name") is None  # not a local directory: torch only


def test_local_model_without_tokenizer_json_uses_torch(tmp_path: Path, reference: np.ndarray) -> None:
    """A configured local model the ONNX path cannot reproduce keeps working on torch, and the
    verdict is written down so later processes do not try again."""
    local = tmp_path / "my-model"
    shutil.copytree(MODEL_PATH, local, ignore=shutil.ignore_patterns("model.safetensors", "tokenizer.json"))
    (local / "model.safetensors").symlink_to(Path(MODEL_PATH) / "model.safetensors")
    root = tmp_path / "cache"
    emb = Embedder(str(local), query_cache=root)
    vec = emb.embed_query(QUERIES[0])
    assert emb._model is not None and emb._encoder is None
    assert float(vec @ reference[0]) >= 0.9999
    meta = qe.read_meta(qe.export_dir(root, qe.model_key(local)))
    assert meta is not None and meta.unsupported and "tokenizer.json" in meta.unsupported
    assert not (qe.export_dir(root, qe.model_key(local)) / "model.onnx").exists()
    with pytest.raises(qe.QueryEncoderError, match="tokenizer.json"):
        qe.load(root, str(local))


def test_local_model_copy_gets_its_own_export(tmp_path: Path, reference: np.ndarray) -> None:
    local = tmp_path / "my-model"
    shutil.copytree(MODEL_PATH, local, ignore=shutil.ignore_patterns("model.safetensors"))
    (local / "model.safetensors").symlink_to(Path(MODEL_PATH) / "model.safetensors")
    root = tmp_path / "cache"
    first = Embedder(str(local), query_cache=root)
    first.prepare_queries()  # no export yet: torch, which writes one
    assert first._model is not None
    second = Embedder(str(local), query_cache=root)  # the next process
    vecs = second.embed_queries(QUERIES)
    assert second._model is None and second._encoder is not None
    assert _cosines(vecs, reference).min() >= 0.9999


def test_ingest_writes_the_export_and_a_whole_one_is_left_alone(tmp_path: Path, exported: Path,
                                                                reference: np.ndarray) -> None:
    """Loading torch for passages (ingest) writes the export when there is none; when there is a
    whole one it is not rewritten (its file keeps its inode and time)."""
    root = tmp_path / "cache"
    emb = Embedder(BUNDLED, query_cache=root)
    emb.embed(["A passage being ingested.", "Another one."])  # the ingest path: torch
    assert qe.load(root, MODEL_PATH) is not None
    assert float(emb.embed_query(QUERIES[0]) @ reference[0]) >= 0.9999

    kept = _copy_cache(exported, tmp_path / "kept")
    before = (_export_path(kept) / "model.onnx").stat()
    Embedder(BUNDLED, query_cache=kept).count_tokens("chunking loads torch")
    after = (_export_path(kept) / "model.onnx").stat()
    assert (before.st_ino, before.st_mtime_ns) == (after.st_ino, after.st_mtime_ns)


def test_unwritable_state_directory_still_answers(tmp_path: Path, reference: np.ndarray) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the cache directory would go")
    emb = Embedder(BUNDLED, query_cache=blocker / "query-encoder")
    assert float(emb.embed_query(QUERIES[0]) @ reference[0]) >= 0.9999


QUERY_PROCESS = """
import json, sys
from retrieval.encode.embed import get_embedder
from retrieval.settings import get_settings
emb = get_embedder(get_settings().search.embedding_model)
vec = emb.embed_query(sys.argv[1])
print(json.dumps({"torch": "torch" in sys.modules, "st": "sentence_transformers" in sys.modules,
                  "vec": vec.tolist()}))
"""


def test_a_query_process_does_not_import_torch(tmp_path: Path, exported: Path, reference: np.ndarray) -> None:
    home = tmp_path / "home"
    _copy_cache(exported, home / "query-encoder")
    env = {**os.environ, "CHAPTERVERSE_HOME": str(home)}
    proc = subprocess.run([sys.executable, "-c", QUERY_PROCESS, QUERIES[0]], capture_output=True, text=True,
                          env=env, timeout=120, cwd=Path(__file__).resolve().parent.parent)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["torch"] is False and out["st"] is False
    assert float(np.asarray(out["vec"], dtype=np.float32) @ reference[0]) >= 0.9999


def test_cli_search_and_ask_use_the_export_and_find_the_same_passages(settings, dev_corpus, embedder) -> None:
    """The real CLI with the test home's export: same results as the in-process (torch-checked) search."""
    from tests.conftest import run_cli  # noqa: PLC0415

    q = "What is the maximum indicated airspeed below 10,000 feet MSL?"
    env = {"CHAPTERVERSE_RERANKER": "bi-encoder-sentences"}  # the default (the tests' cross-encoder would load torch)
    res = run_cli("search", q, "--collection", dev_corpus, "--json", env=env)
    assert res.returncode == 0, res.stderr
    assert qe.load(query_cache_root(), MODEL_PATH) is not None  # the session's embedder wrote it
    got = json.loads(res.stdout)["results"]
    assert got and any(r["document"].startswith("14-CFR-Part-91") for r in got[:3])
    ask = run_cli("ask", q, "--collection", dev_corpus, "--json", env=env)
    assert ask.returncode == 0, ask.stderr
    answer = json.loads(ask.stdout)
    assert not answer["refusal"] and "250" in json.dumps(answer["citations"])


def test_db_status_says_what_embeds_queries(tmp_path: Path, exported: Path) -> None:
    """`db status` names the ONNX export queries will use, or why they use torch, without loading either."""
    empty = tmp_path / "empty"
    empty.mkdir()
    assert qe.status(empty, MODEL_PATH).startswith("torch (no export at ")
    assert qe.status(exported, MODEL_PATH) == f"onnx ({_export_path(exported)})"
    broken = _copy_cache(exported, tmp_path / "broken")
    (_export_path(broken) / "model.onnx").unlink()
    assert qe.status(broken, MODEL_PATH).startswith("torch (") and "-1: missing" in qe.status(broken, MODEL_PATH)
    assert Embedder(BUNDLED, query_cache=exported).query_encoder_status() == f"onnx ({_export_path(exported)})"
    assert Embedder(BUNDLED).query_encoder_status().startswith("torch (")
