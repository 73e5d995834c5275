"""Check the reader's training questions against the PDFs they were written from.

    python -m chapterverse_lab.reader_data.check PDF_DIR [questions/*.jsonl ...]

Every answerable line must name a document listed in SOURCES.md, a 1-based PDF page that exists,
and an ``answer_span`` found on that page (after joining line-break hyphens and collapsing
whitespace; case is kept). Unanswerable lines carry ``answerable: false`` and the page they are a
near miss of. Prints counts by document, kind and paraphrase share; exits 1 on any error.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
KINDS = {"number", "definition", "condition", "procedure", "table_row", "option", "behaviour"}


def squash(text: str) -> str:
    """Collapse whitespace and join words hyphenated across line breaks."""
    text = re.sub(r"(\w)-\s*\n\s*(\w)", r"\1\2", text)
    text = text.replace("\u00ad", "")
    for a, b in (("\u2019", "'"), ("\u2018", "'"), ("\u201c", '"'), ("\u201d", '"'),
                 ("\ufb01", "fi"), ("\ufb02", "fl"), ("\ufb00", "ff"), ("\u2013", "-"), ("\u2014", "-")):
        text = text.replace(a, b)
    return re.sub(r"\s+", " ", text).strip()


def sources() -> set[str]:
    names = set()
    for line in (HERE / "SOURCES.md").read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 4 and re.fullmatch(r"[0-9a-f]{64}", cells[3]):
            names.add(cells[1])
    return names


def check_file(path: Path, pdf_dir: Path, pages: dict) -> tuple[list[str], list[dict]]:
    import pymupdf

    errors: list[str] = []
    rows: list[dict] = []
    allowed = sources()
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path.name}:{n}"
        try:
            q = json.loads(line)
        except json.JSONDecodeError as exc:
            errors.append(f"{where}: not JSON ({exc})")
            continue
        doc = q.get("document")
        if doc not in allowed:
            errors.append(f"{where}: document {doc!r} is not in SOURCES.md")
            continue
        if doc not in pages:
            pages[doc] = [p.get_text() for p in pymupdf.open(pdf_dir / doc)]
        text = pages[doc]
        if not str(q.get("question", "")).strip() or not q.get("id"):
            errors.append(f"{where}: id and question are required")
            continue
        if q.get("answerable", True):
            page = q.get("page")
            span = q.get("answer_span", "")
            if not isinstance(page, int) or not 1 <= page <= len(text):
                errors.append(f"{where}: page {page!r} not in 1..{len(text)}")
                continue
            if q.get("kind") not in KINDS:
                errors.append(f"{where}: kind {q.get('kind')!r} not one of {sorted(KINDS)}")
            words = len(span.split())
            if words < 2 or words > 40:
                errors.append(f"{where}: answer_span has {words} words (2..40)")
            if squash(span) not in squash(text[page - 1]):
                errors.append(f"{where}: answer_span not on PDF page {page}: {span[:60]!r}")
            evidence = q.get("evidence", "")
            if squash(evidence) not in squash(text[page - 1]) or squash(span) not in squash(evidence):
                errors.append(f"{where}: evidence must be on page {page} and contain answer_span")
        else:
            near = q.get("near_page")
            if not isinstance(near, int) or not 1 <= near <= len(text):
                errors.append(f"{where}: near_page {near!r} not in 1..{len(text)}")
        rows.append(q)
    return errors, rows


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    pdf_dir = Path(argv[0])
    files = [Path(a) for a in argv[1:]] or sorted((HERE / "questions").glob("*.jsonl"))
    pages: dict = {}
    errors: list[str] = []
    rows: list[dict] = []
    for f in files:
        e, r = check_file(f, pdf_dir, pages)
        errors += e
        rows += r
    ids = Counter(q["id"] for q in rows)
    errors += [f"duplicate id {i}" for i, c in ids.items() if c > 1]
    ans = [q for q in rows if q.get("answerable", True)]
    una = [q for q in rows if not q.get("answerable", True)]
    print(f"{len(ans)} answerable, {len(una)} unanswerable, {len(errors)} errors")
    print("by document:", dict(Counter(q["document"] for q in rows)))
    print("by kind:", dict(Counter(q.get("kind") for q in ans)))
    if ans:
        print(f"paraphrase share: {sum(bool(q.get('paraphrase')) for q in ans) / len(ans):.2f}")
    for e in errors[:50]:
        print(e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
