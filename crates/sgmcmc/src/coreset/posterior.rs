//! The coreset and its posterior (reference §7.1, Eq. 1):
//!
//! ```text
//! π_w(θ) ∝ exp(Σₘ wₘ·ℓ_{cₘ}(θ))·π₀(θ)
//! ```
//!
//! over M data points c₁..c_M of a [`Model`], with weights w ≥ 0 initialised to N/M.

use super::CoresetError;
use crate::estimator::Subsampler;
use crate::model::{DataIndex, Model, Scratch};
use crate::rng::ChainRng;

/// M distinct data points and their weights.
#[derive(Debug, Clone, PartialEq)]
pub struct Coreset {
    /// Indices c₁..c_M into the model's data.
    pub points: Vec<DataIndex>,
    /// Weights w₁..w_M ≥ 0.
    pub weights: Vec<f64>,
}

impl Coreset {
    /// M points drawn uniformly without replacement from `0..n`, weights N/M (reference §7.1).
    pub fn uniform(n: usize, m: usize, rng: &mut ChainRng) -> Result<Self, CoresetError> {
        check_size(m, n, "data points")?;
        let mut sub = Subsampler::new(n);
        let mut points = sub.draw(m, rng).to_vec();
        points.sort_unstable();
        Ok(Self::with_uniform_weights(points, n))
    }

    /// The class-balanced coreset for 0/1 labels (reference §7.1, App. A.1.2): n₊ =
    /// min(⌈M/2⌉, #positives) positives and M − n₊ negatives, each uniformly without replacement.
    /// A label is positive when it is > 0.5.
    pub fn stratified(labels: &[f64], m: usize, rng: &mut ChainRng) -> Result<Self, CoresetError> {
        let n = labels.len();
        check_size(m, n, "data points")?;
        let (pos, neg): (Vec<DataIndex>, Vec<DataIndex>) =
            (0..n as DataIndex).partition(|&i| labels[i as usize] > 0.5);
        let n_pos = m.div_ceil(2).min(pos.len());
        check_size(m - n_pos, neg.len(), "negative labels")?;
        let mut points = Vec::with_capacity(m);
        for (class, take) in [(&pos, n_pos), (&neg, m - n_pos)] {
            let mut sub = Subsampler::new(class.len());
            points.extend(sub.draw(take, rng).iter().map(|&j| class[j as usize]));
        }
        points.sort_unstable();
        Ok(Self::with_uniform_weights(points, n))
    }

    /// The given points with every weight N/M.
    pub fn with_uniform_weights(points: Vec<DataIndex>, n: usize) -> Self {
        let w = n as f64 / points.len() as f64;
        let weights = vec![w; points.len()];
        Self { points, weights }
    }

    /// Number of points M.
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// `true` when the coreset has no points.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }
}

fn check_size(m: usize, available: usize, what: &'static str) -> Result<(), CoresetError> {
    if m == 0 {
        return Err(CoresetError::Setting(
            "coreset size M must be at least 1".into(),
        ));
    }
    if m > available {
        return Err(CoresetError::Setting(format!(
            "coreset size {m} exceeds the {available} {what} available"
        )));
    }
    Ok(())
}

/// Workspace for [`CoresetPosterior`] calls: allocated at the first call, then reused.
#[derive(Debug, Default, Clone)]
pub struct PosteriorWorkspace {
    values: Vec<f64>,
    scratch: Scratch,
}

/// The coreset posterior π_w of Eq. 1: a view of a model, the coreset points and the current
/// weights.
#[derive(Clone, Copy)]
pub struct CoresetPosterior<'a> {
    /// The full-data model (its prior and per-datum log-likelihoods).
    pub model: &'a dyn Model,
    /// Coreset points c₁..c_M.
    pub points: &'a [DataIndex],
    /// Weights w₁..w_M.
    pub weights: &'a [f64],
}

impl CoresetPosterior<'_> {
    /// Number of parameters D.
    pub fn dim(&self) -> usize {
        self.model.dim()
    }

    /// Σₘ wₘ·ℓ_{cₘ}(θ), the coreset log-likelihood.
    pub fn log_lik(&self, theta: &[f64], ws: &mut PosteriorWorkspace) -> f64 {
        weighted_log_lik(self.model, self.points, self.weights, theta, ws)
    }

    /// log π_w(θ) = log π₀(θ) + Σₘ wₘ·ℓ_{cₘ}(θ), up to a constant; −∞ outside the prior's
    /// support.
    pub fn log_density(&self, theta: &[f64], ws: &mut PosteriorWorkspace) -> f64 {
        let prior = self.model.log_prior(theta);
        if prior == f64::NEG_INFINITY {
            return prior;
        }
        prior + self.log_lik(theta, ws)
    }

    /// `grad = ∇log π_w(θ) = ∇log π₀(θ) + Σₘ wₘ·∇ℓ_{cₘ}(θ)`.
    pub fn grad_log_density(&self, theta: &[f64], grad: &mut [f64], ws: &mut PosteriorWorkspace) {
        let d = self.dim();
        grad.fill(0.0);
        self.model.add_grad_log_prior(theta, grad);
        let m = self.points.len();
        if ws.values.len() < m * d {
            ws.values.resize(m * d, 0.0);
        }
        let rows = &mut ws.values[..m * d];
        self.model
            .grad_log_lik_each(theta, self.points, rows, &mut ws.scratch);
        for (row, &w) in rows.chunks_exact(d).zip(self.weights) {
            for (g, r) in grad.iter_mut().zip(row) {
                *g += w * r;
            }
        }
    }
}

/// Σₘ wₘ·ℓ_{cₘ}(θ) for any weights (the hot-start trace uses the initial weights w₀).
pub fn weighted_log_lik(
    model: &dyn Model,
    points: &[DataIndex],
    weights: &[f64],
    theta: &[f64],
    ws: &mut PosteriorWorkspace,
) -> f64 {
    let m = points.len();
    if ws.values.len() < m {
        ws.values.resize(m, 0.0);
    }
    let values = &mut ws.values[..m];
    model.log_lik_each(theta, points, values, &mut ws.scratch);
    values.iter().zip(weights).map(|(l, w)| w * l).sum()
}
