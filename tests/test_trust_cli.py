"""A signed URL's secret appears nowhere: the real `chapterverse` command ingests
``http://127.0.0.1:<port>/m.pdf?X-Amz-Signature=<secret>`` from a local HTTP server, answers from it
and lists it; the secret is in no text column of any table, no output and no log line, and the
citation links use the URL without its query. Changes from the command line are recorded too."""

from __future__ import annotations

import json
import uuid

import psycopg

from tests.conftest import run_cli
from tests.leaks import database_hits, text_of
from tests.test_bot_e2e import handbook_pdf
from tests.test_bot_fetch import Site


def test_signed_url_secret_is_stored_and_shown_nowhere_and_links_drop_the_query(settings) -> None:
    tag = uuid.uuid4().hex[:8]
    secret = f"secret{tag}"
    coll, name = f"trust-cli-{tag}", f"signed-{tag}.pdf"
    pdf = handbook_pdf("The maximum aerotow speed of the Zephyr glider is 81 knots.")
    site = Site("127.0.0.1", 0, {f"/{name}": (200, {"Content-Type": "application/pdf"}, pdf)})
    base = f"http://127.0.0.1:{site.port}/{name}"
    signed = f"{base}?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA{tag}&X-Amz-Signature={secret}"
    env = {"CHAPTERVERSE_SLACK_ALLOW_PRIVATE_URLS": "1"}
    db_url = settings.db.url.get_secret_value()
    try:
        ingested = run_cli("-v", "ingest", signed, "--collection", coll, "--json", env=env)
        assert ingested.returncode == 0, ingested.stderr
        result = json.loads(ingested.stdout)["results"][0]
        assert result["status"] == "ingested" and result["origin"] == base, result
        # a download that fails quotes the URL without its query
        missing = run_cli("ingest", f"http://127.0.0.1:{site.port}/gone.pdf?X-Amz-Signature={secret}",
                          "--collection", coll, "--json", env=env)
        assert missing.returncode == 1
        assert f"http://127.0.0.1:{site.port}/gone.pdf: download failed: HTTP 404" in missing.stderr

        asked = run_cli("-v", "ask", "What is the maximum aerotow speed of the Zephyr glider?", "--collection", coll,
                        "--json", env=env)
        assert asked.returncode == 0, asked.stderr
        answer = json.loads(asked.stdout)
        assert not answer["refusal"] and "81 knots" in json.dumps(answer), answer
        links = [c["url"] for c in answer["citations"]]
        assert links and all(u.startswith(f"{base}#page=") for u in links), links
        listed = run_cli("docs", "--collection", coll, "--json", env=env)
        doc = json.loads(listed.stdout)["documents"][0]
        assert doc["url"] == base and doc["source"] == base and doc["added_via"] == "cli" and doc["added_by"]

        outputs = [ingested.stdout, ingested.stderr, missing.stdout, missing.stderr, asked.stdout, asked.stderr,
                   listed.stdout, listed.stderr]
        assert secret not in text_of(*outputs)
        assert "X-Amz" not in text_of(*outputs)
        assert database_hits(db_url, secret) == []
        assert database_hits(db_url, f"AKIA{tag}") == []
        with psycopg.connect(db_url, row_factory=psycopg.rows.dict_row) as conn:
            audit = conn.execute("SELECT action, document, outcome, actor, via, workspace FROM document_audit "
                                 "WHERE collection = %s ORDER BY id", (coll,)).fetchall()
        assert [(a["action"], a["document"], a["outcome"], a["via"]) for a in audit] == \
            [("ingest", name, "ingested", "cli")]
        assert audit[0]["actor"] == doc["added_by"] and "@" in audit[0]["actor"]

        removed = run_cli("remove", name, "--collection", coll, env=env)
        assert removed.returncode == 0, removed.stderr
        with psycopg.connect(db_url, row_factory=psycopg.rows.dict_row) as conn:
            actions = [r["action"] for r in conn.execute(
                "SELECT action FROM document_audit WHERE collection = %s ORDER BY id", (coll,))]
        assert actions == ["ingest", "remove"]
    finally:
        site.close()
        with psycopg.connect(db_url, autocommit=True) as conn:
            conn.execute("DELETE FROM documents WHERE collection = %s", (coll,))
