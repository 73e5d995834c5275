"""The ``chapterverse eval`` commands of the lab (the separate ``chapterverse-lab`` distribution in
``lab/``: retrieval metrics, latency, scale, answers, reader latency, threshold calibration, the
result tables, the ingest benchmark and reader training), registered into the
command line through the ``chapterverse.commands`` entry point like the intake's and the bot's.
Each writes its figures to ``results/*.json`` through ``chapterverse_lab.results``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from chapterverse_lab.results import write_result as save_result
from retrieval.clikit import fail, load_settings, ready
from retrieval.encode.embed import ModelError
from retrieval.store.db import DatabaseError

_commands: list[tuple[str, Callable[..., Any]]] = []


def _command(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Collect an eval command; ``register`` adds them to the ``eval`` group."""
    def add(fn: Callable[..., Any]) -> Callable[..., Any]:
        _commands.append((name, fn))
        return fn
    return add


@_command("retrieval")
def eval_retrieval(
    questions: Annotated[Path, typer.Argument(help="Question set (the format of tests/corpus/dev_questions.json).")],
    out: Annotated[Path, typer.Option(help="Where to write the JSON results.")] = Path("results/retrieval_eval.json"),
    collection: Annotated[list[str] | None, typer.Option(help="Only these collections.")] = None,
) -> None:
    """Recall@1/@5, MRR@10, nDCG@5 of keyword, dense, RRF and RRF + each available reranker."""
    from chapterverse_lab.evaluate import evaluate  # noqa: PLC0415

    settings = load_settings()
    ready(settings)
    command = f"chapterverse eval retrieval {questions} --out {out}" + "".join(f" --collection {c}" for c in collection or [])
    try:
        result = evaluate(settings, questions, collection, command)
    except (DatabaseError, ModelError, ValueError, OSError) as exc:
        fail(str(exc))
    save_result(out, result)
    for name, r in result["results"].items():
        mark = " (default)" if name == result["default_configuration"] else ""
        typer.echo(f"{name}{mark}: recall@1 {r['recall_at_1']:.2f}  recall@5 {r['recall_at_5']:.2f}  "
                   f"MRR {r['mrr_at_10']:.3f}  nDCG@5 {r['ndcg_at_5']:.3f}")
    typer.echo(f"wrote {out}")


@_command("latency")
def eval_latency(
    questions: Annotated[Path, typer.Argument(help="Questions to time (the format of dev_questions.json).")],
    out: Annotated[Path, typer.Option(help="Where to write the JSON results.")] = Path("results/retrieval_latency.json"),
    rounds: Annotated[int, typer.Option(min=1, help="Timed passes over the questions.")] = 3,
    collection: Annotated[list[str] | None, typer.Option(help="Only these collections.")] = None,
) -> None:
    """Search latency p50/p95 per stage (embed query, keyword, vector, fuse, rerank, total)."""
    from chapterverse_lab.bench import run as run_bench  # noqa: PLC0415

    settings = load_settings()
    ready(settings)
    command = (f"chapterverse eval latency {questions} --out {out} --rounds {rounds}"
               + "".join(f" --collection {c}" for c in collection or []))
    try:
        result = run_bench(settings, questions, collection, rounds, command=command)
    except (DatabaseError, ModelError, ValueError, OSError) as exc:
        fail(str(exc))
    save_result(out, result)
    for name, r in result["setups"].items():
        stages = "  ".join(f"{s} {v['p50']:.0f}/{v['p95']:.0f}" for s, v in r["stages_ms"].items())
        typer.echo(f"{name} [{r['reranker_ran']}] p50/p95 ms: {stages}")
    typer.echo(f"wrote {out}")


