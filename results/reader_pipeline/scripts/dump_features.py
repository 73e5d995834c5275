"""Experiment: run the shipped ask path (extractive, scorer=evidence, threshold off) over question
files and dump, per question, every candidate the evidence scorer scored with extra features and a
label (widened quote on a gold page containing answer_span). Usage:
  CHAPTERVERSE_HOME=... python dump_features.py OUT.jsonl COLLECTION QFILE [COLLECTION QFILE ...]
QFILE: a .json eval list or a training .jsonl (converted on the fly)."""
from __future__ import annotations

import json
import os
import re
import sys
import time

os.environ["CHAPTERVERSE_ANSWER_SCORER"] = "evidence"

from retrieval.answer import ask as askmod  # noqa: E402
from retrieval.answer.answerers import extractive as ex  # noqa: E402
from retrieval.answer.answerers.extractive.evidence import expected_answer  # noqa: E402
from retrieval.answer.answerers.lexical import content_terms, coverage  # noqa: E402
from retrieval.answer.verify import locate  # noqa: E402
from retrieval.settings import Settings  # noqa: E402
from retrieval.text.tables import is_table_row  # noqa: E402

CAPTURE: list = []
READER: list = []
_orig = ex.score_candidates


def _bigrams(tokens):
    return {(a, b) for a, b in zip(tokens, tokens[1:])}


def wrapper(question, shown, embed, doc_freq=None, headings=None, terms_required=(), profile=ex.DEFAULT_PROFILE):
    out = _orig(question, shown, embed, doc_freq, headings, terms_required, profile)
    headings = headings or {}
    cands, texts, heads, terms, weights = ex._lexical(question, shown, headings, doc_freq, profile)
    index = {c: i for i, c in enumerate(cands)}
    expected = expected_answer(question, profile)
    qtok = content_terms(question, profile)
    qbi = _bigrams(qtok)
    rows = []
    for s in out:
        i = index[s.candidate]
        page = shown[s.candidate.slice_index]
        wide = ex._widened(s, shown, headings, profile).candidate
        st = set(content_terms(texts[i], profile))
        ht = set(content_terms(heads[i], profile))
        stok = content_terms(heads[i] + " " + texts[i], profile)
        rows.append({
            "doc": page.document, "page": page.page, "pid": page.passage_id,
            "text": texts[i], "wide": " ".join(wide.text.split()), "head": heads[i],
            "cos": s.cos, "lex": s.lex, "rank": s.rank, "typed": s.typed, "on_topic": s.on_topic,
            "about": s.about, "complete": not ex.introduces(wide.text), "evidence": s.score,
            "lex_sent": coverage(weights, st), "lex_head": coverage(weights, ht),
            "nwords": len(texts[i].split()), "wide_words": len(wide.text.split()),
            "digit": bool(re.search(r"\d", texts[i])), "table": is_table_row(s.candidate.text),
            "quantity_q": expected is not None,
            "bigram": (len(qbi & _bigrams(stok)) / len(qbi)) if qbi else 0.0,
            "n_cands": len(cands),
        })
    elig = [k for k, r in enumerate(rows) if r["typed"] and r["on_topic"] and r["about"] and r["complete"]]
    if elig and READER:
        probs = READER[0].score(question, [ex.under_heading(rows[k]["head"], rows[k]["text"]) for k in elig])
        for k, p in zip(elig, probs):
            rows[k]["reader"] = float(p)
    # every candidate with its gates (lexical only), to see where gold sentences are lost
    from retrieval.answer.answerers.extractive.evidence import satisfies
    required = terms_required
    topical = ex.topical_passages(shown, headings, required, profile) if required else set()
    norms = [ex.normalize(f"{h} {t}") for h, t in zip(heads, texts, strict=True)]
    names = [d for d in ex.designators(question, profile) if any(ex._has_phrase(x, d) for x in norms)]
    embedded = {s.candidate for s in out}
    allc = []
    for i, c in enumerate(cands):
        pid = shown[c.slice_index].passage_id
        lx = coverage(weights, terms[i])
        allc.append({"doc": shown[c.slice_index].document, "page": shown[c.slice_index].page, "text": texts[i],
                     "lex": lx, "rank": ex.passage_rank(pid), "typed": satisfies(expected, c.text, profile),
                     "on_topic": (not required) or pid in topical,
                     "cover": lx >= ex.MIN_COVERAGE, "names": all(ex._has_phrase(norms[i], d) for d in names),
                     "embedded": c in embedded})
    CAPTURE.append({"rows": rows, "all": allc, "shown": sorted({(p.document, p.page) for p in shown})})
    return out


