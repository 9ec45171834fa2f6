"""``sample``: a run through the same pipeline as ``sgmcmc run``, with a progress bar, Ctrl-C
that keeps the draws, and the draws as ArviZ ``InferenceData``."""

from __future__ import annotations

import json
import os
import sys
import warnings
from typing import Any

import numpy as np

from . import _sgmcmc
from ._sgmcmc import SgmcmcError
from .distributed import Executor, run_chains
from .models import BuiltinModel, UserModel
from .settings import Gradient, Sampler


def _run_table(**settings: Any) -> dict[str, Any]:
    table = {k: v for k, v in settings.items() if v is not None}
    init = table.get("init")
    if isinstance(init, (str, os.PathLike)) and init not in (
        "map",
        "prior",
        "zeros",
        "laplace",
    ):
        table["init"] = {"file": os.path.abspath(os.fspath(init))}
    return table


def sample(
    model: BuiltinModel | UserModel,
    sampler: Sampler | None = None,
    gradient: Gradient | None = None,
    *,
    chains: int | None = None,
    iterations: int | None = None,
    budget_seconds: float | None = None,
    burn_in: int | None = None,
    thin: int | None = None,
    seed: int | None = None,
    init: str | os.PathLike[str] | None = None,
    preconditioner: str | None = None,
    bias_check: bool | None = None,
    out: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
    resume: bool = False,
    checkpoint_seconds: float | None = None,
    keep_diverged: bool = False,
    progress: bool = True,
    quiet: bool = False,
    executor: Executor | None = None,
) -> Any:
    """Sample the posterior of ``model``; returns ArviZ ``InferenceData``.

    Without ``sampler`` the default path chooses everything (MAP, Laplace preconditioner, control
    variates where their noise is small, MAMBA's step) and reports its choices. Every other
    argument left at ``None`` takes the run file's default (``[run]`` table: seed 0, 4 chains,
    10,000 iterations, ...). With ``out``, the draws stream to ``out/draws.zarr`` and the summary
    goes to ``out/summary.json``, as with ``sgmcmc run``; a directory that holds an earlier run
    is refused unless ``overwrite=True`` (which deletes that run's outputs first), and one that
    another run is writing is refused. The chains checkpoint into ``out/checkpoints`` (every
    chunk of draws, and at least every ``checkpoint_seconds``, default 5 s); ``resume=True``
    continues a run in ``out`` that was killed or interrupted, given the same model and
    arguments, and returns exactly the draws an uninterrupted run would have. Ctrl-C stops the
    chains and returns the draws made so far (with a warning). Chains that diverged are left
    out of the posterior, as the run's summary leaves them out (with a warning);
    ``keep_diverged=True`` keeps every chain, NaN after its last draw, with
    ``sample_stats.diverging`` marking where it diverged.

    With ``executor`` (``sgmcmc.RayExecutor()``, ``sgmcmc.ProcessExecutor()``), each chain runs
    as a task of its own, writing its region of ``out/draws.zarr`` (``out`` is required, and
    every task must reach it); the draws are bit for bit those of a run in one process. A task
    whose worker dies is run again and its chain continues from its checkpoint; the tasks'
    reports (process, draws from a checkpoint, seconds) are in
    ``idata.posterior.attrs["sgmcmc_tasks"]`` (JSON). It needs an iteration budget.
    """
    _check_model(model)
    if sampler is not None and not isinstance(sampler, Sampler):
        raise TypeError(f"sampler: expected e.g. sgmcmc.SGLD(...), got {type(sampler).__name__}")
    if gradient is not None and not isinstance(gradient, Gradient):
        raise TypeError(
            f"gradient: expected e.g. sgmcmc.Minibatch(...), got {type(gradient).__name__}"
        )
    config, x, y, names, user = _model_config(model)
    if sampler is not None:
        config["sampler"] = sampler.table()
    if gradient is not None:
        config["gradient"] = gradient.table()
    config["run"] = _run_table(
        seed=seed,
        chains=chains,
        iterations=iterations,
        budget_seconds=budget_seconds,
        burn_in=burn_in,
        thin=thin,
        init=init,
        preconditioner=preconditioner,
        bias_check=bias_check,
        checkpoint_seconds=checkpoint_seconds,
    )
    tasks: list[dict[str, Any]] | None = None
    if executor is None:
        handle = _sgmcmc.start_run(
            json.dumps(config),
            x,
            y,
            names,
            None if out is None else os.fspath(out),
            user,
            overwrite=overwrite,
            resume=resume,
        )
    else:
        if out is None:
            raise ValueError(
                "executor: a run split into tasks needs `out`, which every task reaches"
            )
        handle, tasks = _run_on(executor, config, x, y, names, user, out, overwrite, resume, quiet)
    interrupted = _follow(handle, progress=progress and executor is None, quiet=quiet)
    result = _result(handle, quiet=quiet)
    summary = json.loads(result["summary"])
    note = f" ({result['note']})" if result.get("note") else ""
    if summary.get("chains", 0) > 0 and not summary.get("summarised_chains"):
        raise SgmcmcError(
            "every chain diverged: there are no draws to summarise (the step is too large for "
            "this posterior; try a smaller step, control variates, or the default path: leave "
            f"out the sampler){note}"
        )
    unconstrained = result.get("unconstrained")
    idata = _inference_data(
        result["draws"],
        result["names"],
        summary,
        result.get("sample_stats"),
        keep_diverged,
        None if unconstrained is None else dict(enumerate(unconstrained)),
    )
    if tasks is not None:
        idata.posterior.attrs["sgmcmc_tasks"] = json.dumps(tasks)
    if summary.get("diverged_chains"):
        held = (
            "the posterior keeps them, NaN after their last draw (sample_stats.diverging)"
            if keep_diverged
            else "the posterior holds the other chains (the run summary's)"
        )
        warnings.warn(f"chains {summary['diverged_chains']} diverged{note}; {held}", stacklevel=2)
    if interrupted or summary.get("interrupted"):
        warnings.warn(
            "interrupted: sampling stopped early; the draws so far are returned",
            stacklevel=2,
        )
    return idata


