//! The Gaussian mixture of Welling & Teh (2011) (reference §6.8): gradients against central
//! differences (also far from the data, where a naive log(e^a + e^b) underflows), batch versus
//! per-datum consistency, the density formula, the prior, and the simulator's moments.

use crate::common;

use sgmcmc::data::{DataError, Features, Matrix};
use sgmcmc::model::mixture::MixtureSettings;
use sgmcmc::model::{
    CovarianceShape, DataIndex, GaussianMixtureModel, Model, ModelError, Scratch, TermMoments,
};
use sgmcmc::rng::stream;
use statrs::distribution::{ContinuousCDF, Normal};

fn model_on(x: &[f64], settings: MixtureSettings) -> GaussianMixtureModel {
    let data = Features::F64(Matrix::from_vec(x.to_vec(), x.len(), 1).unwrap());
    GaussianMixtureModel::with_settings(data, settings).unwrap()
}

fn all(model: &dyn Model) -> Vec<DataIndex> {
    (0..model.num_data() as DataIndex).collect()
}

fn log_lik_each(model: &dyn Model, theta: &[f64], batch: &[DataIndex]) -> Vec<f64> {
    let mut out = vec![0.0; batch.len()];
    model.log_lik_each(theta, batch, &mut out, &mut Scratch::new());
    out
}

fn grad_each(model: &dyn Model, theta: &[f64], batch: &[DataIndex]) -> Vec<f64> {
    let mut out = vec![0.0; 2 * batch.len()];
    model.grad_log_lik_each(theta, batch, &mut out, &mut Scratch::new());
    out
}

/// Central difference of `f` at `theta` with h = 1e-5 (absolute: far from the data the
/// responsibility switches over |Δθ| ≈ σₓ²/|θ₂|, so a step relative to |θ| would be too coarse).
fn central_diff(theta: &[f64], f: impl Fn(&[f64]) -> f64) -> Vec<f64> {
    common::central_diff_with(theta, |_| 1e-5, f)
}

/// `got ≈ want` entry-wise to `rel`·max(1, ‖want‖∞).
fn assert_close(got: &[f64], want: &[f64], rel: f64, what: &str) {
    let scale = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    for (j, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= rel * scale,
            "{what}: coordinate {j}: got {g}, want {w} (|diff| {:e} > {:e})",
            (g - w).abs(),
            rel * scale
        );
    }
}

/// The naive mixture density ½·N(x; θ₁, s) + ½·N(x; θ₁ + θ₂, s), logged at the end.
fn naive_log_lik(x: f64, theta: &[f64], s: f64) -> f64 {
    let norm = 1.0 / (2.0 * std::f64::consts::PI * s).sqrt();
    let a = (-(x - theta[0]).powi(2) / (2.0 * s)).exp();
    let b = (-(x - theta[0] - theta[1]).powi(2) / (2.0 * s)).exp();
    (0.5 * norm * (a + b)).ln()
}

/// θ near the modes, between them, and far from the data: at θ₁ = 100 and at (60, −120) both
/// e^a and e^b underflow for every datum (|x − μ| > 54.6 makes (x − μ)²/4 > 745), and at
/// (60, −120) the two components are equally far, so both branches of the responsibility run.
const THETAS: [[f64; 2]; 7] = [
    [0.0, 1.0],
    [1.0, -1.0],
    [0.5, 0.0],
    [-3.0, 4.0],
    [100.0, 1.0],
    [60.0, -120.0],
    [-200.0, 30.0],
];

// Central differences with h = 1e-5: the truncation error h²·|f'''|/6 comes from the
// logsumexp, whose third derivative is ≤ 0.1·(rate of a − b in θ)³ ≤ 0.1·(|θ₂|/σₓ²)³ per datum
// (5e5 at θ₂ = 120, σₓ² = 0.7: 1e-5 absolute, against per-datum gradients ≈ 80); rounding
// ε·|f|/h ≲ 2e-4 for |f| ≲ 1e7 against gradients ≈ 1e5. Both stay below 1e-6 relative to
// max(1, ‖∇f‖∞), while a wrong sign, factor or responsibility is O(1).
const FD_REL: f64 = 1e-6;

