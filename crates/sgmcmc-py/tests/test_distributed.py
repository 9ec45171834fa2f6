"""A run's chains as tasks on a local Ray cluster (a head on 127.0.0.1 with two worker CPUs), on
local processes and as the CLI's chain ranges: the draws are bit for bit those of one process;
a worker killed mid-chain is retried and its chain continues from its checkpoint (issue 26).

Without Ray installed these tests are skipped, unless SGMCMC_REQUIRE_RAY=1 (scripts/test sets
it), which makes a missing Ray an error.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import sgmcmc


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    if os.environ.get("SGMCMC_REQUIRE_RAY") == "1":
        import ray
    else:
        ray = pytest.importorskip("ray")
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        _node_ip_address="127.0.0.1",
    )
    yield ray
    ray.shutdown()


SETTINGS: dict[str, Any] = {
    "chains": 4,
    "iterations": 3_000,
    "burn_in": 100,
    "thin": 3,
    "seed": 21,
    "progress": False,
    "quiet": True,
}
RUN_FILE = """
[data]
features = "X.npy"
targets = "y.npy"
[model]
kind = "logistic"
prior_variance = 5.0
[sampler]
kind = "sghmc"
step_size = 1e-5
inner_steps = 2
[gradient]
estimator = "control_variates"
batch_size = 200
[run]
chains = 4
iterations = 3_000
burn_in = 100
thin = 3
seed = 21
"""


def theta(idata: Any) -> np.ndarray:
    return np.asarray(idata.posterior["theta"].values)


def tasks(idata: Any) -> list[dict[str, Any]]:
    return list(json.loads(idata.posterior.attrs["sgmcmc_tasks"]))


def test_chains_on_ray_processes_and_cli_ranges_are_the_local_draws(
    ray_cluster: Any, small_logistic, cli: Path, tmp_path: Path
) -> None:
    x, y, _ = small_logistic
    model = sgmcmc.models.Logistic(x, y, prior_variance=5.0)
    sampler = sgmcmc.SGHMC(step_size=1e-5, inner_steps=2)
    gradient = sgmcmc.ControlVariates(batch_size=200)
    local = sgmcmc.sample(model, sampler, gradient, out=tmp_path / "local", **SETTINGS)
    on_ray = sgmcmc.sample(
        model,
        sampler,
        gradient,
        out=tmp_path / "ray",
        executor=sgmcmc.RayExecutor(),
        **SETTINGS,
    )
    on_processes = sgmcmc.sample(
        model,
        sampler,
        gradient,
        out=tmp_path / "processes",
        executor=sgmcmc.ProcessExecutor(2),
        **SETTINGS,
    )
    # The CLI's chain ranges (one batch-scheduler task per range) on the same data as files.
    np.save(tmp_path / "X.npy", x)
    np.save(tmp_path / "y.npy", y)
    (tmp_path / "run.toml").write_text(RUN_FILE)
    split = tmp_path / "split"
    for extra in (["--prepare"], ["--chains", "2-3"], ["--chains", "0-1"], ["--finish"]):
        subprocess.run(
            [str(cli), "run", str(tmp_path / "run.toml"), "--out", str(split), *extra],
            check=True,
            capture_output=True,
        )
    expected = theta(local)
    assert expected.shape == (4, 1_000, 3) and np.isfinite(expected).all()
    np.testing.assert_array_equal(theta(on_ray), expected)
    np.testing.assert_array_equal(theta(on_processes), expected)
    np.testing.assert_array_equal(theta(sgmcmc.load(split)), expected)
    for name in local.sample_stats:
        np.testing.assert_array_equal(
            on_ray.sample_stats[name].values, local.sample_stats[name].values
        )
    # One task per chain, over both workers' processes, none from a checkpoint.
    reports = tasks(on_ray)
    assert [[c["chain"] for c in t["chains"]] for t in reports] == [[0], [1], [2], [3]]
    assert all(
        c["draws"] == 1_000 and c["from_checkpoint"] == 0 for t in reports for c in t["chains"]
    )
    assert len({t["process"] for t in reports}) >= 2
    assert sgmcmc.run_summary(on_ray)["parameters"] == sgmcmc.run_summary(local)["parameters"]


def test_a_jax_model_on_ray_gives_the_local_draws(ray_cluster: Any, tmp_path: Path) -> None:
    """The model is rebuilt on the worker (x64 on before its functions are compiled), so its
    float64 arithmetic is the driver's."""
    pytest.importorskip("jax")
    from conftest import logistic_data
    from test_user_models import jax_logistic

    x, y, _ = logistic_data(4_000, 3, seed=2)
    model = jax_logistic(x, y)
    settings = {**SETTINGS, "chains": 2, "iterations": 600, "thin": 1}
    args = (sgmcmc.SGLD(step_size=1e-4), sgmcmc.Minibatch(batch_size=100))
    local = sgmcmc.sample(model, *args, **settings)
    on_ray = sgmcmc.sample(
        model, *args, out=tmp_path / "ray", executor=sgmcmc.RayExecutor(), **settings
    )
    np.testing.assert_array_equal(theta(on_ray), theta(local))