@_command("scale")
def eval_scale(
    questions: Annotated[Path, typer.Argument(help="Questions to time (the format of dev_questions.json).")],
    source: Annotated[str, typer.Option(help="Collection whose chunk texts are repeated.")] = "dev",
    size: Annotated[list[int] | None, typer.Option(help="Chunks per synthetic collection (repeatable).")] = None,
    out: Annotated[Path, typer.Option(help="Where to write the JSON results.")] = Path("results/retrieval_scale.json"),
    rounds: Annotated[int, typer.Option(min=1, help="Timed passes over the questions.")] = 1,
    keyword_only: Annotated[bool, typer.Option(help="No vectors: build and time the keyword leg only.")] = False,
) -> None:
    """Search p50/p95 and index size on synthetic collections of 10k, 100k, 1M chunks (scratch databases)."""
    from chapterverse_lab.scale import SIZES, run as run_scale  # noqa: PLC0415

    settings = load_settings()
    ready(settings)
    sizes = size or list(SIZES)
    command = (f"chapterverse eval scale {questions} --source {source} --out {out} --rounds {rounds}"
               + "".join(f" --size {n}" for n in sizes) + (" --keyword-only" if keyword_only else ""))
    try:
        result = run_scale(settings, questions, source, sizes, rounds, command=command, keyword_only=keyword_only)
    except (DatabaseError, ModelError, ValueError, OSError) as exc:
        fail(str(exc))
    save_result(out, result)
    for n, r in result["sizes"].items():
        total = {name: st["total"] for name, st in r.get("search_ms", {}).items()}
        total.update(r["keyword_leg"]["ms"])
        typer.echo(f"{n} chunks: " + "  ".join(f"{name} p50/p95 {t['p50']:.0f}/{t['p95']:.0f} ms"
                                               for name, t in total.items())
                   + f"  database {r['bytes']['database'] / 1e9:.2f} GB")
    typer.echo(f"wrote {out}")


@_command("answers")
def eval_answers(
    questions: Annotated[Path, typer.Argument(help="Question set (the format of tests/corpus/dev_questions.json).")],
    out: Annotated[Path, typer.Option(help="Where to write the JSON results.")] = Path("results/answer_eval.json"),
    answerer: Annotated[str | None, typer.Option(help="gemini, openai (an OpenAI-compatible server) or extractive (default: CHAPTERVERSE_ANSWERER, else gemini when GEMINI_API_KEY is set, else extractive).")] = None,
    collection: Annotated[list[str] | None, typer.Option(help="Only these collections.")] = None,
    calibrate: Annotated[bool, typer.Option(help="Also report the best extractive refusal threshold for this set.")] = False,
    replay: Annotated[Path | None, typer.Option(help="Folder of recorded model replies (*.jsonl): the model answerer "
                                                "is served them by a local replay server, never a real provider.")] = None,
    pending: Annotated[Path | None, typer.Option(help="With --replay: where requests with no recording are written "
                                                 "(see `chapterverse eval pending`).")] = None,
    source: Annotated[str, typer.Option(help="With --replay: who wrote the replies, as the results should say "
                                       "(e.g. 'stand-in model').")] = "",
) -> None:
    """Answered-correctly rate, refusal precision/recall, false refusals, citations dropped by verification;
    with --replay, the model path on recorded replies (calls, checks, answer-context recall)."""
    from chapterverse_lab.answer_eval import evaluate as run_eval  # noqa: PLC0415

    settings = load_settings()
    ready(settings)
    command = (f"chapterverse eval answers {questions} --out {out}" + (f" --answerer {answerer}" if answerer else "")
               + "".join(f" --collection {c}" for c in collection or []) + (" --calibrate" if calibrate else "")
               + (f" --replay {replay}" if replay else "") + (f" --pending {pending}" if pending else "")
               + (f" --source '{source}'" if source else ""))
    if replay is not None and answerer not in ("gemini", "openai"):
        fail("--replay needs --answerer gemini or --answerer openai")
    try:
        result = run_eval(settings, questions, answerer=answerer, collections=collection, command=command,
                          calibrate_threshold=calibrate, replay=replay, pending=pending, source=source)
    except (ValueError, OSError) as exc:
        fail(str(exc))
    replies = result["config"].get("model_replies", {})
    if replies.get("unrecorded"):  # answered by a fallback, not by a recorded reply: never scored
        named = "; ".join(f"{m['kind']} for {m['question']!r} (key {m['key']})" for m in replies["unrecorded_requests"][:5])
        more = len(replies["unrecorded_requests"]) - 5
        fail(f"{replies['unrecorded']} model request(s) had no recorded reply, so this run is not scored and {out} "
             f"was not written: {named}{f' and {more} more' if more > 0 else ''}"
             + (f"; the requests are in {pending} (chapterverse eval pending)" if pending else
                "; run again with --pending DIR to write them out"), code=1)
    save_result(out, result)
    s = result["summary"]
    typer.echo(f"right evidence first {s['answered_correctly']}/{s['answerable']}  "
               f"unanswerable refused {s['unanswerable_refused']}/{s['unanswerable']}  "
               f"unverified quotes shown {s['unverified_quotes_shown']}/{s['quotes_shown']}  "
               f"wrong-but-verified {s['wrong_but_verified']}/{s['questions']}  "
               f"false refusals {s['false_refusals']}  refusal precision {s['refusal_precision']}  "
               f"citations dropped {s['citations_dropped']}/{s['citations_proposed']}")
    if "calibration" in result:
        typer.echo(f"calibrated threshold: {result['calibration']}")
    if "model_calls" in s:
        typer.echo(f"model calls {s['model_calls']} ({s['model_calls_per_question']}/question)  "
                   f"answer-context recall {s['answer_context_recall']}  answers withheld {s['answers_withheld']}  "
                   f"quotes dropped: verification {s['quotes_dropped_by_verification']}, support check "
                   f"{s['quotes_dropped_by_support_check']}  unrecorded requests {s['unrecorded_requests']}")
        if replies.get("under_other_instructions") or replies.get("recorded_without_instructions"):
            typer.echo(f"warning: {replies['under_other_instructions']} reply(ies) were written under other system "
                       f"instructions or schema than this run's, and {replies['recorded_without_instructions']} were "
                       f"recorded before that was kept ({out}: config.model_replies)", err=True)
    typer.echo(f"wrote {out}")


