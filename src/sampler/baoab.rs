//! BAOAB (Leimkuhler & Matthews 2013), reference §2.5, for underdamped Langevin dynamics with
//! unit mass, physical time step h, friction γ and temperature T. One iteration, in this order
//! (c = e^{−γh}):
//!
//! 1. B: v ← v + (h/2)·gₜ (cached);
//! 2. A: θ ← θ + (h/2)·v;
//! 3. O: v ← c·v + √(T(1 − c²))·ξ;
//! 4. A: θ ← θ + (h/2)·v;
//! 5. compute and cache gₜ₊₁;
//! 6. B: v ← v + (h/2)·gₜ₊₁.
//!
//! At [`Sampler::start`]: v₀ ~ N(0, T·I), or v₀ = 0 with
//! [`BaoabSettings::zero_initial_momentum`] (SGMCMCJax).

use super::{
    ChainState, Sampler, SamplerError, check_step, check_temperature, drift, kick, ou_step,
    resample_momentum,
};
use crate::estimator::GradientEstimator;
use crate::rng::ChainRng;

/// BAOAB settings other than h and γ.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BaoabSettings {
    /// Temperature T > 0; 1.
    pub temperature: f64,
    /// `zero_initial_momentum`: start from v₀ = 0 (SGMCMCJax) instead of v₀ ~ N(0, T·I); off.
    pub zero_initial_momentum: bool,
}

impl Default for BaoabSettings {
    fn default() -> Self {
        Self {
            temperature: 1.0,
            zero_initial_momentum: false,
        }
    }
}

/// The BAOAB splitting integrator for underdamped Langevin dynamics.
#[derive(Debug, Clone)]
pub struct Baoab {
    h: f64,
    gamma: f64,
    settings: BaoabSettings,
    /// c = e^{−γh}.
    c: f64,
    /// √(T(1 − c²)).
    o_sd: f64,
    v: Vec<f64>,
    state: ChainState,
}

impl Baoab {
    /// BAOAB with time step h, friction γ > 0 and `settings`.
    pub fn new(h: f64, gamma: f64, settings: BaoabSettings) -> Result<Self, SamplerError> {
        check_step(h)?;
        let t = check_temperature(settings.temperature)?;
        if !(gamma.is_finite() && gamma > 0.0) {
            return Err(SamplerError::BadParameter {
                name: "friction γ",
                value: gamma,
                requirement: "must be finite and > 0",
            });
        }
        let c = (-gamma * h).exp();
        Ok(Self {
            h,
            gamma,
            settings,
            c,
            o_sd: (t * (1.0 - c * c)).sqrt(),
            v: Vec::new(),
            state: ChainState::default(),
        })
    }

    /// h.
    pub fn step_size(&self) -> f64 {
        self.h
    }

    /// γ.
    pub fn friction(&self) -> f64 {
        self.gamma
    }

    /// The settings in use.
    pub fn settings(&self) -> &BaoabSettings {
        &self.settings
    }

    /// The momentum v.
    pub fn momentum(&self) -> &[f64] {
        &self.v
    }
}

impl Sampler for Baoab {
    fn name(&self) -> &'static str {
        "baoab"
    }

    fn start(&mut self, theta0: &[f64], estimator: &mut dyn GradientEstimator, rng: &mut ChainRng) {
        self.v.clear();
        self.v.resize(theta0.len(), 0.0);
        self.state.start(theta0, estimator, rng);
        if !self.settings.zero_initial_momentum {
            resample_momentum(&mut self.v, self.settings.temperature.sqrt(), rng);
        }
    }

    fn step(&mut self, estimator: &mut dyn GradientEstimator, rng: &mut ChainRng) {
        let half = 0.5 * self.h;
        let state = &mut self.state;
        kick(&mut self.v, &state.grad, half); // B
        drift(&mut state.theta, &self.v, half); // A
        ou_step(&mut self.v, self.c, self.o_sd, rng); // O
        drift(&mut state.theta, &self.v, half); // A
        state.refresh(estimator, rng);
        kick(&mut self.v, &state.grad, half); // B
    }

    fn position(&self) -> &[f64] {
        &self.state.theta
    }

    fn score(&self) -> &[f64] {
        &self.state.grad
    }
}
