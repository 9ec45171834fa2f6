//! MAMBA through the library (reference §5.1–5.3, §5.8): the grid of arms, pruning with real
//! samplers (diverging arms included), warm restarts, reproducibility on any thread count, an
//! end-to-end selection check, and the control-variate surrogate of the metric's scores.
//!
//! Every budget here is in per-datum gradient evaluations, so every run is deterministic.
//!
//! Checked once by breaking the code (each restored afterwards; "failed" = the tests that
//! failed):
//! - `src/tuning/halving.rs`, the ranking sorted descending: the pruning test ("round 1 ran
//!   the previous survivors": the worst arms survived), both warm-restart tests (a diverging arm
//!   won), the reproducibility test, and the end-to-end test (0 of 5 seeds agree).
//! - `src/tuning/mamba.rs`, a cold restart (the arm reset to `ctx.start` before every round):
//!   both warm-restart tests (SGLD draw 99 was the k = 1 iterate again, 3.905 instead of
//!   1.121; the pSGLD replay differed).
//! - `src/tuning/mamba.rs`, the metric of the arm's draws over all rounds instead of this
//!   round's: the pruning test (the winner's metric was not its last round's KSD) and the
//!   end-to-end test (3 of 5).
//! - `src/tuning/mamba.rs`, arm streams ignoring the seed: the reproducibility test (another
//!   seed gave the same draws) and the pSGLD replay.
//! - `src/tuning/scores.rs`, the offset without its −(N/m)·Σ_S ∇ℓᵢ(θ̂) part: the surrogate
//!   test (−80.0 instead of 6e−5 at the centre) and the end-to-end test's exactness check.
//! - `src/tuning/grid.rs`, the first axis varying fastest: the grid-order test (and the
//!   end-to-end test, whose arm numbering assumes the order).
//! - `src/stein/ksd.rs` before its fix in this branch (`sqrt(max(KSD²_V, 0))`, which maps NaN
//!   to 0): the pruning test (the exploding, still finite arm ranked first with KSD 0) and the
//!   SGLD warm-restart test (an exploding arm won).

use crate::common;

use sgmcmc::estimator::BatchSize;
use sgmcmc::estimator::{FullBatch, FullDataEvaluator};
use sgmcmc::model::{
    Bernoulli, DataIndex, GaussianModel, LogisticRegression, Model, NormalPrior, Scratch,
};
use sgmcmc::optim::find_map;
use sgmcmc::optim::lbfgs::LbfgsOptions;
use sgmcmc::reference::laplace_at;
use sgmcmc::rng::stream;
use sgmcmc::sampler::{Psgld, PsgldSettings, Sampler, StepSize};
use sgmcmc::settings::{EstimatorSettings, SamplerSettings};
use sgmcmc::stein::{ImqKernel, Kernel};
use sgmcmc::tuning::{
    Arm, ArmRound, ArmRoundResult, ArmSettings, MambaOutcome, MambaProgress, MambaSettings,
    RoundRunner, ScoreFunction, TuneBudget, TuneContext, TuneError, TuneGrid, TuneMetricSettings,
    expand_grid, mamba, mamba_on, mamba_resumable, run_arm_round_alone,
};

fn sampler_settings(text: &str) -> SamplerSettings {
    toml::from_str(text).expect("sampler table parses")
}

fn gradient(text: &str) -> EstimatorSettings {
    toml::from_str(text).expect("gradient table parses")
}

fn grid(text: &str) -> TuneGrid {
    toml::from_str(text).expect("grid parses")
}

fn sgld_step(arm: &ArmSettings) -> f64 {
    match arm.sampler {
        SamplerSettings::Sgld {
            step_size: Some(s), ..
        } => s,
        ref other => panic!("not an SGLD arm with a step_size: {other:?}"),
    }
}

fn expand_err(sampler: &str, grid_text: &str) -> String {
    expand_grid(&sampler_settings(sampler), &gradient(""), &grid(grid_text))
        .expect_err("the grid is invalid")
        .to_string()
}

// ---------------------------------------------------------------------------------------------
// 1. The grid.
// ---------------------------------------------------------------------------------------------

/// Arms are ordered step (outermost), batch size, then the other sampler keys alphabetically,
/// the last varying fastest; every arm carries its values as tables and labels.
#[test]
fn grid_order_is_step_then_batch_then_sampler_keys() {
    let base = sampler_settings("kind = \"sghmc\"\nstep_size = 1e-3\ninner_steps = 1");
    // inner_steps is written before friction: the order must still be alphabetical.
    let g = grid(
        "log10_step_size = [-1, -2]\nbatch_size = [10, \"5%\"]\n\
         inner_steps = [5, 10]\nfriction = [0.01, 0.1]",
    );
    let arms = expand_grid(&base, &gradient("batch_size = 3"), &g).unwrap();
    assert_eq!(arms.len(), 16);
    let steps = [1e-1, 1e-2];
    let batches = [BatchSize::Count(10), BatchSize::Fraction(0.05)];
    let frictions = [0.01, 0.1];
    let inner = [5usize, 10];
    for (k, arm) in arms.iter().enumerate() {
        let (s, b, f, l) = (k / 8, (k / 4) % 2, (k / 2) % 2, k % 2);
        match arm.sampler {
            SamplerSettings::Sghmc {
                step_size,
                inner_steps,
                friction,
                ..
            } => {
                assert!((step_size / steps[s] - 1.0).abs() < 1e-15, "arm {k}");
                assert_eq!(inner_steps, inner[l], "arm {k}");
                assert_eq!(friction, frictions[f], "arm {k}");
            }
            ref other => panic!("arm {k} is not SGHMC: {other:?}"),
        }
        assert_eq!(arm.gradient.batch_size, batches[b], "arm {k}");
        let keys: Vec<&str> = arm.values.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            ["log10_step_size", "batch_size", "friction", "inner_steps"]
        );
        assert_eq!(arm.values[0].1, ["-1", "-2"][s]);
        assert_eq!(arm.values[1].1, ["10", "5%"][b]);
        assert_eq!(arm.values[3].1, ["5", "10"][l]);
    }
    assert_eq!(
        arms[5].label(),
        "log10_step_size=-1, batch_size=5%, friction=0.01, inner_steps=10"
    );
}

