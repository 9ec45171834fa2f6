"""Stein discrepancies of any draws against a model's posterior, from scores alone (no
reference draws): the kernel Stein discrepancy with the IMQ kernel, and FSSD-opt."""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _sgmcmc
from .distributed import Executor, scores_task
from .models import BuiltinModel, UserModel
from .run import _check_model, _model_config


@dataclass
class Discrepancy:
    """``ksd``: the KSD (IMQ kernel, c = 1, β = −1/2; V-statistic, square root); ``fssd``:
    FSSD-opt when asked (Gaussian kernel, its width starting at the draws' median distance);
    ``draws``: how many draws (after thinning) entered; ``report``: every
    number (U-statistic, timings, FSSD's locations and split)."""

    ksd: float
    fssd: float | None
    draws: int
    report: dict[str, Any]


def _chains(draws: Any, var_name: str) -> list[np.ndarray]:
    if hasattr(draws, "posterior"):
        values = np.asarray(draws.posterior[var_name].values, dtype=np.float64)
        if values.ndim == 2:
            values = values[..., None]
        if values.ndim != 3:
            raise ValueError(
                f"draws: posterior.{var_name} has dims {draws.posterior[var_name].dims}; "
                "expected (chain, draw, parameter)"
            )
        return [np.ascontiguousarray(c) for c in values]
    if isinstance(draws, (list, tuple)):
        return [np.ascontiguousarray(np.asarray(c, dtype=np.float64)) for c in draws]
    values = np.asarray(draws, dtype=np.float64)
    if values.ndim == 2:
        return [np.ascontiguousarray(values)]
    if values.ndim == 3:
        return [np.ascontiguousarray(c) for c in values]
    raise ValueError(
        f"draws: expected (draws, d) or (chains, draws, d) values, got shape {values.shape}"
    )


def ksd(
    model: BuiltinModel | UserModel,
    draws: Any,
    *,
    thin: int = 1,
    fssd: bool = False,
    var_name: str = "theta",
    executor: Executor | None = None,
    block: int = 1_024,
) -> Discrepancy:
    """The KSD (and with ``fssd=True`` FSSD-opt) of ``draws`` against ``model``'s posterior,
    with exact full-batch scores at every ``thin``-th draw of each chain. ``draws``: an ArviZ
    ``InferenceData`` (its ``posterior[var_name]``; draws from NumPyro, PyMC or Stan too), an
    array of shape (chains, draws, d) or (draws, d), or a list of (draws, d) arrays. The draws
    are on the scale ``sample`` reports (σ, not log σ, for a model with constrained parameters);
    they are scored on the unconstrained scale, where the Stein identity holds.

    With ``executor`` (``sgmcmc.RayExecutor()``, ``sgmcmc.ProcessExecutor()``), the full-batch
    scores, one pass over the data per 256 draws, are computed by tasks, each for ``block``
    thinned draws of a chain (a multiple of 256, so that each draw's score is the same number
    as in one process); the discrepancy is computed here from them."""
    _check_model(model)
    if block < 256 or block % 256:
        raise ValueError(f"block must be a positive multiple of 256, got {block}")
    chains = _chains(draws, var_name)
    for c in chains:
        if c.ndim != 2:
            raise ValueError(f"draws: each chain must be (draws, d), got shape {c.shape}")
        if not np.isfinite(c).all():
            raise ValueError("draws: NaN or inf among the draws")
    config, x, y, names, user = _model_config(model)
    if thin < 1:
        raise ValueError(f"thin must be at least 1, got {thin}")
    given = None
    seconds = 0.0
    if executor is not None:
        chains = [np.ascontiguousarray(c[::thin]) for c in chains]
        thin = 1
        blocks = [c[i : i + block] for c in chains for i in range(0, len(c), block)]
        shared = (json.dumps(config), x, y, names, user)
        done = executor.map(scores_task, shared, blocks)
        seconds = sum(t for _, t in done)
        given, k = [], 0
        for c in chains:
            n = (len(c) + block - 1) // block
            parts = [s for s, _ in done[k : k + n]]
            given.append(np.concatenate(parts) if parts else np.empty((0, c.shape[1])))
            k += n
    handle = _sgmcmc.start_run(
        json.dumps(config), x, y, names, None, user, "stein", chains, thin, fssd, scores=given
    )
    result = handle.result()
    report = json.loads(result["report"])
    if executor is not None:
        report["score_seconds"] = seconds
        report["score_tasks"] = len(blocks)
    stein = report["report"]
    if stein.get("warning"):
        warnings.warn(stein["warning"], stacklevel=2)
    return Discrepancy(
        ksd=float(stein["ksd"]["ksd"]),
        fssd=None if stein.get("fssd") is None else float(stein["fssd"]["fssd"]),
        draws=int(stein["draws"]),
        report=report,
    )
