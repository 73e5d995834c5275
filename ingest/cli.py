"""The intake's commands: ``ingest``, ``docs``, ``remove`` and ``collections``, registered into the
``chapterverse`` app through the ``chapterverse.commands`` entry point."""

from __future__ import annotations

import difflib
import logging
import resource
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import nullcontext
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from ingest import child
from ingest.progress import ocr_words
from ingest.sources import InputError, Source, expand, is_url, load, readable, redact_urls
from retrieval.clikit import (JsonOpt, check_collection_names, check_collections, emit, fail, load_settings, placed, say,
                              ready, servers)
from retrieval.interrupts import reraise_interrupt
from retrieval.settings import Settings, SettingsError, preset_description, preset_names, preset_profile
from retrieval.store.db import DatabaseError
from retrieval.encode.embed import ModelError

if TYPE_CHECKING:
    from ingest.isolate import Parsed  # loads PyMuPDF: only for the annotations


T = TypeVar("T")


def in_background(work: Callable[[], T], name: str) -> Future[T]:
    """``work()`` on a daemon thread of its own, its outcome in the future returned. Not a thread
    pool: a pool's threads are waited for when the interpreter exits, so a command interrupted while
    the next PDF was read ahead waited for that parse (minutes for a hostile file) before exiting."""
    future: Future[T] = Future()

    def run() -> None:
        if future.set_running_or_notify_cancel():
            try:
                future.set_result(work())
            except BaseException as exc:  # noqa: BLE001  (the caller's to see, through the future)
                future.set_exception(exc)

    threading.Thread(target=run, name=name, daemon=True).start()
    return future


def _load_and_parse(settings: Settings, given: str, collection: str) -> tuple[Source, Parsed | None]:
    """One input read ahead: its bytes, and its pages unless it is already in the index unchanged."""
    from ingest.pipeline import parse_ahead  # noqa: PLC0415

    src = load(given, settings.ingest.max_file_bytes, settings.ingest.download_timeout_s)
    return src, parse_ahead(settings, src, collection)