def holder(lock: Path) -> int | None:
    """The process id in a held chain lock, if written yet."""
    try:
        text = lock.read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text else None


def test_a_killed_worker_is_retried_and_its_chain_resumes(
    ray_cluster: Any, small_logistic, tmp_path: Path
) -> None:
    """kill -9 of the worker running chain 0, after its first checkpoint: Ray runs the task
    again, the chain continues from that checkpoint, and the store is the local run's, every
    chain once."""
    x, y, _ = small_logistic
    model = sgmcmc.models.Logistic(x, y, prior_variance=5.0)
    args = (sgmcmc.SGLD(step_size=2e-5), sgmcmc.Minibatch(batch_size=50))
    settings = {
        **SETTINGS,
        "chains": 2,
        "iterations": 1_500_000,
        "thin": 300,
        "bias_check": False,
        "checkpoint_seconds": 0.2,
    }
    out = tmp_path / "ray"
    result: dict[str, Any] = {}

    def drive() -> None:
        try:
            result["idata"] = sgmcmc.sample(
                model, *args, out=out, executor=sgmcmc.RayExecutor(max_retries=2), **settings
            )
        except BaseException as e:  # reported by the test below
            result["error"] = e

    driver = threading.Thread(target=drive)
    driver.start()
    lock = out / ".chain-0.lock"
    checkpoint = out / "checkpoints" / "chain-0.state"
    deadline = time.monotonic() + 120
    killed = None
    while time.monotonic() < deadline and driver.is_alive():
        pid = holder(lock)
        if pid is not None and checkpoint.is_file():
            os.kill(pid, signal.SIGKILL)
            killed = pid
            break
        time.sleep(0.05)
    driver.join(timeout=600)
    assert "error" not in result, result.get("error")
    assert killed is not None, "chain 0 finished before a checkpoint could be seen"
    idata = result["idata"]
    chain0 = tasks(idata)[0]
    assert chain0["process"] != killed, "the task was not run again"
    assert chain0["chains"][0]["from_checkpoint"] > 0, "chain 0 started over"
    local = sgmcmc.sample(model, *args, **settings)
    np.testing.assert_array_equal(theta(idata), theta(local))
    assert theta(idata).shape == (2, 5_000, 3)


def test_mamba_on_ray_picks_the_local_arm(ray_cluster: Any, small_logistic) -> None:
    """Each round's arms as Ray tasks (one per arm), halving at the driver: with a budget in
    gradient evaluations, the same rounds, winner and winner's draws as the local run."""
    x, y, _ = small_logistic
    model = sgmcmc.models.Logistic(x, y, prior_variance=10.0)
    settings: dict[str, Any] = {
        "grid": {
            "log10_step_size": {"from": -3, "to": -6, "by": 0.5},
            "batch_size": [0.005, 0.05],
        },
        "budget_gradient_evaluations": 2e6,
        "seed": 4,
        "quiet": True,
    }
    args = (sgmcmc.SGLD(step_size=1e-4), sgmcmc.ControlVariates(batch_size=100))
    local = sgmcmc.tune(model, *args, **settings)
    on_ray = sgmcmc.tune(model, *args, executor=sgmcmc.RayExecutor(), **settings)
    assert [len(r) for r in local.rounds] == [14, 4]
    assert on_ray.label == local.label
    assert on_ray.rounds == local.rounds
    np.testing.assert_array_equal(on_ray.winner_draws, local.winner_draws)
    with pytest.raises(ValueError, match="runs MAMBA's arms"):
        sgmcmc.tune(model, *args, method="grid_search", executor=sgmcmc.RayExecutor(), **settings)


