"""The ``chapterverse`` command (Typer). Read commands take --json and print one JSON document."""

from __future__ import annotations

import atexit
import json
import logging
import os
import resource
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

# PyMuPDF imports its optional layout analyser (pymupdf_layout, an ONNX model: ~4 s) on import if
# installed; Chapter & Verse never calls page.get_layout(), so the CLI skips that import.
sys.modules.setdefault("pymupdf.layout", None)  # type: ignore[arg-type]
os.environ.setdefault("PYMUPDF_SUGGEST_LAYOUT_ANALYZER", "0")

import typer  # noqa: E402

from ingest.sources import InputError, expand, load, redact_urls  # noqa: E402
from retrieval.db import DatabaseError  # noqa: E402
from retrieval.embed import ModelError  # noqa: E402
from retrieval.logs import quiet_libraries  # noqa: E402
from retrieval.settings import Settings, get_settings  # noqa: E402

app = typer.Typer(
    help="Chapter & Verse: answers from your handbooks with verified, page-linked quotes.",
    no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
db_app = typer.Typer(help="Database housekeeping.", no_args_is_help=True)
app.add_typer(db_app, name="db")
eval_app = typer.Typer(help="Evaluations and benchmarks that write results/*.json.", no_args_is_help=True)
app.add_typer(eval_app, name="eval")

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]


TIMINGS_ENV = "CHAPTERVERSE_TIMINGS"  # set: print one "timings {json}" line on stderr at exit
_stage_ms: dict[str, float] = {}


