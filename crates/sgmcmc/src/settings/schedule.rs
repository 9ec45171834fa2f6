//! [`ScheduleSettings`]: a step-size schedule as a serialisable value, resolved against the
//! sampler's step and the run's length into a [`StepSchedule`].

use super::SettingsError;
use crate::sampler::StepSchedule;

/// A step-size schedule (reference §1.4) as the `[sampler]` table writes it, e.g.
/// `schedule = { kind = "polynomial", a = 1e-4, b = 10, gamma = 0.55 }` or
/// `schedule = { kind = "cyclical", cycles = 4 }`. Steps are in the sampler's own units (ε for
/// SGLD/pSGLD even when `welling_teh_step` or `catalogue_dt` was given, η for SGHMC/SGNHT, h
/// for BAOAB/BADODAB); t counts iterations from 1, burn-in included.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)
)]
pub enum ScheduleSettings {
    /// εₜ = the sampler's step (the same as no schedule).
    Constant,
    /// εₜ = a·(b + t)^(−γ).
    Polynomial {
        /// Scale a > 0; default: the sampler's step·(b + 1)^γ, so that the first step is the
        /// sampler's step. When given, it replaces the sampler's step.
        #[cfg_attr(
            feature = "serde",
            serde(default, skip_serializing_if = "Option::is_none")
        )]
        a: Option<f64>,
        /// Offset b ≥ 0.
        #[cfg_attr(feature = "serde", serde(default))]
        b: f64,
        /// Exponent γ ∈ (0, 1].
        #[cfg_attr(feature = "serde", serde(default = "default_gamma"))]
        gamma: f64,
    },
    /// M cosine cycles over K iterations, each starting at ε₀ = the sampler's step:
    /// εₜ = (ε₀/2)·(cos(π·((t − 1) mod m)/m) + 1), m = ⌈K/M⌉.
    Cyclical {
        /// M ≥ 1.
        cycles: usize,
        /// K; default: the run's total iterations (burn-in + iterations). Required with
        /// `budget_seconds`.
        #[cfg_attr(
            feature = "serde",
            serde(default, skip_serializing_if = "Option::is_none")
        )]
        iterations: Option<usize>,
    },
}

#[cfg(feature = "serde")]
fn default_gamma() -> f64 {
    crate::sampler::DEFAULT_GAMMA
}

impl ScheduleSettings {
    /// The schedule with its defaults filled in. `step` is the sampler's step in its own units
    /// ([`crate::sampler::Sampler::step_size`]): the constant step, the cyclical ε₀, and the
    /// polynomial a = step·(b + 1)^γ when `a` is not given. A cyclical schedule without
    /// `iterations` covers `total_iterations` (K = burn-in + iterations), which a wall-clock
    /// budget does not fix (`None`): that is an error naming the fix.
    pub fn resolve(
        &self,
        step: f64,
        total_iterations: Option<usize>,
    ) -> Result<StepSchedule, SettingsError> {
        let resolved = match *self {
            ScheduleSettings::Constant => StepSchedule::constant(step),
            ScheduleSettings::Polynomial { a, b, gamma } => {
                let a = a.unwrap_or_else(|| step * (b + 1.0).powf(gamma));
                StepSchedule::polynomial(a, b, gamma)
            }
            ScheduleSettings::Cyclical { cycles, iterations } => {
                let k = iterations
                    .or(total_iterations)
                    .ok_or(SettingsError::CyclicalNeedsIterations)?;
                StepSchedule::cyclical(step, cycles, k)
            }
        };
        resolved.map_err(SettingsError::Schedule)
    }
}