@_command("pending")
def eval_pending(
    pending: Annotated[Path, typer.Argument(help="The folder `eval answers --pending` writes requests to.")],
    into: Annotated[Path | None, typer.Option(help="Import the replies written there (<key>.reply.json) into this "
                                             "recording file (*.jsonl) first.")] = None,
    source: Annotated[str, typer.Option(help="Who wrote the imported replies.")] = "stand-in model",
) -> None:
    """List the model requests still waiting for a recorded reply (and import the replies written so far)."""
    from chapterverse_lab import replay as rp  # noqa: PLC0415

    if into is not None:
        try:
            imported, problems = rp.import_replies(pending, into, source)
        except (OSError, rp.ReplayError) as exc:
            fail(str(exc))
        for p in problems:
            typer.echo(f"not imported: {p}", err=True)
        typer.echo(f"imported {imported} repl{'y' if imported == 1 else 'ies'} into {into}")
    waiting = rp.pending_requests(pending) if pending.exists() else []
    for req in waiting:
        typer.echo(f"{pending / (req['key'] + '.request.json')}\t{req['kind']}\t{req['question'][:80]}")
    typer.echo(f"{len(waiting)} request(s) pending")


@_command("reader-latency")
def eval_reader_latency(
    questions: Annotated[Path, typer.Argument(help="Question set (the format of tests/corpus/dev_questions.json).")],
    collection: Annotated[list[str] | None, typer.Option(help="Only these collections.")] = None,
    out: Annotated[Path, typer.Option(help="Where to write the JSON results.")] = Path("results/reader_latency.json"),
    rounds: Annotated[int, typer.Option(min=1)] = 1,
) -> None:
    """The reader's cost per question (the sentences the answerer really gives it) and ask end to end."""
    from chapterverse_lab.answer_eval import load_questions  # noqa: PLC0415
    from chapterverse_lab.reader_bench import run as run_bench  # noqa: PLC0415

    settings = load_settings()
    ready(settings)
    command = (f"chapterverse eval reader-latency {questions} --out {out} --rounds {rounds}"
               + "".join(f" --collection {c}" for c in collection or []))
    result = run_bench(settings, load_questions(questions), collection, command, rounds)
    save_result(out, result)
    typer.echo(f"reader p50/p95 {result['reader_ms']['p50']}/{result['reader_ms']['p95']} ms over "
               f"{result['sentences_per_call_median']} sentences (median); at 40 sentences "
               f"{result['reader_ms_at_40_sentences']}; ask p50/p95 {result['ask_ms']['p50']}/{result['ask_ms']['p95']} ms; "
               f"load {result['load_seconds_fresh_process']} s in a fresh process; wrote {out}")


