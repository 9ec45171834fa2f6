//! pSGLD (Li, Chen, Carlson & Carin 2016), reference §2.2: SGLD with a diagonal RMSProp
//! preconditioner, curvature term Γ = 0. One iteration, in this order:
//!
//! 1. V ← ρ·V + (1 − ρ)·gₜ ⊙ gₜ with the cached gₜ;
//! 2. G = 1/(√V + λ), element-wise;
//! 3. θₜ₊₁ = θₜ + ε·G ⊙ gₜ + √(2εT·G) ⊙ ξ;
//! 4. compute and cache gₜ₊₁.
//!
//! ε is in the library's (catalogue SGLD) convention, so G ≡ 1 is exactly [`super::Sgld`] with
//! the same ε. Li et al. and the catalogue write the Welling–Teh form θ + (dt/2)·G⊙g +
//! √(dt·G)⊙ξ: use [`Psgld::from_catalogue_dt`] (ε = dt/2) to reproduce them. As in the
//! reference code, V starts at 0 with no bias correction, so the first steps have large G.

use super::{
    ChainState, Sampler, SamplerError, StepSize, check_range, check_step, check_temperature,
};
use crate::estimator::GradientEstimator;
use crate::rng::ChainRng;

/// pSGLD hyperparameters other than the step (defaults: reference §2.2, SGMCMCJax).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PsgldSettings {
    /// RMSProp decay ρ ∈ [0, 1] (catalogue α); 0.99. ρ = 1 keeps V at its current value.
    pub decay: f64,
    /// Stabiliser λ > 0 in G = 1/(√V + λ) (catalogue ε); 1e-5.
    pub stabiliser: f64,
    /// Temperature T > 0; 1.
    pub temperature: f64,
    /// If `Some(k)`, V is updated during the first k iterations after each start and then
    /// frozen (as if ρ = 1): the chain becomes SGLD with per-coordinate step ε·G_c, the
    /// frozen-preconditioner regime of §2.2 "How to test it" 1. `None` (default): always adapt.
    pub freeze_after: Option<usize>,
}

impl Default for PsgldSettings {
    fn default() -> Self {
        Self {
            decay: 0.99,
            stabiliser: 1e-5,
            temperature: 1.0,
            freeze_after: None,
        }
    }
}

/// Preconditioned stochastic-gradient Langevin dynamics (RMSProp preconditioner).
#[derive(Debug, Clone)]
pub struct Psgld {
    epsilon: f64,
    /// 2·ε·T, so the noise sd is √(two_eps_t·G) (bitwise SGLD's √(2εT) when G = 1).
    two_eps_t: f64,
    settings: PsgldSettings,
    /// RMSProp second-moment estimate V.
    v: Vec<f64>,
    /// Iterations since the last start (for `freeze_after`).
    iteration: usize,
    state: ChainState,
}

impl Psgld {
    /// pSGLD with step `step` (ε = the Langevin increment; [`StepSize::WellingTeh`] h gives
    /// ε = h/2) and `settings`.
    pub fn new(step: StepSize, settings: PsgldSettings) -> Result<Self, SamplerError> {
        let epsilon = step.epsilon()?;
        check_temperature(settings.temperature)?;
        check_range("decay ρ", settings.decay, 0.0, 1.0, "must be in [0, 1]")?;
        check_range(
            "stabiliser λ",
            settings.stabiliser,
            f64::MIN_POSITIVE,
            f64::MAX,
            "must be finite and > 0",
        )?;
        let mut psgld = Self {
            epsilon: 0.0,
            two_eps_t: 0.0,
            settings,
            v: Vec::new(),
            iteration: 0,
            state: ChainState::default(),
        };
        psgld.set_step_size(epsilon)?;
        Ok(psgld)
    }

    /// The catalogue/SGMCMCJax pSGLD with step `dt` (reference §2.2, Appendix A
    /// `from_catalogue_dt`): θ + (dt/2)·G⊙g + √(dt·G)⊙ξ, i.e. ε = dt/2.
    pub fn from_catalogue_dt(dt: f64, settings: PsgldSettings) -> Result<Self, SamplerError> {
        Self::new(StepSize::WellingTeh(dt), settings)
    }

    /// ε, the step in the library's convention.
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    /// The settings in use.
    pub fn settings(&self) -> &PsgldSettings {
        &self.settings
    }

    /// The current second-moment estimate V (the one the last iteration used).
    pub fn second_moment(&self) -> &[f64] {
        &self.v
    }

    /// Write the preconditioner G = 1/(√V + λ) of the current V into `out`.
    pub fn preconditioner(&self, out: &mut [f64]) {
        let lambda = self.settings.stabiliser;
        for (o, v) in out.iter_mut().zip(&self.v) {
            *o = 1.0 / (v.sqrt() + lambda);
        }
    }
}

crate::persist_fields!(Psgld {
    v,
    iteration,
    state
});

impl Sampler for Psgld {
    crate::checkpoint::state_through_persist!();

    fn name(&self) -> &'static str {
        "psgld"
    }

    fn start(&mut self, theta0: &[f64], estimator: &mut dyn GradientEstimator, rng: &mut ChainRng) {
        self.v.clear();
        self.v.resize(theta0.len(), 0.0);
        self.iteration = 0;
        self.state.start(theta0, estimator, rng);
    }

    #[inline]
    fn step(&mut self, estimator: &mut dyn GradientEstimator, rng: &mut ChainRng) {
        let PsgldSettings {
            decay: rho,
            stabiliser: lambda,
            freeze_after,
            ..
        } = self.settings;
        self.iteration += 1;
        let adapt = freeze_after.is_none_or(|k| self.iteration <= k);
        let (eps, two_eps_t) = (self.epsilon, self.two_eps_t);
        let state = &mut self.state;
        for ((t, g), v) in state.theta.iter_mut().zip(&state.grad).zip(&mut self.v) {
            if adapt {
                *v = rho * *v + (1.0 - rho) * g * g;
            }
            let precond = 1.0 / (v.sqrt() + lambda);
            let xi = super::standard_normal(rng);
            *t += eps * precond * g + (two_eps_t * precond).sqrt() * xi;
        }
        state.refresh(estimator, rng);
    }

    fn position(&self) -> &[f64] {
        &self.state.theta
    }

    fn score(&self) -> &[f64] {
        &self.state.grad
    }

    /// ε (library convention; a catalogue dt was converted to ε = dt/2).
    fn step_size(&self) -> f64 {
        self.epsilon
    }

    /// ε ← `step` (library convention); recomputes 2εT. V and the iteration count are kept.
    fn set_step_size(&mut self, step: f64) -> Result<(), SamplerError> {
        self.epsilon = check_step(step)?;
        self.two_eps_t = 2.0 * self.epsilon * self.settings.temperature;
        Ok(())
    }
}
