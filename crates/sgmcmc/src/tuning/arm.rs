//! One MAMBA arm (reference §5.2–5.3): a sampler with its hyperparameters, its own gradient
//! estimator and random stream, warm-restarted every round from where it last stopped and run
//! for that round's budget.
//!
//! Budgets are charged to the arm itself, not to the wall clock: either the CPU time of the
//! thread running it (so arms running side by side on the cores are charged only their own work,
//! and contention does not change which arm wins), or per-datum gradient evaluations (exactly
//! reproducible from the seed).

use crate::estimator::GradientEstimator;
use crate::io::SinkError;
use crate::rng::ChainRng;
use crate::runner::{Budget, ChainObserver, ChainPlan, drive_chain, thread_cpu_seconds};
use crate::sampler::Sampler;
use std::sync::atomic::AtomicBool;

/// What one round of an arm produced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Segment {
    /// Every `thin`-th position of the round (row-major, D per row).
    pub draws: Vec<f64>,
    /// The score estimates the sampler recorded at those positions (reference §2.0).
    pub scores: Vec<f64>,
    /// Iterations run.
    pub iterations: usize,
    /// Per-datum gradient evaluations spent (as [`ArmBudget::GradientEvaluations`] counts them).
    pub gradient_evaluations: u64,
    /// CPU seconds of the running thread spent on the round.
    pub cpu_seconds: f64,
    /// The chain became non-finite; the round stopped there and kept only finite draws.
    pub diverged: bool,
}

impl Segment {
    /// Number of draws kept.
    pub fn len(&self, dim: usize) -> usize {
        self.draws.len() / dim.max(1)
    }
}

/// An arm's persistent state between rounds: its current position and its random stream. The
/// sampler and estimator are passed to each round: auxiliary state is re-initialised every
/// round anyway (§5.2), so they can be built afresh (or reused) by the caller, and M arms need
/// not hold M estimators' buffers at once.
#[derive(Debug, Clone)]
pub struct Arm {
    position: Vec<f64>,
    rng: ChainRng,
}

// An arm's whole state between rounds, saved with MAMBA's progress (`super::progress`).
crate::persist_fields!(Arm { position, rng });

impl Arm {
    /// An arm that will start at `start`, drawing from `rng`.
    pub fn new(start: &[f64], rng: ChainRng) -> Self {
        Self {
            position: start.to_vec(),
            rng,
        }
    }

    /// Where the next round starts: the last finite iterate of the last round that ran one.
    pub fn position(&self) -> &[f64] {
        &self.position
    }

    /// The arm's random stream (e.g. to draw a perturbed start).
    pub fn rng(&mut self) -> &mut ChainRng {
        &mut self.rng
    }

    /// Run one round through the runner's loop ([`drive_chain`]): restart `sampler` at the
    /// arm's position (auxiliary state, the estimator's state and the iteration count start
    /// afresh, §5.2), iterate until `budget` is spent, keep every `thin`-th position (≥ 1) with
    /// its recorded score, and move the arm's position to the round's last finite iterate.
    /// `budget` is charged from the round's start: [`Budget::ThreadCpuSeconds`] (MAMBA in
    /// seconds), [`Budget::GradientEvaluations`] (MAMBA in evaluations) or
    /// [`Budget::Iterations`] (grid search).
    pub fn run_round(
        &mut self,
        sampler: &mut dyn Sampler,
        estimator: &mut dyn GradientEstimator,
        budget: Budget,
        thin: usize,
    ) -> Segment {
        let cpu_start = thread_cpu_seconds();
        let plan = ChainPlan {
            budget,
            burn_in: 0,
            thin: thin.max(1),
        };
        let mut segment = Segment::default();
        let mut collect = Collect {
            draws: &mut segment.draws,
            scores: &mut segment.scores,
        };
        let outcome = drive_chain(
            sampler,
            estimator,
            &mut self.rng,
            &self.position,
            &plan,
            &mut collect,
            &AtomicBool::new(false),
        )
        .expect("collecting draws in memory cannot fail");
        self.position = outcome.last_finite_state;
        segment.iterations = outcome.iterations;
        segment.diverged = outcome.divergence.is_some();
        segment.gradient_evaluations = outcome.gradient_evaluations;
        segment.cpu_seconds = thread_cpu_seconds() - cpu_start;
        segment
    }
}

/// Keeps a round's draws and scores in memory.
struct Collect<'a> {
    draws: &'a mut Vec<f64>,
    scores: &'a mut Vec<f64>,
}

impl<S: Sampler + ?Sized> ChainObserver<S> for Collect<'_> {
    fn kept(&mut self, sampler: &S) -> Result<(), SinkError> {
        self.draws.extend_from_slice(sampler.position());
        self.scores.extend_from_slice(sampler.score());
        Ok(())
    }
}
