"""Priors per parameter group and constrained parameters from Python (issue 27): a linear
regression whose sigma has a half-Cauchy prior, and the ordered normal mixture, come back on
the scale the user thinks in (sigma, not log sigma; mu[1] < mu[2]) under their names, in the
InferenceData and in the summary alike, and in a store read back with ``load``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import sgmcmc
from sgmcmc import models, priors


def _full_batch_sgld(model: models.BuiltinModel, step_size: float, **kwargs: Any) -> Any:
    """Two chains of full-batch SGLD from the MAP, 4,000 iterations after 1,000 burn-in."""
    return sgmcmc.sample(
        model,
        sgmcmc.SGLD(step_size=step_size),
        sgmcmc.FullBatch(),
        chains=2,
        iterations=4000,
        burn_in=1000,
        init="map",
        bias_check=False,
        progress=False,
        quiet=True,
        **kwargs,
    )


def test_linear_regression_reports_sigma(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    x = rng.uniform(-1.0, 1.0, size=(2000, 1))
    y = 1.0 + 2.0 * x[:, 0] + 0.5 * rng.standard_normal(2000)
    model = models.Linear(
        x,
        y,
        intercept=True,
        priors={
            "coefficients": priors.flat(),
            "intercept": priors.normal(0, 10),
            "sigma": priors.half_cauchy(2.5),
        },
    )
    idata = _full_batch_sgld(model, 2e-6, out=tmp_path / "out")
    theta = idata.posterior["theta"]
    assert list(theta["theta_dim_0"].values) == ["beta[0]", "intercept", "sigma"]
    sigma = theta.sel(theta_dim_0="sigma").values
    assert np.all((sigma > 0.4) & (sigma < 0.6)), "sigma on its own scale"
    summary = {p["name"]: p["mean"] for p in sgmcmc.run_summary(idata)["parameters"]}
    assert summary["sigma"] == pytest.approx(float(sigma.mean()), rel=1e-12)
    assert summary["sigma"] == pytest.approx(0.5, abs=0.05)
    loaded = sgmcmc.load(tmp_path / "out")
    np.testing.assert_array_equal(loaded.posterior["theta"].values, theta.values)
    # The same draws on the sampler's scale: log sigma, the coefficients unchanged; from the
    # run and from its store alike.
    free = idata.unconstrained_posterior["theta"]
    np.testing.assert_allclose(free.sel(theta_dim_0="sigma").values, np.log(sigma), rtol=1e-12)
    np.testing.assert_array_equal(
        free.sel(theta_dim_0=["beta[0]", "intercept"]).values,
        theta.sel(theta_dim_0=["beta[0]", "intercept"]).values,
    )
    np.testing.assert_array_equal(loaded.unconstrained_posterior["theta"].values, free.values)
    # The KSD takes the draws as they are reported (sigma) and scores them on theta (log
    # sigma), where the Stein identity holds: sigmas 0.05 (six posterior sds) too large are far
    # worse. (Scored as if sigma were log sigma, both would sit in the same far tail.)
    good = sgmcmc.ksd(model, idata, thin=20).ksd
    shifted = theta.values.copy()
    shifted[..., 2] += 0.05
    assert sgmcmc.ksd(model, shifted, thin=20).ksd > 3 * good
    with pytest.raises(sgmcmc.SgmcmcError, match="draws"):
        sgmcmc.ksd(model, -shifted, thin=20)
    # ArviZ reading the store itself sees the group under its schema name.
    import arviz as az
    import xarray as xr

    tree = xr.open_datatree(tmp_path / "out" / "draws.zarr", engine="zarr")
    opened = az.InferenceData.from_datatree(tree)
    np.testing.assert_array_equal(opened.unconstrained_posterior["theta"].values, free.values)


def test_normal_mixture_reports_ordered_means() -> None:
    rng = np.random.default_rng(8)
    first = rng.random(1000) < 0.3
    y = np.where(first, -1.0 + 0.5 * rng.standard_normal(1000), 2.0 + rng.standard_normal(1000))
    idata = _full_batch_sgld(models.NormalMixture(y), 2e-5)
    theta = idata.posterior["theta"]
    names = list(theta["theta_dim_0"].values)
    assert names == ["mu[1]", "mu[2]", "sigma[1]", "sigma[2]", "theta"]
    means = theta.mean(dim=("chain", "draw")).values
    np.testing.assert_allclose(means, [-1.0, 2.0, 0.5, 1.0, 0.3], atol=0.15)
    values = theta.values
    assert np.all(values[..., 0] < values[..., 1])
    free = idata.unconstrained_posterior["theta"].values
    np.testing.assert_allclose(free[..., 1], np.log(values[..., 1] - values[..., 0]), rtol=1e-9)


def test_a_prior_on_the_wrong_support_is_named() -> None:
    model = models.Linear(
        np.ones((10, 1)), np.ones(10), priors={"coefficients": priors.half_normal(1.0)}
    )
    with pytest.raises(sgmcmc.SgmcmcError, match="priors.coefficients"):
        sgmcmc.sample(model, sgmcmc.SGLD(step_size=1e-3), iterations=10, progress=False)


@pytest.mark.parametrize("kind", ["logistic", "poisson"])
def test_glm_priors_per_group(kind: str) -> None:
    """Five data points and tight priors: N(3, 0.1²) on the coefficient, N(−2, 0.1²) on the
    intercept. The posterior sits at the priors (NUTS), which the default N(0, 10) would not."""
    x = np.array([[0.1], [-0.2], [0.3], [0.0], [-0.1]])
    y = np.array([1.0, 0.0, 1.0, 0.0, 1.0])
    groups = {"coefficients": priors.normal(3, 0.1), "intercept": priors.normal(-2, 0.1)}
    build = models.Logistic if kind == "logistic" else models.Poisson
    idata = sgmcmc.reference(
        build(x, y, intercept=True, priors=groups), chains=2, draws=1000, seed=1, progress=False
    )
    means = idata.posterior["theta"].mean(dim=("chain", "draw")).values
    np.testing.assert_allclose(means, [3.0, -2.0], atol=0.1)
