//! A two-component normal mixture of scalar data with ordered means (posteriordb's
//! `low_dim_gauss_mix`):
//!
//! ```text
//! yᵢ ~ w·N(μ₁, σ₁²) + (1 − w)·N(μ₂, σ₂²),   μ₁ < μ₂,   σₖ > 0,   0 < w < 1,
//! ```
//!
//! with a prior on each μₖ, each σₖ and w ([`NormalMixturePriors`]). The samplers move the
//! unconstrained θ = (μ₁, log(μ₂ − μ₁), log σ₁, log σ₂, logit w) and the log-Jacobians of those
//! maps are in the prior (`model::constraint`); draws are reported as (μ₁, μ₂, σ₁, σ₂, w).
//!
//! Per datum, with a = log w + log N(y; μ₁, σ₁²), b = log(1 − w) + log N(y; μ₂, σ₂²) and the
//! responsibility r = eᵃ/(eᵃ + eᵇ) = σ(a − b) of the first component,
//!
//! ```text
//! log p(y | θ) = logsumexp(a, b),
//! ∂/∂μ₁ = r(y − μ₁)/σ₁²,   ∂/∂μ₂ = (1 − r)(y − μ₂)/σ₂²,
//! ∂/∂log σ₁ = r((y − μ₁)²/σ₁² − 1),   ∂/∂log σ₂ = (1 − r)((y − μ₂)²/σ₂² − 1),
//! ∂/∂logit w = r − w,
//! ```
//!
//! and the ordered map gives ∂/∂θ₁ = ∂/∂μ₁ + ∂/∂μ₂, ∂/∂θ₂ = (μ₂ − μ₁)·∂/∂μ₂.

use super::constraint::{
    Constraint, ordered_add_grad, ordered_log_jacobian, ordered_to_constrained,
    ordered_to_unconstrained,
};
use super::logistic::{sigmoid, softplus};
use super::mixture::one_column_values;
use super::prior::{ParameterPrior, Support};
use super::{DataIndex, Model, ModelError, Scratch, debug_check_dim};
use crate::data::{Features, Matrix};
use crate::rng::ChainRng;

const HALF_LN_2PI: f64 = 0.918_938_533_204_672_8;

/// The priors of [`NormalMixture`]: one on each mean (the same for both), one on each sd, one
/// on the weight w of the first component.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct NormalMixturePriors {
    /// Prior of μ₁ and μ₂ (on the real line).
    pub mu: ParameterPrior,
    /// Prior of σ₁ and σ₂ (on σ > 0).
    pub sigma: ParameterPrior,
    /// Prior of w (on 0 < w < 1).
    pub weight: ParameterPrior,
}

impl Default for NormalMixturePriors {
    /// posteriordb's `low_dim_gauss_mix`: μ ~ N(0, 2²), σ ~ half-normal(2), w ~ Beta(5, 5).
    fn default() -> Self {
        Self {
            mu: ParameterPrior::Normal {
                location: 0.0,
                scale: 2.0,
            },
            sigma: ParameterPrior::HalfNormal { scale: 2.0 },
            weight: ParameterPrior::Beta {
                alpha: 5.0,
                beta: 5.0,
            },
        }
    }
}

impl NormalMixturePriors {
    /// Each prior valid and on its parameter's support; the message names the bad one.
    pub fn validate(&self) -> Result<(), ModelError> {
        for (name, prior, support) in [
            ("mu", &self.mu, Support::Real),
            ("sigma", &self.sigma, Support::Positive),
            ("weight", &self.weight, Support::UnitInterval),
        ] {
            prior.validate()?;
            if prior.support() != support {
                return Err(ModelError::Setting(format!(
                    "the prior of the mixture's {name} cannot be `{}`: it must be on {}",
                    prior.name(),
                    match support {
                        Support::Real => "the real line",
                        Support::Positive => "x > 0",
                        Support::UnitInterval => "0 < x < 1",
                    }
                )));
            }
        }
        Ok(())
    }
}

