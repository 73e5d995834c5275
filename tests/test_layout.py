"""The architecture, enforced: the shared core (``retrieval/``) imports neither the Slack bot nor
the PDF intake, and the intake never imports the bot. Read from the source (every import statement,
top level or inside a function), so a lazy import cannot hide a dependency."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = {"retrieval": {"bot", "ingest"}, "ingest": {"bot"}}
# The command-line front door may import every package: it is the one place that wires them together.
ALLOWED = {Path("retrieval/cli.py")}


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


def test_the_check_catches_a_forbidden_import(tmp_path: Path) -> None:
    bad = tmp_path / "m.py"
    bad.write_text("def f():\n    from ingest.pdf import extract\n    import bot.app\n")
    assert imported_packages(bad) >= {"ingest", "bot"}
    with pytest.raises(SyntaxError):
        imported_packages(tmp_path.joinpath("x.py")) if tmp_path.joinpath("x.py").write_text("def (") else None
