"""Priors on one parameter (or on each parameter of a group), as real models state them: the
tables of a run file's ``[model.priors]``. Densities are normalised; ``flat`` and
``flat_positive`` are improper.

    from sgmcmc import models, priors
    model = models.Linear(X, y, intercept=True, priors={
        "coefficients": priors.flat(),
        "intercept": priors.normal(0, 10),
        "sigma": priors.half_cauchy(2.5),     # sigma is then learned, reported as sigma
    })

A prior on a positive parameter (``half_normal``, ``half_cauchy``, ``exponential``,
``flat_positive``) or on a probability (``beta``) is sampled on an unconstrained scale (log, logit)
with the log-Jacobian term; draws and summaries are on the parameter's own scale.
"""

from __future__ import annotations

from typing import Any

Prior = dict[str, Any]
"""A prior: ``{"kind": ..., parameters}``, as the run file writes it."""


def normal(location: float, scale: float) -> Prior:
    """N(location, scale²)."""
    return {"kind": "normal", "location": float(location), "scale": float(scale)}


def student_t(df: float, location: float, scale: float) -> Prior:
    """Student-t with ``df`` degrees of freedom, location and scale."""
    return {
        "kind": "student_t",
        "df": float(df),
        "location": float(location),
        "scale": float(scale),
    }


def cauchy(location: float, scale: float) -> Prior:
    """Cauchy(location, scale)."""
    return {"kind": "cauchy", "location": float(location), "scale": float(scale)}


def flat() -> Prior:
    """Flat on the real line (improper)."""
    return {"kind": "flat"}


def flat_positive() -> Prior:
    """Flat on x > 0 (improper): Stan's ``real<lower=0>`` without a prior statement."""
    return {"kind": "flat_positive"}


def half_normal(scale: float) -> Prior:
    """N(0, scale²) folded at 0, on x > 0."""
    return {"kind": "half_normal", "scale": float(scale)}


def half_cauchy(scale: float) -> Prior:
    """Cauchy(0, scale) folded at 0, on x > 0."""
    return {"kind": "half_cauchy", "scale": float(scale)}


def exponential(rate: float) -> Prior:
    """Exponential(rate), on x > 0."""
    return {"kind": "exponential", "rate": float(rate)}


def beta(alpha: float, beta: float) -> Prior:
    """Beta(alpha, beta), on 0 < x < 1."""
    return {"kind": "beta", "alpha": float(alpha), "beta": float(beta)}
