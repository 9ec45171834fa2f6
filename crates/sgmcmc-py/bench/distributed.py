"""Scaling of a run split into tasks (issue 26, must-show 2): 8 chains on a local Ray cluster of
1 and of 2 worker CPUs, beside one process and local processes; the driver's overhead per
task; a MAMBA round's wall time on 1 and 2 workers; and the round trips that
docs/distributed.md's cost model needs (a Ray task, a Ray actor call, a local socket).

    python crates/sgmcmc-py/bench/distributed.py [--repeats 3] [--json PATH]

A benchmark, not a test: it prints a table and writes the raw timings as JSON. Each figure is
the median of `--repeats` runs after one warm-up run (worker processes started, modules
imported); every run's figure is in the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import sgmcmc

ROWS, DIM = 200_000, 10
CHAINS = 8
SAMPLE: dict[str, Any] = {
    "chains": CHAINS,
    "iterations": 60_000,
    "thin": 10,
    "seed": 1,
    "bias_check": False,
    "progress": False,
    "quiet": True,
}
GRID = {"log10_step_size": {"from": -3, "to": -6, "by": 0.5}, "batch_size": [0.005, 0.05]}


def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((ROWS, DIM))
    w = rng.standard_normal(DIM)
    y = (rng.random(ROWS) < 1.0 / (1.0 + np.exp(-x @ w))).astype(np.float64)
    return x, y


class Timed:
    """An executor that records the wall time of each `map` (one MAMBA round)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds: list[float] = []

    def map(self, fn: Callable[..., Any], shared: tuple[Any, ...], items: Sequence[Any]) -> Any:
        t = time.perf_counter()
        out = self.inner.map(fn, shared, items)
        self.seconds.append(time.perf_counter() - t)
        return out