@_command("calibrate")
def eval_calibrate(
    probes: Annotated[list[Path], typer.Argument(help="Result files of `eval answers ... --calibrate` runs.")],
    out: Annotated[Path, typer.Option(help="Where to write the JSON results.")] = Path("results/threshold_calibration.json"),
    threshold: Annotated[float | None, typer.Option(help="Hold the evidence threshold at this value (fit only the "
                                                         "second judge's agreement below it).")] = None,
) -> None:
    """One extractive refusal threshold (and the reader's agreement below it, when the probes ran
    with the 'evidence+reader' scorer) fitted over the probe runs of several question sets."""
    import json  # noqa: PLC0415

    from chapterverse_lab.answer_eval import calibrate as fit  # noqa: PLC0415

    rows: list[dict] = []
    try:
        for path in probes:
            data = json.loads(path.read_text())
            if "calibration" not in data:
                raise ValueError(f"{path} holds no probe run: run `chapterverse eval answers ... --calibrate` first")
            rows += [{**r, "id": f"{path.stem}:{r['id']}"} for r in data["calibration"]["per_question"]]
    except (ValueError, OSError, KeyError) as exc:
        fail(str(exc))
    held = "" if threshold is None else f" --threshold {threshold}"
    result = {"command": "chapterverse eval calibrate " + " ".join(map(str, probes)) + f" --out {out}{held}",
              "probes": [str(p) for p in probes], "calibration": fit(rows, threshold)}
    save_result(out, result)
    cal = result["calibration"]
    typer.echo(f"threshold {cal['threshold']}: {cal.get('correct_decisions')}/{cal.get('of')} answers decided "
               f"right (margins {cal.get('margin_below')} below, {cal.get('margin_above')} above)")
    if "agreement" in cal:
        agr = cal["agreement"]
        typer.echo(f"reader agreement below it: {agr['min']} (answers gained: {agr['answers_gained_right']} right, "
                   f"{agr['answers_gained_wrong']} wrong)")
    typer.echo(f"wrote {out}")


@_command("report")
def eval_report(
    results: Annotated[Path, typer.Option(help="Folder of result files.")] = Path("results"),
    readme: Annotated[Path, typer.Option(help="README whose short model-path table is rewritten.")] = Path("README.md"),
    results_page: Annotated[Path, typer.Option(help="Page whose answer-results and per-set model-path tables are "
                                               "rewritten.")] = Path("docs/results.md"),
    check: Annotated[bool, typer.Option(help="Only check that the tables are current (exit 1 if not).")] = False,
) -> None:
    """Rewrite the result tables from results/: the answer-results table (FAA and manuals side by side) and the
    model path beside the extractive one, per set, in the results page; the model path in brief in the README."""
    from chapterverse_lab.report import (  # noqa: PLC0415
        END, MODEL_END, MODEL_START, SETS_END, SETS_START, START, load_columns, render, render_paths,
        render_paths_brief, update_section)
    from chapterverse_lab.results import REPO  # noqa: PLC0415

    try:
        cols, older = load_columns(results, REPO)
        table = render(cols, older)
        check_on = load_settings().answer.quote_support_check
        blocks = [(results_page, START, END, table),
                  (results_page, SETS_START, SETS_END, render_paths(results / "model_path", check_on)),
                  (readme, MODEL_START, MODEL_END, render_paths_brief(results / "model_path", check_on))]
        if check:
            stale = sorted({str(path) for path, start, end, body in blocks
                            if f"{start}\n{body}\n{end}" not in path.read_text()})
            if stale:
                fail(f"out of date: {', '.join(stale)}; run `chapterverse eval report`", 1)
            typer.echo(f"{readme} and {results_page} are current")
            return
        changed = [update_section(path, start, end, body) for path, start, end, body in blocks]
    except (ValueError, OSError, KeyError) as exc:
        fail(str(exc))
    typer.echo("\n\n".join(body for *_, body in blocks))
    typer.echo(f"{'updated' if any(changed) else 'unchanged'}: {readme}, {results_page}")


