//! [`ChainKernel`]: a self-contained Markov chain kernel (a sampler with its own gradient
//! estimator, [`SamplerKernel`], or minibatch MH), the unit the runner starts and steps.

use super::{DrawStatistics, Sampler, SamplerStatistics};
use crate::checkpoint::{StateError, StateReader, StateWriter};
use crate::estimator::GradientEstimator;
use crate::rng::ChainRng;
use std::ops::DerefMut;

/// Whether every entry is finite: x·0 is 0 for finite x and NaN for NaN or ±∞, so a
/// branch-free sum decides. The sum runs in [`FINITE_LANES`] independent lanes: one serial
/// floating-point sum cannot be reordered into vectors, and its add latency (≈ 1 ns per entry)
/// cost ≈ 100 µs per iteration at PMF's D = 52,580 (position and score checked).
#[inline]
pub fn all_finite(x: &[f64]) -> bool {
    let mut lanes = [0.0f64; FINITE_LANES];
    let mut chunks = x.chunks_exact(FINITE_LANES);
    for chunk in &mut chunks {
        for (lane, v) in lanes.iter_mut().zip(chunk) {
            *lane += v * 0.0;
        }
    }
    let tail = chunks.remainder().iter().fold(0.0, |acc, v| acc + v * 0.0);
    lanes.iter().sum::<f64>() + tail == 0.0
}

/// Independent partial sums in [`all_finite`]: four AVX-512 registers of f64.
const FINITE_LANES: usize = 32;

/// A self-contained Markov chain kernel that the runner can start anywhere and step with a
/// random stream it is handed: a stochastic-gradient sampler with its gradient estimator
/// ([`SamplerKernel`]), or minibatch Metropolis–Hastings ([`crate::mh::MhKernel`]), which
/// needs no estimator unless its proposal uses gradients.
pub trait ChainKernel {
    /// Start (or restart) the chain at `init`.
    fn start(&mut self, init: &[f64], rng: &mut ChainRng);
    /// One transition.
    fn step(&mut self, rng: &mut ChainRng);
    /// The current position θ.
    fn position(&self) -> &[f64];
    /// Whether the chain's state is finite (default: θ).
    fn is_finite(&self) -> bool {
        all_finite(self.position())
    }
    /// Per-datum gradient evaluations since the last start (for
    /// [`crate::runner::Budget::GradientEvaluations`]; default 0).
    fn gradient_evaluations(&self) -> u64 {
        0
    }
    /// The state at the current draw for `sample_stats` (step, thermostat, MH acceptance);
    /// nothing by default.
    fn draw_statistics(&self) -> DrawStatistics {
        DrawStatistics::default()
    }
    /// The kernel's own counts for the run summary (an MH test's outcomes).
    fn statistics(&self) -> Option<SamplerStatistics> {
        None
    }
    /// Appends the kernel's whole state between steps to a checkpoint ([`crate::checkpoint`]);
    /// with the chain's stream and counters, enough to continue exactly. Default: not
    /// supported (the save fails).
    fn save_state(&self, w: &mut StateWriter) {
        w.unsupported("this kernel");
    }
    /// Restores what [`ChainKernel::save_state`] wrote, in place of a start. Default: not
    /// supported.
    fn load_state(&mut self, _r: &mut StateReader<'_>) -> Result<(), StateError> {
        Err(StateError::Unsupported("this kernel".into()))
    }
}

/// A sampler with its gradient estimator as a [`ChainKernel`]: a start restarts the estimator
/// and then the sampler at θ₀; a step is `sampler.step(estimator, rng)`; the state is finite
/// when θ and the recorded score are. `P` owns or borrows the sampler (`Box<dyn Sampler>`,
/// `&mut S`), `Q` the estimator.
pub struct SamplerKernel<P, Q> {
    sampler: P,
    estimator: Q,
    /// Evaluations of the start and of every step so far (without the estimator's extras).
    counted: u64,
    /// Evaluations of one step (fixed at the start).
    per_step: u64,
}

impl<P, Q> SamplerKernel<P, Q> {
    /// `sampler` driven by `estimator`.
    pub fn new(sampler: P, estimator: Q) -> Self {
        Self {
            sampler,
            estimator,
            counted: 0,
            per_step: 0,
        }
    }

    /// The sampler (as owned or borrowed).
    pub fn sampler(&self) -> &P {
        &self.sampler
    }
}

impl<'e, P, Q> ChainKernel for SamplerKernel<P, Q>
where
    P: DerefMut,
    P::Target: Sampler,
    Q: DerefMut<Target = dyn GradientEstimator + 'e>,
{
    fn start(&mut self, init: &[f64], rng: &mut ChainRng) {
        let per_estimate = self.estimator.cost_per_estimate() as u64;
        self.counted = per_estimate;
        self.per_step = self.sampler.estimates_per_step() as u64 * per_estimate;
        self.estimator.restart(init);
        self.sampler.start(init, &mut *self.estimator, rng);
    }
    fn step(&mut self, rng: &mut ChainRng) {
        self.sampler.step(&mut *self.estimator, rng);
        self.counted += self.per_step;
    }
    fn position(&self) -> &[f64] {
        self.sampler.position()
    }
    fn is_finite(&self) -> bool {
        all_finite(self.sampler.position()) && all_finite(self.sampler.score())
    }
    fn gradient_evaluations(&self) -> u64 {
        self.counted + self.estimator.extra_evaluations_since_restart()
    }
    fn statistics(&self) -> Option<SamplerStatistics> {
        self.sampler.statistics()
    }
    /// The evaluation counters, the sampler's state and the estimator's.
    fn save_state(&self, w: &mut StateWriter) {
        w.nested(4);
        w.field("counted", &self.counted);
        w.field("per_step", &self.per_step);
        w.field_with("sampler", |w| self.sampler.save_state(w));
        w.field_with("estimator", |w| self.estimator.save_state(w));
    }
    fn load_state(&mut self, r: &mut StateReader<'_>) -> Result<(), StateError> {
        r.nested(4)?;
        r.field("counted", &mut self.counted)?;
        r.field("per_step", &mut self.per_step)?;
        r.field_with("sampler", |r| self.sampler.load_state(r))?;
        r.field_with("estimator", |r| self.estimator.load_state(r))
    }
    fn draw_statistics(&self) -> DrawStatistics {
        DrawStatistics {
            step_size: Some(self.sampler.step_size()),
            thermostat: self.sampler.thermostat_value(),
            accepted: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::all_finite;

    /// A NaN or ±∞ at any position (inside the lane chunks or in the tail) is found.
    #[test]
    fn all_finite_finds_a_bad_entry_anywhere() {
        for len in [0usize, 1, 31, 32, 33, 100, 1000] {
            let mut x: Vec<f64> = (0..len).map(|i| (i as f64 - 50.0) * 1e300).collect();
            assert!(all_finite(&x), "len {len}");
            for i in 0..len {
                for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
                    let keep = x[i];
                    x[i] = bad;
                    assert!(!all_finite(&x), "len {len}, {bad} at {i}");
                    x[i] = keep;
                }
            }
        }
    }
}
