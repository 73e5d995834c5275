"""Issue 38 item 1: the right page among what a model reads.

A model reads the pages of the best ``MODEL_PASSAGES`` passages, drawn from a pool each search leg
fetches twice as deep; the extractive answerer's search is left as it was. Real Postgres, the real dev
PDFs: the Fundamentals of Instructing question's answer pages (PTS pp. 191-193) sit at fused rank 19-20,
below what a 10-deep pool and 12 passages reached.
"""

from __future__ import annotations

from typing import Any

from pydantic import SecretStr

D017 = ("Which Fundamentals of Instructing task must always be selected on the sport pilot flight instructor "
        "practical test, and what is it called?")
PTS = "FAA-S-8081-29_Sport-Pilot-and-Sport-Pilot-Flight-Instructor-PTS.pdf"


def shown_for(settings, collection: str, question: str, k: int, depth: int | None):
    from retrieval.answer.ask import load_pages  # noqa: PLC0415
    from retrieval.answer.context import model_pages  # noqa: PLC0415
    from retrieval.search.search import search  # noqa: PLC0415

    found = search(settings, question, k=k, collections=[collection], depth=depth).results
    return model_pages(found, load_pages(settings, found), budget_chars=settings.answer.model_context_chars)


def test_a_deeper_pool_is_asked_for_only_beyond_the_default(settings) -> None:
    from retrieval.search.search import SearchConfig, default_config  # noqa: PLC0415

    base = SearchConfig()
    assert default_config(settings) == default_config(settings, None) == default_config(settings, base.depth) \
        == SearchConfig(reranker=settings.search.reranker)
    deep = default_config(settings, 32)
    assert (deep.depth, deep.fetch_depth) == (32, 48)


def test_the_model_is_shown_the_answer_page_the_shallow_pool_missed(settings, dev_corpus) -> None:
    from retrieval.answer.answerers.model.structured import MODEL_LEG_DEPTH, MODEL_PASSAGES  # noqa: PLC0415

    before = shown_for(settings, dev_corpus, D017, 12, None)
    after = shown_for(settings, dev_corpus, D017, MODEL_PASSAGES, MODEL_LEG_DEPTH)
    on_answer_page = [(p.document, p.page) for p in after if p.document == PTS and p.page in (191, 192, 193)]
    assert on_answer_page, [(p.document, p.page) for p in after]
    assert not any(p.document == PTS and p.page in (191, 192, 193) for p in before)  # what was lost
    assert sum(len(p.text) for p in after) <= settings.answer.model_context_chars
    assert [p.passage_id for p in after] == [f"P{i}" for i in range(1, len(after) + 1)]


def test_each_answerer_asks_the_search_for_its_own_pool(settings, dev_corpus) -> None:
    """A model answerer asks for 16 passages from legs 32 deep (the spy sees it before the unreachable
    model fails over to the extractive answer); the extractive answerer for its 8 at the default depth."""
    from retrieval.answer.answerers.extractive import EXTRACTIVE_PASSAGES  # noqa: PLC0415
    from retrieval.answer.answerers.model.structured import MODEL_LEG_DEPTH, MODEL_PASSAGES  # noqa: PLC0415
    from retrieval.answer.ask import ask  # noqa: PLC0415
    from retrieval.search.search import search  # noqa: PLC0415

    asked: list[tuple[int, Any]] = []

    def spy(s, q, k, collections, documents=None, depth=None):
        asked.append((k, depth))
        return search(s, q, k=k, collections=collections, documents=documents, depth=depth)

    unreachable = settings.but(answer={"openai_base_url": "http://127.0.0.1:9/v1", "openai_api_key": SecretStr("x"),
                                       "openai_model": "m", "openai_timeout_s": 1.0, "openai_retry_budget_s": 1.0})
    q = "What is the maximum indicated airspeed below 10,000 feet MSL?"
    model = ask(unreachable, q, collections=[dev_corpus], answerer="openai", search_fn=spy)
    ask(settings, q, collections=[dev_corpus], answerer="extractive", search_fn=spy)
    assert asked == [(MODEL_PASSAGES, MODEL_LEG_DEPTH), (EXTRACTIVE_PASSAGES, None)]
    assert model.answerer == "extractive" and any("openai" in w.lower() for w in model.warnings)


def test_the_page_after_each_passage_is_loaded_from_the_index(settings, dev_corpus) -> None:
    """The model's view may follow a page with the next one's opening (``retrieval.answer.context.continues``),
    so the stored text of the page after each passage is read with the passages' own pages: one query."""
    from retrieval.answer.ask import load_pages  # noqa: PLC0415
    from retrieval.search.search import search  # noqa: PLC0415

    found = search(settings, "What fuel reserve is required for a VFR flight at night?", k=8,
                   collections=[dev_corpus]).results
    from retrieval.store import pool  # noqa: PLC0415

    with pool.connection(settings) as conn:
        counts = {r["name"]: r["page_count"] for r in conn.execute(
            "SELECT name, page_count FROM documents WHERE collection = %s", (dev_corpus,))}
    pages = load_pages(settings, found)
    assert any(p.page_end < counts[p.document] for p in found)
    for p in found:
        loaded = pages[(p.collection, p.document)]
        assert set(range(p.page, p.page_end + 1)) <= loaded.keys()
        assert p.page_end + 1 in loaded or p.page_end == counts[p.document]  # the last page has none after
