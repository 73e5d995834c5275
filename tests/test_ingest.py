"""Ingestion as a user sees it: the CLI, real PDFs, real Postgres."""

from __future__ import annotations

import functools
import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from retrieval.store import db
from tests.conftest import DEV_PDFS, run_cli
from tests.pdfgen import LOREM, encrypted_pdf, hidden_text_pdf, image_only_pdf, long_pdf, one_word_headings_pdf, text_pdf

ACS = next(p for p in DEV_PDFS if "ACS" in p.name)
RUN = uuid.uuid4().hex[:8]


def C(name: str) -> str:  # noqa: N802
    """A collection name unique to this test run (the test database may be kept between runs)."""
    return f"{name}-{RUN}"


def _docs(settings, collection: str) -> list[dict]:
    with db.connection(settings) as conn:
        return conn.execute(
            "SELECT d.name, d.page_count, d.chunk_count, "
            "(SELECT count(*) FROM pages p WHERE p.collection = d.collection AND p.document_id = d.id) AS pages, "
            "(SELECT count(*) FROM chunks c WHERE c.collection = d.collection AND c.document_id = d.id) AS chunks "
            "FROM documents d WHERE d.collection = %s ORDER BY d.name", (collection,)).fetchall()


def _orphans(settings) -> int:
    with db.connection(settings) as conn:
        return conn.execute(
            "SELECT (SELECT count(*) FROM pages p WHERE NOT EXISTS (SELECT 1 FROM documents d WHERE "
            "d.collection = p.collection AND d.id = p.document_id)) + (SELECT count(*) FROM chunks c WHERE NOT "
            "EXISTS (SELECT 1 FROM documents d WHERE d.collection = c.collection AND d.id = c.document_id)) AS n"
        ).fetchone()["n"]


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[tuple[str, Path]]:
    """A local HTTP server for URL ingestion (127.0.0.1 only)."""
    root = tmp_path_factory.mktemp("www")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", root
    server.shutdown()


def test_dev_corpus_pages_labels_and_chunk_spans(settings, dev_corpus, embedder):
    with db.connection(settings) as conn:
        docs = {r["name"]: r for r in conn.execute(
            "SELECT id, name, page_count, chunk_count FROM documents WHERE collection = %s", (dev_corpus,))}
        assert {d.name for d in DEV_PDFS} == set(docs)
        assert docs[ACS.name]["page_count"] == 87
        acs = docs[ACS.name]["id"]
        labels = {r["page_no"]: r["label"] for r in conn.execute(
            "SELECT page_no, label FROM pages WHERE collection = %s AND document_id = %s", (dev_corpus, acs))}
        # ACS: printed = PDF index - 8 from PDF p9; roman numerals before; 'i' twice
        assert labels[1] == "i" and labels[2] == "i" and labels[9] == "1" and labels[30] == "22"
        cfr = next(d["id"] for n, d in docs.items() if n.startswith("14-CFR"))
        assert conn.execute("SELECT count(*) AS n FROM pages WHERE collection = %s AND document_id = %s "
                            "AND label IS NOT NULL", (dev_corpus, cfr)).fetchone()["n"] == 0
        pages = {(r["document_id"], r["page_no"]): r for r in conn.execute(
            "SELECT document_id, page_no, text, body_start, body_end FROM pages WHERE collection = %s", (dev_corpus,))}
        chunks = conn.execute("SELECT * FROM chunks WHERE collection = %s", (dev_corpus,)).fetchall()
    assert len(chunks) == sum(d["chunk_count"] for d in docs.values())
    multi = 0
    for c in chunks:
        first = pages[(c["document_id"], c["page_start"])]["text"]
        if c["page_start"] == c["page_end"]:
            assert c["text"] == first[c["char_start"]:c["char_end"]]
        else:
            multi += 1
            last = pages[(c["document_id"], c["page_end"])]["text"]
            head, tail = c["text"].split("\n", 1)[0], c["text"].rsplit("\n", 1)[-1]
            assert first[c["char_start"]:].startswith(head)
            assert last[:c["char_end"]].endswith(tail)
        # the embedder sees the whole chunk: nothing past its 256 word-piece limit
        assert embedder.count_tokens(c["search_text"]) <= embedder.max_tokens
    assert multi > 0, "paragraphs that continue on the next page should make some chunks span pages"


