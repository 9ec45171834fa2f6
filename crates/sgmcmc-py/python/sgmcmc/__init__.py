"""sgmcmc: stochastic-gradient MCMC with a Rust core.

    import sgmcmc
    model = sgmcmc.models.Logistic(X, y, prior_variance=10.0)
    idata = sgmcmc.sample(model)                                  # the default path
    idata = sgmcmc.sample(model, sampler=sgmcmc.SGLD(step_size=1e-6),
                          gradient=sgmcmc.ControlVariates(batch_size=1_000),
                          chains=4, iterations=10_000, seed=0)

Results are ArviZ ``InferenceData``; ``run_summary(idata)`` gives the run's own summary (the
content of ``summary.json``: per-parameter table, default-path choices, bias check).
"""

from __future__ import annotations

from . import models, priors
from ._sgmcmc import SgmcmcError, __version__
from .coreset import coreset
from .distributed import Executor, ProcessExecutor, RayExecutor
from .run import load, reference, run_summary, sample
from .settings import (
    BADODAB,
    BAOAB,
    MH,
    PSGLD,
    SGHMC,
    SGLD,
    SGNHT,
    SVRG,
    CCAdL,
    ControlVariates,
    FullBatch,
    Gradient,
    Minibatch,
    Sampler,
)
from .stein import Discrepancy, ksd
from .tune import TuneResult, tune

__all__ = [
    "BADODAB",
    "BAOAB",
    "MH",
    "PSGLD",
    "SGHMC",
    "SGLD",
    "SGNHT",
    "SVRG",
    "CCAdL",
    "ControlVariates",
    "FullBatch",
    "Gradient",
    "Minibatch",
    "Sampler",
    "SgmcmcError",
    "__version__",
    "load",
    "models",
    "priors",
    "run_summary",
    "sample",
    "tune",
    "TuneResult",
    "ksd",
    "Discrepancy",
    "Executor",
    "ProcessExecutor",
    "RayExecutor",
    "reference",
    "coreset",
]
