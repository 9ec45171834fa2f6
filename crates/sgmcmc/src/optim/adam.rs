//! The MAP by Adam on minibatch gradients (reference §3.2; Kingma & Ba 2014), as the MAMBA
//! experiments found it:
//!
//! ```text
//! g_t = ĝ(θ_{t−1})            (standard minibatch estimate of ∇log π, N/n scaling)
//! m_t = β₁·m_{t−1} + (1 − β₁)·g_t,   v_t = β₂·v_{t−1} + (1 − β₂)·g_t²
//! θ_t = θ_{t−1} + α·m̂_t / (√v̂_t + ε),   m̂_t = m_t/(1 − β₁ᵗ),  v̂_t = v_t/(1 − β₂ᵗ)
//! ```
//!
//! with β₁ = 0.9, β₂ = 0.999, ε = 1e-8 and a constant learning rate α (ascent on log π).
//!
//! Written by hand because it must draw its minibatches through the library's own estimator
//! and random streams (seeded, allocation-free per step); the optimiser crates take a full
//! objective. The coreset optimisers' Adam (`coreset::optim::Adam`) differs on purpose: it
//! decays α as α₀/√t and clamps weights at 0, as the coreset reference does.
//!
//! L-BFGS ([`super::find_map`]) is the library's default for the MAP: on a smooth full-data
//! objective it converges far further per full pass. Adam reproduces the authors' starting
//! points, which for a non-convex model (the MAMBA neural network) is a different point.

use super::map::{MapError, MapResult};
use crate::estimator::{
    BatchSize, EstimatorError, FullDataEvaluator, GradientEstimator, Minibatch,
};
use crate::model::Model;
use crate::rng::ChainRng;

const BETA1: f64 = 0.9;
const BETA2: f64 = 0.999;
const EPSILON: f64 = 1e-8;

/// Settings of [`find_map_adam`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamMapOptions {
    /// Constant learning rate α (> 0). Reference §3.2: 1e-2.
    pub learning_rate: f64,
    /// Minibatch size of each gradient estimate. Reference §3.2: 1 % of N.
    pub batch: BatchSize,
    /// Number of Adam steps. Reference §3.2: 5,000.
    pub iterations: usize,
}

impl Default for AdamMapOptions {
    /// The reference's defaults (§3.2): α = 1e-2, 1 % batches, 5,000 steps.
    fn default() -> Self {
        Self {
            learning_rate: 1e-2,
            batch: BatchSize::Fraction(0.01),
            iterations: 5_000,
        }
    }
}

/// Failures specific to [`find_map_adam`], reported through [`MapError`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdamMapError {
    /// The learning rate is not finite and positive.
    #[error("Adam's learning rate must be finite and > 0, got {0}")]
    LearningRate(f64),
    /// No steps requested.
    #[error("Adam needs at least 1 iteration")]
    NoIterations,
    /// The batch size does not fit the data.
    #[error(transparent)]
    Batch(#[from] EstimatorError),
    /// A gradient estimate or the iterate became NaN or infinite.
    #[error(
        "Adam diverged at step {step}: a non-finite {what} (lower the learning rate, or start elsewhere)"
    )]
    Diverged {
        /// 1-based step.
        step: usize,
        /// "gradient estimate" or "iterate".
        what: &'static str,
    },
}

/// Run Adam from `start` on minibatch estimates of ∇log π drawn from `rng`; then one full-data
/// pass gives the result's log posterior and ‖∇log π‖_∞. `converged` is always false (Adam has
/// no stopping rule here), `iterations` counts steps, and `evaluations` counts full-data
/// equivalents: ⌈steps·n/N⌉ + 1.
pub fn find_map_adam(
    model: &dyn Model,
    start: &[f64],
    options: &AdamMapOptions,
    rng: &mut ChainRng,
) -> Result<MapResult, MapError> {
    let dim = model.dim();
    if start.len() != dim {
        return Err(MapError::Dimension {
            expected: dim,
            got: start.len(),
        });
    }
    let alpha = options.learning_rate;
    if !(alpha.is_finite() && alpha > 0.0) {
        return Err(AdamMapError::LearningRate(alpha).into());
    }
    if options.iterations == 0 {
        return Err(AdamMapError::NoIterations.into());
    }
    let mut estimator = Minibatch::new(model, options.batch).map_err(AdamMapError::from)?;
    let mut theta = start.to_vec();
    let (mut m, mut v, mut g) = (vec![0.0; dim], vec![0.0; dim], vec![0.0; dim]);
    let (mut beta1_t, mut beta2_t) = (1.0, 1.0);
    for step in 1..=options.iterations {
        estimator.estimate(&theta, &mut g, rng);
        if !g.iter().all(|x| x.is_finite()) {
            return Err(AdamMapError::Diverged {
                step,
                what: "gradient estimate",
            }
            .into());
        }
        beta1_t *= BETA1;
        beta2_t *= BETA2;
        let (m_correction, v_correction) = (1.0 - beta1_t, 1.0 - beta2_t);
        for (((x, mk), vk), &gk) in theta.iter_mut().zip(&mut m).zip(&mut v).zip(&g) {
            *mk = BETA1 * *mk + (1.0 - BETA1) * gk;
            *vk = BETA2 * *vk + (1.0 - BETA2) * gk * gk;
            *x += alpha * (*mk / m_correction) / ((*vk / v_correction).sqrt() + EPSILON);
        }
        if !theta.iter().all(|x| x.is_finite()) {
            return Err(AdamMapError::Diverged {
                step,
                what: "iterate",
            }
            .into());
        }
    }
    let mut full = FullDataEvaluator::new(model);
    let log_posterior = full.log_posterior_and_grad(&theta, &mut g);
    let gradient_norm = g.iter().fold(0.0_f64, |a, x| a.max(x.abs()));
    let n = model.num_data().max(1);
    let passes = (options.iterations * estimator.batch_size()).div_ceil(n) + 1;
    Ok(MapResult {
        theta,
        log_posterior,
        gradient_norm,
        iterations: options.iterations,
        evaluations: passes,
        converged: false,
    })
}
