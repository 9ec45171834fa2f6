//! Control variates and SVRG (reference §3.2, §3.3 and "How to test the estimators"):
//! unbiasedness, exactness on the Gaussian test model, the O(‖θ − θ̂‖²) variance on logistic
//! regression, SVRG's refresh schedule, and SGLD driven by control variates.

use crate::common;

use common::{
    Section21, dataset, draw_estimates, features, full_gradient, logistic_data, mean, normals,
    pooled_mean_mcse, section_2_1,
};
use rand::Rng;
use sgmcmc::estimator::{
    BatchSize, ControlVariates, EstimatorError, GradientEstimator, Minibatch, Svrg,
};
use sgmcmc::io::MemorySink;
use sgmcmc::model::{Bernoulli, GaussianModel, LogisticRegression, Model, NormalPrior};
use sgmcmc::optim::find_map;
use sgmcmc::optim::lbfgs::LbfgsOptions;
use sgmcmc::rng::{fill_standard_normal, stream};
use sgmcmc::runner::{Budget, Chain, NoProgress, RunError, RunSettings, run};
use sgmcmc::sampler::{Sgld, StepSize};

const N: usize = 2_000;
const BATCH: usize = 50;

fn logistic_model(n: usize) -> LogisticRegression {
    let w = [1.0, -0.5, 0.8, 0.0, -1.3];
    let (x, y) = logistic_data(21, n, &w, 0.4);
    LogisticRegression::new(
        dataset(x, 5, Some(y), false),
        Bernoulli,
        NormalPrior::new(10.0).unwrap(),
        true,
    )
    .unwrap()
}

/// The GTM of §2.0 (identity likelihood covariance), D = 3, prior variance 4.
fn gtm(n: usize) -> (GaussianModel, Vec<f64>) {
    let x: Vec<f64> = normals(23, 0, n * 3)
        .iter()
        .map(|v| 0.5 + 2.0 * v)
        .collect();
    let eye = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0];
    (
        GaussianModel::new(features(x.clone(), 3), &eye, 4.0).unwrap(),
        x,
    )
}

