//! BAOAB (Leimkuhler & Matthews 2013), reference §2.5, for underdamped Langevin dynamics with
//! unit mass, physical time step h, friction γ and temperature T. One iteration, in this order
//! (c = e^{−γh}):
//!
//! 1. B: v ← v + (h/2)·gₜ (cached);
//! 2. A: θ ← θ + (h/2)·v;
//! 3. O: v ← c·v + √(T(1 − c²))·ξ (or T·√(1 − c²)·ξ with
//!    [`BaoabSettings::noise_std_scaled_by_tau`]);
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
    /// `baoab_noise_std_scaled_by_tau` (reference §2.5, Appendix A): the SGMCMCJax O step
    /// v ← c·v + τ·√(1 − c²)·ξ, which multiplies the noise **sd** by τ = T (variance
    /// τ²(1 − c²)) where the catalogue multiplies the variance. Its stationary velocity variance
    /// is τ², so it samples π^{1/τ²} (on N(0, s²): position variance τ²·s², not τ·s²). The
    /// two agree, bit for bit, at τ = 1. v₀ is unchanged (N(0, T·I)). Off.
    pub noise_std_scaled_by_tau: bool,
}

impl Default for BaoabSettings {
    fn default() -> Self {
        Self {
            temperature: 1.0,
            zero_initial_momentum: false,
            noise_std_scaled_by_tau: false,
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
    /// √(T(1 − c²)) (catalogue) or T·√(1 − c²) (`noise_std_scaled_by_tau`).
    o_sd: f64,
    v: Vec<f64>,
    state: ChainState,
}

impl Baoab {
    /// BAOAB with time step h, friction γ > 0 and `settings`.
    pub fn new(h: f64, gamma: f64, settings: BaoabSettings) -> Result<Self, SamplerError> {
        check_step(h)?;
        check_temperature(settings.temperature)?;
        if !(gamma.is_finite() && gamma > 0.0) {
            return Err(SamplerError::BadParameter {
                name: "friction γ",
                value: gamma,
                requirement: "must be finite and > 0",
            });
        }
        let mut baoab = Self {
            h: 0.0,
            gamma,
            settings,
            c: 0.0,
            o_sd: 0.0,
            v: Vec::new(),
            state: ChainState::default(),
        };
        baoab.set_step_size(h)?;
        Ok(baoab)
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

crate::persist_fields!(Baoab { v, state });

impl Sampler for Baoab {
    crate::checkpoint::state_through_persist!();

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

    /// h.
    fn step_size(&self) -> f64 {
        self.h
    }

    /// h ← `step`; recomputes c = e^{−γh} and the O-step noise sd.
    fn set_step_size(&mut self, step: f64) -> Result<(), SamplerError> {
        self.h = check_step(step)?;
        self.c = (-self.gamma * self.h).exp();
        let (t, c) = (self.settings.temperature, self.c);
        self.o_sd = if self.settings.noise_std_scaled_by_tau {
            t * (1.0 - c * c).sqrt()
        } else {
            (t * (1.0 - c * c)).sqrt()
        };
        Ok(())
    }
}
