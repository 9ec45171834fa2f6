//! The runner: reproducibility across thread counts, burn-in and thinning, per-chain divergence
//! handling, wall-clock budgets and setting validation.

use crate::common;

use common::{dataset, logistic_data};
use sgmcmc::estimator::{BatchSize, FullBatch, GradientEstimator, Minibatch};
use sgmcmc::io::MemorySink;
use sgmcmc::model::{Bernoulli, GaussianModel, LogisticRegression, Model, NormalPrior};
use sgmcmc::rng::{ChainRng, fill_standard_normal};
use sgmcmc::runner::{Budget, Chain, NoProgress, RunError, RunReport, RunSettings, run};
use sgmcmc::sampler::{Sgld, StepSize};
use std::time::Duration;

fn logistic_model(n: usize) -> LogisticRegression {
    let (x, y) = logistic_data(61, n, &[1.0, -0.7, 0.3], -0.2);
    LogisticRegression::new(
        dataset(x, 3, Some(y), false),
        Bernoulli,
        NormalPrior::new(5.0).unwrap(),
        true,
    )
    .unwrap()
}

fn settings(
    seed: u64,
    chains: usize,
    iterations: usize,
    burn_in: usize,
    thin: usize,
) -> RunSettings {
    RunSettings {
        seed,
        chains,
        budget: Budget::Iterations(iterations),
        burn_in,
        thin,
    }
}

/// SGLD chains with step `step(c)` for chain c, estimator `est()`, and θ₀ ~ N(0, 0.1²I) drawn
/// from the chain's stream.
#[allow(clippy::needless_lifetimes)] // 'm ties the estimators to the model
fn run_chains<'m>(
    model: &'m dyn Model,
    settings: &RunSettings,
    step: impl Fn(usize) -> f64 + Sync,
    est: impl Fn() -> Box<dyn GradientEstimator + 'm> + Sync,
) -> (Result<RunReport, RunError>, Vec<Vec<f64>>) {
    let d = model.dim();
    let sink = MemorySink::new(settings.chains, d);
    let report = run(
        settings,
        |c, rng: &mut ChainRng| {
            let mut init = vec![0.0; d];
            fill_standard_normal(rng, &mut init);
            init.iter_mut().for_each(|v| *v *= 0.1);
            Ok(Chain::sampler(
                Box::new(Sgld::new(StepSize::Langevin(step(c)), 1.0).unwrap()),
                est(),
                init,
            ))
        },
        &sink,
        &NoProgress,
    );
    (report, sink.into_chains())
}

fn bits(chains: &[Vec<f64>]) -> Vec<Vec<u64>> {
    chains
        .iter()
        .map(|c| c.iter().map(|v| v.to_bits()).collect())
        .collect()
}

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
}

#[test]
fn same_seed_is_bitwise_reproducible_across_thread_counts() {
    let model = logistic_model(1_000);
    let est = || -> Box<dyn GradientEstimator> {
        Box::new(Minibatch::new(&model, BatchSize::Count(32)).unwrap())
    };
    let s = settings(123, 4, 3_000, 100, 2);
    let draws = |threads: usize, s: &RunSettings| {
        pool(threads).install(|| {
            let (r, d) = run_chains(&model, s, |_| 1e-3, est);
            let r = r.unwrap();
            assert!(r.diverged_chains().is_empty());
            assert_eq!(r.draws(), 4 * 1_500);
            d
        })
    };
    let one = draws(1, &s);
    let two = draws(2, &s);
    let again = draws(2, &s);
    assert_eq!(bits(&one), bits(&two), "1 thread vs 2 threads");
    assert_eq!(bits(&two), bits(&again), "two runs with 2 threads");
    // Chains use distinct streams…
    for i in 0..4 {
        for j in 0..i {
            assert_ne!(one[i], one[j], "chains {i} and {j} are identical");
        }
    }
    // …and another seed changes every chain.
    let other = draws(2, &settings(124, 4, 3_000, 100, 2));
    for c in 0..4 {
        assert_ne!(bits(&one)[c], bits(&other)[c], "chain {c} ignores the seed");
    }
}

