import math
import os
import sys
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # fit.py
from fit import elig, load
from scipy.optimize import minimize
train = load(sys.argv[1].split(','))
dev = load(sys.argv[2].split(','))
AG = 0.8472
def feats(r, e):
    t = e[0]
    second = e[1]['evidence'] if len(e) > 1 else t['evidence'] - 0.5
    return [t['evidence'], t['evidence']-second, t['cos'], t['lex'], t['lex_sent'], math.log(len(e)), math.log(t['n_cands']),
            math.log(t['rank']), t['bigram'], float(t['digit'] and t['quantity_q']), float(t['quantity_q']), math.log(t['nwords']), float(t['table']),
            max(x['cos'] for x in e[1:]) if len(e)>1 else 0]
def tops(recs):
    out = []
    for r in recs:
        e = [x for x in r['rows'] if elig(x)]
        if r['refused'] or not e:
            out.append((r, None, None)); continue
        out.append((r, np.array(feats(r, e)), bool(r['answerable'] and e[0]['label'])))
    return out
def fit(T, l2=1e-3):
    Xs = np.stack([f for r,f,y in T if f is not None]); ys = np.array([y for r,f,y in T if f is not None], float)
    mu, sd = Xs.mean(0), Xs.std(0)+1e-9
    def loss(w):
        Z=(Xs-mu)/sd; s=Z@w[:-1]+w[-1]; p=1/(1+np.exp(-s))
        L=-(ys*np.log(p+1e-12)+(1-ys)*np.log(1-p+1e-12)).mean()+l2*(w[:-1]@w[:-1])
        g=np.append(Z.T@(p-ys)/len(ys)+2*l2*w[:-1], (p-ys).mean())
        return L,g
    w = minimize(loss, np.zeros(Xs.shape[1]+1), jac=True, method='L-BFGS-B').x
    return lambda f: 1/(1+np.exp(-(((f-mu)/sd)@w[:-1]+w[-1])))
def run(T, accept):
    R=W=NR=0
    for r,f,y in T:
        if f is None or not accept(r, f):
            NR += (not r['answerable']); continue
        if y: R+=1
        else: W+=1
    return R, W, NR
Tt, Td = tops(train), tops(dev)
colls = sorted({r['coll'] for r,_,_ in Tt})
ev = lambda r,f: f[0] >= 1.1253
print('train evidence', run(Tt, ev))
for thr in (0.4, 0.5, 0.6):
    tot = np.zeros(3, int)
    for c in colls:
        P = fit([t for t in Tt if t[0]['coll'] != c])
        tot += run([t for t in Tt if t[0]['coll'] == c], lambda r,f: P(f) >= thr)
    print('CV acceptor', thr, tuple(tot))
P = fit(Tt)
for thr in (0.4,0.45,0.5,0.55,0.6):
    print('dev acceptor', thr, run(Td, lambda r,f: P(f)>=thr), 'dev evidence', run(Td, ev))
AGMIN = 0.8472
def agree_ok(r):
    e = [x for x in r['rows'] if elig(x)]
    rd = [x.get('reader', 0) for x in e]
    return int(np.argmax(rd)) == 0 and rd[0] >= AGMIN
print('dev A (evidence or agreement)', run(Td, lambda r,f: f[0] >= 1.1253 or agree_ok(r)))
for thr in (0.4, 0.45, 0.5, 0.55, 0.6):
    print('dev acceptor or agreement', thr, run(Td, lambda r,f: P(f) >= thr or agree_ok(r)))
# per dev set
for name, pref in (('faa','d'),('manuals','c2d')):
    T=[t for t in Td if t[0]['id'].startswith(pref) and (pref!='d' or not t[0]['id'].startswith('c2d'))]
    print(name, len(T), 'A', run(T, lambda r,f: f[0] >= 1.1253 or agree_ok(r)), 'acc.5+ag', run(T, lambda r,f: P(f) >= 0.5 or agree_ok(r)))
