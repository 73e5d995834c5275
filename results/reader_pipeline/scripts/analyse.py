import os
import sys
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # fit.py
from fit import FEATS, best_thr, decide, elig, fit_rank, groups, load
train = load(['/work/exp/feat2_trainA.jsonl', '/work/exp/feat2_trainB.jsonl'])
dev = load(['/work/exp/feat2_dev.jsonl'])
feats = FEATS
Gt, Gd = groups(train, feats), groups(dev, feats)
ans = [g for g in Gt if g[0]['answerable']]
print('train q', len(Gt), 'answerable', len(ans), 'with eligible positive', sum(1 for r,X,y in ans if X is not None and y.sum()>0))
def evs(G):
    # evidence score per eligible row
    return lambda r, X: np.array([x['evidence'] for x in r['rows'] if elig(x)])
ev = evs(Gd)
for name, G in (('train', Gt), ('dev', Gd)):
    t = best_thr(G, ev)
    print(name, 'evidence @1.1253', decide(G, ev, 1.1253), 'best thr', round(t,3), decide(G, ev, t), 'no thr', decide(G, ev, -1e9))
w, b = fit_rank(Gt)
print(dict(zip(feats, np.round(w, 3))), round(b, 3))
lin = lambda r, X: X @ w + b
for name, G in (('train', Gt), ('dev', Gd)):
    t = best_thr(G, lin)
    print(name, 'learned best thr', round(t,3), decide(G, lin, t), 'no thr', decide(G, lin, -1e9))
td = best_thr(Gt, lin)
print('dev at train thr', round(td,3), decide(Gd, lin, td))
