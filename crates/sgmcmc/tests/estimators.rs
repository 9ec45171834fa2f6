//! The standard minibatch estimator (reference §1.2, §2.0, §3.1): unbiasedness, its noise
//! variance with the without-replacement factor, the n = N case, and batch-size resolution.

use crate::common;

use common::{
    dataset, draw_estimates, features, from_eigen, full_gradient, logistic_data, mean, normals,
    random_orthogonal,
};
use rand::Rng;
use sgmcmc::estimator::{BatchSize, EstimatorError, GradientEstimator, Minibatch};
use sgmcmc::model::{
    Bernoulli, DataIndex, GaussianModel, LogisticRegression, Model, NormalPrior, Scratch,
};
use sgmcmc::rng::stream;

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

/// Gaussian location model with a correlated 3×3 likelihood covariance.
fn gaussian_model(n: usize) -> GaussianModel {
    let cov = from_eigen(&random_orthogonal(22, 3), &[0.4, 1.0, 2.5], 3);
    let x: Vec<f64> = normals(23, 0, n * 3)
        .iter()
        .map(|v| 0.5 + 2.0 * v)
        .collect();
    GaussianModel::new(features(x, 3), &cov, 4.0).unwrap()
}

/// z-test of E[ĝ] = ∇log π coordinate-wise for the standard estimator at batch `batch`.
fn assert_unbiased(model: &dyn Model, theta: &[f64], batch: usize, reps: usize, label: &str) {
    let mut est = Minibatch::new(model, BatchSize::Count(batch)).unwrap();
    common::assert_unbiased_estimates(&mut est, model, theta, reps, 5, label);
}

#[test]
fn minibatch_estimates_are_unbiased_logistic() {
    let model = logistic_model(2_000);
    let theta = [0.7, -0.2, 0.5, 0.1, -0.9, 0.3];
    assert_unbiased(&model, &theta, 50, 20_000, "logistic");
}

#[test]
fn minibatch_estimates_are_unbiased_gaussian() {
    let model = gaussian_model(2_000);
    let theta = [0.2, 0.9, -0.4];
    assert_unbiased(&model, &theta, 50, 20_000, "gaussian");
}

/// Reference §2.0: on the GTM (identity likelihood covariance) the score noise has variance
/// V_e = (N²/n)·(N − n)/(N − 1)·s_x² per coordinate, s_x² the population variance of the data.
#[test]
fn minibatch_noise_variance_matches_without_replacement_formula() {
    let n_data = 2_000;
    let x: Vec<f64> = normals(24, 0, n_data * 2)
        .chunks_exact(2)
        .flat_map(|r| [1.0 + 2.0 * r[0], -1.0 + 0.5 * r[1]])
        .collect();
    let model = GaussianModel::new(features(x.clone(), 2), &[1.0, 0.0, 0.0, 1.0], 4.0).unwrap();
    let theta = [0.3, -0.6];
    let reps = 20_000;
    for batch in [50usize, 1_000] {
        let mut est = Minibatch::new(&model, BatchSize::Count(batch)).unwrap();
        let draws = draw_estimates(&mut est, &theta, reps, 6);
        for j in 0..2 {
            let xs = common::column(&x, 2, j);
            let xm = mean(&xs);
            let s2 = xs.iter().map(|v| (v - xm).powi(2)).sum::<f64>() / n_data as f64;
            let (nd, nb) = (n_data as f64, batch as f64);
            let v_e = nd * nd / nb * (nd - nb) / (nd - 1.0) * s2;
            let with_replacement = nd * nd / nb * s2;

            let col = common::column(&draws, 2, j);
            let m = mean(&col);
            let v = common::var(&col);
            let m4 = col.iter().map(|g| (g - m).powi(4)).sum::<f64>() / reps as f64;
            // Sampling sd of a sample variance of iid draws: sqrt((μ₄ − σ⁴)/reps) with the
            // empirical fourth moment (= σ²·sqrt(2/(reps−1)) for Gaussian estimates); 4 sd.
            let tol = 4.0 * ((m4 - v * v) / reps as f64).sqrt();
            assert!(
                (v - v_e).abs() <= tol,
                "n = {batch}, coordinate {j}: variance {v} vs V_e {v_e} (tol {tol})"
            );
            if batch == 1_000 {
                // Power: at n = N/2 the with-replacement variance is twice as large.
                assert!(
                    (v - with_replacement).abs() > 10.0 * tol,
                    "cannot tell the without-replacement factor apart"
                );
            }
        }
    }
}

