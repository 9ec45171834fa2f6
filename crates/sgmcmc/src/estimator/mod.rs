//! Gradient estimators: unbiased estimates ĝ(θ) of the score ∇log π(θ) (reference §1.2, §3).
//!
//! Every sampler takes any estimator through [`GradientEstimator`]. Each chain owns its own
//! estimator (it holds the chain's index buffer and scratch space), so estimates never allocate.

mod control_variate;
mod full_data;
mod minibatch;
mod subsample;
mod svrg;

pub use control_variate::ControlVariates;
pub use full_data::{DRAWS_PER_PASS, FullBatch, FullDataEvaluator};
pub use minibatch::Minibatch;
pub use subsample::{MinibatchScheme, Subsampler};
pub use svrg::Svrg;

use crate::checkpoint::{StateError, StateReader, StateWriter};
use crate::model::TermMoments;
use crate::rng::ChainRng;

/// An estimate of the score ∇log π(θ).
pub trait GradientEstimator: Send {
    /// Write ĝ(θ) into `out` (overwritten), drawing any randomness from `rng`.
    fn estimate(&mut self, theta: &[f64], out: &mut [f64], rng: &mut ChainRng);

    /// Per-datum gradient evaluations one call costs (n for a minibatch of n, N for the full
    /// data); the unit of deterministic budgets and of cost comparisons.
    fn cost_per_estimate(&self) -> usize;

    /// Per-datum gradient evaluations spent outside the per-call cost since the last
    /// [`GradientEstimator::restart`]: N per SVRG centre refresh (reference §5.3). Budgets in
    /// gradient evaluations add them. Default: 0.
    fn extra_evaluations_since_restart(&self) -> u64 {
        0
    }

    /// Called when a chain (re)starts at `theta`: estimators with state (e.g. an SVRG centre)
    /// re-initialise here. Default: nothing.
    fn restart(&mut self, _theta: &[f64]) {}

    /// Share one minibatch across calls (compatibility option `sghmc_shared_minibatch`,
    /// BlackJAX): while `on`, the first call that needs a minibatch draws a fresh one and later
    /// calls reuse it; every switch (on or off) discards the held batch. Estimators that draw
    /// no minibatch ignore it (the default).
    fn reuse_batch(&mut self, _on: bool) {}

    /// Appends the estimator's state between calls (its subsampler's, an SVRG centre, counters)
    /// to a checkpoint ([`crate::checkpoint`]). Default: not supported (the save fails).
    fn save_state(&self, w: &mut StateWriter) {
        w.unsupported("this gradient estimator");
    }

    /// Restores what [`GradientEstimator::save_state`] wrote. Default: not supported.
    fn load_state(&mut self, _r: &mut StateReader<'_>) -> Result<(), StateError> {
        Err(StateError::Unsupported("this gradient estimator".into()))
    }

    /// [`GradientEstimator::estimate`], also adding the per-datum terms of the estimate's random
    /// part to `moments`, for samplers that estimate the gradient-noise covariance (CCAdL,
    /// reference §2.7).
    ///
    /// The estimate is ĝ(θ) = c(θ) + w·Σₖ tₖ over a minibatch of n points: the terms are
    /// tₖ = ∇log p(x_{Sₖ} | θ) for the standard estimator and ∇log p(x_{Sₖ} | θ̂) subtracted from
    /// that for control variates, computed by [`Model::add_grad_log_lik_terms`] in the same pass
    /// as the estimate. The noise covariance of ĝ is then w²·n·Cov(t) (times (N − n)/(N − 1)
    /// without replacement). Exact estimates (full data) add no terms.
    ///
    /// Required, deliberately: a wrapper that silently reported no terms would make CCAdL wrong.
    ///
    /// [`Model::add_grad_log_lik_terms`]: crate::model::Model::add_grad_log_lik_terms
    fn estimate_with_terms(
        &mut self,
        theta: &[f64],
        out: &mut [f64],
        moments: &mut TermMoments,
        rng: &mut ChainRng,
    ) -> BatchTerms;
}

/// What [`GradientEstimator::estimate_with_terms`] used: `rows` per-datum terms, each weighted by
/// `weight` in the estimate, from a population of `population` data points.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BatchTerms {
    /// Number of terms n (0 for an exact estimate).
    pub rows: usize,
    /// Weight w of each term (N/n for a uniform minibatch).
    pub weight: f64,
    /// Number of data points N the minibatch was drawn from.
    pub population: usize,
}

crate::persist_fields!(BatchTerms {
    rows,
    weight,
    population
});

impl BatchTerms {
    /// No random part: an exact estimate.
    pub const EXACT: Self = Self {
        rows: 0,
        weight: 0.0,
        population: 0,
    };

