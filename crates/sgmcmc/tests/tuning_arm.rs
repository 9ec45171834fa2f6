//! One MAMBA arm (reference §5.2–5.3): budgets charged to the arm, warm restarts, recorded
//! scores, divergence.
//!
//! Checked once by breaking `src/tuning/arm.rs`: not moving the arm's position after a round
//! fails `rounds_warm_restart_from_the_last_iterate`; counting one estimate per iteration for
//! SGHMC (ignoring `estimates_per_step`) fails `gradient_budget_is_exact_and_reproducible`.

use crate::common;

use sgmcmc::estimator::{BatchSize, FullBatch, Minibatch, Svrg};
use sgmcmc::model::{Bernoulli, GaussianModel, LogisticRegression, NormalPrior};
use sgmcmc::rng::chain_stream;
use sgmcmc::runner::{Budget, thread_cpu_seconds};
use sgmcmc::sampler::{Sghmc, SghmcSettings, Sgld, StepSize};
use sgmcmc::tuning::Arm;

fn logistic() -> LogisticRegression {
    let (x, y) = common::logistic_data(5, 2000, &[1.0, -1.5, 0.5], 0.2);
    let data = common::dataset(x, 3, Some(y), false);
    LogisticRegression::new(data, Bernoulli, NormalPrior::new(4.0).unwrap(), true).unwrap()
}

/// A gradient-evaluation budget stops at the first iteration boundary at or past it, counts L
/// estimates per SGHMC step, and the same seed gives the same draws bit for bit.
#[test]
fn gradient_budget_is_exact_and_reproducible() {
    let model = logistic();
    let start = [1.0, -1.5, 0.5, 0.2];
    let run = |seed: u64| {
        let mut sampler = Sghmc::new(1e-6, 5, SghmcSettings::default()).unwrap();
        let mut estimator = Minibatch::new(&model, BatchSize::Count(50)).unwrap();
        let mut arm = Arm::new(&start, chain_stream(seed, 0));
        arm.run_round(
            &mut sampler,
            &mut estimator,
            Budget::GradientEvaluations(10_000),
            3,
        )
    };
    let a = run(1);
    let l = 5u64;
    // 50 for the start, then 50·L per iteration, stopping at the first total ≥ 10,000.
    let want_iterations = (10_000u64 - 50).div_ceil(50 * l) as usize;
    assert_eq!(a.iterations, want_iterations);
    assert_eq!(a.gradient_evaluations, 50 + 50 * l * want_iterations as u64);
    assert_eq!(a.len(4), want_iterations / 3);
    assert_eq!(a.scores.len(), a.draws.len());
    assert!(!a.diverged);
    assert_eq!(a, run(1).clone_with_cpu(a.cpu_seconds));
    assert_ne!(a.draws, run(2).draws);
}

trait SameButCpu {
    fn clone_with_cpu(self, cpu: f64) -> Self;
}

impl SameButCpu for sgmcmc::tuning::Segment {
    fn clone_with_cpu(mut self, cpu: f64) -> Self {
        self.cpu_seconds = cpu;
        self
    }
}

/// Each round restarts at the previous round's last iterate, and with thin = 1 the recorded
/// scores are the exact scores at the kept draws (full-batch estimator on a Gaussian target:
/// score −Σ⁻¹(θ − μ)).
#[test]
fn rounds_warm_restart_from_the_last_iterate() {
    let mu = [1.0, -2.0];
    let model = GaussianModel::target(&mu, &[1.0, 0.0, 0.0, 4.0]).unwrap();
    let mut sampler = Sgld::new(StepSize::Langevin(0.05), 1.0).unwrap();
    let mut estimator = FullBatch::new(&model);
    let mut arm = Arm::new(&[10.0, 10.0], chain_stream(3, 0));
    let first = arm.run_round(
        &mut sampler,
        &mut estimator,
        Budget::GradientEvaluations(200),
        1,
    );
    assert_eq!(first.iterations, 199);
    assert_eq!(arm.position(), &first.draws[first.draws.len() - 2..]);
    for (theta, score) in first
        .draws
        .chunks_exact(2)
        .zip(first.scores.chunks_exact(2))
    {
        assert!((score[0] + (theta[0] - mu[0])).abs() < 1e-12);
        assert!((score[1] + (theta[1] - mu[1]) / 4.0).abs() < 1e-12);
    }
    // The second round's first draw is one SGLD step (ε = 0.05, noise sd √0.05) from the first
    // round's last: far closer than the starting point (10, 10) was.
    let last = arm.position().to_vec();
    let second = arm.run_round(
        &mut sampler,
        &mut estimator,
        Budget::GradientEvaluations(3),
        1,
    );
    assert_eq!(second.iterations, 2);
    let jump = (second.draws[0] - last[0]).hypot(second.draws[1] - last[1]);
    assert!(jump < 1.5, "jump {jump}");
    assert!(
        (last[0] - 10.0).abs() > 3.0,
        "the first round moved towards μ"
    );
}

