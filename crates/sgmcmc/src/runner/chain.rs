//! [`drive_chain`]: the one loop that steps a sampler. The parallel runner
//! ([`super::run_until`]) and the tuner's arm rounds ([`crate::tuning::Arm::run_round`]) both
//! run their chains through it, and watch them through a [`ChainObserver`].

use super::budget::{Budget, BudgetClock};
use crate::estimator::GradientEstimator;
use crate::io::SinkError;
use crate::rng::ChainRng;
use crate::sampler::Sampler;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};

/// How long one chain runs and which iterations it keeps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChainPlan {
    /// When the chain stops.
    pub budget: Budget,
    /// Iterations discarded first.
    pub burn_in: usize,
    /// Keep every `thin`-th iteration after burn-in (≥ 1).
    pub thin: usize,
}

/// Watches one chain from the thread that runs it. `S` is the sampler's type, so an observer
/// can read a concrete sampler's own state (a thermostat, an MH test's counts); the runner's
/// observers work with any `S`.
pub trait ChainObserver<S: ?Sized> {
    /// After the sampler started at θ₀ (iteration 0), if its state is finite.
    fn started(&mut self, _sampler: &S) {}
    /// A kept draw (after burn-in, every `thin`-th iteration): the sampler's position θₜ and
    /// the score estimate ĝₜ it recorded there (reference §2.0).
    fn kept(&mut self, sampler: &S) -> Result<(), SinkError>;
    /// After every iteration whose state is finite (`iteration` from 1, burn-in included), after
    /// [`ChainObserver::kept`]; `Break` ends the chain there.
    fn iterated(&mut self, _iteration: usize, _sampler: &S) -> ControlFlow<()> {
        ControlFlow::Continue(())
    }
}

/// A chain whose state became non-finite.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Divergence {
    /// Iteration (1-based, burn-in included) that produced the non-finite state; 0 = at start.
    pub iteration: usize,
    /// The last state that was finite.
    pub last_finite_state: Vec<f64>,
}

/// What [`drive_chain`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainOutcome {
    /// Iterations run (burn-in included).
    pub iterations: usize,
    /// Draws kept.
    pub draws: usize,
    /// Per-datum gradient evaluations spent (as [`Budget::GradientEvaluations`] counts them).
    pub gradient_evaluations: u64,
    /// Set if the state became non-finite (the chain stopped there).
    pub divergence: Option<Divergence>,
    /// The stop flag ended the chain before its budget.
    pub interrupted: bool,
    /// The observer ended the chain before its budget.
    pub stopped_by_observer: bool,
    /// The last finite state: where the chain ended, or the state before it diverged.
    pub last_finite_state: Vec<f64>,
}

/// Whether every entry is finite: x·0 is 0 for finite x and NaN for NaN or ±∞, so one
/// branch-free sum decides (no early exit, vectorisable).
#[inline]
fn all_finite(x: &[f64]) -> bool {
    x.iter().fold(0.0, |acc, v| acc + v * 0.0) == 0.0
}

/// Run one chain from `init`: restart `estimator` and `sampler` there, then step until `plan`'s
/// budget is spent, `stop` is set (both checked at every iteration boundary) or `observer`
/// ends it, handing every kept draw to `observer`. A non-finite state (at the start or after a step) stops the chain and is
/// reported with the last finite state; draws before it are kept. The only error is the
/// observer's (storage).
pub fn drive_chain<S: Sampler + ?Sized>(
    sampler: &mut S,
    estimator: &mut dyn GradientEstimator,
    rng: &mut ChainRng,
    init: &[f64],
    plan: &ChainPlan,
    observer: &mut dyn ChainObserver<S>,
    stop: &AtomicBool,
) -> Result<ChainOutcome, SinkError> {
    let thin = plan.thin.max(1);
    let mut clock = BudgetClock::start(plan.budget, plan.burn_in);
    let per_estimate = estimator.cost_per_estimate() as u64;
    let per_step = sampler.estimates_per_step() as u64 * per_estimate;
    let mut outcome = ChainOutcome {
        iterations: 0,
        draws: 0,
        gradient_evaluations: per_estimate,
        divergence: None,
        interrupted: false,
        stopped_by_observer: false,
        last_finite_state: init.to_vec(),
    };
    estimator.restart(init);
    sampler.start(init, estimator, rng);
    if !all_finite(sampler.position()) || !all_finite(sampler.score()) {
        outcome.divergence = Some(Divergence {
            iteration: 0,
            last_finite_state: outcome.last_finite_state.clone(),
        });
    } else {
        observer.started(sampler);
    }
    while outcome.divergence.is_none() {
        let counted = outcome.gradient_evaluations;
        if clock.spent(outcome.iterations, || {
            counted + estimator.extra_evaluations_since_restart()
        }) {
            break;
        }
        if stop.load(Ordering::Relaxed) {
            outcome.interrupted = true;
            break;
        }
        outcome
            .last_finite_state
            .copy_from_slice(sampler.position());
        sampler.step(estimator, rng);
        outcome.iterations += 1;
        outcome.gradient_evaluations += per_step;
        if !all_finite(sampler.position()) || !all_finite(sampler.score()) {
            outcome.divergence = Some(Divergence {
                iteration: outcome.iterations,
                last_finite_state: outcome.last_finite_state.clone(),
            });
            break;
        }
        if outcome.iterations > plan.burn_in
            && (outcome.iterations - plan.burn_in).is_multiple_of(thin)
        {
            observer.kept(sampler)?;
            outcome.draws += 1;
        }
        if observer.iterated(outcome.iterations, sampler).is_break() {
            outcome.stopped_by_observer = true;
            break;
        }
    }
    if outcome.divergence.is_none() {
        outcome
            .last_finite_state
            .copy_from_slice(sampler.position());
    }
    outcome.gradient_evaluations += estimator.extra_evaluations_since_restart();
    Ok(outcome)
}
