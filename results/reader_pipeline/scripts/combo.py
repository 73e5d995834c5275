import os
import sys
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # fit.py
from fit import elig, load
recs = load(sys.argv[1].split(','))
def run(alpha, thr, agree=None):
    R=W=NR=0
    for r in recs:
        e=[x for x in r['rows'] if elig(x)]
        if r['refused'] or not e:
            NR += not r['answerable']; continue
        s=[x['evidence']+alpha*x.get('reader',0) for x in e]
        k=int(np.argmax(s)); t=e[k]
        acc = s[k] >= thr
        if agree is not None and not acc:
            rd=[x.get('reader',0) for x in e]
            acc = int(np.argmax(rd))==k and rd[k]>=agree
        if not acc: NR += not r['answerable']; continue
        if r['answerable'] and t['label']: R+=1
        else: W+=1
    return R,W,NR
for alpha in (0,0.1,0.2,0.3,0.5,0.75,1.0,1.5):
    best=max(((R-W+NR-20, R, W, NR, thr) for thr in np.arange(0.8,2.5,0.01) for R,W,NR in [run(alpha,thr)]))
    print(alpha, 'nothr', run(alpha,-9), 'best', best[1:], 'with agree', run(alpha, best[4], 0.8472))