/// Scalar observations from two normals with ordered means (see the module docs).
#[derive(Debug, Clone)]
pub struct NormalMixture {
    y: Vec<f64>,
    priors: NormalMixturePriors,
}

/// The constrained values (μ₁, μ₂, σ₁, σ₂, w) at θ and what every datum's terms share: 1/σₖ
/// and the constant part of each component's log density, log wₖ − ½ log 2π − log σₖ (log σₖ
/// is θ₃, θ₄ itself), so a datum costs no `ln`.
struct Point {
    mu: [f64; 2],
    sigma: [f64; 2],
    weight: f64,
    inv_sigma: [f64; 2],
    offset: [f64; 2],
}

impl Point {
    fn at(theta: &[f64]) -> Self {
        let mut mu = [0.0; 2];
        ordered_to_constrained(&theta[..2], &mut mu);
        let sigma = [theta[2].exp(), theta[3].exp()];
        let log_weight = [-softplus(-theta[4]), -softplus(theta[4])];
        Self {
            mu,
            sigma,
            weight: sigmoid(theta[4]),
            inv_sigma: sigma.map(|s| 1.0 / s),
            offset: [0, 1].map(|k| log_weight[k] - HALF_LN_2PI - theta[2 + k]),
        }
    }

    /// The standardised residuals zₖ = (y − μₖ)/σₖ and the components' log terms a, b.
    #[inline]
    fn terms(&self, y: f64) -> ([f64; 2], [f64; 2]) {
        let z = [0, 1].map(|k| (y - self.mu[k]) * self.inv_sigma[k]);
        (z, [0, 1].map(|k| self.offset[k] - 0.5 * z[k] * z[k]))
    }

    /// log p(y | θ) = logsumexp(a, b).
    #[inline]
    fn log_lik(&self, y: f64) -> f64 {
        let (_, [a, b]) = self.terms(y);
        a.max(b) + (-(a - b).abs()).exp().ln_1p()
    }

    /// `grad += weight · ∇_θ log p(y | θ)`, with r = σ(a − b).
    #[inline]
    fn add_grad(&self, y: f64, weight: f64, grad: &mut [f64]) {
        let (z, [a, b]) = self.terms(y);
        let r = sigmoid(a - b);
        let resp = [r, 1.0 - r];
        let mut d_mu = [0.0; 2];
        for k in 0..2 {
            d_mu[k] = resp[k] * z[k] * self.inv_sigma[k];
            grad[2 + k] += weight * resp[k] * (z[k] * z[k] - 1.0);
        }
        grad[0] += weight * (d_mu[0] + d_mu[1]);
        grad[1] += weight * (self.mu[1] - self.mu[0]) * d_mu[1];
        grad[4] += weight * (r - self.weight);
    }
}

impl NormalMixture {
    /// Parameter names on the constrained scale (posteriordb's).
    pub const NAMES: [&'static str; 5] = ["mu[1]", "mu[2]", "sigma[1]", "sigma[2]", "theta"];

    /// The model of the observations `y` (finite, at least one) under `priors`.
    pub fn new(y: Vec<f64>, priors: NormalMixturePriors) -> Result<Self, ModelError> {
        let n = y.len();
        Self::from_features(&Features::F64(Matrix::from_vec(y, n, 1)?), priors)
    }

    /// The model of an N × 1 data set (finite, at least one row) under `priors`.
    pub fn from_features(data: &Features, priors: NormalMixturePriors) -> Result<Self, ModelError> {
        priors.validate()?;
        let y = one_column_values(data, "the normal mixture")?;
        Ok(Self { y, priors })
    }

    /// The priors.
    pub fn priors(&self) -> &NormalMixturePriors {
        &self.priors
    }
}

impl Model for NormalMixture {
    fn name(&self) -> &'static str {
        "normal_mixture"
    }

    fn dim(&self) -> usize {
        5
    }

    fn num_data(&self) -> usize {
        self.y.len()
    }

    fn parameter_names(&self) -> Vec<String> {
        Self::NAMES.iter().map(|s| s.to_string()).collect()
    }

