"""Fit the acceptor's weights on all training lists (the dumps of dump_train.sh) and print them with
the standardisation folded in: p = sigmoid(bias + sum(w_i * x_i)), x as accept_cv.feats."""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # fit.py, accept_cv.py
from fit import load  # noqa: E402

sys.argv = [sys.argv[0], sys.argv[1], sys.argv[2]]
import accept_cv as cv  # noqa: E402  (runs its figures; fit and feats below)

train = load(sys.argv[1].split(','))
T = cv.tops(train)
Xs = np.stack([f for r, f, y in T if f is not None])
P = cv.fit(T)
# recover raw weights: evaluate P's logit on unit vectors around zero
logit = lambda x: float(np.log(P(x) / (1 - P(x))))
b = logit(np.zeros(Xs.shape[1]))
w = [logit(np.eye(Xs.shape[1])[i]) - b for i in range(Xs.shape[1])]
print(json.dumps({"bias": b, "weights": w, "samples": int(len(Xs))}))