def test_running_headers_kept_in_page_text_but_not_in_chunks(settings, dev_corpus):
    with db.connection(settings) as conn:
        n_pages = conn.execute("SELECT count(*) AS n FROM pages WHERE collection = %s AND text LIKE %s",
                               (dev_corpus, "%VerDate Sep<11>2014%")).fetchone()["n"]
        n_chunks = conn.execute("SELECT count(*) AS n FROM chunks WHERE collection = %s AND text LIKE %s",
                                (dev_corpus, "%VerDate Sep<11>2014%")).fetchone()["n"]
    assert n_pages >= 150  # the CFR machine footer is on every page of the raw text
    assert n_chunks == 0


def test_hidden_text_is_never_ingested(settings, tmp_path):
    pdf = hidden_text_pdf(tmp_path / "tainted.pdf")
    res = run_cli("ingest", str(pdf), "--collection", C("t-hidden"))
    assert res.returncode == 0, res.stderr
    with db.connection(settings) as conn:
        page = conn.execute("SELECT text, hidden_chars FROM pages WHERE collection = %s", (C("t-hidden"),)).fetchone()
        chunk_text = " ".join(r["search_text"] for r in conn.execute(
            "SELECT search_text FROM chunks WHERE collection = %s", (C("t-hidden"),)))
    assert "holding speed is 200 knots" in page["text"]
    assert "Visible caption on a blue box" in page["text"]  # white text on a dark box is visible
    for secret in ("WHITEONWHITE", "TINYFONT", "OUTSIDEPAGE", "BLACKONBLACK", "900 knots"):
        assert secret not in page["text"] and secret not in chunk_text
    assert page["hidden_chars"] > 0


def test_generated_labels_headers_and_footers(settings, tmp_path):
    bodies = [LOREM.format(n=i * 100) + f"Section {i} covers topic number {i * 7}." for i in range(1, 7)]
    pdf = text_pdf(tmp_path / "labelled.pdf", bodies, header="ACME Flight Manual Revision 4", footer=True,
                   labels=True)
    assert run_cli("ingest", str(pdf), "--collection", C("t-labels")).returncode == 0
    with db.connection(settings) as conn:
        rows = conn.execute("SELECT page_no, label, text FROM pages WHERE collection = %s ORDER BY page_no",
                            (C("t-labels"),)).fetchall()
        chunks = [r["text"] for r in conn.execute("SELECT text FROM chunks WHERE collection = %s", (C("t-labels"),))]
    assert [r["label"] for r in rows] == ["i", "ii", "A-1", "A-2", "A-3", "A-4"]
    assert all("ACME Flight Manual" in r["text"] and f"Page {r['page_no']}" in r["text"] for r in rows)
    assert chunks and not any("ACME Flight Manual" in c or "Page 3" in c for c in chunks)
    assert any("topic number 21" in c for c in chunks)


def test_one_word_titles_set_larger_than_the_body_head_their_sections(settings, tmp_path):
    """Software manuals title sections with one word; each passage carries its own section's title
    (it is embedded with the passage and shown as its heading), not the last two-word one."""
    pdf = one_word_headings_pdf(tmp_path / "manual.pdf")
    assert run_cli("ingest", str(pdf), "--collection", C("t-heads")).returncode == 0
    with db.connection(settings) as conn:
        rows = conn.execute("SELECT text, context FROM chunks WHERE collection = %s ORDER BY char_start",
                            (C("t-heads"),)).fetchall()
    context = {r["context"] for r in rows if "100 points" in r["text"] and "mechanism" not in r["text"]}
    assert context == {"Samples"}
    assert all(r["context"] in ("Offsets", "Samples") for r in rows)  # the body-size bold "Risk" titles nothing


