import os
import sys
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # fit.py
from fit import elig, load
recs = load(sys.argv[1].split(','))
THR = 1.1253
def run(mode, t):
    R=W=NR=0
    for r in recs:
        e=[x for x in r['rows'] if elig(x)]
        if r['refused'] or not e:
            NR += not r['answerable']; continue
        rd=[x.get('reader',0.0) for x in e]
        if mode=='B':
            k=0; acc = e[0]['evidence']>=THR or (int(np.argmax(rd))==0 and rd[0]>=t)
        else:
            k=int(np.argmax(rd)); acc = rd[k]>=t
        if not acc: NR += not r['answerable']; continue
        if r['answerable'] and e[k]['label']: R+=1
        else: W+=1
    return R,W,NR
nm = sum(not r['answerable'] for r in recs)
for mode in ('B','D'):
    best=None
    for t in np.round(np.arange(0.0,1.0001,0.0025),4):
        R,W,NR=run(mode,t)
        correct = R + NR + 0  # refused wrong answerable counted below
        # calibrate's criterion: right accepted + wrong refused; wrong refused = (all non-right decisions refused)
        # equivalently maximise R - W (+ constant)
        key=(R-W, t)
        if best is None or key>best[0]: best=(key,(R,W,NR),t)
    print(mode,'best t',best[2],'R,W,NR',best[1],'of nm',nm)
    for t in (0.3,0.5,0.7,0.8,0.85,0.9,0.95):
        print('   ',mode,t,run(mode,t))