def _process_age_s() -> float | None:
    """Seconds since this process started (Linux /proc; 10 ms resolution), None elsewhere."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        return time.clock_gettime(time.CLOCK_BOOTTIME) - int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


@contextmanager
def _timed(stage: str) -> Iterator[None]:
    t0 = time.perf_counter()
    try:
        yield
    finally:
        _stage_ms[stage] = _stage_ms.get(stage, 0.0) + (time.perf_counter() - t0) * 1e3


def _report_timings() -> None:
    age = _process_age_s()
    out = {"total_ms": round(age * 1e3, 1) if age is not None else None,
           **{k: round(v, 1) for k, v in _stage_ms.items()}}
    sys.stderr.write(f"timings {json.dumps(out)}\n")


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    quiet_libraries()


@app.callback()
def _main(verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log progress to stderr.")] = False) -> None:
    _setup_logging(verbose)
    if os.environ.get(TIMINGS_ENV):
        age = _process_age_s()
        _stage_ms["startup"] = age * 1e3 if age is not None else 0.0  # interpreter + module imports
        atexit.register(_report_timings)


def _emit(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, default=str, ensure_ascii=False, indent=2) + "\n")


def _write_result(out: Path, result: dict) -> None:
    from retrieval.results import write_result  # noqa: PLC0415  (one writer: adds the git commit it ran at)

    write_result(out, result)


def _fail(message: str, code: int = 2) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def _settings() -> Settings:
    try:
        return get_settings()
    except Exception as exc:  # noqa: BLE001  (pydantic validation errors)
        _fail(f"bad configuration: {exc}")
        raise


def _ready(settings: Settings) -> None:
    from retrieval import db  # noqa: PLC0415

    try:
        with _timed("db_start"):
            db.ready(settings)
    except DatabaseError as exc:
        _fail(str(exc))


def _load_model(settings: Settings) -> None:
    """Load the embedding model now (timed on its own); a failure is reported by the command."""
    from retrieval.embed import get_embedder  # noqa: PLC0415

    with _timed("model_load"):
        try:
            get_embedder(settings.embedding_model)
        except ModelError:
            pass


@app.command()
def ingest(
    inputs: Annotated[list[str], typer.Argument(help="PDF files, directories of PDFs, or http(s) URLs.")],
    collection: Annotated[str | None, typer.Option(help="Collection to add to (default: CHAPTERVERSE_DEFAULT_COLLECTION).")] = None,
    json_out: JsonOpt = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
) -> None:
    """Add PDFs to the index. Same bytes again: no-op. Same name, new bytes: replaces atomically.

    One bad input does not stop the others; the exit status is 1 if any input failed.
    """
    from ingest.pipeline import ingest_source  # noqa: PLC0415  (loads PyMuPDF)
    from retrieval.embed import get_embedder  # noqa: PLC0415

    settings = _settings()
    _ready(settings)
    coll = collection or settings.default_collection
    try:
        embedder = get_embedder(settings.embedding_model, load=False)  # loads when a document needs it
    except ModelError as exc:
        _fail(str(exc))
    limit = settings.max_file_bytes
    results: list[dict] = []
    failed = 0
    for given in expand(inputs):
        arg = redact_urls(given)  # a URL's query string (a signed URL's signature) is never printed or stored
        try:
            src = load(given, limit, settings.download_timeout_s)
            res = ingest_source(settings, embedder, src, coll, quiet=quiet or json_out)
            results.append(res.as_dict())
            if not json_out:
                if res.status == "unchanged":
                    typer.echo(f"{res.name}: unchanged ({res.message}); nothing to do")
                else:
                    rate = res.pages / res.seconds if res.seconds else 0.0
                    typer.echo(f"{res.name}: {res.status} into {coll!r}: {res.pages} pages, {res.chunks} chunks "
                               f"in {res.seconds:.1f} s ({rate:.1f} pages/s)")
        except InputError as exc:
            failed += 1
            results.append({"origin": arg, "status": "failed", "message": str(exc)})
            typer.echo(f"error: {exc}", err=True)
        except ModelError as exc:  # no document can be embedded: stop here
            _fail(str(exc))
        except DatabaseError as exc:
            failed += 1
            results.append({"origin": arg, "status": "failed", "message": str(exc)})
            typer.echo(f"error: {arg}: {exc}", err=True)
        except Exception as exc:  # noqa: BLE001  (one input's surprise must not stop the batch)
            failed += 1
            logging.getLogger(__name__).debug("ingest of %s failed", arg, exc_info=True)
            message = f"{arg}: unexpected error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            results.append({"origin": arg, "status": "failed", "message": message})
            typer.echo(f"error: {message}", err=True)
    if json_out:
        _emit({"collection": coll, "results": results,
               "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})
    if failed:
        raise typer.Exit(1)


@app.command()
def docs(
    collection: Annotated[str | None, typer.Option(help="Only this collection.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """List ingested documents."""
    from ingest.store import list_documents  # noqa: PLC0415
    from retrieval import db  # noqa: PLC0415

    settings = _settings()
    _ready(settings)
    with db.connection(settings) as conn:
        rows = list_documents(conn, collection)
    if json_out:
        _emit({"documents": rows})
        return
    if not rows:
        typer.echo("no documents yet; add some with: chapterverse ingest FILE.pdf")
        return
    for r in rows:
        typer.echo(f"{r['name']}  [{r['collection']}]  {r['pages']} pages, {r['chunks']} chunks, "
                   f"ingested {r['ingested_at']:%Y-%m-%d %H:%M}")


@app.command()
def remove(
    name: Annotated[str, typer.Argument(help="Document name as shown by `chapterverse docs`.")],
    collection: Annotated[str | None, typer.Option(help="Only from this collection.")] = None,
) -> None:
    """Remove a document (its pages and chunks) from the index."""
    from ingest.store import AmbiguousName, remove_document  # noqa: PLC0415
    from retrieval import db  # noqa: PLC0415

    settings = _settings()
    _ready(settings)
    try:
        with db.connection(settings) as conn:
            removed = remove_document(conn, name, collection)
    except (AmbiguousName, DatabaseError) as exc:
        _fail(str(exc))
    if not removed:
        _fail(f"no document named {name!r}{f' in {collection!r}' if collection else ''}", code=1)
    typer.echo(f"removed {name} from {', '.join(repr(c) for c in removed)}")


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What to look for, in plain words.")],
    k: Annotated[int, typer.Option("--k", min=1, max=100, help="How many passages.")] = 5,
    collection: Annotated[list[str] | None, typer.Option(help="Only these collections.")] = None,
    document: Annotated[list[str] | None, typer.Option(help="Only these documents (by name).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Find the passages that best match QUERY."""
    with _timed("imports"):
        from retrieval.search import search as run_search  # noqa: PLC0415

    settings = _settings()
    _ready(settings)
    _load_model(settings)
    try:
        with _timed("search"):
            res = run_search(settings, query, k=k, collections=collection, documents=document)
    except (DatabaseError, ModelError) as exc:
        _fail(str(exc))
    if json_out:
        out = res.model_dump()
        for i, p in enumerate(out["results"]):
            p["rank"] = i + 1
        _emit(out)
        return
    if not res.results:
        typer.echo("no passages found")
    for i, p in enumerate(res.results, 1):
        label = f"p. {p.page_label} (PDF {p.page})" if p.page_label else f"PDF p. {p.page}"
        st = p.stages
        ranks = " ".join(f"{name} #{r}" for name, r in (("keyword", st.keyword_rank), ("dense", st.dense_rank),
                                                         ("fused", st.fused_rank), ("rerank", st.rerank_rank)) if r)
        typer.echo(f"{i}. {p.document} · {label} · score {p.score:.3f} ({ranks})")
        snippet = " ".join(p.text.split())
        typer.echo(f"   {snippet[:300]}{'…' if len(snippet) > 300 else ''}\n")
    typer.echo(f"reranker: {res.reranker} · {res.timings_ms.get('total', 0):.0f} ms")