/// Gradients of the log-likelihood (summed and per datum) and of the log prior match central
/// differences at every θ of `THETAS`, for the paper's constants and for other ones.
/// Break-once check: giving ∂/∂θ₂ the responsibility of the first component (1 − r instead of
/// r) failed this test at θ = (0, 1): summed gradient, coordinate 1, got −93.1, want 33.4.
#[test]
fn gradients_match_central_differences() {
    let paper = MixtureSettings::default();
    let other = MixtureSettings {
        prior_variances: [3.0, 0.25],
        noise_variance: 0.7,
    };
    for settings in [paper, other] {
        let data = settings.simulate(300, [0.0, 1.0], 11);
        let model = GaussianMixtureModel::with_settings(data, settings).unwrap();
        let batch = all(&model);
        for theta in THETAS {
            let label = format!("{settings:?} at {theta:?}");
            let mut g = vec![0.0; 2];
            model.add_grad_log_lik(&theta, &batch, 1.0, &mut g, &mut Scratch::new());
            let fd = central_diff(&theta, |t| log_lik_each(&model, t, &batch).iter().sum());
            assert_close(&g, &fd, FD_REL, &format!("{label}: summed gradient"));
            assert!(g.iter().all(|v| v.is_finite()), "{label}: {g:?}");

            let each = grad_each(&model, &theta, &batch);
            for k in [0usize, 7, 150, 299] {
                let fd = central_diff(&theta, |t| log_lik_each(&model, t, &[k as DataIndex])[0]);
                assert_close(
                    &each[2 * k..2 * k + 2],
                    &fd,
                    FD_REL,
                    &format!("{label}: datum {k}"),
                );
            }

            let mut g = vec![0.5, -0.25];
            model.add_grad_log_prior(&theta, &mut g);
            let g = [g[0] - 0.5, g[1] + 0.25];
            let fd = central_diff(&theta, |t| model.log_prior(t));
            assert_close(&g, &fd, FD_REL, &format!("{label}: prior gradient"));
        }
    }
}

/// The per-datum gradients summed in batch order equal every batch method (with a weight and
/// onto a non-zero buffer), including the trait's default `add_grad_log_lik_terms`; the fused
/// log-likelihood equals the sum of `log_lik_each`. Repeated and unordered indices included.
/// Break-once check: dropping `weight` from the fused `log_lik_and_add_grad` failed this test
/// at θ = (0, 1): coordinate 0, got 3.82, want −6.92.
#[test]
fn per_datum_gradients_sum_to_batch_gradient() {
    let model =
        GaussianMixtureModel::new(GaussianMixtureModel::simulate(500, [0.0, 1.0], 3)).unwrap();
    let batch: Vec<DataIndex> = [17, 3, 499, 3, 250, 0, 17, 88, 401, 120]
        .into_iter()
        .chain(200..260)
        .collect();
    let weight = -2.5;
    let base = [0.75, -1.25];
    for theta in THETAS {
        let each = grad_each(&model, &theta, &batch);
        let mut want = base;
        for row in each.chunks_exact(2) {
            want[0] += weight * row[0];
            want[1] += weight * row[1];
        }
        let mut scratch = Scratch::new();
        let label = format!("θ = {theta:?}");
        // Same terms summed in the same order: equal up to the last bits of the accumulation.
        let rel = 1e-12;

        let mut g = base.to_vec();
        model.add_grad_log_lik(&theta, &batch, weight, &mut g, &mut scratch);
        assert_close(&g, &want, rel, &format!("{label}: add_grad_log_lik"));

        let mut g = base.to_vec();
        let total = model.log_lik_and_add_grad(&theta, &batch, weight, &mut g, &mut scratch);
        assert_close(&g, &want, rel, &format!("{label}: log_lik_and_add_grad"));
        let want_total: f64 = log_lik_each(&model, &theta, &batch).iter().sum();
        assert!(
            (total - want_total).abs() <= rel * want_total.abs().max(1.0),
            "{label}: fused log-lik {total} vs {want_total}"
        );

        let mut g = base.to_vec();
        let mut moments = TermMoments::new(CovarianceShape::Diagonal, 2);
        model.add_grad_log_lik_terms(
            &theta,
            None,
            &batch,
            weight,
            &mut g,
            &mut moments,
            &mut scratch,
        );
        assert_close(&g, &want, rel, &format!("{label}: add_grad_log_lik_terms"));
    }
}

