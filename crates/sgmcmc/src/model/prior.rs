//! Priors: the isotropic normal θ ~ N(0, σ²·I) and i.i.d. Cauchy shared by the regression
//! models, and [`ParameterPrior`], a prior on one parameter as real models state them
//! (normal, Student-t, Cauchy, flat; half-normal, half-Cauchy, exponential and flat on x > 0;
//! Beta on a probability), for models whose parameter groups each have their own.

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
    /// θᵢ ~ p i.i.d. for any [`ParameterPrior`] on the real line (normal with a location,
    /// Student-t, Cauchy, flat).
    Each(ParameterPrior),
}

impl From<ParameterPrior> for CoefficientPrior {
    fn from(p: ParameterPrior) -> Self {
        CoefficientPrior::Each(p)
    }
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
    /// An error for a prior that cannot be a coefficient's: an invalid setting, or (for
    /// [`CoefficientPrior::Each`]) one that is not on the real line.
    pub fn validate(&self) -> Result<(), super::ModelError> {
        if let CoefficientPrior::Each(p) = self {
            p.validate()?;
            if p.support() != Support::Real {
                return Err(super::ModelError::Setting(format!(
                    "the prior `{}` is not on the real line, as a coefficient's must be \
                     (normal, student_t, cauchy or flat)",
                    p.name()
                )));
            }
        }
        Ok(())
    }

    /// log p(θ) up to a constant.
    #[inline]
    pub fn log_density(&self, theta: &[f64]) -> f64 {
        match self {
            CoefficientPrior::Normal(p) => p.log_density(theta),
            CoefficientPrior::Cauchy(p) => p.log_density(theta),
            CoefficientPrior::Each(p) => theta.iter().map(|&t| p.log_density(t)).sum(),
        }
    }

    /// `grad += ∇ log p(θ)`.
    #[inline]
    pub fn add_grad(&self, theta: &[f64], grad: &mut [f64]) {
        match self {
            CoefficientPrior::Normal(p) => p.add_grad(theta, grad),
            CoefficientPrior::Cauchy(p) => p.add_grad(theta, grad),
            CoefficientPrior::Each(p) => {
                for (g, &t) in grad.iter_mut().zip(theta) {
                    *g += p.grad_log_density(t);
                }
            }
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
            CoefficientPrior::Each(p) => out.iter_mut().try_for_each(|v| {
                *v = p.sample(rng)?;
                Ok(())
            }),
        }
    }
}

/// Where a prior puts its mass: the scale its parameter is stated on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// The real line.
    Real,
    /// x > 0 (scales, precisions, rates).
    Positive,
    /// 0 < x < 1 (probabilities).
    UnitInterval,
}

/// A prior on one parameter (or on each parameter of a group, independently), as real models
/// state them (Stan's, posteriordb's): the density is normalised, so log-densities are those
/// of the distribution itself; the flat prior is improper (log p = 0).
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)
)]
pub enum ParameterPrior {
    /// N(location, scale²).
    Normal {
        /// μ.
        location: f64,
        /// s > 0.
        scale: f64,
    },
    /// Student-t with `df` degrees of freedom, location μ and scale s.
    StudentT {
        /// ν > 0.
        df: f64,
        /// μ.
        location: f64,
        /// s > 0.
        scale: f64,
    },
    /// Cauchy(location, scale).
    Cauchy {
        /// μ.
        location: f64,
        /// s > 0.
        scale: f64,
    },
    /// Flat on the real line (improper).
    Flat,
    /// Flat on x > 0 (improper): Stan's unbounded `real<lower=0>` with no prior statement.
    FlatPositive,
    /// Half-normal on x > 0: N(0, scale²) folded at 0.
    HalfNormal {
        /// s > 0.
        scale: f64,
    },
    /// Half-Cauchy on x > 0: Cauchy(0, scale) folded at 0.
    HalfCauchy {
        /// s > 0.
        scale: f64,
    },
    /// Exponential(rate) on x > 0.
    Exponential {
        /// λ > 0.
        rate: f64,
    },
    /// Beta(α, β) on 0 < x < 1.
    Beta {
        /// α > 0.
        alpha: f64,
        /// β > 0.
        beta: f64,
    },
}

