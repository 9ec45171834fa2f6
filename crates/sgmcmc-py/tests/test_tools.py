"""Tuning and Stein discrepancies from Python."""

from __future__ import annotations

import numpy as np
import pytest

import sgmcmc


def test_mamba_returns_the_rounds_and_a_winner_sample_accepts(small_logistic) -> None:
    """MAMBA over SGLD's steps: the winner is among the grid, its settings run as given, and a
    gradient-evaluation budget makes the choice reproducible from the seed."""
    x, y, _ = small_logistic
    model = sgmcmc.models.Logistic(x, y)
    grid = {"log10_step_size": {"from": -2.0, "to": -6.0, "by": 1.0}}
    kwargs = {"grid": grid, "budget_gradient_evaluations": 1e6, "seed": 3, "quiet": True}
    base = (sgmcmc.SGLD(step_size=1e-5), sgmcmc.ControlVariates(batch_size=200))
    first = sgmcmc.tune(model, *base, **kwargs)
    again = sgmcmc.tune(model, *base, **kwargs)
    assert first.method == "mamba"
    assert isinstance(first.sampler, sgmcmc.SGLD)
    assert isinstance(first.gradient, sgmcmc.ControlVariates)
    assert first.gradient.batch_size == 200
    steps = {10.0**k for k in (-2, -3, -4, -5, -6)}
    assert any(np.isclose(first.sampler.step_size, s) for s in steps)
    assert len(first.rounds[0]) == 5
    assert first.rounds[0][0]["metric"] <= first.rounds[0][-1]["metric"]
    assert first.sampler == again.sampler and first.rounds == again.rounds
    assert first.winner_draws is not None and first.winner_draws.shape[1] == 3
    # The largest step (1e-2 at N = 20,000) is far too large: it must not win.
    assert not np.isclose(first.sampler.step_size, 1e-2)
    idata = sgmcmc.sample(model, **first.settings, iterations=500, progress=False, quiet=True)
    assert idata.posterior["theta"].shape == (4, 500, 3)


def test_grid_search_and_heuristic(small_logistic) -> None:
    x, y, _ = small_logistic
    model = sgmcmc.models.Logistic(x, y)
    grid = {"log10_step_size": {"from": -3.0, "to": -5.0, "by": 1.0}}
    common = {"grid": grid, "budget_gradient_evaluations": 1e6, "seed": 1, "quiet": True}
    found = sgmcmc.tune(
        model,
        sgmcmc.SGLD(step_size=1e-5),
        method="grid_search",
        grid_search={"iterations": 300, "batch_size": 0.05},
        **common,
    )
    assert found.method == "grid_search" and len(found.points) == 3
    heuristic = sgmcmc.tune(model, sgmcmc.SGLD(step_size=1e-5), method="heuristic", **common)
    assert heuristic.sampler.step_size == pytest.approx(1.0 / 20_000)
    with pytest.raises(sgmcmc.SgmcmcError, match="mamba"):
        sgmcmc.tune(model, sgmcmc.SGLD(step_size=1e-5), method="bandit", **common)


def test_ksd_ranks_good_draws_above_biased_ones(small_logistic) -> None:
    """The KSD of arrays or InferenceData: draws from the posterior score lower than draws of a
    too-large-step SGLD, and lower than the same draws shifted by 3 posterior sds."""
    x, y, _ = small_logistic
    model = sgmcmc.models.Logistic(x, y)
    good = sgmcmc.sample(model, iterations=2_000, seed=1, progress=False, quiet=True)
    bad = sgmcmc.sample(
        model,
        sgmcmc.SGLD(step_size=1e-4),
        sgmcmc.Minibatch(batch_size=50),
        iterations=2_000,
        seed=1,
        progress=False,
        quiet=True,
    )
    k_good = sgmcmc.ksd(model, good, thin=4)
    k_bad = sgmcmc.ksd(model, bad, thin=4)
    assert k_good.draws == 2_000 and k_good.fssd is None
    assert k_good.ksd < k_bad.ksd / 5
    values = good.posterior["theta"].values
    shifted = values + 3 * values.reshape(-1, 3).std(axis=0)
    assert sgmcmc.ksd(model, shifted, thin=4).ksd > 5 * k_good.ksd
    # An array of one chain and a list of chains are accepted; FSSD-opt on request.
    assert sgmcmc.ksd(model, values[0]).draws == 2_000
    with_fssd = sgmcmc.ksd(model, list(values), thin=4, fssd=True)
    assert with_fssd.fssd is not None and with_fssd.fssd > 0
    with pytest.raises(sgmcmc.SgmcmcError, match="2 parameters, but the model has 3"):
        sgmcmc.ksd(model, values[..., :2])
    with pytest.raises(ValueError, match="NaN"):
        sgmcmc.ksd(model, np.full((10, 3), np.nan))


def test_nuts_reference_for_builtin_and_user_models(small_logistic) -> None:
    """NUTS on the built-in model and on the same model in JAX agree (means within 4.5 combined
    MCSE)."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    x, y, _ = small_logistic
    x, y = x[:5_000], y[:5_000]
    builtin = sgmcmc.reference(
        sgmcmc.models.Logistic(x, y), chains=2, warmup=300, draws=500, seed=2, progress=False
    )

    def loglik(theta, xy):
        xi, yi = xy
        z = xi @ theta
        return yi * z - jnp.logaddexp(0.0, z)

    user = sgmcmc.models.from_jax(loglik, lambda t: -0.5 * jnp.sum(t**2) / 10.0, (x, y), dim=3)
    mine = sgmcmc.reference(user, chains=2, warmup=300, draws=500, seed=2, progress=False)
    summary = sgmcmc.run_summary(mine)
    assert summary["method"] == "nuts"
    assert len(summary["reference"]["chains"]) == 2
    a = builtin.posterior["theta"].values.reshape(-1, 3)
    b = mine.posterior["theta"].values.reshape(-1, 3)
    se = np.sqrt(a.var(axis=0) / az_ess(builtin) + b.var(axis=0) / az_ess(mine))
    assert np.all(np.abs(a.mean(axis=0) - b.mean(axis=0)) < 4.5 * se)


def az_ess(idata) -> np.ndarray:
    import arviz as az

    return np.asarray(az.ess(idata)["theta"].values)
