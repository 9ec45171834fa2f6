"""``coreset``: Coreset MCMC (Chen & Campbell) with the tuning-free Hot DoG optimiser by default,
through the same code as ``sgmcmc coreset``: M weighted points stand in for the N data points,
the weights are learned while the chains run, and the draws after training come back as
``InferenceData`` (the coreset's points and weights in ``run_summary(idata)["coreset"]``)."""

from __future__ import annotations

import json
from typing import Any

from . import _sgmcmc
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
    **options: Any,
) -> Any:
    """Coreset MCMC with a coreset of ``size`` points. ``kernel``: ``"slice"`` (default) or
    ``"sampler"`` (then give ``sampler``, e.g. ``sgmcmc.SGLD(...)`` on the coreset's exact
    gradients), or a table such as ``{"kind": "slice", "width": 2.0}``; ``optimiser``:
    ``"hot_dog"`` (default, tuning-free), ``"adam"``, ``"dog"``, ``"dowg"``, ``"prodigy"``,
    ``"dadapt_sgd"`` or a table with their keys. Every other keyword is the ``[coreset]``
    table's key of the same name (``subsample``, ``construction``, ``hot_start``, ``init``, ...)."""
    _check_model(model)
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
    result = _result(handle, quiet=quiet)
    summary = json.loads(result["summary"])
    return _inference_data(result["draws"], result["names"], summary, result.get("sample_stats"))
