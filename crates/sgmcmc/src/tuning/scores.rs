//! Scores at an arm's kept draws, for the tuning metric (reference §5.1 uses the full-batch
//! score ∇log π; §3.3 of the MAMBA paper).
//!
//! The full-batch score costs N per-datum gradients per draw, which for N = 800,000 and a fast
//! arm is many times the sampling itself (the paper's code spends most of its time there). The
//! default here is a **control-variate surrogate** with one fixed random subsample S of m points
//! about the MAP θ̂:
//!
//!   s̃(θ) = ∇log p(θ) + L(θ̂) + (N/m)·Σ_{i∈S} [∇log p(xᵢ | θ) − ∇log p(xᵢ | θ̂)],
//!
//! with L(θ̂) the full-data likelihood score at θ̂ (computed once). s̃ is a deterministic function
//! of θ, the exact score of the surrogate posterior
//! π̃ ∝ p(θ)·exp(⟨L(θ̂) − (N/m)Σ_S∇ℓᵢ(θ̂), θ⟩ + (N/m)Σ_S ℓᵢ(θ)), which agrees with π in its score at θ̂ and whose curvature differs from
//! π's by a relative O(1/√m). Every arm is scored against the same π̃, so the ranking the
//! bandit needs is preserved (the experiment measures the rank correlation with the full-batch
//! KSD). Cost: m per-datum gradients per draw.

use crate::estimator::FullDataEvaluator;
use crate::model::{DataIndex, Model, Scratch};
use crate::rng::ChainRng;
use rand::seq::index;

/// Where the scores at the kept draws come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum TuneScores {
    /// ∇log p(θ) + Ĝ + (N/m)·Σ_{i∈S} [∇log p(xᵢ | θ) − ∇log p(xᵢ | θ̂)] with one fixed subsample
    /// S of m points and θ̂ the MAP: the exact score of a surrogate posterior that agrees with π
    /// at θ̂, at m/N of the cost.
    #[default]
    ControlVariates,
    /// The exact full-data score (N per-datum gradients per draw).
    Full,
}

/// A score function θ ↦ s(θ) for the tuning metric.
pub struct ScoreFunction<'m> {
    model: &'m dyn Model,
    kind: Kind,
}

enum Kind {
    Exact,
    Surrogate {
        subset: Vec<DataIndex>,
        weight: f64,
        /// L(θ̂) − (N/m)·Σ_S ∇log p(xᵢ | θ̂).
        offset: Vec<f64>,
    },
}

impl<'m> ScoreFunction<'m> {
    /// The exact full-data score.
    pub fn exact(model: &'m dyn Model) -> Self {
        Self {
            model,
            kind: Kind::Exact,
        }
    }

    /// The control-variate surrogate about `centre` (with its full-data score `centre_score`)
    /// on `subsample` points drawn uniformly without replacement by `rng`; the exact score when
    /// `subsample` ≥ N.
    pub fn control_variates(
        model: &'m dyn Model,
        centre: &[f64],
        centre_score: &[f64],
        subsample: usize,
        rng: &mut ChainRng,
    ) -> Self {
        let n = model.num_data();
        if subsample >= n {
            return Self::exact(model);
        }
        let m = subsample.max(1);
        let mut subset: Vec<DataIndex> = index::sample(rng, n, m)
            .into_iter()
            .map(|i| i as DataIndex)
            .collect();
        // Ascending order: the rows are read in memory order.
        subset.sort_unstable();
        let weight = n as f64 / m as f64;
        // offset = (score − ∇log p(θ̂)) − w·Σ_S ∇ℓᵢ(θ̂).
        let mut offset = vec![0.0; model.dim()];
        model.add_grad_log_prior(centre, &mut offset);
        offset
            .iter_mut()
            .zip(centre_score)
            .for_each(|(o, s)| *o = s - *o);
        model.add_grad_log_lik(centre, &subset, -weight, &mut offset, &mut Scratch::new());
        Self {
            model,
            kind: Kind::Surrogate {
                subset,
                weight,
                offset,
            },
        }
    }

    /// As `[tune] scores` asks.
    pub fn from_config(
        kind: TuneScores,
        model: &'m dyn Model,
        centre: &[f64],
        centre_score: &[f64],
        subsample: usize,
        rng: &mut ChainRng,
    ) -> Self {
        match kind {
            TuneScores::Full => Self::exact(model),
            TuneScores::ControlVariates => {
                Self::control_variates(model, centre, centre_score, subsample, rng)
            }
        }
    }

    /// Per-datum gradient evaluations per scored draw (N, or m for the surrogate).
    pub fn cost_per_draw(&self) -> usize {
        match &self.kind {
            Kind::Exact => self.model.num_data(),
            Kind::Surrogate { subset, .. } => subset.len(),
        }
    }

    /// Whether this is the exact full-data score.
    pub fn is_exact(&self) -> bool {
        matches!(self.kind, Kind::Exact)
    }

    /// The scores at `draws` (P × D row-major), P × D row-major.
    pub fn scores(&self, draws: &[f64]) -> Vec<f64> {
        let d = self.model.dim();
        let mut out = vec![0.0; draws.len()];
        match &self.kind {
            Kind::Exact => {
                FullDataEvaluator::new(self.model).grad_log_posterior_draws(draws, &mut out);
            }
            Kind::Surrogate {
                subset,
                weight,
                offset,
            } => {
                let mut scratch = Scratch::new();
                for (theta, s) in draws.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
                    s.copy_from_slice(offset);
                    self.model.add_grad_log_prior(theta, s);
                    self.model
                        .add_grad_log_lik(theta, subset, *weight, s, &mut scratch);
                }
            }
        }
        out
    }
}