def eval_ingest(
    pdfs: Annotated[list[Path], typer.Argument(help="PDFs to ingest (each in a fresh process).")],
    out: Annotated[Path, typer.Option(help="Where to write the JSON results.")] = Path("results/ingest_dev.json"),
) -> None:
    """Measure ingestion per document: wall and CPU seconds, pages per second and per CPU-second,
    the Postgres server's CPU, peak memory and the load average."""
    from chapterverse_lab.ingest_bench import run as run_bench  # noqa: PLC0415

    settings = load_settings()
    ready(settings)
    command = "chapterverse eval ingest " + " ".join(str(p) for p in pdfs) + f" --out {out}"
    result = run_bench(settings, [p for arg in pdfs for p in (sorted(arg.glob("*.pdf")) if arg.is_dir() else [arg])],
                       command)
    save_result(out, result)
    for r in result["documents"]:
        typer.echo(f"{r['document']}: {r['pages']} pages, {r['chunks']} chunks, {r['seconds']} s "
                   f"({r['pages_per_s']} pages/s), {r['cpu_seconds']} CPU-s ({r['pages_per_cpu_s']} pages/CPU-s; "
                   f"Postgres {r['server_cpu_seconds']} CPU-s), peak {r['peak_rss_mb']} MB, "
                   f"load {r['load_avg_1m'][0]}→{r['load_avg_1m'][1]}")
    t = result["total"]
    typer.echo(f"total: {t['pages']} pages in {t['seconds']} s ({t['pages_per_s']} pages/s), "
               f"{t['pages_per_cpu_s']} pages/CPU-s ({t['pages_per_cpu_s_with_server']} with Postgres' CPU)")
    typer.echo(f"wrote {out}")


def eval_train_reader(
    pdf_dir: Annotated[Path, typer.Argument(help="The training PDFs (lab/chapterverse_lab/reader_data/fetch.sh DIR fetches them).")],
    out: Annotated[Path, typer.Option(help="Directory for reader.onnx, tokenizer.json and card.json.")] = Path("retrieval/reader/model"),
    report: Annotated[Path, typer.Option(help="Where to write the training report and the data split.")] = Path("results/reader_training.json"),
    seed: Annotated[int, typer.Option(help="Seed of the pair sampling, the split and torch.")] = 13,
    epochs: Annotated[int, typer.Option(min=1)] = 1,
    batch_size: Annotated[int, typer.Option(min=1)] = 32,
    lr: Annotated[float, typer.Option(help="Peak learning rate (linear warm-up over 10%, then linear decay).")] = 4e-5,
    max_length: Annotated[int, typer.Option(help="Word pieces per (question, sentence) pair.")] = 128,
    valid_share: Annotated[float, typer.Option(help="Share of training questions held out to check the export.")] = 0.05,
    loss: Annotated[str, typer.Option(help="pointwise (binary cross-entropy per pair) or listwise (per question, "
                                      "softmax over its sentences and a 'none' logit of 0).")] = "pointwise",
    negatives: Annotated[int, typer.Option(min=1, help="Hard negatives per question from the answer's page, and "
                                           "as many from the pages BM25 ranks next.")] = 3,
    freeze_embeddings: Annotated[bool, typer.Option(help="Keep the word-piece table frozen (half the step time).")] = True,
    pairs_cache: Annotated[Path | None, typer.Option(help="Keep the built pairs in this directory and reuse them "
                                                     "when questions, documents, seed and negatives are the same.")] = None,
    compare_with: Annotated[Path | None, typer.Option(help="Another reader's directory (e.g. the shipped one) to "
                                                      "score on the same held-out pairs.")] = None,
) -> None:
    """Train the reader (question, sentence → states the answer) from the training questions, on the CPU."""
    from chapterverse_lab.reader_training import cached_pairs, load_questions  # noqa: PLC0415
    from chapterverse_lab.reader_data import QUESTIONS, sources_table  # noqa: PLC0415
    from chapterverse_lab.reader_train import train  # noqa: PLC0415

    files = sorted(QUESTIONS.glob("*.jsonl"))
    try:
        questions = load_questions(files)
        table = sources_table(pdf_dir)
        pairs, per_document = cached_pairs(questions, pdf_dir, table, seed=seed, negatives_per_source=negatives,
                                           cache_dir=pairs_cache)
    except (ValueError, OSError) as exc:
        fail(str(exc))
    settings = load_settings()
    from retrieval.encode.embed import resolve_model_path  # noqa: PLC0415

    try:
        result = train(pairs, resolve_model_path(settings.search.embedding_model), out, seed=seed, epochs=epochs,
                       batch_size=batch_size, lr=lr, max_length=max_length, valid_share=valid_share,
                       freeze_embeddings=freeze_embeddings, loss=loss, negatives_per_source=negatives,
                       compare_with=compare_with)
    except ValueError as exc:
        fail(str(exc))
    command = (f"chapterverse eval train-reader {pdf_dir} --out {out} --report {report} --seed {seed} --epochs {epochs} "
               f"--batch-size {batch_size} --lr {lr} --max-length {max_length} --valid-share {valid_share} "
               f"--loss {loss} --negatives {negatives} --{'' if freeze_embeddings else 'no-'}freeze-embeddings"
               + (f" --compare-with {compare_with}" if compare_with else ""))
    save_result(report, {"command": command, "documents": table, "per_document": per_document,
                           "questions": {"answerable": sum(q.answerable for q in questions),
                                         "unanswerable": sum(not q.answerable for q in questions),
                                         "files": [str(f) for f in files]},
                           "training": result})
    typer.echo(f"reader written to {out}; report in {report}")


