"""Built-in models over arrays or files, evaluated in Rust (no Python in the sampling loop).

Features are a 2-D float64 or float32 NumPy array (used in place, without a copy, when it is
C-contiguous; do not write to it while a run reads it), a SciPy sparse matrix or array (any
format; copied once as compressed sparse rows, which the models multiply without densifying),
or the path of a ``.npy`` file (memory-mapped, so it may be larger than RAM). Targets are a 1-D
array or a ``.npy`` path.
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


def _is_sparse(x: Any) -> bool:
    """A SciPy sparse matrix or array (recognised without importing SciPy)."""
    return hasattr(x, "tocsr") and hasattr(x, "nnz")


def _csr_parts(x: Any) -> dict[str, Any]:
    """The compressed-sparse-row parts of a SciPy sparse ``x`` as float64 values and int64
    offsets and columns, duplicates summed and columns sorted within each row (on a copy: the
    user's matrix is not changed)."""
    csr = x.tocsr().astype(np.float64, copy=True)
    if len(csr.shape) != 2:
        raise ValueError(f"X must be 2-D (rows x features), got shape {csr.shape}")
    csr.sum_duplicates()
    return {
        "indptr": np.ascontiguousarray(csr.indptr, dtype=np.int64),
        "indices": np.ascontiguousarray(csr.indices, dtype=np.int64),
        "data": np.ascontiguousarray(csr.data, dtype=np.float64),
        "shape": (int(csr.shape[0]), int(csr.shape[1])),
    }


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

    def data(
        self,
    ) -> tuple[dict[str, Any], np.ndarray | dict[str, Any] | None, np.ndarray | None]:
        """The ``[data]`` table (for files) or the arrays to hand over (sparse features as
        their compressed-sparse-row parts)."""
        if _is_path(self.X):
            table: dict[str, Any] = {"features": os.path.abspath(os.fspath(self.X))}  # type: ignore[arg-type]
            if self.y is not None:
                if not _is_path(self.y):
                    raise ValueError("give X and y both as arrays or both as .npy paths")
                table["targets"] = os.path.abspath(os.fspath(self.y))  # type: ignore[arg-type]
            return table, None, None
        if _is_sparse(self.X):
            return {}, _csr_parts(self.X), self._targets()
        x = np.asarray(self.X)
        if x.dtype not in (np.float64, np.float32):
            x = x.astype(np.float64)
        x = np.ascontiguousarray(x)
        if x.ndim != 2:
            raise ValueError(f"X must be 2-D (rows x features), got shape {x.shape}")
        return {}, x, self._targets()

    def _targets(self) -> np.ndarray | None:
        """The targets as a 1-D float64 array (None without targets)."""
        if self.y is None:
            return None
        if _is_path(self.y):
            raise ValueError("give X and y both as arrays or both as .npy paths")
        y = np.ascontiguousarray(np.asarray(self.y, dtype=np.float64))
        if y.ndim != 1:
            raise ValueError(f"y must be 1-D, got shape {y.shape}")
        return y


def Logistic(
    X: ArrayOrPath,
    y: ArrayOrPath,
    prior_variance: float | None = None,
    intercept: bool | None = None,
    prior: str | None = None,
    prior_scale: float | None = None,
    feature_names: list[str] | None = None,
    priors: dict[str, dict[str, Any]] | None = None,
) -> BuiltinModel:
    """Logistic regression, labels 0/1 (or −1/+1), prior θ ~ N(0, prior_variance·I) (default
    10) or ``prior="cauchy"`` with ``prior_scale``, or a prior per parameter group in
    ``priors`` (``"coefficients"``, ``"intercept"``; see :mod:`sgmcmc.priors`);
    ``intercept=True`` adds a parameter."""
    return BuiltinModel(
        "logistic",
        X,
        y,
        {
            "prior_variance": prior_variance,
            "intercept": intercept,
            "prior": prior,
            "prior_scale": prior_scale,
            "priors": priors,
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
    priors: dict[str, dict[str, Any]] | None = None,
) -> BuiltinModel:
    """Linear regression with Gaussian noise: a known ``noise_variance``, ``"learn"`` (log σ²
    with a normal prior), or a prior per parameter group in ``priors`` (``"coefficients"``,
    ``"intercept"``, ``"sigma"``; see :mod:`sgmcmc.priors`): with ``"sigma"`` the noise sd σ
    is learned under that prior and reported as ``sigma``."""
    return BuiltinModel(
        "linear",
        X,
        y,
        {
            "prior_variance": prior_variance,
            "intercept": intercept,
            "noise_variance": noise_variance,
            "log_noise_prior_variance": log_noise_prior_variance,
            "priors": priors,
        },
        feature_names,
    )


def NormalMixture(
    y: ArrayOrPath,
    priors: dict[str, dict[str, Any]] | None = None,
) -> BuiltinModel:
    """A two-component normal mixture of scalar data ``y`` with ordered means (posteriordb's
    ``low_dim_gauss_mix``), reported as ``mu[1] < mu[2]``, ``sigma[1]``, ``sigma[2]`` and the
    first component's weight ``theta``. ``priors`` may give ``"mu"``, ``"sigma"`` and
    ``"weight"`` (all three; default N(0, 2²), half-normal(2), Beta(5, 5))."""
    X: ArrayOrPath = y if _is_path(y) else np.asarray(y, dtype=np.float64).reshape(-1, 1)
    return BuiltinModel("normal_mixture", X, None, {"priors": priors})


def Poisson(
    X: ArrayOrPath,
    y: ArrayOrPath,
    prior_variance: float | None = None,
    intercept: bool | None = None,
    link: str | None = None,
    feature_names: list[str] | None = None,
    priors: dict[str, dict[str, Any]] | None = None,
) -> BuiltinModel:
    """Poisson regression on counts, ``link="log"`` (default) or ``"softplus"``; prior
    N(0, prior_variance·I), or a prior per parameter group in ``priors`` (``"coefficients"``,
    ``"intercept"``)."""
    return BuiltinModel(
        "poisson",
        X,
        y,
        {
            "prior_variance": prior_variance,
            "intercept": intercept,
            "link": link,
            "priors": priors,
        },
        feature_names,
    )


Data = Any
"""A data set for a user model: an array with one row per data point, or a tuple/dict of such
arrays (all with the same number of rows)."""


def _num_rows(data: Data) -> int:
    leaves = (
        list(data.values())
        if isinstance(data, dict)
        else (list(data) if isinstance(data, (tuple, list)) else [data])
    )
    if not leaves:
        raise ValueError("data: no arrays")
    rows = {int(np.shape(a)[0]) if np.ndim(a) > 0 else -1 for a in leaves}
    if len(rows) != 1 or -1 in rows:
        raise ValueError(
            f"data: the arrays must share their first dimension, got rows {sorted(rows)}"
        )
    return rows.pop()


def _take(data: Data, idx: np.ndarray) -> Data:
    if isinstance(data, dict):
        return {k: v[idx] for k, v in data.items()}
    if isinstance(data, (tuple, list)):
        return type(data)(a[idx] for a in data)
    return data[idx]


class UserModel:
    """A model defined in Python, evaluated by callbacks that serve several chains per call.

    Subclass it, or build one with :func:`from_jax` or :func:`from_numpy`. The sampler calls
    (θ has shape [K, d], one row per chain; ``idx`` [K, b] are data indices chosen by the Rust
    core from the chains' seeded streams):

    - ``log_prior(theta) -> (values[K], grads[K, d])``
    - ``loglik_sum(theta, idx) -> (values[K], grads[K, d])``: Σ over each row's b points of
      log p(x_i | θ) and its gradient,
    - ``loglik_each(theta, idx) -> values[K, b]``, ``grad_each(theta, idx) -> grads[K, b, d]``:
      the per-datum terms (control variates' noise for CCAdL, minibatch MH, ...),
    - ``grad_estimate(theta, idx, centre) -> (prior_grads[K, d], lik_grads[K, d],
      centre_grads[K, d] or None)``: what one minibatch estimate needs (``centre``: the control
      variates' centres, [K, d], or None), in one call; built here from the methods above, and
      fused into one compiled function by :func:`from_jax`.

    Results are float64 NumPy arrays. The data stay on the Python side.
    """

    def __init__(self, dim: int, num_data: int, names: list[str] | None = None) -> None:
        self.dim = int(dim)
        self.num_data = int(num_data)
        self.names = names

    def log_prior(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def loglik_sum(self, theta: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def loglik_each(self, theta: np.ndarray, idx: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def grad_each(self, theta: np.ndarray, idx: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def grad_estimate(
        self, theta: np.ndarray, idx: np.ndarray, centre: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        prior = _grads("log_prior", self.log_prior(theta), theta.shape)
        lik = _grads("loglik_sum", self.loglik_sum(theta, idx), theta.shape)
        if centre is None:
            return prior, lik, None
        return prior, lik, _grads("loglik_sum", self.loglik_sum(centre, idx), theta.shape)


def _grads(method: str, result: Any, shape: tuple[int, ...]) -> np.ndarray:
    """The gradients of a ``(values, grads)`` pair a callback returned, checked."""
    from ._sgmcmc import SgmcmcError

    if not isinstance(result, tuple) or len(result) != 2:
        raise SgmcmcError(
            f"model.{method}: expected a pair (values[K], grads[K, d]), got {type(result).__name__}"
        )
    grads = np.asarray(result[1])
    if grads.shape != shape:
        raise SgmcmcError(
            f"model.{method}: grads must be a float64 array of shape {list(shape)}, "
            f"got shape {list(grads.shape)}"
        )
    return np.asarray(grads, dtype=np.float64)


class _NumpyModel(UserModel):
    def __init__(
        self,
        loglik: Any,
        grad_loglik: Any,
        logprior: Any,
        grad_logprior: Any,
        data: Data,
        dim: int,
        names: list[str] | None,
    ) -> None:
        super().__init__(dim, _num_rows(data), names)
        self._f, self._g, self._p, self._gp, self._data = (
            loglik,
            grad_loglik,
            logprior,
            grad_logprior,
            data,
        )

    def log_prior(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        values = np.array([float(self._p(t)) for t in theta])
        grads = np.stack([np.asarray(self._gp(t), dtype=np.float64) for t in theta])
        return values, grads

    def loglik_sum(self, theta: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        values = np.empty(theta.shape[0])
        grads = np.empty_like(theta)
        for k, (t, i) in enumerate(zip(theta, idx, strict=True)):
            batch = _take(self._data, i)
            values[k] = np.sum(self._f(t, batch))
            grads[k] = np.sum(np.asarray(self._g(t, batch), dtype=np.float64), axis=0)
        return values, grads

    def loglik_each(self, theta: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return np.stack(
            [
                np.asarray(self._f(t, _take(self._data, i)), dtype=np.float64)
                for t, i in zip(theta, idx, strict=True)
            ]
        )

    def grad_each(self, theta: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return np.stack(
            [
                np.asarray(self._g(t, _take(self._data, i)), dtype=np.float64)
                for t, i in zip(theta, idx, strict=True)
            ]
        )


def from_numpy(
    loglik: Any,
    grad_loglik: Any,
    logprior: Any,
    grad_logprior: Any,
    data: Data,
    dim: int,
    names: list[str] | None = None,
) -> UserModel:
    """A user model from NumPy functions vectorised over a batch of data points:
    ``loglik(theta[d], batch) -> [b]``, ``grad_loglik(theta[d], batch) -> [b, d]``,
    ``logprior(theta[d]) -> float``, ``grad_logprior(theta[d]) -> [d]``; ``batch`` is ``data``
    indexed by the batch's rows."""
    return _NumpyModel(loglik, grad_loglik, logprior, grad_logprior, data, dim, names)


class _JaxModel(UserModel):
    def __init__(
        self,
        loglik: Any,
        logprior: Any,
        data: Data,
        dim: int,
        names: list[str] | None,
        x64: bool,
    ) -> None:
        import jax
        import jax.numpy as jnp

        if x64:
            jax.config.update("jax_enable_x64", True)  # type: ignore[no-untyped-call]
        super().__init__(dim, _num_rows(data), names)
        # What the model is made of, to rebuild it in another process (a task on a worker):
        # the compiled functions are not pickled, and x64 is set there before they are made.
        self._made_of = (loglik, logprior, data, dim, names, x64)
        data = jax.tree_util.tree_map(jnp.asarray, data)

        def batch_of(idx: Any) -> Any:
            return jax.tree_util.tree_map(lambda a: a[idx], data)

        def each(theta: Any, idx: Any) -> Any:
            return jax.vmap(loglik, in_axes=(None, 0))(theta, batch_of(idx))

        def total(theta: Any, idx: Any) -> Any:
            return jnp.sum(each(theta, idx))

        def grads(theta: Any, idx: Any) -> Any:
            return jax.vmap(jax.grad(loglik), in_axes=(None, 0))(theta, batch_of(idx))

        def estimate(theta: Any, idx: Any) -> Any:
            return jax.grad(logprior)(theta), jax.grad(total)(theta, idx)

        def estimate_cv(theta: Any, idx: Any, centre: Any) -> Any:
            return (
                jax.grad(logprior)(theta),
                jax.grad(total)(theta, idx),
                jax.grad(total)(centre, idx),
            )

        self._estimate = jax.jit(jax.vmap(estimate))
        self._estimate_cv = jax.jit(jax.vmap(estimate_cv))
        self._prior = jax.jit(jax.vmap(jax.value_and_grad(logprior)))
        self._sum = jax.jit(jax.vmap(jax.value_and_grad(total)))
        self._each = jax.jit(jax.vmap(each))
        self._grads = jax.jit(jax.vmap(grads))

    def __reduce__(self) -> tuple[Any, ...]:
        return (_JaxModel, self._made_of)

    def log_prior(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        v, g = self._prior(theta)
        return np.asarray(v, dtype=np.float64), np.asarray(g, dtype=np.float64)

    def loglik_sum(self, theta: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        v, g = self._sum(theta, idx)
        return np.asarray(v, dtype=np.float64), np.asarray(g, dtype=np.float64)

    def loglik_each(self, theta: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return np.asarray(self._each(theta, idx), dtype=np.float64)

    def grad_each(self, theta: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return np.asarray(self._grads(theta, idx), dtype=np.float64)

    def grad_estimate(
        self, theta: np.ndarray, idx: np.ndarray, centre: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        if centre is None:
            prior, lik = self._estimate(theta, idx)
            return np.asarray(prior, dtype=np.float64), np.asarray(lik, dtype=np.float64), None
        prior, lik, at_centre = self._estimate_cv(theta, idx, centre)
        return (
            np.asarray(prior, dtype=np.float64),
            np.asarray(lik, dtype=np.float64),
            np.asarray(at_centre, dtype=np.float64),
        )


def from_jax(
    loglik: Any,
    logprior: Any,
    data: Data,
    dim: int,
    names: list[str] | None = None,
    x64: bool = True,
) -> UserModel:
    """A user model from a per-datum JAX function ``loglik(theta, x_i)`` and ``logprior(theta)``
    over ``data`` (an array or a pytree of arrays with one row per data point): vmap, grad and
    jit are done here, and the data stay on the JAX device. ``x64=True`` turns on JAX's float64
    (``jax_enable_x64``), as the samplers work in float64."""
    return _JaxModel(loglik, logprior, data, dim, names, x64)
