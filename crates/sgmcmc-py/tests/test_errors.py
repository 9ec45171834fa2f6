"""Bad input gives an exception that names the problem, never a crash."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import sgmcmc


def run(model, sampler=None, gradient=None, **kw):
    kw.setdefault("iterations", 100)
    kw.setdefault("progress", False)
    return sgmcmc.sample(model, sampler, gradient, **kw)


def test_nan_in_features(small_logistic) -> None:
    x, y, _ = small_logistic
    x = x.copy()
    x[17, 1] = np.nan
    with pytest.raises(sgmcmc.SgmcmcError, match="NaN"):
        run(sgmcmc.models.Logistic(x, y), sgmcmc.SGLD(step_size=1e-5))


def test_labels_not_binary(small_logistic) -> None:
    x, y, _ = small_logistic
    y = y.copy()
    y[3] = 2.0
    with pytest.raises(sgmcmc.SgmcmcError, match="label"):
        run(sgmcmc.models.Logistic(x, y), sgmcmc.SGLD(step_size=1e-5))


def test_wrong_shapes(small_logistic) -> None:
    x, y, _ = small_logistic
    with pytest.raises(sgmcmc.SgmcmcError, match="values for 20000 rows"):
        run(sgmcmc.models.Logistic(x, y[:-1]), sgmcmc.SGLD(step_size=1e-5))
    with pytest.raises(ValueError, match="2-D"):
        run(sgmcmc.models.Logistic(x[:, 0], y), sgmcmc.SGLD(step_size=1e-5))
    with pytest.raises(ValueError, match="1-D"):
        run(sgmcmc.models.Logistic(x, y[:, None]), sgmcmc.SGLD(step_size=1e-5))


def test_bad_settings(small_logistic) -> None:
    x, y, _ = small_logistic
    model = sgmcmc.models.Logistic(x, y)
    with pytest.raises(sgmcmc.SgmcmcError, match="step"):
        run(model, sgmcmc.SGLD(step_size=-1.0))
    with pytest.raises(sgmcmc.SgmcmcError, match="batch"):
        run(model, sgmcmc.SGLD(step_size=1e-5), sgmcmc.Minibatch(batch_size=0))
    with pytest.raises(sgmcmc.SgmcmcError, match="chains"):
        run(model, sgmcmc.SGLD(step_size=1e-5), chains=0)
    with pytest.raises(TypeError, match="sampler"):
        run(model, "sgld")
    with pytest.raises(TypeError, match="model"):
        run((x, y), sgmcmc.SGLD(step_size=1e-5))


def test_missing_file(tmp_path) -> None:
    with pytest.raises(sgmcmc.SgmcmcError, match="nothing.npy"):
        run(
            sgmcmc.models.Logistic(tmp_path / "nothing.npy", tmp_path / "y.npy"),
            sgmcmc.SGLD(step_size=1e-5),
        )


def test_every_chain_diverged(small_logistic) -> None:
    x, _, _ = small_logistic
    y = x @ np.array([1.0, -1.0, 0.5])
    with pytest.raises(sgmcmc.SgmcmcError, match="every chain diverged"):
        run(sgmcmc.models.Linear(x, y), sgmcmc.SGLD(step_size=1.0), iterations=500)


class Quartic(sgmcmc.models.UserModel):
    """log π(θ) = −θ⁴/4: SGLD is stable near 0 and diverges from far out (step·3θ² > 2)."""

    def __init__(self) -> None:
        super().__init__(dim=1, num_data=10)

    def log_prior(self, theta):
        with np.errstate(over="ignore", invalid="ignore"):
            return -0.25 * theta[:, 0] ** 4, -(theta**3)

    def loglik_sum(self, theta, idx):
        return np.zeros(theta.shape[0]), np.zeros_like(theta)

    def loglik_each(self, theta, idx):
        return np.zeros(idx.shape)

    def grad_each(self, theta, idx):
        return np.zeros((*idx.shape, theta.shape[1]))


def test_a_diverged_chain_is_left_out_or_kept_with_its_divergence(tmp_path) -> None:
    """Chain 1 starts far out and diverges at once, chain 0 does not: by default the posterior
    holds chain 0 only (as the run summary) with a warning; with keep_diverged both chains, and
    sample_stats.diverging marks where chain 1 ended."""
    np.savetxt(tmp_path / "theta0.txt", np.array([[0.1], [50.0]]))
    run = {
        "chains": 2,
        "iterations": 200,
        "burn_in": 0,
        "init": tmp_path / "theta0.txt",
        "bias_check": False,
        "progress": False,
        "quiet": True,
    }
    with pytest.warns(UserWarning, match=r"chains \[1\] diverged"):
        idata = sgmcmc.sample(Quartic(), sgmcmc.SGLD(step_size=1e-2), **run)
    assert list(idata.posterior["chain"].values) == [0]
    assert idata.posterior["theta"].shape == (1, 200, 1)
    with pytest.warns(UserWarning, match="NaN after their last draw"):
        kept = sgmcmc.sample(
            Quartic(),
            sgmcmc.SGLD(step_size=1e-2),
            keep_diverged=True,
            out=tmp_path / "run",
            **run,
        )
    theta = kept.posterior["theta"].values
    diverging = kept.sample_stats["diverging"].values
    assert theta.shape[:2] == diverging.shape == (2, 200)
    assert not diverging[0].any() and np.isfinite(theta[0]).all()
    ended = int(np.argmax(diverging[1]))
    assert diverging[1].sum() == 1 and np.isnan(theta[1, ended:]).all()
    assert np.isfinite(theta[1, :ended]).all()
    np.testing.assert_array_equal(theta[0], idata.posterior["theta"].values[0])
    # The stored run reads back either way, as sample returned it.
    stored = sgmcmc.load(tmp_path / "run", keep_diverged=True)
    np.testing.assert_array_equal(stored.posterior["theta"].values, theta)
    np.testing.assert_array_equal(stored.sample_stats["diverging"].values, diverging)
    np.testing.assert_array_equal(
        sgmcmc.load(tmp_path / "run").posterior["theta"].values, idata.posterior["theta"].values
    )
    # The store as ArviZ opens it: its posterior is the valid chain only, so the summary is
    # finite (before, it held chain 1's NaN rows and every mean was NaN).
    assert_arviz_summary_is_finite(tmp_path / "run" / "draws.zarr", chains=[0])


def assert_arviz_summary_is_finite(store: Path, chains: list[int]) -> None:
    import warnings

    import arviz as az
    import xarray as xr

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # all_chains is not an InferenceData group name
        idata = az.InferenceData.from_datatree(xr.open_datatree(store, engine="zarr"))
    assert list(idata.posterior["chain"].values) == chains
    assert not idata.sample_stats["diverging"].values.any()
    table = az.summary(idata)
    assert np.isfinite(table["mean"].to_numpy()).all(), table


def test_runs_that_keep_no_draws_are_refused(small_logistic) -> None:
    x, y, _ = small_logistic
    model = sgmcmc.models.Logistic(x, y)
    with pytest.raises(sgmcmc.SgmcmcError, match="iterations must be at least 1"):
        run(model, sgmcmc.SGLD(step_size=1e-5), iterations=0)
    with pytest.raises(sgmcmc.SgmcmcError, match="no draw would be kept"):
        run(model, sgmcmc.SGLD(step_size=1e-5), iterations=10, thin=20)


def test_an_earlier_run_is_refused_unless_overwritten(small_logistic, tmp_path) -> None:
    """`out` holding an earlier run is refused (not mixed with the new draws); overwrite=True
    replaces it."""
    x, y, _ = small_logistic
    model = sgmcmc.models.Logistic(x, y)
    out = tmp_path / "run"
    run(model, sgmcmc.SGLD(step_size=1e-5), chains=2, out=out)
    with pytest.raises(sgmcmc.SgmcmcError, match="already holds a run"):
        run(model, sgmcmc.SGLD(step_size=1e-5), chains=2, iterations=50, out=out)
    run(model, sgmcmc.SGLD(step_size=1e-5), chains=2, iterations=50, out=out, overwrite=True)
    assert sgmcmc.load(out).posterior["theta"].shape[:2] == (2, 50)


def test_a_ksd_of_few_draws_warns_with_the_count(small_logistic) -> None:
    x, y, _ = small_logistic
    model = sgmcmc.models.Logistic(x, y)
    draws = np.zeros((2, 10, x.shape[1]))
    with pytest.warns(UserWarning, match="rests on only 20 draws"):
        sgmcmc.ksd(model, draws)