def timed(f: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    out = f()
    return time.perf_counter() - t, out


def socket_round_trip(n: int = 2_000) -> float:
    """Median seconds of one 80-byte ping-pong over a persistent local TCP connection between
    two threads' sockets (Python at both ends: an upper bound for the kernel's loopback)."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def echo() -> None:
        conn, _ = server.accept()
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while data := conn.recv(80):
                conn.sendall(data)

    threading.Thread(target=echo, daemon=True).start()
    client = socket.create_connection(("127.0.0.1", port))
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    payload = b"x" * 80
    times = []
    for _ in range(n):
        t = time.perf_counter()
        client.sendall(payload)
        got = 0
        while got < 80:
            got += len(client.recv(80))
        times.append(time.perf_counter() - t)
    client.close()
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    import ray

    x, y = data()
    model = sgmcmc.models.Logistic(x, y, prior_variance=10.0)
    sampler = sgmcmc.SGLD(step_size=1e-5)
    gradient = sgmcmc.ControlVariates(batch_size=1_000)
    tune_args: dict[str, Any] = {
        "grid": GRID,
        "budget_gradient_evaluations": 2e8,
        "seed": 2,
        "quiet": True,
    }
    results: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "ray": ray.__version__,
        },
        "date": time.strftime("%Y-%m-%d"),
        "workload": {
            "rows": ROWS,
            "dim": DIM,
            "sample": {k: v for k, v in SAMPLE.items() if k not in ("progress", "quiet")},
            "sampler": "SGLD step 1e-5, control variates batch 1,000",
            "tune": {"grid": GRID, "budget_gradient_evaluations": 2e8, "arms": 14},
        },
        "repeats": args.repeats,
        "runs": {},
    }
    runs: dict[str, list[Any]] = results["runs"]

    def sample(executor: Any, tmp: str, i: int) -> tuple[float, Any]:
        out = os.path.join(tmp, f"run-{i}")
        return timed(
            lambda: sgmcmc.sample(
                model, sampler, gradient, out=out, executor=executor, overwrite=True, **SAMPLE
            )
        )

    with tempfile.TemporaryDirectory() as tmp:
        # One process: the chains on its threads (as many as cores).
        runs["one process"] = [sample(None, tmp, i)[0] for i in range(args.repeats + 1)][1:]
        runs["2 local processes"] = [
            sample(sgmcmc.ProcessExecutor(2), tmp, i)[0] for i in range(args.repeats + 1)
        ][1:]
        for workers in (1, 2):
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
            key = f"Ray, {workers} worker{'s' if workers > 1 else ''}"
            walls, tasks = [], []
            for i in range(args.repeats + 1):
                wall, idata = sample(sgmcmc.RayExecutor(), tmp, i)
                if i > 0:
                    walls.append(wall)
                    tasks.append(json.loads(idata.posterior.attrs["sgmcmc_tasks"]))
            runs[key] = walls
            runs[key + ": chain seconds"] = [
                [c["seconds"] for t in run for c in t["chains"]] for run in tasks
            ]
            rounds = []
            for i in range(args.repeats + 1):
                executor = Timed(sgmcmc.RayExecutor())
                sgmcmc.tune(model, sampler, gradient, executor=executor, **tune_args)
                if i > 0:
                    rounds.append(executor.seconds)
            runs[f"MAMBA rounds, {key}"] = rounds
            if workers == 1:
                # The driver's cost per task: 8 chains of 10 iterations (nothing to sample).
                tiny = {**SAMPLE, "iterations": 10, "thin": 1}
                per_task = []
                for i in range(args.repeats + 1):
                    out = os.path.join(tmp, f"tiny-{i}")
                    t = time.perf_counter()
                    sgmcmc.sample(
                        model,
                        sampler,
                        gradient,
                        out=out,
                        executor=sgmcmc.RayExecutor(),
                        overwrite=True,
                        **tiny,
                    )
                    wall = time.perf_counter() - t
                    if i > 0:
                        per_task.append(wall / CHAINS)
                runs["run of 8 chains of 10 iterations on Ray, per chain"] = per_task

                @ray.remote
                def noop(i: int) -> int:
                    return i

                @ray.remote
                class Echo:
                    def call(self, v: bytes) -> bytes:
                        return v

                ray.get([noop.remote(i) for i in range(50)])
                t = time.perf_counter()
                ray.get([noop.remote(i) for i in range(500)])
                runs["Ray task round trip, 500 at once, per task"] = [
                    (time.perf_counter() - t) / 500
                ]
                seq = []
                for i in range(200):
                    t = time.perf_counter()
                    ray.get(noop.remote(i))
                    seq.append(time.perf_counter() - t)
                runs["Ray task round trip, one at a time (median)"] = [statistics.median(seq)]
                actor = Echo.remote()  # type: ignore[attr-defined]
                ray.get(actor.call.remote(b"x" * 80))
                calls = []
                for _ in range(500):
                    t = time.perf_counter()
                    ray.get(actor.call.remote(b"x" * 80))
                    calls.append(time.perf_counter() - t)
                runs["Ray actor call, 80 bytes (median)"] = [statistics.median(calls)]
            ray.shutdown()
        local_rounds = []
        for i in range(args.repeats + 1):
            executor = Timed(_Inline())
            sgmcmc.tune(model, sampler, gradient, executor=executor, **tune_args)
            if i > 0:
                local_rounds.append(executor.seconds)
        runs["MAMBA rounds, in the driver one arm at a time"] = local_rounds
        local_tune = []
        for i in range(args.repeats + 1):
            wall, _ = timed(lambda: sgmcmc.tune(model, sampler, gradient, **tune_args))
            if i > 0:
                local_tune.append(wall)
        runs["MAMBA whole run, one process (threads)"] = local_tune
    runs["local TCP socket round trip, Python both ends (median)"] = [socket_round_trip()]

    for name, values in runs.items():
        if values and isinstance(values[0], list):
            if name.endswith("chain seconds"):
                flat = [v for run in values for v in run]
                print(f"{name}: median {statistics.median(flat):.3f} s over {len(flat)} chains")
            else:
                per_round = list(zip(*values, strict=True))
                shown = ", ".join(f"{statistics.median(r):.3f}" for r in per_round)
                print(f"{name}: median per round [{shown}] s")
        else:
            print(f"{name}: median {statistics.median(values):.6f} s  (runs: {values})")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1))


class _Inline:
    """Arms one at a time in the driver's process (the tasks' own cost, with no executor)."""

    def map(self, fn: Callable[..., Any], shared: tuple[Any, ...], items: Sequence[Any]) -> Any:
        return [fn(*shared, item) for item in items]


if __name__ == "__main__":
    main()
