"""The ``chapterverse`` command (Typer): a thin front door. Read commands take --json and print one
JSON document.

This module holds the app, the shared helpers (settings, exit statuses, one-line errors, JSON output)
and the commands of the shared core (``search``, ``ask``, ``db``). Every other command group registers
itself through the entry-point group ``chapterverse.commands`` (pyproject.toml): ``ingest``/``docs``/
``remove``/``collections`` from ``ingest.cli``, ``bot``/``worker``/``digest`` from ``bot.cli``, the
``eval`` commands from ``chapterverse_lab.cli``. Each entry point is a function
``register(app, eval_app)``; the core never imports the intake or the bot."""

from __future__ import annotations

import atexit
import logging
import os
import sys
import time
from functools import cache
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from retrieval.clikit import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    NOTHING_INGESTED,
    TIMINGS_ENV,
    JsonOpt,
    bad_input,
    check_collection_names,
    check_collections,
    emit,
    fail,
    load_settings,
    placed,
    process_age_s,
    ready,
    report_timings,
    say,
    servers,
    stage_ms,
    timed,
)
from retrieval.store.db import DatabaseError
from retrieval.encode.embed import ModelError
from retrieval.logs import log_handler, quiet_libraries
from retrieval.settings import Settings
from retrieval.text.question import text_problem

EXIT_STATUSES = (
    "Exit status: 0 answered or refused (a refusal is an answer; also when the index cannot be reached, "
    "which the reason says); 1 bad input (an empty question or query, a missing argument, a bad option); "
    "2 misconfiguration (--answerer gemini without GEMINI_API_KEY, --answerer openai without "
    "CHAPTERVERSE_OPENAI_MODEL, a --collection that does not exist, nothing ingested yet, an "
    "embedding model that cannot load or does not match the index). Errors are one line on stderr; "
    "nothing is printed on stdout then, not even with --json.")
SEARCH_EXIT_STATUSES = (
    "Exit status: 0 passages found, or none; 1 bad input (an empty query, a missing argument, a bad option "
    "such as --k 0); 2 misconfiguration (a --collection or --document that does not exist, nothing ingested "
    "yet, the database cannot be reached, an embedding model that cannot load or does not match the index). "
    "Errors are one line on stderr; nothing is printed on stdout then, not even with --json.")
CHECKED = ("(Each quote is checked to be word for word on its page; whether it answers your question is "
           "not checked: read it.)")


def _plain_help_types() -> None:
    """Help screens name what to type (TEXT, INTEGER, PATH; a repeatable option TEXT…; a flag
    nothing; the usage line QUESTION), not Typer's Python type labels (``<str>``, ``<list[str]>``,
    ``<bool>``, ``{question}``)."""
    from typer import core  # noqa: PLC0415

    words = {"str": "TEXT", "int": "INTEGER", "float": "NUMBER", "Path": "PATH", "path": "PATH", "file": "FILE",
             "directory": "DIRECTORY", "bool": None}

    def display_type_rich(self: Any, ctx: Any) -> str | None:
        if getattr(self, "metavar", None):
            return self.metavar
        if getattr(self, "is_flag", False):
            return None
        raw = str(self.display_type(ctx)).strip("<>")
        repeat = raw.startswith("list[") and raw.endswith("]")
        base = raw[5:-1] if repeat else raw
        word = words.get(base, base.upper()) if "|" not in base else base
        return None if word is None else word + ("…" if repeat else "")

    def usage_name(self: Any) -> str:
        name = str(self.display_name_raw).upper()
        name = name if self.required else f"[{name}]"
        return name + ("..." if self.nargs != 1 else "")

    for cls in (core.TyperOption, core.TyperArgument):
        cls.display_type_rich = display_type_rich  # type: ignore[method-assign]
    core.TyperArgument._usage_display_name = usage_name  # type: ignore[method-assign]


_plain_help_types()


# click's UsageError (typer vendors click, so it is found through typer's own BadParameter)
_UsageError = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")


