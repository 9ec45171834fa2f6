//! Every gradient method of the built-in models against central finite differences of the
//! corresponding log density, plus the consistency of the batch / per-datum / fused methods.

use crate::common;

use common::{
    dataset, features, from_eigen, linear_data, logistic_data, normals, random_orthogonal,
};
use sgmcmc::data::DataError;
use sgmcmc::model::{
    Bernoulli, CovarianceShape, DataIndex, GaussianModel, LinearRegression, LogisticRegression,
    Model, ModelError, NoiseModel, Normal, NormalMixture, NormalMixturePriors, NormalPrior,
    ParameterPrior, Scratch, TermMoments,
};

/// Central difference of `f` at `theta` in every coordinate, h = 1e-5·max(1, |θⱼ|).
fn central_diff(theta: &[f64], f: impl Fn(&[f64]) -> f64) -> Vec<f64> {
    common::central_diff_with(theta, |x| 1e-5 * x.abs().max(1.0), f)
}

fn max_abs(x: &[f64]) -> f64 {
    x.iter().fold(0.0f64, |m, v| m.max(v.abs()))
}

/// `got ≈ want` entry-wise to `rel`·max(1, ‖want‖∞).
fn assert_close(got: &[f64], want: &[f64], rel: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let scale = max_abs(want).max(1.0);
    for (j, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= rel * scale,
            "{what}: coordinate {j}: got {g}, want {w} (|diff| {} > {})",
            (g - w).abs(),
            rel * scale
        );
    }
}

// Central differences with h = 1e-5 on these small problems (|f| ≲ 1e3, third derivatives
// ≲ 1e3) carry truncation error h²·|f'''|/6 ≲ 1e-7 and rounding ε·|f|/h ≲ 1e-8 — both below
// 1e-6 relative to max(1, ‖∇f‖∞), while any wrong factor or sign is O(1) relative.
const FD_REL: f64 = 1e-6;
// Same sums in a different order: only rounding, ≲ batch·ε·‖terms‖ ≪ 1e-11.
const REORDER_REL: f64 = 1e-11;

fn sum_log_lik(model: &dyn Model, theta: &[f64], batch: &[DataIndex]) -> f64 {
    let mut out = vec![0.0; batch.len()];
    model.log_lik_each(theta, batch, &mut out, &mut Scratch::new());
    out.iter().sum()
}