def test_reingest_same_bytes_is_a_noop_and_new_version_replaces(settings, tmp_path):
    v1 = text_pdf(tmp_path / "manual.pdf", ["Version one says the flap speed is 95 knots. " * 5,
                                            "Second page of version one about oil pressure. " * 5])
    first = run_cli("ingest", str(v1), "--collection", C("t-version"), "--json")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["results"][0]["status"] == "ingested"
    before = _docs(settings, C("t-version"))

    again = run_cli("ingest", str(v1), "--collection", C("t-version"))
    assert again.returncode == 0
    assert "unchanged" in again.stdout and "nothing to do" in again.stdout
    assert _docs(settings, C("t-version")) == before

    v2 = text_pdf(tmp_path / "manual.pdf", ["Version two says the flap speed is 110 knots. " * 5])
    res = run_cli("ingest", str(v2), "--collection", C("t-version"), "--json")
    assert json.loads(res.stdout)["results"][0]["status"] == "replaced"
    after = _docs(settings, C("t-version"))
    assert len(after) == 1 and after[0]["pages"] == after[0]["page_count"] == 1
    with db.connection(settings) as conn:
        texts = " ".join(r["text"] for r in conn.execute("SELECT text FROM chunks WHERE collection = %s", (C("t-version"),)))
    assert "110 knots" in texts and "95 knots" not in texts
    assert _orphans(settings) == 0


def test_a_new_edition_embeds_only_the_passages_whose_text_changed(settings, tmp_path):
    pages = [f"Section {n}. " + f"Paragraph {n} explains checklist item {n} for the engine run-up. " * 30
             for n in range(1, 9)]
    v1 = text_pdf(tmp_path / "edition.pdf", pages)
    first = json.loads(run_cli("ingest", str(v1), "--collection", C("t-edition"), "--json").stdout)["results"][0]
    assert first["status"] == "ingested" and first["reused"] == 0

    def vectors() -> dict[str, tuple[str, str]]:
        with db.connection(settings) as conn:
            return {r["text"]: (str(r["embedding"]), r["windows"]) for r in conn.execute(
                "SELECT c.text, c.embedding, (SELECT string_agg(s.embedding::text, ';' ORDER BY s.sentence_no) "
                "FROM chunk_sentences s WHERE s.collection = c.collection AND s.chunk_id = c.id) AS windows "
                "FROM chunks c WHERE c.collection = %s", (C("t-edition"),))}

    before = vectors()
    changed = pages[:5] + [pages[5].replace("checklist item 6", "revised checklist item 6")] + pages[6:]
    v2 = text_pdf(tmp_path / "edition.pdf", changed)
    res = run_cli("ingest", str(v2), "--collection", C("t-edition"))
    assert res.returncode == 0, res.stderr
    assert "passages unchanged, not embedded again" in res.stdout
    after = vectors()
    kept = [t for t in after if t in before]
    assert kept and len(kept) < len(after)  # the changed page's passages are new, the others kept
    assert all(after[t] == before[t] for t in kept)  # bit for bit, windows included
    assert any("revised checklist item 6" in t for t in after if t not in before)
    assert _orphans(settings) == 0


