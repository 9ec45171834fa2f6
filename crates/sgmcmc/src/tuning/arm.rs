//! One MAMBA arm (reference §5.2–5.3): a sampler with its hyperparameters, its own gradient
//! estimator and random stream, warm-restarted every round from where it last stopped and run
//! for that round's budget.
//!
//! Budgets are charged to the arm itself, not to the wall clock: either the CPU time of the
//! thread running it (so arms running side by side on the cores are charged only their own work,
//! and contention does not change which arm wins), or per-datum gradient evaluations (exactly
//! reproducible from the seed).

use crate::estimator::GradientEstimator;
use crate::rng::ChainRng;
use crate::sampler::Sampler;

/// What one round of an arm may spend.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ArmBudget {
    /// CPU seconds of the thread running the arm ([`thread_cpu_seconds`]); the round stops at
    /// the first iteration boundary at or past it.
    ThreadCpuSeconds(f64),
    /// Per-datum gradient evaluations (reference §5.3): the start's estimate plus, per
    /// iteration, the sampler's estimates per step × the estimator's cost per estimate, plus N
    /// per SVRG centre refresh. The round stops at the first iteration boundary at or past it.
    GradientEvaluations(u64),
    /// A fixed number of iterations (grid search's budget).
    Iterations(u64),
}

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

    /// Run one round: restart `sampler` at the arm's position (auxiliary state, the
    /// estimator's state and the iteration count start afresh, §5.2), iterate until `budget` is
    /// spent, keep every `thin`-th position (≥ 1) with its recorded score, and move the arm's
    /// position to the round's last finite iterate.
    pub fn run_round(
        &mut self,
        sampler: &mut dyn Sampler,
        estimator: &mut dyn GradientEstimator,
        budget: ArmBudget,
        thin: usize,
    ) -> Segment {
        let thin = thin.max(1);
        let cpu_start = thread_cpu_seconds();
        let mut clock = CpuClock::new(cpu_start);
        let per_estimate = estimator.cost_per_estimate() as u64;
        let per_step = sampler.estimates_per_step() as u64 * per_estimate;
        let mut segment = Segment::default();
        estimator.restart(&self.position);
        sampler.start(&self.position, estimator, &mut self.rng);
        let mut evaluations = per_estimate;
        if !finite(sampler.position()) || !finite(sampler.score()) {
            segment.diverged = true;
        }
        while !segment.diverged {
            let done = match budget {
                ArmBudget::ThreadCpuSeconds(limit) => clock.elapsed_at_least(limit),
                ArmBudget::GradientEvaluations(limit) => {
                    evaluations + estimator.extra_evaluations_since_restart() >= limit
                }
                ArmBudget::Iterations(limit) => segment.iterations as u64 >= limit,
            };
            if done {
                break;
            }
            sampler.step(estimator, &mut self.rng);
            segment.iterations += 1;
            evaluations += per_step;
            let (position, score) = (sampler.position(), sampler.score());
            if !finite(position) || !finite(score) {
                segment.diverged = true;
                break;
            }
            self.position.copy_from_slice(position);
            if segment.iterations.is_multiple_of(thin) {
                segment.draws.extend_from_slice(position);
                segment.scores.extend_from_slice(score);
            }
        }
        segment.gradient_evaluations = evaluations + estimator.extra_evaluations_since_restart();
        segment.cpu_seconds = thread_cpu_seconds() - cpu_start;
        segment
    }
}

fn finite(x: &[f64]) -> bool {
    x.iter().all(|v| v.is_finite())
}

/// Reads the thread CPU clock only every `interval` calls, the interval doubling while calls
/// come faster than 20 µs apart, so a fast iteration does not pay a system call each time
/// (overshoot: at most 64 iterations, and those only when an iteration takes < 20 µs / 64).
struct CpuClock {
    start: f64,
    interval: u32,
    countdown: u32,
    last_read: f64,
}

impl CpuClock {
    fn new(start: f64) -> Self {
        Self {
            start,
            interval: 1,
            countdown: 0,
            last_read: start,
        }
    }

    fn elapsed_at_least(&mut self, limit: f64) -> bool {
        if self.countdown > 0 {
            self.countdown -= 1;
            return false;
        }
        let now = thread_cpu_seconds();
        if now - self.last_read < 20e-6 && self.interval < 64 {
            self.interval *= 2;
        }
        self.last_read = now;
        self.countdown = self.interval - 1;
        now - self.start >= limit
    }
}

/// CPU seconds consumed by the calling thread (CLOCK_THREAD_CPUTIME_ID; on platforms without
/// it, seconds of a process-wide monotonic clock).
pub fn thread_cpu_seconds() -> f64 {
    #[cfg(unix)]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant the C library
        // defines. The call cannot fail for this clock on a running thread.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        if rc == 0 {
            return ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9;
        }
    }
    fallback_seconds()
}

fn fallback_seconds() -> f64 {
    use std::sync::OnceLock;
    use std::time::Instant;
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    ORIGIN.get_or_init(Instant::now).elapsed().as_secs_f64()
}
