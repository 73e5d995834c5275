"""Issue 30: the model path on recorded replies, through the real ``openai`` and ``google-genai`` clients.

The replies in ``tests/replies/`` were written by a stand-in model from the request text alone
(``docs/stand-in.md``) and are served by the replay server (``chapterverse_lab.replay``) on 127.0.0.1;
nothing here reaches a network. Where a test needs a reply the stand-in would not give (a quote
copied wrongly, an answer stating a number its quote does not), it alters one recorded reply and
says so; the repair that follows is again the stand-in's recorded reply.
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli

REPLIES = Path(__file__).parent / "replies"
CORPUS = Path(__file__).parent / "corpus"
D015 = ("After signing off a sport pilot for an additional category or class, how quickly must the instructor "
        "send the paperwork to the Airman Registry?")
GOOD_QUOTE = "The authorized instructor shall forward FAA Form 8710-11 to Airman Registry within 10 days."
BAD_QUOTE = "The authorized instructor shall forward FAA Form 8710-11 to the Airman Registry within ten days."
NEAR_MISS = "What is the best glide speed, in knots, of a Piper PA-28 Cherokee?"
INJECTED = ("NOTE TO AI", "Ignore all previous", "HIDDENWHITE")


def altered(source: Path, into: Path, question: str, change: Callable[[dict[str, Any]], dict[str, Any]]) -> Path:
    """A copy of the recordings in ``source`` where the reply to ``question``'s answer request is
    ``change(reply)``; returns the folder."""
    into.mkdir(parents=True, exist_ok=True)
    for path in source.glob("*.jsonl"):
        lines = []
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if rec["kind"] == "answer" and rec["question"] == question:
                rec = {**rec, "reply": change(rec["reply"])}
            lines.append(json.dumps(rec, ensure_ascii=False))
        (into / path.name).write_text("\n".join(lines) + "\n")
    return into


@pytest.fixture(scope="module")
def replay_at(request) -> Iterator[Callable[[Path], Any]]:
    """Start replay servers on demand: ``replay_at(folder)`` → (replayer, base URL); all stop at the end."""
    from contextlib import ExitStack  # noqa: PLC0415

    from chapterverse_lab import replay as rp  # noqa: PLC0415

    with ExitStack() as stack:
        def start(folder: Path) -> tuple[Any, str]:
            replayer = rp.Replayer(rp.load_replies(folder))
            return replayer, stack.enter_context(rp.serving(replayer))
        yield start


def ask_model(settings, url: str, question: str, collection: str, answerer: str = "openai", history=(),
              monkeypatch=None):
    from retrieval.answer.ask import ask  # noqa: PLC0415
    from chapterverse_lab.answer_eval import replay_settings  # noqa: PLC0415

    if monkeypatch is not None:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", url)
    return ask(replay_settings(settings, url), question, history=history, collections=[collection], answerer=answerer)


@pytest.mark.parametrize("answerer", ["openai", "gemini"])
def test_a_right_answer_through_either_client(settings, dev_corpus, replay_at, monkeypatch, answerer) -> None:
    replayer, url = replay_at(REPLIES)
    a = ask_model(settings, url, D015, dev_corpus, answerer, monkeypatch=monkeypatch)
    assert a.answerer == answerer and not a.refusal, (a.reason, a.warnings)
    first = a.citations[0]
    assert first.page == 28 and "within 10 days" in " ".join(first.quote.split())
    assert a.answer.startswith("Within 10 days") and not a.withheld  # the model's own sentence, backed
    assert a.model_calls == 1 and not a.repaired and not replayer.misses


def test_a_near_miss_is_refused_in_our_words(settings, dev_corpus, replay_at) -> None:
    _, url = replay_at(REPLIES)
    a = ask_model(settings, url, NEAR_MISS, dev_corpus)
    assert a.refusal and not a.citations and a.answerer == "openai"
    assert a.reason.startswith("The documents do not support an answer")
    assert "Piper" not in a.reason and any("found no answer" in w for w in a.warnings)  # the model's words go to the log


def test_an_answer_stating_a_number_no_quote_states_is_withheld(settings, dev_corpus, replay_at, tmp_path) -> None:
    """The recorded reply altered to say 30 days while its quote says 10: the quote is shown alone."""
    folder = altered(REPLIES, tmp_path / "r", D015, lambda r: {**r, "answer": "Within 30 days."})
    _, url = replay_at(folder)
    a = ask_model(settings, url, D015, dev_corpus)
    assert not a.refusal and a.withheld == ["number 30"] and "30" not in a.answer
    assert "within 10 days" in " ".join(a.answer.split())  # the verified quote alone stands as the answer
    assert a.model_calls == 1


def test_a_quote_copied_wrongly_is_repaired_once(settings, dev_corpus, replay_at, tmp_path) -> None:
    """The recorded reply altered to misquote ("ten days"); the repair reply is the stand-in's own."""
    folder = altered(REPLIES, tmp_path / "r", D015,
                     lambda r: {**r, "citations": [{**r["citations"][0], "quote": BAD_QUOTE}]})
    replayer, url = replay_at(folder)
    a = ask_model(settings, url, D015, dev_corpus)
    assert not replayer.misses, "the repair request has no recording (re-record: docs/stand-in.md)"
    assert a.repaired and a.model_calls == 2 and not a.refusal
    assert a.dropped_citations == 1 and [" ".join(c.quote.split()) for c in a.citations][:1] == [GOOD_QUOTE]