#[test]
fn batch_of_n_is_the_exact_gradient_and_draws_nothing() {
    let logistic = logistic_model(2_000);
    let gaussian = gaussian_model(2_000);
    let models: [(&dyn Model, Vec<f64>); 2] = [
        (&logistic, vec![0.7, -0.2, 0.5, 0.1, -0.9, 0.3]),
        (&gaussian, vec![0.2, 0.9, -0.4]),
    ];
    for (model, theta) in models {
        let n = model.num_data();
        let d = model.dim();
        // The definition: ∇log p(θ) + Σ_{i=1..N} ∇log p(xᵢ | θ), in data order.
        let mut want = vec![0.0; d];
        model.add_grad_log_prior(&theta, &mut want);
        let all: Vec<DataIndex> = (0..n as DataIndex).collect();
        model.add_grad_log_lik(&theta, &all, 1.0, &mut want, &mut Scratch::new());

        // n = N delegates to the full-data evaluator: bitwise the FullBatch estimate.
        let full = full_gradient(model, &theta);
        for size in [BatchSize::Count(n), BatchSize::Fraction(1.0)] {
            let mut est = Minibatch::new(model, size).unwrap();
            assert_eq!(est.batch_size(), n);
            assert_eq!(est.cost_per_estimate(), n);
            let mut rng = stream(9, 0);
            let before = rng.clone();
            let mut got = vec![f64::NAN; d];
            for _ in 0..3 {
                est.estimate(&theta, &mut got, &mut rng);
                assert_eq!(
                    got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    full.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    "{}: n = N is not bitwise the FullBatch gradient",
                    model.name()
                );
            }
            assert_eq!(
                rng.next_u64(),
                before.clone().next_u64(),
                "{}: n = N consumed random numbers",
                model.name()
            );
        }

        // The parallel full-data evaluator sums in chunks: equal to the sequential definition up
        // to rounding (N·ε relative ≈ 1e-12).
        let scale = full.iter().fold(1.0f64, |m, v| m.max(v.abs()));
        for (a, b) in full.iter().zip(&want) {
            assert!(
                (a - b).abs() <= 1e-12 * scale,
                "{}: FullBatch {a} vs {b}",
                model.name()
            );
        }

        // Sanity: a smaller batch does consume random numbers.
        let mut est = Minibatch::new(model, BatchSize::Count(n - 1)).unwrap();
        let mut rng = stream(9, 0);
        let before = rng.clone();
        let mut got = vec![0.0; d];
        est.estimate(&theta, &mut got, &mut rng);
        assert_ne!(rng.next_u64(), before.clone().next_u64());
    }
}

#[test]
fn batch_size_resolution() {
    let big = 1_000_000;
    assert_eq!(BatchSize::Fraction(0.01).resolve(big).unwrap(), 10_000);
    assert_eq!(BatchSize::Fraction(1e-9).resolve(big).unwrap(), 1);
    assert_eq!(BatchSize::Fraction(1.0).resolve(big).unwrap(), big);
    assert_eq!(BatchSize::Count(1).resolve(big).unwrap(), 1);
    assert_eq!(BatchSize::Count(big).resolve(big).unwrap(), big);
    for bad in [
        BatchSize::Count(0),
        BatchSize::Count(big + 1),
        BatchSize::Fraction(0.0),
        BatchSize::Fraction(1.5),
        BatchSize::Fraction(-0.1),
        BatchSize::Fraction(f64::NAN),
        BatchSize::Fraction(f64::INFINITY),
    ] {
        match bad.resolve(big) {
            Err(EstimatorError::BadBatchSize { n, .. }) => assert_eq!(n, big, "{bad:?}"),
            Ok(v) => panic!("{bad:?} resolved to {v}"),
            Err(e) => panic!("{bad:?}: unexpected error {e}"),
        }
    }
    // The constructor reports the same errors.
    let model = gaussian_model(10);
    assert!(Minibatch::new(&model, BatchSize::Count(11)).is_err());
    assert!(Minibatch::new(&model, BatchSize::Count(0)).is_err());
    assert_eq!(
        Minibatch::new(&model, BatchSize::Fraction(0.5))
            .unwrap()
            .batch_size(),
        5
    );
}

/// Compatibility option `minibatch_with_replacement` (§1.2, Appendix A): the estimate stays
/// unbiased and its per-coordinate variance on the GTM is (N²/n)·s_x², without the
/// finite-population factor (N − n)/(N − 1); at n = N/2 that is twice the default's variance.
#[test]
fn minibatch_with_replacement_variance_has_no_finite_population_factor() {
    let n_data = 2_000;
    let x: Vec<f64> = normals(25, 0, n_data * 2)
        .chunks_exact(2)
        .flat_map(|r| [1.0 + 2.0 * r[0], -1.0 + 0.5 * r[1]])
        .collect();
    let model = GaussianModel::new(features(x.clone(), 2), &[1.0, 0.0, 0.0, 1.0], 4.0).unwrap();
    let theta = [0.3, -0.6];
    let full = full_gradient(&model, &theta);
    let reps = 20_000;
    for batch in [50usize, 1_000] {
        let mut est = Minibatch::new(&model, BatchSize::Count(batch))
            .unwrap()
            .with_replacement(true);
        let draws = draw_estimates(&mut est, &theta, reps, 7);
        for (j, &full_j) in full.iter().enumerate() {
            let xs = common::column(&x, 2, j);
            let xm = mean(&xs);
            let s2 = xs.iter().map(|v| (v - xm).powi(2)).sum::<f64>() / n_data as f64;
            let (nd, nb) = (n_data as f64, batch as f64);
            let want = nd * nd / nb * s2;
            let without = want * (nd - nb) / (nd - 1.0);

            let col = common::column(&draws, 2, j);
            let m = mean(&col);
            let v = common::var(&col);
            // Unbiased: 4 standard errors of the mean of independent estimates.
            let se = (v / reps as f64).sqrt();
            assert!(
                (m - full_j).abs() <= 4.0 * se,
                "n = {batch}, coordinate {j}: mean {m} vs full gradient {full_j} (4 SE = {})",
                4.0 * se
            );
            // Variance: 4 sampling sds of a sample variance, sqrt((μ₄ − σ⁴)/reps).
            let m4 = col.iter().map(|g| (g - m).powi(4)).sum::<f64>() / reps as f64;
            let tol = 4.0 * ((m4 - v * v) / reps as f64).sqrt();
            eprintln!(
                "with replacement, n = {batch}, coordinate {j}: variance {v:.5e} vs (N²/n)s² \
                 {want:.5e} (tol {tol:.2e}); without replacement would be {without:.5e}"
            );
            assert!(
                (v - want).abs() <= tol,
                "n = {batch}, coordinate {j}: variance {v} vs (N²/n)·s² = {want} (tol {tol})"
            );
            if batch == 1_000 {
                assert!(
                    (v - without).abs() > 10.0 * tol,
                    "cannot tell the two schemes apart"
                );
            }
        }
    }
}