/// A diverging arm stops at the first non-finite state, keeps only finite draws and reports it.
#[test]
fn divergence_is_reported_and_draws_stay_finite() {
    let model = GaussianModel::target(&[0.0], &[1e-6]).unwrap();
    let mut sampler = Sgld::new(StepSize::Langevin(1.0), 1.0).unwrap();
    let mut estimator = FullBatch::new(&model);
    let mut arm = Arm::new(&[1.0], chain_stream(4, 0));
    let seg = arm.run_round(
        &mut sampler,
        &mut estimator,
        Budget::GradientEvaluations(1_000_000),
        1,
    );
    assert!(seg.diverged);
    assert!(seg.iterations < 1000);
    assert!(seg.draws.iter().chain(&seg.scores).all(|v| v.is_finite()));
    assert!(arm.position().iter().all(|v| v.is_finite()));
}

/// The CPU-time budget is charged to the running thread: sleeping does not consume it, work
/// does, and a round spends at least its budget.
#[test]
fn cpu_budget_counts_this_threads_work_only() {
    let t0 = thread_cpu_seconds();
    std::thread::sleep(std::time::Duration::from_millis(60));
    let slept = thread_cpu_seconds() - t0;
    assert!(slept < 0.03, "sleeping cost {slept} s of CPU");

    let model = logistic();
    let mut sampler = Sgld::new(StepSize::Langevin(1e-4), 1.0).unwrap();
    let mut estimator = Minibatch::new(&model, BatchSize::Count(100)).unwrap();
    let mut arm = Arm::new(&[1.0, -1.5, 0.5, 0.2], chain_stream(5, 0));
    let seg = arm.run_round(
        &mut sampler,
        &mut estimator,
        Budget::ThreadCpuSeconds(0.05),
        10,
    );
    assert!(seg.cpu_seconds >= 0.05, "{}", seg.cpu_seconds);
    assert!(seg.iterations > 0 && !seg.diverged);
}

/// SVRG's centre refreshes are charged N each (checked once: with
/// `extra_evaluations_since_restart` returning 0 the first assertion fails): with n = 50, N = 2000 and the refresh every
/// r = 10 calls, a round that runs k iterations of SGLD spends 2n per estimate plus N per
/// refresh (the start's call is a refresh), so the budget stops earlier than with control
/// variates alone.
#[test]
fn svrg_full_passes_count_in_the_gradient_budget() {
    let model = logistic();
    let n_data = 2000u64;
    let mut sampler = Sgld::new(StepSize::Langevin(1e-5), 1.0).unwrap();
    let mut estimator = Svrg::new(&model, BatchSize::Count(50), Some(10)).unwrap();
    let mut arm = Arm::new(&[1.0, -1.5, 0.5, 0.2], chain_stream(6, 0));
    let seg = arm.run_round(
        &mut sampler,
        &mut estimator,
        Budget::GradientEvaluations(20_000),
        1,
    );
    let calls = seg.iterations as u64 + 1;
    let refreshes = calls.div_ceil(10);
    assert_eq!(seg.gradient_evaluations, 100 * calls + n_data * refreshes);
    assert!(seg.gradient_evaluations >= 20_000);
    // One iteration earlier the budget was not yet spent.
    let before = 100 * (calls - 1) + n_data * (calls - 1).div_ceil(10);
    assert!(before < 20_000, "{before}");
    // A second round restarts the count (a restart refreshes at once).
    let again = arm.run_round(
        &mut sampler,
        &mut estimator,
        Budget::GradientEvaluations(20_000),
        1,
    );
    assert_eq!(again.iterations, seg.iterations);
}
