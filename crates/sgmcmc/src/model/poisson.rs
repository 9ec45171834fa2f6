//! Bayesian Poisson regression: yᵢ ~ Poisson(λ(zᵢ)), zᵢ = xᵢᵀw + b, as a [`Glm`] family.
//!
//! Two links:
//! - [`PoissonLink::Log`]: λ = eᶻ, log p(y | z) = y·z − eᶻ (the usual GLM; overflows to −∞
//!   for z ≳ 709, where λ itself is not representable);
//! - [`PoissonLink::Softplus`]: λ = softplus(z) = log1p(eᶻ) (the coreset MCMC paper's, reference
//!   §7.9), log p(y | z) = y·log softplus(z) − softplus(z), with z in place of log softplus(z)
//!   when z < −700 (there softplus(z) = eᶻ to double precision, and eᶻ underflows below −745),
//!   so it is finite for every finite z.
//!
//! The constant −log y! is dropped from [`Family::log_lik`] (samplers and coreset weights do
//! not see it); the predictive log-probability of held-out rows ([`PredictiveFamily`]) keeps
//! it, so test log-losses are those of the normalised distribution.

use super::glm::{self, Family, Glm};
use super::logistic::{sigmoid, softplus};
use super::predictive::{PredictiveFamily, PredictiveTask};
use super::vector_math;
use crate::data::DataError;

/// Poisson regression as a [`Glm`] with the [`Poisson`] family.
pub type PoissonRegression = Glm<Poisson>;

/// Below this linear predictor, log softplus(z) is replaced by z (reference §7.9).
const SOFTPLUS_LOG_CUTOFF: f64 = -700.0;

/// The link between the linear predictor z and the rate λ.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum PoissonLink {
    /// λ = eᶻ (canonical link).
    #[default]
    Log,
    /// λ = log(1 + eᶻ) (coreset MCMC paper).
    Softplus,
}

/// Poisson response with a [`PoissonLink`]; targets are non-negative integer counts.
#[derive(Debug, Clone, Copy, Default)]
pub struct Poisson {
    link: PoissonLink,
}

impl Poisson {
    /// The Poisson family with the given link.
    pub fn new(link: PoissonLink) -> Self {
        Self { link }
    }

    /// The link.
    pub fn link(&self) -> PoissonLink {
        self.link
    }

    /// (λ, log λ) at the linear predictor z.
    #[inline(always)]
    fn rate(&self, z: f64) -> (f64, f64) {
        match self.link {
            PoissonLink::Log => (z.exp(), z),
            PoissonLink::Softplus => softplus_rate(z),
        }
    }
}

/// y·log λ − λ of the softplus link, as an [`vector_math::ElementMap`] (inlined into the vector
/// loop; a closure this large would not be).
#[derive(Clone, Copy)]
struct SoftplusLogLik;

impl vector_math::ElementMap<f64> for SoftplusLogLik {
    #[inline(always)]
    fn apply(&self, y: f64, z: f64) -> f64 {
        let (lambda, log_lambda) = softplus_rate(z);
        y * log_lambda - lambda
    }
}

/// (λ, log λ) of the softplus link, branch-free ([`vector_math::softplus`] and
/// [`vector_math::ln`]), so that a loop of them vectorises.
#[inline(always)]
fn softplus_rate(z: f64) -> (f64, f64) {
    let lambda = vector_math::softplus(z);
    let log_lambda = vector_math::ln(lambda);
    (
        lambda,
        if z < SOFTPLUS_LOG_CUTOFF {
            z
        } else {
            log_lambda
        },
    )
}

impl Family for Poisson {
    type Target = f64;

