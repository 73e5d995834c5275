"""One question, one session: an extractive question costs a handful of statements on one pooled
connection (was about 45 over about 10 checkouts), counted on the real test database."""

from __future__ import annotations

import psycopg
import pytest

from retrieval.answer.ask import ask

MAX_STATEMENTS = 7  # liveness check, named-document titles, both legs, fetch + sentence scores, pages, statistics x2


@pytest.fixture()
def counted(monkeypatch):
    sent: list[str] = []
    execute = psycopg.Cursor.execute

    def counting(self, query, *args, **kwargs):
        sent.append(query if isinstance(query, str) else repr(query))
        return execute(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", counting)
    return sent


def test_an_extractive_question_is_a_few_statements_on_one_connection(settings, dev_corpus, counted) -> None:
    ask(settings, "How much fuel must be on board for a VFR flight at night?", collections=[dev_corpus],
        answerer="extractive")  # warm: pool, named-document titles, HNSW settings
    counted.clear()
    answer = ask(settings, "What is the maximum airspeed below 10,000 feet MSL?", collections=[dev_corpus],
                 answerer="extractive")
    assert answer.citations or answer.reason, "an answer or a refusal with its reason"
    checks = [q for q in counted if q == ""]  # the pool's liveness check: one per checkout
    assert len(checks) <= 1, counted
    assert len(counted) <= MAX_STATEMENTS, "\n".join(q[:80] for q in counted)