/// Every gradient method of `model` at `theta` on `batch`.
fn check_model(model: &dyn Model, theta: &[f64], batch: &[DataIndex], label: &str) {
    let d = model.dim();
    assert_eq!(theta.len(), d);
    assert_eq!(model.parameter_names().len(), d, "{label}: parameter names");
    let mut scratch = Scratch::new();

    // ∇ log p(θ), added onto a non-zero buffer.
    let base: Vec<f64> = (0..d).map(|j| 0.25 * j as f64 - 0.3).collect();
    let mut g = base.clone();
    model.add_grad_log_prior(theta, &mut g);
    let g: Vec<f64> = g.iter().zip(&base).map(|(a, b)| a - b).collect();
    let fd = central_diff(theta, |t| model.log_prior(t));
    assert_close(&g, &fd, FD_REL, &format!("{label}: add_grad_log_prior"));

    // Σ ∇ log p(xᵢ | θ) with a weight ≠ 1, added onto a non-zero buffer.
    let fd_lik = central_diff(theta, |t| sum_log_lik(model, t, batch));
    let weight = -2.75;
    let mut g = base.clone();
    model.add_grad_log_lik(theta, batch, weight, &mut g, &mut scratch);
    let g_w: Vec<f64> = g.iter().zip(&base).map(|(a, b)| a - b).collect();
    let want_w: Vec<f64> = fd_lik.iter().map(|v| weight * v).collect();
    assert_close(
        &g_w,
        &want_w,
        FD_REL,
        &format!("{label}: add_grad_log_lik (weight)"),
    );

    // Weight 1 from zero: the batch gradient.
    let mut batch_grad = vec![0.0; d];
    model.add_grad_log_lik(theta, batch, 1.0, &mut batch_grad, &mut scratch);
    assert_close(
        &batch_grad,
        &fd_lik,
        FD_REL,
        &format!("{label}: add_grad_log_lik"),
    );

    // Per-datum gradients: each row against the FD of its own log density, and their sum.
    let mut each = vec![f64::NAN; batch.len() * d];
    model.grad_log_lik_each(theta, batch, &mut each, &mut scratch);
    for (k, &i) in batch.iter().enumerate() {
        let fd_i = central_diff(theta, |t| sum_log_lik(model, t, &[i]));
        assert_close(
            &each[k * d..(k + 1) * d],
            &fd_i,
            FD_REL,
            &format!("{label}: grad_log_lik_each row {k} (datum {i})"),
        );
    }
    let summed: Vec<f64> = (0..d)
        .map(|j| each.chunks_exact(d).map(|r| r[j]).sum())
        .collect();
    assert_close(
        &summed,
        &batch_grad,
        REORDER_REL,
        &format!("{label}: Σ per-datum = batch"),
    );

    // Fused value + gradient.
    let mut g = base.clone();
    let value = model.log_lik_and_add_grad(theta, batch, weight, &mut g, &mut scratch);
    let g_f: Vec<f64> = g.iter().zip(&base).map(|(a, b)| a - b).collect();
    assert_close(
        &g_f,
        &g_w,
        REORDER_REL,
        &format!("{label}: log_lik_and_add_grad gradient"),
    );
    assert_close(
        &g_f,
        &want_w,
        FD_REL,
        &format!("{label}: log_lik_and_add_grad vs FD"),
    );
    let total = sum_log_lik(model, theta, batch);
    assert!(
        (value - total).abs() <= REORDER_REL * total.abs().max(1.0),
        "{label}: log_lik_and_add_grad value {value} vs Σ log_lik_each {total}"
    );
    assert!(value.is_finite() && total.is_finite());

    // Per-datum terms with their moments (CCAdL), plain and against a centre θ̂.
    let centre: Vec<f64> = theta.iter().map(|t| 0.9 * t + 0.05).collect();
    let mut each_centre = vec![f64::NAN; batch.len() * d];
    model.grad_log_lik_each(&centre, batch, &mut each_centre, &mut scratch);
    let differences: Vec<f64> = each.iter().zip(&each_centre).map(|(a, b)| a - b).collect();
    check_terms(model, theta, None, batch, &each, label);
    check_terms(model, theta, Some(&centre), batch, &differences, label);
}

/// `add_grad_log_lik_terms` against the explicit terms (`rows`, batch.len() × D): the weighted
/// gradient, and the term count, sum and centred second moments in both shapes, accumulated on
/// top of an earlier batch (whose terms must not leak into the gradient).
fn check_terms(
    model: &dyn Model,
    theta: &[f64],
    centre: Option<&[f64]>,
    batch: &[DataIndex],
    rows: &[f64],
    label: &str,
) {
    let d = model.dim();
    let label = format!(
        "{label}: add_grad_log_lik_terms (centre {})",
        centre.is_some()
    );
    let n = batch.len() as f64;
    let mean: Vec<f64> = (0..d)
        .map(|j| rows.chunks_exact(d).map(|r| r[j]).sum::<f64>() / n)
        .collect();
    let mut m2 = vec![0.0; d * d];
    for r in rows.chunks_exact(d) {
        for j in 0..d {
            for i in 0..d {
                m2[i + d * j] += (r[i] - mean[i]) * (r[j] - mean[j]);
            }
        }
    }
    let want_grad: Vec<f64> = mean.iter().map(|m| -2.75 * m * n).collect();
    let mut scratch = Scratch::new();
    for shape in [CovarianceShape::Full, CovarianceShape::Diagonal] {
        let mut moments = TermMoments::new(shape, d);
        // An earlier batch sets the shift; then the batch under test.
        let mut sink = vec![0.0; d];
        model.add_grad_log_lik_terms(
            theta,
            centre,
            &batch[..1],
            1.0,
            &mut sink,
            &mut moments,
            &mut scratch,
        );
        moments.recentre();
        moments.begin();
        let mut grad = vec![1.0; d];
        model.add_grad_log_lik_terms(
            theta,
            centre,
            batch,
            -2.75,
            &mut grad,
            &mut moments,
            &mut scratch,
        );
        grad.iter_mut().for_each(|g| *g -= 1.0);
        assert_close(
            &grad,
            &want_grad,
            REORDER_REL,
            &format!("{label}: gradient"),
        );
        assert_eq!(moments.count(), batch.len(), "{label}: count");
        let mut sum = vec![0.0; d];
        moments.sum_of_terms(&mut sum);
        let want_sum: Vec<f64> = mean.iter().map(|m| m * n).collect();
        assert_close(&sum, &want_sum, REORDER_REL, &format!("{label}: Σ terms"));
        let got_len = if shape == CovarianceShape::Full {
            d * d
        } else {
            d
        };
        let mut got = vec![0.0; got_len];
        moments.add_centred_second_moments(1.0, &mut got);
        let want: Vec<f64> = if shape == CovarianceShape::Full {
            m2.clone()
        } else {
            (0..d).map(|j| m2[j + d * j]).collect()
        };
        assert_close(
            &got,
            &want,
            REORDER_REL,
            &format!("{label}: {shape:?} moments"),
        );
    }
}