#[test]
fn full_batch_chains_are_bitwise_reproducible_across_thread_counts() {
    // N spans several 16,384-row chunks of the parallel full-data evaluator.
    let model = logistic_model(40_000);
    let s = settings(5, 2, 40, 0, 1);
    let draws = |threads: usize| {
        pool(threads).install(|| {
            let (r, d) = run_chains(&model, &s, |_| 2e-5, || Box::new(FullBatch::new(&model)));
            assert!(r.unwrap().diverged_chains().is_empty());
            d
        })
    };
    assert_eq!(bits(&draws(1)), bits(&draws(2)));
}

#[test]
fn burn_in_and_thinning_keep_the_expected_draws() {
    let model = GaussianModel::target(&[0.5, -0.5], &[1.0, 0.2, 0.2, 0.5]).unwrap();
    let est = || -> Box<dyn GradientEstimator> { Box::new(FullBatch::new(&model)) };
    let d = 2;
    let (burn_in, thin, iterations) = (10, 3, 100);
    let (r, thinned) = run_chains(
        &model,
        &settings(3, 2, iterations, burn_in, thin),
        |_| 0.1,
        est,
    );
    let r = r.unwrap();
    let (full_r, full) = run_chains(
        &model,
        &settings(3, 2, burn_in + iterations, 0, 1),
        |_| 0.1,
        est,
    );
    assert_eq!(full_r.unwrap().draws(), 2 * 110);
    for (c, rep) in r.chains.iter().enumerate() {
        assert_eq!(rep.chain, c);
        assert_eq!(rep.iterations, burn_in + iterations);
        assert_eq!(rep.draws, 33, "⌊100/3⌋ draws");
        assert_eq!(thinned[c].len(), 33 * d);
        // Kept iterations are burn_in + thin·k (1-based), k = 1..=33: the same states as the
        // unthinned run's draws at those iterations.
        for k in 0..33 {
            let it = burn_in + thin * (k + 1);
            assert_eq!(
                &thinned[c][k * d..(k + 1) * d],
                &full[c][(it - 1) * d..it * d],
                "chain {c}, kept draw {k} (iteration {it})"
            );
        }
    }
    // Edge cases: thin larger than the budget, and a zero budget after burn-in.
    let (r, x) = run_chains(&model, &settings(3, 1, 2, 5, 5), |_| 0.1, est);
    let r = r.unwrap();
    assert_eq!(
        (r.chains[0].iterations, r.chains[0].draws, x[0].len()),
        (7, 0, 0)
    );
    let (r, _) = run_chains(&model, &settings(3, 1, 0, 4, 1), |_| 0.1, est);
    assert_eq!(
        (r.as_ref().unwrap().chains[0].iterations, r.unwrap().draws()),
        (4, 0)
    );
}

