"""Ctrl-C (SIGINT) while sampling stops the chains and returns the draws made so far."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

# Both scripts: logistic data, then "ready" once sampling is about to start.
PREAMBLE = """
import sys, warnings
import numpy as np
import sgmcmc
rng = np.random.default_rng(0)
x = rng.standard_normal((20_000, 3))
y = (rng.random(20_000) < 0.5).astype(float)
print("ready", flush=True)
"""

SCRIPT = (
    PREAMBLE
    + """
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    idata = sgmcmc.sample(
        sgmcmc.models.Logistic(x, y), sgmcmc.SGLD(step_size=1e-5), sgmcmc.Minibatch(batch_size=10),
        chains=2, iterations=500_000_000, burn_in=0, thin=100, bias_check=False, progress=False,
        out=sys.argv[1],
    )
draws = idata.posterior["theta"].values
import arviz as az, xarray as xr
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    tree = xr.open_datatree(sys.argv[1] + "/draws.zarr", engine="zarr")
    stored = az.InferenceData.from_datatree(tree)
print("stored", bool(np.isfinite(az.summary(stored)["mean"].to_numpy()).all()), flush=True)
print("draws", draws.shape[1], bool(np.isfinite(draws).all()), flush=True)
print("warned", any("interrupted" in str(w.message) for w in caught), flush=True)
"""
)


def interrupted(script: str, args: list[str], after: float) -> dict[str, str]:
    """Runs `script`, sends SIGINT `after` seconds after it is ready, and returns its printed
    `key value` lines (it must exit 0)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(after)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return dict(line.split(" ", 1) for line in out.strip().splitlines())


def test_sigint_returns_the_draws_so_far(tmp_path) -> None:
    """...and the store's posterior (chains stopped at different draws) gives a finite ArviZ
    summary: the chains cut to the shortest (before, the shorter chain's NaN rows made it NaN)."""
    lines = interrupted(SCRIPT, [str(tmp_path / "out")], after=3.0)
    kept, finite = lines["draws"].split()
    assert int(kept) > 100, lines
    assert finite == "True"
    assert lines["warned"] == "True"
    assert lines["stored"] == "True"


REFERENCE = (
    PREAMBLE
    + """
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    idata = sgmcmc.reference(
        sgmcmc.models.Logistic(x, y), chains=2, warmup=100, draws=10_000_000, progress=False
    )
draws = idata.posterior["theta"].values
print("draws", draws.shape[1], bool(np.isfinite(draws).all()), flush=True)
print("warned", any("interrupted" in str(w.message) for w in caught), flush=True)
"""
)


def test_sigint_during_reference_returns_the_draws_so_far() -> None:
    """Before, NUTS could not be stopped: the Ctrl-C was raised and the draws were lost."""
    lines = interrupted(REFERENCE, [], after=4.0)
    kept, finite = lines["draws"].split()
    assert 0 < int(kept) < 10_000_000, lines
    assert finite == "True"
    assert lines["warned"] == "True"
