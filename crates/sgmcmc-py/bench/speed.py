"""Speed of the Python package beside the CLI and SGMCMCJax, measured in one run on one machine.

    python crates/sgmcmc-py/bench/speed.py --out DIR \
        [--peers ../shared/bench/peers/.venv-peers/bin/python]

Workload (reference/peers.md): Bayesian logistic regression, N = 1,000,000, d = 10, f64,
x ~ N(0, I), prior N(0, 10 I), SGLD with step 1e-6 started at zero, batch 10,000 and 1,000. Reports:
1. the built-in model through Python against `sgmcmc run` (one chain; the chain's own it/s from
   summary.json, so set-up is excluded on both sides);
2. a JAX user model (from_jax) with 4 chains: chain-iterations per second (the 4 chains' calls are
   served by one Python call per step);
3. the overhead per callback: a NumPy model whose callbacks do nothing, batch 1 (one chain: one
   call per step; four chains: per step two calls of two chains each, made at the same time);
4. SGMCMCJax's fused SGLD loop (jax.lax.scan, one chain) on the same .npy files, through the
   peers' script (../shared/bench/peers/sgld_peers.py) when --peers is given.
Each figure is the median of --repeats runs. Raw results go to DIR/speed.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import sgmcmc

REPO = Path(__file__).resolve().parents[3]


def data(out: Path, rows: int, dim: int) -> tuple[Path, Path]:
    rng = np.random.default_rng(20211118)
    x = rng.standard_normal((rows, dim))
    theta = rng.standard_normal(dim)
    y = (rng.random(rows) < 1.0 / (1.0 + np.exp(-x @ theta))).astype(np.float64)
    np.save(out / "X.npy", x)
    np.save(out / "y.npy", y)
    return out / "X.npy", out / "y.npy"


def cli_rate(cli: Path, out: Path, xp: Path, yp: Path, batch: int, iterations: int) -> float:
    run = out / f"cli-{batch}"
    (out / f"cli-{batch}.toml").write_text(
        f"""
[data]
features = "{xp}"
targets = "{yp}"
[model]
kind = "logistic"
prior_variance = 10.0
[sampler]
kind = "sgld"
step_size = 1e-6
[gradient]
estimator = "minibatch"
batch_size = {batch}
[run]
seed = 0
chains = 1
iterations = {iterations}
burn_in = 0
init = "zeros"
bias_check = false
"""
    )
    subprocess.run(
        [str(cli), "run", str(out / f"cli-{batch}.toml"), "--out", str(run)],
        check=True,
        capture_output=True,
    )
    return float(json.loads((run / "summary.json").read_text())["iterations_per_second"])


def python_rate(model: Any, batch: int, iterations: int, chains: int = 1) -> float:
    idata = sgmcmc.sample(
        model,
        sgmcmc.SGLD(step_size=1e-6),
        sgmcmc.Minibatch(batch_size=batch),
        chains=chains,
        iterations=iterations,
        burn_in=0,
        init="zeros",
        bias_check=False,
        seed=0,
        progress=False,
        quiet=True,
    )
    return chains * float(sgmcmc.run_summary(idata)["iterations_per_second"])


class Idle(sgmcmc.models.UserModel):
    """Callbacks that return zeros: what is left is the cost of a call."""

    def __init__(self) -> None:
        super().__init__(dim=10, num_data=1_000)

    def log_prior(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros(theta.shape[0]), np.zeros_like(theta)

    def loglik_sum(self, theta: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros(theta.shape[0]), np.zeros_like(theta)

    def loglik_each(self, theta: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return np.zeros(idx.shape)

    def grad_each(self, theta: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return np.zeros((*idx.shape, theta.shape[1]))

    def grad_estimate(
        self, theta: np.ndarray, idx: np.ndarray, centre: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray, None]:
        return np.zeros_like(theta), np.zeros_like(theta), None


def peers(python: str, xp: Path, yp: Path, iterations: int) -> dict[str, float]:
    script = REPO.parent / "shared" / "bench" / "peers" / "sgld_peers.py"
    done = subprocess.run(
        [
            python,
            str(script),
            str(xp),
            str(yp),
            "--batches",
            "10000,1000",
            "--iterations",
            str(iterations),
            "--scores",
            "0",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    rates = {}
    for line in done.stdout.splitlines():
        m = re.match(r"(\w+) SGLD batch (\d+) f64: ([\d,]+) it/s", line)
        if m:
            rates[f"{m.group(1)} {m.group(2)}"] = float(m.group(3).replace(",", ""))
    return rates


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cli", type=Path, default=REPO / "target" / "release" / "sgmcmc")
    ap.add_argument(
        "--peers", default=None, help="the peers' Python (../shared/bench/peers/setup.sh)"
    )
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="sgmcmc-speed-"))
    xp, yp = data(work, a.rows, a.dim)
    iterations = {10_000: 4_000, 1_000: 20_000}
    median = statistics.median
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.platform()}",
        "rows": a.rows,
        "dim": a.dim,
        "repeats": a.repeats,
        "iterations": iterations,
    }
    builtin = sgmcmc.models.Logistic(xp, yp, prior_variance=10.0)
    import jax.numpy as jnp

    def loglik(theta: Any, xy: Any) -> Any:
        xi, yi = xy
        z = xi @ theta
        return yi * z - jnp.logaddexp(0.0, z)

    def logprior(theta: Any) -> Any:
        return -0.5 * jnp.sum(theta**2) / 10.0

    user = sgmcmc.models.from_jax(loglik, logprior, (np.load(xp), np.load(yp)), dim=a.dim)
    for batch, n in iterations.items():
        cli = [cli_rate(a.cli, work, xp, yp, batch, n) for _ in range(a.repeats)]
        py = [python_rate(builtin, batch, n) for _ in range(a.repeats)]
        python_rate(user, batch, 20, chains=4)  # compile at these shapes
        jx = [python_rate(user, batch, n // 4, chains=4) for _ in range(a.repeats)]
        results[f"batch {batch}"] = {
            "cli_it_per_s": cli,
            "python_builtin_it_per_s": py,
            "jax_4_chains_chain_it_per_s": jx,
        }
        print(
            f"batch {batch}: CLI {median(cli):,.0f} it/s, Python built-in {median(py):,.0f} it/s "
            f"({median(py) / median(cli) - 1:+.1%}), "
            f"JAX model 4 chains {median(jx):,.0f} chain-it/s",
            flush=True,
        )
    idle1 = [python_rate(Idle(), 1, 20_000) for _ in range(a.repeats)]
    idle4 = [python_rate(Idle(), 1, 20_000, chains=4) / 4 for _ in range(a.repeats)]
    results["idle_callback"] = {"one_chain_it_per_s": idle1, "four_chains_steps_per_s": idle4}
    print(
        f"callback overhead: {1e6 / median(idle1):.1f} us per call (1 chain), "
        f"{1e6 / median(idle4):.1f} us per step of 4 chains (two concurrent calls of 2 chains)",
        flush=True,
    )
    if a.peers:
        runs = [peers(a.peers, xp, yp, 4_000) for _ in range(a.repeats)]
        results["peers"] = runs
        for key in runs[0]:
            print(f"{key}: {median(r[key] for r in runs):,.0f} it/s", flush=True)
    shutil.rmtree(work)
    (a.out / "speed.json").write_text(json.dumps(results, indent=1) + "\n")
    print(f"raw: {a.out / 'speed.json'}")


if __name__ == "__main__":
    sys.exit(main())
