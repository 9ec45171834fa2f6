//! Bayesian logistic regression: p(yᵢ = 1 | xᵢ, θ) = σ(xᵢᵀw + b), prior θ ~ N(0, σ²I).
//!
//! log p(y | z) = y·z − softplus(z) and ∂/∂z = y − σ(z), with y ∈ {0, 1}. Labels coded
//! {−1, +1} (LIBSVM) are accepted and mapped −1 → 0.

use super::glm::{Family, Glm};
use super::vector_math;
use crate::data::DataError;

/// Logistic regression as a [`Glm`] with the [`Bernoulli`] family.
pub type LogisticRegression = Glm<Bernoulli>;

/// Bernoulli response with the logit link.
#[derive(Debug, Clone, Copy, Default)]
pub struct Bernoulli;

/// Numerically stable softplus log(1 + eᶻ).
#[inline(always)]
pub(crate) fn softplus(z: f64) -> f64 {
    z.max(0.0) + (-z.abs()).exp().ln_1p()
}

/// Logistic function σ(z) = 1/(1 + e⁻ᶻ); exact limits 0 and 1 at ∓∞, no branch.
#[inline(always)]
pub(crate) fn sigmoid(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

impl Family for Bernoulli {
    type Target = u8;

    fn name(&self) -> &'static str {
        "logistic"
    }

    fn prepare_targets(&self, ys: &[f64], source: &str) -> Result<Vec<u8>, DataError> {
        // The coding is fixed by the first label that is not 1: 0 means {0, 1}, −1 means {−1, +1}.
        let minus_one_coding = ys.iter().find(|&&y| y != 1.0).is_some_and(|&y| y == -1.0);
        let (zero, expected) = if minus_one_coding {
            (-1.0, "labels coded -1/+1")
        } else {
            (0.0, "0 or 1")
        };
        ys.iter()
            .enumerate()
            .map(|(row, &y)| {
                if y == 1.0 {
                    Ok(1)
                } else if y == zero {
                    Ok(0)
                } else {
                    Err(DataError::LabelOutOfSupport {
                        source_name: source.to_string(),
                        row: row + 1,
                        value: y,
                        expected: expected.to_string(),
                    })
                }
            })
            .collect()
    }

    #[inline(always)]
    fn log_lik(&self, y: u8, z: f64, _extra: &[f64]) -> f64 {
        f64::from(y) * z - softplus(z)
    }

    #[inline(always)]
    fn dlog_lik_dz(&self, y: u8, z: f64, _extra: &[f64]) -> f64 {
        f64::from(y) - sigmoid(z)
    }

    /// y − σ(z) over the tile with the branch-free, vectorised σ built on fused multiply-adds
    /// ([`vector_math::sigmoid`]: within 4 ulp of libm's σ, which [`Self::dlog_lik_dz`] uses, but
    /// not the same bits).
    fn dlog_lik_dz_tile(&self, ys: &[u8], q: usize, z: &mut [f64], _extras: &[f64], _s: usize) {
        vector_math::map_tile(ys, q, z, |y, z| f64::from(y) - vector_math::sigmoid(z));
    }
}
