# Experiment: leave-one-collection-out on the training lists for the acceptor-with-veto family (prereg_veto.txt). Run from results/reader_pipeline/scripts.
import sys, os, numpy as np
sys.path.insert(0, os.getcwd())
sys.argv = ['x', '/work/exp/feat2_trainA.jsonl,/work/exp/feat2_trainB.jsonl', '/work/exp/feat2_dev.jsonl']
exec(open('accept_cv.py').read().split("Tt, Td = tops(train), tops(dev)")[0])
Tt, Td = tops(train), tops(dev)
colls = sorted({r['coll'] for r,_,_ in Tt})
Ps = {c: fit([t for t in Tt if t[0]['coll'] != c]) for c in colls}
print('evidence', run(Tt, lambda r,f: f[0] >= 1.1253))
for v in (0.0, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5):
    tot = np.zeros(3, int)
    for c in colls:
        P = Ps[c]
        tot += run([t for t in Tt if t[0]['coll'] == c], lambda r,f: P(f) >= 0.5 or (f[0] >= 1.1253 and P(f) >= v))
    print('v', v, tuple(tot), 'R-W', tot[0]-tot[1])