/// log p(x | θ) equals the density formula evaluated directly where that does not underflow:
/// reference §6.8's log(1/(4√π)) + log[e^−(x−θ₁)²/4 + e^−(x−θ₁−θ₂)²/4] at σₓ² = 2, and
/// log[½·N(x; θ₁, σₓ²) + ½·N(x; θ₁ + θ₂, σₓ²)] for another σₓ².
/// Break-once check: dropping the ½ of the normalising constant (log_norm = −½·log(2πσₓ²))
/// failed this test by log 2 at the first datum (−10.227 vs −10.921).
#[test]
fn log_lik_matches_the_density_formula() {
    let x: Vec<f64> = (0..41).map(|k| -6.0 + 0.3 * k as f64).collect();
    let paper = model_on(&x, MixtureSettings::default());
    let narrow = MixtureSettings {
        prior_variances: [10.0, 1.0],
        noise_variance: 0.3,
    };
    let narrow_model = model_on(&x, narrow);
    let batch = all(&paper);
    for theta in [[0.0, 1.0], [1.0, -1.0], [-2.0, 3.5], [4.0, 0.0]] {
        let got = log_lik_each(&paper, &theta, &batch);
        let got_narrow = log_lik_each(&narrow_model, &theta, &batch);
        for (k, &xi) in x.iter().enumerate() {
            let spec = (1.0 / (4.0 * std::f64::consts::PI.sqrt())).ln()
                + ((-(xi - theta[0]).powi(2) / 4.0).exp()
                    + (-(xi - theta[0] - theta[1]).powi(2) / 4.0).exp())
                .ln();
            // Both are sums of a few terms of size ≲ 30: agreement to 1e-12 absolute.
            assert!(
                (got[k] - spec).abs() < 1e-12,
                "x = {xi}, θ = {theta:?}: {} vs {spec}",
                got[k]
            );
            let want = naive_log_lik(xi, &theta, 0.3);
            assert!(
                (got_narrow[k] - want).abs() < 1e-12 * want.abs().max(1.0),
                "σₓ² = 0.3, x = {xi}, θ = {theta:?}: {} vs {want}",
                got_narrow[k]
            );
        }
    }
}

/// Far from the data the log-likelihood stays finite and exact where the naive formula gives
/// −∞: at θ = (100, 1) the first component dominates by a factor e^50, so
/// log p = log ½ − ½·log(4π) − (x − 100)²/4 to rounding; at θ = (60, −120) and x = 0 both
/// components are equally far (a = b = −900), so log p = log ½ − ½·log(4π) − 900 + log 2 and
/// the gradient is exactly (0, 15).
/// Break-once check: computing log(e^a + e^b) directly in `Kernel::eval` made the
/// log-likelihood −inf at θ = (100, 1), and this test failed at its first assertion
/// ("x = 0: -inf"); the gradient test then failed too (its central difference became NaN).
#[test]
fn log_sum_exp_is_stable_far_from_the_data() {
    let x = [0.0, -1.3, 2.2, 0.4, -3.9];
    let model = model_on(&x, MixtureSettings::default());
    let batch = all(&model);
    let log_norm = -(2.0f64).ln() - 0.5 * (4.0 * std::f64::consts::PI).ln();

    let theta = [100.0, 1.0];
    let got = log_lik_each(&model, &theta, &batch);
    let grad = grad_each(&model, &theta, &batch);
    for (k, &xi) in x.iter().enumerate() {
        assert!(got[k].is_finite(), "x = {xi}: {}", got[k]);
        assert_eq!(naive_log_lik(xi, &theta, 2.0), f64::NEG_INFINITY);
        let want = log_norm - (xi - 100.0).powi(2) / 4.0;
        assert!(
            (got[k] - want).abs() <= 1e-14 * want.abs(),
            "x = {xi}: {} vs {want}",
            got[k]
        );
        // ∂/∂θ₁ = (x − 100)/2, ∂/∂θ₂ = r·(x − 101)/2 with r ≈ e^(−50 + x/2).
        assert!((grad[2 * k] - (xi - 100.0) / 2.0).abs() < 1e-12, "{grad:?}");
        assert!(grad[2 * k + 1].abs() < 1e-19, "{grad:?}");
    }

    let theta = [60.0, -120.0];
    let got = log_lik_each(&model, &theta, &[0]);
    let want = log_norm - 900.0 + (2.0f64).ln();
    assert_eq!(naive_log_lik(0.0, &theta, 2.0), f64::NEG_INFINITY);
    assert!(
        (got[0] - want).abs() <= 1e-14 * want.abs(),
        "{got:?} vs {want}"
    );
    assert_eq!(grad_each(&model, &theta, &[0]), [0.0, 15.0]);
}

