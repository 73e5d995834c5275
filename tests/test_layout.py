"""The architecture, enforced: the shared core (``retrieval/``) imports neither the Slack bot nor
the PDF intake, the intake never imports the bot, and no part of the product imports the lab
(``chapterverse_lab``: evaluation, benchmarks, training; a separate distribution in ``lab/``). Read from the source (every import statement,
top level or inside a function), so a lazy import cannot hide a dependency."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = {"retrieval": {"bot", "ingest", "chapterverse_lab"}, "ingest": {"bot", "chapterverse_lab"},
             "bot": {"chapterverse_lab"}}
ALLOWED: set[Path] = set()  # no exceptions: the CLI collects the intake's and the bot's commands by entry point
# Inside the core, by stage: storage and the text toolkit sit below everything; search does not reach
# into answering.
STAGES_FORBIDDEN = {
    "retrieval/text": {"retrieval.store", "retrieval.encode", "retrieval.search", "retrieval.answer"},
    "retrieval/store": {"retrieval.encode", "retrieval.search", "retrieval.answer"},
    "retrieval/encode": {"retrieval.search", "retrieval.answer"},
    "retrieval/search": {"retrieval.answer"},
}
# Command-line modules of the groups; none imports another's (shared helpers are in retrieval.clikit).
CLI_MODULES = {"retrieval/cli.py": "retrieval.cli", "ingest/cli.py": "ingest.cli", "bot/cli.py": "bot.cli",
               "lab/chapterverse_lab/cli.py": "chapterverse_lab.cli"}


def imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


def violations() -> list[str]:
    found = []
    for package, banned in FORBIDDEN.items():
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if rel in ALLOWED:
                continue
            for name in sorted(imported_packages(path) & banned):
                found.append(f"{rel} imports {name}")
    return found


def test_core_imports_neither_bot_nor_ingest_and_ingest_not_bot() -> None:
    assert violations() == []


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return out


def test_the_core_is_layered_by_stage() -> None:
    found = []
    for folder, banned in STAGES_FORBIDDEN.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            for name in sorted(imported_modules(path)):
                if any(name == b or name.startswith(b + ".") for b in banned):
                    found.append(f"{path.relative_to(ROOT)} imports {name}")
    assert found == []


def test_the_check_catches_a_forbidden_import(tmp_path: Path) -> None:
    bad = tmp_path / "m.py"
    bad.write_text("def f():\n    from ingest.pdf import extract\n    import bot.app\n")
    assert imported_packages(bad) >= {"ingest", "bot"}
    with pytest.raises(SyntaxError):
        imported_packages(tmp_path.joinpath("x.py")) if tmp_path.joinpath("x.py").write_text("def (") else None


def test_help_lists_every_command_including_the_registered_ones() -> None:
    """The thin CLI collects its command groups from the ``chapterverse.commands`` entry points."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "retrieval.cli", "--help"], capture_output=True, text=True,
                         timeout=120, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    listed = {line.split()[1] for line in out.stdout.splitlines() if line.startswith("│ ") and len(line.split()) > 1}
    assert {"ingest", "docs", "remove", "search", "ask", "bot", "worker", "digest", "db", "eval"} <= listed
    evals = subprocess.run([sys.executable, "-m", "retrieval.cli", "eval", "--help"], capture_output=True, text=True,
                           timeout=120, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    assert "train-reader" in evals.stdout and "answers" in evals.stdout


def test_no_command_group_imports_another_groups_command_line() -> None:
    found = []
    for rel, own in CLI_MODULES.items():
        others = set(CLI_MODULES.values()) - {own}
        found += [f"{rel} imports {name}" for name in sorted(imported_modules(ROOT / rel))
                  if any(name == o or name.startswith(o + ".") for o in others)]
    assert found == []


def test_the_installed_product_carries_no_lab() -> None:
    """The product's wheel is built from bot/, ingest/ and retrieval/: no evaluation, benchmark or
    training module and no training data there."""
    lab_like = [p.relative_to(ROOT) for pkg in ("bot", "ingest", "retrieval") for p in (ROOT / pkg).rglob("*")
                if p.suffix in (".py", ".jsonl") and any(w in p.name for w in ("bench", "train", "eval", "calibrat"))]
    assert lab_like == []