/// The full index set and a shuffled batch with a repeated index.
fn batches(n: usize) -> [Vec<DataIndex>; 2] {
    let all: Vec<DataIndex> = (0..n as DataIndex).collect();
    let n = n as DataIndex;
    [all, vec![n - 1, 3, 0, 7, 3, n / 2]]
}

fn random_theta(seed: u64, d: usize, scale: f64) -> Vec<f64> {
    normals(seed, 3, d).iter().map(|v| scale * v).collect()
}

#[test]
fn logistic_gradients_match_finite_differences() {
    let w = [0.8, -1.2, 0.5];
    let (x, y) = logistic_data(11, 40, &w, 0.3);
    for intercept in [false, true] {
        for as_f32 in [false, true] {
            let model = LogisticRegression::new(
                dataset(x.clone(), 3, Some(y.clone()), as_f32),
                Bernoulli,
                NormalPrior::new(2.5).unwrap(),
                intercept,
            )
            .unwrap();
            assert_eq!(model.dim(), 3 + usize::from(intercept));
            for (s, batch) in batches(40).iter().enumerate() {
                for rep in 0..3 {
                    let theta = random_theta(100 + rep, model.dim(), 1.5);
                    let label =
                        format!("logistic(intercept={intercept}, f32={as_f32}) batch {s} θ#{rep}");
                    check_model(&model, &theta, batch, &label);
                }
            }
        }
    }
}

#[test]
fn linear_gradients_match_finite_differences() {
    let w = [1.0, -0.5, 2.0];
    let (x, y) = linear_data(12, 40, &w, -0.7, 0.8);
    let noises = [
        NoiseModel::Fixed { variance: 0.7 },
        NoiseModel::Learned {
            prior_variance: 2.0,
        },
        NoiseModel::Sigma {
            prior: ParameterPrior::HalfCauchy { scale: 2.5 },
        },
    ];
    for noise in noises {
        for (intercept, as_f32) in [(true, false), (false, true)] {
            let data = dataset(x.clone(), 3, Some(y.clone()), as_f32);
            let family = Normal::new(noise).unwrap();
            let model = if let NoiseModel::Sigma { .. } = noise {
                // Per-group priors: Student-t coefficients, a normal intercept off 0.
                let t = ParameterPrior::StudentT {
                    df: 4.0,
                    location: 0.5,
                    scale: 2.0,
                };
                let model = LinearRegression::new(data, family, t, intercept).unwrap();
                if intercept {
                    let prior = ParameterPrior::Normal {
                        location: 1.0,
                        scale: 3.0,
                    };
                    model.with_intercept_prior(prior).unwrap()
                } else {
                    model
                }
            } else {
                LinearRegression::new(data, family, NormalPrior::new(4.0).unwrap(), intercept)
                    .unwrap()
            };
            let learned = !matches!(noise, NoiseModel::Fixed { .. });
            assert_eq!(
                model.dim(),
                3 + usize::from(intercept) + usize::from(learned)
            );
            for (s, batch) in batches(40).iter().enumerate() {
                for rep in 0..3 {
                    let theta = random_theta(200 + rep, model.dim(), 0.8);
                    let label =
                        format!("linear({noise:?}, intercept={intercept}, f32={as_f32}) batch {s}");
                    check_model(&model, &theta, batch, &label);
                }
            }
        }
    }
}

