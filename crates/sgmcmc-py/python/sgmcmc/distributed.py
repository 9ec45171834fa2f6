"""A run's chains as separate tasks: on a Ray cluster (``RayExecutor``), on local processes
(``ProcessExecutor``), or on anything with the same ``map``.

Each chain is a pure function of the run's settings, its number and the run's seed, so the
draws do not depend on where or beside what a chain runs: ``sample(..., executor=...)`` gives
bit for bit the draws of ``sample(...)`` in one process. The driver resolves and records the
run and creates its store (``sgmcmc run --prepare``); each task opens the run directory, takes
its chain's lock and writes its chain's own chunk-aligned region of the store, checkpointing
as it goes (``--chains``); the driver then summarises the store (``--finish``). No draw passes
through the driver. A task whose worker dies is run again by the executor (Ray's
``max_retries``) and its chain continues from its last checkpoint.

Every task must see ``out`` at the same path (a shared file system on a cluster) and the data:
arrays given to a built-in model are shipped once per executor (Ray's object store); a run
whose data are files read them from their paths on each worker.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Executor(Protocol):
    """Runs ``fn(*shared, item)`` for every item, as independent tasks, and returns the results
    in the order of ``items``. ``shared`` is the same for every task (ship it once)."""

    def map(
        self, fn: Callable[..., T], shared: tuple[Any, ...], items: Sequence[Any]
    ) -> list[T]: ...


class RayExecutor:
    """Tasks on Ray: one task per item, ``cpus_per_task`` CPUs each, retried up to
    ``max_retries`` times when its worker process dies (an exception raised by the task itself
    is not retried). Connects to ``address`` (``"auto"``: the running cluster; ``None``: the
    cluster already initialised in this process, else a local one started by ``ray.init``)."""

    def __init__(
        self,
        *,
        cpus_per_task: float = 1.0,
        max_retries: int = 3,
        address: str | None = None,
    ) -> None:
        if cpus_per_task <= 0:
            raise ValueError(f"cpus_per_task must be positive, got {cpus_per_task}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be at least 0, got {max_retries}")
        self.cpus_per_task = cpus_per_task
        self.max_retries = max_retries
        self.address = address

    def map(self, fn: Callable[..., T], shared: tuple[Any, ...], items: Sequence[Any]) -> list[T]:
        try:
            import ray
        except ImportError as e:
            raise ImportError(
                "RayExecutor needs Ray: pip install 'sgmcmc[ray]' (or pip install ray)"
            ) from e
        if not ray.is_initialized():
            ray.init(address=self.address, include_dashboard=False, log_to_driver=False)
        task = ray.remote(num_cpus=self.cpus_per_task, max_retries=self.max_retries)(fn)
        refs = [ray.put(value) for value in shared]
        pending = [task.remote(*refs, item) for item in items]
        try:
            return list(ray.get(pending))
        except KeyboardInterrupt:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise


class ProcessExecutor:
    """Tasks on ``workers`` local processes (default: one per CPU), started fresh (``spawn``,
    so a script that uses it needs ``if __name__ == "__main__":``, as with ``multiprocessing``).
    A user model's functions are sent with cloudpickle when it is installed (it comes with
    Ray), else with pickle, which takes only functions defined at a module's top level."""

    def __init__(self, workers: int | None = None) -> None:
        if workers is not None and workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self.workers = workers

    def map(self, fn: Callable[..., T], shared: tuple[Any, ...], items: Sequence[Any]) -> list[T]:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        context = multiprocessing.get_context("spawn")
        payload = _dumps((fn, shared))
        with ProcessPoolExecutor(max_workers=self.workers, mp_context=context) as pool:
            futures = [pool.submit(_call, payload, item) for item in items]
            return [f.result() for f in futures]


def _dumps(value: Any) -> bytes:
    """``value`` pickled by cloudpickle (closures and lambdas too) if installed, else pickle."""
    try:
        import cloudpickle
    except ImportError:
        try:
            from ray import cloudpickle
        except ImportError:
            import pickle

            return pickle.dumps(value)
    return bytes(cloudpickle.dumps(value))


def _call(payload: bytes, item: Any) -> Any:
    """``fn(*shared, item)`` of a ``(fn, shared)`` that ``_dumps`` pickled."""
    import pickle

    fn, shared = pickle.loads(payload)
    return fn(*shared, item)


def chain_task(
    config_json: str,
    features: Any,
    targets: Any,
    names: list[str] | None,
    user: Any,
    out: str,
    chains: list[int],
) -> dict[str, Any]:
    """One task: chains ``chains`` of the prepared run in ``out``, each from its checkpoint if
    it has one. Returns each chain's report (its draws, those from its checkpoint, iterations,
    seconds, whether it diverged) and the id of the process that ran it."""
    from . import _sgmcmc

    handle = _sgmcmc.start_run(
        config_json, features, targets, names, out, user, "chains", chains=list(chains)
    )
    result = handle.result()
    report: dict[str, Any] = json.loads(result["report"])
    report["messages"] = list(handle.messages())
    return report


def arm_round_task(
    config_json: str,
    features: Any,
    targets: Any,
    names: list[str] | None,
    user: Any,
    map_: list[float],
    round_: int,
    budget: float,
    arm: tuple[int, bytes],
) -> bytes:
    """One task of a tuning run: arm ``arm[0]``'s round ``round_`` of MAMBA from its state
    ``arm[1]`` at ``budget`` per arm, every arm starting from the driver's MAP ``map_``; the
    result as bytes for the driver's halving."""
    from . import _sgmcmc

    index, state = arm
    handle = _sgmcmc.start_run(
        config_json,
        features,
        targets,
        names,
        None,
        user,
        "arm_round",
        arm_round=(list(map_), int(index), bytes(state), int(round_), float(budget)),
    )
    return bytes(handle.result()["bytes"])


def coreset_task(
    config_json: str,
    file_json: str,
    features: Any,
    targets: Any,
    names: list[str] | None,
    user: Any,
    seed: int,
) -> dict[str, Any]:
    """One replica of a coreset run: the coreset run file ``file_json`` with seed ``seed``;
    the run's result (draws per chain, parameter names, summary, sample statistics)."""
    from . import _sgmcmc

    config = json.loads(config_json)
    config.setdefault("run", {})["seed"] = seed
    file = json.loads(file_json)
    file["coreset"]["seed"] = seed
    handle = _sgmcmc.start_run(
        json.dumps(config),
        features,
        targets,
        names,
        None,
        user,
        "coreset",
        coreset=json.dumps(file),
    )
    return dict(handle.result())


def scores_task(
    config_json: str,
    features: Any,
    targets: Any,
    names: list[str] | None,
    user: Any,
    draws: Any,
) -> tuple[Any, float]:
    """One task of a Stein discrepancy: the full-batch scores of a block of draws (rows), and
    the seconds they took."""
    from . import _sgmcmc

    handle = _sgmcmc.start_run(
        config_json, features, targets, names, None, user, "scores", [draws], 1
    )
    result = handle.result()
    return result["matrix"], float(result["seconds"])


def run_chains(
    executor: Executor,
    config_json: str,
    features: Any,
    targets: Any,
    names: list[str] | None,
    user: Any,
    out: str | os.PathLike[str],
    chains: int,
) -> list[dict[str, Any]]:
    """Every chain of the prepared run in ``out`` as a task of its own on ``executor``; their
    reports in chain order."""
    shared = (config_json, features, targets, names, user, os.path.abspath(os.fspath(out)))
    return executor.map(chain_task, shared, [[c] for c in range(chains)])