    /// The factor s that turns the covariance of the terms into the noise covariance of the
    /// estimate: s = w²·n (= N²/n), times (N − n)/N if `finite_population` (the correction for
    /// a minibatch drawn without replacement when the term covariance is estimated with divisor
    /// n − 1; CCAdL's `ccadl_finite_population`). 0 for an exact estimate.
    pub fn noise_scale(&self, finite_population: bool) -> f64 {
        if self.rows == 0 {
            return 0.0;
        }
        let n = self.rows as f64;
        let scale = self.weight * self.weight * n;
        if finite_population && self.population > 0 {
            scale * (self.population as f64 - n) / self.population as f64
        } else {
            scale
        }
    }
}

/// How the minibatch size is given: a count, or a fraction of N.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BatchSize {
    /// Exactly this many data points.
    Count(usize),
    /// floor(fraction·N), at least 1 (the MAMBA tables' percentage convention, §1.2).
    Fraction(f64),
}

#[cfg(feature = "serde")]
/// As written in a run file: an integer count, a fraction of N in (0, 1], or a percentage
/// string such as `"1%"` (read as its fraction).
impl serde::Serialize for BatchSize {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            BatchSize::Count(c) => s.serialize_u64(*c as u64),
            BatchSize::Fraction(f) => s.serialize_f64(*f),
        }
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for BatchSize {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = BatchSize;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a count (integer), a fraction of N (number in (0, 1]) or a percentage like \"1%\"")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
                usize::try_from(v)
                    .map(BatchSize::Count)
                    .map_err(|_| E::custom(format!("batch_size must be at least 1, got {v}")))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
                usize::try_from(v)
                    .map(BatchSize::Count)
                    .map_err(|_| E::custom(format!("batch_size {v} is too large")))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
                Ok(BatchSize::Fraction(v))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                v.strip_suffix('%')
                    .and_then(|p| p.trim().parse::<f64>().ok())
                    .map(BatchSize::percent)
                    .ok_or_else(|| {
                        E::custom(format!(
                            "batch_size: cannot read {v:?}; use a count, a fraction or \"1%\""
                        ))
                    })
            }
        }
        d.deserialize_any(V)
    }
}

/// Errors in estimator settings.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EstimatorError {
    /// Batch size is 0, larger than N, or a fraction outside (0, 1].
    #[error("batch size {given} is invalid for N = {n}: {why}")]
    BadBatchSize {
        /// The requested size as written.
        given: String,
        /// Number of data points.
        n: usize,
        /// What is wrong.
        why: &'static str,
    },
    /// A control-variate centre whose length is not the model's dimension.
    #[error("control-variate centre has {got} values, the model has {expected} parameters")]
    DimensionMismatch {
        /// Model dimension D.
        expected: usize,
        /// Length given.
        got: usize,
    },
    /// An SVRG update rate r that is not a positive integer.
    #[error("SVRG update rate {0} is invalid: must be at least 1")]
    BadUpdateRate(usize),
}

/// From the command line: a count (`600`), a fraction of N (`0.1`) or a percentage (`"10%"`).
impl std::str::FromStr for BatchSize {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        let t = text.trim();
        let parsed = match t.strip_suffix('%') {
            Some(p) => p.trim().parse::<f64>().ok().map(BatchSize::percent),
            None => t
                .parse::<usize>()
                .map(BatchSize::Count)
                .ok()
                .or_else(|| t.parse::<f64>().ok().map(BatchSize::Fraction)),
        };
        parsed.ok_or_else(|| {
            format!("batch size {text:?}: use a count, a fraction of N or a percentage like \"1%\"")
        })
    }
}

impl BatchSize {
    /// `percent` % of N, as a run file's `"1%"` reads (the fraction `percent / 100`).
    pub fn percent(percent: f64) -> Self {
        BatchSize::Fraction(percent / 100.0)
    }

    /// The number of data points for a data set of `n` points.
    pub fn resolve(self, n: usize) -> Result<usize, EstimatorError> {
        match self {
            BatchSize::Count(c) if c == 0 => Err(EstimatorError::BadBatchSize {
                given: c.to_string(),
                n,
                why: "must be at least 1",
            }),
            BatchSize::Count(c) if c > n => Err(EstimatorError::BadBatchSize {
                given: c.to_string(),
                n,
                why: "larger than the number of data points",
            }),
            BatchSize::Count(c) => Ok(c),
            BatchSize::Fraction(f) if !(f > 0.0 && f <= 1.0) => Err(EstimatorError::BadBatchSize {
                given: f.to_string(),
                n,
                why: "a fraction must be in (0, 1]",
            }),
            BatchSize::Fraction(f) => Ok(((f * n as f64).floor() as usize).max(1)),
        }
    }
}
