"""Issue 39, third hostile round: what a document or a user wrote reaches a terminal or Slack as text,
never as control codes; zero-width characters and soft hyphens do not hide a word from search."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pymupdf

from bot.render import Searched, render_answer, render_refusal
from retrieval.answer.ask import ask
from retrieval.search.search import search
from retrieval.text.printable import escaped_json, one_line, printable
from retrieval.text.textnorm import search_text
from tests.conftest import run_cli

UNICODE_FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"  # encodes U+200B and U+00AD as themselves
ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x1b[H\x9b31m\u202e"


def _pdf(path: Path, title: str, body: str, label: str | None = None, font: str | None = None) -> None:
    doc = pymupdf.open()
    for i in range(2):
        page = doc.new_page(width=612, height=792)
        text = body if i == 1 else "Zephyr glider general description, cockpit layout and checklists. " * 3
        if font:
            page.insert_font(fontname="F0", fontfile=font)
        page.insert_textbox(pymupdf.Rect(72, 72, 540, 720), text, fontsize=11, fontname="F0" if font else "helv")
    if label is not None:
        doc.set_page_labels([{"startpage": 0, "prefix": label, "style": "D", "firstpagenum": 1}])
    doc.set_metadata({"title": title})
    doc.save(path)
    doc.close()


def test_printable_shows_controls_and_keeps_text() -> None:
    assert printable("a\x1b[2Jb\nc\td") == "a\\x1b[2Jb\nc\td"
    assert printable("\x9b\u202e\r\x00") == "\\x9b\\u202e\\x0d\\x00"
    assert one_line("Title\nwith\tbreaks\x1b") == "Title with breaks\\x1b"
    assert printable("Zephyr – 81 knots “quoted” ﬁ") == "Zephyr – 81 knots “quoted” ﬁ"  # ordinary text untouched
    dumped = escaped_json(json.dumps({"t": "x\x9by\u202ez\x7f"}, ensure_ascii=False))
    assert json.loads(dumped) == {"t": "x\x9by\u202ez\x7f"} and "\x9b" not in dumped and "\u202e" not in dumped


def test_escape_codes_in_a_title_name_and_label_never_reach_the_terminal(settings, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    coll = f"esc-{tag}"
    pdf = tmp_path / f"evil\x1b[2J{tag}.pdf"
    _pdf(pdf, f"Zephyr {ESCAPES} Manual", "The maximum aerotow speed of the Zephyr glider is 81 knots. " * 3,
         label=f"\x1b]0;x\x07L")
    ingested = run_cli("ingest", str(pdf), "--collection", coll)
    assert ingested.returncode == 0, ingested.stderr
    runs = [ingested,
            run_cli("search", "Zephyr aerotow speed", "--collection", coll),
            run_cli("ask", "What is the maximum aerotow speed of the Zephyr glider?", "--collection", coll),
            run_cli("docs", "--collection", coll),
            run_cli("search", "Zephyr aerotow speed", "--collection", coll, "--json"),
            run_cli("ask", f"What is the aerotow speed{ESCAPES}?", "--collection", coll)]
    for r in runs:
        assert r.returncode == 0, r.stderr
        for out in (r.stdout, r.stderr):
            assert not any(c in out for c in "\x1b\x07\x9b\u202e"), (r.args, out)
    asked = runs[2].stdout
    assert "81 knots" in asked and "]0;pwned" in asked  # the title's text is shown; its controls never
    from retrieval.answer.answer_view import shown_title  # the stored title has none (ingest.pdf.document_title);
    assert shown_title("x.pdf", {"x.pdf": f"Zephyr {ESCAPES}"}).startswith("Zephyr \\x1b]0;pwned")  # any other: escaped
    assert json.loads(runs[4].stdout)["results"], runs[4].stdout


def test_escape_codes_never_reach_a_slack_message(settings, embedder, tmp_path: Path) -> None:
    from ingest.pipeline import ingest_source
    from ingest.sources import read_path

    tag = uuid.uuid4().hex[:8]
    coll = f"esc-slack-{tag}"
    pdf = tmp_path / f"slack{tag}.pdf"
    _pdf(pdf, f"Zephyr {ESCAPES} Manual", "The maximum aerotow speed of the Zephyr glider is 81 knots. " * 3)
    ingest_source(settings, embedder, read_path(str(pdf), 10_000_000), coll, quiet=True)
    answer = ask(settings, "What is the maximum aerotow speed of the Zephyr glider?", collections=[coll],
                 answerer="extractive")
    assert not answer.refusal
    titles = {answer.citations[0].document: f"Zephyr {ESCAPES} Manual"}
    refusal = ask(settings, f"How do I bake bread{ESCAPES}?", collections=[coll], answerer="extractive")
    messages = render_answer(answer, turn_id=1, searched=Searched([coll], [answer.citations[0].document], titles)) \
        + render_refusal(refusal, searched=Searched([coll], [answer.citations[0].document], titles))
    text = json.dumps([(m.text, m.blocks) for m in messages], ensure_ascii=False)
    assert "81 knots" in text
    assert not any(c in text for c in "\x1b\x07\x9b\u202e"), text


def test_zero_width_characters_and_soft_hyphens_do_not_hide_a_word(settings, embedder, tmp_path: Path) -> None:
    from ingest.pipeline import ingest_source
    from ingest.sources import read_path

    assert search_text("pass\u200bword soft\u00adhyphen jo\u2060ined \ufeffbom") == "password softhyphen joined bom"
    tag = uuid.uuid4().hex[:8]
    coll = f"zw-{tag}"
    pdf = tmp_path / f"zw{tag}.pdf"
    _pdf(pdf, "Zephyr Ops", "Reset the avionics pass\u200bword with the key switch. "
         "Xylophonic trim\u00adtab rigging is checked daily. " * 2, font=UNICODE_FONT)
    with pymupdf.open(pdf) as doc:  # the page's text holds them, as the reported PDF's did
        assert "pass\u200bword" in doc[1].get_text() and "trim\u00adtab" in doc[1].get_text()
    ingest_source(settings, embedder, read_path(str(pdf), 10_000_000), coll, quiet=True)

    def keyword_texts(query: str) -> list[str]:
        res = search(settings, query, k=5, collections=[coll])
        return [p.text for p in res.results if p.stages.keyword_rank is not None]

    # the only words the query shares with the document are the ones a zero-width character split
    assert any("pass\u200bword" in t for t in keyword_texts("password"))
    assert any("trim\u00adtab" in t for t in keyword_texts("trimtab"))
    assert any("pass\u200bword" in t for t in keyword_texts("pass\u200bword"))  # the query holds one too


# --- item 10: the command line says what it did, and nothing it did not ------------------------------
def test_bare_command_groups_print_their_help_and_no_error() -> None:
    for args in ((), ("collections",), ("db",), ("eval",)):
        r = run_cli(*args)
        assert r.returncode == 0, (args, r.stderr)
        assert "Usage" in r.stdout + r.stderr and "error" not in r.stderr, (args, r.stderr)


def test_ask_takes_document_like_search(settings, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    coll = f"askdoc-{tag}"
    zephyr, other = tmp_path / f"zephyr-{tag}.pdf", tmp_path / f"other-{tag}.pdf"
    _pdf(zephyr, "Zephyr Glider Manual", "The maximum aerotow speed of the Zephyr glider is 81 knots. " * 3)
    _pdf(other, "Kestrel Tug Manual", "The Kestrel tug engine oil is changed every 50 hours of operation. " * 3)
    assert run_cli("ingest", str(zephyr), str(other), "--collection", coll).returncode == 0
    q = "What is the maximum aerotow speed of the Zephyr glider?"
    answered = run_cli("ask", q, "--collection", coll, "--document", f"zephyr-{tag}", "--json")
    assert answered.returncode == 0, answered.stderr
    cited = {c["document"] for c in json.loads(answered.stdout)["citations"]}
    assert cited == {f"zephyr-{tag}.pdf"}, answered.stdout
    elsewhere = run_cli("ask", q, "--collection", coll, "--document", "Kestrel Tug Manual")
    assert elsewhere.returncode == 0 and "81 knots" not in elsewhere.stdout, elsewhere.stdout
    assert f"Searched the document other-{tag}.pdf in the collection {coll}." in elsewhere.stdout, elsewhere.stdout
    unknown = run_cli("ask", q, "--collection", coll, "--document", "zephyr-manul")
    assert unknown.returncode != 0 and f"zephyr-{tag}" in unknown.stderr, unknown.stderr
    listed = run_cli("search", "aerotow speed", "--collection", coll)
    assert "pp. 1–2 · score" in listed.stdout, listed.stdout  # a passage that runs onto page 2 says so
    assert "order: " in listed.stdout and "reranker's rank combined with the keyword and dense ranks" in listed.stdout


def test_a_refusal_after_a_named_document_says_both_steps() -> None:
    from retrieval.answer.answer_view import as_text
    from retrieval.models import Answer

    refused = Answer(question="What does the gretl guide say about tea?", refusal=True, reason="Not found.",
                     named_documents=["gretl-guide.pdf"])
    text = as_text(refused, None, None)
    assert "Searched gretl-guide.pdf first (the question names it by its title), then every collection." in text
    assert "Searched every collection." not in text and text.count("Searched") == 1
