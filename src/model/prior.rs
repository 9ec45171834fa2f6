//! Isotropic normal prior θ ~ N(0, σ²·I), shared by the regression models.

use crate::rng::{ChainRng, fill_standard_normal};

/// θ ~ N(0, σ²·I). `variance = ∞` is the flat (improper) prior.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NormalPrior {
    /// σ², the variance of every coordinate.
    pub variance: f64,
}

impl NormalPrior {
    /// N(0, variance·I); `variance` must be > 0 (∞ allowed for a flat prior).
    pub fn new(variance: f64) -> Result<Self, super::ModelError> {
        if variance.is_nan() || variance <= 0.0 {
            return Err(super::ModelError::Setting(format!(
                "prior variance must be > 0, got {variance}"
            )));
        }
        Ok(Self { variance })
    }

    /// log N(θ; 0, σ²I) without the constant: −‖θ‖²/(2σ²).
    pub fn log_density(&self, theta: &[f64]) -> f64 {
        if self.variance.is_infinite() {
            return 0.0;
        }
        -0.5 * theta.iter().map(|t| t * t).sum::<f64>() / self.variance
    }

    /// `grad += −θ/σ²`.
    pub fn add_grad(&self, theta: &[f64], grad: &mut [f64]) {
        if self.variance.is_infinite() {
            return;
        }
        let precision = 1.0 / self.variance;
        for (g, t) in grad.iter_mut().zip(theta) {
            *g -= precision * t;
        }
    }

    /// A draw from N(0, σ²I); an error for the flat prior.
    pub fn sample(&self, rng: &mut ChainRng, out: &mut [f64]) -> Result<(), super::ModelError> {
        if self.variance.is_infinite() {
            return Err(super::ModelError::Setting(
                "cannot draw from a flat prior (variance = inf); choose another init".into(),
            ));
        }
        fill_standard_normal(rng, out);
        let sd = self.variance.sqrt();
        out.iter_mut().for_each(|v| *v *= sd);
        Ok(())
    }
}