_commands.append(("ingest", eval_ingest))
_commands.append(("train-reader", eval_train_reader))


@_command("replica-drill")
def eval_replica_drill(
    corpus: Annotated[Path, typer.Option(help="Directory of the PDFs to ingest.")] = Path("tests/corpus"),
    questions: Annotated[Path, typer.Option(help="Questions to ask (the format of dev_questions.json).")] = Path(
        "tests/corpus/dev_questions.json"),
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N questions.")] = None,
    out: Annotated[Path | None, typer.Option(help="Also write the report here (JSON).")] = None,
) -> None:
    """Read replicas under failure: a primary and two standbys started here (pg_basebackup -R), the PDFs
    ingested on the primary, the questions asked through the standbys while one and then the other is
    stopped, a document removed and asked about at once. Prints one JSON line; exit 1 unless it passed."""
    from chapterverse_lab.replica_drill import drill, summary_line  # noqa: PLC0415

    settings = load_settings()
    report = drill(settings, corpus, questions, limit, log=lambda line: typer.echo(line, err=True))
    if out is not None:
        command = f"chapterverse eval replica-drill --corpus {corpus} --questions {questions}" + (
            f" --limit {limit}" if limit else "") + f" --out {out}"
        from datetime import UTC, datetime  # noqa: PLC0415

        save_result(out, {"command": command, "date": datetime.now(UTC).isoformat(timespec="seconds"), **report.model_dump()})
    typer.echo(summary_line(report))
    if not report.passed:
        raise typer.Exit(1)


@_command("replica-bench")
def eval_replica_bench(
    corpus: Annotated[Path, typer.Option(help="Directory of the PDFs to ingest.")] = Path("tests/corpus"),
    questions: Annotated[Path, typer.Option(help="Questions to ask (the format of dev_questions.json).")] = Path(
        "tests/corpus/dev_questions.json"),
    clients: Annotated[int, typer.Option(min=1, help="Client processes asking at once.")] = 2,
    rounds: Annotated[int, typer.Option(min=1, help="Times each client asks every question.")] = 2,
    writes: Annotated[int, typer.Option(min=1, help="Ingest-then-ask and remove-then-ask repetitions.")] = 10,
    standbys: Annotated[list[int] | None, typer.Option(min=0, max=2, help="Standby counts to measure, in this order "
                                                       "(default 0 1 2).")] = None,
    out: Annotated[Path, typer.Option(help="Where to write the JSON results.")] = Path("results/replicas/replicas.json"),
) -> None:
    """Questions per second and CPU per question with 0, 1 and 2 standbys on this machine, and the cost
    of read-your-writes (a primary and two standbys started here, the PDFs ingested)."""
    from chapterverse_lab.replica_bench import bench  # noqa: PLC0415

    settings = load_settings()
    order = tuple(standbys or (0, 1, 2))
    command = (f"chapterverse eval replica-bench --corpus {corpus} --questions {questions} --clients {clients} "
               f"--rounds {rounds} --writes {writes}" + "".join(f" --standbys {n}" for n in order) + f" --out {out}")
    result = bench(settings, corpus, questions, clients, rounds, writes, order=order,
                   log=lambda line: typer.echo(line, err=True))
    out.parent.mkdir(parents=True, exist_ok=True)
    from datetime import UTC, datetime  # noqa: PLC0415

    save_result(out, {"command": command, "date": datetime.now(UTC).isoformat(timespec="seconds"),
                      "answerer": "extractive", "embedding_model": settings.search.embedding_model, **result})
    for name, r in result["configurations"].items():
        typer.echo(f"{name}: {r['questions_per_s']} questions/s, median {r['latency_ms_median']} ms, CPU per question "
                   f"{r['client_cpu_s_per_question']} s clients + {r['postgres_cpu_s_per_question']} s Postgres")
    typer.echo(f"wrote {out}")