def _run_on(
    executor: Executor,
    config: dict[str, Any],
    x: Any,
    y: Any,
    names: list[str] | None,
    user: UserModel | None,
    out: str | os.PathLike[str],
    overwrite: bool,
    resume: bool,
    quiet: bool,
) -> tuple[Any, list[dict[str, Any]]]:
    """The run's chains as tasks on ``executor``: the run prepared in ``out`` (unless it is
    resumed), every chain run (a chain already complete returns at once), then the handle of
    the job that summarises the store, with the tasks' reports."""
    config_json = json.dumps(config)
    directory = os.path.abspath(os.fspath(out))
    if resume:
        if overwrite:
            raise SgmcmcError("resume=True continues the run in `out`: not with overwrite=True")
        recorded = os.path.join(directory, "checkpoints", "run.json")
        if not os.path.isfile(recorded):
            raise SgmcmcError(f"{directory} holds no run to continue (no checkpoints/run.json)")
        with open(recorded) as f:
            chains = int(json.load(f)["resolved"]["run"]["chains"])
    else:
        handle = _sgmcmc.start_run(
            config_json, x, y, names, directory, user, "prepare", overwrite=overwrite
        )
        chains = int(json.loads(_result(handle, quiet=quiet)["report"])["chains"])
    if not quiet:
        print(f"running {chains} chains as tasks ({type(executor).__name__})", file=sys.stderr)
    tasks = run_chains(executor, config_json, x, y, names, user, directory, chains)
    if any(task.get("interrupted") for task in tasks):
        raise SgmcmcError(
            f"a task was interrupted: the chains' checkpoints are kept in {directory}; continue "
            "with resume=True"
        )
    return _sgmcmc.start_run(config_json, x, y, names, directory, user, "finish"), tasks


def _result(handle: Any, *, quiet: bool) -> dict[str, Any]:
    """The finished run's result (raising its error), after its last messages."""
    result = handle.result()
    for line in handle.messages():
        if not quiet:
            print(line, file=sys.stderr)
    return dict(result)


def _model_config(
    model: BuiltinModel | UserModel,
) -> tuple[
    dict[str, Any],
    np.ndarray | dict[str, Any] | None,
    np.ndarray | None,
    list[str] | None,
    UserModel | None,
]:
    """The run file's ``[data]`` and ``[model]`` tables of ``model``, with the arrays or the user
    model to hand over."""
    if isinstance(model, UserModel):
        return {"data": {}, "model": {"kind": "external"}}, None, None, None, model
    data_table, x, y = model.data()
    return {"data": data_table, "model": model.model_table()}, x, y, model.feature_names, None


def _check_model(model: Any) -> None:
    if not isinstance(model, (BuiltinModel, UserModel)):
        raise TypeError(
            "model: expected a model from sgmcmc.models (a built-in one, from_jax, from_numpy or "
            f"a UserModel), got {type(model).__name__}"
        )


