"""Samplers and gradient estimators as typed values.

Each class is one table of the run file (``[sampler]``, ``[gradient]``): only the keys you set
are sent, and the Rust core fills in its documented defaults and validates every value, so a
setting has one source of truth. Names follow the run file (and SGMCMCJax/BlackJAX where they
agree): ``step_size`` is the sampler's own step (ε for SGLD/pSGLD, η for SGHMC/SGNHT, h for the
splitting schemes).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar


def _table(obj: Any, head: dict[str, Any]) -> dict[str, Any]:
    out = dict(head)
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if value is not None:
            out[f.name] = value.table() if hasattr(value, "table") else value
    return out


class Sampler:
    """A stochastic-gradient sampler (the run file's ``[sampler]`` table)."""

    kind: ClassVar[str]

    def table(self) -> dict[str, Any]:
        """The ``[sampler]`` table of this sampler as a dict."""
        return _table(self, {"kind": self.kind})


@dataclass(frozen=True)
class SGLD(Sampler):
    """SGLD (Welling & Teh 2011): θ + ε·ĝ + √(2ε)·ξ. Give ``step_size`` (ε) or
    ``welling_teh_step`` (h = 2ε)."""

    kind: ClassVar[str] = "sgld"
    step_size: float | None = None
    welling_teh_step: float | None = None
    temperature: float | None = None
    schedule: dict[str, Any] | None = None


@dataclass(frozen=True)
class PSGLD(Sampler):
    """pSGLD (Li et al. 2016): SGLD with an RMSProp preconditioner."""

    kind: ClassVar[str] = "psgld"
    step_size: float | None = None
    catalogue_dt: float | None = None
    decay: float | None = None
    stabiliser: float | None = None
    temperature: float | None = None
    schedule: dict[str, Any] | None = None


@dataclass(frozen=True)
class SGHMC(Sampler):
    """SGHMC (Chen et al. 2014): ``step_size`` η = h², ``inner_steps`` L gradient estimates
    per iteration, friction α."""

    step_size: float
    inner_steps: int
    kind: ClassVar[str] = "sghmc"
    friction: float | None = None
    noise_estimate: float | None = None
    temperature: float | None = None
    gradient_before_position_update: bool | None = None
    no_momentum_resampling: bool | None = None
    shared_minibatch: bool | None = None
    schedule: dict[str, Any] | None = None


@dataclass(frozen=True)
class SGNHT(Sampler):
    """SGNHT (Ding et al. 2014): Euler scheme with one thermostat."""

    step_size: float
    kind: ClassVar[str] = "sgnht"
    diffusion: float | None = None
    temperature: float | None = None
    schedule: dict[str, Any] | None = None


@dataclass(frozen=True)
class BAOAB(Sampler):
    """BAOAB (Leimkuhler & Matthews 2013): underdamped Langevin splitting, step h, friction γ."""

    step_size: float
    friction: float
    kind: ClassVar[str] = "baoab"
    temperature: float | None = None
    zero_initial_momentum: bool | None = None
    noise_std_scaled_by_tau: bool | None = None
    schedule: dict[str, Any] | None = None


@dataclass(frozen=True)
class BADODAB(Sampler):
    """BADODAB (Leimkuhler & Shang 2016): splitting scheme for the SGNHT dynamics."""

    step_size: float
    kind: ClassVar[str] = "badodab"
    initial_thermostat: float | None = None
    thermal_mass: float | None = None
    noise_amplitude: float | None = None
    temperature: float | None = None
    schedule: dict[str, Any] | None = None


@dataclass(frozen=True)
class CCAdL(Sampler):
    """CCAdL (Shang et al. 2015): SGNHT dynamics with the estimated gradient-noise covariance
    subtracted as friction; step h, noise amplitude ``diffusion`` A."""

    step_size: float
    diffusion: float
    kind: ClassVar[str] = "ccadl"
    temperature: float | None = None
    covariance: str | None = None
    finite_population: bool | None = None
    kappa: float | None = None
    exponential_friction: bool | None = None
    schedule: dict[str, Any] | None = None


@dataclass(frozen=True)
class MH(Sampler):
    """Minibatch Metropolis–Hastings (Seita et al. 2017): a ``proposal`` such as
    ``{"kind": "random_walk", "sd": 0.05}`` and a ``test`` (``"barker"``, ``"austerity"``, ...)."""

    proposal: dict[str, Any]
    kind: ClassVar[str] = "mh"
    test: str | None = None
    batch_size: int | None = None
    temperature: float | None = None
    policy: str | None = None
    variance: str | None = None
    sigma: float | None = None
    tolerance: float | None = None
    minibatches: int | None = None
    std_threshold: float | None = None
    std_smoothing: float | None = None


class Gradient:
    """A gradient estimator (the run file's ``[gradient]`` table)."""

    estimator: ClassVar[str]

    def table(self) -> dict[str, Any]:
        """The ``[gradient]`` table of this estimator as a dict."""
        return _table(self, {"estimator": self.estimator})


@dataclass(frozen=True)
class Minibatch(Gradient):
    """The standard estimator: the prior gradient plus N/n times a minibatch's likelihood
    gradients. ``batch_size``: a count (int) or a fraction of N (float in (0, 1]).
    ``scheme``: ``"uniform"`` (default; n random rows) or ``"block"`` (n contiguous rows from
    a random offset, read at memory bandwidth; a built-in model's rows are put in a random
    order once first; a user model's rows are used in the order given, so shuffle them)."""

    estimator: ClassVar[str] = "minibatch"
    batch_size: int | float | None = None
    with_replacement: bool | None = None
    scheme: str | None = None


@dataclass(frozen=True)
class ControlVariates(Gradient):
    """Control variates centred at the MAP (Baker et al. 2019); ``scheme`` as for
    ``Minibatch``."""

    estimator: ClassVar[str] = "control_variates"
    batch_size: int | float | None = None
    with_replacement: bool | None = None
    scheme: str | None = None


@dataclass(frozen=True)
class SVRG(Gradient):
    """Control variates whose centre is refreshed every ``update_rate`` estimates (Dubey et al.
    2016)."""

    estimator: ClassVar[str] = "svrg"
    batch_size: int | float | None = None
    update_rate: int | None = None
    with_replacement: bool | None = None
    scheme: str | None = None


@dataclass(frozen=True)
class FullBatch(Gradient):
    """The exact full-data gradient."""

    estimator: ClassVar[str] = "full"
