"""The Gemini path of ask(), with the REAL google-genai client against tests/fake_gemini.py on 127.0.0.1.

Every provider failure and every bad output ends in a refusal or in a degraded extractive answer with
verified quotes: never a fabricated quote, never an exception out of ask.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import SecretStr

from retrieval.answer.answerers.model import gemini as gemini_mod
from retrieval.answer.answerers.model import structured
from retrieval.answer.ask import ask
from retrieval.answer.refusals import NO_SUPPORT
from retrieval.models import Answer, Turn
from tests import fake_gemini as fg
from tests.test_ask import _assert_all_quotes_on_their_pages

QUESTION = "What is the maximum indicated airspeed permitted below 10,000 feet MSL?"
CFR = "14-CFR-Part-91_General-Operating-and-Flight-Rules.pdf"


@pytest.fixture(scope="module")
def fake() -> Iterator[fg.FakeGemini]:
    with fg.running() as server:
        yield server


@pytest.fixture()
def gsettings(settings, dev_corpus, fake, monkeypatch):
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", fake.base_url)
    monkeypatch.setattr(structured, "BACKOFF_BASE_S", 0.2)
    return settings.but(answer={"gemini_api_key": SecretStr(fake.api_key), "gemini_model": "gemini-test", "gemini_timeout_s": 2.0, "gemini_retry_budget_s": 6.0})


def passages_in(rec: fg.Recorded) -> list[dict[str, Any]]:
    prompt = rec.prompt
    start = prompt.index("PASSAGES (data, JSON):\n") + len("PASSAGES (data, JSON):\n")
    end = prompt.index("\n\nQUESTION")
    return json.loads(prompt[start:end])


def quote_from(rec: fg.Recorded, needle: str = "250 knots", before: int = 40) -> dict[str, Any]:
    """A true citation: a span copied from a shown passage, ending with ``needle`` and starting
    about ``before`` characters earlier."""
    for p in passages_in(rec):
        flat = " ".join(p["text"].split())
        if needle in flat:
            i = flat.index(needle)
            start = flat.rfind(" ", 0, max(0, i - before)) + 1
            return {"id": p["id"], "document": p["document"], "page": p["page"],
                    "quote": flat[start:i + len(needle)]}
    raise AssertionError(f"{needle!r} not shown to the model")


def good_reply(rec: fg.Recorded) -> fg.Reply:
    return fg.Reply(200, fg.answer_body("250 knots (288 mph).", [quote_from(rec, "250 knots (288 m.p.h.)")]))


def run(gsettings, **kw) -> Answer:
    a = ask(gsettings, kw.pop("question", QUESTION), collections=["dev"], **kw)
    assert isinstance(a, Answer)
    if not a.refusal:
        assert a.citations
        _assert_all_quotes_on_their_pages(gsettings, a)
    else:
        assert not a.citations and not a.answer
    return a


@pytest.fixture(scope="module")
def extractive_alone(settings, dev_corpus) -> Answer:
    """What the extractive answerer says to QUESTION with no model configured: the fallback's content."""
    a = ask(settings, QUESTION, collections=["dev"], answerer="extractive")
    assert not a.refusal and a.citations, "the fallback must answer QUESTION for these tests to mean anything"
    return a


@pytest.fixture()
def assert_degraded(extractive_alone: Answer):
    """Gemini failed on an answerable question: the reply is the verified extractive answer, stating the
    answer (250 knots) in a quote on the right page, with the failure noted and no key shown.

    A refusal does not pass: the fallback exists to keep answering while the model is down."""

    def check(a: Answer) -> None:
        assert a.answerer == "extractive"
        assert any("gemini failed" in w for w in a.warnings), a.warnings
        assert not a.refusal, (a.reason, a.warnings)
        first = a.citations[0]
        assert (first.document, first.page) == (CFR, 17), first
        assert "250 knots" in " ".join(first.quote.split())
        assert a.answer == extractive_alone.answer  # the same verified content as without a model
        assert [(c.document, c.page, c.quote) for c in a.citations] == \
            [(c.document, c.page, c.quote) for c in extractive_alone.citations]
        for w in a.warnings:
            assert "test-key" not in w

    return check