def _usage_error(exc: Any) -> typer.Exit:
    """A usage error as one line on stderr ("error: Invalid value for '--k': …; see `… search --help`"),
    not click's usage text and box; exit 1 (bad input)."""
    ctx = getattr(exc, "ctx", None)
    if type(exc).__name__ == "NoArgsIsHelpError":  # a bare group (`chapterverse db`): typer has printed
        return typer.Exit(EXIT_OK)                  # its help, which is the whole answer; no error line
    where = f"; see `{ctx.command_path} --help`" if ctx is not None else ""
    message = " ".join(str(exc.format_message()).split()).rstrip(".")
    say(f"error: {message}{where}", err=True)
    return typer.Exit(EXIT_BAD_INPUT)


class _Commands(TyperGroup):
    """Usage errors (missing argument, unknown option, bad value) are one line and exit 1, "bad
    input", not click's 2: exit status 2 means misconfiguration here (``EXIT_STATUSES``)."""

    def make_context(self, *args: Any, **kwargs: Any) -> typer.Context:
        try:
            return super().make_context(*args, **kwargs)
        except _UsageError as exc:
            raise _usage_error(exc) from None

    def invoke(self, ctx: typer.Context) -> Any:
        try:
            return super().invoke(ctx)
        except _UsageError as exc:
            raise _usage_error(exc) from None


app = typer.Typer(
    cls=_Commands,
    help="Chapter & Verse: answers from your handbooks with verified, page-linked quotes.",
    epilog=EXIT_STATUSES, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
db_app = typer.Typer(help="Database housekeeping.", no_args_is_help=True)
app.add_typer(db_app, name="db")
eval_app = typer.Typer(help="Evaluations and benchmarks that write results/*.json (from the lab: pip install -e ./lab).",
                       no_args_is_help=True)
app.add_typer(eval_app, name="eval")

def setup_logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        handlers=[log_handler("%(levelname)s %(name)s: %(message)s", sys.stderr)])
    quiet_libraries()


