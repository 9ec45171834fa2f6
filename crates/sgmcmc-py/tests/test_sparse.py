"""SciPy sparse features: kept sparse (compressed rows) from Python, with the same draws as the
CLI on the same data as a LIBSVM file, close to the dense route, and bad parts refused."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

import sgmcmc

sparse = pytest.importorskip("scipy.sparse")


def sparse_logistic(n: int, d: int, density: float, seed: int) -> tuple[object, np.ndarray]:
    """Features with about `density` non-zeros per row (N(0, 1) values), labels 0/1 from a
    logistic model."""
    rng = np.random.default_rng(seed)
    x = sparse.random(n, d, density=density, format="csr", random_state=seed, dtype=np.float64)
    x.data = rng.normal(size=x.nnz)
    w = rng.normal(size=d)
    p = 1.0 / (1.0 + np.exp(-(x @ w)))
    return x, (rng.random(n) < p).astype(np.float64)


def write_libsvm(path: Path, x: object, y: np.ndarray) -> None:
    csr = sparse.csr_matrix(x)
    with path.open("w") as f:
        for i in range(csr.shape[0]):
            a, b = csr.indptr[i], csr.indptr[i + 1]
            pairs = " ".join(
                f"{j + 1}:{float(v)!r}"
                for j, v in zip(csr.indices[a:b], csr.data[a:b], strict=True)
            )
            f.write(f"{int(y[i])} {pairs}\n")


def test_sparse_features_give_the_cli_draws_on_the_same_libsvm_data(
    tmp_path: Path, cli: Path
) -> None:
    """A SciPy CSR matrix (and the same matrix with each row's columns out of order) from
    Python, and `sgmcmc run` on the data as a LIBSVM file (which loads as sparse rows at this
    density): bit-identical draws; the dense array of the same data: the same posterior to
    rounding (another summation order)."""
    x, y = sparse_logistic(5_000, 40, 0.1, seed=3)
    write_libsvm(tmp_path / "train.svm", x, y)
    settings = {"chains": 2, "iterations": 1_000, "burn_in": 100, "seed": 5}
    sampler = sgmcmc.SGLD(step_size=1e-4)
    gradient = sgmcmc.Minibatch(batch_size=250)
    kwargs = {"prior_variance": 4.0, "intercept": False}

    def draws(features: object) -> np.ndarray:
        idata = sgmcmc.sample(
            sgmcmc.models.Logistic(features, y, **kwargs),
            sampler,
            gradient,
            progress=False,
            quiet=True,
            **settings,
        )
        return np.asarray(idata.posterior["theta"].values)

    from_csr = draws(x)
    # The same matrix as CSR with each row's columns reversed (valid SciPy, not canonical).
    indices, data = x.indices.copy(), x.data.copy()
    for i in range(x.shape[0]):
        a, b = x.indptr[i], x.indptr[i + 1]
        indices[a:b], data[a:b] = indices[a:b][::-1], data[a:b][::-1]
    unsorted = sparse.csr_matrix((data, indices, x.indptr.copy()), shape=x.shape)
    assert not unsorted.has_sorted_indices
    from_unsorted = draws(unsorted)
    assert not unsorted.has_sorted_indices, "the user's matrix was changed"
    (tmp_path / "run.toml").write_text(
        """
[data]
libsvm = "train.svm"
n_features = 40
[model]
kind = "logistic"
prior_variance = 4.0
intercept = false
[sampler]
kind = "sgld"
step_size = 1e-4
[gradient]
batch_size = 250
[run]
chains = 2
iterations = 1_000
burn_in = 100
seed = 5
"""
    )
    subprocess.run(
        [str(cli), "run", str(tmp_path / "run.toml"), "--out", str(tmp_path / "cli")],
        check=True,
        capture_output=True,
    )
    from_cli = np.asarray(sgmcmc.load(tmp_path / "cli").posterior["theta"].values)
    assert from_csr.shape == (2, 1_000, 40) and np.isfinite(from_csr).all()
    np.testing.assert_array_equal(from_csr, from_cli)
    np.testing.assert_array_equal(from_csr, from_unsorted)
    from_dense = draws(x.toarray())
    assert not np.array_equal(from_csr, from_dense), "the sparse route was not taken"
    np.testing.assert_allclose(from_csr, from_dense, rtol=0, atol=1e-9)


def test_bad_sparse_features_are_refused() -> None:
    """Non-finite values name the row and column; a target count that does not match the
    rows is refused before any sampling."""
    x, y = sparse_logistic(200, 5, 0.3, seed=1)
    bad = x.copy()
    bad.data[7] = np.nan
    row = int(np.searchsorted(bad.indptr, 7, side="right"))
    with pytest.raises(sgmcmc.SgmcmcError, match=rf"row {row}, column \d+: value NaN"):
        sgmcmc.sample(sgmcmc.models.Logistic(bad, y), sgmcmc.SGLD(step_size=1e-4), progress=False)
    with pytest.raises(sgmcmc.SgmcmcError, match="targets: 199 values for 200 rows"):
        sgmcmc.sample(
            sgmcmc.models.Logistic(x, y[:-1]), sgmcmc.SGLD(step_size=1e-4), progress=False
        )
