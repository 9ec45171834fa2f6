"""User models in JAX and NumPy: the same posterior as the built-in model, the same draws for
the same seed, and failing callbacks raised as Python exceptions."""

from __future__ import annotations

import arviz as az
import numpy as np
import pytest

import sgmcmc

jax = pytest.importorskip("jax")
jnp = jax.numpy


def jax_logistic(x: np.ndarray, y: np.ndarray) -> sgmcmc.models.UserModel:
    def loglik(theta, xy):
        xi, yi = xy
        z = xi @ theta
        return yi * z - jnp.logaddexp(0.0, z)

    def logprior(theta):
        return -0.5 * jnp.sum(theta**2) / 10.0

    return sgmcmc.models.from_jax(loglik, logprior, (x, y), dim=x.shape[1])


def numpy_logistic(x: np.ndarray, y: np.ndarray) -> sgmcmc.models.UserModel:
    def loglik(theta, batch):
        xb, yb = batch
        z = xb @ theta
        return yb * z - np.logaddexp(0.0, z)

    def grad_loglik(theta, batch):
        xb, yb = batch
        return (yb - 1.0 / (1.0 + np.exp(-(xb @ theta))))[:, None] * xb

    return sgmcmc.models.from_numpy(
        loglik,
        grad_loglik,
        lambda t: -0.5 * t @ t / 10.0,
        lambda t: -t / 10.0,
        (x, y),
        dim=x.shape[1],
    )


SAMPLERS = {
    "sgld": sgmcmc.SGLD(step_size=2e-5),
    "sghmc": sgmcmc.SGHMC(step_size=2e-5, inner_steps=2),
    "ccadl": sgmcmc.CCAdL(step_size=4e-3, diffusion=1.0),
}


def moments(idata) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    draws = idata.posterior["theta"].values
    flat = draws.reshape(-1, draws.shape[-1])
    ess = az.ess(idata)["theta"].values
    return flat.mean(axis=0), flat.std(axis=0), ess


@pytest.mark.parametrize("sampler", sorted(SAMPLERS))
def test_user_models_match_the_builtin_posterior(small_logistic, sampler: str) -> None:
    """JAX and NumPy logistic models give the built-in model's posterior (same sampler, control
    variates): means within 4.5 combined MCSE, sds within 15 %."""
    x, y, _ = small_logistic
    settings = {"chains": 4, "iterations": 3_000, "burn_in": 300, "seed": 21, "progress": False}
    gradient = sgmcmc.ControlVariates(batch_size=200)
    builtin = sgmcmc.sample(
        sgmcmc.models.Logistic(x, y, prior_variance=10.0), SAMPLERS[sampler], gradient, **settings
    )
    m0, s0, e0 = moments(builtin)
    for model in (jax_logistic(x, y), numpy_logistic(x, y)):
        idata = sgmcmc.sample(model, SAMPLERS[sampler], gradient, **settings)
        m, s, e = moments(idata)
        z = (m - m0) / np.sqrt(s**2 / e + s0**2 / e0)
        assert np.all(np.abs(z) < 4.5), (sampler, type(model).__name__, z)
        np.testing.assert_allclose(s, s0, rtol=0.15)


def test_same_seed_same_draws(small_logistic) -> None:
    """A JAX model's draws depend on the seed only (not on how the chains' calls were batched)."""
    x, y, _ = small_logistic
    model = jax_logistic(x, y)
    run = {"chains": 3, "iterations": 400, "seed": 4, "progress": False, "bias_check": False}
    a = sgmcmc.sample(model, sgmcmc.SGLD(step_size=1e-5), sgmcmc.Minibatch(batch_size=100), **run)
    b = sgmcmc.sample(model, sgmcmc.SGLD(step_size=1e-5), sgmcmc.Minibatch(batch_size=100), **run)
    np.testing.assert_array_equal(a.posterior["theta"].values, b.posterior["theta"].values)
    c = sgmcmc.sample(
        model, sgmcmc.SGLD(step_size=1e-5), sgmcmc.Minibatch(batch_size=100), **{**run, "seed": 5}
    )
    assert not np.array_equal(a.posterior["theta"].values, c.posterior["theta"].values)


class Broken(sgmcmc.models.UserModel):
    """A model whose likelihood callback misbehaves in a chosen way."""

    def __init__(self, how: str) -> None:
        super().__init__(dim=2, num_data=1_000)
        self.how = how

    def log_prior(self, theta):
        return -0.5 * np.sum(theta**2, axis=1), -theta

    def loglik_sum(self, theta, idx):
        if self.how == "raise":
            raise ZeroDivisionError("the user's bug")
        if self.how == "shape":
            return np.zeros(theta.shape[0]), np.zeros((theta.shape[0], 3))
        if self.how == "nan":
            return np.zeros(theta.shape[0]), np.full_like(theta, np.nan)
        if self.how == "pair":
            return np.zeros(theta.shape[0])
        return np.zeros(theta.shape[0]), np.zeros_like(theta)

    def loglik_each(self, theta, idx):
        return np.zeros(idx.shape)

    def grad_each(self, theta, idx):
        return np.zeros((*idx.shape, theta.shape[1]))


