//! Isotropic normal prior θ ~ N(0, σ²·I), shared by the regression models.

use crate::rng::{ChainRng, fill_standard_normal};

/// θ ~ N(0, σ²·I). `variance = ∞` is the flat (improper) prior.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
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

/// θᵢ ~ Cauchy(0, s) independently (the coreset paper's logistic-regression prior, reference
/// §7.9): log p(θ) = −Σᵢ log(1 + (θᵢ/s)²) up to the constant −D·log(π·s).
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct CauchyPrior {
    /// The scale s > 0 of every coordinate.
    pub scale: f64,
}

impl CauchyPrior {
    /// Cauchy(0, scale) per coordinate; `scale` must be finite and > 0.
    pub fn new(scale: f64) -> Result<Self, super::ModelError> {
        if !(scale.is_finite() && scale > 0.0) {
            return Err(super::ModelError::Setting(format!(
                "Cauchy prior scale must be finite and > 0, got {scale}"
            )));
        }
        Ok(Self { scale })
    }

    /// −Σᵢ log1p((θᵢ/s)²).
    pub fn log_density(&self, theta: &[f64]) -> f64 {
        let inv = 1.0 / self.scale;
        -theta.iter().map(|t| (t * inv).powi(2).ln_1p()).sum::<f64>()
    }

    /// `grad += −2θᵢ/(s² + θᵢ²)`.
    pub fn add_grad(&self, theta: &[f64], grad: &mut [f64]) {
        let s2 = self.scale * self.scale;
        for (g, t) in grad.iter_mut().zip(theta) {
            *g -= 2.0 * t / (s2 + t * t);
        }
    }

    /// Independent Cauchy(0, s) draws (rand_distr's inverse-CDF sampler).
    pub fn sample(&self, rng: &mut ChainRng, out: &mut [f64]) {
        use rand::RngExt;
        let cauchy = rand_distr::Cauchy::new(0.0, self.scale).expect("scale checked in new");
        out.iter_mut().for_each(|v| *v = rng.sample(cauchy));
    }
}

/// The prior of a GLM's coefficients (w and the intercept; a family's extra parameters have
/// their own). `From` conversions let [`super::Glm::new`] take either prior directly.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CoefficientPrior {
    /// θ ~ N(0, σ²·I).
    Normal(NormalPrior),
    /// θᵢ ~ Cauchy(0, s) i.i.d.
    Cauchy(CauchyPrior),
}

impl From<NormalPrior> for CoefficientPrior {
    fn from(p: NormalPrior) -> Self {
        CoefficientPrior::Normal(p)
    }
}

impl From<CauchyPrior> for CoefficientPrior {
    fn from(p: CauchyPrior) -> Self {
        CoefficientPrior::Cauchy(p)
    }
}

impl CoefficientPrior {
    /// log p(θ) up to a constant.
    #[inline]
    pub fn log_density(&self, theta: &[f64]) -> f64 {
        match self {
            CoefficientPrior::Normal(p) => p.log_density(theta),
            CoefficientPrior::Cauchy(p) => p.log_density(theta),
        }
    }

    /// `grad += ∇ log p(θ)`.
    #[inline]
    pub fn add_grad(&self, theta: &[f64], grad: &mut [f64]) {
        match self {
            CoefficientPrior::Normal(p) => p.add_grad(theta, grad),
            CoefficientPrior::Cauchy(p) => p.add_grad(theta, grad),
        }
    }

    /// A draw from the prior (an error for the flat normal prior).
    pub fn sample(&self, rng: &mut ChainRng, out: &mut [f64]) -> Result<(), super::ModelError> {
        match self {
            CoefficientPrior::Normal(p) => p.sample(rng, out),
            CoefficientPrior::Cauchy(p) => {
                p.sample(rng, out);
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Cauchy log-density and gradient against the closed form and central differences.
    /// Break-once check: writing `−θ/(s² + θ²)` (factor 2 dropped) in `add_grad` fails the
    /// finite-difference assertion.
    #[test]
    fn cauchy_density_and_gradient() {
        let p = CauchyPrior::new(2.5).unwrap();
        let theta = [0.3, -4.0, 17.0, 0.0];
        let want: f64 = theta
            .iter()
            .map(|t: &f64| -(1.0 + (t / 2.5).powi(2)).ln())
            .sum();
        assert!((p.log_density(&theta) - want).abs() < 1e-14);
        let mut g = [0.0; 4];
        p.add_grad(&theta, &mut g);
        for j in 0..4 {
            let h = 1e-5;
            let (mut a, mut b) = (theta, theta);
            a[j] += h;
            b[j] -= h;
            let fd = (p.log_density(&a) - p.log_density(&b)) / (2.0 * h);
            assert!(
                (g[j] - fd).abs() <= 1e-8 * fd.abs().max(1e-3),
                "{j}: {} vs {fd}",
                g[j]
            );
        }
        assert!(CauchyPrior::new(0.0).is_err() && CauchyPrior::new(f64::NAN).is_err());
    }
}
