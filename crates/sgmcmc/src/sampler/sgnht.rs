//! SGNHT (Ding et al. 2014), reference §2.4: Euler discretisation with one global thermostat,
//! in the catalogue's v-parameterisation (η = h², v = h·p, α = h·ξ, a = h·A). One iteration,
//! in this order:
//!
//! 1. v ← v − α·v + η·gₜ + √(2aηT)·ξ, with the cached gₜ;
//! 2. θₜ₊₁ = θₜ + v, with the **new** v;
//! 3. α ← α + vᵀv/D − η·T (D the total number of parameters);
//! 4. compute and cache gₜ₊₁.
//!
//! At [`Sampler::start`]: α₀ = a and v₀ ~ N(0, η·T·I).

use super::{
    ChainState, Sampler, SamplerError, check_range, check_step, check_temperature, drift, kick,
    kinetic, ou_step, resample_momentum,
};
use crate::estimator::GradientEstimator;
use crate::rng::ChainRng;

/// SGNHT hyperparameters other than η (defaults: reference §2.4, MAMBA App. D.2).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SgnhtSettings {
    /// Diffusion a ≥ 0 (also the initial thermostat α₀); 0.01.
    pub diffusion: f64,
    /// Temperature T > 0; 1.
    pub temperature: f64,
}

impl Default for SgnhtSettings {
    fn default() -> Self {
        Self {
            diffusion: 0.01,
            temperature: 1.0,
        }
    }
}

/// Stochastic-gradient Nosé–Hoover thermostat (Euler, one global thermostat).
#[derive(Debug, Clone)]
pub struct Sgnht {
    eta: f64,
    settings: SgnhtSettings,
    /// √(η·T): sd of the initial momentum.
    momentum_sd: f64,
    /// √(2aηT): sd of the momentum noise.
    noise_sd: f64,
    /// v.
    v: Vec<f64>,
    /// α.
    alpha: f64,
    state: ChainState,
}

impl Sgnht {
    /// SGNHT with learning rate η (catalogue dt; η = h², §1.4) and `settings`.
    pub fn new(eta: f64, settings: SgnhtSettings) -> Result<Self, SamplerError> {
        check_step(eta)?;
        check_temperature(settings.temperature)?;
        let a = check_range(
            "diffusion a",
            settings.diffusion,
            0.0,
            f64::MAX,
            "must be finite and ≥ 0",
        )?;
        let mut sgnht = Self {
            eta: 0.0,
            settings,
            momentum_sd: 0.0,
            noise_sd: 0.0,
            v: Vec::new(),
            alpha: a,
            state: ChainState::default(),
        };
        sgnht.set_step_size(eta)?;
        Ok(sgnht)
    }

    /// η.
    pub fn eta(&self) -> f64 {
        self.eta
    }

    /// The settings in use.
    pub fn settings(&self) -> &SgnhtSettings {
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
}

crate::persist_fields!(Sgnht { v, alpha, state });

impl Sampler for Sgnht {
    crate::checkpoint::state_through_persist!();

    fn name(&self) -> &'static str {
        "sgnht"
    }

    fn thermostat_value(&self) -> Option<f64> {
        Some(Sgnht::thermostat(self))
    }

    fn start(&mut self, theta0: &[f64], estimator: &mut dyn GradientEstimator, rng: &mut ChainRng) {
        self.alpha = self.settings.diffusion;
        self.v.clear();
        self.v.resize(theta0.len(), 0.0);
        self.state.start(theta0, estimator, rng);
        resample_momentum(&mut self.v, self.momentum_sd, rng);
    }

    fn step(&mut self, estimator: &mut dyn GradientEstimator, rng: &mut ChainRng) {
        let state = &mut self.state;
        // 1. v ← (1 − α)·v + √(2aηT)·ξ + η·gₜ.
        ou_step(&mut self.v, 1.0 - self.alpha, self.noise_sd, rng);
        kick(&mut self.v, &state.grad, self.eta);
        // 2. θ ← θ + v (new v).
        drift(&mut state.theta, &self.v, 1.0);
        // 3. α ← α + vᵀv/D − ηT.
        let d = self.v.len() as f64;
        self.alpha += kinetic(&self.v) / d - self.eta * self.settings.temperature;
        // 4. gₜ₊₁.
        state.refresh(estimator, rng);
    }

    fn position(&self) -> &[f64] {
        &self.state.theta
    }

    fn score(&self) -> &[f64] {
        &self.state.grad
    }

    /// η.
    fn step_size(&self) -> f64 {
        self.eta
    }

    /// η ← `step`; recomputes √(ηT) and √(2aηT). The thermostat α and v are kept.
    fn set_step_size(&mut self, step: f64) -> Result<(), SamplerError> {
        let eta = check_step(step)?;
        let SgnhtSettings {
            diffusion: a,
            temperature: t,
        } = self.settings;
        self.eta = eta;
        self.momentum_sd = (eta * t).sqrt();
        self.noise_sd = (2.0 * a * eta * t).sqrt();
        Ok(())
    }
}