ex.score_candidates = wrapper

_orig_shown = askmod.shown_pages
MIN_REST = 40  # characters of page text worth showing


def shown_whole_pages(settings, passages, pages):
    """Experiment: each shown passage's slices, then the rest of every page they touch (the parts
    no shown slice covers), under the id of the best-ranked passage on that page."""
    out = _orig_shown(settings, passages, pages)
    by_page = {}
    for p in out:
        by_page.setdefault((p.document, p.page), []).append(p)
    coll_of = {p.document: p.collection for p in passages}
    extra = []
    for (doc, no), slices in by_page.items():
        src = pages.get((coll_of[doc], doc), {}).get(no)
        if src is None:
            continue
        text = src.text
        covered = []
        for sl in slices:
            at = text.find(sl.text)
            if at >= 0:
                covered.append((at, at + len(sl.text)))
        covered.sort()
        pos = 0
        gaps = []
        for a, b in covered:
            if a > pos:
                gaps.append((pos, a))
            pos = max(pos, b)
        gaps.append((pos, len(text)))
        first = slices[0]
        for a, b in gaps:
            piece = text[a:b].strip("\n")
            if len(piece.strip()) >= MIN_REST:
                extra.append(ex.PageText(document=doc, page=no, text=piece, page_label=first.page_label,
                                         url=first.url, passage_id=first.passage_id))
    return out + extra


if os.environ.get("WIDEN") == "page":
    askmod.shown_pages = shown_whole_pages


def load(path):
    if path.endswith(".jsonl"):
        qs = []
        for line in open(path):
            q = json.loads(line)
            if q.get("answerable", True) and "answer_span" in q:
                qs.append({"id": q["id"], "question": q["question"], "answerable": True, "document": q["document"],
                           "pages": [q["page"]], "answer_span": q["answer_span"], "kind": q.get("kind"),
                           "paraphrase": q.get("paraphrase")})
            else:
                qs.append({"id": q["id"], "question": q["question"], "answerable": False})
        return qs
    return json.load(open(path))


def main():
    out_path = sys.argv[1]
    pairs = list(zip(sys.argv[2::2], sys.argv[3::2]))
    settings = Settings()
    from retrieval import reader  # noqa: PLC0415
    READER.append(reader.load_reader(reader.reader_dir(settings.answer.reader_model)))
    done = set()
    if os.path.exists(out_path):
        done = {json.loads(l)["id"] for l in open(out_path)}
    with open(out_path, "a") as out:
        for coll, qfile in pairs:
            t0 = time.time()
            qs = [q for q in load(qfile) if q["id"] not in done]
            for q in qs:
                CAPTURE.clear()
                a = askmod.ask(settings, q["question"], collections=[coll], answerer="extractive",
                               extractive_threshold=float("-inf"))
                rows = CAPTURE[-1]["rows"] if CAPTURE else []
                allc = CAPTURE[-1]["all"] if CAPTURE else []
                for r in allc:
                    r["label"] = bool(q["answerable"] and r["doc"] == q.get("document") and r["page"] in q["pages"]
                                      and locate(q["answer_span"], r["text"]) is not None)
                shown_pages = CAPTURE[-1]["shown"] if CAPTURE else []
                for r in rows:
                    r["label"] = bool(q["answerable"] and r["doc"] == q.get("document") and r["page"] in q["pages"]
                                      and locate(q["answer_span"], r["wide"]) is not None)
                first = a.citations[0] if a.citations else None
                rec = {"id": q["id"], "coll": coll, "question": q["question"], "answerable": q["answerable"],
                       "kind": q.get("kind"), "refused": a.refusal, "reason": a.reason,
                       "first": ({"doc": first.document, "page": first.page, "quote": first.quote} if first else None),
                       "right_first": bool(first and q["answerable"] and first.document == q.get("document")
                                           and first.page in q["pages"] and locate(q["answer_span"], first.quote) is not None),
                       "evidence_score": a.evidence_score, "agreement": a.reader_agreement, "rows": rows,
                       "all": allc, "shown": shown_pages, "pages": q.get("pages"), "document": q.get("document")}
                out.write(json.dumps(rec) + "\n")
                out.flush()
            print(coll, qfile, len(qs), f"{time.time() - t0:.0f}s", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
