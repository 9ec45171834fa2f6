//! SGHMC (Chen, Fox & Guestrin 2014), reference §2.3, in the catalogue's v-parameterisation
//! (η = h², α = h·A, v = h·p, β̂ = h·B̂). One outer iteration produces one sample:
//!
//! 1. resample v ~ N(0, η·T·I);
//! 2. L times: θ ← θ + v; g ← ĝ(θ) (a fresh minibatch every inner step, or one per outer
//!    iteration with [`SghmcOptions::shared_minibatch`]);
//!    v ← v + η·g − α·v + √(2(α − β̂)ηT)·ξ;
//! 3. emit θ and the last g.
//!
//! The default order evaluates the gradient at the updated position (Chen et al., Algorithm 2:
//! symplectic Euler with friction, stable for 0 < ηλ < 4 − 2α on a Gaussian direction of
//! precision λ). [`SghmcOptions`] restores the reference codes' variants (Appendix A).

use super::{
    ChainState, Sampler, SamplerError, check_range, check_step, check_temperature,
    resample_momentum, standard_normal,
};
use crate::estimator::GradientEstimator;
use crate::rng::ChainRng;

/// Compatibility options (reference Appendix A); all off by default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SghmcOptions {
    /// `sghmc_gradient_before_position_update`: the SGMCMCJax order (explicit Euler),
    /// v ← v + η·ĝ(θ_before) − α·v + noise with θ ← θ + v using the old v. Stable only for
    /// ηλ < α (§2.3); needed to reproduce the MAMBA SGHMC tables.
    pub gradient_before_position_update: bool,
    /// `sghmc_no_momentum_resampling`: carry v across outer iterations (the posteriors library
    /// with L = 1); v is drawn from N(0, η·T·I) once, at start.
    pub no_momentum_resampling: bool,
    /// `sghmc_shared_minibatch` (BlackJAX): the L estimates of one outer iteration share one
    /// minibatch, drawn fresh at the iteration's first estimate
    /// ([`GradientEstimator::reuse_batch`]). Still L estimates (and L·n per-datum gradients)
    /// per iteration, but only one minibatch draw.
    pub shared_minibatch: bool,
}

/// SGHMC hyperparameters other than η and L (defaults: reference §2.3, MAMBA App. D.1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SghmcSettings {
    /// Friction α; 0.01.
    pub friction: f64,
    /// Scalar noise-estimate term β̂, 0 ≤ β̂ < α; 0.
    pub noise_estimate: f64,
    /// Temperature T > 0; 1.
    pub temperature: f64,
    /// Compatibility options.
    pub options: SghmcOptions,
}

impl Default for SghmcSettings {
    fn default() -> Self {
        Self {
            friction: 0.01,
            noise_estimate: 0.0,
            temperature: 1.0,
            options: SghmcOptions::default(),
        }
    }
}

/// Stochastic-gradient Hamiltonian Monte Carlo with momentum resampling.
#[derive(Debug, Clone)]
pub struct Sghmc {
    eta: f64,
    inner_steps: usize,
    settings: SghmcSettings,
    /// √(η·T): sd of the resampled momentum.
    momentum_sd: f64,
    /// √(2(α − β̂)ηT): sd of the momentum noise per inner step.
    noise_sd: f64,
    /// v.
    v: Vec<f64>,
    state: ChainState,
}

