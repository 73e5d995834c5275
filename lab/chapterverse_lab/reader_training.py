"""The reader's training pairs: (question, sentence under its heading) → does it state the answer.

Built from the training questions in ``lab/chapterverse_lab/reader_data/questions/*.jsonl`` and the PDFs
they were written from (``lab/chapterverse_lab/reader_data/fetch.sh``), read the way ingest reads any PDF
(``ingest.pdf.extract``: visible text, headings, running headers dropped) and cut into sentences the
way the extractive answerer cuts the shown text (``retrieval.answer.answerers.extractive.sentences``), so
the reader is trained on the kind of input it scores at answer time.

For each answerable question the positive is the sentence of its page that contains the question's
``answer_span`` (after normalisation); the negatives are hard ones: the other sentences of that page
that share most words with the question, and the best-sharing sentences of the pages of the same
document that a BM25 search for the question ranks highest. A near-miss (unanswerable) question
gets only negatives, from the page it is a near miss of and from its BM25 pages.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ingest.mupdf import pymupdf
from pydantic import BaseModel

from ingest.chunk import _section_titles
from ingest.pdf import Page, extract
from retrieval.answer.answerers.extractive.quotable import is_title, sentences
from retrieval.answer.answerers.lexical import content_terms
from retrieval.text.textnorm import normalize
from retrieval.answer.verify import without_cell_joiners

NEGATIVES_PER_SOURCE = 3  # default negatives per source: the answer's page, and its BM25 pages
NEAR_PAGES = 3

class TrainingQuestion(BaseModel):
    id: str
    document: str
    question: str
    answerable: bool = True
    page: int | None = None
    near_page: int | None = None
    answer_span: str = ""
    evidence: str = ""
    kind: str = ""
    paraphrase: bool = False

@dataclass(frozen=True)
class Sentence:
    page: int
    heading: str
    text: str  # whitespace collapsed

    @property
    def shown(self) -> str:
        """What the reader reads: the sentence under its section heading (as the answerer shows it)."""
        return f"{self.heading}: {self.text}" if self.heading else self.text

@dataclass(frozen=True)
class Pair:
    question_id: str
    question: str
    text: str
    label: int  # 1: states the answer

def load_questions(files: Iterable[Path]) -> list[TrainingQuestion]:
    out = []
    for f in files:
        for line in f.read_text().splitlines():
            if line.strip():
                out.append(TrainingQuestion.model_validate_json(line))
    return out

def document_sentences(pages: Sequence[Page]) -> list[Sentence]:
    """Every quotable sentence of the pages' bodies with the section title in force where it starts."""
    out: list[Sentence] = []
    current = ""
    for page in pages:
        titles = _section_titles(page)
        start, end = page.body
        body = page.text[start:end]
        for s, e in sentences(body):
            while titles and titles[0][0] <= start + s:
                current = titles.pop(0)[1]
            text = " ".join(body[s:e].split())
            if is_title(text, current) or len(text.split()) < 4:
                continue
            out.append(Sentence(page.number, " ".join(current.split()), text))
    return out

class PageIndex:
    """BM25 over one document's pages (k1 1.2, b 0.75): which pages a question's words point at."""

    def __init__(self, pages: Sequence[Page]) -> None:
        self.numbers = [p.number for p in pages]
        self.bags = [Counter(content_terms(p.text)) for p in pages]
        self.lengths = [sum(b.values()) for b in self.bags]
        self.avg = sum(self.lengths) / max(len(self.lengths), 1)
        df: Counter[str] = Counter()
        for b in self.bags:
            df.update(b.keys())
        n = len(self.bags)
        self.idf = {t: math.log(1 + (n - c + 0.5) / (c + 0.5)) for t, c in df.items()}

    def top(self, question: str, k: int, exclude: int | None = None) -> list[int]:
        terms = set(content_terms(question))
        scores = []
        for number, bag, length in zip(self.numbers, self.bags, self.lengths, strict=True):
            if number == exclude:
                continue
            s = 0.0
            for t in terms:
                f = bag.get(t, 0)
                if f:
                    s += self.idf[t] * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * length / self.avg))
            scores.append((s, number))
        return [n for s, n in sorted(scores, reverse=True)[:k] if s > 0]

def overlap(question_terms: set[str], sentence: Sentence) -> int:
    return len(question_terms & set(content_terms(sentence.shown)))

def _states(sentence: Sentence, span_norm: str) -> bool:
    """The sentence contains the answer span; a table row's cell joiners (" | ", written by ingest,
    not in the PDF the span was copied from) are layout, as in quote verification."""
    return span_norm in normalize(without_cell_joiners(sentence.text))