def ingest(
    inputs: Annotated[list[str], typer.Argument(help="PDF files, directories of PDFs, or http(s) URLs.")],
    collection: Annotated[str | None, typer.Option(help="Collection to add to (default: CHAPTERVERSE_DEFAULT_COLLECTION).")] = None,
    preset: Annotated[str | None, typer.Option(
        help="Preset a new collection records (`chapterverse collections presets`; default: CHAPTERVERSE_PRESET, "
             "else 'default'): the language its questions are read in and its text search. An existing "
             "collection keeps its own.")] = None,
    json_out: JsonOpt = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars or progress lines.")] = False,
) -> None:
    """Add PDFs to the index. Same bytes again: no-op. Same name, new bytes: replaces atomically.

    One bad input does not stop the others; the exit status is 1 if any input failed.
    On a terminal progress bars show how far it is; otherwise (a pipe, a log) a line on stderr every
    CHAPTERVERSE_PROGRESS_INTERVAL_S seconds (30) names the document, pages read and the step.
    """
    from ingest.pipeline import ingest_source  # noqa: PLC0415  (loads PyMuPDF)
    from ingest.progress import ProgressLog  # noqa: PLC0415
    from retrieval.encode.embed import get_embedder  # noqa: PLC0415

    check_collection_names(collection)
    settings = load_settings()
    coll = collection or settings.ingest.default_collection
    settings = placed(settings, [coll])  # the collection's own primary (CHAPTERVERSE_DB_PLACEMENT)
    ready(settings)
    if preset is not None:
        settings = with_preset(settings, preset, coll)
    try:
        embedder = get_embedder(settings.search.embedding_model, load=False)  # loads when a document needs it
    except ModelError as exc:
        fail(str(exc))
    limit = settings.ingest.max_file_bytes
    results: list[dict] = []
    lines = not quiet and not sys.stderr.isatty()  # progress lines where no bar can be seen
    givens = list(expand(inputs))
    # the next PDF is read (downloaded, parsed in its child process) while the current one is embedded
    ahead: dict[int, Future[tuple[Source, Parsed | None]]] = {}

    def read_ahead(i: int) -> None:
        if i < len(givens):
            ahead[i] = in_background(lambda: _load_and_parse(settings, givens[i], coll), "cv-read-ahead")

    arg = ""
    try:
        for i, given in enumerate(givens):
            # a URL's query string (a signed URL's signature) is never printed or stored; a path's bytes
            # that are not UTF-8 are shown as U+FFFD (they used to end the --json output in an error)
            arg = readable(redact_urls(given))
            try:
                with ProgressLog(arg, settings.ingest.progress_interval_s) if lines else nullcontext() as progress:
                    if i in ahead:
                        src, parsed = ahead.pop(i).result()
                    else:
                        if progress:
                            progress.begin("downloading" if is_url(arg) else "opening")
                        src, parsed = load(given, limit, settings.ingest.download_timeout_s), None
                    if progress:
                        progress.document(src.name)
                    read_ahead(i + 1)
                    res = ingest_source(settings, embedder, src, coll, quiet=quiet or json_out, progress=progress,
                                        parsed=parsed)
                results.append(res.as_dict())
                if not json_out:
                    if res.status == "unchanged":
                        say(f"{res.name}: unchanged ({res.message}); nothing to do")
                    else:
                        rate = res.pages / res.seconds if res.seconds else 0.0
                        say(f"{res.name}: {res.status} into {coll!r}: {res.pages} pages"
                                   f"{ocr_words(res.ocr_pages, res.ocr_confidence)}, {res.chunks} chunks "
                                   f"in {res.seconds:.1f} s ({rate:.1f} pages/s)"
                                   + (f"; {res.message}" if res.message else ""))
                        if res.warning:
                            say(f"warning: {res.name}: {res.warning}", err=True)
            except (InputError, DatabaseError) as exc:  # an InputError's message names the input
                results.append({"origin": arg, "status": "failed", "message": str(exc)})
                say(f"error: {exc}" if isinstance(exc, InputError) else f"error: {arg}: {exc}", err=True)
            except ModelError as exc:  # no document can be embedded: stop here
                fail(str(exc))
            except Exception as exc:  # noqa: BLE001  (one input's surprise must not stop the batch)
                reraise_interrupt(exc)  # but a Ctrl-C a library wrapped in another error does
                logging.getLogger(__name__).debug("ingest of %s failed", arg, exc_info=True)
                message = f"{arg}: unexpected error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                results.append({"origin": arg, "status": "failed", "message": message})
                say(f"error: {message}", err=True)
    except KeyboardInterrupt:
        # Ctrl-C: the document being ingested is written in one transaction, so nothing of it is stored
        done = sum(1 for r in results if r.get("status") in ("ingested", "replaced", "reindexed", "unchanged"))
        kept = f"; the {done} finished before it are stored" if done else ""
        say(f"error: interrupted: {arg} was not stored (nothing of it was written){kept}", err=True)
        raise typer.Exit(130) from None
    finally:
        child.stop_all()  # a PDF still being read ahead (interrupted, or a model that failed): its parser goes now
    if json_out:
        emit({"collection": coll, "results": results,
               "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})
    if any(r["status"] == "failed" for r in results):
        raise typer.Exit(1)


def with_preset(settings: Settings, preset: str, collection: str) -> Settings:
    """``settings`` ingesting with ``preset``; a clear error when it does not exist or when
    ``collection`` already records another one."""
    from retrieval.store import db  # noqa: PLC0415
    from retrieval.store.collections import recorded_presets  # noqa: PLC0415

    try:
        profile = preset_profile(preset)
        with db.connection(settings) as conn:
            recorded = recorded_presets(conn, [collection]).get(collection)
    except (SettingsError, DatabaseError) as exc:
        fail(str(exc))
    if recorded is not None and recorded != preset:
        fail(f"collection {collection!r} records preset {recorded!r}, not {preset!r}: a collection keeps its preset "
             f"(`chapterverse collections set-preset {collection} {preset}` changes it; each document is indexed "
             "with the new one when it is ingested again)")
    return settings.but(preset=preset, profile=profile)


def docs(
    collection: Annotated[str | None, typer.Option(help="Only this collection.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """List ingested documents."""
    from ingest.store import list_documents  # noqa: PLC0415
    from retrieval.store import db  # noqa: PLC0415

    check_collection_names(collection)
    found = servers(load_settings(), collection)
    if collection is not None:  # a misspelt one is an error naming those there are, as in ask and search
        check_collections(found[0], [collection])
    rows = []
    for settings in found:
        with db.connection(settings) as conn:
            rows += list_documents(conn, collection)
    rows.sort(key=lambda r: (r["collection"], r["name"]))
    if json_out:
        emit({"documents": rows})
        return
    if not rows:
        say("no documents yet; add some with: chapterverse ingest FILE.pdf")
        return
    for r in rows:
        language = f", {r['text_search']} text search" if r["text_search"] != "english" else ""
        say(f"{r['name']}  [{r['collection']}]  {r['pages']} pages, {r['chunks']} chunks{language}, "
                   f"ingested {r['ingested_at']:%Y-%m-%d %H:%M}")


def remove(
    name: Annotated[str, typer.Argument(help="Document name as shown by `chapterverse docs`.")],
    collection: Annotated[str | None, typer.Option(help="Only from this collection.")] = None,
) -> None:
    """Remove a document (its pages and chunks) from the index."""
    from ingest.store import AmbiguousName, collections_with, remove_document  # noqa: PLC0415
    from retrieval.store import db  # noqa: PLC0415

    check_collection_names(collection)
    settings = load_settings()
    try:
        if collection is None and settings.db.placement:  # which primary holds it (CHAPTERVERSE_DB_PLACEMENT)
            found: list[str] = []
            for one in servers(settings, None):
                with db.connection(one) as conn:
                    found += collections_with(conn, name)
            if len(found) > 1:
                raise AmbiguousName(name, sorted(found))
            collection = found[0] if found else None
        settings = placed(settings, [collection] if collection else None)
        ready(settings)
        with db.connection(settings) as conn:
            removed = remove_document(conn, name, collection)
    except AmbiguousName as exc:  # the name is right, which one is meant is not: bad input
        fail(str(exc), code=1)
    except DatabaseError as exc:
        fail(str(exc))
    if not removed:
        fail(f"no document named {name!r}{f' in {collection!r}' if collection else ''}; "
             f"{closest_first(name, _document_names(collection))}", code=1)
    say(f"removed {name} from {', '.join(repr(c) for c in removed)}")


def _document_names(collection: str | None) -> list[str]:
    """The names of the documents in ``collection`` (every collection: None), each once."""
    from ingest.store import list_documents  # noqa: PLC0415
    from retrieval.store import db  # noqa: PLC0415

    names: list[str] = []
    try:
        for settings in servers(load_settings(), collection):
            with db.connection(settings) as conn:
                names += [r["name"] for r in list_documents(conn, collection)]
    except DatabaseError as exc:
        fail(str(exc))
    return list(dict.fromkeys(names))


def closest_first(name: str, names: list[str], shown: int = 10) -> str:
    """"documents: a.pdf, b.pdf (closest first)": ``names`` ordered by likeness to ``name`` (difflib's
    ratio, then the name), at most ``shown`` of them; "no documents yet" when there are none."""
    if not names:
        return "no documents yet"
    key = name.casefold()
    ordered = sorted(names, key=lambda n: (-difflib.SequenceMatcher(None, key, n.casefold()).ratio(), n))
    more = f" and {len(ordered) - shown} more (`chapterverse docs`)" if len(ordered) > shown else ""
    return f"documents: {', '.join(ordered[:shown])}{more} (closest first)"


collections_app = typer.Typer(help="Collections and the preset each records (its language and text search).",
                               no_args_is_help=True)


@collections_app.command("list")
def collections_list(json_out: JsonOpt = False) -> None:
    """The collections, each with its preset and documents."""
    from retrieval.store import db  # noqa: PLC0415
    from retrieval.store.collections import recorded_presets  # noqa: PLC0415

    presets: dict[str, str] = {}
    counts: dict[str, int] = {}
    for settings in servers(load_settings(), None):
        with db.connection(settings) as conn:
            presets |= recorded_presets(conn)
            counts |= {r["collection"]: r["n"] for r in conn.execute(
                "SELECT collection, count(*) AS n FROM documents GROUP BY collection")}
    rows = [{"collection": c, "preset": presets[c], "documents": counts.get(c, 0)} for c in sorted(presets)]
    if json_out:
        emit({"collections": rows})
        return
    if not rows:
        say("no collections yet; add a document with: chapterverse ingest FILE.pdf --collection NAME")
    for r in rows:
        say(f"{r['collection']}  preset {r['preset']}, {r['documents']} document{'s' * (r['documents'] != 1)}")


@collections_app.command("presets")
def collections_presets(json_out: JsonOpt = False) -> None:
    """The presets a collection may record (retrieval/presets/ and CHAPTERVERSE_PRESETS_DIR)."""
    rows = []
    for name in preset_names():
        try:
            rows.append({"preset": name, "description": preset_description(name),
                         "text_search": preset_profile(name).text_search})
        except (OSError, ValueError) as exc:
            rows.append({"preset": name, "error": str(exc)})
    if json_out:
        emit({"presets": rows})
        return
    for r in rows:
        say(f"{r['preset']}: " + (f"error: {r['error']}" if "error" in r else
                                         f"{r['text_search']} text search. {r['description']}"))


@collections_app.command("set-preset")
def collections_set_preset(
    collection: Annotated[str, typer.Argument(help="Collection (as `chapterverse collections list` shows it).")],
    preset: Annotated[str, typer.Argument(help="Preset name (`chapterverse collections presets`).")],
) -> None:
    """Change the preset a collection records: its questions are read with it (by running processes
    within five minutes); each of its documents is indexed with its text search when ingested again."""
    from retrieval.store import db  # noqa: PLC0415
    from retrieval.store.collections import set_preset  # noqa: PLC0415

    check_collection_names(collection)
    settings = placed(load_settings(), [collection])  # the collection's own primary
    ready(settings)
    try:
        with db.connection(settings) as conn:
            set_preset(conn, collection, preset)
    except (SettingsError, LookupError, DatabaseError) as exc:
        fail(str(exc), code=1 if isinstance(exc, LookupError) else 2)
    say(f"{collection!r} now records preset {preset!r}")


def register(app: typer.Typer, eval_app: typer.Typer) -> None:
    app.command()(ingest)
    app.command()(docs)
    app.command()(remove)
    app.add_typer(collections_app, name="collections")
