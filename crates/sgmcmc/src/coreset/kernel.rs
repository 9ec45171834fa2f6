//! Markov kernels κ_w that leave the coreset posterior π_w invariant (reference §7.7): one
//! object per chain, holding the chain's state, stepped with the current weights.
//!
//! - [`ExactGaussianKernel`]: the exact AR(1) kernel of the Gaussian location model (§7.7b);
//! - [`SliceKernel`]: hit-and-run slice sampling with doubling (§7.7a), any model;
//! - [`SamplerKernel`]: any of the crate's [`Sampler`]s driven by full coreset gradients.
//!
//! - [`SparseGibbsKernel`]: the sparse-regression Gibbs sampler of `gibbs.rs` (§7.7c), γ kept
//!   as the chain's auxiliary state.

use super::gibbs::{SparseGibbs, initial_state};
use super::posterior::{CoresetPosterior, PosteriorWorkspace};
use super::slice::{SliceSampler, SliceSettings};
use crate::checkpoint::{StateError, StateReader, StateWriter};
use crate::estimator::{BatchTerms, GradientEstimator};
use crate::model::SparseRegression;
use crate::model::TermMoments;
use crate::rng::{ChainRng, fill_standard_normal};
use crate::sampler::Sampler;
use std::sync::Arc;

/// Errors a kernel step reports; the coreset run stops there and keeps what it has.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum KernelError {
    /// The chain left the finite reals.
    #[error("the chain diverged: {0}")]
    Diverged(String),
    /// The kernel could not complete its step (e.g. slice shrinkage exhausted).
    #[error("{0}")]
    Failed(String),
}

/// A π_w-invariant Markov kernel with its chain's state.
pub trait CoresetKernel: Send {
    /// Short name for tables.
    fn name(&self) -> &'static str;

    /// The chain's current θ (the model's parameters).
    fn position(&self) -> &[f64];

    /// Number of state components, auxiliary ones included (the hot-start test starts at
    /// 3× this, reference §7.5). Default: the dimension of θ.
    fn state_dim(&self) -> usize {
        self.position().len()
    }

    /// One step of κ_w from the current state; returns log π_w at the new state.
    fn step(
        &mut self,
        target: &CoresetPosterior<'_>,
        rng: &mut ChainRng,
    ) -> Result<f64, KernelError>;

    /// Appends what carries over from one step to the next (θ, a sampler's momentum, a Gibbs
    /// sweep's order) to a checkpoint ([`crate::checkpoint`]). Default: not supported.
    fn save_state(&self, w: &mut StateWriter) {
        w.unsupported(self.name());
    }

    /// Restores what [`CoresetKernel::save_state`] wrote. Default: not supported.
    fn load_state(&mut self, _r: &mut StateReader<'_>) -> Result<(), StateError> {
        Err(StateError::Unsupported(self.name().into()))
    }
}

fn check_finite(theta: &[f64]) -> Result<(), KernelError> {
    match theta.iter().position(|v| !v.is_finite()) {
        None => Ok(()),
        Some(j) => Err(KernelError::Diverged(format!(
            "θ[{j}] = {} is not finite",
            theta[j]
        ))),
    }
}

/// The exact kernel of the Gaussian location model with Σ = I and prior N(0, τ₀²I) (reference
/// §7.7b): π_w = N(μ_w, s_w²I) with s_w² = 1/(1/τ₀² + W), μ_w = s_w²·Σₘwₘx_{cₘ}, W = Σₘwₘ, and
///
/// ```text
/// θ' = μ_w + √β·(θ − μ_w) + √(1 − β)·s_w·ξ,   ξ ~ N(0, I)
/// ```
///
/// which leaves π_w invariant for every β ∈ [0, 1) (β = 0: independent draws; the reference uses
/// β = 0.8).
#[derive(Debug, Clone)]
pub struct ExactGaussianKernel {
    /// The coreset rows x_{c₁}..x_{c_M}, row-major M × D.
    rows: Vec<f64>,
    prior_precision: f64,
    beta: f64,
    theta: Vec<f64>,
    mean: Vec<f64>,
    noise: Vec<f64>,
}

crate::persist_fields!(ExactGaussianKernel { theta });

impl ExactGaussianKernel {
    /// The reference's autocorrelation β.
    pub const DEFAULT_BETA: f64 = 0.8;