def test_bad_inputs_each_get_one_clear_line_and_store_nothing(settings, tmp_path, served):
    base, root = served
    notpdf = tmp_path / "notes.pdf"
    notpdf.write_text("just some notes, not a PDF")
    corrupt = tmp_path / "corrupt.pdf"
    corrupt.write_bytes(b"%PDF-1.7\n" + os.urandom(4000))
    empty = tmp_path / "empty.pdf"
    empty.write_bytes(b"")
    enc = encrypted_pdf(tmp_path / "locked.pdf")
    scan = image_only_pdf(tmp_path / "scan.pdf")
    good = text_pdf(tmp_path / "good.pdf", ["A good page about carburetor icing and heat. " * 6])
    missing = tmp_path / "missing.pdf"
    served_pdf = text_pdf(root / "remote.pdf", ["Remote page about altimeter settings. " * 6])
    args = [str(notpdf), str(corrupt), str(empty), str(enc), str(scan), str(good), str(missing),
            f"{base}/nothing-here.pdf", "http://127.0.0.1:9/refused.pdf", f"{base}/{served_pdf.name}"]
    res = run_cli("ingest", *args, "--collection", C("t-bad"))
    assert res.returncode == 1
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 8, res.stderr
    expect = {notpdf: "not a PDF", corrupt: "corrupt", empty: "empty file", enc: "encrypted",
              scan: "not even by OCR", missing: "no such file"}
    for path, words in expect.items():
        assert any(str(path) in e and words in e for e in errors), (path, res.stderr)
    assert any("nothing-here.pdf" in e and "HTTP 404" in e for e in errors)
    assert any("refused.pdf" in e and "download failed" in e for e in errors)
    # the next input is read ahead while one is embedded, yet the lines come in the order given
    failing = [a for a in args if not a.endswith(("good.pdf", "remote.pdf"))]
    assert [next(i for i, a in enumerate(failing) if Path(a).name in e) for e in errors] == list(range(8)), res.stderr
    assert [d["name"] for d in _docs(settings, C("t-bad"))] == ["good.pdf", "remote.pdf"]
    with db.connection(settings) as conn:
        url = conn.execute("SELECT url FROM documents WHERE collection = %s AND name = 'remote.pdf'",
                           (C("t-bad"),)).fetchone()
    assert url["url"] == f"{base}/remote.pdf"
    assert _orphans(settings) == 0


def test_oversize_file_is_refused(settings, tmp_path):
    big = long_pdf(tmp_path / "big.pdf", 5)
    res = run_cli("ingest", str(big), "--collection", C("t-size"), env={"CHAPTERVERSE_MAX_FILE_MB": "0.001"})
    assert res.returncode == 1
    assert "over the" in res.stderr and "CHAPTERVERSE_MAX_FILE_MB" in res.stderr
    assert _docs(settings, C("t-size")) == []


def test_directory_input_and_quiet_progress_off_a_terminal(settings, tmp_path):
    folder = tmp_path / "folder"
    folder.mkdir()
    for i in range(2):
        text_pdf(folder / f"doc{i}.pdf", [f"Document {i} explains the pitot heat checklist item {i}. " * 6])
    (folder / "readme.txt").write_text("ignored")
    res = run_cli("ingest", str(folder), "--collection", C("t-dir"))
    assert res.returncode == 0, res.stderr
    assert [d["name"] for d in _docs(settings, C("t-dir"))] == ["doc0.pdf", "doc1.pdf"]
    assert "%|" not in res.stderr and "it/s" not in res.stderr  # no progress bars when not on a terminal


def test_docs_and_remove(settings, tmp_path):
    pdf = text_pdf(tmp_path / "gone.pdf", ["This page is about to be removed from the index. " * 6])
    assert run_cli("ingest", str(pdf), "--collection", C("t-rm")).returncode == 0
    listed = json.loads(run_cli("docs", "--json", "--collection", C("t-rm")).stdout)["documents"]
    assert [d["name"] for d in listed] == ["gone.pdf"] and listed[0]["pages"] == 1
    assert run_cli("remove", "gone.pdf", "--collection", C("t-rm")).returncode == 0
    assert _docs(settings, C("t-rm")) == []
    again = run_cli("remove", "gone.pdf", "--collection", C("t-rm"))
    assert again.returncode == 1 and "no document named" in again.stderr
    # the same name in two collections: removing it needs --collection
    for coll in (C("t-rm-a"), C("t-rm-b")):
        assert run_cli("ingest", str(pdf), "--collection", coll).returncode == 0
    ambiguous = run_cli("remove", "gone.pdf")
    assert ambiguous.returncode != 0 and "several collections" in ambiguous.stderr
    assert len(_docs(settings, C("t-rm-a"))) == len(_docs(settings, C("t-rm-b"))) == 1
    assert _orphans(settings) == 0


