"""Bad input gives an exception that names the problem, never a crash."""

from __future__ import annotations

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
