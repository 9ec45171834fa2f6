"""The .npy files of the side-by-side runs: X ~ N(0, I) 1,000,000 x 10 f64, y ~ Bernoulli(sigmoid(X theta*)),
theta* ~ N(0, 10 I), numpy default_rng(0). Run with the peers' venv: python gen_data.py (writes /tmp/peerX.npy, /tmp/peery.npy)."""
import numpy as np

rng = np.random.default_rng(0)
N, d = 1_000_000, 10
X = rng.standard_normal((N, d))
theta = rng.normal(0, np.sqrt(10), d)
p = 1 / (1 + np.exp(-X @ theta))
y = (rng.random(N) < p).astype(np.float64)
np.save("/tmp/peerX.npy", X)
np.save("/tmp/peery.npy", y)
