//! Samplers: one iteration of a stochastic-gradient MCMC scheme (reference §2).
//!
//! A sampler owns its chain state (position, cached score estimate, and whatever auxiliary
//! variables its scheme has: momentum, thermostat, preconditioner). Following reference §2.0,
//! it keeps the score estimate at the current position, computed once at [`Sampler::start`],
//! so each iteration emits the pair (θₜ, ĝₜ). The gradient estimator is passed in on every
//! call, so any sampler combines with any estimator, and the runner owns everything else
//! (budgets, burn-in, thinning, storage, divergence checks).

mod badodab;
mod baoab;
mod ccadl;
mod kernel;
mod noise_covariance;
mod psgld;
mod schedule;
mod sghmc;
mod sgld;
mod sgnht;
mod statistics;

pub use badodab::{Badodab, BadodabSettings};
pub use baoab::{Baoab, BaoabSettings};
pub use ccadl::{Ccadl, CcadlOptions, CcadlScheme, CcadlSettings, FULL_COVARIANCE_MAX_DIM};
pub use kernel::{ChainKernel, SamplerKernel, all_finite};
pub use noise_covariance::{CovarianceShape, NoiseCovariance, SymmetricFunction};
pub use psgld::{Psgld, PsgldSettings};
pub use schedule::{DEFAULT_GAMMA, Scheduled, StepSchedule};
pub use sghmc::{Sghmc, SghmcOptions, SghmcSettings};
pub use sgld::Sgld;
pub use sgnht::{Sgnht, SgnhtSettings};
pub use statistics::{DrawStatistics, MhStatistics, SamplerStatistics};

use crate::checkpoint::{StateError, StateReader, StateWriter};
use crate::estimator::GradientEstimator;
use crate::rng::ChainRng;
use rand::RngExt;
use rand_distr::StandardNormal;

/// One stochastic-gradient MCMC scheme.
pub trait Sampler: Send {
    /// Short name (e.g. `"sgld"`).
    fn name(&self) -> &'static str;

    /// (Re)start the chain at `theta0`: auxiliary state is re-initialised as at a fresh start
    /// and the score estimate at `theta0` is computed and cached.
    fn start(&mut self, theta0: &[f64], estimator: &mut dyn GradientEstimator, rng: &mut ChainRng);

    /// One iteration, producing one sample (the new [`Sampler::position`]).
    fn step(&mut self, estimator: &mut dyn GradientEstimator, rng: &mut ChainRng);

    /// The current position θₜ.
    fn position(&self) -> &[f64];

    /// The score estimate recorded at the current position (reference §2.0).
    fn score(&self) -> &[f64];

    /// Score estimates one iteration uses (L for SGHMC; 1 for most schemes).
    fn estimates_per_step(&self) -> usize {
        1
    }

    /// The step the next iteration uses, in the sampler's own units (reference §1.4): ε for
    /// SGLD/pSGLD (the catalogue convention, whichever form the constructor was given), η for
    /// SGHMC/SGNHT, h for BAOAB/BADODAB.
    fn step_size(&self) -> f64;

    /// Use `step` (same units as [`Sampler::step_size`]) from the next iteration on. Every
    /// constant derived from the step (noise sds, O-step coefficients) is recomputed exactly as
    /// the constructor computes it, so a sampler built with step s and one switched to s give
    /// bit-identical chains; no allocation, so a schedule can call it every iteration
    /// ([`Scheduled`]). Errors (and changes nothing) unless `step` is finite and > 0.
    fn set_step_size(&mut self, step: f64) -> Result<(), SamplerError>;

    /// Counts the method keeps about its run (the MH tests' accept/reject/skip outcomes and
    /// data used), for the run summary; `None` for methods with nothing to report.
    fn statistics(&self) -> Option<SamplerStatistics> {
        None
    }

    /// The thermostat of a Nosé–Hoover scheme (SGNHT, BADODAB, CCAdL); `None` for the others.
    fn thermostat_value(&self) -> Option<f64> {
        None
    }

    /// Appends the chain's state between iterations (θ, the cached score, momentum, thermostat,
    /// preconditioner, counters; not the settings, which the run file fixes) to a checkpoint
    /// ([`crate::checkpoint`]). Default: not supported (the save fails).
    fn save_state(&self, w: &mut StateWriter) {
        w.unsupported(self.name());
    }