@db_app.command("status")
def db_status(json_out: JsonOpt = False) -> None:
    """Where the index lives, its schema version and embedding model."""
    from retrieval import db, index  # noqa: PLC0415
    from retrieval.embed import get_embedder  # noqa: PLC0415
    from retrieval.rerank import describe as describe_reranker  # noqa: PLC0415

    settings = _settings()
    _ready(settings)
    with db.connection(settings) as conn:
        rec = index.recorded_model(conn)
        counts = conn.execute("SELECT (SELECT count(*) FROM documents) AS documents, "
                              "(SELECT count(*) FROM chunks) AS chunks").fetchone()
        version = conn.execute("SELECT max(migration_id) AS v FROM _yoyo_migration").fetchone()["v"]
    try:
        encoder = get_embedder(settings.embedding_model, load=False).query_encoder_status()
    except ModelError as exc:
        encoder = f"unavailable ({exc})"
    info = {"database": "external (DATABASE_URL)" if settings.database_url else f"embedded at {settings.pgdata}",
            "schema": version, "embedding_model": rec[0] if rec else None,
            "embedding_dim": rec[1] if rec else None, **counts, "reranker": describe_reranker(settings.reranker),
            "query_encoder": encoder}
    if json_out:
        _emit(info)
    else:
        for key, val in info.items():
            typer.echo(f"{key}: {val}")


@db_app.command("reembed")
def db_reembed() -> None:
    """Re-embed every chunk with the configured CHAPTERVERSE_EMBEDDING_MODEL (one transaction)."""
    from retrieval import db, index  # noqa: PLC0415
    from retrieval.embed import get_embedder  # noqa: PLC0415

    settings = _settings()
    _ready(settings)
    try:
        emb = get_embedder(settings.embedding_model)
    except ModelError as exc:
        _fail(str(exc))
    t0 = time.perf_counter()
    with db.connection(settings) as conn:
        n = index.reembed(conn, emb.name, emb.dim, emb.embed)
    typer.echo(f"re-embedded {n} chunks with {emb.name} ({emb.dim} dims) in {time.perf_counter() - t0:.1f} s")