/// The ordered two-component mixture (posteriordb's priors, and flat/Cauchy/exponential/
/// Beta(2, 3) ones) on the unconstrained scale, at points with well separated and with
/// overlapping components.
#[test]
fn normal_mixture_gradients_match_finite_differences() {
    let y: Vec<f64> = normals(77, 0, 40)
        .iter()
        .enumerate()
        .map(|(i, z)| {
            if i % 3 == 0 {
                -1.5 + 0.7 * z
            } else {
                2.0 + 1.2 * z
            }
        })
        .collect();
    let other = NormalMixturePriors {
        mu: ParameterPrior::Cauchy {
            location: 1.0,
            scale: 2.0,
        },
        sigma: ParameterPrior::Exponential { rate: 0.5 },
        weight: ParameterPrior::Beta {
            alpha: 2.0,
            beta: 3.0,
        },
    };
    for priors in [NormalMixturePriors::default(), other] {
        let model = NormalMixture::new(y.clone(), priors).unwrap();
        assert!(model.is_constrained());
        for (s, batch) in batches(40).iter().enumerate() {
            for rep in 0..3 {
                let theta = random_theta(300 + rep, 5, 0.8);
                check_model(&model, &theta, batch, &format!("mixture batch {s}"));
            }
        }
    }
}

/// A 4×4 covariance with correlations: random eigenvectors, eigenvalues 0.5..4.
fn correlated_covariance(seed: u64) -> Vec<f64> {
    from_eigen(&random_orthogonal(seed, 4), &[0.5, 1.0, 2.2, 4.0], 4)
}

#[test]
fn gaussian_gradients_match_finite_differences() {
    let cov = correlated_covariance(13);
    assert!(cov[1].abs() > 0.05, "covariance should be non-diagonal");
    let x: Vec<f64> = normals(14, 0, 30 * 4)
        .iter()
        .map(|v| 1.0 + 1.5 * v)
        .collect();
    for prior_variance in [3.0, f64::INFINITY] {
        let model = GaussianModel::new(features(x.clone(), 4), &cov, prior_variance).unwrap();
        for (s, batch) in batches(30).iter().enumerate() {
            for rep in 0..3 {
                let theta = random_theta(300 + rep, 4, 1.0);
                let label = format!("gaussian(prior {prior_variance}) batch {s}");
                check_model(&model, &theta, batch, &label);
            }
        }
    }
}

#[test]
fn gaussian_log_density_is_the_normal_density() {
    // Absolute check that the FD tests cannot make (they are blind to constants): one datum,
    // log N(x; θ, Σ) = −½ log|2πΣ| − ½ (x−θ)ᵀΣ⁻¹(x−θ), with Σ = diag(2, 0.5).
    let cov = [2.0, 0.0, 0.0, 0.5];
    let model = GaussianModel::new(features(vec![1.0, -1.0], 2), &cov, f64::INFINITY).unwrap();
    let theta = [0.5, 0.0];
    let mut out = [0.0];
    model.log_lik_each(&theta, &[0], &mut out, &mut Scratch::new());
    let want =
        -(2.0 * std::f64::consts::PI).ln() - 0.5 * (1.0f64).ln() - 0.5 * (0.25 / 2.0 + 1.0 / 0.5);
    // Rounding only.
    assert!((out[0] - want).abs() < 1e-14, "{} vs {want}", out[0]);
}

#[test]
fn gaussian_target_has_the_given_moments() {
    let cov = correlated_covariance(15);
    let mean = [1.0, -2.0, 0.5, 3.0];
    let model = GaussianModel::target(&mean, &cov).unwrap();
    assert_eq!((model.dim(), model.num_data()), (4, 1));
    // Two SPD inversions of a matrix with condition number 8: rounding ≲ 1e-13.
    let pm = model.posterior_mean();
    for (a, b) in pm.iter().zip(&mean) {
        assert!((a - b).abs() < 1e-12, "posterior mean {pm:?} vs {mean:?}");
    }
    let pc = model.posterior_covariance();
    for (a, b) in pc.iter().zip(&cov) {
        assert!(
            (a - b).abs() < 1e-12,
            "posterior covariance {pc:?} vs {cov:?}"
        );
    }
    // The score of the target is −Σ⁻¹(θ − μ): zero at the mean.
    let mut g = vec![0.0; 4];
    model.add_grad_log_prior(&mean, &mut g);
    model.add_grad_log_lik(&mean, &[0], 1.0, &mut g, &mut Scratch::new());
    assert!(g.iter().all(|v| v.abs() < 1e-12), "score at the mean {g:?}");
}

