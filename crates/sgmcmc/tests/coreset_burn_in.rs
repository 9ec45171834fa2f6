//! The coreset burn-in trace (`HotStartSettings::record_trace`; the tuning-free paper's Figs. 5,
//! 10 and 11): one point per warm-up iteration with ‖ĝ‖ and, where the test was checked, the
//! statistic median(u₁, …, u_K); recording it leaves the run's chains, weights and draws as they
//! were; it cannot be combined with checkpoints.
//!
//! Break-once check: the trace's gradient drawn from the loop's own stream (the one the
//! training subsamples use) made `recording_the_trace_changes_nothing_else` fail ("the weights
//! differ"); restored.

use crate::common;

use sgmcmc::coreset::{
    Coreset, CoresetCheckpoints, CoresetKernel, CoresetRun, CoresetSettings, HotDog,
    HotStartSettings, SliceKernel, SliceSettings, SubsampleScheme, run_coreset_mcmc,
};
use sgmcmc::data::{Features, Matrix};
use sgmcmc::model::{GaussianModel, Model};
use sgmcmc::rng::stream;
use std::time::Duration;

/// Hot DoG with slice chains started far from the posterior (θ₀ = 4), so that warm-up lasts.
fn run(
    record_trace: bool,
    checkpoints: Option<CoresetCheckpoints<'_>>,
) -> Result<CoresetRun, String> {
    let (n, d, seed) = (400, 2, 5);
    let x = common::normals(6, 0, n * d);
    let identity = [1.0, 0.0, 0.0, 1.0];
    let model = GaussianModel::new(
        Features::F64(Matrix::from_vec(x, n, d).unwrap()),
        &identity,
        1.0,
    )
    .unwrap();
    let mut init = stream(seed, 3);
    let coreset = Coreset::uniform(model.num_data(), 40, &mut init).unwrap();
    let mut kernels: Vec<Box<dyn CoresetKernel>> = (0..2)
        .map(|c| -> Box<dyn CoresetKernel> {
            let theta0 = vec![4.0 + 0.5 * c as f64; d];
            Box::new(SliceKernel::new(SliceSettings::default(), theta0).unwrap())
        })
        .collect();
    let mut optimiser = HotDog::new(&coreset.weights, HotDog::DEFAULT_R).unwrap();
    let settings = CoresetSettings {
        train_iterations: 300,
        draws: 100,
        subsample: 40,
        scheme: SubsampleScheme::Uniform,
        newton_correction: false,
        hot_start: HotStartSettings {
            check_every: 1,
            record_trace,
            ..HotStartSettings::default()
        },
        record_every: 50,
    };
    run_coreset_mcmc(
        &model,
        coreset,
        &mut kernels,
        &mut optimiser,
        &settings,
        seed,
        None,
        None,
        checkpoints,
    )
    .map_err(|e| e.to_string())
}

fn bits(values: &[f64]) -> Vec<u64> {
    values.iter().map(|v| v.to_bits()).collect()
}

#[test]
fn recording_the_trace_changes_nothing_else() {
    let plain = run(false, None).unwrap();
    let traced = run(true, None).unwrap();
    assert!(plain.burn_in.is_empty());
    assert_eq!(
        bits(&plain.coreset.weights),
        bits(&traced.coreset.weights),
        "the weights differ"
    );
    assert_eq!(plain.hot_start_iteration, traced.hot_start_iteration);
    for (a, b) in plain.draws.iter().zip(&traced.draws) {
        assert_eq!(bits(a), bits(b), "the draws differ");
    }
}

#[test]
fn the_trace_covers_warm_up_and_shows_where_the_test_passed() {
    let run = run(true, None).unwrap();
    assert!(
        run.hot_start_passed,
        "the test should pass within 300 iterations"
    );
    let passed = run.hot_start_iteration.unwrap();
    assert!(
        passed >= 6,
        "warm-up should last beyond 3·dim (passed at {passed})"
    );
    // One point per warm-up iteration, the last at the pass.
    let iterations: Vec<usize> = run.burn_in.iter().map(|p| p.iteration).collect();
    assert_eq!(iterations, (0..=passed).collect::<Vec<_>>());
    assert!(
        run.burn_in
            .iter()
            .all(|p| p.gradient_norm.is_finite() && p.gradient_norm > 0.0)
    );
    // The statistic is checked from i = 3·dim on (check_every = 1); it is ≥ c until the pass
    // and below c there.
    for p in &run.burn_in {
        match (p.iteration < 6, p.statistic) {
            (true, s) => assert_eq!(s, None, "checked before 3·dim at {}", p.iteration),
            (false, Some(u)) if p.iteration < passed => {
                assert!(
                    u >= 0.5,
                    "statistic {u} < c at {} before the pass",
                    p.iteration
                )
            }
            (false, Some(u)) => assert!(u < 0.5, "statistic {u} at the pass"),
            (false, None) => {}
        }
    }
    assert!(run.burn_in.last().unwrap().statistic.is_some());
    // From θ₀ = 4 the chains fall into the posterior: the gradient norm drops by far.
    let first = run.burn_in[0].gradient_norm;
    let last = run.burn_in.last().unwrap().gradient_norm;
    assert!(
        first > 3.0 * last,
        "‖ĝ‖ {first} at the start against {last} at the pass"
    );
}

#[test]
fn the_trace_refuses_checkpoints() {
    let mut save = |_: &[u8]| -> Result<(), String> { Ok(()) };
    let checkpoints = CoresetCheckpoints {
        save: &mut save,
        interval: Duration::from_secs(3600),
        resume: None,
    };
    let err = run(true, Some(checkpoints)).unwrap_err();
    assert!(err.contains("not checkpointed"), "{err}");
}