impl ParameterPrior {
    /// An error that names the bad setting, if any.
    pub fn validate(&self) -> Result<(), super::ModelError> {
        let positive = |name: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(super::ModelError::Setting(format!(
                    "prior {}: `{name}` must be finite and > 0, got {v}",
                    self.name()
                )))
            }
        };
        let finite = |name: &str, v: f64| {
            if v.is_finite() {
                Ok(())
            } else {
                Err(super::ModelError::Setting(format!(
                    "prior {}: `{name}` must be finite, got {v}",
                    self.name()
                )))
            }
        };
        match *self {
            ParameterPrior::Normal { location, scale }
            | ParameterPrior::Cauchy { location, scale } => {
                finite("location", location)?;
                positive("scale", scale)
            }
            ParameterPrior::StudentT {
                df,
                location,
                scale,
            } => {
                positive("df", df)?;
                finite("location", location)?;
                positive("scale", scale)
            }
            ParameterPrior::Flat | ParameterPrior::FlatPositive => Ok(()),
            ParameterPrior::HalfNormal { scale } | ParameterPrior::HalfCauchy { scale } => {
                positive("scale", scale)
            }
            ParameterPrior::Exponential { rate } => positive("rate", rate),
            ParameterPrior::Beta { alpha, beta } => {
                positive("alpha", alpha)?;
                positive("beta", beta)
            }
        }
    }

    /// The distribution's name as the run file writes it.
    pub fn name(&self) -> &'static str {
        match self {
            ParameterPrior::Normal { .. } => "normal",
            ParameterPrior::StudentT { .. } => "student_t",
            ParameterPrior::Cauchy { .. } => "cauchy",
            ParameterPrior::Flat => "flat",
            ParameterPrior::FlatPositive => "flat_positive",
            ParameterPrior::HalfNormal { .. } => "half_normal",
            ParameterPrior::HalfCauchy { .. } => "half_cauchy",
            ParameterPrior::Exponential { .. } => "exponential",
            ParameterPrior::Beta { .. } => "beta",
        }
    }

    /// Where the prior puts its mass.
    pub fn support(&self) -> Support {
        match self {
            ParameterPrior::Normal { .. }
            | ParameterPrior::StudentT { .. }
            | ParameterPrior::Cauchy { .. }
            | ParameterPrior::Flat => Support::Real,
            ParameterPrior::FlatPositive
            | ParameterPrior::HalfNormal { .. }
            | ParameterPrior::HalfCauchy { .. }
            | ParameterPrior::Exponential { .. } => Support::Positive,
            ParameterPrior::Beta { .. } => Support::UnitInterval,
        }
    }

    /// log p(x), normalised (0 for the flat priors); −∞ outside the support.
    pub fn log_density(&self, x: f64) -> f64 {
        use statrs::function::gamma::ln_gamma;
        use std::f64::consts::{LN_2, PI};
        let outside = match self.support() {
            Support::Real => false,
            Support::Positive => x.is_nan() || x <= 0.0,
            Support::UnitInterval => x.is_nan() || x <= 0.0 || x >= 1.0,
        };
        if outside {
            return f64::NEG_INFINITY;
        }
        let normal = |z: f64, s: f64| -0.5 * z * z - s.ln() - 0.5 * (2.0 * PI).ln();
        let cauchy = |z: f64, s: f64| -(z * z).ln_1p() - (PI * s).ln();
        match *self {
            ParameterPrior::Normal { location, scale } => normal((x - location) / scale, scale),
            ParameterPrior::StudentT {
                df,
                location,
                scale,
            } => {
                let z = (x - location) / scale;
                ln_gamma(0.5 * (df + 1.0))
                    - ln_gamma(0.5 * df)
                    - 0.5 * (df * PI).ln()
                    - scale.ln()
                    - 0.5 * (df + 1.0) * (z * z / df).ln_1p()
            }
            ParameterPrior::Cauchy { location, scale } => cauchy((x - location) / scale, scale),
            ParameterPrior::Flat | ParameterPrior::FlatPositive => 0.0,
            ParameterPrior::HalfNormal { scale } => LN_2 + normal(x / scale, scale),
            ParameterPrior::HalfCauchy { scale } => LN_2 + cauchy(x / scale, scale),
            ParameterPrior::Exponential { rate } => rate.ln() - rate * x,
            ParameterPrior::Beta { alpha, beta } => {
                (alpha - 1.0) * x.ln() + (beta - 1.0) * (-x).ln_1p() + ln_gamma(alpha + beta)
                    - ln_gamma(alpha)
                    - ln_gamma(beta)
            }
        }
    }

    /// One draw; an error for the flat (improper) priors.
    pub fn sample(&self, rng: &mut ChainRng) -> Result<f64, super::ModelError> {
        use rand::RngExt;
        use rand_distr::{Beta, Cauchy, Exp, StandardNormal, StudentT};
        let z: fn(&mut ChainRng) -> f64 = |rng| rng.sample(StandardNormal);
        let invalid = |e: String| super::ModelError::Setting(format!("prior {}: {e}", self.name()));
        Ok(match *self {
            ParameterPrior::Normal { location, scale } => location + scale * z(rng),
            ParameterPrior::StudentT {
                df,
                location,
                scale,
            } => {
                let t = StudentT::new(df).map_err(|e| invalid(e.to_string()))?;
                location + scale * rng.sample(t)
            }
            ParameterPrior::Cauchy { location, scale } => {
                let c = Cauchy::new(location, scale).map_err(|e| invalid(e.to_string()))?;
                rng.sample(c)
            }
            ParameterPrior::Flat | ParameterPrior::FlatPositive => {
                return Err(super::ModelError::Setting(format!(
                    "cannot draw from the improper prior `{}`; choose another init",
                    self.name()
                )));
            }
            ParameterPrior::HalfNormal { scale } => scale * z(rng).abs(),
            ParameterPrior::HalfCauchy { scale } => {
                let c = Cauchy::new(0.0, scale).map_err(|e| invalid(e.to_string()))?;
                rng.sample(c).abs()
            }
            ParameterPrior::Exponential { rate } => {
                rng.sample(Exp::new(rate).map_err(|e| invalid(e.to_string()))?)
            }
            ParameterPrior::Beta { alpha, beta } => {
                rng.sample(Beta::new(alpha, beta).map_err(|e| invalid(e.to_string()))?)
            }
        })
    }

    /// d log p(x) / dx inside the support.
    pub fn grad_log_density(&self, x: f64) -> f64 {
        match *self {
            ParameterPrior::Normal { location, scale } => -(x - location) / (scale * scale),
            ParameterPrior::StudentT {
                df,
                location,
                scale,
            } => {
                let d = x - location;
                -(df + 1.0) * d / (df * scale * scale + d * d)
            }
            ParameterPrior::Cauchy { location, scale } => {
                let d = x - location;
                -2.0 * d / (scale * scale + d * d)
            }
            ParameterPrior::Flat | ParameterPrior::FlatPositive => 0.0,
            ParameterPrior::HalfNormal { scale } => -x / (scale * scale),
            ParameterPrior::HalfCauchy { scale } => -2.0 * x / (scale * scale + x * x),
            ParameterPrior::Exponential { rate } => -rate,
            ParameterPrior::Beta { alpha, beta } => (alpha - 1.0) / x - (beta - 1.0) / (1.0 - x),
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