def test_gemini_answer_with_verified_quote(gsettings, fake) -> None:
    fake.script(good_reply)
    a = run(gsettings)
    assert not a.refusal and a.answerer == "gemini" and a.models["answerer"] == "gemini-test"
    assert a.answer == "250 knots (288 mph)." and a.citations[0].page == 17
    rec = fake.requests[0]
    assert rec.headers["x-goog-api-key"] == fake.api_key
    assert rec.path.endswith("/models/gemini-test:generateContent")
    gen = rec.body["generationConfig"]
    assert gen["responseMimeType"] == "application/json" and ("responseSchema" in gen or "responseJsonSchema" in gen)
    system = json.dumps(rec.body.get("systemInstruction", {}))
    assert "never an instruction" in system


def test_one_client_per_settings_is_reused(gsettings, fake, monkeypatch) -> None:
    built: list[Any] = []
    real = gemini_mod.genai.Client

    def counting(*args: Any, **kwargs: Any) -> Any:
        built.append(kwargs)
        return real(*args, **kwargs)

    gemini_mod.close_clients()
    monkeypatch.setattr(gemini_mod.genai, "Client", counting)
    fake.script(good_reply)
    for _ in range(3):
        assert not run(gsettings).refusal
    assert len(built) == 1  # not one per ask()
    a1 = gemini_mod.GeminiAnswerer(gsettings)
    a2 = gemini_mod.GeminiAnswerer(gsettings)
    assert a1._client is a2._client
    other = gemini_mod.GeminiAnswerer(gsettings.but(answer={"gemini_timeout_s": 3.0}))
    assert other._client is not a1._client and len(built) == 2
    gemini_mod.close_clients()


def test_429_with_retry_delay_is_retried(gsettings, fake) -> None:
    fake.script(fg.Reply(429, fg.error_body(429, "RESOURCE_EXHAUSTED", "quota", [fg.retry_info("0.4s")])), good_reply)
    a = run(gsettings)
    assert not a.refusal and a.answerer == "gemini"
    assert len(fake.requests) == 2


def test_retry_delay_beyond_budget_is_not_waited_for(gsettings, fake, assert_degraded) -> None:
    fake.script(fg.Reply(429, fg.error_body(429, "RESOURCE_EXHAUSTED", "quota", [fg.retry_info("120s")])))
    a = run(gsettings)
    assert len(fake.requests) == 1
    assert_degraded(a)


@pytest.mark.parametrize(("code", "status"), [(500, "INTERNAL"), (503, "UNAVAILABLE")])
def test_server_errors_degrade_to_extractive(gsettings, fake, assert_degraded, code, status) -> None:
    fake.script(fg.Reply(code, fg.error_body(code, status, "boom")))
    a = run(gsettings)
    assert len(fake.requests) >= 2  # retried, within the budget
    assert_degraded(a)
    assert any(str(code) in w for w in a.warnings)


def test_failure_on_an_unanswerable_question_degrades_to_a_refusal(gsettings, fake) -> None:
    """The fallback keeps the contract too: what the handbooks do not say is refused, not guessed."""
    fake.script(fg.Reply(503, fg.error_body(503, "UNAVAILABLE", "boom")))
    a = run(gsettings, question="What is the recommended tire pressure for the nose gear of a Boeing 747-400 freighter?")
    assert a.answerer == "extractive" and any("gemini failed" in w for w in a.warnings), a.warnings
    assert a.refusal and a.nearest


def test_server_error_then_success(gsettings, fake) -> None:
    fake.script(fg.Reply(503, fg.error_body(503, "UNAVAILABLE", "busy")), good_reply)
    a = run(gsettings)
    assert not a.refusal and a.answerer == "gemini"


def test_timeout_degrades(gsettings, fake, assert_degraded) -> None:
    fake.script(fg.Reply(200, fg.answer_body("late", []), delay_s=3.0))
    a = run(gsettings)
    assert_degraded(a)
    assert any("in time" in w for w in a.warnings)


def test_connection_drop_degrades(gsettings, fake, assert_degraded) -> None:
    fake.script(fg.Reply(drop=True))
    a = run(gsettings)
    assert_degraded(a)


@pytest.mark.parametrize("body", [
    fg.text_response('{"answerable": true, "answer": "250 knots", "citations": [{"id": "P1"'),  # malformed JSON
    "{this is not json at all",  # malformed HTTP body
    fg.json_response({"answer": "250 knots"}),  # missing fields
    fg.json_response({"answerable": "yes", "answer": 250, "citations": "P1"}),  # wrong types
    fg.json_response([1, 2, 3]),  # schema mismatch: not an object
    fg.json_response({"answerable": True, "answer": "x", "citations": [{"id": "P1", "quote": "y"}]}),
    fg.blocked_prompt(),
    fg.safety_stop(),
    {"candidates": []},
    fg.text_response("", finish="MAX_TOKENS"),
])
def test_bad_output_degrades(gsettings, fake, assert_degraded, body) -> None:
    fake.script(fg.Reply(200, body))
    a = run(gsettings)
    assert_degraded(a)


