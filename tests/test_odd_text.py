"""Odd text in questions (issue 32, item 4): bytes that are not UTF-8 on the command line get one
line and exit status 1, with no traceback and without sending the process's query encoder to torch;
the query encoder never treats bad input as its own failure. (A NUL in a Slack question:
``test_bot_e2e::test_a_question_with_a_nul_is_answered_not_taken_for_a_database_outage``.)"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from retrieval.text.question import text_problem, without_control


@pytest.mark.parametrize("command", ["ask", "search"])
def test_invalid_utf8_on_the_command_line_is_one_line_and_exit_1(settings, command: str) -> None:
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "retrieval.cli", command, b"\xff\xfe"], capture_output=True,
                         env={**os.environ}, timeout=120)
    err = res.stderr.decode("utf-8", "replace")
    assert res.returncode == 1, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    what = "question" if command == "ask" else "query"
    assert lines[0] == f"error: the {what} is not valid UTF-8 text (bytes 0xff 0xfe); check the terminal's encoding"
    assert res.stdout == b""
    assert "torch" not in err
    assert time.monotonic() - t0 < 60


def test_the_query_encoder_embeds_bad_text_without_falling_back_to_torch(embedder) -> None:
    embedder.embed_query("carburetor icing")
    assert embedder._encoder is not None  # the ONNX encoder is in use
    vec = embedder.embed_query("\udcff\udcfe carburetor")
    assert vec.shape == (embedder.dim,)
    assert embedder._encoder is not None  # and still is: bad input is not the encoder's failure


def test_the_checks_themselves() -> None:
    assert text_problem("What is the magneto drop?") is None
    assert text_problem("a\x00b") == "the question contains a NUL character; type it again without it"
    assert text_problem("\udcff", "query").startswith("the query is not valid UTF-8 text (bytes 0xff)")
    assert without_control("what\x00 is\x07 it?\n") == "what is it?\n"