    /// A kernel over the coreset `rows` (M × D, row-major), prior variance τ₀² (∞: flat),
    /// autocorrelation `beta` ∈ [0, 1), starting at `theta0`.
    pub fn new(
        rows: Vec<f64>,
        prior_variance: f64,
        beta: f64,
        theta0: Vec<f64>,
    ) -> Result<Self, KernelError> {
        let d = theta0.len();
        if d == 0 || !rows.len().is_multiple_of(d) {
            return Err(KernelError::Failed(format!(
                "{} coreset values do not form rows of the dimension {d}",
                rows.len()
            )));
        }
        if !(0.0..1.0).contains(&beta) {
            return Err(KernelError::Failed(format!(
                "beta must lie in [0, 1), got {beta}"
            )));
        }
        if prior_variance.is_nan() || prior_variance <= 0.0 {
            return Err(KernelError::Failed(format!(
                "prior variance must be > 0, got {prior_variance}"
            )));
        }
        check_finite(&theta0)?;
        Ok(Self {
            rows,
            prior_precision: 1.0 / prior_variance,
            beta,
            mean: vec![0.0; d],
            noise: vec![0.0; d],
            theta: theta0,
        })
    }

    /// Mean μ_w and variance s_w² of π_w for `weights`.
    pub fn moments(&mut self, weights: &[f64]) -> (&[f64], f64) {
        let d = self.theta.len();
        self.mean.fill(0.0);
        let mut total = 0.0;
        for (row, &w) in self.rows.chunks_exact(d).zip(weights) {
            total += w;
            for (m, x) in self.mean.iter_mut().zip(row) {
                *m += w * x;
            }
        }
        let var = 1.0 / (self.prior_precision + total);
        self.mean.iter_mut().for_each(|m| *m *= var);
        (&self.mean, var)
    }

    /// Move the state to an exact draw from π_w (the reference's chain start, at w = N/M).
    pub fn draw_exact(&mut self, weights: &[f64], rng: &mut ChainRng) -> Result<(), KernelError> {
        let (_, var) = self.moments(weights);
        fill_standard_normal(rng, &mut self.noise);
        let sd = var.sqrt();
        for ((t, &m), &z) in self.theta.iter_mut().zip(&self.mean).zip(&self.noise) {
            *t = m + sd * z;
        }
        check_finite(&self.theta)
    }
}

impl CoresetKernel for ExactGaussianKernel {
    crate::checkpoint::state_through_persist!();

    fn name(&self) -> &'static str {
        "exact_gaussian"
    }

    fn position(&self) -> &[f64] {
        &self.theta
    }

    fn step(
        &mut self,
        target: &CoresetPosterior<'_>,
        rng: &mut ChainRng,
    ) -> Result<f64, KernelError> {
        let (_, var) = self.moments(target.weights);
        fill_standard_normal(rng, &mut self.noise);
        let keep = self.beta.sqrt();
        let sd = ((1.0 - self.beta) * var).sqrt();
        let mut log_density = 0.0;
        for ((t, &m), &z) in self.theta.iter_mut().zip(&self.mean).zip(&self.noise) {
            *t = m + keep * (*t - m) + sd * z;
            log_density -= 0.5 * (*t - m) * (*t - m) / var;
        }
        check_finite(&self.theta)?;
        // log π_w up to the constant that does not depend on θ.
        Ok(log_density)
    }
}

/// Hit-and-run slice sampling with doubling on log π_w (reference §7.7a), `passes` passes per
/// step.
pub struct SliceKernel {
    sampler: SliceSampler,
    theta: Vec<f64>,
    ws: PosteriorWorkspace,
}

crate::persist_fields!(SliceKernel { sampler, theta });

impl SliceKernel {
    /// A kernel with `settings` starting at `theta0`.
    pub fn new(settings: SliceSettings, theta0: Vec<f64>) -> Result<Self, KernelError> {
        check_finite(&theta0)?;
        let sampler =
            SliceSampler::new(settings).map_err(|e| KernelError::Failed(e.to_string()))?;
        Ok(Self {
            sampler,
            theta: theta0,
            ws: PosteriorWorkspace::default(),
        })
    }
}

impl CoresetKernel for SliceKernel {
    crate::checkpoint::state_through_persist!();

    fn name(&self) -> &'static str {
        "slice"
    }

    fn position(&self) -> &[f64] {
        &self.theta
    }

    fn step(
        &mut self,
        target: &CoresetPosterior<'_>,
        rng: &mut ChainRng,
    ) -> Result<f64, KernelError> {
        // The weights changed since the last step: log π_w at the current state is recomputed.
        let f0 = target.log_density(&self.theta, &mut self.ws);
        let ws = &mut self.ws;
        let mut log_density = |theta: &[f64]| target.log_density(theta, ws);
        let f = self
            .sampler
            .step(&mut self.theta, f0, &mut log_density, rng)
            .map_err(|e| KernelError::Failed(e.to_string()))?;
        check_finite(&self.theta)?;
        Ok(f)
    }
}

