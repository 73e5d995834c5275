"""Recorded quotes misquoted on purpose: what verification keeps, snaps and drops (issue 38, item 2).

    CHAPTERVERSE_HOME=… python -m chapterverse_lab.perturb --replies tests/replies --collection dev \\
        --out results/verify_perturbed.json

Every citation in the stand-in model's recorded replies whose page is in ``--collection`` and whose quote
verifies on it is altered in each of the ways below, then verified (``retrieval.answer.verify``) against
its page and the next one (a passage that runs onto the next page shows both), before this change's
snapping (the module as of ``--before``) and after. Harmless kinds should be kept without a repair call;
kinds that change meaning must never verify ("meaning-changing snaps": 0).

Harmless: the page number off by one (to the other shown page), upper case, curly quotes and en dashes,
doubled spaces and line breaks, a quote cut at a word the page breaks across lines ("… con-"); and, cut from
the pages themselves (``dash_spans``), spans that start or end at an em dash between two words.
Meaning-changing: a digit changed, a "not"/"no" dropped or added, one word replaced by another.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import subprocess
import sys
import types
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from retrieval.answer.verify import WORD_DASHES

ROOT = Path(__file__).resolve().parents[2]
_BROKEN = re.compile(r"([^\W\d_]+)-[ \t]*\n[ \t]*([^\W\d_]+)")


def _old_verify(rev: str) -> types.ModuleType:
    """``retrieval.answer.verify`` as it was at ``rev``, loaded beside today's."""
    source = subprocess.run(["git", "show", f"{rev}:retrieval/answer/verify.py"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    spec = importlib.util.spec_from_loader("verify_before", loader=None)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["verify_before"] = module
    exec(compile(source, f"{rev}:retrieval/answer/verify.py", "exec"), module.__dict__)  # noqa: S102
    return module


def _digit_changed(q: str) -> str | None:
    m = re.search(r"\d", q)
    return None if m is None else q[:m.start()] + str((int(m.group()) + 1) % 10) + q[m.end():]


def _negation_flipped(q: str) -> str | None:
    for pat, rep in ((r"\bnot ", ""), (r"\bno ", ""), (r"\bmust\b", "must not"), (r"\bmay\b", "may not"),
                     (r"\bis\b", "is not")):
        if re.search(pat, q):
            return re.sub(pat, rep, q, count=1)
    return None


def _word_replaced(q: str) -> str | None:
    words = [w for w in re.findall(r"\b[a-z]{5,}\b", q)]
    return None if not words else re.sub(rf"\b{re.escape(words[0])}\b", "aircraft" if words[0] != "aircraft"
                                         else "airplane", q, count=1)


HARMLESS: dict[str, Callable[[str], str | None]] = {
    "upper case": str.upper,
    "curly quotes and en dashes": lambda q: q.replace("'", "\u2019").replace('"', "\u201c").replace("-", "\u2013"),
    "doubled spaces and line breaks": lambda q: q.replace(" ", "  ", 3).replace(" ", "\n", 1),
}
CHANGING: dict[str, Callable[[str], str | None]] = {
    "a digit changed": _digit_changed, "negation dropped or added": _negation_flipped,
    "a word replaced": _word_replaced,
}


def _line_cut(quote: str, raw: str) -> str | None:
    """The quote cut just after the hyphen of a word the page breaks across lines inside the quote's own
    span ("… con-"), with at least four words before it; None when the span breaks no word."""
    from retrieval.answer.verify import locate  # noqa: PLC0415

    m = locate(quote, raw)
    if m is None:
        return None
    span = raw[m.start:m.end]
    for b in _BROKEN.finditer(span):
        head = " ".join(span[:b.start(1) + len(b.group(1)) + 1].split())
        if len(head.split()) >= 4:
            return head
    return None


_WORD_DASH = re.compile(rf"(?<=[^\W\d_])[{WORD_DASHES}](?=[^\W\d_])")  # the dashes verify reads as word gaps


DASH_SPAN_WORDS = 6  # words a span cut at a dash takes from the page


def dash_spans(pages: dict[tuple[str, int], str], before: types.ModuleType) -> dict[str, int]:
    """Spans that start or end at an em dash between two words ("properties—this is …"): for each
    such dash on the pages, the ``DASH_SPAN_WORDS`` words after it and those before it, verified on their
    page before and after. Few recorded quotes run across such a dash, so the spans are cut from the
    pages: what a model copying the page exactly from or to the dash sends."""
    from retrieval.answer import verify as after  # noqa: PLC0415

    tally = Counter()
    for (document, page_no), text in pages.items():
        for d in _WORD_DASH.finditer(text):
            after_words = text[d.end():].split()[:DASH_SPAN_WORDS]
            before_words = text[:d.start()].split()[-DASH_SPAN_WORDS:]
            for words in (after_words, before_words):
                if len(words) < DASH_SPAN_WORDS:
                    continue
                quote = " ".join(words)
                tally["tried"] += 1
                for label, module in (("before", before), ("after", after)):
                    claim = module.Claim(document, page_no, quote)
                    tally[f"verified_{label}"] += module.verify_claim(
                        claim, [module.PageText(document, page_no, text)]).ok
    return dict(tally)


def measure(replies: Path, pages: dict[tuple[str, int], str], before: types.ModuleType) -> dict:
    from retrieval.answer import verify as after  # noqa: PLC0415

    counts: dict[str, Counter] = {}
    meaning_snaps: list[dict] = []
    recorded = 0
    for path in sorted(replies.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            rec = json.loads(line) if line.strip() else None
            for c in (rec or {}).get("reply", {}).get("citations", []):
                page = pages.get((c["document"], c["page"]))
                if page is None:
                    continue
                nxt = pages.get((c["document"], c["page"] + 1))
                shown = [after.PageText(c["document"], c["page"], page)] + (
                    [after.PageText(c["document"], c["page"] + 1, nxt)] if nxt is not None else [])
                if not after.verify_claim(after.Claim(c["document"], c["page"], c["quote"]), shown).ok:
                    continue
                recorded += 1
                kinds: dict[str, tuple[str | None, int, bool]] = {
                    name: (f(c["quote"]), c["page"], False) for name, f in HARMLESS.items()}
                kinds["cut at a word broken across lines"] = (_line_cut(c["quote"], page), c["page"], False)
                if nxt is not None:
                    kinds["page number off by one"] = (c["quote"], c["page"] + 1, False)
                kinds |= {name: (f(c["quote"]), c["page"], True) for name, f in CHANGING.items()}
                for name, (quote, cited, changes) in kinds.items():
                    if quote is None or quote == c["quote"] and cited == c["page"]:
                        continue
                    tally = counts.setdefault(name, Counter())
                    tally["tried"] += 1
                    ok = {}
                    for label, module in (("before", before), ("after", after)):
                        shown_m = [module.PageText(p.document, p.page, p.text) for p in shown]
                        ok[label] = module.verify_claim(module.Claim(c["document"], cited, quote), shown_m).ok
                        tally[f"verified_{label}"] += ok[label]
                    if changes and ok["after"]:
                        meaning_snaps.append({"kind": name, "quote": quote, "page": c["page"],
                                              "verified_before": ok["before"]})
    counts["starts or ends at an em dash between words (cut from the pages)"] = Counter(dash_spans(pages, before))
    snaps = [m for m in meaning_snaps if not m["verified_before"]]
    return {"recorded_quotes_used": recorded,
            "kinds": {k: dict(v) for k, v in counts.items()},
            "meaning_changing_snaps": len(snaps),  # verified only because of this change's snapping: must be 0
            "meaning_changing_snap_examples": snaps[:10],
            # verified before and after: the altered quote is itself a span of the page ("No person may …"
            # without "No" is "person may …"), what checking words can never catch
            "meaning_changing_but_on_the_page": [m for m in meaning_snaps if m["verified_before"]][:10]}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replies", type=Path, default=ROOT / "tests" / "replies")
    ap.add_argument("--collection", default="dev")
    ap.add_argument("--before", default="f35b8ad", help="the commit whose verify.py is 'before'")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "verify_perturbed.json")
    opts = ap.parse_args(argv)
    from chapterverse_lab.results import write_result  # noqa: PLC0415
    from retrieval.settings import get_settings  # noqa: PLC0415
    from retrieval.store import db  # noqa: PLC0415

    settings = get_settings()
    db.ready(settings)
    with db.connection(settings) as conn:
        rows = conn.execute("SELECT d.name, p.page_no, p.text FROM pages p JOIN documents d ON "
                            "(d.collection, d.id) = (p.collection, p.document_id) WHERE p.collection = %s",
                            (opts.collection,)).fetchall()
    pages = {(r["name"], r["page_no"]): r["text"] for r in rows}
    result = measure(opts.replies, pages, _old_verify(opts.before))
    result = {"command": "python -m chapterverse_lab.perturb " + " ".join(argv if argv is not None else sys.argv[1:]),
              "what": __doc__.split("\n\n")[2].replace("\n", " "), "before": opts.before, **result}
    write_result(opts.out, result)
    for name, t in result["kinds"].items():
        print(f"{name}: {t['tried']} tried, verified before {t['verified_before']}, after {t['verified_after']}")
    print(f"meaning-changing snaps: {result['meaning_changing_snaps']} (altered quotes that are themselves on "
          f"the page: {len(result['meaning_changing_but_on_the_page'])}); wrote {opts.out}")


if __name__ == "__main__":
    main()
