"""Experiment: train the reader on the answerer's own candidate lists (eligible sentences of the
training questions as the pipeline shows them), listwise with a 'none' target when no candidate
states the answer (near misses, and answerable questions whose answer sentence is not among them)."""
import json
import logging
import os
import sys
from pathlib import Path
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # fit.py
from fit import elig, load
from chapterverse_lab.reader_training import Pair
from retrieval.answer.answerers.extractive.scoring import under_heading
from chapterverse_lab.reader_train import train
from retrieval.encode.embed import resolve_model_path
from retrieval.settings import Settings

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
recs = load(sys.argv[1].split(','))
out = Path(sys.argv[2])
epochs = int(sys.argv[3]) if len(sys.argv) > 3 else 1
pairs = []
stats = {"groups": 0, "none_answerable": 0, "none_unanswerable": 0, "with_positive": 0}
for r in recs:
    e = [x for x in r['rows'] if elig(x)]
    if r['refused'] or not e:
        continue
    seen_pos = False
    texts = set()
    group = []
    for x in e:
        t = under_heading(x['head'], x['text'])
        if t in texts:
            continue
        texts.add(t)
        lab = int(bool(r['answerable'] and x['label']))
        if lab and seen_pos:
            continue  # one target per list
        seen_pos |= bool(lab)
        group.append(Pair(r['id'], r['question'], t, lab))
    if len(group) < 1:
        continue
    pairs += group
    stats["groups"] += 1
    if seen_pos: stats["with_positive"] += 1
    elif r['answerable']: stats["none_answerable"] += 1
    else: stats["none_unanswerable"] += 1
print(stats, len(pairs), flush=True)
settings = Settings()
report = train(pairs, resolve_model_path(settings.search.embedding_model), out, seed=13, epochs=epochs,
               batch_size=32, lr=4e-5, max_length=128, valid_share=0.05, freeze_embeddings=True, loss="listwise",
               compare_with=Path('/work/main/retrieval/reader/model'))
json.dump({"stats": stats, "pairs": len(pairs), "report": report}, open(str(out) + '-report.json', 'w'), indent=1)