def pairs_for(q: TrainingQuestion, by_page: dict[int, list[Sentence]], index: PageIndex,
              rng: random.Random, negatives_per_source: int = NEGATIVES_PER_SOURCE) -> list[Pair]:
    """The positive (if found) and hard negatives of one question (``negatives_per_source`` from its
    page and as many from the BM25 pages); [] when its span is in no sentence."""
    qterms = set(content_terms(q.question))
    span = normalize(q.answer_span) if q.answerable else ""
    home = q.page if q.answerable else q.near_page
    page_sents = by_page.get(home or -1, [])
    out: list[Pair] = []
    if q.answerable:
        positives = [s for s in page_sents if _states(s, span)]
        if not positives:
            return []
        best = max(positives, key=lambda s: overlap(qterms, s))
        out.append(Pair(q.id, q.question, best.shown, 1))
    same = [s for s in page_sents if not (span and _states(s, span))]
    rng.shuffle(same)
    same.sort(key=lambda s: -overlap(qterms, s))
    negatives = same[:negatives_per_source]
    near: list[Sentence] = []
    for number in index.top(q.question, NEAR_PAGES, exclude=home):
        near.extend(s for s in by_page.get(number, []) if not (span and _states(s, span)))
    rng.shuffle(near)
    near.sort(key=lambda s: -overlap(qterms, s))
    negatives += near[:negatives_per_source]
    out += [Pair(q.id, q.question, s.shown, 0) for s in negatives]
    return out

def build_pairs(questions: Sequence[TrainingQuestion], pdf_dir: Path, seed: int = 13,
                negatives_per_source: int = NEGATIVES_PER_SOURCE) -> tuple[list[Pair], dict]:
    """All training pairs, and a report (questions used/skipped per document)."""
    rng = random.Random(seed)
    by_doc: dict[str, list[TrainingQuestion]] = {}
    for q in questions:
        by_doc.setdefault(q.document, []).append(q)
    pairs: list[Pair] = []
    report: dict = {}
    for name in sorted(by_doc):
        with pymupdf.open(pdf_dir / name) as doc:
            pages = extract(doc)
        sents = document_sentences(pages)
        by_page: dict[int, list[Sentence]] = {}
        for s in sents:
            by_page.setdefault(s.page, []).append(s)
        index = PageIndex(pages)
        used = skipped = 0
        for q in by_doc[name]:
            got = pairs_for(q, by_page, index, rng, negatives_per_source)
            if got:
                used += 1
                pairs += got
            else:
                skipped += 1
        report[name] = {"questions": len(by_doc[name]), "used": used, "skipped_no_sentence": skipped,
                        "pages": len(pages), "sentences": len(sents)}
    return pairs, report

def write_pairs(pairs: Sequence[Pair], path: Path) -> None:
    path.write_text("".join(json.dumps(p.__dict__) + "\n" for p in pairs))


def pairs_key(questions: Sequence[TrainingQuestion], documents: Sequence[dict], seed: int,
              negatives_per_source: int) -> str:
    """What the pairs depend on: the questions, the documents' sha256, the seed, the negatives and
    this builder's own source (a changed splitting rule invalidates cached pairs)."""
    h = hashlib.sha256()
    for q in questions:
        h.update(q.model_dump_json().encode())
    for d in documents:
        h.update(f"{d['file']}={d['sha256']}".encode())
    h.update(f"seed={seed} negatives={negatives_per_source}".encode())
    h.update(Path(__file__).read_bytes())
    return h.hexdigest()


def cached_pairs(questions: Sequence[TrainingQuestion], pdf_dir: Path, documents: Sequence[dict], *, seed: int,
                 negatives_per_source: int, cache_dir: Path | None) -> tuple[list[Pair], dict]:
    """``build_pairs``, kept in ``cache_dir`` under the key of everything they depend on, so training
    runs that only change the model's options reuse them (reading the PDFs takes minutes)."""
    if cache_dir is None:
        return build_pairs(questions, pdf_dir, seed, negatives_per_source)
    path = cache_dir / f"reader-pairs-{pairs_key(questions, documents, seed, negatives_per_source)[:16]}.jsonl"
    if path.is_file():
        head, *rows = path.read_text().splitlines()
        return [Pair(**json.loads(r)) for r in rows], json.loads(head)
    pairs, report = build_pairs(questions, pdf_dir, seed, negatives_per_source)
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(report) + "\n" + "".join(json.dumps(p.__dict__) + "\n" for p in pairs))
    tmp.replace(path)
    return pairs, report