@_command("scans")
def eval_scans(
    pdfs: Annotated[list[Path], typer.Argument(help="PDFs with a text layer (or directories of them).")],
    dpi: Annotated[int, typer.Option(min=50, max=600, help="Resolution of the scanned copies.")] = 150,
    skew_noise: Annotated[bool, typer.Option(help="Rotate each page by up to ±1.5° and add grey noise.")] = False,
    max_pages: Annotated[int | None, typer.Option(min=1, help="Only this many pages per PDF, spread evenly.")] = None,
    workdir: Annotated[Path, typer.Option(help="Where the scanned copies go "
                                          "(<workdir>/<dpi>dpi[_skew]/<file name>).")] = Path("/tmp/chapterverse-scans"),
    out: Annotated[Path | None, typer.Option(help="Where to write the JSON results (default "
                                             "results/ocr/words_<dpi>dpi[_skew].json).")] = None,
    keep_copies_only: Annotated[bool, typer.Option(help="Only write the scanned copies and print their "
                                                   "paths.")] = False,
    gold_from: Annotated[Path | None, typer.Option(help="With --keep-copies-only: copies of the whole PDFs in which "
                                                   "only the evidence pages of this question set's answerable "
                                                   "questions are scanned (page numbers unchanged).")] = None,
) -> None:
    """Scanned copies of text PDFs (grey JPEG pages, no text layer) read back by the parser: per page,
    the share of OCR's words that are the text layer's and of the text layer's that OCR found; speed, memory."""
    from datetime import UTC, datetime  # noqa: PLC0415

    from chapterverse_lab.scans import copy_path, gold_pages, measure, mixed_copy, scan_copy, spread  # noqa: PLC0415
    from ingest.mupdf import pymupdf  # noqa: PLC0415

    tag = f"{dpi}dpi{'_skew' if skew_noise else ''}"
    out = out or Path(f"results/ocr/words_{tag}.json")
    files = [p for arg in pdfs for p in (sorted(arg.glob("*.pdf")) if arg.is_dir() else [arg])]
    if not files:
        fail("no PDFs given")
    try:
        if keep_copies_only and gold_from is not None:
            gold = gold_pages(gold_from)
            for pdf in files:
                dest = workdir / f"{dpi}dpi_gold" / pdf.name
                typer.echo(f"{dest}\t{mixed_copy(pdf, dest, dpi, gold.get(pdf.name, []))} pages scanned")
            return
        if keep_copies_only:
            for pdf in files:
                with pymupdf.open(pdf) as doc:
                    indexes = spread(doc.page_count, max_pages)
                dest = copy_path(workdir, dpi, skew_noise, pdf)
                pages = scan_copy(pdf, dest, dpi, skew_noise=skew_noise, pages=indexes)
                typer.echo(f"{dest}\t{pages} pages")
            return
        result = measure(files, workdir, dpi, skew_noise, max_pages)
    except (ValueError, OSError, RuntimeError) as exc:  # pymupdf's FileDataError is a RuntimeError
        fail(str(exc))
    if not result["total"]["documents"]:
        fail("no document could be measured: " + "; ".join(d["error"] for d in result["documents"]))
    command = ("chapterverse eval scans " + " ".join(str(p) for p in pdfs) + f" --dpi {dpi}"
               + (" --skew-noise" if skew_noise else "") + (f" --max-pages {max_pages}" if max_pages else "")
               + f" --workdir {workdir} --out {out}")
    save_result(out, {"command": command, "date": datetime.now(UTC).isoformat(timespec="seconds"), **result})
    t = result["total"]
    refused = "".join(f"\n  refused: {d['document']}: {d['error']}" for d in result["documents"] if "error" in d)
    typer.echo(f"{tag}: {t['pages']} pages of {t['documents']} document(s) in {t['ocr_seconds']} s "
               f"({t['pages_per_s']} pages/s), peak child RSS {t['peak_child_rss_mb']} MB; "
               f"{t['documents_refused']} refused{refused}")
    typer.echo(f"words: {t['ocr_in_reference']} of OCR's in the text layer, {t['reference_in_ocr']} of the text "
               f"layer's found; per page min {t['page_ocr_in_reference_min']}, p10 {t['page_ocr_in_reference_p10']}")
    typer.echo(f"wrote {out}")


def register(app: typer.Typer, eval_app: typer.Typer) -> None:
    for name, fn in _commands:
        eval_app.command(name)(fn)
