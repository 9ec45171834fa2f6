//! [`Budget`]: when a chain, or a tuner arm's round, stops. Checked at every iteration
//! boundary by the one loop ([`super::drive_chain`]).

use std::time::{Duration, Instant};

/// When a chain stops. Iterations, wall clock and thread CPU time count from the chain's
/// start, burn-in included except for [`Budget::Iterations`], which counts the iterations after
/// burn-in.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Budget {
    /// This many iterations after burn-in.
    Iterations(usize),
    /// Stop at the first iteration boundary where this much wall-clock time has passed since
    /// the chain started (burn-in included).
    WallClock(#[cfg_attr(feature = "serde", serde(with = "duration_seconds"))] Duration),
    /// Stop at the first iteration boundary at or past this many CPU seconds of the thread
    /// running the chain ([`thread_cpu_seconds`]): a chain running beside others is charged
    /// only its own work (MAMBA's arms, reference §5.3).
    ThreadCpuSeconds(f64),
    /// Stop at the first iteration boundary at or past this many per-datum gradient
    /// evaluations (reference §5.3): the start's estimate plus, per iteration, the sampler's
    /// estimates per step × the estimator's cost per estimate, plus N per SVRG centre refresh.
    /// Exactly reproducible from the seed.
    GradientEvaluations(u64),
}

#[cfg(feature = "serde")]
mod duration_seconds {
    pub fn serialize<S: serde::Serializer>(
        d: &std::time::Duration,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
}

impl Budget {
    /// The iterations a chain with `burn_in` burn-in iterations runs, when the budget fixes
    /// them (burn-in + iterations); `None` for clock and evaluation budgets.
    pub fn total_iterations(self, burn_in: usize) -> Option<usize> {
        match self {
            Budget::Iterations(n) => Some(burn_in + n),
            _ => None,
        }
    }

    /// Whether the budget can be spent: a positive, finite amount.
    pub(super) fn check(self) -> Result<(), BudgetError> {
        match self {
            Budget::WallClock(d) if d.is_zero() => Err(BudgetError::ZeroWallClock),
            Budget::ThreadCpuSeconds(s) if !(s.is_finite() && s >= 0.0) => {
                Err(BudgetError::BadCpuSeconds(s))
            }
            _ => Ok(()),
        }
    }
}

/// A budget that cannot be spent.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum BudgetError {
    /// A wall-clock budget of zero.
    #[error("the wall-clock budget must be > 0 seconds")]
    ZeroWallClock,
    /// A thread-CPU budget that is negative or not finite.
    #[error("the CPU-time budget must be a finite number of seconds >= 0, got {0}")]
    BadCpuSeconds(f64),
}

/// Decides, at each iteration boundary, whether a [`Budget`] is spent.
pub(super) struct BudgetClock {
    budget: Budget,
    burn_in: usize,
    wall_start: Instant,
    cpu: CpuClock,
}

impl BudgetClock {
    /// A clock started now.
    pub(super) fn start(budget: Budget, burn_in: usize) -> Self {
        Self {
            budget,
            burn_in,
            wall_start: Instant::now(),
            cpu: CpuClock::new(thread_cpu_seconds()),
        }
    }

    /// Whether the budget is spent after `iterations` iterations; `evaluations` counts the
    /// per-datum gradient evaluations so far, and is called only for an evaluation budget.
    pub(super) fn spent(&mut self, iterations: usize, evaluations: impl FnOnce() -> u64) -> bool {
        match self.budget {
            Budget::Iterations(n) => iterations >= self.burn_in + n,
            Budget::WallClock(limit) => self.wall_start.elapsed() >= limit,
            Budget::ThreadCpuSeconds(limit) => self.cpu.elapsed_at_least(limit),
            Budget::GradientEvaluations(limit) => evaluations() >= limit,
        }
    }
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
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    ORIGIN.get_or_init(Instant::now).elapsed().as_secs_f64()
}