#[test]
fn gaussian_rejects_bad_covariances() {
    let x = features(vec![0.0; 4], 2);
    let asym = [1.0, 0.5, 0.2, 1.0];
    assert!(matches!(
        GaussianModel::new(x, &asym, 1.0),
        Err(ModelError::Setting(_))
    ));
    let x = features(vec![0.0; 4], 2);
    let indefinite = [1.0, 2.0, 2.0, 1.0];
    assert!(matches!(
        GaussianModel::new(x, &indefinite, 1.0),
        Err(ModelError::Setting(_))
    ));
    let x = features(vec![0.0; 4], 2);
    assert!(matches!(
        GaussianModel::new(x, &[1.0], 1.0),
        Err(ModelError::Setting(_))
    ));
}

fn logistic(x: Vec<f64>, y: Vec<f64>) -> Result<LogisticRegression, ModelError> {
    LogisticRegression::new(
        dataset(x, 2, Some(y), false),
        Bernoulli,
        NormalPrior::new(1.0).unwrap(),
        true,
    )
}

#[test]
fn logistic_minus_one_plus_one_labels_equal_zero_one() {
    let (x, y01) = logistic_data(16, 50, &[1.0, -1.0], 0.0);
    assert!(y01.contains(&0.0) && y01.contains(&1.0));
    let ypm: Vec<f64> = y01.iter().map(|y| 2.0 * y - 1.0).collect();
    let a = logistic(x.clone(), y01).unwrap();
    let b = logistic(x, ypm).unwrap();
    let batch: Vec<DataIndex> = (0..50).collect();
    let theta = [0.3, -0.8, 0.2];
    let mut s = Scratch::new();
    let (mut la, mut lb) = (vec![0.0; 50], vec![0.0; 50]);
    a.log_lik_each(&theta, &batch, &mut la, &mut s);
    b.log_lik_each(&theta, &batch, &mut lb, &mut s);
    assert_eq!(la, lb, "log-likelihoods differ between codings");
    let (mut ga, mut gb) = (vec![0.0; 150], vec![0.0; 150]);
    a.grad_log_lik_each(&theta, &batch, &mut ga, &mut s);
    b.grad_log_lik_each(&theta, &batch, &mut gb, &mut s);
    assert_eq!(ga, gb, "gradients differ between codings");
}

