//! Step-size schedules (reference §1.4) and [`Scheduled`], which applies one to any sampler.
//!
//! The iteration counter t = 1, 2, … numbers the iterations since the last
//! [`Sampler::start`]; iteration t uses the step εₜ:
//!
//! - constant: εₜ = ε;
//! - polynomial (Welling & Teh 2011): εₜ = a·(b + t)^(−γ), γ = 0.55 by default;
//! - cyclical (Zhang et al. 2020): M cycles over K iterations, cycle length m = ⌈K/M⌉,
//!   εₜ = (ε₀/2)·(cos(π·((t − 1) mod m)/m) + 1).
//!
//! t starts at 1, so the first step is a·(b + 1)^(−γ), or exactly ε₀ for the cyclical schedule,
//! which restarts at ε₀ every m iterations (SGMCMCJax counts from t = 0, which makes its first
//! cyclical step almost 0). Steps are in the wrapped sampler's own units
//! ([`Sampler::step_size`]: ε, η or h).

use super::{Sampler, SamplerError, check_step};
use crate::estimator::GradientEstimator;
use crate::rng::ChainRng;
use std::f64::consts::PI;

/// A step size as a function of the iteration counter t ≥ 1 (reference §1.4).
///
/// Build one with the validating constructors ([`StepSchedule::constant`],
/// [`StepSchedule::polynomial`], [`StepSchedule::cyclical`]); [`Scheduled::new`] validates a
/// value written out directly.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(tag = "kind", rename_all = "snake_case"))]
pub enum StepSchedule {
    /// εₜ = `step`.
    Constant {
        /// The step, finite and > 0.
        step: f64,
    },
    /// εₜ = a·(b + t)^(−γ).
    Polynomial {
        /// Scale a, finite and > 0 (the first step is a·(b + 1)^(−γ)).
        a: f64,
        /// Offset b, finite and ≥ 0.
        b: f64,
        /// Decay exponent γ ∈ (0, 1]; 0.55 by default. γ ∈ (0.5, 1] gives Σεₜ = ∞ and
        /// Σεₜ² < ∞ (Welling & Teh 2011).
        gamma: f64,
    },
    /// εₜ = (ε₀/2)·(cos(π·((t − 1) mod m)/m) + 1) with m = ⌈K/M⌉ (Zhang et al. 2020).
    Cyclical {
        /// ε₀, the step at the start of every cycle; finite and > 0.
        initial: f64,
        /// M, the number of cycles, 1 ≤ M ≤ K.
        cycles: usize,
        /// K, the iterations the M cycles cover (the run's total iterations); past K the
        /// cycles go on with the same length m.
        iterations: usize,
    },
}

/// The default decay exponent γ of the polynomial schedule (Welling & Teh 2011).
pub const DEFAULT_GAMMA: f64 = 0.55;

fn bad(name: &'static str, value: f64, requirement: &'static str) -> SamplerError {
    SamplerError::BadParameter {
        name,
        value,
        requirement,
    }
}

fn positive(name: &'static str, value: f64) -> Result<(), SamplerError> {
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(bad(name, value, "must be finite and > 0"))
    }
}

impl StepSchedule {
    /// εₜ = `step` for every t.
    pub fn constant(step: f64) -> Result<Self, SamplerError> {
        check_step(step)?;
        Ok(Self::Constant { step })
    }

    /// εₜ = a·(b + t)^(−γ); errors unless a > 0, b ≥ 0 (both finite) and 0 < γ ≤ 1.
    pub fn polynomial(a: f64, b: f64, gamma: f64) -> Result<Self, SamplerError> {
        let s = Self::Polynomial { a, b, gamma };
        s.validate()?;
        Ok(s)
    }

    /// M = `cycles` cosine cycles over K = `iterations` iterations, each starting at ε₀ =
    /// `initial`; errors unless ε₀ is finite and > 0 and 1 ≤ M ≤ K.
    pub fn cyclical(initial: f64, cycles: usize, iterations: usize) -> Result<Self, SamplerError> {
        let s = Self::Cyclical {
            initial,
            cycles,
            iterations,
        };
        s.validate()?;
        Ok(s)
    }

    /// Check the parameters (what the constructors check).
    pub fn validate(&self) -> Result<(), SamplerError> {
        match *self {
            Self::Constant { step } => check_step(step).map(|_| ()),
            Self::Polynomial { a, b, gamma } => {
                // b and γ first: a default a is computed from them.
                if !(b.is_finite() && b >= 0.0) {
                    return Err(bad("polynomial schedule b", b, "must be finite and ≥ 0"));
                }
                if !(gamma > 0.0 && gamma <= 1.0) {
                    return Err(bad("polynomial schedule γ", gamma, "must be in (0, 1]"));
                }
                positive("polynomial schedule a", a)
            }
            Self::Cyclical {
                initial,
                cycles,
                iterations,
            } => {
                positive("cyclical schedule ε₀ (the sampler's step)", initial)?;
                if iterations == 0 {
                    return Err(bad(
                        "cyclical schedule iterations K",
                        0.0,
                        "must be at least 1",
                    ));
                }
                if cycles == 0 || cycles > iterations {
                    return Err(bad(
                        "cyclical schedule cycles M",
                        cycles as f64,
                        "must be at least 1 and at most the number of iterations K",
                    ));
                }
                Ok(())
            }
        }
    }

