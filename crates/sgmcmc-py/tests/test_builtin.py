"""Built-in models through Python: the same draws as the CLI, the same summary as ArviZ, the
default path, and the output directory."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import arviz as az
import numpy as np
import pytest
import xarray as xr

import sgmcmc


@pytest.mark.parametrize("scheme", ["uniform", "block"])
def test_same_draws_as_the_cli(tmp_path: Path, small_logistic, cli: Path, scheme: str) -> None:
    """Arrays in memory, the same data as .npy files, and `sgmcmc run` on a run file with the
    same settings give bit-identical draws, with uniform and with block minibatches (whose
    random row order comes from the seed)."""
    x, y, _ = small_logistic
    np.save(tmp_path / "X.npy", x)
    np.save(tmp_path / "y.npy", y)
    settings = {"chains": 3, "iterations": 1_500, "burn_in": 200, "thin": 2, "seed": 11}
    sampler = sgmcmc.SGHMC(step_size=1e-5, inner_steps=3)
    gradient = sgmcmc.ControlVariates(batch_size=500, scheme=scheme)
    from_arrays = sgmcmc.sample(
        sgmcmc.models.Logistic(x, y, prior_variance=5.0),
        sampler,
        gradient,
        progress=False,
        **settings,
    )
    from_files = sgmcmc.sample(
        sgmcmc.models.Logistic(tmp_path / "X.npy", tmp_path / "y.npy", prior_variance=5.0),
        sampler,
        gradient,
        progress=False,
        **settings,
    )
    (tmp_path / "run.toml").write_text(
        """