/// log p(θ) = −θ₁²/(2σ₁²) − θ₂²/(2σ₂²), and prior draws have mean 0 and variances (σ₁², σ₂²)
/// within 4 standard errors (se of a sample variance: σ²·√(2/n)); a flat coordinate makes
/// drawing an error.
/// Break-once check: scaling the draws by σ² instead of σ failed this test on the variance of
/// θ₁ (100.4 vs 10).
#[test]
fn prior_density_and_draws() {
    let model =
        GaussianMixtureModel::new(GaussianMixtureModel::simulate(10, [0.0, 1.0], 1)).unwrap();
    assert_eq!(model.parameter_names(), ["theta1", "theta2"]);
    assert_eq!((model.dim(), model.num_data()), (2, 10));
    let lp = model.log_prior(&[2.0, -3.0]);
    assert!((lp - (-(4.0 / 20.0) - 9.0 / 2.0)).abs() < 1e-15, "{lp}");

    let n = 100_000;
    let mut rng = stream(5, 0);
    let mut draws = vec![[0.0; 2]; n];
    for d in &mut draws {
        model.sample_prior(&mut rng, d).unwrap();
    }
    for (j, var) in [10.0, 1.0].into_iter().enumerate() {
        let mean = draws.iter().map(|d| d[j]).sum::<f64>() / n as f64;
        let v = draws.iter().map(|d| (d[j] - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let nf = n as f64;
        assert!(
            (v - var).abs() < 4.0 * var * (2.0 / nf).sqrt(),
            "theta{}: variance {v} vs {var}",
            j + 1
        );
        assert!(
            mean.abs() < 4.0 * (var / nf).sqrt(),
            "theta{}: mean {mean}",
            j + 1
        );
    }

    let flat = model_on(
        &[0.0],
        MixtureSettings {
            prior_variances: [f64::INFINITY, 1.0],
            noise_variance: 2.0,
        },
    );
    assert_eq!(flat.log_prior(&[1e3, 0.0]), 0.0);
    let e = flat.sample_prior(&mut rng, &mut [0.0; 2]).unwrap_err();
    assert!(e.to_string().contains("flat prior"), "{e}");
}

/// Mixture moments: E x = θ₁ + θ₂/2, Var x = σₓ² + θ₂²/4, and the central fourth moment
/// μ₄ = δ⁴ + 6δ²σₓ² + 3σₓ⁴ with δ = θ₂/2, which gives the standard errors √(Var/n) of the
/// mean and √((μ₄ − Var²)/n) of the variance.
fn mixture_moments(theta: [f64; 2], s: f64) -> (f64, f64, f64) {
    let delta = theta[1] / 2.0;
    let var = s + delta * delta;
    let mu4 = delta.powi(4) + 6.0 * delta * delta * s + 3.0 * s * s;
    (theta[0] + delta, var, mu4)
}

/// The simulator's sample mean and variance match the mixture's within 4 standard errors, and
/// its empirical CDF is within the Kolmogorov–Smirnov 0.1 % critical distance 1.95/√n of the
/// mixture CDF; same seed, same data; another seed, other data.
/// Break-once check: drawing the noise with sd σₓ² instead of σₓ failed this test on the
/// variance (4.236 vs 2.25 at θ = (0, 1)).
#[test]
fn simulator_matches_the_mixture() {
    let n = 200_000;
    let nf = n as f64;
    for theta in [GaussianMixtureModel::THETA_TRUE, [-1.0, 3.0]] {
        let Features::F64(m) = GaussianMixtureModel::simulate(n, theta, 42) else {
            panic!("simulate returns f64 features")
        };
        assert_eq!((m.rows(), m.cols()), (n, 1));
        let x = m.as_slice();
        let (mean, var, mu4) = mixture_moments(theta, 2.0);
        let got_mean = x.iter().sum::<f64>() / nf;
        let got_var = x.iter().map(|v| (v - got_mean).powi(2)).sum::<f64>() / (nf - 1.0);
        assert!(
            (got_mean - mean).abs() < 4.0 * (var / nf).sqrt(),
            "θ = {theta:?}: mean {got_mean} vs {mean}"
        );
        assert!(
            (got_var - var).abs() < 4.0 * ((mu4 - var * var) / nf).sqrt(),
            "θ = {theta:?}: variance {got_var} vs {var}"
        );

        let c1 = Normal::new(theta[0], 2f64.sqrt()).unwrap();
        let c2 = Normal::new(theta[0] + theta[1], 2f64.sqrt()).unwrap();
        let mut sorted = x.to_vec();
        sorted.sort_by(f64::total_cmp);
        let ks = sorted
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                let f = 0.5 * (c1.cdf(v) + c2.cdf(v));
                (f - i as f64 / nf)
                    .abs()
                    .max(((i + 1) as f64 / nf - f).abs())
            })
            .fold(0.0, f64::max);
        assert!(ks < 1.95 / nf.sqrt(), "θ = {theta:?}: KS distance {ks}");
    }

    let a = GaussianMixtureModel::simulate(100, [0.0, 1.0], 7);
    let b = GaussianMixtureModel::simulate(100, [0.0, 1.0], 7);
    let c = GaussianMixtureModel::simulate(100, [0.0, 1.0], 8);
    let values = |f: &Features| match f {
        Features::F64(m) => m.as_slice().to_vec(),
        _ => unreachable!("simulated data are dense f64"),
    };
    assert_eq!(values(&a), values(&b));
    assert_ne!(values(&a), values(&c));
}