    /// Restores what [`Sampler::save_state`] wrote. Default: not supported.
    fn load_state(&mut self, _r: &mut StateReader<'_>) -> Result<(), StateError> {
        Err(StateError::Unsupported(self.name().into()))
    }
}

/// A boxed sampler is a sampler (so [`Scheduled`] can wrap a `Box<dyn Sampler>`).
impl<S: Sampler + ?Sized> Sampler for Box<S> {
    fn name(&self) -> &'static str {
        (**self).name()
    }

    fn start(&mut self, theta0: &[f64], estimator: &mut dyn GradientEstimator, rng: &mut ChainRng) {
        (**self).start(theta0, estimator, rng);
    }

    #[inline]
    fn step(&mut self, estimator: &mut dyn GradientEstimator, rng: &mut ChainRng) {
        (**self).step(estimator, rng);
    }

    fn position(&self) -> &[f64] {
        (**self).position()
    }

    fn score(&self) -> &[f64] {
        (**self).score()
    }

    fn estimates_per_step(&self) -> usize {
        (**self).estimates_per_step()
    }

    fn step_size(&self) -> f64 {
        (**self).step_size()
    }

    #[inline]
    fn set_step_size(&mut self, step: f64) -> Result<(), SamplerError> {
        (**self).set_step_size(step)
    }

    fn save_state(&self, w: &mut StateWriter) {
        (**self).save_state(w);
    }

    fn load_state(&mut self, r: &mut StateReader<'_>) -> Result<(), StateError> {
        (**self).load_state(r)
    }

    fn statistics(&self) -> Option<SamplerStatistics> {
        (**self).statistics()
    }

    fn thermostat_value(&self) -> Option<f64> {
        (**self).thermostat_value()
    }
}

/// Errors in sampler settings.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SamplerError {
    /// A step size that is not finite and > 0.
    #[error("step size must be finite and > 0, got {0}")]
    BadStepSize(f64),
    /// A temperature that is not finite and > 0.
    #[error("temperature must be finite and > 0, got {0}")]
    BadTemperature(f64),
    /// Any other hyperparameter outside its range.
    #[error("{name} = {value} is invalid: {requirement}")]
    BadParameter {
        /// The parameter (as the reference names it).
        name: &'static str,
        /// The value given.
        value: f64,
        /// What it must satisfy.
        requirement: &'static str,
    },
    /// An invalid setting, described in full.
    #[error("{0}")]
    Invalid(String),
}

/// The step of an overdamped sampler, in either published convention (reference §1.4).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StepSize {
    /// ε, the Langevin time increment of the catalogue form θ + ε·g + √(2ε)·ξ.
    Langevin(f64),
    /// h of Welling & Teh (2011), θ + (h/2)·g + √h·ξ; the same scheme with ε = h/2.
    WellingTeh(f64),
}

impl StepSize {
    /// ε in the library's (catalogue) convention, validated.
    pub fn epsilon(self) -> Result<f64, SamplerError> {
        let (raw, eps) = match self {
            StepSize::Langevin(e) => (e, e),
            StepSize::WellingTeh(h) => (h, h / 2.0),
        };
        if raw.is_finite() && raw > 0.0 {
            Ok(eps)
        } else {
            Err(SamplerError::BadStepSize(raw))
        }
    }
}

/// Check a step size (finite, > 0).
pub(crate) fn check_step(step: f64) -> Result<f64, SamplerError> {
    if step.is_finite() && step > 0.0 {
        Ok(step)
    } else {
        Err(SamplerError::BadStepSize(step))
    }
}

/// Check a temperature T (finite, > 0).
pub(crate) fn check_temperature(t: f64) -> Result<f64, SamplerError> {
    if t.is_finite() && t > 0.0 {
        Ok(t)
    } else {
        Err(SamplerError::BadTemperature(t))
    }
}