@app.command()
def bot(verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log each step to stderr.")] = False) -> None:
    """Run the Slack bot (Socket Mode; needs SLACK_BOT_TOKEN and SLACK_APP_TOKEN). Ctrl-C stops it."""
    from bot.main import main as run_bot  # noqa: PLC0415  (Slack SDK only when needed)

    code = run_bot(verbose=verbose or logging.getLogger().level <= logging.INFO)
    if code:
        raise typer.Exit(code)


@app.command()
def worker(verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log each step to stderr.")] = False) -> None:
    """Run queued ingestion jobs from Slack (beside one or more bots on the same database). Ctrl-C stops it."""
    from bot.worker import main as run_worker  # noqa: PLC0415  (Slack SDK only when needed)

    code = run_worker(verbose=verbose or logging.getLogger().level <= logging.INFO)
    if code:
        raise typer.Exit(code)


@eval_app.command("ingest")
def eval_ingest(
    pdfs: Annotated[list[Path], typer.Argument(help="PDFs to ingest (each in a fresh process).")],
    out: Annotated[Path, typer.Option(help="Where to write the JSON results.")] = Path("results/ingest_dev.json"),
) -> None:
    """Measure ingestion per document: pages, chunks, seconds, pages/s, peak memory."""
    from ingest.bench import run as run_bench  # noqa: PLC0415

    settings = _settings()
    _ready(settings)
    command = "chapterverse eval ingest " + " ".join(str(p) for p in pdfs) + f" --out {out}"
    result = run_bench(settings, [p for arg in pdfs for p in (sorted(arg.glob("*.pdf")) if arg.is_dir() else [arg])],
                       command)
    _write_result(out, result)
    for r in result["documents"]:
        typer.echo(f"{r['document']}: {r['pages']} pages, {r['chunks']} chunks, {r['seconds']} s, "
                   f"{r['pages_per_s']} pages/s, peak {r['peak_rss_mb']} MB")
    typer.echo(f"wrote {out}")


@eval_app.command("retrieval")
def eval_retrieval(
    questions: Annotated[Path, typer.Argument(help="Question set (the format of tests/corpus/dev_questions.json).")],
    out: Annotated[Path, typer.Option(help="Where to write the JSON results.")] = Path("results/retrieval_eval.json"),
    collection: Annotated[list[str] | None, typer.Option(help="Only these collections.")] = None,
) -> None:
    """Recall@1/@5, MRR@10, nDCG@5 of keyword, dense, RRF and RRF + each available reranker."""
    from retrieval.evaluate import evaluate  # noqa: PLC0415

    settings = _settings()
    _ready(settings)
    command = f"chapterverse eval retrieval {questions} --out {out}" + "".join(f" --collection {c}" for c in collection or [])
    try:
        result = evaluate(settings, questions, collection, command)
    except (DatabaseError, ModelError, ValueError, OSError) as exc:
        _fail(str(exc))
    _write_result(out, result)
    for name, r in result["results"].items():
        mark = " (default)" if name == result["default_configuration"] else ""
        typer.echo(f"{name}{mark}: recall@1 {r['recall_at_1']:.2f}  recall@5 {r['recall_at_5']:.2f}  "
                   f"MRR {r['mrr_at_10']:.3f}  nDCG@5 {r['ndcg_at_5']:.3f}")
    typer.echo(f"wrote {out}")


@eval_app.command("latency")
def eval_latency(
    questions: Annotated[Path, typer.Argument(help="Questions to time (the format of dev_questions.json).")],
    out: Annotated[Path, typer.Option(help="Where to write the JSON results.")] = Path("results/retrieval_latency.json"),
    rounds: Annotated[int, typer.Option(min=1, help="Timed passes over the questions.")] = 3,
    collection: Annotated[list[str] | None, typer.Option(help="Only these collections.")] = None,
) -> None:
    """Search latency p50/p95 per stage (embed query, keyword, vector, fuse, rerank, total)."""
    from retrieval.bench import run as run_bench  # noqa: PLC0415

    settings = _settings()
    _ready(settings)
    command = (f"chapterverse eval latency {questions} --out {out} --rounds {rounds}"
               + "".join(f" --collection {c}" for c in collection or []))
    try:
        result = run_bench(settings, questions, collection, rounds, command=command)
    except (DatabaseError, ModelError, ValueError, OSError) as exc:
        _fail(str(exc))
    _write_result(out, result)
    for name, r in result["setups"].items():
        stages = "  ".join(f"{s} {v['p50']:.0f}/{v['p95']:.0f}" for s, v in r["stages_ms"].items())
        typer.echo(f"{name} [{r['reranker_ran']}] p50/p95 ms: {stages}")
    typer.echo(f"wrote {out}")


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="A question about the indexed documents.")],
    collection: Annotated[list[str] | None, typer.Option(help="Only these collections.")] = None,
    answerer: Annotated[str | None, typer.Option(help="gemini or extractive (default: gemini when GEMINI_API_KEY is set).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Answer QUESTION with verified, page-linked quotes, or refuse when the documents do not say.

    A refusal is an answer, not an error: it is printed (as JSON with --json) and the exit status is 0,
    also when the index is unavailable (the database is down or unreachable); the reason says so.
    Exit status 2 is left for bad configuration."""
    from retrieval import db  # noqa: PLC0415
    with _timed("imports"):
        from retrieval.answer_view import as_json, as_text  # noqa: PLC0415
        from retrieval.ask import ask as run_ask  # noqa: PLC0415
        from retrieval.ask import index_unavailable  # noqa: PLC0415

    settings = _settings()
    try:
        with _timed("db_start"):
            db.ready(settings)
    except DatabaseError as exc:
        result = index_unavailable(question, exc)
    else:
        _load_model(settings)
        with _timed("ask"):
            result = run_ask(settings, question, collections=collection, answerer=answerer)
        _stage_ms["ask.search"] = result.timings_ms.get("search", 0.0)
    if json_out:
        _emit(as_json(result))
    else:
        typer.echo(as_text(result))


@eval_app.command("scale")
def eval_scale(
    questions: Annotated[Path, typer.Argument(help="Questions to time (the format of dev_questions.json).")],
    source: Annotated[str, typer.Option(help="Collection whose chunk texts are repeated.")] = "dev",
    size: Annotated[list[int] | None, typer.Option(help="Chunks per synthetic collection (repeatable).")] = None,
    out: Annotated[Path, typer.Option(help="Where to write the JSON results.")] = Path("results/retrieval_scale.json"),
    rounds: Annotated[int, typer.Option(min=1, help="Timed passes over the questions.")] = 1,
    keyword_only: Annotated[bool, typer.Option(help="No vectors: build and time the keyword leg only.")] = False,
) -> None:
    """Search p50/p95 and index size on synthetic collections of 10k, 100k, 1M chunks (scratch databases)."""
    from retrieval.scale import SIZES, run as run_scale  # noqa: PLC0415

    settings = _settings()
    _ready(settings)
    sizes = size or list(SIZES)
    command = (f"chapterverse eval scale {questions} --source {source} --out {out} --rounds {rounds}"
               + "".join(f" --size {n}" for n in sizes) + (" --keyword-only" if keyword_only else ""))
    try:
        result = run_scale(settings, questions, source, sizes, rounds, command=command, keyword_only=keyword_only)
    except (DatabaseError, ModelError, ValueError, OSError) as exc:
        _fail(str(exc))
    _write_result(out, result)
    for n, r in result["sizes"].items():
        total = {name: st["total"] for name, st in r.get("search_ms", {}).items()}
        total.update(r["keyword_leg"]["ms"])
        typer.echo(f"{n} chunks: " + "  ".join(f"{name} p50/p95 {t['p50']:.0f}/{t['p95']:.0f} ms"
                                               for name, t in total.items())
                   + f"  database {r['bytes']['database'] / 1e9:.2f} GB")
    typer.echo(f"wrote {out}")


@eval_app.command("answers")
def eval_answers(
    questions: Annotated[Path, typer.Argument(help="Question set (the format of tests/corpus/dev_questions.json).")],
    out: Annotated[Path, typer.Option(help="Where to write the JSON results.")] = Path("results/answer_eval.json"),
    answerer: Annotated[str | None, typer.Option(help="gemini or extractive (default: gemini when GEMINI_API_KEY is set).")] = None,
    collection: Annotated[list[str] | None, typer.Option(help="Only these collections.")] = None,
    calibrate: Annotated[bool, typer.Option(help="Also report the best extractive refusal threshold for this set.")] = False,
) -> None:
    """Answered-correctly rate, refusal precision/recall, false refusals, citations dropped by verification."""
    from retrieval.answer_eval import evaluate as run_eval  # noqa: PLC0415

    settings = _settings()
    _ready(settings)
    command = (f"chapterverse eval answers {questions} --out {out}" + (f" --answerer {answerer}" if answerer else "")
               + "".join(f" --collection {c}" for c in collection or []) + (" --calibrate" if calibrate else ""))
    try:
        result = run_eval(settings, questions, answerer=answerer, collections=collection, command=command,
                          calibrate_threshold=calibrate)
    except (ValueError, OSError) as exc:
        _fail(str(exc))
    _write_result(out, result)
    s = result["summary"]
    typer.echo(f"right evidence first {s['answered_correctly']}/{s['answerable']}  "
               f"unanswerable refused {s['unanswerable_refused']}/{s['unanswerable']}  "
               f"unverified quotes shown {s['unverified_quotes_shown']}/{s['quotes_shown']}  "
               f"wrong-but-verified {s['wrong_but_verified']}/{s['questions']}  "
               f"false refusals {s['false_refusals']}  refusal precision {s['refusal_precision']}  "
               f"citations dropped {s['citations_dropped']}/{s['citations_proposed']}")
    if "calibration" in result:
        typer.echo(f"calibrated threshold: {result['calibration']}")
    typer.echo(f"wrote {out}")


@eval_app.command("calibrate")
def eval_calibrate(
    probes: Annotated[list[Path], typer.Argument(help="Result files of `eval answers ... --calibrate` runs.")],
    out: Annotated[Path, typer.Option(help="Where to write the JSON results.")] = Path("results/threshold_calibration.json"),
) -> None:
    """One extractive refusal threshold fitted over the probe runs of several question sets."""
    import json  # noqa: PLC0415

    from retrieval.answer_eval import calibrate as fit  # noqa: PLC0415

    rows: list[dict] = []
    try:
        for path in probes:
            data = json.loads(path.read_text())
            if "calibration" not in data:
                raise ValueError(f"{path} holds no probe run: run `chapterverse eval answers ... --calibrate` first")
            rows += [{**r, "id": f"{path.stem}:{r['id']}"} for r in data["calibration"]["per_question"]]
    except (ValueError, OSError, KeyError) as exc:
        _fail(str(exc))
    result = {"command": "chapterverse eval calibrate " + " ".join(map(str, probes)) + f" --out {out}",
              "probes": [str(p) for p in probes], "calibration": fit(rows)}
    _write_result(out, result)
    cal = result["calibration"]
    typer.echo(f"threshold {cal['threshold']}: {cal.get('correct_decisions')}/{cal.get('of')} answers decided "
               f"right (margins {cal.get('margin_below')} below, {cal.get('margin_above')} above)")
    typer.echo(f"wrote {out}")


@eval_app.command("report")
def eval_report(
    results: Annotated[Path, typer.Option(help="Folder of result files.")] = Path("results"),
    readme: Annotated[Path, typer.Option(help="README whose answer-results table is rewritten.")] = Path("README.md"),
    check: Annotated[bool, typer.Option(help="Only check that the README table is current (exit 1 if not).")] = False,
) -> None:
    """Rewrite the README's answer-results table from results/answer_eval*.json (FAA and manuals side by side)."""
    from retrieval.report import load_columns, render, update_readme  # noqa: PLC0415
    from retrieval.results import REPO  # noqa: PLC0415

    try:
        table = render(*load_columns(results, REPO))
        if check:
            current = readme.read_text()
            if table not in current:
                _fail(f"{readme}: the answer-results table is out of date; run `chapterverse eval report`", 1)
            typer.echo(f"{readme} is current")
            return
        changed = update_readme(readme, table)
    except (ValueError, OSError, KeyError) as exc:
        _fail(str(exc))
    typer.echo(table)
    typer.echo(f"{'updated' if changed else 'unchanged'}: {readme}")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