    fn name(&self) -> &'static str {
        "poisson"
    }

    fn prepare_targets(&self, ys: &[f64], source: &str) -> Result<Vec<f64>, DataError> {
        ys.iter()
            .enumerate()
            .map(|(row, &y)| {
                if y >= 0.0 && y.is_finite() && y.fract() == 0.0 {
                    Ok(y)
                } else {
                    Err(DataError::LabelOutOfSupport {
                        source_name: source.to_string(),
                        row: row + 1,
                        value: y,
                        expected: "a non-negative integer count".to_string(),
                    })
                }
            })
            .collect()
    }

    /// y·log λ(z) − λ(z) (without −log y!).
    #[inline(always)]
    fn log_lik(&self, y: f64, z: f64, _extra: &[f64]) -> f64 {
        let (lambda, log_lambda) = self.rate(z);
        y * log_lambda - lambda
    }

    /// The softplus link over all values at once in vector registers; the log link element by
    /// element.
    fn log_lik_tile(&self, ys: &[f64], z: &mut [f64], extra: &[f64]) {
        match self.link {
            PoissonLink::Log => glm::log_lik_elementwise(self, ys, z, extra),
            PoissonLink::Softplus => vector_math::map_tile(ys, 1, z, SoftplusLogLik),
        }
    }

    /// Log link: y − eᶻ. Softplus link: σ(z)·(y/softplus(z) − 1), with σ(z)/softplus(z) = 1
    /// below the cutoff (both equal eᶻ to double precision there), so y − σ(z).
    #[inline(always)]
    fn dlog_lik_dz(&self, y: f64, z: f64, _extra: &[f64]) -> f64 {
        match self.link {
            PoissonLink::Log => y - z.exp(),
            PoissonLink::Softplus => {
                let s = sigmoid(z);
                if z < SOFTPLUS_LOG_CUTOFF {
                    y - s
                } else {
                    s * (y / softplus(z) - 1.0)
                }
            }
        }
    }

    /// The log link's y − eᶻ with the vectorised exp; the softplus link element by element.
    fn dlog_lik_dz_tile(&self, ys: &[f64], q: usize, z: &mut [f64], _extras: &[f64], _s: usize) {
        match self.link {
            PoissonLink::Log => vector_math::map_tile(ys, q, z, |y, z| y - vector_math::exp(z)),
            PoissonLink::Softplus => {
                for (row, &y) in z.chunks_exact_mut(q.max(1)).zip(ys) {
                    for zk in row.iter_mut() {
                        *zk = self.dlog_lik_dz(y, *zk, &[]);
                    }
                }
            }
        }
    }
}

impl PredictiveFamily for Poisson {
    fn task(&self) -> PredictiveTask {
        PredictiveTask::Regression
    }

    fn target_to_f64(y: f64) -> f64 {
        y
    }

    fn target_from_f64(y: f64) -> f64 {
        y
    }

    /// The predictive mean λ(z), and log p(y | z) = y·log λ − λ − log y! (normalised).
    fn predict_at(&self, y: f64, z: f64, extra: &[f64], out: &mut [f64]) -> f64 {
        out[0] = self.rate(z).0;
        self.log_lik(y, z, extra) - statrs::function::gamma::ln_gamma(y + 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Break-once check: with the cutoff branch removed from `rate` (always `lambda.ln()`),
    /// the z = −800 case gives −∞ and this test fails.
    #[test]
    fn softplus_link_is_finite_and_correct_in_both_tails() {
        let f = Poisson::new(PoissonLink::Softplus);
        // z = −800: λ = e^−800 underflows; log λ = −800.
        let l = f.log_lik(3.0, -800.0, &[]);
        assert_eq!(l, 3.0 * -800.0);
        assert_eq!(f.dlog_lik_dz(3.0, -800.0, &[]), 3.0);
        assert_eq!(f.log_lik(0.0, -800.0, &[]), 0.0);
        // z = 800: λ = 800, log λ = ln 800, ∂/∂z = y/800 − 1.
        let l = f.log_lik(5.0, 800.0, &[]);
        assert!((l - (5.0 * 800f64.ln() - 800.0)).abs() < 1e-12, "{l}");
        let d = f.dlog_lik_dz(5.0, 800.0, &[]);
        assert!((d - (5.0 / 800.0 - 1.0)).abs() < 1e-15, "{d}");
        // Just above and below the cutoff the two branches agree.
        let a = f.log_lik(2.0, -699.999_999, &[]);
        let b = f.log_lik(2.0, -700.000_001, &[]);
        assert!((a - b).abs() < 1e-5, "{a} {b}");
    }

    #[test]
    fn targets_must_be_counts() {
        let f = Poisson::default();
        assert_eq!(f.prepare_targets(&[0.0, 7.0], "y").unwrap(), [0.0, 7.0]);
        for bad in [-1.0, 2.5, f64::NAN, f64::INFINITY] {
            let e = f.prepare_targets(&[1.0, bad], "y.csv").unwrap_err();
            let s = e.to_string();
            assert!(
                s.contains("y.csv: row 2") && s.contains("non-negative integer"),
                "{s}"
            );
        }
    }

    #[test]
    fn predictive_mean_and_normalised_log_probability() {
        let mut out = [0.0];
        let f = Poisson::new(PoissonLink::Log);
        let lp = f.predict_at(3.0, 0.5, &[], &mut out);
        let lambda = 0.5f64.exp();
        assert!((out[0] - lambda).abs() < 1e-15);
        let want = 3.0 * 0.5 - lambda - 6f64.ln();
        assert!((lp - want).abs() < 1e-13, "{lp} vs {want}");
        let f = Poisson::new(PoissonLink::Softplus);
        f.predict_at(0.0, 2.0, &[], &mut out);
        assert!((out[0] - (1.0 + 2f64.exp()).ln()).abs() < 1e-15);
    }
}
