//! [`drive`]: the one loop that steps a Markov chain (a [`Transition`]): budgets, the stop
//! flag, burn-in and thinning, divergence detection, and the [`ChainObserver`] hooks.
//! [`drive_chain`] runs a sampler through it; the parallel runner ([`super::run_until`]), the
//! tuner's arm rounds ([`crate::tuning::Arm::run_round`]), coreset MCMC
//! ([`crate::coreset::run_coreset_mcmc`]), the experiments and the benches all do.

use super::budget::{Budget, BudgetClock};
use crate::estimator::GradientEstimator;
use crate::io::SinkError;
use crate::rng::ChainRng;
use crate::sampler::{ChainKernel, Sampler, SamplerKernel, all_finite};
use std::convert::Infallible;
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
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Divergence {
    /// Iteration (1-based, burn-in included) that produced the non-finite state; 0 = at start.
    pub iteration: usize,
    /// The last state that was finite.
    pub last_finite_state: Vec<f64>,
}

/// What [`drive`] (or [`drive_chain`]) did. `F` is the transition's failure type
/// ([`Transition::Failure`]); a sampler's steps cannot fail.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainOutcome<F = Infallible> {
    /// Iterations completed (burn-in included; a failed step is not counted).
    pub iterations: usize,
    /// Draws kept.
    pub draws: usize,
    /// Per-datum gradient evaluations spent (as [`Budget::GradientEvaluations`] counts them).
    pub gradient_evaluations: u64,
    /// Set if the state became non-finite (the chain stopped there).
    pub divergence: Option<Divergence>,
    /// The step that failed, if one did (the chain stopped there).
    pub failure: Option<F>,
    /// The stop flag ended the chain before its budget.
    pub interrupted: bool,
    /// The observer ended the chain before its budget.
    pub stopped_by_observer: bool,
    /// The last finite state: where the chain ended, or the state before it diverged.
    pub last_finite_state: Vec<f64>,
}

/// One transition of a Markov chain whose state and randomness it holds: what [`drive`]
/// advances. A stochastic-gradient sampler with its estimator and stream is one
/// ([`drive_chain`] wraps it); coreset MCMC's K lockstep kernels with their weights are another
/// (`coreset::run_coreset_mcmc`).
pub trait Transition {
    /// Why a step could not complete (a kernel's own failure; [`Infallible`] if none).
    type Failure;
    /// The chain's position (what a divergence reports as the last finite state).
    fn position(&self) -> &[f64];
    /// Whether the whole state is finite (default: the position).
    fn is_finite(&self) -> bool {
        all_finite(self.position())
    }
    /// One transition from the current state.
    fn step(&mut self) -> Result<(), Self::Failure>;
    /// Per-datum gradient evaluations since the chain started (for
    /// [`Budget::GradientEvaluations`]; default 0).
    fn gradient_evaluations(&self) -> u64 {
        0
    }
}

/// The loop: step `transition` (already started) until `plan`'s budget is spent, `stop` is set
/// (both checked at every iteration boundary), `observer` ends it, a step fails or the state
/// becomes non-finite (at the start or after a step; reported with the last finite position).
/// Every kept draw (after burn-in, every `thin`-th iteration) goes to `observer`; draws before
/// a divergence or failure are kept. The only error is the observer's (storage).
pub fn drive<T: Transition + ?Sized>(
    transition: &mut T,
    plan: &ChainPlan,
    observer: &mut dyn ChainObserver<T>,
    stop: &AtomicBool,
) -> Result<ChainOutcome<T::Failure>, SinkError> {
    drive_from(transition, plan, ChainProgress::default(), observer, stop)
}

/// How far a chain had come: iterations done (burn-in included) and draws kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChainProgress {
    /// Iterations completed.
    pub iterations: usize,
    /// Draws kept.
    pub draws: usize,
}

/// [`drive`] a chain restored from a checkpoint taken after `done`: counting, burn-in,
/// thinning and the iteration budget go on from there, so the kept draws are those an
/// uninterrupted run keeps after that point.
pub fn drive_from<T: Transition + ?Sized>(
    transition: &mut T,
    plan: &ChainPlan,
    done: ChainProgress,
    observer: &mut dyn ChainObserver<T>,
    stop: &AtomicBool,
) -> Result<ChainOutcome<T::Failure>, SinkError> {
    let thin = plan.thin.max(1);
    let mut clock = BudgetClock::start(plan.budget, plan.burn_in);
    let mut outcome = ChainOutcome {
        iterations: done.iterations,
        draws: done.draws,
        gradient_evaluations: 0,
        divergence: None,
        failure: None,
        interrupted: false,
        stopped_by_observer: false,
        last_finite_state: transition.position().to_vec(),
    };
    if !transition.is_finite() {
        outcome.divergence = Some(Divergence {
            iteration: 0,
            last_finite_state: outcome.last_finite_state.clone(),
        });
    } else {
        observer.started(transition);
    }
    while outcome.divergence.is_none() {
        if clock.spent(outcome.iterations, || transition.gradient_evaluations()) {
            break;
        }
        if stop.load(Ordering::Relaxed) {
            outcome.interrupted = true;
            break;
        }
        outcome
            .last_finite_state
            .copy_from_slice(transition.position());
        if let Err(failure) = transition.step() {
            outcome.failure = Some(failure);
            break;
        }
        outcome.iterations += 1;
        if !transition.is_finite() {
            outcome.divergence = Some(Divergence {
                iteration: outcome.iterations,
                last_finite_state: outcome.last_finite_state.clone(),
            });
            break;
        }
        if outcome.iterations > plan.burn_in
            && (outcome.iterations - plan.burn_in).is_multiple_of(thin)
        {
            observer.kept(transition)?;
            outcome.draws += 1;
        }
        if observer.iterated(outcome.iterations, transition).is_break() {
            outcome.stopped_by_observer = true;
            break;
        }
    }
    if outcome.divergence.is_none() {
        outcome
            .last_finite_state
            .copy_from_slice(transition.position());
    }
    outcome.gradient_evaluations = transition.gradient_evaluations();
    Ok(outcome)
}

