"""Shared fixtures: small synthetic data sets (the project's tests generate their own data) and
the CLI binary for comparisons."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[3]


def logistic_data(rows: int, dim: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x ~ N(0, I), θ* ~ N(0, I), y ~ Bernoulli(σ(xᵀθ*))."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, dim))
    theta = rng.standard_normal(dim)
    y = (rng.random(rows) < 1.0 / (1.0 + np.exp(-x @ theta))).astype(np.float64)
    return x, y, theta


@pytest.fixture(scope="session")
def small_logistic() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return logistic_data(20_000, 3, seed=7)


@pytest.fixture(scope="session")
def cli() -> Path:
    """The `sgmcmc` binary: $SGMCMC_CLI (the test script sets it; a missing file is an error),
    else target/release/sgmcmc, else `sgmcmc` on the PATH; skipped only when none exists."""
    given = os.environ.get("SGMCMC_CLI")
    if given:
        path = Path(given)
        assert path.is_file(), f"SGMCMC_CLI={given} does not exist"
        return path
    built = REPO / "target" / "release" / "sgmcmc"
    if built.is_file():
        return built
    found = shutil.which("sgmcmc")
    if found:
        return Path(found)
    pytest.skip("no sgmcmc binary (cargo build --release, or set SGMCMC_CLI)")
