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
pub use full_data::{FullBatch, FullDataEvaluator};
pub use minibatch::Minibatch;
pub use subsample::Subsampler;
pub use svrg::Svrg;

use crate::rng::ChainRng;

/// An estimate of the score ∇log π(θ).
pub trait GradientEstimator: Send {
    /// Write ĝ(θ) into `out` (overwritten), drawing any randomness from `rng`.
    fn estimate(&mut self, theta: &[f64], out: &mut [f64], rng: &mut ChainRng);

    /// Per-datum gradient evaluations one call costs (n for a minibatch of n, N for the full
    /// data); the unit of deterministic budgets and of cost comparisons.
    fn cost_per_estimate(&self) -> usize;

    /// Called when a chain (re)starts at `theta`: estimators with state (e.g. an SVRG centre)
    /// re-initialise here. Default: nothing.
    fn restart(&mut self, _theta: &[f64]) {}
}

/// How the minibatch size is given: a count, or a fraction of N.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BatchSize {
    /// Exactly this many data points.
    Count(usize),
    /// floor(fraction·N), at least 1 (the MAMBA tables' percentage convention, §1.2).
    Fraction(f64),
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

impl BatchSize {
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