#[test]
fn a_diverging_chain_is_stopped_and_reported_while_others_finish() {
    // Precision eigenvalues up to ≈ 2.1: SGLD is stable for ε < 2/λ_max ≈ 0.95.
    let model = GaussianModel::target(&[1.0, -1.0], &[1.0, 0.3, 0.3, 0.5]).unwrap();
    let est = || -> Box<dyn GradientEstimator> { Box::new(FullBatch::new(&model)) };
    let iterations = 5_000;
    let (r, draws) = run_chains(
        &model,
        &settings(17, 3, iterations, 0, 1),
        |c| if c == 0 { 50.0 } else { 0.1 },
        est,
    );
    let r = r.expect("a diverging chain does not fail the run");
    assert_eq!(r.diverged_chains(), vec![0]);
    let c0 = &r.chains[0];
    let div = c0.divergence.as_ref().expect("chain 0 diverged");
    assert!(
        div.iteration >= 1 && div.iteration < iterations,
        "iteration {}",
        div.iteration
    );
    assert_eq!(
        c0.iterations, div.iteration,
        "the chain stops at the divergence"
    );
    assert!(div.last_finite_state.iter().all(|v| v.is_finite()));
    assert_eq!(div.last_finite_state.len(), 2);
    // Draws before the divergence are kept (burn-in 0, thin 1: one per finite iteration) and
    // the last one is the last finite state.
    assert_eq!(c0.draws, div.iteration - 1);
    assert_eq!(draws[0].len(), 2 * c0.draws);
    assert!(draws[0].iter().all(|v| v.is_finite()));
    if c0.draws > 0 {
        assert_eq!(
            &draws[0][draws[0].len() - 2..],
            div.last_finite_state.as_slice()
        );
    }
    for (c, rep) in r.chains.iter().enumerate().skip(1) {
        assert!(rep.divergence.is_none());
        assert_eq!((rep.iterations, rep.draws), (iterations, iterations));
        assert_eq!(draws[c].len(), 2 * iterations);
        assert!(
            draws[c].iter().all(|v| v.is_finite()),
            "chain {c} has non-finite draws"
        );
    }
}

#[test]
fn a_non_finite_score_at_the_start_is_a_divergence_at_iteration_zero() {
    // θ₀ finite but the score −Σ⁻¹(θ₀ − μ) overflows.
    let model = GaussianModel::target(&[0.0], &[0.25]).unwrap();
    let sink = MemorySink::new(1, 1);
    let r = run(
        &settings(1, 1, 100, 0, 1),
        |_, _| {
            Ok(Chain::sampler(
                Box::new(Sgld::new(StepSize::Langevin(0.1), 1.0).unwrap()),
                Box::new(FullBatch::new(&model)),
                vec![1e308],
            ))
        },
        &sink,
        &NoProgress,
    )
    .unwrap();
    let div = r.chains[0].divergence.as_ref().expect("diverged at start");
    assert_eq!(
        (div.iteration, r.chains[0].iterations, r.chains[0].draws),
        (0, 0, 0)
    );
    assert_eq!(div.last_finite_state, vec![1e308]);
}

#[test]
fn a_non_finite_initial_point_is_a_setup_error() {
    let model = GaussianModel::target(&[0.0], &[0.25]).unwrap();
    let sink = MemorySink::new(2, 1);
    let r = run(
        &settings(1, 2, 100, 0, 1),
        |c, _| {
            Ok(Chain::sampler(
                Box::new(Sgld::new(StepSize::Langevin(0.1), 1.0).unwrap()),
                Box::new(FullBatch::new(&model)),
                vec![if c == 1 { f64::NAN } else { 0.0 }],
            ))
        },
        &sink,
        &NoProgress,
    );
    match r {
        Err(e @ RunError::NonFiniteInit { chain: 1, .. }) => {
            assert!(e.to_string().contains("not finite"), "{e}")
        }
        other => panic!("expected a setup error for chain 1, got {other:?}"),
    }
}

#[test]
fn wall_clock_budget_stops_every_chain() {
    let model = GaussianModel::target(&[0.0, 0.0], &[1.0, 0.0, 0.0, 1.0]).unwrap();
    let limit = Duration::from_millis(200);
    let s = RunSettings {
        seed: 4,
        chains: 2,
        budget: Budget::WallClock(limit),
        burn_in: 100,
        thin: 1_000, // keeps memory small at millions of iterations per second
    };
    let (r, draws) = run_chains(&model, &s, |_| 0.1, || Box::new(FullBatch::new(&model)));
    let r = r.unwrap();
    for (c, rep) in r.chains.iter().enumerate() {
        assert!(rep.iterations > 0, "chain {c} did not iterate");
        // The budget is checked every iteration; the upper bound only allows for a loaded CI
        // machine (an iteration here takes well under a millisecond).
        assert!(
            (0.2..1.0).contains(&rep.seconds),
            "chain {c} ran {} s for a 0.2 s budget",
            rep.seconds
        );
        assert_eq!(rep.draws, rep.iterations.saturating_sub(100) / 1_000);
        assert_eq!(draws[c].len(), 2 * rep.draws);
    }
    assert!(r.seconds >= 0.2);
}