/// The sparse-regression Gibbs sampler (reference §7.7c) as a kernel: θ = (β, σ²) with the
/// indicators γ as auxiliary state (so the state has 2p + 1 components, the hot-start test's
/// dim). Chains start at the §7.9 start (OLS + N(0, I), |σ² start|) with γ drawn from step 3.
pub struct SparseGibbsKernel {
    model: Arc<SparseRegression>,
    gibbs: SparseGibbs,
    theta: Vec<f64>,
}

crate::persist_fields!(SparseGibbsKernel { gibbs, theta });

impl SparseGibbsKernel {
    /// A chain for `model`, started from `rng`. The model must be the one the coreset run
    /// uses (its rows are read through the coreset's points).
    pub fn new(model: Arc<SparseRegression>, rng: &mut ChainRng) -> Result<Self, KernelError> {
        let failed = |e: super::gibbs::GibbsError| KernelError::Failed(e.to_string());
        let theta = initial_state(&model, rng).map_err(failed)?;
        let mut gibbs = SparseGibbs::new(&model);
        gibbs
            .draw_gamma(&model, &theta[..model.p()], rng)
            .map_err(failed)?;
        Ok(Self {
            model,
            gibbs,
            theta,
        })
    }
}

impl CoresetKernel for SparseGibbsKernel {
    crate::checkpoint::state_through_persist!();

    fn name(&self) -> &'static str {
        "gibbs"
    }

    fn position(&self) -> &[f64] {
        &self.theta
    }

    fn state_dim(&self) -> usize {
        2 * self.model.p() + 1
    }

    fn step(
        &mut self,
        target: &CoresetPosterior<'_>,
        rng: &mut ChainRng,
    ) -> Result<f64, KernelError> {
        let f = self
            .gibbs
            .sweep(
                &self.model,
                target.points,
                target.weights,
                &mut self.theta,
                rng,
            )
            .map_err(|e| KernelError::Failed(e.to_string()))?;
        check_finite(&self.theta)?;
        Ok(f)
    }
}

/// Full coreset gradients ∇log π_w as a [`GradientEstimator`] (exact: no minibatch noise).
struct CoresetGradient<'a, 'b> {
    target: &'a CoresetPosterior<'b>,
    ws: &'a mut PosteriorWorkspace,
}

impl GradientEstimator for CoresetGradient<'_, '_> {
    fn estimate(&mut self, theta: &[f64], out: &mut [f64], _rng: &mut ChainRng) {
        self.target.grad_log_density(theta, out, self.ws);
    }

    fn cost_per_estimate(&self) -> usize {
        self.target.points.len()
    }

    fn estimate_with_terms(
        &mut self,
        theta: &[f64],
        out: &mut [f64],
        _moments: &mut TermMoments,
        _rng: &mut ChainRng,
    ) -> BatchTerms {
        self.target.grad_log_density(theta, out, self.ws);
        BatchTerms::EXACT
    }
}

/// Any [`Sampler`] of the crate, driven by the full coreset gradient ∇log π_w (M per-datum
/// gradients per estimate). The score a sampler caches at its position was computed with the
/// weights of the previous step; with weights that move slowly this lag is one optimiser step.
pub struct SamplerKernel {
    sampler: Box<dyn Sampler>,
    theta0: Vec<f64>,
    started: bool,
    ws: PosteriorWorkspace,
}

impl SamplerKernel {
    /// Wrap `sampler`, starting at `theta0` at the first step.
    pub fn new(sampler: Box<dyn Sampler>, theta0: Vec<f64>) -> Result<Self, KernelError> {
        check_finite(&theta0)?;
        Ok(Self {
            sampler,
            theta0,
            started: false,
            ws: PosteriorWorkspace::default(),
        })
    }
}

impl CoresetKernel for SamplerKernel {
    fn name(&self) -> &'static str {
        self.sampler.name()
    }

    fn position(&self) -> &[f64] {
        if self.started {
            self.sampler.position()
        } else {
            &self.theta0
        }
    }

    fn step(
        &mut self,
        target: &CoresetPosterior<'_>,
        rng: &mut ChainRng,
    ) -> Result<f64, KernelError> {
        let mut estimator = CoresetGradient {
            target,
            ws: &mut self.ws,
        };
        if !self.started {
            self.sampler.start(&self.theta0, &mut estimator, rng);
            self.started = true;
        }
        self.sampler.step(&mut estimator, rng);
        let theta = self.sampler.position();
        check_finite(theta)?;
        Ok(target.log_density(theta, &mut self.ws))
    }

    fn save_state(&self, w: &mut StateWriter) {
        w.nested(2);
        w.field("started", &self.started);
        w.field_with("sampler", |w| self.sampler.save_state(w));
    }

    fn load_state(&mut self, r: &mut StateReader<'_>) -> Result<(), StateError> {
        r.nested(2)?;
        r.field("started", &mut self.started)?;
        r.field_with("sampler", |r| self.sampler.load_state(r))
    }
}