def _bad_then(rec_fn):
    calls = {"n": 0}

    def reply(rec: fg.Recorded) -> fg.Reply:
        calls["n"] += 1
        return rec_fn(rec, calls["n"])
    return reply


def _with(rec: fg.Recorded, **change: Any) -> fg.Reply:
    cit = {**quote_from(rec), **change}
    return fg.Reply(200, fg.answer_body("900 knots", [cit]))


@pytest.mark.parametrize("change", [
    {"quote": "an indicated airspeed of more than 900 knots"},  # not in the text
    {"document": "made-up-handbook.pdf"},
])
def test_unverifiable_quotes_are_repaired_once_then_refused(gsettings, fake, change) -> None:
    fake.script(lambda rec: _with(rec, **change))
    a = run(gsettings)
    assert a.refusal and a.repaired
    assert len(fake.requests) == 2
    assert "checked mechanically" in fake.requests[1].prompt
    assert a.dropped_citations == 2 and a.proposed_citations == 2
    assert "900" not in a.answer and a.nearest


@pytest.mark.parametrize("page", [3, 9999])  # a page that was not retrieved; a fabricated page number
def test_a_true_quote_under_a_wrong_page_number_is_cited_where_its_words_are(gsettings, fake, page) -> None:
    fake.script(lambda rec: _with(rec, page=page))
    a = run(gsettings)
    assert not a.refusal and not a.repaired and len(fake.requests) == 1  # no second call for a page slip
    assert a.citations and all(c.page != page and "250 knots" in c.quote for c in a.citations)
    assert "900" not in a.answer  # the answer text no quote states is still withheld


def test_repair_pass_can_succeed(gsettings, fake) -> None:
    fake.script(lambda rec: _with(rec, quote="airspeed of more than 900 knots below 10,000"), good_reply)
    a = run(gsettings)
    assert not a.refusal and a.repaired and a.dropped_citations == 1
    assert "900" not in " ".join(c.quote for c in a.citations)
    repair = fake.requests[1].prompt  # the second call says where the quote parts from the page
    assert "its words differ from the page here: after “" in repair
    assert "the page reads “250 knots" in repair and "where the quote reads “900 knots below 10,000”" in repair


BAD_QUOTE = "no person may operate an aircraft at 900 knots"


def _mixed(answer: str):
    def reply(rec: fg.Recorded) -> fg.Reply:
        good = quote_from(rec)
        return fg.Reply(200, fg.answer_body(answer, [{**good, "quote": BAD_QUOTE}, good]))
    return reply


def test_mixed_citations_are_repaired_then_keep_only_verified(gsettings, fake) -> None:
    fake.script(_mixed("250 knots"))
    a = run(gsettings)
    assert not a.refusal and a.answerer == "gemini" and a.answer == "250 knots"
    assert a.repaired and len(fake.requests) == 2  # one failed quote is enough for the repair pass
    repair = fake.requests[1].prompt
    assert "checked mechanically" in repair and BAD_QUOTE in repair
    assert "does not appear word for word" in repair  # told why
    assert len(a.citations) == 1 and a.dropped_citations == 2 and a.proposed_citations == 4
    assert all("900" not in c.quote for c in a.citations)


def test_unquoted_number_beside_a_verified_quote_is_never_shown(gsettings, fake) -> None:
    """One good quote and one bad one holding the number the answer states: repair, drop, degrade."""
    fake.script(_mixed("900 knots"))
    a = run(gsettings)
    assert a.repaired and len(fake.requests) == 2
    assert "900" not in a.answer and all("900" not in c.quote for c in a.citations)
    assert any("withheld" in w and "number 900" in w for w in a.warnings), a.warnings
    assert not a.refusal and a.answerer == "gemini" and a.citations[0].page == 17
    assert a.answer == " … ".join(" ".join(c.quote.split()) for c in a.citations)  # the quotes alone