@app.callback()
def _main(verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log progress to stderr.")] = False) -> None:
    setup_logging(verbose)
    if os.environ.get(TIMINGS_ENV):
        age = process_age_s()
        stage_ms["startup"] = age * 1e3 if age is not None else 0.0  # interpreter + module imports
        atexit.register(report_timings)


DocumentOpt = Annotated[list[str] | None, typer.Option(
    help="Only these documents: a file name (with or without .pdf) or a title, as `chapterverse docs` shows.")]


def resolve_documents(settings: Settings, wanted: list[str] | None, collections: list[str] | None) -> list[str] | None:
    """The documents ``--document`` names, by file name ("pgfmanual.pdf"), file name without
    ".pdf" ("pgfmanual", as output shows it) or title, any case; exit 2 naming the documents there
    are when one matches none (it used to search nothing and say "no passages found")."""
    if not wanted:
        return None
    from retrieval.store import db  # noqa: PLC0415

    try:
        with db.connection(settings) as conn:
            rows = conn.execute("SELECT DISTINCT name, title FROM documents WHERE (%s::text[] IS NULL OR "
                                "collection = ANY(%s)) ORDER BY name", (collections, collections)).fetchall()
    except DatabaseError as exc:
        fail(str(exc))
    out: list[str] = []
    for given in wanted:
        key = " ".join(given.split()).casefold()
        found = [r["name"] for r in rows if key in (
            r["name"].casefold(), r["name"].casefold().removesuffix(".pdf"), " ".join((r["title"] or "").split()).casefold())]
        if not found:
            names = [r["name"].removesuffix(".pdf") for r in rows]
            shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
            fail(f"no document {given!r}; documents: {shown or 'none'}")
        out.extend(n for n in found if n not in out)
    return out


def titles_of(settings: Settings, names: list[str]) -> dict[str, str | None]:
    """The titles of these documents (``documents.title``), to show instead of file names; {} when
    the database cannot say (the cleaned file names are shown then)."""
    from retrieval.store import db  # noqa: PLC0415

    if not names:
        return {}
    try:
        with db.connection(settings) as conn:
            return {r["name"]: r["title"] for r in conn.execute(
                "SELECT DISTINCT ON (name) name, title FROM documents WHERE name = ANY(%s) ORDER BY name",
                [list(dict.fromkeys(names))]).fetchall()}
    except DatabaseError:
        return {}


def check_answerer(settings: Settings, name: str | None) -> None:
    """An unknown answerer is bad input (exit 1); a model answerer (named, or chosen by
    CHAPTERVERSE_ANSWERER) without its settings is misconfiguration (2)."""
    from retrieval.answer.answerers import ANSWERERS, unconfigured  # noqa: PLC0415

    if name is not None and name not in ANSWERERS:
        bad_input(f"unknown answerer {name!r}; use {', '.join(ANSWERERS)}")
    chosen = name or settings.answer.answerer
    missing = unconfigured(settings, chosen) if chosen else None
    if missing:
        how = f"--answerer {chosen}" if name else f"CHAPTERVERSE_ANSWERER={chosen}"
        fail(f"{how} needs {missing} (or use --answerer extractive, which needs no model service)")


def require_model(settings: Settings) -> None:
    """Load the embedding model and check it is the one the index was built with; exit 2 if not."""
    from retrieval.encode.embed import get_embedder  # noqa: PLC0415
    from retrieval.search.search import check_model  # noqa: PLC0415

    with timed("model_load"):
        try:
            check_model(settings, get_embedder(settings.search.embedding_model))
        except (ModelError, DatabaseError) as exc:
            fail(str(exc))


@app.command(epilog=SEARCH_EXIT_STATUSES)
def search(
    query: Annotated[str, typer.Argument(help="What to look for, in plain words.")],
    k: Annotated[int, typer.Option("--k", min=1, max=100, help="How many passages.")] = 5,
    collection: Annotated[list[str] | None, typer.Option(help="Only these collections.")] = None,
    document: DocumentOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Find the passages that best match QUERY."""
    with timed("imports"):
        from retrieval.search.search import search as run_search  # noqa: PLC0415

    if not query.strip():
        bad_input("the query is empty; say what to look for")
    if (problem := text_problem(query, "query")) is not None:
        bad_input(problem)
    check_collection_names(collection)
    settings = placed(load_settings(), collection)  # the collections' own database (CHAPTERVERSE_DB_PLACEMENT)
    ready(settings)
    check_collections(settings, collection)
    document = resolve_documents(settings, document, collection)
    require_model(settings)
    try:
        with timed("search"):
            res = run_search(settings, query, k=k, collections=collection, documents=document)
    except (DatabaseError, ModelError) as exc:
        fail(str(exc))
    if json_out:
        out = res.model_dump()
        emit(out | {"results": [p | {"rank": i} for i, p in enumerate(out["results"], 1)]})
        return
    from retrieval.answer.answer_view import pages_words, shown_title  # noqa: PLC0415

    if not res.results:
        say("no passages found")
    titles = titles_of(settings, [p.document for p in res.results])
    for i, p in enumerate(res.results, 1):  # in the final order, which the score alone does not make (footer)
        first = " · named in the query, so searched first" if p.document in res.named_documents else ""
        if p.untrusted:  # flagged at ingest (retrieval.text.injection): ask never reads it
            first += " · text addressed to AI assistants: never used as evidence"
        say(f"{i}. {shown_title(p.document, titles)} · {pages_words(p.page, p.page_end, p.page_label)} · "
                   f"score {p.score:.3f}{first}")
        snippet = " ".join(p.text.split())
        say(f"   {snippet[:300]}{'…' if len(snippet) > 300 else ''}\n")
    say(f"{search_order(res.reranker)} · {res.timings_ms.get('total', 0):.0f} ms (per-stage ranks and scores: --json)")


def search_order(reranker: str | None) -> str:
    """What orders ``search``'s list, which its scores alone do not: the reranker's rank is combined
    with the keyword and dense legs' fused rank, a page's second passage yields to other pages, and
    documents the query names come first."""
    from retrieval.search.rerank import NONE  # noqa: PLC0415

    if not reranker or reranker == NONE:
        return "order: keyword and dense ranks fused (score: the fused score)"
    return (f"order: the {reranker} reranker's rank combined with the keyword and dense ranks (score: the "
            "reranker's); a page's second passage after other pages")


@db_app.command("status")
def db_status(json_out: JsonOpt = False) -> None:
    """Where the index lives, its schema version and embedding model (and each placement primary's counts)."""
    from retrieval.store import db  # noqa: PLC0415
    from retrieval.encode.embed import get_embedder  # noqa: PLC0415
    from retrieval.search.rerank import describe as describe_reranker  # noqa: PLC0415
    from retrieval.store.placement import primaries  # noqa: PLC0415

    settings = load_settings()
    ready(settings)
    with db.connection(settings) as conn:
        rec, counts = _contents(conn)
        version = db.schema_version([r["migration_id"] for r in conn.execute(
            "SELECT migration_id FROM _yoyo_migration").fetchall()])
    try:
        emb = get_embedder(settings.search.embedding_model, load=False)
        encoder, passages = emb.query_encoder_status(), emb.passage_encoder_status()
    except ModelError as exc:
        encoder = passages = f"unavailable ({exc})"
    info = {"database": "external (DATABASE_URL)" if settings.db.url else f"embedded at {settings.pgdata}",
            "schema": version, "embedding_model": rec[0] if rec else None,
            "embedding_dim": rec[1] if rec else None, **counts, "reranker": describe_reranker(settings.search.reranker),
            "query_encoder": encoder, "passage_encoder": passages}
    if settings.db.placement:
        info["placed"] = [placed_status(one) for one in primaries(settings)[1:]]
    if json_out:
        emit(info)
    else:
        for key, val in info.items():
            if key == "placed":
                for p in val:
                    say(f"placed: {p['server']}: " + (f"unavailable ({p['error']})" if "error" in p else
                               f"{p['documents']} documents, {p['chunks']} chunks, {p['embedding_model']}"))
            else:
                say(f"{key}: {val}")


def placed_status(settings: Settings) -> dict[str, object]:
    """What ``db status`` says of a placement's primary (CHAPTERVERSE_DB_PLACEMENT): its address, documents,
    chunks and embedding model, or why it cannot say."""
    from retrieval.store import db  # noqa: PLC0415
    from retrieval.store.replicas import address  # noqa: PLC0415

    out: dict[str, object] = {"server": address(settings.db.url.get_secret_value())}
    try:
        db.ready(settings)
        with db.connection(settings) as conn:
            rec, counts = _contents(conn)
    except DatabaseError as exc:
        return out | {"error": db.first_line(exc)}
    return out | counts | {"embedding_model": rec[0] if rec else None}


def _contents(conn) -> tuple[tuple[str, int] | None, dict[str, int]]:  # noqa: ANN001
    """A database's recorded embedding model (name, dim) and its documents' and chunks' counts."""
    from retrieval.store import index  # noqa: PLC0415

    counts = conn.execute("SELECT (SELECT count(*) FROM documents) AS documents, "
                          "(SELECT count(*) FROM chunks) AS chunks").fetchone()
    return index.recorded_model(conn), counts


@db_app.command("stop")
def db_stop() -> None:
    """Stop the warm process that answers ask and search quickly (and the embedded server it holds);
    the next command starts from nothing. It also stops by itself after CHAPTERVERSE_DB_WARM_S idle seconds."""
    from retrieval.warm import stop_warm  # noqa: PLC0415

    say("stopped the warm process" if stop_warm() else "no warm process was running for this environment")


@db_app.command("reembed")
def db_reembed() -> None:
    """Re-embed every chunk with the configured CHAPTERVERSE_EMBEDDING_MODEL (one transaction per primary)."""
    from retrieval.store import db, index  # noqa: PLC0415
    from retrieval.encode.embed import get_embedder  # noqa: PLC0415

    everywhere = servers(load_settings(), None)  # DATABASE_URL's and each placement's (CHAPTERVERSE_DB_PLACEMENT)
    try:
        emb = get_embedder(everywhere[0].search.embedding_model)
    except ModelError as exc:
        fail(str(exc))
    t0, n = time.perf_counter(), 0
    for settings in everywhere:
        with db.connection(settings) as conn:
            n += index.reembed(conn, emb.name, emb.dim, emb.embed_chunks)
    where = f" on {len(everywhere)} primaries" if len(everywhere) > 1 else ""
    say(f"re-embedded {n} chunks{where} with {emb.name} ({emb.dim} dims) in {time.perf_counter() - t0:.1f} s")


@app.command(epilog=EXIT_STATUSES)
def ask(
    question: Annotated[str, typer.Argument(help="A question about the indexed documents.")],
    collection: Annotated[list[str] | None, typer.Option(help="Only these collections.")] = None,
    document: DocumentOpt = None,
    answerer: Annotated[str | None, typer.Option(help="gemini, openai (an OpenAI-compatible server) or extractive (default: CHAPTERVERSE_ANSWERER, else gemini when GEMINI_API_KEY is set, else extractive).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Answer QUESTION with page-linked quotes, each checked word for word against its page, or refuse
    when the documents do not say.

    A refusal is an answer, not an error: it is printed (as JSON with --json) with exit status 0, also
    when the index cannot be reached (the database is down); the reason says so."""
    from retrieval.store import db  # noqa: PLC0415
    with timed("imports"):
        from retrieval.answer.answer_view import as_text  # noqa: PLC0415
        from retrieval.answer.ask import ask as run_ask  # noqa: PLC0415
        from retrieval.answer.refusals import index_unavailable  # noqa: PLC0415

    if not question.strip():
        bad_input("the question is empty; ask something, e.g. chapterverse ask \"What is the maximum airspeed below 10,000 feet?\"")
    if (problem := text_problem(question)) is not None:
        bad_input(problem)
    check_collection_names(collection)
    settings = placed(load_settings(), collection)  # the collections' own database (CHAPTERVERSE_DB_PLACEMENT)
    check_answerer(settings, answerer)
    try:
        with timed("db_start"):
            db.ready(settings)
    except DatabaseError as exc:
        result = index_unavailable(question, exc)
    else:
        check_collections(settings, collection)
        document = resolve_documents(settings, document, collection)
        require_model(settings)
        with timed("ask"):
            result = run_ask(settings, question, collections=collection, answerer=answerer, documents=document)
        stage_ms["ask.search"] = result.timings_ms.get("search", 0.0)
    if json_out:
        emit(result.model_dump())
    else:
        shown = [c.document for c in result.citations] + [n.document for n in result.nearest]
        say(as_text(result, titles_of(settings, shown), collection, document))
        if result.citations and not result.refusal:
            say(CHECKED)  # what "verified" means: the words are on the page, not that they answer


PLUGIN_GROUP = "chapterverse.commands"


@cache
def register_plugins() -> list[str]:
    """Add the command groups that packages register under ``PLUGIN_GROUP`` (once); returns their
    names. Called by ``main``, not on import: the plugins import this module's helpers."""
    from importlib.metadata import entry_points  # noqa: PLC0415

    plugins = sorted(entry_points(group=PLUGIN_GROUP), key=lambda e: e.name)
    for ep in plugins:
        ep.load()(app, eval_app)
    return [ep.name for ep in plugins]


def main() -> None:
    register_plugins()
    app()


if __name__ == "__main__":
    main()
