"""What every command group's command line shares (one small module; no group imports another's CLI):
exit statuses, the --json option, one-line errors, loading settings and starting the database, and
per-stage timings (``CHAPTERVERSE_TIMINGS``)."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from retrieval.settings import Settings, collection_name_problem, get_settings
from retrieval.store.db import DatabaseError
from retrieval.text.printable import escaped_json, printable

EXIT_OK, EXIT_BAD_INPUT, EXIT_CONFIG = 0, 1, 2
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]


TIMINGS_ENV = "CHAPTERVERSE_TIMINGS"  # set: print one "timings {json}" line on stderr at exit
stage_ms: dict[str, float] = {}


def process_age_s() -> float | None:
    """Seconds since this process started (Linux /proc; 10 ms resolution), None elsewhere."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        return time.clock_gettime(time.CLOCK_BOOTTIME) - int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


@contextmanager
def timed(stage: str) -> Iterator[None]:
    t0 = time.perf_counter()
    try:
        yield
    finally:
        stage_ms[stage] = stage_ms.get(stage, 0.0) + (time.perf_counter() - t0) * 1e3


def report_timings() -> None:
    age = process_age_s()
    out = {"total_ms": round(age * 1e3, 1) if age is not None else None,
           **{k: round(v, 1) for k, v in stage_ms.items()}}
    sys.stderr.write(f"timings {json.dumps(out)}\n")


def emit(obj: Any) -> None:
    sys.stdout.write(escaped_json(json.dumps(obj, default=str, ensure_ascii=False, indent=2)) + "\n")


def say(message: str, err: bool = False) -> None:
    """Print one message for people: every text in it that came from a document or a user (a title,
    a file name, a label, a quote) reaches the terminal with its control characters shown, not obeyed."""
    typer.echo(printable(message), err=err)


def fail(message: str, code: int = 2) -> NoReturn:
    say(f"error: {message}", err=True)
    raise typer.Exit(code)


def bad_input(message: str) -> NoReturn:
    fail(message, EXIT_BAD_INPUT)


def check_collection_names(names: str | list[str] | None) -> None:
    """Exit 1 (bad input) for a ``--collection`` that cannot be one: empty (it used to mean the
    default, silently) or holding a line break or another control character (it broke ``docs``)."""
    for name in [names] if isinstance(names, str) else names or []:
        if problem := collection_name_problem(name):  # the rule CHAPTERVERSE_DEFAULT_COLLECTION follows too
            bad_input(problem if name.strip() else f"{problem}; name one, or leave --collection out for the default")


NOTHING_INGESTED = "nothing is ingested yet; add PDFs first: chapterverse ingest FILE.pdf (then ask again)"


def check_collections(settings: Settings, wanted: list[str] | None) -> None:
    """Exit 2 when nothing is ingested at all (a fresh home: said at once, before the model loads),
    or when a named collection holds no documents: "no collection 'nosuch'; collections: dev, mine"."""
    from retrieval.store import db  # noqa: PLC0415

    try:
        with db.connection(settings) as conn:
            known = [r["collection"] for r in conn.execute(
                "SELECT DISTINCT collection FROM documents ORDER BY collection").fetchall()]
    except DatabaseError as exc:
        fail(str(exc))
    if not known:
        fail(NOTHING_INGESTED)
    missing = [c for c in dict.fromkeys(wanted or ()) if c not in known]
    if missing:  # (known is not empty here)
        fail(f"no collection {', '.join(repr(c) for c in missing)}; collections: {', '.join(known)}")


def configuration_error(exc: Exception) -> str:
    """A settings error as one line: the environment variable, the value and what is wrong with it
    ("CHAPTERVERSE_SLACK_WORKERS='abc': Input should be a valid integer…"), not pydantic's block."""
    from pydantic import ValidationError  # noqa: PLC0415

    from retrieval.settings import environment_names  # noqa: PLC0415

    if not isinstance(exc, ValidationError):
        return " ".join(str(exc).split())
    names = {key: var for var, key in reversed(environment_names().items())}  # a field's first name wins
    errors = exc.errors()
    first = errors[0]
    loc = tuple(str(x) for x in first.get("loc", ()))
    var = names.get(loc[:2]) or (f"CHAPTERVERSE_{loc[0].upper()}" if len(loc) == 1 else ".".join(loc))
    value = first.get("input")
    shown = f"={value!r}" if isinstance(value, (str, int, float)) and not any(
        w in var for w in ("KEY", "TOKEN", "SECRET", "URL", "PLACEMENT")) else ""
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{var}{shown}: {' '.join(str(first.get('msg', '')).split())}{more}"


def load_settings() -> Settings:
    try:
        return get_settings()
    except Exception as exc:  # noqa: BLE001  (pydantic validation errors)
        fail(f"bad configuration: {configuration_error(exc)}")


def placed(settings: Settings, collections: Sequence[str] | None) -> Settings:
    """The settings of the database holding ``collections`` (``retrieval.store.placement``); exit 1 when
    they are held by different primaries."""
    from retrieval.store.placement import PlacementError, placed as place  # noqa: PLC0415

    try:
        return place(settings, collections)
    except PlacementError as exc:
        fail(str(exc), code=1)


def ready(settings: Settings) -> None:
    from retrieval.store import db  # noqa: PLC0415

    try:
        with timed("db_start"):
            db.ready(settings)
    except DatabaseError as exc:
        fail(str(exc))


def servers(settings: Settings, collection: str | None) -> list[Settings]:
    """The primary holding ``collection``, or every primary (``DATABASE_URL``'s and each placement's,
    ``retrieval.store.placement.primaries``) when none is named; each ready (migrated)."""
    from retrieval.store.placement import primaries  # noqa: PLC0415

    found = [placed(settings, [collection])] if collection else primaries(settings)
    for one in found:
        ready(one)
    return found