/// Check that `value` lies in [`lo`, `hi`] (and is not NaN); `requirement` words the range.
pub(crate) fn check_range(
    name: &'static str,
    value: f64,
    lo: f64,
    hi: f64,
    requirement: &'static str,
) -> Result<f64, SamplerError> {
    if (lo..=hi).contains(&value) {
        Ok(value)
    } else {
        Err(SamplerError::BadParameter {
            name,
            value,
            requirement,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Shared update pieces for implementing samplers. Each draws ξ ~ N(0, 1) coordinate by coordinate, in index order, from
// the chain's stream, so schemes built from them stay bit-reproducible (reference §1.5).
// ---------------------------------------------------------------------------------------------

/// One ξ ~ N(0, 1) from the chain's stream.
#[inline(always)]
pub fn standard_normal(rng: &mut ChainRng) -> f64 {
    rng.sample(StandardNormal)
}

/// Euler–Maruyama step with scalar noise: xᵢ ← xᵢ + scale·driftᵢ + sd·ξᵢ (SGLD §2.1; the
/// position/momentum kicks of the momentum schemes).
#[inline]
pub fn add_drift_and_noise(x: &mut [f64], drift: &[f64], scale: f64, sd: f64, rng: &mut ChainRng) {
    debug_assert_eq!(x.len(), drift.len());
    for (x, d) in x.iter_mut().zip(drift) {
        let xi = standard_normal(rng);
        *x += scale * d + sd * xi;
    }
}

/// xᵢ ← xᵢ + sd·ξᵢ: add N(0, sd²·I) noise.
#[inline]
pub fn add_scaled_noise(x: &mut [f64], sd: f64, rng: &mut ChainRng) {
    for x in x.iter_mut() {
        *x += sd * standard_normal(rng);
    }
}

/// Momentum refresh v ~ N(0, sd²·I), e.g. SGHMC's v ~ N(0, η·T·I) (§2.3) or a BAOAB/BADODAB
/// initial momentum.
#[inline]
pub fn resample_momentum(v: &mut [f64], sd: f64, rng: &mut ChainRng) {
    for v in v.iter_mut() {
        *v = sd * standard_normal(rng);
    }
}

/// Kick: vᵢ ← vᵢ + c·gᵢ (the B half-step of BAOAB/BADODAB with c = h/2; SGNHT's η·g).
#[inline]
pub fn kick(v: &mut [f64], g: &[f64], c: f64) {
    debug_assert_eq!(v.len(), g.len());
    for (v, g) in v.iter_mut().zip(g) {
        *v += c * g;
    }
}

/// Drift: θᵢ ← θᵢ + c·vᵢ (the A step with c = h/2; SGNHT's θ + v with c = 1).
#[inline]
pub fn drift(theta: &mut [f64], v: &[f64], c: f64) {
    debug_assert_eq!(theta.len(), v.len());
    for (t, v) in theta.iter_mut().zip(v) {
        *t += c * v;
    }
}

/// Ornstein–Uhlenbeck (O) step: vᵢ ← c·vᵢ + s·ξᵢ.
#[inline]
pub fn ou_step(v: &mut [f64], c: f64, s: f64, rng: &mut ChainRng) {
    for v in v.iter_mut() {
        *v = c * *v + s * standard_normal(rng);
    }
}

/// vᵀv (twice the kinetic energy at unit mass), as the thermostats use it.
#[inline]
pub fn kinetic(v: &[f64]) -> f64 {
    v.iter().map(|v| v * v).sum()
}

/// Position and cached score estimate, the state every sampler has.
#[derive(Debug, Clone, Default)]
pub struct ChainState {
    /// θₜ.
    pub theta: Vec<f64>,
    /// ĝ(θₜ).
    pub grad: Vec<f64>,
}

crate::persist_fields!(ChainState { theta, grad });

impl ChainState {
    /// Set θ ← `theta0` and compute the cached estimate.
    pub fn start(
        &mut self,
        theta0: &[f64],
        estimator: &mut dyn GradientEstimator,
        rng: &mut ChainRng,
    ) {
        self.theta.clear();
        self.theta.extend_from_slice(theta0);
        self.grad.resize(theta0.len(), 0.0);
        self.refresh(estimator, rng);
    }

    /// Recompute the cached estimate at the current θ.
    #[inline]
    pub fn refresh(&mut self, estimator: &mut dyn GradientEstimator, rng: &mut ChainRng) {
        estimator.estimate(&self.theta, &mut self.grad, rng);
    }
}