/// Bad data and settings are errors that say what is wrong.
/// Break-once check: skipping the finiteness scan in `with_settings` let the NaN datum through,
/// and this test failed on `unwrap_err`.
#[test]
fn bad_data_and_settings_are_rejected() {
    let two_cols = Features::F64(Matrix::from_vec(vec![0.0; 6], 3, 2).unwrap());
    let e = GaussianMixtureModel::new(two_cols).unwrap_err();
    assert!(e.to_string().contains("got 2 columns"), "{e}");

    let empty = Features::F64(Matrix::from_vec(vec![], 0, 1).unwrap());
    let e = GaussianMixtureModel::new(empty).unwrap_err();
    assert!(
        matches!(e, ModelError::Data(DataError::Empty { .. })),
        "{e}"
    );

    let nan = Features::F32(Matrix::from_vec(vec![0.0, f32::NAN], 2, 1).unwrap());
    let e = GaussianMixtureModel::new(nan).unwrap_err();
    assert!(e.to_string().contains("row 2: NaN"), "{e}");

    let data = || Features::F64(Matrix::from_vec(vec![0.5], 1, 1).unwrap());
    for (settings, what) in [
        (
            MixtureSettings {
                prior_variances: [0.0, 1.0],
                noise_variance: 2.0,
            },
            "prior variance of theta1",
        ),
        (
            MixtureSettings {
                prior_variances: [10.0, f64::NAN],
                noise_variance: 2.0,
            },
            "prior variance of theta2",
        ),
        (
            MixtureSettings {
                prior_variances: [10.0, 1.0],
                noise_variance: f64::INFINITY,
            },
            "component variance",
        ),
    ] {
        let e = GaussianMixtureModel::with_settings(data(), settings).unwrap_err();
        assert!(e.to_string().contains(what), "{e}");
    }

    // f32 data are accepted and read as f64.
    let f32_data = Features::F32(Matrix::from_vec(vec![0.25f32, -1.5], 2, 1).unwrap());
    let model = GaussianMixtureModel::new(f32_data).unwrap();
    assert_eq!(model.data(), [0.25, -1.5]);
}