impl Sghmc {
    /// SGHMC with learning rate η (catalogue dt; η = h², §1.4), `inner_steps` = L ≥ 1 and
    /// `settings`.
    pub fn new(
        eta: f64,
        inner_steps: usize,
        settings: SghmcSettings,
    ) -> Result<Self, SamplerError> {
        check_step(eta)?;
        if inner_steps == 0 {
            return Err(SamplerError::BadParameter {
                name: "inner steps L",
                value: 0.0,
                requirement: "must be at least 1",
            });
        }
        check_temperature(settings.temperature)?;
        let alpha = check_range(
            "friction α",
            settings.friction,
            0.0,
            f64::MAX,
            "must be finite and > 0",
        )?;
        let beta = check_range(
            "noise estimate β̂",
            settings.noise_estimate,
            0.0,
            f64::MAX,
            "must be finite and ≥ 0",
        )?;
        if alpha <= beta {
            return Err(SamplerError::BadParameter {
                name: "friction α",
                value: alpha,
                requirement: "must exceed the noise estimate β̂",
            });
        }
        let mut sghmc = Self {
            eta: 0.0,
            inner_steps,
            settings,
            momentum_sd: 0.0,
            noise_sd: 0.0,
            v: Vec::new(),
            state: ChainState::default(),
        };
        sghmc.set_step_size(eta)?;
        Ok(sghmc)
    }

    /// η.
    pub fn eta(&self) -> f64 {
        self.eta
    }

    /// L, the inner steps per sample.
    pub fn inner_steps(&self) -> usize {
        self.inner_steps
    }

    /// The settings in use.
    pub fn settings(&self) -> &SghmcSettings {
        &self.settings
    }

    /// The momentum v after the last inner step.
    pub fn momentum(&self) -> &[f64] {
        &self.v
    }
}

crate::persist_fields!(Sghmc { v, state });

impl Sampler for Sghmc {
    crate::checkpoint::state_through_persist!();

    fn name(&self) -> &'static str {
        "sghmc"
    }

    fn start(&mut self, theta0: &[f64], estimator: &mut dyn GradientEstimator, rng: &mut ChainRng) {
        self.v.clear();
        self.v.resize(theta0.len(), 0.0);
        self.state.start(theta0, estimator, rng);
        if self.settings.options.no_momentum_resampling {
            resample_momentum(&mut self.v, self.momentum_sd, rng);
        }
    }

    fn step(&mut self, estimator: &mut dyn GradientEstimator, rng: &mut ChainRng) {
        let (eta, alpha, sd) = (self.eta, self.settings.friction, self.noise_sd);
        let opts = self.settings.options;
        if !opts.no_momentum_resampling {
            resample_momentum(&mut self.v, self.momentum_sd, rng);
        }
        if opts.shared_minibatch {
            estimator.reuse_batch(true);
        }
        let state = &mut self.state;
        for _ in 0..self.inner_steps {
            if opts.gradient_before_position_update {
                // Explicit Euler: θ uses the old v, v uses the gradient cached at the old θ.
                for ((t, v), g) in state.theta.iter_mut().zip(&mut self.v).zip(&state.grad) {
                    *t += *v;
                    *v += eta * g - alpha * *v + sd * standard_normal(rng);
                }
                state.refresh(estimator, rng);
            } else {
                for (t, v) in state.theta.iter_mut().zip(&self.v) {
                    *t += v;
                }
                state.refresh(estimator, rng);
                for (v, g) in self.v.iter_mut().zip(&state.grad) {
                    *v += eta * g - alpha * *v + sd * standard_normal(rng);
                }
            }
        }
        if opts.shared_minibatch {
            estimator.reuse_batch(false);
        }
    }

    fn position(&self) -> &[f64] {
        &self.state.theta
    }

    fn score(&self) -> &[f64] {
        &self.state.grad
    }

    fn estimates_per_step(&self) -> usize {
        self.inner_steps
    }

    /// η.
    fn step_size(&self) -> f64 {
        self.eta
    }

    /// η ← `step`; recomputes the momentum sd √(ηT) and the noise sd √(2(α − β̂)ηT).
    fn set_step_size(&mut self, step: f64) -> Result<(), SamplerError> {
        let eta = check_step(step)?;
        let SghmcSettings {
            friction: alpha,
            noise_estimate: beta,
            temperature: t,
            ..
        } = self.settings;
        self.eta = eta;
        self.momentum_sd = (eta * t).sqrt();
        self.noise_sd = (2.0 * (alpha - beta) * eta * t).sqrt();
        Ok(())
    }
}