[data]
features = "X.npy"
targets = "y.npy"
[model]
kind = "logistic"
prior_variance = 5.0
[sampler]
kind = "sghmc"
step_size = 1e-5
inner_steps = 3
[gradient]
estimator = "control_variates"
batch_size = 500
scheme = "SCHEME"
[run]
chains = 3
iterations = 1_500
burn_in = 200
thin = 2
seed = 11
""".replace("SCHEME", scheme)
    )
    subprocess.run(
        [str(cli), "run", str(tmp_path / "run.toml"), "--out", str(tmp_path / "cli")],
        check=True,
        capture_output=True,
    )
    from_cli = sgmcmc.load(tmp_path / "cli")
    a = from_arrays.posterior["theta"].values
    assert a.shape == (3, 750, 3)
    assert np.isfinite(a).all()
    np.testing.assert_array_equal(a, from_files.posterior["theta"].values)
    np.testing.assert_array_equal(a, from_cli.posterior["theta"].values)
    if scheme == "block":
        uniform = sgmcmc.sample(
            sgmcmc.models.Logistic(x, y, prior_variance=5.0),
            sampler,
            sgmcmc.ControlVariates(batch_size=500),
            progress=False,
            **settings,
        )
        assert not np.array_equal(a, uniform.posterior["theta"].values), "the scheme was ignored"
    assert list(from_arrays.posterior["theta_dim_0"].values) == list(
        from_cli.posterior["theta_dim_0"].values
    )


def test_az_summary_agrees_with_the_run_summary(small_logistic) -> None:
    """`az.summary` on the returned InferenceData gives the run's own numbers: mean, sd, bulk
    and tail ESS and R-hat to printing precision (the Rust diagnostics implement ArviZ's)."""
    x, y, _ = small_logistic
    idata = sgmcmc.sample(
        sgmcmc.models.Logistic(x, y),
        sgmcmc.SGLD(step_size=2e-5),
        sgmcmc.ControlVariates(batch_size=200),
        chains=4,
        iterations=2_000,
        seed=3,
        progress=False,
    )
    # A logistic regression's coefficients are unconstrained: no second copy of the draws.
    assert "unconstrained_posterior" not in idata.groups()
    ours = {row["name"]: row for row in sgmcmc.run_summary(idata)["parameters"]}
    theirs = az.summary(idata, round_to="none")
    assert len(theirs) == len(ours) == 3
    for label, row in theirs.iterrows():
        name = label[len("theta[") : -1]
        mine = ours[name]
        for key, column in [
            ("mean", "mean"),
            ("sd", "sd"),
            ("ess_bulk", "ess_bulk"),
            ("ess_tail", "ess_tail"),
            ("rhat", "r_hat"),
        ]:
            assert row[column] == pytest.approx(mine[key], rel=1e-6, abs=1e-9), (
                name,
                key,
            )


def test_default_path_from_python(small_logistic, tmp_path: Path) -> None:
    """`sample(model)` with no sampler takes the default path, reports its choices, finds the
    posterior (means within 5 MCSE of a long exact-gradient run's) and writes the outputs."""
    x, y, _ = small_logistic
    model = sgmcmc.models.Logistic(x, y)
    idata = sgmcmc.sample(model, iterations=2_000, seed=5, progress=False, out=tmp_path / "run")
    summary = sgmcmc.run_summary(idata)
    assert summary["default_path"]["choices"], "the default path reports its choices"
    assert summary["bias_check"]["status"] == "done"
    assert (tmp_path / "run" / "summary.json").is_file()
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["draws"] == summary["draws"]
    np.testing.assert_array_equal(
        sgmcmc.load(tmp_path / "run").posterior["theta"].values,
        idata.posterior["theta"].values,
    )
    # Reference: full-batch gradients (no minibatch noise) with BAOAB at a small step.
    reference = sgmcmc.sample(
        model,
        sgmcmc.BAOAB(step_size=2e-3, friction=1.0),
        sgmcmc.FullBatch(),
        iterations=4_000,
        burn_in=500,
        init="map",
        seed=6,
        progress=False,
    )
    got = idata.posterior["theta"].values.reshape(-1, 3)
    want = reference.posterior["theta"].values.reshape(-1, 3)
    ess = az.ess(idata)["theta"].values
    ess_ref = az.ess(reference)["theta"].values
    se = np.sqrt(got.var(axis=0) / ess + want.var(axis=0) / ess_ref)
    z = (got.mean(axis=0) - want.mean(axis=0)) / se
    assert np.all(np.abs(z) < 5), z
    assert np.allclose(got.std(axis=0), want.std(axis=0), rtol=0.15)


def test_sample_stats(small_logistic, tmp_path: Path) -> None:
    """sample_stats holds the state at each draw: the scheduled step (ε₁ = the step, then
    decreasing), SGNHT's thermostat, and MH's acceptances, which add up to the run's own count;
    the store written with ``out`` holds the same, for ``load`` and for xarray."""
    x, y, _ = small_logistic
    model = sgmcmc.models.Logistic(x, y)
    run = {
        "chains": 2,
        "iterations": 300,
        "burn_in": 0,
        "thin": 1,
        "progress": False,
        "quiet": True,
    }
    scheduled = sgmcmc.sample(
        model,
        sgmcmc.SGLD(step_size=1e-5, schedule={"kind": "polynomial", "b": 10, "gamma": 0.55}),
        **run,
    )
    steps = scheduled.sample_stats["step_size"].values
    assert steps.shape == (2, 300)
    assert steps[0, 0] == pytest.approx(1e-5, rel=1e-12)
    assert np.all(np.diff(steps, axis=1) < 0)
    assert steps[0, -1] == pytest.approx(1e-5 * (11 / 310) ** 0.55, rel=1e-9)
    sgnht = sgmcmc.sample(model, sgmcmc.SGNHT(step_size=1e-6), **run)
    assert np.isfinite(sgnht.sample_stats["thermostat"].values).all()
    assert "thermostat" not in scheduled.sample_stats
    mh = sgmcmc.sample(
        model,
        sgmcmc.MH(proposal={"kind": "random_walk", "sd": 0.02}, batch_size=500),
        out=tmp_path / "mh",
        **run,
    )
    accepted = mh.sample_stats["accepted"].values
    counts = [c["sampler_statistics"] for c in sgmcmc.run_summary(mh)["run"]["chains"]]
    assert [int(a.sum()) for a in accepted] == [c["accepted"] for c in counts]
    assert 0 < accepted.mean() < 1
    loaded = sgmcmc.load(tmp_path / "mh")
    np.testing.assert_array_equal(loaded.posterior["theta"].values, mh.posterior["theta"].values)
    assert set(loaded.sample_stats.data_vars) == set(mh.sample_stats.data_vars)
    np.testing.assert_array_equal(loaded.sample_stats["accepted"].values, accepted)
    assert sgmcmc.run_summary(loaded) == sgmcmc.run_summary(mh)
    tree = xr.open_datatree(tmp_path / "mh" / "draws.zarr", engine="zarr")
    np.testing.assert_array_equal(tree["sample_stats"]["accepted"].values, accepted)
    sgnht_out = sgmcmc.sample(model, sgmcmc.SGNHT(step_size=1e-6), out=tmp_path / "sgnht", **run)
    stored = sgmcmc.load(tmp_path / "sgnht").sample_stats
    for name in ("step_size", "thermostat"):
        np.testing.assert_array_equal(stored[name].values, sgnht_out.sample_stats[name].values)