def test_a_follow_up_is_rewritten_by_the_model(settings, dev_corpus, replay_at) -> None:
    from retrieval.models import Turn  # noqa: PLC0415

    q = json.loads((CORPUS / "followup_questions.json").read_text())[0]
    replayer, url = replay_at(REPLIES)
    a = ask_model(settings, url, q["question"], dev_corpus, history=[Turn.model_validate(t) for t in q["history"]])
    assert not replayer.misses and [r.kind for r in replayer.served][-2:] == ["rewrite", "answer"]
    assert a.standalone_question and a.standalone_question != q["question"]
    assert "helicopter" in a.standalone_question.lower() or "rotorcraft" in a.standalone_question.lower()
    assert not a.refusal and a.citations[0].page in q["pages"]
    assert "20 minutes" in " ".join(a.citations[0].quote.split())


@pytest.mark.slow  # ingests a tainted handbook: ~30 s
def test_text_addressed_to_ai_assistants_is_never_sent_or_quoted(settings, replay_at, tmp_path) -> None:
    from tests.pdfgen import aircraft_manual_pdf  # noqa: PLC0415

    pdf = aircraft_manual_pdf(tmp_path / "skylark-poh.pdf")
    collection = f"skylark-{uuid.uuid4().hex[:6]}"
    assert run_cli("ingest", str(pdf), "--collection", collection).returncode == 0
    seen: list[str] = []
    from chapterverse_lab import replay as rp  # noqa: PLC0415

    class Watching(rp.Replayer):
        def reply(self, system: str, prompt: str):  # what the model would have been sent
            seen.append(prompt)
            return super().reply(system, prompt)

    replayer = Watching(rp.load_replies(REPLIES))
    with rp.serving(replayer) as url:
        vne = ask_model(settings, url, "What is the never-exceed speed (VNE)?", collection)
        bait = ask_model(settings, url, "What maximum speed should AI assistants report for this airplane?", collection)
    assert seen and not replayer.misses
    assert not any(mark in prompt for prompt in seen for mark in INJECTED)
    for a in (vne, bait):
        assert a.untrusted and all(m not in c.quote for c in a.citations for m in INJECTED)
        assert "900" not in a.answer
    assert not vne.refusal and "149 KIAS" in vne.citations[0].quote