@pytest.mark.parametrize("answer", [
    "900 knots.",
    "More than 250 knots, or 1,000 feet above the highest obstacle.",
    "2.5 statute miles",
    "250-300 knots",
    "25 knots",  # inside "250"
])
def test_unquoted_number_is_withheld_even_when_all_quotes_verified(gsettings, fake, answer) -> None:
    fake.script(lambda rec: fg.Reply(200, fg.answer_body(answer, [quote_from(rec)])))
    a = run(gsettings)
    assert len(fake.requests) == 1 and not a.repaired and a.dropped_citations == 0  # nothing to repair
    assert a.answer != answer and a.answerer == "gemini" and len(a.citations) == 1
    assert a.answer == " ".join(a.citations[0].quote.split())  # the verified quote alone
    assert any("withheld" in w for w in a.warnings), a.warnings


@pytest.mark.parametrize(("answer", "problem"), [
    ("250 hours.", "unit “hours”"),  # the number is quoted, the unit is not
    ("250 kilometers per hour.", "unit “kilometers per hour”"),
    ("Aircraft are not limited to 250 knots below 10,000 feet MSL.", "a negation"),
    ("A Cessna 172 may fly at 250 knots.", "name “cessna”"),
    ("Pilots in Canada are limited to 250 knots.", "name “canada”"),
])
def test_answer_text_must_not_add_units_negations_or_names(gsettings, fake, answer, problem) -> None:
    """Numbers are not all: a unit, a negation or a name the verified quotes do not state withholds
    the model's text, and its verified quotes are shown alone."""
    fake.script(lambda rec: fg.Reply(200, fg.answer_body(answer, [quote_from(rec, "250 knots (288 m.p.h.)")])))
    a = run(gsettings)
    assert not a.refusal and a.answerer == "gemini" and a.answer != answer
    assert a.answer == " ".join(a.citations[0].quote.split())
    assert any("withheld" in w and problem in w for w in a.warnings), a.warnings


@pytest.mark.parametrize("answer", ["250 knots", "It is 250 knots (288 mph).", "No faster than 250 knots.",
                                    "The Administrator may authorize more than 250 knots below 10,000 feet MSL."])
def test_answer_whose_numbers_are_all_quoted_is_shown(gsettings, fake, answer) -> None:
    """Every number, unit, negation ("no person may") and name ("Administrator", "MSL") is in the quote."""
    fake.script(lambda rec: fg.Reply(200, fg.answer_body(answer, [quote_from(rec, "250 knots (288 m.p.h.)",
                                                                             before=160)])))
    a = run(gsettings)
    assert not a.refusal and a.answerer == "gemini" and a.answer == answer


@pytest.mark.parametrize("reason", ["no type data for Cessna",
                                    "Call 555-0100 and ask for the crosswind limit; it is 15 knots."])
def test_model_refusal_shows_our_reason_not_the_models(gsettings, fake, reason) -> None:
    fake.script(fg.Reply(200, fg.answer_body("", [], answerable=False, reason=reason)))
    a = run(gsettings, question="What is the crosswind limit of a Cessna 172S?")
    assert a.refusal and a.reason == NO_SUPPORT and a.nearest
    shown = a.model_dump_json(exclude={"timings_ms"})  # timings are floats that may contain any digits
    assert reason not in shown and "555-0100" not in shown


def test_refusal_in_the_repair_pass_shows_our_reason(gsettings, fake) -> None:
    fake.script(lambda rec: _with(rec, quote="an indicated airspeed of more than 900 knots"),
                fg.Reply(200, fg.answer_body("", [], answerable=False, reason="Visit evil.example for the answer")))
    a = run(gsettings)
    assert a.refusal and a.repaired and a.reason == NO_SUPPORT
    assert "evil.example" not in a.model_dump_json()


def test_follow_up_is_rewritten_by_gemini(gsettings, fake) -> None:
    rewrite = fg.Reply(200, fg.json_response({"question": QUESTION}))
    fake.script(rewrite, good_reply)
    a = run(gsettings, question="and below 10,000 feet?",
            history=[Turn(question="What speed limits apply to aircraft?", answer="...")])
    assert a.standalone_question == QUESTION and not a.refusal
    assert "FOLLOW-UP QUESTION" in fake.requests[0].prompt


def test_failed_rewrite_falls_back_to_context(gsettings, fake) -> None:
    fake.script(fg.Reply(400, fg.error_body(400, "INVALID_ARGUMENT", "bad")), good_reply)
    a = run(gsettings, question="and at night?",
            history=[Turn(question="How much fuel reserve is needed for a VFR flight by day?")])
    assert a.standalone_question and "fuel" in a.standalone_question
    assert any("rewrite failed" in w for w in a.warnings)
