"""``coreset``: Coreset MCMC (Chen & Campbell) with the tuning-free Hot DoG optimiser by default,
through the same code as ``sgmcmc coreset``: M weighted points stand in for the N data points,
the weights are learned while the chains run, and the draws after training come back as
``InferenceData`` (the coreset's points and weights in ``run_summary(idata)["coreset"]``)."""

from __future__ import annotations

import json
from typing import Any

from . import _sgmcmc
from .distributed import Executor, coreset_task
from .models import BuiltinModel, UserModel
from .run import _check_model, _follow, _inference_data, _model_config, _result, _run_table
from .settings import Sampler


def coreset(
    model: BuiltinModel | UserModel,
    *,
    size: int,
    iterations: int | None = None,
    draws: int | None = None,
    chains: int | None = None,
    kernel: str | dict[str, Any] | None = None,
    optimiser: str | dict[str, Any] | None = None,
    sampler: Sampler | None = None,
    seed: int | None = None,
    quiet: bool = False,
    replicas: int | None = None,
    executor: Executor | None = None,
    **options: Any,
) -> Any:
    """Coreset MCMC with a coreset of ``size`` points. ``kernel``: ``"slice"`` (default) or
    ``"sampler"`` (then give ``sampler``, e.g. ``sgmcmc.SGLD(...)`` on the coreset's exact
    gradients), or a table such as ``{"kind": "slice", "width": 2.0}``; ``optimiser``:
    ``"hot_dog"`` (default, tuning-free), ``"adam"``, ``"dog"``, ``"dowg"``, ``"prodigy"``,
    ``"dadapt_sgd"`` or a table with their keys. Every other keyword is the ``[coreset]``
    table's key of the same name (``subsample``, ``construction``, ``hot_start``, ``init``, ...).

    With ``replicas=R``, R independent runs (replica r with seed ``seed + r``, so replica 0 is
    the run without ``replicas``) come back as a list of ``InferenceData``, each run as a task
    of ``executor`` (``sgmcmc.RayExecutor()``, ``sgmcmc.ProcessExecutor()``) if given, else one
    after another here; a replica's draws do not depend on where it ran."""
    _check_model(model)
    if replicas is not None and replicas < 1:
        raise ValueError(f"replicas must be at least 1, got {replicas}")
    if executor is not None and replicas is None:
        raise ValueError("executor: runs coreset replicas; give replicas=R")
    config, x, y, names, user = _model_config(model)
    config["run"] = _run_table(seed=seed, chains=chains)
    table: dict[str, Any] = {
        "size": size,
        "iterations": iterations,
        "draws": draws,
        "chains": chains,
        "seed": seed,
        "kernel": {"kind": kernel} if isinstance(kernel, str) else kernel,
        "optimiser": {"kind": optimiser} if isinstance(optimiser, str) else optimiser,
        **options,
    }
    file: dict[str, Any] = {
        "data": config["data"],
        "model": config["model"],
        "coreset": {k: v for k, v in table.items() if v is not None},
    }
    if sampler is not None:
        file["sampler"] = sampler.table()
    if replicas is not None:
        first = 0 if seed is None else seed
        shared = (json.dumps(config), json.dumps(file), x, y, names, user)
        seeds = [first + r for r in range(replicas)]
        if executor is None:
            results = [coreset_task(*shared, s) for s in seeds]
        else:
            results = executor.map(coreset_task, shared, seeds)
        return [_idata(result) for result in results]
    handle = _sgmcmc.start_run(
        json.dumps(config),
        x,
        y,
        names,
        None,
        user,
        "coreset",
        None,
        1,
        False,
        None,
        json.dumps(file),
    )
    _follow(handle, progress=False, quiet=quiet)
    return _idata(_result(handle, quiet=quiet))


def _idata(result: dict[str, Any]) -> Any:
    summary = json.loads(result["summary"])
    return _inference_data(result["draws"], result["names"], summary, result.get("sample_stats"))