#[test]
fn logistic_label_out_of_support_names_the_row() {
    let x = normals(17, 0, 16);
    // {0, 1} coding with a 2 in the 5th row.
    let y = vec![1.0, 0.0, 1.0, 1.0, 2.0, 0.0, 1.0, 0.0];
    match logistic(x.clone(), y) {
        Err(ModelError::Data(e @ DataError::LabelOutOfSupport { row, value, .. })) => {
            assert_eq!((row, value), (5, 2.0));
            assert!(e.to_string().contains("row 5"), "message: {e}");
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("label 2 accepted"),
    }
    // {−1, +1} coding (fixed by the first label that is not 1) with a stray 0 in the 3rd row.
    let y = vec![1.0, -1.0, 0.0, 1.0, -1.0, 1.0, 1.0, -1.0];
    match logistic(x, y) {
        Err(ModelError::Data(DataError::LabelOutOfSupport { row, value, .. })) => {
            assert_eq!((row, value), (3, 0.0));
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("mixed codings accepted"),
    }
}

#[test]
fn regression_without_targets_is_an_error() {
    let r = LogisticRegression::new(
        dataset(vec![0.0; 4], 2, None, false),
        Bernoulli,
        NormalPrior::new(1.0).unwrap(),
        false,
    );
    assert!(matches!(r, Err(ModelError::Setting(_))));
    assert!(Normal::new(NoiseModel::Fixed { variance: 0.0 }).is_err());
    assert!(NormalPrior::new(-1.0).is_err());
}

/// The bits of `model`'s minibatch gradient over `batch` (weight 1.5), of the fused gradient
/// and of the log-likelihood returned with it.
fn gradient_bits(
    model: &LogisticRegression,
    theta: &[f64],
    batch: &[DataIndex],
) -> (Vec<u64>, Vec<u64>, u64) {
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let mut g = vec![0.0; theta.len()];
    model.add_grad_log_lik(theta, batch, 1.5, &mut g, &mut Scratch::new());
    let mut h = vec![0.0; theta.len()];
    let l = model.log_lik_and_add_grad(theta, batch, 1.5, &mut h, &mut Scratch::new());
    (bits(&g), bits(&h), l.to_bits())
}

/// Rows stored as f32 give the gradient, to the bit, of the same values stored as f64 (a guard
/// for any path that treats f32 rows on their own, such as a buffer of converted rows), for
/// scattered rows, a block of consecutive rows and every row, and for widths with a short, a
/// full, a partial and more than three panels of eight.
#[test]
fn f32_rows_give_the_bits_of_the_same_values_in_f64() {
    let n = 1_000;
    for d in [3, 8, 10, 17, 40] {
        let w: Vec<f64> = (0..d).map(|j| 0.4 - 0.07 * j as f64).collect();
        let (x, y) = logistic_data(31 + d as u64, n, &w, 0.2);
        // Values an f32 holds exactly, so both storages hold the same numbers.
        let x: Vec<f64> = x.iter().map(|&v| f64::from(v as f32)).collect();
        let model = |as_f32| {
            let data = dataset(x.clone(), d, Some(y.clone()), as_f32);
            LogisticRegression::new(data, Bernoulli, NormalPrior::new(2.5).unwrap(), true).unwrap()
        };
        let (single, double) = (model(true), model(false));
        let scattered: Vec<DataIndex> = (0..300).map(|k| (k * 7919 % n) as DataIndex).collect();
        let block: Vec<DataIndex> = (400..700).collect();
        let all: Vec<DataIndex> = (0..n as DataIndex).collect();
        let theta = random_theta(7, d + 1, 0.8);
        for (name, batch) in [("scattered", &scattered), ("block", &block), ("all", &all)] {
            assert_eq!(
                gradient_bits(&single, &theta, batch),
                gradient_bits(&double, &theta, batch),
                "d = {d}, {name}: gradient, fused gradient, log-likelihood"
            );
        }
    }
}

/// A block of consecutive rows (read in chunks of 128) and the same rows in the same order
/// scattered through another matrix (read in chunks of 64) give the same gradient and
/// log-likelihood, to the bit: the weighted sum's order restarts every 64 rows whatever the
/// chunk size. Batches of 300 rows (two full chunks of 128 and a short one; four of 64 and a
/// short one) and of 64, at d = 10 and 40.
#[test]
fn a_block_and_the_same_rows_scattered_give_the_same_bits() {
    let n = 1_000;
    for d in [10, 40] {
        let w: Vec<f64> = (0..d).map(|j| 0.3 - 0.05 * j as f64).collect();
        let (x, y) = logistic_data(53 + d as u64, n, &w, 0.1);
        // Row k of `x` is row place(k) of `moved`.
        let place = |k: usize| k * 7919 % n;
        let (mut moved, mut moved_y) = (vec![0.0; n * d], vec![0.0; n]);
        for k in 0..n {
            moved[place(k) * d..(place(k) + 1) * d].copy_from_slice(&x[k * d..(k + 1) * d]);
            moved_y[place(k)] = y[k];
        }
        let model = |x: Vec<f64>, y: Vec<f64>| {
            let data = dataset(x, d, Some(y), false);
            LogisticRegression::new(data, Bernoulli, NormalPrior::new(2.5).unwrap(), true).unwrap()
        };
        let (rows, scattered) = (model(x.clone(), y.clone()), model(moved, moved_y));
        let theta = random_theta(11, d + 1, 0.6);
        for (start, len) in [(400, 300), (10, 64)] {
            let block: Vec<DataIndex> = (start..start + len).map(|k| k as DataIndex).collect();
            let spread: Vec<DataIndex> = block
                .iter()
                .map(|&k| place(k as usize) as DataIndex)
                .collect();
            assert_eq!(
                gradient_bits(&rows, &theta, &block),
                gradient_bits(&scattered, &theta, &spread),
                "d = {d}, {len} rows: gradient, fused gradient, log-likelihood"
            );
        }
    }
}