def _follow(handle: Any, *, progress: bool, quiet: bool, stoppable: bool = True) -> bool:
    """Poll the run until it ends: messages, the progress bar. Ctrl-C sets the runner's stop
    flag (the chains end at their next iteration and keep their draws) and returns whether it
    did; a job that cannot stop early (``stoppable=False``: tuning) re-raises it, and the job
    goes on in the background until it ends."""
    bar = None
    interrupted = False
    try:
        while True:
            try:
                done = handle.wait(0.1)
                for line in handle.messages():
                    if not quiet:
                        print(line, file=sys.stderr)
                chains = handle.progress()
                if progress and bar is None and any(total > 0 for _, total, _ in chains):
                    from tqdm.auto import tqdm

                    bar = tqdm(
                        total=sum(total for _, total, _ in chains),
                        desc=f"sampling {len(chains)} chains",
                        unit="it",
                        unit_scale=True,
                    )
                if bar is not None:
                    n = sum(d for d, _, _ in chains)
                    if n != bar.n:
                        bar.n = n
                        bar.refresh()
                    if all(finished for _, _, finished in chains):
                        bar.close()
                        bar = None
                        progress = False
                if done:
                    return interrupted
            except KeyboardInterrupt:
                if not stoppable:
                    raise
                handle.stop()
                interrupted = True
    finally:
        if bar is not None:
            bar.close()


def _inference_data(
    draws: list[np.ndarray],
    names: list[str],
    summary: dict[str, Any],
    stats: dict[str, list[np.ndarray]] | None = None,
    keep_diverged: bool = False,
    unconstrained: dict[int, np.ndarray] | None = None,
) -> Any:
    """The summarised chains (those that did not diverge, each truncated to the shortest, as in
    the run's own summary) as ``posterior.theta`` with the parameter names as coordinate, and
    the state at each of their draws as ``sample_stats`` (``step_size``; ``thermostat`` for
    SGNHT, BADODAB and CCAdL; ``accepted`` for MH). With ``keep_diverged``, every chain instead,
    padded with NaN after its last draw, and ``sample_stats.diverging`` True at the draw where a
    chain diverged (one row is added when that chain is the longest). ``unconstrained`` (chain
    number to its draws of θ, for a model with constrained parameters) becomes the group
    ``unconstrained_posterior``, laid out as ``posterior``, when it has every chain shown."""
    import arviz as az

    dim = len(names)
    stats = stats or {}
    if keep_diverged:
        kept = list(range(len(draws)))
        diverged = set(summary.get("diverged_chains") or [])
        lengths = [d.shape[0] for d in draws]
        length = max(lengths, default=0)
        if any(lengths[c] == length for c in diverged):
            length += 1
        theta = np.full((len(kept), length, dim), np.nan)
        free = np.full((len(kept), length, dim), np.nan)
        diverging = np.zeros((len(kept), length), dtype=bool)
        sample_stats: dict[str, np.ndarray] = {}
        for name, per_chain in stats.items():
            fill = False if np.asarray(per_chain[0]).dtype == bool else np.nan
            sample_stats[name] = np.full(
                (len(kept), length), fill, dtype=np.asarray(per_chain[0]).dtype
            )
        for c, chain in enumerate(draws):
            theta[c, : lengths[c]] = chain
            if unconstrained is not None and c in unconstrained:
                free[c, : lengths[c]] = unconstrained[c][: lengths[c]]
            if c in diverged:
                diverging[c, lengths[c]] = True
            for name, per_chain in stats.items():
                values = np.asarray(per_chain[c])[: lengths[c]]
                sample_stats[name][c, : len(values)] = values
        sample_stats["diverging"] = diverging
    else:
        kept = [
            c for c in (summary.get("summarised_chains") or range(len(draws))) if c < len(draws)
        ]
        shortest = min((draws[c].shape[0] for c in kept), default=0)
        theta = np.stack([draws[c][:shortest] for c in kept]) if kept else np.empty((0, 0, dim))
        free = (
            np.stack([unconstrained[c][:shortest] for c in kept])
            if kept and unconstrained is not None and all(c in unconstrained for c in kept)
            else theta
        )
        sample_stats = {
            name: np.stack([np.asarray(per_chain[c])[:shortest] for c in kept])
            for name, per_chain in stats.items()
            if kept and all(len(per_chain[c]) >= shortest for c in kept)
        }
    attrs = {
        "inference_library": "sgmcmc",
        "inference_library_version": _sgmcmc.__version__,
        **({"sgmcmc_summary": json.dumps(summary)} if summary else {}),
    }
    idata = az.from_dict(
        posterior={"theta": theta},
        sample_stats=sample_stats or None,
        coords={"chain": np.asarray(kept, dtype=np.int64), "theta_dim_0": list(names)},
        dims={"theta": ["theta_dim_0"]},
    )
    idata.posterior.attrs.update(attrs)
    shown = unconstrained is not None and all(c in unconstrained for c in kept)
    if shown and kept:
        idata.add_groups(
            unconstrained_posterior={"theta": free},
            coords={"chain": np.asarray(kept, dtype=np.int64), "theta_dim_0": list(names)},
            dims={"theta": ["theta_dim_0"]},
        )
    return idata


