//! Bayesian linear regression: yᵢ ~ N(xᵢᵀw + b, σ²), prior w ~ N(0, τ²I).
//!
//! The noise variance σ² is known ([`NoiseModel::Fixed`]) or a parameter: either
//! [`NoiseModel::Learned`], θ ends with s = log σ² with prior s ~ N(0, v), and
//! log p(y | z, s) = −½ log 2π − s/2 − (y − z)²e⁻ˢ/2; or [`NoiseModel::Sigma`], the noise sd σ
//! with a prior on σ > 0 (half-normal, half-Cauchy, exponential, flat, ...), sampled as
//! u = log σ with the log-Jacobian u (`model::constraint`) and reported as σ:
//! log p(y | z, u) = −½ log 2π − u − (y − z)²e⁻²ᵘ/2.

use super::ModelError;
use super::constraint::Constraint;
use super::glm::{Family, Glm};
use super::prior::{ParameterPrior, Support};
use crate::data::DataError;
use crate::rng::{ChainRng, fill_standard_normal};

/// Linear regression as a [`Glm`] with the [`Normal`] family.
pub type LinearRegression = Glm<Normal>;

const HALF_LN_2PI: f64 = 0.918_938_533_204_672_8;

/// How the noise variance σ² is treated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NoiseModel {
    /// σ² known.
    Fixed {
        /// σ² > 0.
        variance: f64,
    },
    /// s = log σ² is the last parameter, with prior N(0, `prior_variance`).
    Learned {
        /// Prior variance of log σ².
        prior_variance: f64,
    },
    /// σ, the noise sd, is the last parameter (named `sigma`) with this prior on σ > 0;
    /// sampled as log σ.
    Sigma {
        /// The prior of σ (its support must be σ > 0).
        prior: ParameterPrior,
    },
}

/// Gaussian response with the identity link.
#[derive(Debug, Clone, Copy)]
pub struct Normal {
    noise: NoiseModel,
}

impl Normal {
    /// A Gaussian family; variances must be positive.
    pub fn new(noise: NoiseModel) -> Result<Self, ModelError> {
        let v = match noise {
            NoiseModel::Fixed { variance } => variance,
            NoiseModel::Learned { prior_variance } => prior_variance,
            NoiseModel::Sigma { prior } => {
                prior.validate()?;
                if prior.support() != Support::Positive {
                    return Err(ModelError::Setting(format!(
                        "the prior of sigma must be on sigma > 0 (half_normal, half_cauchy, \
                         exponential, flat_positive), got `{}`",
                        prior.name()
                    )));
                }
                return Ok(Self { noise });
            }
        };
        if v.is_nan() || v <= 0.0 || v.is_infinite() {
            return Err(ModelError::Setting(format!(
                "noise variance must be finite and > 0, got {v}"
            )));
        }
        Ok(Self { noise })
    }

    #[inline(always)]
    fn log_variance(&self, extra: &[f64]) -> f64 {
        match self.noise {
            NoiseModel::Fixed { variance } => variance.ln(),
            NoiseModel::Learned { .. } => extra[0],
            NoiseModel::Sigma { .. } => 2.0 * extra[0],
        }
    }
}

impl Family for Normal {
    type Target = f64;

    fn name(&self) -> &'static str {
        "linear"
    }

    fn prepare_targets(&self, ys: &[f64], _source: &str) -> Result<Vec<f64>, DataError> {
        Ok(ys.to_vec())
    }

    fn extra_names(&self) -> &'static [&'static str] {
        match self.noise {
            NoiseModel::Fixed { .. } => &[],
            NoiseModel::Learned { .. } => &["log_noise_variance"],
            NoiseModel::Sigma { .. } => &["sigma"],
        }
    }

    fn extras_constrained(&self) -> bool {
        matches!(self.noise, NoiseModel::Sigma { .. })
    }

    fn constrain_extra(&self, extra: &[f64], out: &mut [f64]) {
        out.copy_from_slice(extra);
        if let NoiseModel::Sigma { .. } = self.noise {
            out[0] = Constraint::Positive.to_constrained(extra[0]);
        }
    }

    fn unconstrain_extra(&self, extra: &[f64], out: &mut [f64]) -> Result<(), ModelError> {
        out.copy_from_slice(extra);
        if let NoiseModel::Sigma { .. } = self.noise {
            out[0] = Constraint::Positive
                .to_unconstrained(extra[0])
                .map_err(|e| ModelError::Setting(format!("sigma: {e}")))?;
        }
        Ok(())
    }

    #[inline(always)]
    fn log_lik(&self, y: f64, z: f64, extra: &[f64]) -> f64 {
        let s = self.log_variance(extra);
        let r = y - z;
        -HALF_LN_2PI - 0.5 * s - 0.5 * r * r * (-s).exp()
    }

    #[inline(always)]
    fn dlog_lik_dz(&self, y: f64, z: f64, extra: &[f64]) -> f64 {
        (y - z) * (-self.log_variance(extra)).exp()
    }

    #[inline(always)]
    fn add_dlog_lik_dextra(&self, y: f64, z: f64, extra: &[f64], weight: f64, out: &mut [f64]) {
        let r = y - z;
        match self.noise {
            NoiseModel::Fixed { .. } => {}
            NoiseModel::Learned { .. } => {
                out[0] += weight * (-0.5 + 0.5 * r * r * (-extra[0]).exp());
            }
            NoiseModel::Sigma { .. } => {
                out[0] += weight * (-1.0 + r * r * (-2.0 * extra[0]).exp());
            }
        }
    }

    fn log_prior_extra(&self, extra: &[f64]) -> f64 {
        match self.noise {
            NoiseModel::Fixed { .. } => 0.0,
            NoiseModel::Learned { prior_variance } => -0.5 * extra[0] * extra[0] / prior_variance,
            NoiseModel::Sigma { prior } => Constraint::Positive.log_density(&prior, extra[0]).0,
        }
    }

    fn add_grad_log_prior_extra(&self, extra: &[f64], grad: &mut [f64]) {
        match self.noise {
            NoiseModel::Fixed { .. } => {}
            NoiseModel::Learned { prior_variance } => grad[0] -= extra[0] / prior_variance,
            NoiseModel::Sigma { prior } => {
                grad[0] += Constraint::Positive.log_density(&prior, extra[0]).1;
            }
        }
    }

    fn sample_prior_extra(&self, rng: &mut ChainRng, out: &mut [f64]) -> Result<(), ModelError> {
        match self.noise {
            NoiseModel::Fixed { .. } => {}
            NoiseModel::Learned { prior_variance } => {
                fill_standard_normal(rng, out);
                out[0] *= prior_variance.sqrt();
            }
            NoiseModel::Sigma { prior } => out[0] = prior.sample(rng)?.ln(),
        }
        Ok(())
    }
}
