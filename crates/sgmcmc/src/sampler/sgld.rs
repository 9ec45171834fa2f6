//! SGLD (Welling & Teh 2011), reference §2.1:
//! θₜ₊₁ = θₜ + ε·ĝ(θₜ) + √(2εT)·ξ, ξ ~ N(0, I), in the catalogue convention (ε = h/2).

use super::{
    ChainState, Sampler, SamplerError, StepSize, add_drift_and_noise, check_step, check_temperature,
};
use crate::estimator::GradientEstimator;
use crate::rng::ChainRng;

/// Stochastic-gradient Langevin dynamics.
#[derive(Debug, Clone)]
pub struct Sgld {
    epsilon: f64,
    temperature: f64,
    /// √(2εT).
    noise_sd: f64,
    state: ChainState,
}

impl Sgld {
    /// SGLD with step `step` and temperature `temperature` (1 targets π itself).
    pub fn new(step: StepSize, temperature: f64) -> Result<Self, SamplerError> {
        let epsilon = step.epsilon()?;
        let mut sgld = Self {
            epsilon: 0.0,
            temperature: check_temperature(temperature)?,
            noise_sd: 0.0,
            state: ChainState::default(),
        };
        sgld.set_step_size(epsilon)?;
        Ok(sgld)
    }

    /// ε, the step in the catalogue convention.
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }
}

crate::persist_fields!(Sgld { state });

impl Sampler for Sgld {
    crate::checkpoint::state_through_persist!();

    fn name(&self) -> &'static str {
        "sgld"
    }

    fn start(&mut self, theta0: &[f64], estimator: &mut dyn GradientEstimator, rng: &mut ChainRng) {
        self.state.start(theta0, estimator, rng);
    }

    #[inline]
    fn step(&mut self, estimator: &mut dyn GradientEstimator, rng: &mut ChainRng) {
        let state = &mut self.state;
        add_drift_and_noise(
            &mut state.theta,
            &state.grad,
            self.epsilon,
            self.noise_sd,
            rng,
        );
        state.refresh(estimator, rng);
    }

    fn position(&self) -> &[f64] {
        &self.state.theta
    }

    fn score(&self) -> &[f64] {
        &self.state.grad
    }

    /// ε.
    fn step_size(&self) -> f64 {
        self.epsilon
    }

    /// ε ← `step`; the noise sd becomes √(2εT).
    fn set_step_size(&mut self, step: f64) -> Result<(), SamplerError> {
        self.epsilon = check_step(step)?;
        self.noise_sd = (2.0 * self.epsilon * self.temperature).sqrt();
        Ok(())
    }
}