#[test]
fn invalid_settings_are_errors_not_panics() {
    let model = GaussianModel::target(&[0.0], &[1.0]).unwrap();
    let est = || -> Box<dyn GradientEstimator> { Box::new(FullBatch::new(&model)) };
    let cases = [
        settings(1, 0, 10, 0, 1),
        settings(1, 1, 10, 0, 0),
        RunSettings {
            budget: Budget::WallClock(Duration::ZERO),
            ..settings(1, 1, 10, 0, 1)
        },
    ];
    let expected = [
        "chains must be at least 1",
        "thin must be at least 1",
        "> 0 seconds",
    ];
    for (s, want) in cases.iter().zip(expected) {
        match run_chains(&model, s, |_| 0.1, est).0 {
            Err(e @ (RunError::NoChains | RunError::ZeroThin | RunError::Budget(_))) => {
                assert!(e.to_string().contains(want), "{e}")
            }
            Err(e) => panic!("{s:?}: wrong error {e}"),
            Ok(_) => panic!("{s:?} accepted"),
        }
    }

    let chain = || -> Result<Chain<'_>, RunError> {
        Ok(Chain::sampler(
            Box::new(Sgld::new(StepSize::Langevin(0.1), 1.0).unwrap()),
            est(),
            vec![0.0],
        ))
    };

    // A chain that cannot be built stops the run with its number.
    let sink = MemorySink::new(2, 1);
    let r = run(
        &settings(1, 2, 10, 0, 1),
        |c, _| {
            if c == 1 {
                return Err(RunError::ChainSetup {
                    chain: c,
                    source: "no".into(),
                });
            }
            chain()
        },
        &sink,
        &NoProgress,
    );
    assert!(matches!(r, Err(RunError::ChainSetup { chain: 1, .. })));

    // A sink with fewer chains than the run is a sink error.
    let sink = MemorySink::new(1, 1);
    let r = run(
        &settings(1, 2, 10, 0, 1),
        |_, _| chain(),
        &sink,
        &NoProgress,
    );
    assert!(matches!(r, Err(RunError::Sink { chain: 1, .. })));

    // A sink of the wrong dimension is a sink error at the first draw.
    let sink = MemorySink::new(1, 3);
    let r = run(
        &settings(1, 1, 10, 0, 1),
        |_, _| chain(),
        &sink,
        &NoProgress,
    );
    assert!(matches!(r, Err(RunError::Sink { chain: 0, .. })));
}

/// Every kept draw comes with the chain's state at that draw: here SGLD's step (per chain),
/// and no thermostat or MH acceptance, which SGLD does not have.
#[test]
fn kept_draws_carry_the_chains_state() {
    let model = logistic_model(2_000);
    let s = settings(5, 2, 300, 50, 3);
    let (report, chains) = run_chains(
        &model,
        &s,
        |c| 1e-4 * (c + 1) as f64,
        || Box::new(Minibatch::new(&model, BatchSize::Count(100)).unwrap()),
    );
    let report = report.unwrap();
    for (c, chain) in report.chains.iter().enumerate() {
        assert_eq!(chain.draw_statistics.len(), chain.draws);
        assert_eq!(chain.draws * model.dim(), chains[c].len());
        for stats in &chain.draw_statistics {
            assert_eq!(stats.step_size, Some(1e-4 * (c + 1) as f64));
            assert_eq!(stats.thermostat, None);
            assert_eq!(stats.accepted, None);
        }
    }
}
