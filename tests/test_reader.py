"""The trained reader: shipped weights match their card, it reads, it is fast enough to load, and
the extractive answerer lets it decide what is shown."""

from __future__ import annotations

import hashlib
import time

import numpy as np
import pytest

from retrieval import reader


def test_shipped_weights_match_their_card() -> None:
    card = reader.Card.model_validate_json((reader.SHIPPED / "card.json").read_text())
    assert hashlib.sha256((reader.SHIPPED / card.onnx_file).read_bytes()).hexdigest() == card.onnx_sha256
    assert card.training.get("pairs", 0) > 10_000, "the card records the training run"
    assert "int8" in card.quantized


def test_loads_once_quickly_and_reads() -> None:
    started = time.perf_counter()
    r = reader.Reader(reader.SHIPPED)
    assert time.perf_counter() - started < 5.0  # ≤ 1 s on a quiet machine; generous under CI load
    assert reader.load_reader(reader.SHIPPED) is reader.load_reader(reader.SHIPPED)
    q = "What is the default number of commands kept in the shell's history list?"
    answer = "History: The value of HISTSIZE is the number of commands kept in the history list; the default is 500."
    near_miss = "History: HISTFILE names the file in which the command history is saved when the shell exits."
    p = r.score(q, [answer, near_miss])
    assert p[0] > p[1]
    q2 = "How long must the applicant keep the knowledge test report before the practical test expires?"
    unrelated = "Colors: The xcolor package provides a large set of predefined color names."
    assert r.score(q2, [unrelated])[0] < 0.5


def test_listwise_loss_is_softmax_over_a_question_and_none() -> None:
    torch = pytest.importorskip("torch")
    from chapterverse_lab.reader_train import listwise_loss

    logits = torch.tensor([3.0, -1.0, -2.0, -4.0, -3.0])
    # question 1: pairs 0-2, the positive first; question 2: pairs 3-4, a near miss (target "none")
    got = listwise_loss(logits, [[0, 1, 2], [3, 4]], [0, -1])
    row1 = torch.log_softmax(torch.tensor([0.0, 3.0, -1.0, -2.0]), 0)[1]
    row2 = torch.log_softmax(torch.tensor([0.0, -4.0, -3.0]), 0)[0]
    assert float(got) == pytest.approx(float(-(row1 + row2) / 2), rel=1e-5)
    wrong = listwise_loss(logits, [[0, 1, 2], [3, 4]], [1, -1])
    assert float(wrong) > float(got), "a question whose positive is outscored costs more"


def test_held_out_figures_count_answerable_and_near_misses() -> None:
    from types import SimpleNamespace

    from chapterverse_lab.reader_train import ranking_figures

    pairs = [SimpleNamespace(question_id=q, label=lbl) for q, lbl in
             [("a", 1), ("a", 0), ("b", 0), ("b", 1), ("n", 0), ("n", 0)]]
    fig = ranking_figures(pairs, np.array([2.0, 1.0, 0.5, -0.5, -1.0, 0.2]))
    assert (fig["answerable"], fig["positive_ranked_first"], fig["positive_first_and_above_half"]) == (2, 1, 1)
    assert (fig["near_misses"], fig["near_misses_all_below_half"]) == (1, 0)