    /// The cycle length m = ⌈K/M⌉ of a cyclical schedule.
    pub fn cycle_length(&self) -> Option<usize> {
        match *self {
            Self::Cyclical {
                cycles, iterations, ..
            } => Some(iterations.div_ceil(cycles.max(1))),
            _ => None,
        }
    }

    /// εₜ for iteration t ≥ 1 (t = 0 is read as 1). Never below the smallest positive normal
    /// f64, so every value is a valid step even where the formula underflows.
    #[inline]
    pub fn at(&self, t: usize) -> f64 {
        let t = t.max(1);
        let step = match *self {
            Self::Constant { step } => step,
            Self::Polynomial { a, b, gamma } => a * (b + t as f64).powf(-gamma),
            Self::Cyclical {
                initial,
                cycles,
                iterations,
            } => {
                let m = iterations.div_ceil(cycles.max(1)).max(1);
                let k = (t - 1) % m;
                initial / 2.0 * ((PI * k as f64 / m as f64).cos() + 1.0)
            }
        };
        step.max(f64::MIN_POSITIVE)
    }
}

/// A sampler whose step follows a [`StepSchedule`]: before iteration t (counted from 1 since
/// the last [`Sampler::start`]) it sets the inner sampler's step to εₜ with
/// [`Sampler::set_step_size`]. `start` resets t and also sets ε₁, so anything the inner sampler
/// draws at start from its step (SGNHT's v₀ ~ N(0, ηT·I)) uses ε₁. For SGHMC an iteration is
/// one outer iteration (all L inner steps share εₜ).
#[derive(Debug, Clone)]
pub struct Scheduled<S> {
    inner: S,
    schedule: StepSchedule,
    t: usize,
}

impl<S: Sampler> Scheduled<S> {
    /// `inner` driven by `schedule` (validated here).
    pub fn new(inner: S, schedule: StepSchedule) -> Result<Self, SamplerError> {
        schedule.validate()?;
        Ok(Self {
            inner,
            schedule,
            t: 0,
        })
    }

    /// The wrapped sampler.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The wrapped sampler, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }

    /// The schedule.
    pub fn schedule(&self) -> &StepSchedule {
        &self.schedule
    }

    /// t of the last iteration (0 right after a start).
    pub fn iteration(&self) -> usize {
        self.t
    }

    #[inline]
    fn apply(&mut self, t: usize) {
        // `at` is finite and > 0, which every sampler of this crate accepts; a sampler that
        // refuses a step keeps its previous one.
        let _ = self.inner.set_step_size(self.schedule.at(t));
    }
}