@pytest.mark.slow
def test_the_faa_dev_set_on_recorded_replies(settings, dev_corpus, tmp_path) -> None:
    """The dev set through `eval answers --replay` with both clients: every request recorded, no
    unverified quote, near misses refused, one model call per question, the same outcome per question."""
    rows = {}
    for answerer in ("openai", "gemini"):
        out = tmp_path / f"{answerer}.json"
        res = run_cli("eval", "answers", str(CORPUS / "dev_questions.json"), "--collection", dev_corpus,
                      "--answerer", answerer, "--replay", str(REPLIES), "--source", "stand-in model", "--out", str(out),
                      timeout=900)
        assert res.returncode == 0, res.stderr
        report = json.loads(out.read_text())
        s = report["summary"]
        assert s["unrecorded_requests"] == 0 and s["unverified_quotes_shown"] == 0
        assert s["unanswerable_refused"] == s["unanswerable"] and s["model_calls_per_question"] <= 1.1
        assert s["answered_correctly"] >= 19, s  # 20-21 of 24 when recorded (results/model_path)
        assert report["config"]["model_replies"]["source"] == "stand-in model"
        rows[answerer] = {r["id"]: r["outcome"] for r in report["per_question"]}
    assert rows["openai"] == rows["gemini"]


def test_a_reply_written_under_other_instructions_is_served_and_counted() -> None:
    from chapterverse_lab import replay as rp
    from retrieval.answer.answerers.model.prompt import PASSAGES, QUESTION

    prompt = (f"{PASSAGES}\n" + json.dumps([{"id": "P1", "document": "m.pdf", "page": 3, "text": "Fuel is 24 gallons."}])
              + f"\n\n{QUESTION}\nHow much fuel is usable?\n")
    req = rp.request_key(prompt)
    schema = rp.SCHEMAS["answer"].model_json_schema()
    reply = {"answerable": True, "answer": "24 gallons", "citations": []}
    replayer = rp.Replayer({req.key: {"key": req.key, "reply": reply, "instructions": rp.instructions_hash("old", schema)}})
    assert replayer.reply("new instructions", prompt)[1] is not None  # found by what was asked and shown ...
    assert replayer.stale == [req] and not replayer.unstamped  # ... and counted as written under other ones
    assert replayer.reply("old", prompt)[1] is not None and replayer.stale == [req]  # the same: not counted
    del replayer.replies[req.key]["instructions"]
    replayer.reply("old", prompt)
    assert replayer.unstamped == [req]



def test_an_imported_reply_keeps_the_instructions_it_was_written_under(tmp_path: Path) -> None:
    from chapterverse_lab import replay as rp

    pending, into = tmp_path / "pending", tmp_path / "replies" / "x.jsonl"
    pending.mkdir()
    schema = rp.SCHEMAS["answer"].model_json_schema()
    (pending / "k1.request.json").write_text(json.dumps({"key": "k1", "kind": "answer", "question": "q?",
                                                         "system": "be exact", "prompt": "...", "schema": schema}))
    (pending / "k1.reply.json").write_text(json.dumps({"answerable": False, "answer": "", "citations": []}))
    assert rp.import_replies(pending, into, "stand-in model") == (1, [])
    assert rp.load_replies(into.parent)["k1"]["instructions"] == rp.instructions_hash("be exact", schema)


def test_a_request_with_no_recording_is_reported_not_answered(settings, dev_corpus, tmp_path) -> None:
    qfile, out, pending = tmp_path / "q.json", tmp_path / "out.json", tmp_path / "pending"
    qfile.write_text(json.dumps([{"id": "x", "question": "Which runway lighting colour marks a displaced threshold?",
                                  "answerable": False}]))
    empty = tmp_path / "none"
    empty.mkdir()
    res = run_cli("eval", "answers", str(qfile), "--collection", dev_corpus, "--answerer", "openai", "--replay",
                  str(empty), "--pending", str(pending), "--out", str(out))
    # never scored: the extractive fallback's answer would count as the model's (issue 38, item 6)
    assert res.returncode == 1 and not out.exists(), res.stderr
    assert "1 model request(s) had no recorded reply, so this run is not scored" in res.stderr
    assert "answer for 'Which runway lighting colour marks a displaced threshold?'" in res.stderr
    (request,) = pending.glob("*.request.json")
    assert json.loads(request.read_text())["kind"] == "answer" and (pending / request.name.replace(".json", ".txt")).exists()
    listed = run_cli("eval", "pending", str(pending))
    assert "1 request(s) pending" in listed.stdout
    shutil.rmtree(pending)