def test_failure_while_writing_leaves_old_version_intact(settings, embedder, tmp_path, monkeypatch):
    from ingest import pipeline, store
    from ingest.sources import read_path

    v1 = text_pdf(tmp_path / "atomic.pdf", ["The original oil capacity is 8 quarts. " * 6])
    pipeline.ingest_source(settings, embedder, read_path(str(v1), 10**8), C("t-atomic"), quiet=True)
    before = _docs(settings, C("t-atomic"))
    v2 = text_pdf(tmp_path / "atomic.pdf", ["The revised oil capacity is 6 quarts. " * 6 + "More. " * 300,
                                            "Another revised page. " * 40])
    real_write = store.write_document

    def broken_write(conn, **kw):  # vectors of the wrong dimension make the chunk COPY fail mid-way
        kw["vectors"] = kw["vectors"][:, :10]
        return real_write(conn, **kw)

    monkeypatch.setattr(store, "write_document", broken_write)
    with pytest.raises(Exception):
        pipeline.ingest_source(settings, embedder, read_path(str(v2), 10**8), C("t-atomic"), quiet=True)
    assert _docs(settings, C("t-atomic")) == before
    assert _orphans(settings) == 0


def test_killed_inside_the_write_transaction_leaves_nothing(settings, tmp_path):
    """Kill the ingest process while its transaction has inserted the document row and its pages but
    waits to write the chunks: nothing of the document may become visible. (A failure while
    replacing an older version is covered by test_failure_while_writing_leaves_old_version_intact.)"""
    coll = C("t-kill")
    v2 = long_pdf(tmp_path / "killed.pdf", 12)
    with db.connection(settings) as blocker, db.connection(settings) as watcher:
        with blocker.transaction():
            blocker.execute("LOCK TABLE chunks IN SHARE MODE")  # the ingest's COPY into chunks must wait
            proc = subprocess.Popen([sys.executable, "-m", "retrieval.cli", "ingest", str(v2), "--collection", coll],
                                    env=os.environ.copy(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.time() + 240
            waiting = None
            while time.time() < deadline and proc.poll() is None:
                waiting = watcher.execute(
                    "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'COPY chunks%%'"
                ).fetchone()
                if waiting:
                    break
                time.sleep(0.2)
            assert waiting, "the ingest never reached its write transaction"
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        # the lock is released: the orphaned backend finds its client gone and rolls back
        while watcher.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (waiting["pid"],)).fetchone():
            time.sleep(0.1)
    assert _docs(settings, coll) == []
    assert _orphans(settings) == 0


def test_url_check_applies_to_redirects(served):
    """A URL checker sees the redirect target too (the Slack bot uses this to stay off private hosts)."""
    import http.server as hs

    base, root = served
    text_pdf(root / "target.pdf", ["The redirect target page. " * 10])

    class Redirect(hs.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(302)
            self.send_header("Location", f"{base}/target.pdf")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = hs.ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        from ingest.sources import InputError, fetch_url

        first = f"http://127.0.0.1:{server.server_address[1]}/start.pdf"
        seen: list[str] = []

        def check(url: str) -> str | None:
            seen.append(url)
            return "refused: private target" if url.startswith(base) else None

        with pytest.raises(InputError, match="private target"):
            fetch_url(first, 10**7, 10, check_url=check)
        assert seen == [first, f"{base}/target.pdf"]
        assert fetch_url(first, 10**7, 10).name == "target.pdf"  # without a checker, redirects are followed
    finally:
        server.shutdown()