def test_coreset_replicas_on_ray_are_the_local_runs(ray_cluster: Any, small_logistic) -> None:
    """Three replicas of Coreset MCMC as Ray tasks: replica r is the run with seed + r, bit for
    bit, wherever it ran; replicas differ from one another."""
    x, y, _ = small_logistic
    model = sgmcmc.models.Logistic(x, y)
    settings: dict[str, Any] = {
        "size": 100,
        "iterations": 600,
        "draws": 300,
        "seed": 5,
        "quiet": True,
    }
    on_ray = sgmcmc.coreset(model, replicas=3, executor=sgmcmc.RayExecutor(), **settings)
    assert len(on_ray) == 3
    for r, idata in enumerate(on_ray):
        alone = sgmcmc.coreset(model, **{**settings, "seed": 5 + r})
        np.testing.assert_array_equal(theta(idata), theta(alone))
        assert sgmcmc.run_summary(idata)["coreset"] == sgmcmc.run_summary(alone)["coreset"]
    assert not np.array_equal(theta(on_ray[0]), theta(on_ray[1]))
    with pytest.raises(ValueError, match="give replicas"):
        sgmcmc.coreset(model, executor=sgmcmc.RayExecutor(), **settings)


def test_ksd_scores_on_ray_give_the_local_discrepancy(ray_cluster: Any, small_logistic) -> None:
    """The full-batch scores computed by tasks, 256 thinned draws each (chains of 700 and 300
    thinned draws: blocks that end inside a chain), give the KSD and FSSD-opt of one process
    bit for bit."""
    x, y, _ = small_logistic
    model = sgmcmc.models.Logistic(x, y, prior_variance=5.0)
    rng = np.random.default_rng(3)
    draws = [rng.normal(0.0, 0.05, (1_400, 3)), rng.normal(0.0, 0.05, (600, 3))]
    local = sgmcmc.ksd(model, draws, thin=2, fssd=True)
    on_ray = sgmcmc.ksd(model, draws, thin=2, fssd=True, executor=sgmcmc.RayExecutor(), block=256)
    assert local.draws == on_ray.draws == 1_000
    assert on_ray.report["score_tasks"] == 3 + 2
    assert on_ray.ksd == local.ksd
    assert on_ray.fssd == local.fssd
    with pytest.raises(ValueError, match="multiple of 256"):
        sgmcmc.ksd(model, draws, executor=sgmcmc.RayExecutor(), block=300)


class FirstTaskThenFail:
    """An executor whose cluster goes away after one task: chain 0 ends, the rest never run."""

    def map(self, fn: Any, shared: tuple[Any, ...], items: list[Any]) -> list[Any]:
        fn(*shared, items[0])
        raise RuntimeError("the cluster went away")


def test_a_split_run_cut_short_resumes_on_another_executor(
    ray_cluster: Any, small_logistic, tmp_path: Path
) -> None:
    """A run whose tasks stopped after chain 0 continues with resume=True on Ray: only the
    missing chains run, and the draws are those of one process."""
    x, y, _ = small_logistic
    model = sgmcmc.models.Logistic(x, y, prior_variance=5.0)
    args = (sgmcmc.SGLD(step_size=1e-5), sgmcmc.Minibatch(batch_size=200))
    out = tmp_path / "split"
    with pytest.raises(RuntimeError, match="went away"):
        sgmcmc.sample(model, *args, out=out, executor=FirstTaskThenFail(), **SETTINGS)
    resumed = sgmcmc.sample(
        model, *args, out=out, executor=sgmcmc.RayExecutor(), resume=True, **SETTINGS
    )
    from_checkpoint = [c["from_checkpoint"] for t in tasks(resumed) for c in t["chains"]]
    assert from_checkpoint == [1_000, 0, 0, 0]
    np.testing.assert_array_equal(theta(resumed), theta(sgmcmc.sample(model, *args, **SETTINGS)))
