//! BADODAB (Leimkuhler & Shang 2016), reference §2.6: a splitting scheme for the SGNHT
//! dynamics with physical time step h, thermal mass μ, noise amplitude σ and temperature T.
//! One iteration, in this order (D the number of parameters):
//!
//! 1. B: v ← v + (h/2)·gₜ (cached);
//! 2. A: θ ← θ + (h/2)·v;
//! 3. D: α ← α + (h/(2μ))·(vᵀv − D·T);
//! 4. O: v ← e^{−αh}·v + σ·√(T·(1 − e^{−2αh})/(2α))·ξ (v + σ√(Th)·ξ at α = 0);
//! 5. D: α ← α + (h/(2μ))·(vᵀv − D·T);
//! 6. A: θ ← θ + (h/2)·v;
//! 7. compute and cache gₜ₊₁;
//! 8. B: v ← v + (h/2)·gₜ₊₁.
//!
//! The D-steps use vᵀv (not ‖v‖, the SGMCMCJax bug) and the final B half-step is kept (omitted
//! by BayesFlux.jl); there is deliberately no option for either. At [`Sampler::start`]: α₀ = a,
//! v₀ ~ N(0, T·I). The B, A and O steps are the same helpers BAOAB uses.

use super::{
    ChainState, Sampler, SamplerError, check_range, check_step, check_temperature, drift, kick,
    kinetic, ou_step, resample_momentum,
};
use crate::estimator::GradientEstimator;
use crate::rng::ChainRng;

/// BADODAB settings other than h (defaults: reference §2.6).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BadodabSettings {
    /// Initial thermostat α₀ = a (finite); 0.01.
    pub initial_thermostat: f64,
    /// Thermal mass μ > 0; 1.
    pub thermal_mass: f64,
    /// Noise amplitude σ > 0; 1.
    pub noise_amplitude: f64,
    /// Temperature T > 0; 1.
    pub temperature: f64,
}

impl Default for BadodabSettings {
    fn default() -> Self {
        Self {
            initial_thermostat: 0.01,
            thermal_mass: 1.0,
            noise_amplitude: 1.0,
            temperature: 1.0,
        }
    }
}

/// The BADODAB splitting integrator for the SGNHT dynamics.
#[derive(Debug, Clone)]
pub struct Badodab {
    h: f64,
    settings: BadodabSettings,
    v: Vec<f64>,
    alpha: f64,
    state: ChainState,
}

/// (1 − e^{−2αh})/(2α), computed as −expm1(−2αh)/(2α), or as h·(1 − αh) when |αh| < 1e-8
/// (reference §2.6, numerics). Positive for either sign of α.
fn ou_variance_factor(alpha: f64, h: f64) -> f64 {
    if (alpha * h).abs() < 1e-8 {
        h * (1.0 - alpha * h)
    } else {
        -(-2.0 * alpha * h).exp_m1() / (2.0 * alpha)
    }
}

impl Badodab {
    /// BADODAB with time step h and `settings`.
    pub fn new(h: f64, settings: BadodabSettings) -> Result<Self, SamplerError> {
        check_step(h)?;
        check_temperature(settings.temperature)?;
        check_range(
            "initial thermostat a",
            settings.initial_thermostat,
            -f64::MAX,
            f64::MAX,
            "must be finite",
        )?;
        for (name, value) in [
            ("thermal mass μ", settings.thermal_mass),
            ("noise amplitude σ", settings.noise_amplitude),
        ] {
            if !(value.is_finite() && value > 0.0) {
                return Err(SamplerError::BadParameter {
                    name,
                    value,
                    requirement: "must be finite and > 0",
                });
            }
        }
        Ok(Self {
            h,
            settings,
            v: Vec::new(),
            alpha: settings.initial_thermostat,
            state: ChainState::default(),
        })
    }

    /// The settings in use.
    pub fn settings(&self) -> &BadodabSettings {
        &self.settings
    }

    /// The momentum v.
    pub fn momentum(&self) -> &[f64] {
        &self.v
    }

    /// The thermostat α.
    pub fn thermostat(&self) -> f64 {
        self.alpha
    }

    /// D-step: α ← α + (h/(2μ))·(vᵀv − D·T).
    #[inline]
    fn thermostat_half_step(&mut self) {
        let s = &self.settings;
        let d = self.v.len() as f64;
        self.alpha += self.h / (2.0 * s.thermal_mass) * (kinetic(&self.v) - d * s.temperature);
    }
}

crate::persist_fields!(Badodab { v, alpha, state });

impl Sampler for Badodab {
    crate::checkpoint::state_through_persist!();

    fn name(&self) -> &'static str {
        "badodab"
    }

    fn thermostat_value(&self) -> Option<f64> {
        Some(Badodab::thermostat(self))
    }

    fn start(&mut self, theta0: &[f64], estimator: &mut dyn GradientEstimator, rng: &mut ChainRng) {
        self.alpha = self.settings.initial_thermostat;
        self.v.clear();
        self.v.resize(theta0.len(), 0.0);
        self.state.start(theta0, estimator, rng);
        resample_momentum(&mut self.v, self.settings.temperature.sqrt(), rng);
    }

    fn step(&mut self, estimator: &mut dyn GradientEstimator, rng: &mut ChainRng) {
        let (h, half) = (self.h, 0.5 * self.h);
        let (sigma, t) = (self.settings.noise_amplitude, self.settings.temperature);
        kick(&mut self.v, &self.state.grad, half); // B
        drift(&mut self.state.theta, &self.v, half); // A
        self.thermostat_half_step(); // D
        let c = (-self.alpha * h).exp();
        let sd = sigma * (t * ou_variance_factor(self.alpha, h)).sqrt();
        ou_step(&mut self.v, c, sd, rng); // O
        self.thermostat_half_step(); // D
        drift(&mut self.state.theta, &self.v, half); // A
        self.state.refresh(estimator, rng);
        kick(&mut self.v, &self.state.grad, half); // B
    }

    fn position(&self) -> &[f64] {
        &self.state.theta
    }

    fn score(&self) -> &[f64] {
        &self.state.grad
    }

    /// h.
    fn step_size(&self) -> f64 {
        self.h
    }

    /// h ← `step` (the O-step coefficients are computed from h and α every iteration).
    fn set_step_size(&mut self, step: f64) -> Result<(), SamplerError> {
        self.h = check_step(step)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::ou_variance_factor;

    #[test]
    fn ou_variance_factor_branches_agree() {
        let h: f64 = 0.01;
        for alpha in [-3.0, -1e-3, 1e-3, 2.0] {
            let direct = (1.0 - (-2.0 * alpha * h).exp()) / (2.0 * alpha);
            let got: f64 = ou_variance_factor(alpha, h);
            // The naive form loses ~|log10(2αh)| digits to cancellation, hence 1e-10.
            assert!((got - direct).abs() <= 1e-10 * direct.abs(), "{alpha}");
        }
        assert_eq!(ou_variance_factor(0.0, h), h);
        // Across the branch boundary |αh| = 1e-8 the two forms agree to O((αh)²).
        let a = 1e-8 / h;
        let small = ou_variance_factor(a * 0.999_999, h);
        let large = ou_variance_factor(a * 1.000_001, h);
        assert!((small - large).abs() < 1e-12 * h, "{small} {large}");
    }
}