    fn is_constrained(&self) -> bool {
        true
    }

    fn constrain(&self, theta: &[f64], out: &mut [f64]) {
        let p = Point::at(theta);
        out[..2].copy_from_slice(&p.mu);
        out[2..4].copy_from_slice(&p.sigma);
        out[4] = p.weight;
    }

    fn unconstrain(&self, x: &[f64], out: &mut [f64]) -> Result<(), ModelError> {
        ordered_to_unconstrained(&x[..2], &mut out[..2])?;
        for k in 2..4 {
            out[k] = Constraint::Positive.to_unconstrained(x[k])?;
        }
        out[4] = Constraint::UnitInterval.to_unconstrained(x[4])?;
        Ok(())
    }

    fn log_prior(&self, theta: &[f64]) -> f64 {
        debug_check_dim(self, theta);
        let p = Point::at(theta);
        let priors = &self.priors;
        priors.mu.log_density(p.mu[0])
            + priors.mu.log_density(p.mu[1])
            + ordered_log_jacobian(&theta[..2])
            + Constraint::Positive.log_density(&priors.sigma, theta[2]).0
            + Constraint::Positive.log_density(&priors.sigma, theta[3]).0
            + Constraint::UnitInterval
                .log_density(&priors.weight, theta[4])
                .0
    }

    fn add_grad_log_prior(&self, theta: &[f64], grad: &mut [f64]) {
        let p = Point::at(theta);
        let priors = &self.priors;
        let grad_mu = p.mu.map(|m| priors.mu.grad_log_density(m));
        ordered_add_grad(&theta[..2], &grad_mu, &mut grad[..2]);
        for k in 2..4 {
            grad[k] += Constraint::Positive.log_density(&priors.sigma, theta[k]).1;
        }
        grad[4] += Constraint::UnitInterval
            .log_density(&priors.weight, theta[4])
            .1;
    }

    fn log_lik_each(&self, theta: &[f64], batch: &[DataIndex], out: &mut [f64], _: &mut Scratch) {
        debug_check_dim(self, theta);
        let p = Point::at(theta);
        for (o, &i) in out.iter_mut().zip(batch) {
            *o = p.log_lik(self.y[i as usize]);
        }
    }

    fn grad_log_lik_each(
        &self,
        theta: &[f64],
        batch: &[DataIndex],
        out: &mut [f64],
        _: &mut Scratch,
    ) {
        debug_check_dim(self, theta);
        let p = Point::at(theta);
        for (row, &i) in out.chunks_exact_mut(5).zip(batch) {
            row.fill(0.0);
            p.add_grad(self.y[i as usize], 1.0, row);
        }
    }

    fn add_grad_log_lik(
        &self,
        theta: &[f64],
        batch: &[DataIndex],
        weight: f64,
        grad: &mut [f64],
        _: &mut Scratch,
    ) {
        debug_check_dim(self, theta);
        let p = Point::at(theta);
        for &i in batch {
            p.add_grad(self.y[i as usize], weight, grad);
        }
    }

    /// μ = (−1, 1), σ = (1, 1), w = ½: a start from which L-BFGS separates the components (at
    /// θ = 0 they would start one unit apart, the same).
    fn map_start(&self) -> Vec<f64> {
        vec![-1.0, 2f64.ln(), 0.0, 0.0, 0.0]
    }

    fn sample_prior(&self, rng: &mut ChainRng, out: &mut [f64]) -> Result<(), ModelError> {
        let priors = &self.priors;
        let (a, b) = (priors.mu.sample(rng)?, priors.mu.sample(rng)?);
        out[0] = a.min(b);
        out[1] = (a - b).abs().max(f64::MIN_POSITIVE).ln();
        out[2] = priors.sigma.sample(rng)?.ln();
        out[3] = priors.sigma.sample(rng)?.ln();
        out[4] = Constraint::UnitInterval.to_unconstrained(priors.weight.sample(rng)?)?;
        Ok(())
    }
}
