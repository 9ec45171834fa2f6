# 150M x 10 f32 features x ~ N(0, I) and Bernoulli labels from a logistic model, written in chunks.
import numpy as np
from numpy.lib.format import open_memmap
N, D, C = 150_000_000, 10, 5_000_000
rng = np.random.default_rng(24)
w = rng.normal(size=D).astype(np.float32) * 0.5
X = open_memmap("/tmp/ooc_Xs.npy", mode="w+", dtype="<f4", shape=(N, D))
y = open_memmap("/tmp/ooc_ys.npy", mode="w+", dtype="<f4", shape=(N,))
for s in range(0, N, C):
    x = rng.standard_normal((C, D), dtype=np.float32)
    X[s:s + C] = x
    y[s:s + C] = (rng.random(C) < 1 / (1 + np.exp(-(x @ w)))).astype(np.float32)
X.flush(); y.flush()
