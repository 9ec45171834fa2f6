"""Built-in models over arrays or files, evaluated in Rust (no Python in the sampling loop).

Features are a 2-D float64 or float32 NumPy array (used in place, without a copy, when it is
C-contiguous; do not write to it while a run reads it) or the path of a ``.npy`` file (memory-
mapped, so it may be larger than RAM). Targets are a 1-D array or a ``.npy`` path.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Union

import numpy as np
import numpy.typing as npt

ArrayOrPath = Union[npt.ArrayLike, str, "os.PathLike[str]"]


def _is_path(x: Any) -> bool:
    return isinstance(x, (str, os.PathLike))


@dataclass
class BuiltinModel:
    """A built-in model: the run file's ``[model]`` table over features ``X`` and targets ``y``."""

    kind: str
    X: ArrayOrPath
    y: ArrayOrPath | None = None
    options: dict[str, Any] = field(default_factory=dict)
    feature_names: list[str] | None = None

    def model_table(self) -> dict[str, Any]:
        """The ``[model]`` table."""
        return {
            "kind": self.kind,
            **{k: v for k, v in self.options.items() if v is not None},
        }

    def data(self) -> tuple[dict[str, Any], np.ndarray | None, np.ndarray | None]:
        """The ``[data]`` table (for files) or the arrays to hand over."""
        if _is_path(self.X):
            table: dict[str, Any] = {"features": os.path.abspath(os.fspath(self.X))}  # type: ignore[arg-type]
            if self.y is not None:
                if not _is_path(self.y):
                    raise ValueError("give X and y both as arrays or both as .npy paths")
                table["targets"] = os.path.abspath(os.fspath(self.y))  # type: ignore[arg-type]
            return table, None, None
        x = np.asarray(self.X)
        if x.dtype not in (np.float64, np.float32):
            x = x.astype(np.float64)
        x = np.ascontiguousarray(x)
        if x.ndim != 2:
            raise ValueError(f"X must be 2-D (rows x features), got shape {x.shape}")
        y = None
        if self.y is not None:
            if _is_path(self.y):
                raise ValueError("give X and y both as arrays or both as .npy paths")
            y = np.ascontiguousarray(np.asarray(self.y, dtype=np.float64))
            if y.ndim != 1:
                raise ValueError(f"y must be 1-D, got shape {y.shape}")
        return {}, x, y


def Logistic(
    X: ArrayOrPath,
    y: ArrayOrPath,
    prior_variance: float | None = None,
    intercept: bool | None = None,
    prior: str | None = None,
    prior_scale: float | None = None,
    feature_names: list[str] | None = None,
) -> BuiltinModel:
    """Logistic regression, labels 0/1 (or −1/+1), prior θ ~ N(0, prior_variance·I) (default
    10) or ``prior="cauchy"`` with ``prior_scale``; ``intercept=True`` adds a parameter."""
    return BuiltinModel(
        "logistic",
        X,
        y,
        {
            "prior_variance": prior_variance,
            "intercept": intercept,
            "prior": prior,
            "prior_scale": prior_scale,
        },
        feature_names,
    )


def Linear(
    X: ArrayOrPath,
    y: ArrayOrPath,
    prior_variance: float | None = None,
    intercept: bool | None = None,
    noise_variance: float | str | None = None,
    log_noise_prior_variance: float | None = None,
    feature_names: list[str] | None = None,
) -> BuiltinModel:
    """Linear regression with Gaussian noise: a known ``noise_variance`` or ``"learn"``."""
    return BuiltinModel(
        "linear",
        X,
        y,
        {
            "prior_variance": prior_variance,
            "intercept": intercept,
            "noise_variance": noise_variance,
            "log_noise_prior_variance": log_noise_prior_variance,
        },
        feature_names,
    )


def Poisson(
    X: ArrayOrPath,
    y: ArrayOrPath,
    prior_variance: float | None = None,
    intercept: bool | None = None,
    link: str | None = None,
    feature_names: list[str] | None = None,
) -> BuiltinModel:
    """Poisson regression on counts, ``link="log"`` (default) or ``"softplus"``."""
    return BuiltinModel(
        "poisson",
        X,
        y,
        {"prior_variance": prior_variance, "intercept": intercept, "link": link},
        feature_names,
    )
