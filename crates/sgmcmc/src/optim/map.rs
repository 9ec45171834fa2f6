//! The MAP: argmax of the full-data log posterior, by L-BFGS on U(θ) = −log π(θ).

use super::lbfgs::{LbfgsError, LbfgsOptions, minimize};
use crate::estimator::FullDataEvaluator;
use crate::model::Model;

/// The MAP and how it was found.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct MapResult {
    /// θ̂ = argmax log π.
    pub theta: Vec<f64>,
    /// log π(θ̂) up to the model's additive constant.
    pub log_posterior: f64,
    /// ‖∇log π(θ̂)‖_∞.
    pub gradient_norm: f64,
    /// L-BFGS iterations.
    pub iterations: usize,
    /// Full-data evaluations (each costs N per-datum gradients).
    pub evaluations: usize,
    /// Whether a convergence criterion was met.
    pub converged: bool,
}

/// Failure to find the MAP (by L-BFGS or by Adam).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MapError {
    /// The optimiser failed (non-finite start, line search failure).
    #[error("finding the MAP: {0}")]
    Optimiser(#[from] LbfgsError),
    /// Adam failed (bad settings, or the iterate diverged).
    #[error("finding the MAP: {0}")]
    Adam(#[from] super::adam::AdamMapError),
    /// The start has the wrong length.
    #[error("finding the MAP: start has {got} values, the model has {expected} parameters")]
    Dimension {
        /// Model dimension.
        expected: usize,
        /// Given length.
        got: usize,
    },
}

/// Maximise the full-data log posterior from `start` (full-data passes run in parallel, with a
/// summation order independent of the thread count).
pub fn find_map(
    model: &dyn Model,
    start: &[f64],
    options: &LbfgsOptions,
) -> Result<MapResult, MapError> {
    if start.len() != model.dim() {
        return Err(MapError::Dimension {
            expected: model.dim(),
            got: start.len(),
        });
    }
    let mut eval = FullDataEvaluator::new(model);
    let objective = |theta: &[f64], grad: &mut [f64]| {
        let lp = eval.log_posterior_and_grad(theta, grad);
        grad.iter_mut().for_each(|g| *g = -*g);
        -lp
    };
    let r = minimize(objective, start, options)?;
    Ok(MapResult {
        theta: r.x,
        log_posterior: -r.value,
        gradient_norm: r.gradient_norm,
        iterations: r.iterations,
        evaluations: r.evaluations,
        converged: r.converged,
    })
}
