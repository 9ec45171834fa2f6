"""Quickstart: your own model in JAX, sampled, tuned with MAMBA, checked with the KSD, and
summarised with ArviZ.

    pip install ./crates/sgmcmc-py jax      # from the repository root
    python examples/python/quickstart.py
"""

from __future__ import annotations

import arviz as az
import jax.numpy as jnp
import numpy as np

import sgmcmc

# Data: Bayesian logistic regression, N = 50,000 rows, d = 5 (synthetic, fixed seed).
rng = np.random.default_rng(0)
N, d = 50_000, 5
X = rng.standard_normal((N, d))
theta_true = rng.standard_normal(d)
y = (rng.random(N) < 1.0 / (1.0 + np.exp(-X @ theta_true))).astype(np.float64)


# The model: a log-likelihood for ONE data point and a log-prior. sgmcmc vmaps, differentiates
# and jits them; the minibatch indices come from the Rust core's seeded streams.
def loglik(theta, xy):
    x, label = xy
    z = x @ theta
    return label * z - jnp.logaddexp(0.0, z)


def logprior(theta):
    return -0.5 * jnp.sum(theta**2) / 10.0  # theta ~ N(0, 10 I)


model = sgmcmc.models.from_jax(
    loglik, logprior, data=(X, y), dim=d, names=[f"x{j}" for j in range(d)]
)

# 1. Tune SGLD's step with MAMBA (budget in gradient evaluations: reproducible from the seed).
tuned = sgmcmc.tune(
    model,
    sgmcmc.SGLD(step_size=1e-5),
    sgmcmc.ControlVariates(batch_size=500),
    grid={"log10_step_size": {"from": -3.0, "to": -6.0, "by": 0.5}},
    budget_gradient_evaluations=1e6,
    seed=1,
)
print(f"MAMBA chose {tuned.label}: {tuned.sampler}")

# 2. Sample with the winner's settings: 4 chains, one Python call per step serves all of them.
idata = sgmcmc.sample(model, **tuned.settings, chains=4, iterations=4_000, burn_in=500, seed=2)

# 3. Check the draws against the posterior with the KSD (scores only, no reference draws), beside
#    a deliberately bad run (a 30x larger step).
bad = sgmcmc.sample(
    model,
    sgmcmc.SGLD(step_size=30 * tuned.sampler.step_size),  # type: ignore[attr-defined]
    sgmcmc.ControlVariates(batch_size=500),
    chains=4,
    iterations=4_000,
    burn_in=500,
    seed=2,
    quiet=True,
    progress=False,
)
good_ksd = sgmcmc.ksd(model, idata, thin=8).ksd
bad_ksd = sgmcmc.ksd(model, bad, thin=8).ksd
print(f"KSD: tuned run {good_ksd:.3f}, 30x step {bad_ksd:.3f}")
assert good_ksd < bad_ksd, "the KSD ranks the tuned run above the bad one"

# 4. Summarise with ArviZ; the run's own summary (bias check included) agrees.
print(az.summary(idata))
print("true theta:", np.round(theta_true, 3))
check = sgmcmc.run_summary(idata)["bias_check"]
print("bias check:", "passed" if check["passed"] else "FAILED")