def run_summary(idata: Any) -> dict[str, Any]:
    """The run's own summary (``summary.json``'s content) of ``InferenceData`` from ``sample``."""
    text = idata.posterior.attrs.get("sgmcmc_summary")
    if text is None:
        raise ValueError("this InferenceData did not come from sgmcmc.sample")
    return dict(json.loads(text))


def load(path: str | os.PathLike[str], *, keep_diverged: bool = False) -> Any:
    """Draws written by ``sgmcmc run`` or ``sample(..., out=...)`` (the output directory or its
    ``draws.zarr``) as ``InferenceData``, with the ``sample_stats`` stored beside them. With the
    run's ``summary.json`` beside the store, the chains are chosen as ``sample`` chooses them
    (the summarised chains, or every chain with ``keep_diverged``) and the summary goes into the
    attrs, so ``load(out)`` equals what ``sample(..., out=out)`` returned; without it, every
    chain, truncated to the shortest. A model with constrained parameters (σ > 0, ordered
    means, a probability) also gets the store's ``unconstrained_posterior``: the same draws on
    the scale the sampler moved in (log σ, …), except with ``keep_diverged``."""
    path = os.fspath(path)
    store = (
        os.path.join(path, "draws.zarr")
        if os.path.isdir(os.path.join(path, "draws.zarr"))
        else path
    )
    stored = _sgmcmc.read_store(store)
    summary_path = os.path.join(os.path.dirname(os.path.abspath(store)), "summary.json")
    summary: dict[str, Any] = {}
    if os.path.isfile(summary_path):
        with open(summary_path) as f:
            summary = json.load(f)
    # The store's unconstrained draws are those of its posterior group: the summarised chains.
    kept = summary.get("summarised_chains") or range(len(stored["draws"]))
    free = stored.get("unconstrained")
    unconstrained = (
        dict(zip(kept, free, strict=True))
        if free is not None and len(free) == len(kept) and not keep_diverged
        else None
    )
    return _inference_data(
        stored["draws"],
        stored["names"],
        summary,
        stored["sample_stats"],
        keep_diverged,
        unconstrained,
    )


def reference(
    model: BuiltinModel | UserModel,
    *,
    chains: int = 4,
    warmup: int = 1_000,
    draws: int = 1_000,
    seed: int | None = None,
    dense_metric: bool = False,
    progress: bool = True,
    quiet: bool = False,
) -> Any:
    """The full-data posterior by NUTS (nuts-rs, the same as ``sgmcmc reference``): exact
    gradients over all N points at every leapfrog step, so slow for large N, but free of
    stochastic-gradient bias; the yardstick for the other samplers. ``dense_metric=True`` runs
    in the coordinates of the Laplace covariance. Returns ``InferenceData``; ``run_summary``
    gives each chain's step size, divergences and gradient evaluations. Ctrl-C stops the chains
    and returns the draws after warm-up made so far, each chain cut to the shortest (with a
    warning); stopped during warm-up, it raises ``SgmcmcError``."""
    _check_model(model)
    config, x, y, names, user = _model_config(model)
    config["run"] = _run_table(seed=seed)
    handle = _sgmcmc.start_run(
        json.dumps(config),
        x,
        y,
        names,
        None,
        user,
        "reference",
        None,
        1,
        False,
        (chains, warmup, draws, dense_metric),
    )
    interrupted = _follow(handle, progress=progress, quiet=quiet)
    result = _result(handle, quiet=quiet)
    summary = json.loads(result["summary"])
    if interrupted or summary.get("interrupted"):
        warnings.warn(
            "interrupted: NUTS stopped early; the draws so far are returned, each chain cut to "
            "the shortest",
            stacklevel=2,
        )
    return _inference_data(result["draws"], result["names"], summary, result.get("sample_stats"))