fn map_of(model: &dyn Model) -> Vec<f64> {
    let r = find_map(model, &vec![0.0; model.dim()], &LbfgsOptions::default()).unwrap();
    assert!(r.converged, "MAP search did not converge: {r:?}");
    r.theta
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// `reps` SVRG estimates at `theta`, with every refresh call (i ≡ 0 mod r) made at `centre`, so
/// the centre is `centre` throughout; refresh outputs are discarded.
fn draw_svrg_estimates(est: &mut Svrg, centre: &[f64], theta: &[f64], reps: usize) -> Vec<f64> {
    let d = theta.len();
    let r = est.update_rate();
    let mut rng = stream(5, 0);
    let mut out = vec![0.0; reps * d];
    let mut scratch = vec![0.0; d];
    let mut call = 0usize;
    for row in out.chunks_exact_mut(d) {
        if call.is_multiple_of(r) {
            est.estimate(centre, &mut scratch, &mut rng);
            call += 1;
        }
        est.estimate(theta, row, &mut rng);
        call += 1;
    }
    assert_eq!(est.full_passes(), call.div_ceil(r));
    out
}

/// Sum over coordinates of the sample variances (the trace of the estimates' covariance).
fn total_variance(draws: &[f64], d: usize) -> f64 {
    (0..d)
        .map(|j| common::var(&common::column(draws, d, j)))
        .sum()
}

/// z-test of E[ĝ] = ∇log π per coordinate: the estimates are independent given the centre, so
/// the standard error of their mean is sd/√reps; tolerance 4 SE (§1.6) plus a rounding allowance
/// `round` for estimators that are exact (sd = 0 to rounding).
fn assert_mean_matches(draws: &[f64], full: &[f64], round: f64, label: &str) {
    let d = full.len();
    let reps = draws.len() / d;
    for (j, &full_j) in full.iter().enumerate() {
        let col = common::column(draws, d, j);
        let (m, v) = (mean(&col), common::var(&col));
        let tol = 4.0 * (v / reps as f64).sqrt() + round;
        assert!(
            (m - full_j).abs() <= tol,
            "{label}: coordinate {j}: mean of estimates {m} vs full gradient {full_j} (tol {tol})"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// (a) Unbiasedness.
// ---------------------------------------------------------------------------------------------

#[test]
fn cv_and_svrg_are_unbiased_on_logistic_regression() {
    let model = logistic_model(N);
    let d = model.dim();
    let centre = map_of(&model);
    // θ well away from the centre (≈ 0.35 per coordinate; posterior sd here is ≈ 0.03–0.06).
    let offsets = [0.3, -0.4, 0.25, 0.35, -0.3, 0.45];
    let theta: Vec<f64> = centre.iter().zip(offsets).map(|(c, o)| c + o).collect();
    let full = full_gradient(&model, &theta);
    let reps = 20_000;

    let mut cv = ControlVariates::new(&model, BatchSize::Count(BATCH), &centre).unwrap();
    assert_eq!(cv.cost_per_estimate(), 2 * BATCH);
    let draws = draw_estimates(&mut cv, &theta, reps, 5);
    assert!(
        total_variance(&draws, d) > 0.0,
        "CV estimates have no noise"
    );
    assert_mean_matches(&draws, &full, 0.0, "CV, logistic");

    let mut svrg = Svrg::new(&model, BatchSize::Count(BATCH), None).unwrap();
    assert_eq!(svrg.update_rate(), N / BATCH);
    let draws = draw_svrg_estimates(&mut svrg, &centre, &theta, reps);
    assert!(
        total_variance(&draws, d) > 0.0,
        "SVRG estimates have no noise"
    );
    assert_mean_matches(&draws, &full, 0.0, "SVRG, logistic");
}

/// On the GTM both estimators are exact (test (b)), so the z-test's SE is 0 to rounding; the
/// allowance is the rounding bound of test (b).
#[test]
fn cv_and_svrg_are_unbiased_on_the_gaussian_model() {
    let (model, x) = gtm(N);
    let centre = model.posterior_mean();
    let theta: Vec<f64> = centre.iter().map(|c| c + 0.7).collect();
    let full = full_gradient(&model, &theta);
    let round = 1e-9 * gtm_scale(&x, &theta, &centre);
    let reps = 20_000;

    let mut cv = ControlVariates::new(&model, BatchSize::Count(BATCH), &centre).unwrap();
    let draws = draw_estimates(&mut cv, &theta, reps, 6);
    assert_mean_matches(&draws, &full, round, "CV, Gaussian");

    let mut svrg = Svrg::new(&model, BatchSize::Count(BATCH), None).unwrap();
    let draws = draw_svrg_estimates(&mut svrg, &centre, &theta, reps);
    assert_mean_matches(&draws, &full, round, "SVRG, Gaussian");
}

// ---------------------------------------------------------------------------------------------
// (b) Exactness on the GTM (reference "How to test the estimators", 2).
// ---------------------------------------------------------------------------------------------

/// Magnitude of the sums an estimate is built from on the GTM: N·(max|x| + max|θ| + max|θ̂|).
/// f64 sums of ≤ N such terms are exact to ≈ N·2⁻⁵³ relative, far below 1e-9.
fn gtm_scale(x: &[f64], theta: &[f64], centre: &[f64]) -> f64 {
    let m = |v: &[f64]| v.iter().fold(0.0f64, |a, b| a.max(b.abs()));
    N as f64 * (m(x) + m(theta) + m(centre))
}

#[test]
fn cv_and_svrg_are_exact_on_the_gtm() {
    let (model, x) = gtm(N);
    let d = model.dim();
    let mut rng = stream(31, 0);
    for batch in [1usize, BATCH, N] {
        for case in 0..5 {
            // Random θ̂ and θ (scaled up to 10 away from the data mean).
            let mut centre = vec![0.0; d];
            let mut theta = vec![0.0; d];
            fill_standard_normal(&mut rng, &mut centre);
            fill_standard_normal(&mut rng, &mut theta);
            theta.iter_mut().for_each(|t| *t *= 1.0 + 2.0 * case as f64);
            let full = full_gradient(&model, &theta);
            let tol = 1e-9 * gtm_scale(&x, &theta, &centre);

            let mut cv = ControlVariates::new(&model, BatchSize::Count(batch), &centre).unwrap();
            let draws = draw_estimates(&mut cv, &theta, 200, 7 + case as u64);
            let dev = draws
                .chunks_exact(d)
                .flat_map(|r| r.iter().zip(&full).map(|(a, b)| (a - b).abs()))
                .fold(0.0f64, f64::max);
            assert!(dev <= tol, "CV, n = {batch}: max deviation {dev} > {tol}");

            // SVRG along a random walk, refreshing every 7 calls: every estimate is exact.
            let mut svrg = Svrg::new(&model, BatchSize::Count(batch), Some(7)).unwrap();
            let mut t = centre.clone();
            let mut step = vec![0.0; d];
            let mut got = vec![0.0; d];
            for _ in 0..50 {
                fill_standard_normal(&mut rng, &mut step);
                t.iter_mut().zip(&step).for_each(|(a, s)| *a += s);
                svrg.estimate(&t, &mut got, &mut rng);
                let want = full_gradient(&model, &t);
                let tol = 1e-9 * gtm_scale(&x, &t, svrg.centre());
                for (a, b) in got.iter().zip(&want) {
                    assert!((a - b).abs() <= tol, "SVRG, n = {batch}: {a} vs {b}");
                }
            }
        }
    }
}

/// With n = N the control-variate estimate is the full gradient to rounding on any model, and
/// no random numbers are drawn.
#[test]
fn batch_of_n_is_exact_and_draws_nothing() {
    let model = logistic_model(N);
    let d = model.dim();
    let centre = vec![0.1; d];
    let theta = [0.7, -0.2, 0.5, 0.1, -0.9, 0.3];
    let full = full_gradient(&model, &theta);
    // Σ of N per-datum gradients with |∇| ≲ max|x|·1: rounding ≲ N·ε·N; 1e-9·N is generous.
    let tol = 1e-9 * N as f64;
    let mut cv = ControlVariates::new(&model, BatchSize::Fraction(1.0), &centre).unwrap();
    assert_eq!(cv.cost_per_estimate(), 2 * N);
    let mut rng = stream(9, 0);
    let before = rng.clone();
    let mut got = vec![0.0; d];
    cv.estimate(&theta, &mut got, &mut rng);
    for (a, b) in got.iter().zip(&full) {
        assert!((a - b).abs() <= tol, "n = N: {a} vs {b}");
    }
    assert_eq!(rng.next_u64(), before.clone().next_u64(), "n = N drew");
}

// ---------------------------------------------------------------------------------------------
// (c) Variance O(‖θ − θ̂‖²) on logistic regression, and the reduction against Minibatch.
// ---------------------------------------------------------------------------------------------

#[test]
fn cv_variance_grows_like_squared_distance() {
    let model = logistic_model(N);
    let d = model.dim();
    let centre = map_of(&model);
    // A fixed random unit direction u; θ = θ̂ + δ·u.
    let mut u = normals(41, 0, d);
    let norm = u.iter().map(|v| v * v).sum::<f64>().sqrt();
    u.iter_mut().for_each(|v| *v /= norm);
    let at =
        |delta: f64| -> Vec<f64> { centre.iter().zip(&u).map(|(c, v)| c + delta * v).collect() };

    let reps = 20_000;
    let deltas = [1e-3, 3e-3, 1e-2, 3e-2, 1e-1];
    let mut logs = Vec::new();
    for &delta in &deltas {
        let mut cv = ControlVariates::new(&model, BatchSize::Count(BATCH), &centre).unwrap();
        // Same seed at every δ (common random numbers): the minibatch sequence is shared.
        let draws = draw_estimates(&mut cv, &at(delta), reps, 11);
        let v = total_variance(&draws, d);
        logs.push((delta.ln(), v.ln()));
    }
    // Least-squares slope of log variance on log δ.
    let (mx, my) = (
        logs.iter().map(|p| p.0).sum::<f64>() / logs.len() as f64,
        logs.iter().map(|p| p.1).sum::<f64>() / logs.len() as f64,
    );
    let sxx: f64 = logs.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let slope = logs.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>() / sxx;
    // Monte Carlo error of the slope: a sample variance of `reps` draws has relative sd
    // ≈ sqrt(2/reps) (≈ 1 %, Gaussian-like estimates), so each log-variance has sd ≈ 0.01 and
    // the fitted slope sd ≈ 0.01/√sxx ≈ 0.005 (less with common random numbers). The ±0.2 band
    // is therefore not Monte Carlo error: it allows the O(δ³) terms of the variance (the
    // Hessian changes along u), which shift the slope by O(δ) at the top of the range.
    let mc_sd = (2.0 / reps as f64).sqrt() / sxx.sqrt();
    eprintln!("CV variance log-log slope {slope:.4} (MC sd ≈ {mc_sd:.4}); points {logs:.3?}");
    assert!(
        (slope - 2.0).abs() <= 0.2,
        "log-log slope {slope}, expected 2 ± 0.2"
    );
    assert!(mc_sd < 0.05, "too few estimates to resolve the slope");

    // Variance reduction against the standard estimator at ‖θ − θ̂‖ = 1e-2 from the MAP.
    let theta = at(1e-2);
    let mut cv = ControlVariates::new(&model, BatchSize::Count(BATCH), &centre).unwrap();
    let v_cv = total_variance(&draw_estimates(&mut cv, &theta, reps, 12), d);
    let mut mb = Minibatch::new(&model, BatchSize::Count(BATCH)).unwrap();
    let v_mb = total_variance(&draw_estimates(&mut mb, &theta, reps, 13), d);
    let ratio = v_mb / v_cv;
    // SVRG with its centre at the MAP (refresh calls made there) at the same θ.
    let mut svrg = Svrg::new(&model, BatchSize::Count(BATCH), Some(1000)).unwrap();
    let v_svrg = total_variance(&draw_svrg_estimates(&mut svrg, &centre, &theta, reps), d);
    let ratio_svrg = v_mb / v_svrg;
    eprintln!(
        "variance at ‖θ − θ̂‖ = 1e-2, n = {BATCH}: Minibatch {v_mb:.4e}, CV {v_cv:.4e}, \
         SVRG {v_svrg:.4e}; reduction ×{ratio:.1} (CV), ×{ratio_svrg:.1} (SVRG); per unit cost \
         ×{:.1} and ×{:.1} (both cost 2n)",
        ratio / 2.0,
        ratio_svrg / 2.0
    );
    // Every variance carries ≈ 1 % Monte Carlo error; a reduction of 10× is far outside it, and
    // SVRG about the same centre is the same estimator (within 5 %: two independent ≈ 1 %
    // estimates).
    assert!(ratio > 10.0, "variance reduction only ×{ratio}");
    assert!(
        ratio_svrg > 10.0,
        "SVRG variance reduction only ×{ratio_svrg}"
    );
    assert!(
        (v_svrg / v_cv - 1.0).abs() < 0.05,
        "SVRG {v_svrg} vs CV {v_cv}"
    );
}

/// Compatibility option `minibatch_with_replacement` for control variates and SVRG: both stay
/// unbiased, and their per-coordinate variance is (N²/n)·c_j, with c_j the population variance
/// (divisor N) of the per-datum differences ∇log p(xᵢ | θ) − ∇log p(xᵢ | θ̂) — no
/// finite-population factor. n = N/2, so the without-replacement variance is half as large.
#[test]
fn cv_and_svrg_with_replacement_variance_has_no_finite_population_factor() {
    use sgmcmc::model::{DataIndex, Scratch};
    let model = logistic_model(N);
    let d = model.dim();
    let centre = map_of(&model);
    let theta: Vec<f64> = centre
        .iter()
        .enumerate()
        .map(|(j, c)| c + 0.05 * (j as f64 - 2.0))
        .collect();
    let batch = N / 2;
    // The closed form from the per-datum differences.
    let all: Vec<DataIndex> = (0..N as DataIndex).collect();
    let (mut at_theta, mut at_centre) = (vec![0.0; N * d], vec![0.0; N * d]);
    let mut scratch = Scratch::new();
    model.grad_log_lik_each(&theta, &all, &mut at_theta, &mut scratch);
    model.grad_log_lik_each(&centre, &all, &mut at_centre, &mut scratch);
    let diff: Vec<f64> = at_theta
        .iter()
        .zip(&at_centre)
        .map(|(a, b)| a - b)
        .collect();
    let (nd, nb) = (N as f64, batch as f64);
    let want: Vec<f64> = (0..d)
        .map(|j| {
            let c = common::column(&diff, d, j);
            let m = mean(&c);
            nd * nd / nb * c.iter().map(|v| (v - m).powi(2)).sum::<f64>() / nd
        })
        .collect();

    let full = full_gradient(&model, &theta);
    let reps = 20_000;
    let mut cv = ControlVariates::new(&model, BatchSize::Count(batch), &centre)
        .unwrap()
        .with_replacement(true);
    let cv_draws = draw_estimates(&mut cv, &theta, reps, 14);
    let mut svrg = Svrg::new(&model, BatchSize::Count(batch), Some(1_000_000))
        .unwrap()
        .with_replacement(true);
    let svrg_draws = draw_svrg_estimates(&mut svrg, &centre, &theta, reps);
    for (label, draws) in [("CV", &cv_draws), ("SVRG", &svrg_draws)] {
        assert_mean_matches(draws, &full, 0.0, label);
        for (j, &want_j) in want.iter().enumerate() {
            let col = common::column(draws, d, j);
            let m = mean(&col);
            let v = common::var(&col);
            // 4 sampling sds of a sample variance, sqrt((μ₄ − σ⁴)/reps).
            let m4 = col.iter().map(|g| (g - m).powi(4)).sum::<f64>() / reps as f64;
            let tol = 4.0 * ((m4 - v * v) / reps as f64).sqrt();
            let without = want_j * (nd - nb) / (nd - 1.0);
            eprintln!(
                "{label} with replacement, coordinate {j}: variance {v:.5e} vs (N²/n)c \
                 {want_j:.5e} (tol {tol:.2e}); without replacement {without:.5e}"
            );
            assert!(
                (v - want_j).abs() <= tol,
                "{label}, coordinate {j}: variance {v} vs (N²/n)·c = {want_j} (tol {tol})"
            );
            assert!(
                (v - without).abs() > 10.0 * tol,
                "{label}: schemes not distinguished"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// (d) SVRG refresh schedule.
// ---------------------------------------------------------------------------------------------

#[test]
fn svrg_refreshes_every_r_calls_and_on_restart() {
    let model = logistic_model(N);
    let d = model.dim();
    let mut rng = stream(51, 0);
    for r in [1usize, 7, N.div_ceil(BATCH)] {
        let mut svrg = Svrg::new(&model, BatchSize::Count(BATCH), Some(r)).unwrap();
        assert_eq!(svrg.cost_per_estimate(), 2 * BATCH);
        let n_calls = 100usize;
        let mut theta = vec![0.0; d];
        let mut step = vec![0.0; d];
        let mut got = vec![0.0; d];
        for i in 0..n_calls {
            fill_standard_normal(&mut rng, &mut step);
            theta
                .iter_mut()
                .zip(&step)
                .for_each(|(t, s)| *t += 0.05 * s);
            svrg.estimate(&theta, &mut got, &mut rng);
            let full = full_gradient(&model, &theta);
            if i.is_multiple_of(r) {
                assert_eq!(
                    bits(&got),
                    bits(&full),
                    "r = {r}, call {i}: not the full score"
                );
                assert_eq!(
                    bits(svrg.centre()),
                    bits(&theta),
                    "r = {r}, call {i}: centre"
                );
            } else {
                assert_ne!(
                    bits(&got),
                    bits(&full),
                    "r = {r}, call {i}: no minibatch noise"
                );
            }
            assert_eq!(svrg.full_passes(), (i + 1).div_ceil(r));
        }
        assert_eq!(svrg.full_passes(), n_calls.div_ceil(r));

        // restart: the next call refreshes whatever the counter was.
        if r > 2 {
            let passes = svrg.full_passes();
            svrg.estimate(&theta, &mut got, &mut rng); // call 100: 100 mod r ≠ 0 for r = 7, 40
            assert_eq!(svrg.full_passes(), passes);
            theta[0] += 0.3;
            svrg.restart(&theta);
            svrg.estimate(&theta, &mut got, &mut rng);
            assert_eq!(svrg.full_passes(), passes + 1);
            assert_eq!(bits(&got), bits(&full_gradient(&model, &theta)));
            // …and the schedule restarts from there: the next r − 1 calls do not refresh.
            for _ in 1..r {
                svrg.estimate(&theta, &mut got, &mut rng);
            }
            assert_eq!(svrg.full_passes(), passes + 1);
            svrg.estimate(&theta, &mut got, &mut rng);
            assert_eq!(svrg.full_passes(), passes + 2);
        }
    }
    assert_eq!(
        Svrg::new(&model, BatchSize::Count(300), None)
            .unwrap()
            .update_rate(),
        7 // ⌈2000/300⌉
    );
}

#[test]
fn bad_settings_are_rejected() {
    let model = logistic_model(100);
    let err = ControlVariates::new(&model, BatchSize::Count(10), &[0.0; 3])
        .err()
        .expect("wrong centre length accepted");
    assert!(matches!(
        err,
        EstimatorError::DimensionMismatch {
            expected: 6,
            got: 3
        }
    ));
    eprintln!("{err}");
    assert!(err.to_string().contains("3") && err.to_string().contains("6"));
    assert!(ControlVariates::new(&model, BatchSize::Count(0), &[0.0; 6]).is_err());
    assert!(ControlVariates::new(&model, BatchSize::Count(101), &[0.0; 6]).is_err());
    assert!(matches!(
        Svrg::new(&model, BatchSize::Count(10), Some(0)).err(),
        Some(EstimatorError::BadUpdateRate(0))
    ));
    assert!(Svrg::new(&model, BatchSize::Count(101), None).is_err());
}

// ---------------------------------------------------------------------------------------------
// (e) SGLD with control variates on the GTM: the exact-gradient stationary law.
// ---------------------------------------------------------------------------------------------

/// §2.1 setting (D = 1, N = 100, n = 10, τ₀² = 4, xᵢ ~ N(1, 2²), ε = 0.5/P). CV (and SVRG) are
/// exact on the GTM, so the stationary variance is 2/(P(2 − εP)), not the minibatch value
/// (2 + εV_e)/(P(2 − εP)).
#[test]
fn sgld_with_control_variates_matches_exact_gradient_variance() {
    let Section21 {
        model,
        n,
        p,
        m,
        v_e,
        eps,
        ..
    } = section_2_1();
    let var_exact = 2.0 / (p * (2.0 - eps * p));
    let var_minibatch = (2.0 + eps * v_e) / (p * (2.0 - eps * p));
    // A centre away from the mode (it does not matter on the GTM).
    let centre = [m + 0.5];

    let settings = RunSettings {
        seed: 17,
        chains: 4,
        budget: Budget::Iterations(100_000),
        burn_in: 200, // AR(1) coefficient 1 − εP = 0.5
        thin: 1,
    };
    for label in ["CV", "SVRG"] {
        let sink = MemorySink::new(settings.chains, 1);
        let report = run(
            &settings,
            |_c, rng| {
                let mut theta0 = vec![0.0; 1];
                fill_standard_normal(rng, &mut theta0);
                theta0[0] += m;
                Ok::<_, RunError>(Chain::sampler(
                    Box::new(Sgld::new(StepSize::Langevin(eps), 1.0).unwrap()),
                    if label == "CV" {
                        Box::new(
                            ControlVariates::new(&model, BatchSize::Count(n), &centre).unwrap(),
                        )
                    } else {
                        Box::new(Svrg::new(&model, BatchSize::Count(n), None).unwrap())
                    },
                    theta0,
                ))
            },
            &sink,
            &NoProgress,
        )
        .expect("run succeeds");
        assert!(report.diverged_chains().is_empty());
        let chains = sink.into_chains();

        // Mean m exactly; 4 MCSE from per-chain τ_int (§1.6).
        let (mh, se) = pooled_mean_mcse(&chains);
        assert!(
            (mh - m).abs() <= 4.0 * se,
            "{label}: mean {mh} vs m {m} (4 MCSE = {})",
            4.0 * se
        );
        // Variance: mean of (θ − m)², 4 MCSE from that series' τ_int (§1.6).
        let sq: Vec<Vec<f64>> = chains
            .iter()
            .map(|c| c.iter().map(|t| (t - m).powi(2)).collect())
            .collect();
        let (vh, se) = pooled_mean_mcse(&sq);
        eprintln!(
            "{label}: variance {vh:.6} ± {se:.6}; exact-gradient {var_exact:.6}, \
             minibatch {var_minibatch:.6}"
        );
        assert!(
            (vh - var_exact).abs() <= 4.0 * se,
            "{label}: variance {vh} vs exact-gradient closed form {var_exact} (4 MCSE = {})",
            4.0 * se
        );
        // Power: the minibatch estimator's variance is many MCSE away.
        assert!(
            (vh - var_minibatch).abs() > 8.0 * se,
            "{label}: cannot distinguish from the minibatch variance {var_minibatch}"
        );
    }
}