/// `{ from, to, by }` walks from `from` to `to` with both ends included; the step is 10^value
/// in the sampler's own units and replaces the base table's alternative step key.
#[test]
fn log10_range_and_sghmc_inner_steps() {
    let base = sampler_settings("kind = \"sgld\"\nwelling_teh_step = 0.5");
    let arms = expand_grid(
        &base,
        &gradient(""),
        &grid("log10_step_size = { from = -1, to = -2, by = 0.5 }"),
    )
    .unwrap();
    let want = [1e-1, 10f64.powf(-1.5), 1e-2];
    assert_eq!(arms.len(), 3);
    for (arm, w) in arms.iter().zip(want) {
        assert!((sgld_step(arm) / w - 1.0).abs() < 1e-15);
        match arm.sampler {
            SamplerSettings::Sgld {
                welling_teh_step, ..
            } => assert_eq!(welling_teh_step, None),
            _ => unreachable!(),
        }
    }
    assert_eq!(arms[1].values, [("log10_step_size".into(), "-1.5".into())]);

    let sghmc = sampler_settings("kind = \"sghmc\"\nstep_size = 1e-3\ninner_steps = 1");
    let arms = expand_grid(&sghmc, &gradient(""), &grid("inner_steps = [5, 10]")).unwrap();
    let l: Vec<usize> = arms
        .iter()
        .map(|a| match a.sampler {
            SamplerSettings::Sghmc { inner_steps, .. } => inner_steps,
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(l, [5, 10]);
}

/// Each invalid grid is an error naming its problem.
#[test]
fn bad_grids_are_errors_that_name_the_problem() {
    let sgld = "kind = \"sgld\"\nstep_size = 1e-3";
    let cases: [(&str, &str, &[&str]); 7] = [
        (sgld, "inner_steps = [5, 10]", &["inner_steps", "[sampler]"]),
        (sgld, "stepsize = [0.1]", &["stepsize"]),
        (
            sgld,
            "log10_step_size = [-1]\nstep_size = [0.1]",
            &["log10_step_size", "step_size", "not both"],
        ),
        (sgld, "batch_size = []", &["batch_size", "no values"]),
        (
            sgld,
            "log10_step_size = []",
            &["log10_step_size", "empty list"],
        ),
        (sgld, "step_size = [1e-3, 0.0]", &["arm 1", "step"]),
        (sgld, "step_size = [-1e-3]", &["arm 0", "step"]),
    ];
    for (sampler, g, needles) in cases {
        let msg = expand_err(sampler, g);
        for n in needles {
            assert!(msg.contains(n), "grid {g:?}: error {msg:?} lacks {n:?}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A Gaussian target N(μ, I) as a one-datum model, with a context started at `start`.
// ---------------------------------------------------------------------------------------------

const MU: [f64; 2] = [1.0, -2.0];

fn gaussian_target() -> GaussianModel {
    GaussianModel::target(&MU, &[1.0, 0.0, 0.0, 1.0]).unwrap()
}

fn context_at<'m>(model: &'m dyn Model, start: &[f64]) -> TuneContext<'m> {
    let mut start_score = vec![0.0; model.dim()];
    FullDataEvaluator::new(model).grad_log_posterior(start, &mut start_score);
    TuneContext {
        model,
        start: start.to_vec(),
        start_score,
        scores: ScoreFunction::exact(model),
    }
}

fn imq() -> TuneMetricSettings {
    TuneMetricSettings::Ksd(Kernel::Imq(ImqKernel::default()))
}

fn settings(
    eta: usize,
    budget: TuneBudget,
    thin: usize,
    threads: usize,
    seed: u64,
) -> MambaSettings {
    MambaSettings {
        eta,
        budget,
        thin,
        metric: imq(),
        threads,
        seed,
        ..MambaSettings::default()
    }
}

/// The records of every round are ranked (ascending metric, ties in grid order), the first
/// ⌊|Sᵢ|/η⌋ are kept and are exactly the next round's arms.
fn assert_halving_structure(out: &MambaOutcome, eta: usize) {
    let mut expected_arms: Vec<usize> = (0..out.arms).collect();
    for (i, round) in out.rounds.iter().enumerate() {
        let mut arms: Vec<usize> = round.iter().map(|r| r.arm).collect();
        arms.sort_unstable();
        expected_arms.sort_unstable();
        assert_eq!(arms, expected_arms, "round {i} ran the previous survivors");
        for w in round.windows(2) {
            assert!(
                w[0].metric < w[1].metric || (w[0].metric == w[1].metric && w[0].arm < w[1].arm),
                "round {i}: {} ({}) ranked before {} ({})",
                w[0].arm,
                w[0].metric,
                w[1].arm,
                w[1].metric
            );
        }
        let keep = round.len() / eta;
        for (rank, r) in round.iter().enumerate() {
            assert_eq!(r.kept, rank < keep, "round {i} rank {rank}");
            assert_eq!(r.round, i);
        }
        expected_arms = round.iter().filter(|r| r.kept).map(|r| r.arm).collect();
    }
    let last = out.rounds.last().unwrap();
    assert_eq!(
        out.winner, last[0].arm,
        "the winner is the first of the last round"
    );
    assert_eq!(out.winner_metric, last[0].metric);
}

// ---------------------------------------------------------------------------------------------
// 2. Pruning with real arms.
// ---------------------------------------------------------------------------------------------

/// SGLD on N(μ, I) over 13 steps. Two (ε = 10 and 10^1.5, growth factors 9 and 31 per step)
/// overflow to non-finite states: diverged. A third (ε = 10^0.35 ≈ 2.24, factor 1.24) grows to
/// ~10^186 in round 0 but stays finite, so only its KSD overflows (NaN). All three rank last
/// with metric +∞, in grid order, and the run still ends with a finite winner. 13 arms, η = 3:
/// K = 2, rounds of 13 and ⌊13/3⌋ = 4 arms, 1 kept. R = 8,000 evaluations (cost 1 per
/// iteration): r₀ = R/(1 + 3) = 2,000, T = r₀·13·2 = 52,000, r₁ = T/(4·2) = 6,500. The
/// winner's metric is the KSD of its last round's draws alone.
#[test]
fn diverging_arms_rank_last_and_pruning_keeps_the_best() {
    let model = gaussian_target();
    let ctx = context_at(&model, &MU);
    let log10 = [
        1.0, -0.5, -1.0, -1.5, -2.0, 1.5, -2.5, -3.0, 0.35, -3.5, -4.0, -4.5, -5.0,
    ];
    let g = grid(&format!("log10_step_size = {log10:?}"));
    let arms = expand_grid(
        &sampler_settings("kind = \"sgld\"\nstep_size = 1.0"),
        &gradient("estimator = \"full\"\nbatch_size = 1"),
        &g,
    )
    .unwrap();
    let mut budgets = Vec::new();
    let out = mamba(
        &ctx,
        &arms,
        &settings(3, TuneBudget::ArmEvaluations(8000.0), 10, 2, 11),
        &mut |records: &[ArmRound], budget| budgets.push((records.len(), budget)),
    )
    .unwrap();
    assert_eq!(out.rounds_planned, 2);
    assert_eq!(out.total_budget, 52_000.0);
    assert_eq!(budgets, [(13, 2000.0), (4, 6500.0)]);
    assert_eq!(out.rounds.iter().map(Vec::len).collect::<Vec<_>>(), [13, 4]);
    assert_halving_structure(&out, 3);

    let first = &out.rounds[0];
    let tail: Vec<(usize, f64, bool)> = first[10..]
        .iter()
        .map(|r| (r.arm, r.metric, r.diverged))
        .collect();
    assert_eq!(
        tail,
        [
            (0, f64::INFINITY, true),
            (5, f64::INFINITY, true),
            (8, f64::INFINITY, false)
        ],
        "the diverged and exploding arms rank last, in grid order"
    );
    for r in &first[..10] {
        assert!(r.metric.is_finite() && !r.diverged, "{r:?}");
        assert_eq!(r.gradient_evaluations, 2000);
        assert_eq!(r.iterations, 1999);
        assert_eq!(r.draws, 199);
        assert_eq!(r.scored_draws, 199);
    }
    assert!(out.winner_metric.is_finite());
    assert!(![0, 5, 8].contains(&out.winner));
    assert!(out.winner_position.iter().all(|v| v.is_finite()));

    // The metric sees the latest round only: the winner's last-round draws are the tail of its
    // concatenated draws, and their KSD is the recorded metric, bit for bit.
    let per_round: Vec<usize> = out
        .rounds
        .iter()
        .map(|r| r.iter().find(|a| a.arm == out.winner).unwrap().draws)
        .collect();
    let total: usize = per_round.iter().sum();
    assert_eq!(out.winner_draws.len(), total * 2);
    let last = &out.winner_draws[(total - per_round[1]) * 2..];
    assert_eq!(ctx.metric(last, &imq(), 0), out.winner_metric);
    assert_ne!(ctx.metric(&out.winner_draws, &imq(), 0), out.winner_metric);
}

/// `max_scored_draws` caps the draws the metric sees: evenly spaced rows (every ⌈P/cap⌉-th) of
/// the round's draws, while every draw is still kept for the winner. Checked once by breaking
/// the code: scoring the first `cap` rows instead made the metric assertion fail (restored).
#[test]
fn max_scored_draws_scores_evenly_spaced_rows_of_the_round() {
    let model = gaussian_target();
    let ctx = context_at(&model, &MU);
    let g = grid("log10_step_size = [-1.0, -1.5, -2.0, -2.5]");
    let arms = expand_grid(
        &sampler_settings("kind = \"sgld\"\nstep_size = 1.0"),
        &gradient("estimator = \"full\"\nbatch_size = 1"),
        &g,
    )
    .unwrap();
    let capped = MambaSettings {
        max_scored_draws: Some(50),
        ..settings(2, TuneBudget::ArmEvaluations(6000.0), 10, 1, 11)
    };
    let out = mamba(&ctx, &arms, &capped, &mut |_, _| {}).unwrap();
    for round in &out.rounds {
        for r in round {
            assert!(r.draws > 50, "{r:?}");
            let thin = r.draws.div_ceil(50);
            assert_eq!(r.scored_draws, r.draws.div_ceil(thin), "{r:?}");
            assert!(r.scored_draws <= 50);
        }
    }
    let per_round: Vec<usize> = out
        .rounds
        .iter()
        .map(|r| r.iter().find(|a| a.arm == out.winner).unwrap().draws)
        .collect();
    let total: usize = per_round.iter().sum();
    assert_eq!(out.winner_draws.len(), total * 2, "every draw is kept");
    let last_n = *per_round.last().unwrap();
    let last = &out.winner_draws[(total - last_n) * 2..];
    let scored = sgmcmc::stein::every_kth_row(last, 2, last_n.div_ceil(50));
    assert_eq!(ctx.metric(&scored, &imq(), 0), out.winner_metric);

    let zero = MambaSettings {
        max_scored_draws: Some(0),
        ..capped
    };
    let err = mamba(&ctx, &arms, &zero, &mut |_, _| {})
        .unwrap_err()
        .to_string();
    assert!(err.contains("max_scored_draws"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// 3. Warm restart (§5.8 item 3).
// ---------------------------------------------------------------------------------------------

/// Four arms with η = 2 (K = 2: rounds of 4 and 2 arms); arms 1–3 have steps of 100 to 1000
/// (SGLD explodes; pSGLD, whose preconditioner normalises the step, just samples badly), so
/// arm 0 survives both rounds and wins. R = 300: r₀ = 100, T = 800, r₁ = 200 evaluations.
fn warm_restart_run(sampler: &str, log10_first: f64) -> (MambaOutcome, Vec<usize>) {
    let model = gaussian_target();
    let ctx = context_at(&model, &[4.0, 2.0]);
    let arms = expand_grid(
        &sampler_settings(sampler),
        &gradient("estimator = \"full\"\nbatch_size = 1"),
        &grid(&format!("log10_step_size = [{log10_first}, 2, 2.5, 3]")),
    )
    .unwrap();
    let out = mamba(
        &ctx,
        &arms,
        &settings(2, TuneBudget::ArmEvaluations(300.0), 1, 2, 7),
        &mut |_, _| {},
    )
    .unwrap();
    assert_eq!(out.winner, 0);
    assert_halving_structure(&out, 2);
    let iterations = out
        .rounds
        .iter()
        .map(|r| r.iter().find(|a| a.arm == 0).unwrap().iterations)
        .collect();
    (out, iterations)
}

/// SGLD with the noise switched off (T = 1e-300: noise sd ~1e-151, below the rounding of θ) is
/// the map θ ↦ μ + (1 − ε)(θ − μ). With a warm restart the draws over both rounds are that map
/// iterated k = 1, 2, …, 298 times from θ₀ with no break at the round boundary; a cold restart
/// would start round 1 again at k = 1.
#[test]
fn the_next_round_continues_from_the_last_iterate() {
    let (out, iterations) = warm_restart_run(
        "kind = \"sgld\"\nstep_size = 1.0\ntemperature = 1e-300",
        -1.5,
    );
    assert_eq!(iterations, [99, 199]);
    // SGLD arms 1–3 (growth factors 99–999 per step) are still finite after round 0's 99
    // iterations, but their KSD overflows: +∞, not a perfect 0.
    for r in &out.rounds[0][1..] {
        assert_eq!((r.metric, r.diverged), (f64::INFINITY, false), "{r:?}");
    }
    let eps = 10f64.powf(-1.5);
    let theta0 = [4.0, 2.0];
    assert_eq!(out.winner_draws.len(), 298 * 2);
    for (k, draw) in out.winner_draws.chunks_exact(2).enumerate() {
        let decay = (1.0 - eps).powi(k as i32 + 1);
        for j in 0..2 {
            let want = MU[j] + decay * (theta0[j] - MU[j]);
            assert!(
                (draw[j] - want).abs() < 1e-12,
                "draw {k}, coordinate {j}: {} vs {want}",
                draw[j]
            );
        }
    }
    assert_eq!(out.winner_position, out.winner_draws[297 * 2..]);
}

/// Auxiliary state restarts each round: the pSGLD arm (noise on, RMSProp accumulator V) is
/// replayed bit for bit by a fresh `Psgld` on the arm's stream `rng::stream(seed, 0)` started
/// at θ₀ for round 0's iterations, then a new `Psgld` started at round 0's last draw; a sampler
/// that carried V across the boundary gives different draws.
#[test]
fn auxiliary_state_restarts_every_round() {
    let (out, iterations) = warm_restart_run("kind = \"psgld\"\nstep_size = 1.0", -2.0);
    let model = gaussian_target();
    let eps = 1e-2;
    let new_sampler = || Psgld::new(StepSize::Langevin(eps), PsgldSettings::default()).unwrap();
    let replay = |restart: bool| {
        let mut rng = stream(7, 0);
        let mut est = FullBatch::new(&model);
        let mut sampler = new_sampler();
        sampler.start(&[4.0, 2.0], &mut est, &mut rng);
        let mut draws = Vec::new();
        for (round, &n) in iterations.iter().enumerate() {
            if round > 0 && restart {
                let last = sampler.position().to_vec();
                sampler = new_sampler();
                sampler.start(&last, &mut est, &mut rng);
            }
            for _ in 0..n {
                sampler.step(&mut est, &mut rng);
                draws.extend_from_slice(sampler.position());
            }
        }
        draws
    };
    assert_eq!(out.winner_draws, replay(true));
    let carried = replay(false);
    assert_eq!(
        carried[..iterations[0] * 2],
        out.winner_draws[..iterations[0] * 2]
    );
    assert_ne!(carried, out.winner_draws, "the replay can tell a carried V");
}

// ---------------------------------------------------------------------------------------------
// 4. Reproducibility.
// ---------------------------------------------------------------------------------------------

fn logistic(n: usize, w: &[f64], seed: u64) -> LogisticRegression {
    let (x, y) = common::logistic_data(seed, n, w, 0.3);
    let data = common::dataset(x, w.len(), Some(y), false);
    LogisticRegression::new(data, Bernoulli, NormalPrior::new(10.0).unwrap(), true).unwrap()
}

fn map_of(model: &dyn Model) -> Vec<f64> {
    let map = find_map(model, &vec![0.0; model.dim()], &LbfgsOptions::default()).unwrap();
    assert!(map.converged);
    map.theta
}

/// Arms start at the MAP of `model`; the metric's scores are the control-variate surrogate on
/// 500 points.
fn context_at_map(model: &dyn Model) -> TuneContext<'_> {
    let map = map_of(model);
    let mut score = vec![0.0; model.dim()];
    FullDataEvaluator::new(model).grad_log_posterior(&map, &mut score);
    TuneContext {
        model,
        scores: ScoreFunction::control_variates(model, &map, &score, 500, &mut stream(9, 99)),
        start: map,
        start_score: score,
    }
}

/// SGLD with control variates: 7 steps × batch 1 %, 10 % (14 arms).
fn sgld_cv_arms() -> Vec<ArmSettings> {
    expand_grid(
        &sampler_settings("kind = \"sgld\"\nstep_size = 1.0"),
        &gradient("estimator = \"control_variates\""),
        &grid("log10_step_size = { from = -2, to = -5, by = 0.5 }\nbatch_size = [\"1%\", \"10%\"]"),
    )
    .unwrap()
}

fn without_timings(out: &MambaOutcome) -> Vec<Vec<ArmRound>> {
    out.rounds
        .iter()
        .map(|round| {
            round
                .iter()
                .map(|r| ArmRound {
                    sampling_seconds: 0.0,
                    overhead_seconds: 0.0,
                    ..r.clone()
                })
                .collect()
        })
        .collect()
}

/// Same seed ⇒ the same outcome bit for bit (winner, every round's records but the timings,
/// the winner's draws and last iterate) on one thread and on two; another seed changes the draws.
/// Logistic regression (N = 4,000, d = 3 + intercept), SGLD with control variates, 14 arms
/// (7 steps × batch 1 %, 10 %), the metric's scores from the control-variate surrogate.
#[test]
fn same_seed_same_outcome_on_any_thread_count() {
    let model = logistic(4000, &[1.0, -1.5, 0.5], 3);
    let ctx = context_at_map(&model);
    let arms = sgld_cv_arms();
    let run = |threads: usize, seed: u64| {
        mamba(
            &ctx,
            &arms,
            &settings(3, TuneBudget::ArmEvaluations(2e6), 5, threads, seed),
            &mut |_, _| {},
        )
        .unwrap()
    };
    let one = run(1, 5);
    let two = run(2, 5);
    assert_eq!(one.threads, 1);
    assert_eq!(two.threads, 2);
    assert_halving_structure(&one, 3);
    assert_eq!(one.winner, two.winner);
    assert_eq!(one.winner_metric, two.winner_metric);
    assert_eq!(without_timings(&one), without_timings(&two));
    assert_eq!(one.winner_draws, two.winner_draws);
    assert_eq!(one.winner_position, two.winner_position);
    assert!(!one.winner_draws.is_empty());

    let other = run(2, 6);
    let first_round_draws = one.rounds[0].iter().find(|r| r.arm == 0).unwrap().draws;
    assert!(first_round_draws > 0);
    if other.winner == one.winner {
        assert_ne!(other.winner_draws, one.winner_draws);
    }
    let metrics = |o: &MambaOutcome| -> Vec<(usize, f64)> {
        let mut m: Vec<_> = o.rounds[0].iter().map(|r| (r.arm, r.metric)).collect();
        m.sort_by_key(|p| p.0);
        m
    };
    assert_ne!(metrics(&one), metrics(&other), "another seed, other draws");
}

/// Resume (issue 25): the progress saved after each round, read back from its bytes and
/// resumed, gives the uninterrupted run's outcome bit for bit (winner, every round's records
/// but the timings, the winner's draws and last iterate); the resumed run replays the earlier
/// rounds to `on_round` and runs only the later ones. Progress of another grid is refused.
/// Same model and grid as the reproducibility test above (14 arms, η = 3: rounds of 14 and 4).
#[test]
fn a_run_resumed_after_any_round_ends_as_the_uninterrupted_run() {
    let model = logistic(4000, &[1.0, -1.5, 0.5], 3);
    let ctx = context_at_map(&model);
    let arms = sgld_cv_arms();
    let tuning = settings(3, TuneBudget::ArmEvaluations(2e6), 5, 2, 5);
    let mut saved: Vec<Vec<u8>> = Vec::new();
    let whole = mamba_resumable(&ctx, &arms, &tuning, None, &mut |_, _| {}, &mut |p| {
        saved.push(p.encode().unwrap());
        Ok(())
    })
    .unwrap();
    assert_eq!(saved.len(), whole.rounds.len());
    assert!(
        whole.rounds.len() >= 2,
        "the test needs a round after the first"
    );
    for (done, bytes) in saved.iter().enumerate() {
        let progress = MambaProgress::decode(bytes, &arms, model.dim()).unwrap();
        let mut seen = Vec::new();
        let resumed = mamba_resumable(
            &ctx,
            &arms,
            &tuning,
            Some(progress),
            &mut |records, _| seen.push(records[0].round),
            &mut |_| Ok(()),
        )
        .unwrap();
        assert_eq!(seen, (0..whole.rounds.len()).collect::<Vec<_>>());
        assert_eq!(resumed.winner, whole.winner, "resumed after round {done}");
        assert_eq!(resumed.winner_metric, whole.winner_metric);
        assert_eq!(without_timings(&resumed), without_timings(&whole));
        assert_eq!(resumed.winner_draws, whole.winner_draws);
        assert_eq!(resumed.winner_position, whole.winner_position);
    }
    // The rounds after the first are not run again: no sampling time is spent in them.
    let last = MambaProgress::decode(saved.last().unwrap(), &arms, model.dim()).unwrap();
    let again = mamba_resumable(
        &ctx,
        &arms,
        &tuning,
        Some(last),
        &mut |_, _| {},
        &mut |_| panic!("no round runs after the last"),
    )
    .unwrap();
    assert_eq!(again.winner_draws, whole.winner_draws);

    // Progress of another grid (fewer arms) or another model dimension is refused.
    let e = MambaProgress::decode(&saved[0], &arms[..3], model.dim()).unwrap_err();
    assert!(e.to_string().contains("of a grid of 3 arms"), "{e}");
    let e = MambaProgress::decode(&saved[0], &arms, model.dim() + 1).unwrap_err();
    assert!(e.to_string().contains("not a multiple"), "{e}");
}

/// Arms run "elsewhere" (issue 26): each arm's round sent as bytes (its state), run alone
/// ([`run_arm_round_alone`]) and sent back as bytes, as a cluster's tasks run them, gives the
/// local run's outcome bit for bit; a runner that sends back other arms is an error that says so.
struct ThroughBytes<'a, 'm> {
    ctx: &'a TuneContext<'m>,
    arms: &'a [ArmSettings],
    settings: &'a MambaSettings,
    /// Send back the arms in reverse order (a broken runner).
    reversed: bool,
}

impl RoundRunner for ThroughBytes<'_, '_> {
    fn run_round(
        &self,
        round: usize,
        arms: &[(usize, Arm)],
        budget_per_arm: f64,
    ) -> Result<Vec<ArmRoundResult>, TuneError> {
        let dim = self.ctx.model.dim();
        let mut back = Vec::new();
        for (a, state) in arms {
            let state = Arm::decode(&state.encode().unwrap(), dim).unwrap();
            let result = run_arm_round_alone(
                self.ctx,
                &self.arms[*a],
                *a,
                state,
                round,
                budget_per_arm,
                self.settings,
            )?;
            back.push(ArmRoundResult::decode(&result.encode().unwrap(), dim).unwrap());
        }
        if self.reversed {
            back.reverse();
        }
        Ok(back)
    }
}

#[test]
fn arms_run_elsewhere_give_the_local_outcome() {
    let model = logistic(4000, &[1.0, -1.5, 0.5], 3);
    let ctx = context_at_map(&model);
    let arms = sgld_cv_arms();
    let tuning = settings(3, TuneBudget::ArmEvaluations(2e6), 5, 2, 5);
    let local = mamba(&ctx, &arms, &tuning, &mut |_, _| {}).unwrap();
    let run = |reversed: bool| {
        let runner = ThroughBytes {
            ctx: &ctx,
            arms: &arms,
            settings: &tuning,
            reversed,
        };
        mamba_on(
            &ctx,
            &arms,
            &tuning,
            None,
            Some(&runner),
            &mut |_, _| {},
            &mut |_| Ok(()),
        )
    };
    let elsewhere = run(false).unwrap();
    assert_eq!(elsewhere.winner, local.winner);
    assert_eq!(without_timings(&elsewhere), without_timings(&local));
    assert_eq!(elsewhere.winner_draws, local.winner_draws);
    assert_eq!(elsewhere.winner_position, local.winner_position);
    let e = run(true).unwrap_err().to_string();
    assert!(e.contains("came back for arms"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// 5. End to end (§5.8 item 5, reduced).
// ---------------------------------------------------------------------------------------------

/// Seeds of the end-to-end check (the spec's 10; the whole test takes about 47 s on 2 cores, most
/// of it the reference runs).
const E2E_SEEDS: u64 = 10;
/// R, in per-datum gradient evaluations (100 full passes).
const E2E_BUDGET: f64 = 1e7;
/// Independent runs per arm whose mean KSD is the reference (one run's KSD is noisy: see
/// below).
const REFERENCE_RUNS: usize = 3;

/// §5.8 item 5, reduced: the Gaussian test model with D = 10, N = 10⁵ (xᵢ ~ N(loc, I), prior
/// N(0, 10·I)); SGLD over log10 ε ∈ {−3, −3.5, …, −8} × batch {100, 10, 1} % (33 arms, η = 3,
/// K = 3: rounds of 33, 11 and 3 arms), R = 10⁷ evaluations, thin 10, IMQ KSD of each round's
/// draws. For each seed, MAMBA's winner is compared with the arm of least mean KSD when every
/// arm runs [`REFERENCE_RUNS`] times, from the same start, for the winner's cumulative
/// evaluations (each run on its own stream, thinned by 10). The choice must have the same batch
/// size and a step at most one grid step away in at least 8 of the 10 seeds (the spec's 80 %).
///
/// Scores: the control-variate surrogate (m = 100). For this model it is the exact score, not
/// an approximation: ∇log p(xᵢ | θ) = xᵢ − θ, so Σ_S[∇ℓᵢ(θ) − ∇ℓᵢ(θ̂)] = m(θ̂ − θ) for any S,
/// and s̃(θ) = ∇log p(θ) + L(θ̂) + N(θ̂ − θ) = s(θ); the test checks this to rounding. The exact
/// full-batch score would cost N = 10⁵ evaluations per draw, more than the sampling.
///
/// What to expect (a back-of-envelope model, not asserted): with P ≈ N the posterior precision,
/// an arm's KSD²_V ≈ P·D·a·max(10, τ)·n/B + D(a − 1)², a the variance inflation of its
/// stationary law (discretisation and minibatch noise), τ ≈ 2/(εP) its autocorrelation time in
/// iterations, n its batch size and B its budget. So the 1 % batch at ε ≈ 10^−6…10^−6.5 wins,
/// with an expected KSD² about 2.4× below the best 10 % arm's. The first term is mostly
/// ‖mean score‖², a scaled χ²₁₀ (relative sd √(2/10) ≈ 45 %), so a single reference run per
/// arm itself sometimes ranks a 10 % arm first: with one run, seed 4 did (10 % at ε = 10^−5.5,
/// KSD 120 vs 134 for 1 % at 10^−6.5, while MAMBA chose 1 % at 10^−6), and after the uniform
/// draws changed (rejection sampling, 2026-12-07) seeds 6 and 7 did (seed 7: 105.2 for 10 %
/// at 10^−6 against 105.9 for 1 % at 10^−6, MAMBA's choice), and at seed 2 MAMBA's step was two
/// grid steps from the reference's: 7 of 10 seeds agreed
/// (docs/experiments/data/sgld_rejection/mamba_e2e_*.txt). So the reference is the mean KSD of
/// [`REFERENCE_RUNS`] independent runs per arm, an estimate of the expected KSD at that budget,
/// whose minimiser the spec's criterion is about. That is also why the spec asks 8 of 10 and
/// not 10 of 10.
#[test]
fn mamba_picks_the_arm_with_the_least_ksd_at_its_budget() {
    use rayon::prelude::*;
    let started = std::time::Instant::now();
    let d = 10;
    let loc: Vec<f64> = (0..d).map(|j| j as f64 * 0.3 - 1.0).collect();
    let (model, _, mean, _) = common::gtm(31, 100_000, 1000, 10.0, &loc, &vec![1.0; d]);
    let mut start_score = vec![0.0; d];
    FullDataEvaluator::new(&model).grad_log_posterior(&mean, &mut start_score);
    let scores =
        ScoreFunction::control_variates(&model, &mean, &start_score, 100, &mut stream(3, 0));
    for k in [1.0, -3.0] {
        let theta: Vec<f64> = mean.iter().map(|m| m + k * 0.01).collect();
        let (got, want) = (
            scores.scores(&theta),
            ScoreFunction::exact(&model).scores(&theta),
        );
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-9 * w.abs().max(1.0), "{g} vs {w}");
        }
    }
    let ctx = TuneContext {
        model: &model,
        start: mean,
        start_score,
        scores,
    };
    let arms = expand_grid(
        &sampler_settings("kind = \"sgld\"\nstep_size = 1.0"),
        &gradient(""),
        &grid("log10_step_size = { from = -3, to = -8, by = 0.5 }\nbatch_size = [\"100%\", \"10%\", \"1%\"]"),
    )
    .unwrap();
    assert_eq!(arms.len(), 33);
    // Arm k = 3·(step index) + (batch index).
    let (step_of, batch_of) = (|a: usize| a / 3, |a: usize| a % 3);
    let mut agree = 0;
    for seed in 0..E2E_SEEDS {
        let out = mamba(
            &ctx,
            &arms,
            &settings(3, TuneBudget::ArmEvaluations(E2E_BUDGET), 10, 0, 100 + seed),
            &mut |_, _| {},
        )
        .unwrap();
        assert_eq!(
            out.rounds.iter().map(Vec::len).collect::<Vec<_>>(),
            [33, 11, 3]
        );
        let cumulative: u64 = out
            .rounds
            .iter()
            .map(|r| {
                r.iter()
                    .find(|a| a.arm == out.winner)
                    .unwrap()
                    .gradient_evaluations
            })
            .sum();
        let reference: Vec<f64> = (0..arms.len() * REFERENCE_RUNS)
            .into_par_iter()
            .map(|k| {
                let (a, run) = (k / REFERENCE_RUNS, k % REFERENCE_RUNS);
                let (mut sampler, mut estimator) = ctx.build(&arms[a]).unwrap();
                let rng = stream(200 + seed + 1000 * run as u64, a as u64);
                let mut arm = sgmcmc::tuning::Arm::new(&ctx.start, rng);
                let seg = arm.run_round(
                    sampler.as_mut(),
                    estimator.as_mut(),
                    sgmcmc::runner::Budget::GradientEvaluations(cumulative),
                    10,
                );
                if seg.diverged {
                    f64::INFINITY
                } else {
                    ctx.metric(&seg.draws, &imq(), 0)
                }
            })
            .collect::<Vec<f64>>()
            .chunks(REFERENCE_RUNS)
            .map(|runs| runs.iter().sum::<f64>() / REFERENCE_RUNS as f64)
            .collect();
        let best = (0..arms.len())
            .min_by(|&a, &b| reference[a].total_cmp(&reference[b]))
            .unwrap();
        let ok = batch_of(best) == batch_of(out.winner)
            && step_of(best).abs_diff(step_of(out.winner)) <= 1;
        agree += usize::from(ok);
        eprintln!(
            "seed {seed}: MAMBA {} ({}), KSD {:.3}; least KSD at {} evaluations: {} ({}), KSD {:.3}; {}",
            out.winner,
            arms[out.winner].label(),
            out.winner_metric,
            cumulative,
            best,
            arms[best].label(),
            reference[best],
            if ok { "agree" } else { "DISAGREE" }
        );
        let mut order: Vec<usize> = (0..arms.len()).collect();
        order.sort_by(|&a, &b| reference[a].total_cmp(&reference[b]));
        for &a in order.iter().take(4) {
            eprintln!("   {:>2} {:<40} {:.3}", a, arms[a].label(), reference[a]);
        }
    }
    eprintln!(
        "{agree} of {E2E_SEEDS} seeds agree; {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        agree * 5 >= E2E_SEEDS as usize * 4,
        "{agree} of {E2E_SEEDS} seeds agree (need 80 %)"
    );
}

// ---------------------------------------------------------------------------------------------
// 6. The control-variate surrogate.
// ---------------------------------------------------------------------------------------------

/// The surrogate s̃(θ) = ∇log p(θ) + L(θ̂) + (N/m)·Σ_{i∈S}[∇ℓᵢ(θ) − ∇ℓᵢ(θ̂)] against the exact
/// score s(θ) = ∇log p(θ) + Σᵢ ∇ℓᵢ(θ), on logistic regression with N = 20,000, d = 10 (+ an
/// intercept), m = 1,000:
///
/// - at the centre θ̂ both are L(θ̂) + ∇log p(θ̂), to rounding (checked at the MAP and at a
///   centre away from it, where the score is far from 0);
/// - with m ≥ N the surrogate is the exact score itself;
/// - away from θ̂, s̃(θ) − s(θ) = (N/m)·Σ_S dᵢ − Σᵢ dᵢ with dᵢ = ∇ℓᵢ(θ) − ∇ℓᵢ(θ̂): the error of
///   the simple-random-sample estimate of a population total, exactly unbiased over S with sd
///   seⱼ = N·sqrt((1 − m/N)·S²ⱼ/m) per coordinate (S²ⱼ the population variance of dᵢⱼ, divisor
///   N − 1; Cochran, Sampling Techniques, Thm 2.2). So E‖s̃ − s‖² = ‖se‖² and the rms relative
///   error is ρ = ‖se‖/‖s‖ ≈ sqrt((1 − m/N)/m)·CV, CV the spread of dᵢ over its mean: both
///   ‖se‖ and ‖s‖ grow like ‖θ − θ̂‖, so ρ hardly depends on the distance. For θ at 1, 2 and
///   3 posterior sd (Laplace) from the MAP, every coordinate's error is within 4.5 seⱼ, the
///   relative error ‖s̃ − s‖/‖s‖ within 3ρ, and ρ itself ≤ 0.15 (here 0.116–0.120, CV ≈ 4):
///   the surrogate's scores are ~12 % off the exact ones, in random directions, at m = 1,000.
#[test]
fn surrogate_scores_match_the_exact_score() {
    let w = [1.0, -0.8, 0.5, 0.3, -0.2, 0.0, 0.7, -1.2, 0.4, 0.1];
    let model = logistic(20_000, &w, 17);
    let n = model.num_data();
    let d = model.dim();
    let m = 1000;
    let map = map_of(&model);
    let exact = ScoreFunction::exact(&model);
    let full_score = |theta: &[f64]| exact.scores(theta);

    // At the centre: the MAP, and a point 0.05 away in every coordinate.
    for centre in [map.clone(), map.iter().map(|v| v + 0.05).collect()] {
        let s = full_score(&centre);
        let surrogate = ScoreFunction::control_variates(&model, &centre, &s, m, &mut stream(1, 2));
        assert!(!surrogate.is_exact());
        assert_eq!(surrogate.cost_per_draw(), m);
        let got = surrogate.scores(&centre);
        for j in 0..d {
            // The terms summed are at most N·max|xᵢⱼ| ≈ 10⁵ in size: rounding ~1e-16 of that.
            assert!(
                (got[j] - s[j]).abs() < 1e-8,
                "coordinate {j}: surrogate {} vs exact {} at the centre",
                got[j],
                s[j]
            );
        }
    }

    // m ≥ N: the exact score.
    let s_map = full_score(&map);
    for big in [n, n + 1] {
        let f = ScoreFunction::control_variates(&model, &map, &s_map, big, &mut stream(1, 3));
        assert!(f.is_exact());
        let theta: Vec<f64> = map.iter().map(|v| v + 0.1).collect();
        assert_eq!(f.scores(&theta), full_score(&theta));
    }

    // Away from the centre.
    let surrogate = ScoreFunction::control_variates(&model, &map, &s_map, m, &mut stream(1, 4));
    let cov = laplace_at(&model, &map).unwrap().covariance;
    let sd: Vec<f64> = (0..d).map(|j| cov[j * d + j].sqrt()).collect();
    let all: Vec<DataIndex> = (0..n as DataIndex).collect();
    let mut scratch = Scratch::new();
    let mut at_map = vec![0.0; n * d];
    model.grad_log_lik_each(&map, &all, &mut at_map, &mut scratch);
    let mut worst = 0.0f64;
    for (case, k) in [1.0, 2.0, 3.0, 1.0, 2.0, 3.0].into_iter().enumerate() {
        let z = common::normals(23, case as u64, d);
        let theta: Vec<f64> = (0..d).map(|j| map[j] + k * sd[j] * z[j].signum()).collect();
        let mut at_theta = vec![0.0; n * d];
        model.grad_log_lik_each(&theta, &all, &mut at_theta, &mut scratch);
        let se: Vec<f64> = (0..d)
            .map(|j| {
                let diff: Vec<f64> = (0..n)
                    .map(|i| at_theta[i * d + j] - at_map[i * d + j])
                    .collect();
                n as f64 * ((1.0 - m as f64 / n as f64) * common::var(&diff) / m as f64).sqrt()
            })
            .collect();
        let s = full_score(&theta);
        let got = surrogate.scores(&theta);
        let err: Vec<f64> = got.iter().zip(&s).map(|(a, b)| a - b).collect();
        for j in 0..d {
            assert!(
                err[j].abs() <= 4.5 * se[j],
                "θ at {k} sd, coordinate {j}: error {} vs se {}",
                err[j],
                se[j]
            );
        }
        let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
        let relative = norm(&err) / norm(&s);
        let rho = norm(&se) / norm(&s);
        eprintln!("θ at {k} sd: relative error {relative:.4}, rms relative error ρ {rho:.4}");
        assert!(
            relative <= 3.0 * rho,
            "relative error {relative} vs ρ = {rho}"
        );
        assert!(rho <= 0.15, "ρ = {rho}");
        worst = worst.max(relative);
    }
    eprintln!("worst relative error {worst:.4}");
}

/// An arm's estimator follows its `[gradient]` table's minibatch scheme, control variates (built
/// on the shared centre score) included: with the same stream, the arm's estimate equals that of
/// an estimator built from the table directly, and blocks differ from uniform rows.
#[test]
fn arm_estimators_keep_the_minibatch_scheme() {
    let model = logistic_1d_sorted();
    let start = [0.3];
    let ctx = context_at(&model, &start);
    let sgld = sampler_settings("kind = \"sgld\"\nstep_size = 1e-3");
    let estimate = |table: &str, from_arm: bool| {
        let g = gradient(table);
        let mut out = [0.0];
        let mut rng = stream(21, 0);
        if from_arm {
            let arm = ArmSettings {
                sampler: sgld.clone(),
                gradient: g,
                values: Vec::new(),
            };
            let (_, mut est) = ctx.build(&arm).unwrap();
            est.estimate(&[0.5], &mut out, &mut rng);
        } else {
            let mut est = g.build(&model, Some(&start)).unwrap();
            est.estimate(&[0.5], &mut out, &mut rng);
        }
        out[0]
    };
    let block = "estimator = \"control_variates\"\nbatch_size = 10\nscheme = \"block\"";
    let uniform = "estimator = \"control_variates\"\nbatch_size = 10";
    assert_eq!(estimate(block, true), estimate(block, false));
    assert_eq!(estimate(uniform, true), estimate(uniform, false));
    assert_ne!(estimate(block, true), estimate(uniform, true));
}

/// Logistic regression on 200 sorted one-feature rows (blocks of them are far from random).
fn logistic_1d_sorted() -> LogisticRegression {
    let x: Vec<f64> = (0..200).map(|i| i as f64 / 50.0 - 2.0).collect();
    let y: Vec<f64> = (0..200).map(|i| f64::from(u8::from(i % 3 != 0))).collect();
    let data = sgmcmc::data::Dataset {
        features: sgmcmc::data::Features::F64(sgmcmc::data::Matrix::from_vec(x, 200, 1).unwrap()),
        targets: Some(y),
        feature_names: Vec::new(),
        features_source: "sorted rows".into(),
        targets_source: None,
    };
    LogisticRegression::new(data, Bernoulli, NormalPrior::new(10.0).unwrap(), false).unwrap()
}