impl<S: Sampler> Sampler for Scheduled<S> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    /// The iteration count (the next step's size follows from it) and the inner sampler's state.
    fn save_state(&self, w: &mut crate::checkpoint::StateWriter) {
        w.nested(2);
        w.field("t", &self.t);
        w.field_with("inner", |w| self.inner.save_state(w));
    }

    fn load_state(
        &mut self,
        r: &mut crate::checkpoint::StateReader<'_>,
    ) -> Result<(), crate::checkpoint::StateError> {
        r.nested(2)?;
        r.field("t", &mut self.t)?;
        r.field_with("inner", |r| self.inner.load_state(r))
    }

    fn start(&mut self, theta0: &[f64], estimator: &mut dyn GradientEstimator, rng: &mut ChainRng) {
        self.t = 0;
        self.apply(1);
        self.inner.start(theta0, estimator, rng);
    }

    #[inline]
    fn step(&mut self, estimator: &mut dyn GradientEstimator, rng: &mut ChainRng) {
        self.t += 1;
        self.apply(self.t);
        self.inner.step(estimator, rng);
    }

    fn position(&self) -> &[f64] {
        self.inner.position()
    }

    fn score(&self) -> &[f64] {
        self.inner.score()
    }

    fn estimates_per_step(&self) -> usize {
        self.inner.estimates_per_step()
    }

    /// The inner sampler's current step (εₜ of the last iteration, or ε₁ after a start).
    fn step_size(&self) -> f64 {
        self.inner.step_size()
    }

    /// Sets the inner sampler's step until the next iteration, which applies the schedule again.
    fn set_step_size(&mut self, step: f64) -> Result<(), SamplerError> {
        self.inner.set_step_size(step)
    }

    fn statistics(&self) -> Option<super::SamplerStatistics> {
        self.inner.statistics()
    }

    fn thermostat_value(&self) -> Option<f64> {
        self.inner.thermostat_value()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_is_constant() {
        let s = StepSchedule::constant(0.3).unwrap();
        for t in [1, 2, 1000, usize::MAX] {
            assert_eq!(s.at(t), 0.3);
        }
    }

    #[test]
    fn polynomial_first_value_and_decay() {
        let (a, b, gamma) = (1e-3, 10.0, 0.55);
        let s = StepSchedule::polynomial(a, b, gamma).unwrap();
        // t = 1 is the first step: a·(b + 1)^(−γ).
        assert_eq!(s.at(1), a * 11f64.powf(-gamma));
        assert_eq!(s.at(0), s.at(1));
        // εₜ·(b + t)^γ = a for every t, and the sequence decreases strictly.
        let mut prev = f64::INFINITY;
        for t in [1usize, 2, 3, 10, 100, 10_000, 1_000_000] {
            let e = s.at(t);
            let scaled = e * (b + t as f64).powf(gamma);
            assert!((scaled - a).abs() <= 1e-14 * a, "t = {t}: {scaled}");
            assert!(e < prev, "t = {t}");
            prev = e;
        }
        // The ratio over a doubling of b + t is 2^(−γ).
        let r = s.at(2 * 1000 - 10) / s.at(1000 - 10);
        assert!((r - 2f64.powf(-gamma)).abs() < 1e-14, "{r}");
        // b = 0, γ = 1: a/t.
        let s = StepSchedule::polynomial(2.0, 0.0, 1.0).unwrap();
        assert_eq!(s.at(1), 2.0);
        assert_eq!(s.at(4), 0.5);
    }

    #[test]
    fn cyclical_starts_at_eps0_and_restarts_every_m_iterations() {
        let eps0 = 0.02;
        // K = 10, M = 3: m = ⌈10/3⌉ = 4.
        let s = StepSchedule::cyclical(eps0, 3, 10).unwrap();
        assert_eq!(s.cycle_length(), Some(4));
        assert_eq!(s.at(1), eps0);
        // Within a cycle: (ε₀/2)(cos(πk/m) + 1), k = 0..m−1, strictly decreasing, > 0.
        let want = [
            eps0,
            eps0 / 2.0 * ((PI / 4.0).cos() + 1.0),
            eps0 / 2.0,
            eps0 / 2.0 * ((3.0 * PI / 4.0).cos() + 1.0),
        ];
        for (k, w) in want.iter().enumerate() {
            assert!((s.at(k + 1) - w).abs() <= 1e-17, "k = {k}");
        }
        assert!(want.windows(2).all(|p| p[1] < p[0]) && want[3] > 0.0);
        // Restarts exactly (bit for bit) every m iterations, also past K.
        for t in 1..=40 {
            assert_eq!(s.at(t + 4), s.at(t), "t = {t}");
        }
        for t in [1, 5, 9, 13] {
            assert_eq!(s.at(t), eps0);
        }
        // M = K: m = 1, every step is ε₀; M = 1: one cycle over all K.
        let s = StepSchedule::cyclical(eps0, 7, 7).unwrap();
        assert!((1..20).all(|t| s.at(t) == eps0));
        let s = StepSchedule::cyclical(eps0, 1, 1000).unwrap();
        assert_eq!(s.cycle_length(), Some(1000));
        assert!((s.at(501) - eps0 / 2.0).abs() < 1e-18);
        assert_eq!(s.at(1001), eps0);
    }

    #[test]
    fn bad_schedules_are_errors_naming_the_parameter() {
        let msg = |r: Result<StepSchedule, SamplerError>| r.unwrap_err().to_string();
        assert!(msg(StepSchedule::constant(0.0)).contains("step size"));
        assert!(msg(StepSchedule::polynomial(-1.0, 0.0, 0.55)).contains("a = -1"));
        assert!(msg(StepSchedule::polynomial(f64::NAN, 0.0, 0.55)).contains("schedule a"));
        assert!(msg(StepSchedule::polynomial(1.0, -2.0, 0.55)).contains("schedule b"));
        assert!(msg(StepSchedule::polynomial(1.0, f64::INFINITY, 0.55)).contains("schedule b"));
        for g in [0.0, -0.5, 1.5, f64::NAN] {
            assert!(
                msg(StepSchedule::polynomial(1.0, 0.0, g)).contains("γ"),
                "{g}"
            );
        }
        assert!(msg(StepSchedule::cyclical(0.0, 1, 10)).contains("ε₀"));
        assert!(msg(StepSchedule::cyclical(1.0, 0, 10)).contains("cycles M"));
        assert!(msg(StepSchedule::cyclical(1.0, 11, 10)).contains("cycles M = 11"));
        assert!(msg(StepSchedule::cyclical(1.0, 1, 0)).contains("iterations K"));
        // A value written out directly is checked by Scheduled::new.
        let raw = StepSchedule::Polynomial {
            a: 1.0,
            b: 0.0,
            gamma: 2.0,
        };
        let sgld = super::super::Sgld::new(super::super::StepSize::Langevin(0.1), 1.0).unwrap();
        assert!(Scheduled::new(sgld, raw).is_err());
    }

    #[test]
    fn underflow_is_clamped_to_a_valid_step() {
        let s = StepSchedule::polynomial(1e-300, 1e300, 1.0).unwrap();
        assert!(s.at(1) > 0.0);
        let s = StepSchedule::cyclical(f64::MIN_POSITIVE, 1, 1 << 40).unwrap();
        assert!(s.at((1 << 40) - 1) > 0.0);
    }
}
