"""Build (question, positive chunk text, hard negative chunk text) triples from the reader's training
questions over the ingested training corpus (collection 'train'). Dev/eval docs never involved."""
import json, glob
from retrieval.settings import Settings
from retrieval.store import pool
from retrieval.search.search import search
from retrieval.text.textnorm import normalize

settings = Settings()
qs = []
for f in sorted(glob.glob("/work/main/lab/chapterverse_lab/reader_data/questions/*.jsonl")):
    for line in open(f):
        q = json.loads(line)
        if q.get("answerable", True) and q.get("answer_span") and q.get("page"):
            qs.append(q)
print("questions", len(qs))
with pool.connection(settings) as conn:
    rows = conn.execute("SELECT c.id, d.name, c.page_start, c.page_end, c.text, c.search_text FROM chunks c "
                        "JOIN documents d ON d.collection = c.collection AND d.id = c.document_id WHERE c.collection = 'train'").fetchall()
by_doc = {}
for r in rows:
    by_doc.setdefault(r["name"], []).append(r)
norm_cache = {}
def ntext(r):
    if r["id"] not in norm_cache:
        norm_cache[r["id"]] = normalize(r["text"])
    return norm_cache[r["id"]]
out = []
miss = 0
for i, q in enumerate(qs):
    span = normalize(q["answer_span"]); ev = normalize(q["evidence"])
    cands = [r for r in by_doc.get(q["document"], []) if r["page_start"] <= q["page"] <= r["page_end"]]
    pos = [r for r in cands if ev in ntext(r)] or [r for r in cands if span in ntext(r)]
    if not pos:
        miss += 1; continue
    pos_ids = {r["id"] for r in cands if span in ntext(r)} | {r["id"] for r in pos}
    res = search(settings, q["question"], k=10, collections=["train"]).results
    negs = [p for p in res if p.chunk_id not in pos_ids and not (p.document == q["document"] and p.page <= q["page"] <= p.page_end)]
    by_id = {r["id"]: r for r in rows}
    neg = by_id[negs[0].chunk_id]["search_text"] if negs else None
    out.append({"id": q["id"], "question": q["question"], "positive": pos[0]["search_text"], "negative": neg})
    if i % 500 == 0:
        print(i, len(out), miss, flush=True)
json.dump(out, open("/work/exp/bi_pairs.json", "w"))
print("pairs", len(out), "no positive", miss, "with negative", sum(1 for o in out if o["negative"]))
