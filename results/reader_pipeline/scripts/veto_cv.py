"""Experiment: leave-one-collection-out on the training lists for the acceptor-with-veto family
(prereg_veto.txt): accept at p >= 0.5, or at the evidence threshold unless p < v. Reuses the loading,
features and fit of accept_cv.py (its top half, executed here). Run from this folder:
  python veto_cv.py TRAIN_A.jsonl,TRAIN_B.jsonl DEV.jsonl"""
# ruff: noqa: F821  (tops, train, dev, fit, run come from accept_cv.py's top half)
import os
import sys

import numpy as np

sys.path.insert(0, os.getcwd())
exec(open("accept_cv.py").read().split("Tt, Td = tops(train), tops(dev)")[0])
Tt, Td = tops(train), tops(dev)
colls = sorted({r["coll"] for r, _, _ in Tt})
Ps = {c: fit([t for t in Tt if t[0]["coll"] != c]) for c in colls}
print("evidence", run(Tt, lambda r, f: f[0] >= 1.1253))
for v in (0.0, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5):
    tot = np.zeros(3, int)
    for c in colls:
        P = Ps[c]
        tot += run([t for t in Tt if t[0]["coll"] == c], lambda r, f: P(f) >= 0.5 or (f[0] >= 1.1253 and P(f) >= v))
    print("v", v, tuple(int(x) for x in tot), "R-W", int(tot[0] - tot[1]))
