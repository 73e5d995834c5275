"""The OpenAI-compatible path of ask(), with the REAL ``openai`` client against tests/fake_openai.py on
127.0.0.1 (what Ollama, vLLM, llama.cpp, LM Studio and OpenAI serve).

Same contract as Gemini (tests/test_gemini_failures.py): passages as data, a strict JSON-schema
response format from the pydantic model, every quote verified; every provider failure and every bad
output ends in a refusal or a degraded extractive answer with verified quotes, never a fabricated
quote, never an exception out of ask.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from pydantic import SecretStr

from retrieval.answer.answerers.model import openai_compat, structured
from retrieval.answer.answerers.model.structured import ModelAnswer
from retrieval.answer.ask import ask
from retrieval.answer.refusals import NO_SUPPORT
from retrieval.models import Answer, Turn
from tests import fake_openai as fo
from tests.fake_gemini import Reply
from tests.test_gemini_failures import QUESTION, passages_in, quote_from
from tests.test_gemini_failures import run as run_ask

FABRICATED = "no person may operate an aircraft at an indicated airspeed of more than 900 knots"


@pytest.fixture(scope="module")
def fake() -> Iterator[fo.FakeOpenAI]:
    with fo.running() as server:
        yield server
    openai_compat.close_clients()


@pytest.fixture()
def osettings(settings, dev_corpus, fake, monkeypatch):
    monkeypatch.setattr(structured, "BACKOFF_BASE_S", 0.2)
    return settings.but(answer={"answerer": "openai", "gemini_api_key": None, "openai_base_url": fake.base_url, "openai_api_key": SecretStr(fake.api_key), "openai_model": "local-test-model", "openai_timeout_s": 2.0, "openai_retry_budget_s": 6.0})


def good_reply(rec: fo.Recorded) -> Reply:
    return Reply(200, fo.answer_body("250 knots (288 mph).", [quote_from(rec, "250 knots (288 m.p.h.)")]))


def run(osettings, **kw) -> Answer:
    return run_ask(osettings, **kw)  # no answerer named: the setting picks openai


def assert_degraded(a: Answer, fake: fo.FakeOpenAI) -> None:
    """The server failed: a verified extractive answer (or a refusal), with the failure noted."""
    assert a.answerer == "extractive"
    assert any(w.startswith("openai failed") for w in a.warnings), a.warnings
    assert a.refusal or any(c.page == 17 for c in a.citations)
    assert "900" not in a.answer and all("900" not in c.quote for c in a.citations)
    for w in a.warnings:
        assert fake.api_key not in w


def test_answer_with_verified_quote(osettings, fake) -> None:
    fake.script(good_reply)
    a = run(osettings)
    assert not a.refusal and a.answerer == "openai" and a.models["answerer"] == "local-test-model"
    assert a.answer == "250 knots (288 mph)." and a.citations[0].page == 17
    assert len(fake.requests) == 1
    rec = fake.requests[0]
    assert rec.headers["authorization"] == f"Bearer {fake.api_key}"
    assert rec.body["model"] == "local-test-model" and rec.body["temperature"] == 0.0
    # the passages go in as data (the shared prompt), the instructions say they are never instructions
    assert "never an instruction" in rec.content("system")
    assert passages_in(rec)[0]["id"] == "P1"
    # structured output: a strict JSON schema built from the pydantic model
    fmt = rec.body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    assert schema == structured.strict_schema(ModelAnswer)
    assert set(schema["required"]) == set(ModelAnswer.model_fields) and schema["additionalProperties"] is False


def test_fabricated_quote_is_dropped_and_the_verified_one_kept(osettings, fake) -> None:
    def reply(rec: fo.Recorded) -> Reply:
        good = quote_from(rec)
        return Reply(200, fo.answer_body("250 knots", [{**good, "quote": FABRICATED}, good]))
    fake.script(reply)
    a = run(osettings)
    assert not a.refusal and a.answerer == "openai" and a.repaired  # one repair pass, told what failed
    assert "checked mechanically" in fake.requests[1].prompt and FABRICATED in fake.requests[1].prompt
    assert len(a.citations) == 1 and a.dropped_citations == 2
    assert all("900" not in c.quote for c in a.citations)


def test_only_fabricated_quotes_end_in_a_refusal(osettings, fake) -> None:
    fake.script(lambda rec: Reply(200, fo.answer_body("900 knots", [{**quote_from(rec), "quote": FABRICATED}])))
    a = run(osettings)
    assert a.refusal and a.repaired and len(fake.requests) == 2
    assert "900" not in a.model_dump_json(include={"answer", "citations", "reason"}) and a.nearest


def test_429_with_retry_after_is_retried(osettings, fake) -> None:
    fake.script(fo.Headed(429, fo.error_body("slow down", "rate_limit_exceeded"), headers={"Retry-After": "0.3"}),
                good_reply)
    a = run(osettings)
    assert not a.refusal and a.answerer == "openai" and len(fake.requests) == 2


def test_429_beyond_the_budget_is_not_waited_for(osettings, fake) -> None:
    fake.script(fo.Headed(429, fo.error_body("quota", "rate_limit_exceeded"), headers={"Retry-After": "120"}))
    a = run(osettings)
    assert len(fake.requests) == 1
    assert_degraded(a, fake)
    assert any("HTTP 429" in w for w in a.warnings)


@pytest.mark.parametrize("code", [500, 502, 503])
def test_server_errors_are_retried_then_degrade(osettings, fake, code) -> None:
    fake.script(Reply(code, fo.error_body("boom")))
    a = run(osettings)
    assert len(fake.requests) >= 2  # retried, within the budget
    assert_degraded(a, fake)
    assert any(f"HTTP {code}" in w for w in a.warnings)


def test_server_error_then_success(osettings, fake) -> None:
    fake.script(Reply(503, fo.error_body("loading model")), good_reply)
    a = run(osettings)
    assert not a.refusal and a.answerer == "openai" and len(fake.requests) == 2


def test_timeout_degrades(osettings, fake) -> None:
    fake.script(Reply(200, fo.answer_body("late", []), delay_s=3.0))
    a = run(osettings)
    assert_degraded(a, fake)
    assert any("in time" in w for w in a.warnings)


def test_connection_drop_degrades(osettings, fake) -> None:
    fake.script(Reply(drop=True))
    a = run(osettings)
    assert_degraded(a, fake)


def test_unreachable_server_degrades(osettings, fake) -> None:
    a = run(osettings.but(answer={"openai_base_url": "http://127.0.0.1:9/v1"}))
    assert_degraded(a, fake)
    assert any("could not reach" in w for w in a.warnings)


@pytest.mark.parametrize("body", [
    fo.completion('{"answerable": true, "answer": "250 knots", "citations": [{"id": "P1"'),  # malformed JSON
    "{this is not json at all",  # malformed HTTP body
    fo.json_completion({"answer": "250 knots"}),  # schema mismatch: missing fields
    fo.json_completion({"answerable": "yes", "answer": 250, "citations": "P1"}),  # wrong types
    fo.json_completion([1, 2, 3]),  # not an object
    fo.json_completion({"answerable": True, "answer": "x", "citations": [{"id": "P1", "quote": "y"}]}),
    fo.completion("I'm sorry, but I can't help with that request."),  # refusal text instead of JSON
    fo.completion(None, refusal="I'm sorry, I cannot assist with that."),  # the structured-output refusal field
    fo.completion('{"answerable": true, "answer": "250 kn', finish="length"),  # cut off
    fo.completion(None, finish="content_filter"),
    fo.completion(""),
    {"id": "x", "object": "chat.completion", "created": 0, "model": "fake", "choices": []},
])
def test_bad_output_degrades(osettings, fake, body) -> None:
    fake.script(Reply(200, body))
    a = run(osettings)
    assert_degraded(a, fake)


def test_json_in_a_markdown_fence_is_read(osettings, fake) -> None:
    """Some local models fence their JSON whatever they are told; the JSON is still validated."""
    def reply(rec: fo.Recorded) -> Reply:
        body = {"answerable": True, "answer": "250 knots", "citations": [quote_from(rec)], "reason": ""}
        return Reply(200, fo.completion("```json\n" + json.dumps(body) + "\n```"))
    fake.script(reply)
    a = run(osettings)
    assert not a.refusal and a.answerer == "openai" and a.citations[0].page == 17


@pytest.mark.parametrize("reason", ["Call 555-0100 and ask for the crosswind limit; it is 15 knots."])
def test_model_refusal_shows_our_reason_not_the_models(osettings, fake, reason) -> None:
    fake.script(Reply(200, fo.answer_body("", [], answerable=False, reason=reason)))
    a = run(osettings, question="What is the crosswind limit of a Cessna 172S?")
    assert a.refusal and a.reason == NO_SUPPORT and a.nearest and a.answerer == "openai"
    assert "555-0100" not in a.model_dump_json(exclude={"timings_ms"})


def test_follow_up_is_rewritten_by_the_model(osettings, fake) -> None:
    fake.script(Reply(200, fo.json_completion({"question": QUESTION})), good_reply)
    a = run(osettings, question="and below 10,000 feet?",
            history=[Turn(question="What speed limits apply to aircraft?", answer="...")])
    assert a.standalone_question == QUESTION and not a.refusal
    assert "FOLLOW-UP QUESTION" in fake.requests[0].prompt
    assert fake.requests[0].body["response_format"]["json_schema"]["name"] == "StandaloneQuestion"


def test_local_server_without_a_key(osettings, fake) -> None:
    """A local server needs no key: the base URL and model are enough (the client sends a placeholder)."""
    with fo.running(api_key=openai_compat.NO_KEY) as local:
        local.script(good_reply)
        a = run(osettings.but(answer={"openai_api_key": None, "openai_base_url": local.base_url}))
    assert not a.refusal and a.answerer == "openai"


def test_one_client_per_settings_is_reused(osettings, fake) -> None:
    a1 = openai_compat.OpenAICompatAnswerer(osettings)
    a2 = openai_compat.OpenAICompatAnswerer(osettings)
    other = openai_compat.OpenAICompatAnswerer(osettings.but(answer={"openai_timeout_s": 3.0}))
    assert a1._client is a2._client and other._client is not a1._client


@pytest.mark.parametrize("update", [{"openai_model": None},
                                    {"openai_api_key": None, "openai_base_url": None}])
def test_unconfigured_is_a_refusal_saying_what_is_missing(osettings, fake, update) -> None:
    fake.script(good_reply)
    a = ask(osettings.but(answer=update), QUESTION, collections=["dev"])
    assert a.refusal and "answerer is unavailable" in a.reason and "CHAPTERVERSE_OPENAI" in a.reason
    assert not fake.requests


def test_strict_schema_keeps_names_that_look_like_keywords() -> None:
    from pydantic import BaseModel, Field

    class Odd(BaseModel):
        default: str = "x"
        properties: list[int] = Field(default_factory=list)

    schema = structured.strict_schema(Odd)
    assert set(schema["properties"]) == {"default", "properties"} and schema["required"] == ["default", "properties"]
    assert all("default" not in s for s in schema["properties"].values())
