"""The reader's training data: the questions (``questions/*.jsonl``, in git), the documents they were
written from (``SOURCES.md``: file, pages, sha256, package; fetched by ``fetch.sh``, not in git) and a
checker (``check.py``)."""

from __future__ import annotations

import hashlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
QUESTIONS = HERE / "questions"


def sources_table(pdf_dir: Path | None = None) -> list[dict]:
    """The documents of SOURCES.md; with ``pdf_dir``, each file's sha256 is checked (ValueError on a mismatch)."""
    rows = []
    for line in (HERE / "SOURCES.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 5 and len(cells[2]) == 64 and cells[1].isdigit():
            rows.append({"file": cells[0], "pages": int(cells[1]), "sha256": cells[2], "source": cells[3],
                         "licence": cells[4]})
    if pdf_dir is not None:
        for r in rows:
            got = hashlib.sha256((pdf_dir / r["file"]).read_bytes()).hexdigest()
            if got != r["sha256"]:
                raise ValueError(f"{pdf_dir / r['file']}: sha256 {got} is not the {r['sha256']} of SOURCES.md")
    return rows