/// A kernel with its stream, as a [`Transition`].
struct Streamed<'a, K: ?Sized> {
    kernel: &'a mut K,
    rng: &'a mut ChainRng,
}

impl<K: ChainKernel + ?Sized> Transition for Streamed<'_, K> {
    type Failure = Infallible;
    fn position(&self) -> &[f64] {
        self.kernel.position()
    }
    fn is_finite(&self) -> bool {
        self.kernel.is_finite()
    }
    fn step(&mut self) -> Result<(), Infallible> {
        self.kernel.step(self.rng);
        Ok(())
    }
    fn gradient_evaluations(&self) -> u64 {
        self.kernel.gradient_evaluations()
    }
}

/// Shows a kernel observer the kernel inside [`Streamed`].
struct KernelView<'o, K: ?Sized>(&'o mut dyn ChainObserver<K>);

impl<K: ?Sized> ChainObserver<Streamed<'_, K>> for KernelView<'_, K> {
    fn started(&mut self, chain: &Streamed<'_, K>) {
        self.0.started(chain.kernel);
    }
    fn kept(&mut self, chain: &Streamed<'_, K>) -> Result<(), SinkError> {
        self.0.kept(chain.kernel)
    }
    fn iterated(&mut self, iteration: usize, chain: &Streamed<'_, K>) -> ControlFlow<()> {
        self.0.iterated(iteration, chain.kernel)
    }
}

/// Run one kernel chain from `init`: start `kernel` there with `rng`, then [`drive`] it under
/// `plan`, handing every kept draw to `observer` (which sees the kernel itself).
pub fn drive_kernel<K: ChainKernel + ?Sized>(
    kernel: &mut K,
    rng: &mut ChainRng,
    init: &[f64],
    plan: &ChainPlan,
    observer: &mut dyn ChainObserver<K>,
    stop: &AtomicBool,
) -> Result<ChainOutcome, SinkError> {
    kernel.start(init, rng);
    drive(
        &mut Streamed { kernel, rng },
        plan,
        &mut KernelView(observer),
        stop,
    )
}

/// Shows a sampler observer the sampler inside a borrowed [`SamplerKernel`].
struct SamplerView<'o, S: ?Sized>(&'o mut dyn ChainObserver<S>);

impl<'s, 'e, S: ?Sized> ChainObserver<SamplerKernel<&'s mut S, &'e mut dyn GradientEstimator>>
    for SamplerView<'_, S>
{
    fn started(&mut self, kernel: &SamplerKernel<&'s mut S, &'e mut dyn GradientEstimator>) {
        self.0.started(&**kernel.sampler());
    }
    fn kept(
        &mut self,
        kernel: &SamplerKernel<&'s mut S, &'e mut dyn GradientEstimator>,
    ) -> Result<(), SinkError> {
        self.0.kept(&**kernel.sampler())
    }
    fn iterated(
        &mut self,
        iteration: usize,
        kernel: &SamplerKernel<&'s mut S, &'e mut dyn GradientEstimator>,
    ) -> ControlFlow<()> {
        self.0.iterated(iteration, &**kernel.sampler())
    }
}

/// Run one sampler chain from `init`: restart `estimator` and `sampler` there, then [`drive`]
/// them under `plan`, handing every kept draw to `observer` (which sees the sampler itself).
pub fn drive_chain<S: Sampler + ?Sized>(
    sampler: &mut S,
    estimator: &mut dyn GradientEstimator,
    rng: &mut ChainRng,
    init: &[f64],
    plan: &ChainPlan,
    observer: &mut dyn ChainObserver<S>,
    stop: &AtomicBool,
) -> Result<ChainOutcome, SinkError> {
    let mut kernel = SamplerKernel::new(sampler, estimator);
    drive_kernel(
        &mut kernel,
        rng,
        init,
        plan,
        &mut SamplerView(observer),
        stop,
    )
}
