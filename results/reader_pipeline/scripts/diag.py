import collections
import os
import sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # fit.py
from fit import elig, load
recs = load(sys.argv[1].split(','))
thr = 1.1253
C = collections.Counter()
gate = collections.Counter()
for r in recs:
    if not r['answerable']: continue
    pos_all = [c for c in r['all'] if c['label']]
    gold_shown = any(d == r['document'] and p in r['pages'] for d, p in r['shown'])
    e = [x for x in r['rows'] if elig(x)]
    if not gold_shown: C['1 gold page not shown'] += 1; continue
    if not pos_all:
        # maybe widened label exists in rows
        if any(x['label'] for x in r['rows']): pass
        else: C['2 gold shown, no sentence holds span'] += 1; continue
    okpos = [c for c in pos_all if c['typed'] and c['on_topic'] and c['cover'] and c['names']]
    if r['refused'] and not e:
        C['3a refused by gates (no eligible at all / absent)'] += 1; continue
    if not okpos and not any(x['label'] for x in e):
        for c in pos_all[:1]:
            gate[tuple(k for k in ('typed','on_topic','cover','names') if not c[k])] += 1
        C['3 positive fails a gate'] += 1; continue
    if not any(x['label'] for x in e):
        C['4 positive eligible, not embedded (top-16 by lex)'] += 1; continue
    if not e[0]['label']:
        C['5 positive embedded, another first'] += 1; continue
    if r['refused']: C['3a refused by gates (no eligible at all / absent)'] += 1; continue
    if e[0]['evidence'] < thr: C['6 right first, below threshold'] += 1; continue
    C['7 right'] += 1
n = sum(C.values())
for k in sorted(C): print(f'{k:55s} {C[k]:5d} {C[k]/n:.2f}')
print('gate failures of the first positive:', dict(gate))
