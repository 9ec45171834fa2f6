"""``tune``: MAMBA (successive halving on the Stein discrepancy), grid search or the 1/N
heuristic, through the same code as ``sgmcmc tune``; the winner's settings come back as typed
values ready for ``sample``."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _sgmcmc, settings
from .distributed import Executor, arm_round_task
from .models import BuiltinModel, UserModel
from .run import _check_model, _follow, _model_config, _result, _run_table
from .settings import Gradient, Sampler

_SAMPLERS: dict[str, type[Sampler]] = {
    cls.kind: cls
    for cls in (
        settings.SGLD,
        settings.PSGLD,
        settings.SGHMC,
        settings.SGNHT,
        settings.BAOAB,
        settings.BADODAB,
        settings.CCAdL,
        settings.MH,
    )
}
_GRADIENTS: dict[str, type[Gradient]] = {
    cls.estimator: cls
    for cls in (settings.Minibatch, settings.ControlVariates, settings.SVRG, settings.FullBatch)
}


def sampler_from_table(table: dict[str, Any]) -> Sampler:
    """The typed sampler of a ``[sampler]`` table (as the Rust core writes it)."""
    table = dict(table)
    cls = _SAMPLERS[table.pop("kind")]
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return cls(**{k: v for k, v in table.items() if k in known})


def gradient_from_table(table: dict[str, Any]) -> Gradient:
    """The typed estimator of a ``[gradient]`` table."""
    table = dict(table)
    cls = _GRADIENTS[table.pop("estimator", "minibatch")]
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return cls(**{k: v for k, v in table.items() if k in known})


@dataclass
class TuneResult:
    """What a tuner found: the winner's ``sampler`` and ``gradient`` (pass ``**result.settings``
    to ``sample``), MAMBA's ``rounds`` (per round, each arm's label and metric, best first) or
    grid search's ``points``, the winner's draws over its rounds, and the full ``report``
    (``tune.json``'s content)."""

    method: str
    sampler: Sampler
    gradient: Gradient
    label: str
    rounds: list[list[dict[str, Any]]]
    points: list[dict[str, Any]]
    winner_draws: np.ndarray | None
    report: dict[str, Any]

    @property
    def settings(self) -> dict[str, Any]:
        """``{"sampler": ..., "gradient": ...}``, for ``sample(model, **result.settings)``."""
        return {"sampler": self.sampler, "gradient": self.gradient}


def _rounds_on(
    executor: Executor,
    config_json: str,
    x: Any,
    y: Any,
    names: list[str] | None,
    user: UserModel | None,
) -> Callable[[int, list[tuple[int, bytes]], float, list[float]], list[bytes]]:
    """What runs a round of MAMBA's arms on ``executor``: called by the tuner (in Rust) with the
    round, each arm's grid index and state, the budget per arm and the MAP; returns each arm's
    result, in order."""

    def run_round(
        round_: int, arms: list[tuple[int, bytes]], budget: float, map_: list[float]
    ) -> list[bytes]:
        shared = (config_json, x, y, names, user, map_, round_, budget)
        return executor.map(arm_round_task, shared, arms)

    return run_round


def tune(
    model: BuiltinModel | UserModel,
    sampler: Sampler,
    gradient: Gradient | None = None,
    *,
    grid: dict[str, Any],
    method: str = "mamba",
    budget_seconds: float | None = None,
    total_seconds: float | None = None,
    budget_gradient_evaluations: float | None = None,
    total_gradient_evaluations: float | None = None,
    eta: int | None = None,
    metric: str | None = None,
    thin: int | None = None,
    scores: str | None = None,
    score_subsample: int | None = None,
    max_scored_draws: int | None = None,
    threads: int | None = None,
    grid_search: dict[str, Any] | None = None,
    seed: int | None = None,
    quiet: bool = False,
    out: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
    resume: bool = False,
    executor: Executor | None = None,
) -> TuneResult:
    """Tune ``sampler`` (its step and any other key) and ``gradient`` over ``grid`` (the run
    file's ``[tune.grid]``: e.g. ``{"log10_step_size": {"from": -1, "to": -7, "by": 0.5},
    "batch_size": [0.01, 0.1]}``) with ``method`` ``"mamba"`` (default), ``"grid_search"`` or
    ``"heuristic"``. Give one budget: ``budget_seconds`` (R, the winner's CPU seconds over all
    rounds), ``total_seconds`` (T), or the same in per-datum gradient evaluations (reproducible
    from the seed; the right unit for a user model whose callbacks run elsewhere, e.g. JAX).
    Every other keyword is the ``[tune]`` table's key of the same name.

    With ``out`` (a directory, as ``sgmcmc tune --out``), the run is recorded there, MAMBA's
    progress is saved after every round, and ``tune.json`` is written at the end; a directory
    holding an earlier run is refused unless ``overwrite=True``, and ``resume=True`` continues
    a killed run there after its last saved round (same model, data and settings), with the
    outcome of an uninterrupted run.

    With ``executor`` (``sgmcmc.RayExecutor()``, ``sgmcmc.ProcessExecutor()``), MAMBA runs each
    round's arms as tasks, one per arm, each from the arm's state after its last round; the
    halving, the saved progress and the report stay here. With a budget in gradient
    evaluations the winner and its draws are those of a local run, bit for bit; in CPU
    seconds each arm is charged its own task's thread time."""
    _check_model(model)
    if not isinstance(sampler, Sampler):
        raise TypeError(f"sampler: expected e.g. sgmcmc.SGLD(...), got {type(sampler).__name__}")
    if gradient is not None and not isinstance(gradient, Gradient):
        raise TypeError(
            f"gradient: expected e.g. sgmcmc.Minibatch(...), got {type(gradient).__name__}"
        )
    config, x, y, names, user = _model_config(model)
    config["sampler"] = sampler.table()
    if gradient is not None:
        config["gradient"] = gradient.table()
    config["run"] = _run_table(seed=seed)
    table = {
        "budget_seconds": budget_seconds,
        "total_seconds": total_seconds,
        "budget_gradient_evaluations": budget_gradient_evaluations,
        "total_gradient_evaluations": total_gradient_evaluations,
        "eta": eta,
        "metric": metric,
        "thin": thin,
        "scores": scores,
        "score_subsample": score_subsample,
        "max_scored_draws": max_scored_draws,
        "threads": threads,
        "grid_search": grid_search,
        "grid": grid,
    }
    config["tune"] = {k: v for k, v in table.items() if v is not None}
    config_json = json.dumps(config)
    rounds = None
    if executor is not None:
        if method != "mamba":
            raise ValueError(f"executor: runs MAMBA's arms, not method={method!r}")
        rounds = _rounds_on(executor, config_json, x, y, names, user)
    handle = _sgmcmc.start_run(
        config_json,
        x,
        y,
        names,
        None if out is None else os.fspath(out),
        user,
        method,
        overwrite=overwrite,
        resume=resume,
        rounds=rounds,
    )
    _follow(handle, progress=False, quiet=quiet, stoppable=False)
    result = _result(handle, quiet=quiet)
    report = json.loads(result["report"])
    winner = json.loads(result["winner_config"])
    outcome = report.get("outcome", {})
    arm = report["winner_settings"]
    label = ", ".join(f"{k}={v}" for k, v in arm.get("values", []))
    return TuneResult(
        method=report["method"],
        sampler=sampler_from_table(winner["sampler"]),
        gradient=gradient_from_table(winner.get("gradient") or {}),
        label=label,
        rounds=[
            [{"arm": r["arm"], "label": r["label"], "metric": r["metric"]} for r in round_]
            for round_ in outcome.get("rounds", [])
        ],
        points=list(outcome.get("points", [])),
        winner_draws=result.get("winner_draws"),
        report=report,
    )