def test_callback_errors() -> None:
    run = {"iterations": 200, "progress": False, "init": "zeros"}
    sampler = sgmcmc.SGLD(step_size=1e-3)
    with pytest.raises(ZeroDivisionError, match="the user's bug") as info:
        sgmcmc.sample(Broken("raise"), sampler, **run)
    assert any("callback" in note for note in getattr(info.value, "__notes__", []))
    assert info.value.__traceback__ is not None
    with pytest.raises(sgmcmc.SgmcmcError, match=r"loglik_sum: grads must be .*shape \[\d+, 2\]"):
        sgmcmc.sample(Broken("shape"), sampler, **run)
    with pytest.raises(
        sgmcmc.SgmcmcError, match="every chain diverged.*grad_estimate returned NaN"
    ):
        sgmcmc.sample(Broken("nan"), sampler, **run)
    with pytest.raises(sgmcmc.SgmcmcError, match="expected a pair"):
        sgmcmc.sample(Broken("pair"), sampler, **run)
    # The well-behaved version runs.
    idata = sgmcmc.sample(Broken("none"), sampler, **run)
    assert idata.posterior["theta"].shape[-1] == 2


def test_bad_user_model() -> None:
    with pytest.raises(sgmcmc.SgmcmcError, match="dim = 0"):
        sgmcmc.sample(sgmcmc.models.UserModel(0, 10), sgmcmc.SGLD(step_size=1e-3), progress=False)
    with pytest.raises(sgmcmc.SgmcmcError, match="names"):
        sgmcmc.sample(
            sgmcmc.models.UserModel(2, 10, names=["a"]), sgmcmc.SGLD(step_size=1e-3), progress=False
        )
    with pytest.raises(ValueError, match="first dimension"):
        sgmcmc.models.from_numpy(None, None, None, None, (np.zeros((3, 2)), np.zeros(4)), dim=2)


def test_minibatch_mh_on_a_user_model(small_logistic) -> None:
    """The minibatch MH test (Barker + X_corr) needs per-datum log-likelihoods: a JAX model gives
    them, and its tempered posterior (T = 100) matches the built-in model's under the same
    settings (means within 4.5 combined MCSE)."""
    x, y, _ = small_logistic
    sampler = sgmcmc.MH(
        proposal={"kind": "random_walk", "sd": 0.05},
        test="barker",
        batch_size=500,
        temperature=100.0,
    )
    run = {"chains": 2, "iterations": 4_000, "burn_in": 500, "seed": 8, "progress": False}
    builtin = sgmcmc.sample(sgmcmc.models.Logistic(x, y), sampler, **run, quiet=True)
    mine = sgmcmc.sample(jax_logistic(x, y), sampler, **run, quiet=True)
    m0, s0, e0 = moments(builtin)
    m, s, e = moments(mine)
    z = (m - m0) / np.sqrt(s**2 / e + s0**2 / e0)
    assert np.all(np.abs(z) < 4.5), z


def test_coreset_mcmc_on_builtin_and_user_models(small_logistic) -> None:
    """Coreset MCMC with Hot DoG and the slice kernel: the same coreset (same seed) for the
    built-in model and its JAX twin, weights learned (their sum near N), and posteriors that
    agree with each other (means within 0.5 posterior sd) and with the full-data one (within
    3 posterior sds: a 200-point coreset approximates it)."""
    x, y, _ = small_logistic
    settings = {"size": 200, "iterations": 1_500, "draws": 1_000, "seed": 1, "quiet": True}
    builtin = sgmcmc.coreset(sgmcmc.models.Logistic(x, y), **settings)
    mine = sgmcmc.coreset(jax_logistic(x, y), **settings)
    a, b = sgmcmc.run_summary(builtin), sgmcmc.run_summary(mine)
    assert a["optimiser"] == "Hot DoG" and a["kernel"] == "slice"
    assert a["coreset"]["points"] == b["coreset"]["points"]
    assert 0.5 * len(y) < sum(a["coreset"]["weights"]) < 1.5 * len(y)
    full = sgmcmc.sample(sgmcmc.models.Logistic(x, y), iterations=2_000, progress=False, quiet=True)
    m_full, s_full, _ = moments(full)
    m_a, _, _ = moments(builtin)
    m_b, _, _ = moments(mine)
    assert np.all(np.abs(m_a - m_b) < 0.5 * s_full), (m_a, m_b)
    assert np.all(np.abs(m_a - m_full) < 3 * s_full), (m_a, m_full)
