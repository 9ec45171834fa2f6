//! Probabilistic matrix factorisation (reference §5.6) and the MovieLens loader: gradients
//! against central differences, per-datum/batch/fused agreement, the sparsity of the
//! likelihood gradient, the prior density against an independent formula and by sampling,
//! loader errors, and the real u1.base/u1.test split.

use crate::common;

use common::{dataset, normals, uniform};
use rand::RngExt;
use sgmcmc::data::{DataError, Dataset, Features, Matrix, load_movielens, movielens_counts};
use sgmcmc::diagnostics::mcse_mean;
use sgmcmc::model::{
    CovarianceShape, DataIndex, Model, Pmf, PmfSettings, Predictive, Scratch, TermMoments,
};
use sgmcmc::rng::{ChainRng, stream};
use statrs::distribution::{Continuous, Gamma, Normal};
use std::path::Path;

/// ψ(4) − log 5 = 1 + 1/2 + 1/3 − γ − log 5: E[log λ] for λ ~ Gamma(4, rate 5).
const MEAN_LOG_LAMBDA: f64 =
    1.0 + 0.5 + 1.0 / 3.0 - 0.577_215_664_901_532_9 - 1.609_437_912_434_100_3;
/// ψ'(4) = π²/6 − 1 − 1/4 − 1/9: Var[log λ].
const VAR_LOG_LAMBDA: f64 =
    std::f64::consts::PI * std::f64::consts::PI / 6.0 - 1.0 - 0.25 - 1.0 / 9.0;

/// `n` random ratings in 1..=5 of `users` × `items` (every user and item appears once at
/// least, so the default counts are the given ones).
fn ratings(seed: u64, n: usize, users: usize, items: usize) -> Dataset {
    let mut rng = stream(seed, 7);
    let mut x = Vec::with_capacity(2 * n);
    let mut y = Vec::with_capacity(n);
    for k in 0..n {
        let u = if k < users {
            k
        } else {
            rng.random_range(0..users)
        };
        let i = if k < items {
            k
        } else {
            rng.random_range(0..items)
        };
        x.extend([u as f64, i as f64]);
        y.push(rng.random_range(1..=5u32) as f64);
    }
    dataset(x, 2, Some(y), false)
}

/// A small model (defaults α = 3, a₀ = 4, b₀ = 5) and a random θ: factors ~ N(0, 0.6²),
/// μ ~ N(0, 0.3²), φ ~ U(−1, 1).
fn small_model(seed: u64, d: usize) -> (Pmf, Vec<f64>) {
    let settings = PmfSettings {
        latent_dim: d,
        ..PmfSettings::default()
    };
    let m = Pmf::new(ratings(seed, 40, 5, 6), settings).unwrap();
    assert_eq!((m.users(), m.items()), (5, 6));
    let mut theta: Vec<f64> = normals(seed, 1, m.dim()).iter().map(|z| 0.6 * z).collect();
    let [mu_u, mu_v, phi_u, phi_v] = m.hyper_blocks();
    let mut rng = stream(seed, 2);
    for r in [mu_u, mu_v] {
        theta[r].iter_mut().for_each(|t| *t *= 0.5);
    }
    for r in [phi_u, phi_v] {
        theta[r]
            .iter_mut()
            .for_each(|t| *t = uniform(&mut rng, -1.0, 1.0));
    }
    (m, theta)
}

/// Central differences, h = 1e-5·max(1, |θⱼ|), at the coordinates `coords`.
fn central_diff_at(theta: &[f64], coords: &[usize], f: impl Fn(&[f64]) -> f64) -> Vec<f64> {
    let mut t = theta.to_vec();
    coords
        .iter()
        .map(|&j| {
            let h = 1e-5 * theta[j].abs().max(1.0);
            t[j] = theta[j] + h;
            let up = f(&t);
            t[j] = theta[j] - h;
            let down = f(&t);
            t[j] = theta[j];
            (up - down) / (2.0 * h)
        })
        .collect()
}

// Tolerance of the finite-difference checks: with h = 1e-5 the truncation error is
// h²·|f'''|/6, and |f'''| ≤ e^{|φ|}·O(Σ(W − μ)²) ≲ 1e2 here, so ≲ 2e-9; rounding is
// ε·|f|/h ≲ 1e-16·1e3/1e-5 = 1e-8. 1e-6 relative to max(1, ‖∇‖∞) is 100× above both, while a
// wrong factor or sign is O(1) relative.
const FD_TOL: f64 = 1e-6;

fn assert_close_at(got: &[f64], want: &[f64], coords: &[usize], what: &str) {
    let scale = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    for ((g, w), j) in got.iter().zip(want).zip(coords) {
        assert!(
            (g - w).abs() <= FD_TOL * scale,
            "{what}: coordinate {j}: analytic {g}, finite difference {w}"
        );
    }
}

/// Break-once (each restored): (1) the μ gradient without its −λ·μ term (μ's own prior)
/// failed the prior check at coordinate 33 (`mu_U[0]`: analytic −1.77, difference −2.24);
/// (2) `add_grad_log_lik` scattering α·e·Vⱼ (instead of α·e·Uᵢ) into Vⱼ failed the
/// likelihood check at coordinate 16 (`V[0,1]`).
#[test]
fn gradients_match_central_differences() {
    let (m, theta) = small_model(11, 3);
    let dim = m.dim();
    assert_eq!(dim, 5 * 3 + 6 * 3 + 4 * 3);
    // Every coordinate: the prior has a term in each, including all hyperparameters.
    let all: Vec<usize> = (0..dim).collect();
    let mut g = vec![0.0; dim];
    m.add_grad_log_prior(&theta, &mut g);
    let fd = central_diff_at(&theta, &all, |t| m.log_prior(t));
    assert_close_at(&g, &fd, &all, "prior");

    // Batch likelihood (with a repeated rating) at weight 1.7, spot-checked at the factors of
    // the batch's users/items, at factors outside the batch and at every hyperparameter.
    let batch: Vec<DataIndex> = vec![3, 17, 17, 29, 0, 38];
    let weight = 1.7;
    let mut g = vec![0.0; dim];
    m.add_grad_log_lik(&theta, &batch, weight, &mut g, &mut Scratch::new());
    let f = |t: &[f64]| {
        let mut out = vec![0.0; batch.len()];
        m.log_lik_each(t, &batch, &mut out, &mut Scratch::new());
        weight * out.iter().sum::<f64>()
    };
    let coords: Vec<usize> = (0..dim).step_by(2).chain([1, dim - 1]).collect();
    let fd = central_diff_at(&theta, &coords, f);
    let got: Vec<f64> = coords.iter().map(|&j| g[j]).collect();
    assert_close_at(&got, &fd, &coords, "likelihood");
    // The check is not vacuous: some checked coordinates have a sizeable gradient.
    assert!(got.iter().any(|v| v.abs() > 1.0), "{got:?}");
}

fn rel_err(a: &[f64], b: &[f64]) -> f64 {
    let scale = b.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    a.iter()
        .zip(b)
        .fold(0.0f64, |m, (x, y)| m.max((x - y).abs()))
        / scale
}

/// Break-once (each restored): an extra write `grad[μ_U[0]] += c` per rating in
/// `add_grad_log_lik` failed the sum assertion (relative error 1); `add_grad_log_lik`
/// scattering α·e·Vⱼ into Vⱼ failed it too (relative error 1.35).
#[test]
fn per_datum_terms_sum_to_the_batch_and_the_fused_pass_agrees() {
    let (m, theta) = small_model(12, 4);
    let dim = m.dim();
    let batch: Vec<DataIndex> = (0..40).rev().step_by(3).chain([5, 5]).collect();
    let mut scratch = Scratch::new();
    let mut rows = vec![0.0; batch.len() * dim];
    m.grad_log_lik_each(&theta, &batch, &mut rows, &mut scratch);
    let mut summed = vec![0.0; dim];
    for row in rows.chunks_exact(dim) {
        summed.iter_mut().zip(row).for_each(|(s, r)| *s += r);
    }
    let mut batch_grad = vec![0.0; dim];
    m.add_grad_log_lik(&theta, &batch, 1.0, &mut batch_grad, &mut scratch);
    assert!(
        rel_err(&summed, &batch_grad) <= 1e-12,
        "{}",
        rel_err(&summed, &batch_grad)
    );

    // The fused pass: value = Σ log_lik_each, gradient = add_grad_log_lik (weight −2.5).
    let mut each = vec![0.0; batch.len()];
    m.log_lik_each(&theta, &batch, &mut each, &mut scratch);
    let want_value: f64 = each.iter().sum();
    let mut want = normals(12, 9, dim);
    let mut got = want.clone();
    m.add_grad_log_lik(&theta, &batch, -2.5, &mut want, &mut scratch);
    let value = m.log_lik_and_add_grad(&theta, &batch, -2.5, &mut got, &mut scratch);
    assert!(
        (value - want_value).abs() <= 1e-12 * want_value.abs(),
        "{value} vs {want_value}"
    );
    assert!(rel_err(&got, &want) <= 1e-12);

    // The CCAdL terms (plain and control-variate differences) against the same dense rows.
    let centre: Vec<f64> = theta.iter().map(|t| 0.9 * t + 0.01).collect();
    let mut at_centre = vec![0.0; batch.len() * dim];
    m.grad_log_lik_each(&centre, &batch, &mut at_centre, &mut scratch);
    for (c, rows_c) in [(None, None), (Some(&centre[..]), Some(&at_centre))] {
        let mut want_moments = TermMoments::new(CovarianceShape::Diagonal, dim);
        let mut want_grad = vec![0.5; dim];
        for (k, row) in rows.chunks_exact(dim).enumerate() {
            let t: Vec<f64> = match rows_c {
                None => row.to_vec(),
                Some(rc) => row.iter().zip(&rc[k * dim..]).map(|(a, b)| a - b).collect(),
            };
            want_grad
                .iter_mut()
                .zip(&t)
                .for_each(|(g, t)| *g += 0.3 * t);
            want_moments.add(&t);
        }
        let mut moments = TermMoments::new(CovarianceShape::Diagonal, dim);
        let mut grad = vec![0.5; dim];
        m.add_grad_log_lik_terms(
            &theta,
            c,
            &batch,
            0.3,
            &mut grad,
            &mut moments,
            &mut scratch,
        );
        assert!(rel_err(&grad, &want_grad) <= 1e-12);
        assert_eq!(moments.count(), batch.len());
        let (mut s, mut s_want) = (vec![0.0; dim], vec![0.0; dim]);
        moments.sum_of_terms(&mut s);
        want_moments.sum_of_terms(&mut s_want);
        assert!(rel_err(&s, &s_want) <= 1e-12);
        let (mut v, mut v_want) = (vec![0.0; dim], vec![0.0; dim]);
        moments.add_centred_second_moments(1.0, &mut v);
        want_moments.add_centred_second_moments(1.0, &mut v_want);
        assert!(rel_err(&v, &v_want) <= 1e-12);
    }
}

/// Break-once: an extra `grad[h0] += c` (a write to μ_U[0]) in `add_grad_log_lik` failed the
/// bitwise assertion at coordinate 33 (μ_U[0]).
#[test]
fn batch_gradient_touches_only_the_batch_factors() {
    let (m, theta) = small_model(13, 3);
    let dim = m.dim();
    // Rating k < 5 is user k's and item k's (see `ratings`).
    let batch: Vec<DataIndex> = vec![0, 2, 4, 2];
    let mut touched = vec![false; dim];
    for k in [0, 2, 4] {
        m.user_factor(k)
            .chain(m.item_factor(k))
            .for_each(|j| touched[j] = true);
    }
    let before = normals(13, 5, dim);
    let mut grad = before.clone();
    m.add_grad_log_lik(&theta, &batch, 4.0, &mut grad, &mut Scratch::new());
    let mut grad_fused = before.clone();
    m.log_lik_and_add_grad(&theta, &batch, 4.0, &mut grad_fused, &mut Scratch::new());
    for j in 0..dim {
        if touched[j] {
            assert_ne!(grad[j], before[j], "coordinate {j} should change");
            assert_ne!(
                grad_fused[j], before[j],
                "fused: coordinate {j} should change"
            );
        } else {
            assert_eq!(
                grad[j].to_bits(),
                before[j].to_bits(),
                "coordinate {j} touched"
            );
            assert_eq!(
                grad_fused[j].to_bits(),
                before[j].to_bits(),
                "fused: {j} touched"
            );
        }
    }
}

/// log p(θ) with constants, from statrs densities: Wᵢ ~ N(μ, diag(λ)⁻¹), μ ~ N(0, diag(λ)⁻¹),
/// λ ~ Gamma(a₀, rate b₀), plus log |dλ/dφ| = φ.
fn direct_log_prior(m: &Pmf, theta: &[f64]) -> f64 {
    let d = m.latent_dim();
    let [mu_u, mu_v, phi_u, phi_v] = m.hyper_blocks();
    let gamma = Gamma::new(4.0, 5.0).unwrap();
    let mut total = 0.0;
    for (rows, mu, phi) in [
        (
            (0..m.users()).map(|i| m.user_factor(i)).collect::<Vec<_>>(),
            mu_u,
            phi_u,
        ),
        (
            (0..m.items()).map(|j| m.item_factor(j)).collect(),
            mu_v,
            phi_v,
        ),
    ] {
        for k in 0..d {
            let (mu_k, phi_k) = (theta[mu.start + k], theta[phi.start + k]);
            let lam = phi_k.exp();
            let sd = lam.powf(-0.5);
            total += gamma.ln_pdf(lam) + phi_k;
            total += Normal::new(0.0, sd).unwrap().ln_pdf(mu_k);
            let w = Normal::new(mu_k, sd).unwrap();
            total += rows
                .iter()
                .map(|r| w.ln_pdf(theta[r.start + k]))
                .sum::<f64>();
        }
    }
    total
}

/// Break-once: with n/2 instead of (n + 1)/2 in the φ coefficient (μ's normaliser dropped,
/// in the density and its gradient alike) the "constant" moved from 9.25 to 8.09 between
/// two points and the test failed.
#[test]
fn log_prior_differences_match_an_independent_formula() {
    let (m, theta0) = small_model(14, 3);
    let base = m.log_prior(&theta0) - direct_log_prior(&m, &theta0);
    for s in 0..20 {
        let (_, theta) = small_model(100 + s, 3);
        let got = m.log_prior(&theta) - direct_log_prior(&m, &theta);
        // Both are sums of ≈ 50 terms of size ≲ 30: rounding ≲ 1e-12.
        assert!(
            (got - base).abs() < 1e-9,
            "point {s}: constant {got} vs {base}"
        );
    }
}

/// A tiny model for the sampling checks: 2 users, 3 items, d = 2 (D = 18).
fn tiny_model() -> Pmf {
    let settings = PmfSettings {
        latent_dim: 2,
        users: Some(2),
        items: Some(3),
        ..PmfSettings::default()
    };
    Pmf::new(ratings(15, 3, 2, 3), settings).unwrap()
}

/// Exact prior draws: φ has mean ψ(4) − log 5 and variance ψ'(4); given λ, λ·(W − μ)² and
/// λ·μ² have mean 1. Tolerances: 4 standard errors of i.i.d. means.
///
/// Break-once (each restored): drawing λ from Gamma(4, scale 5) (rate 1/5) moved the φ mean
/// by log 25 (2.86 against −0.353) and failed; sd = 1/λ instead of 1/√λ failed the
/// λ·(W − μ)² mean (1.68 against 1).
#[test]
fn prior_draws_have_the_gamma_log_precision_marginal() {
    let m = tiny_model();
    let dim = m.dim();
    let [mu_u, _, phi_u, phi_v] = m.hyper_blocks();
    let mut rng: ChainRng = stream(16, 0);
    let mut theta = vec![0.0; dim];
    let draws = 40_000;
    let (mut phi_sum, mut w_scaled, mut mu_scaled) = (0.0, 0.0, 0.0);
    for _ in 0..draws {
        m.sample_prior(&mut rng, &mut theta).unwrap();
        phi_sum += theta[phi_u.clone()]
            .iter()
            .chain(&theta[phi_v.clone()])
            .sum::<f64>();
        let lam = theta[phi_u.start].exp();
        let mu = theta[mu_u.start];
        w_scaled += lam * (theta[m.user_factor(1).start] - mu).powi(2);
        mu_scaled += lam * mu * mu;
    }
    let n_phi = (draws * 4) as f64;
    let phi_mean = phi_sum / n_phi;
    let se = (VAR_LOG_LAMBDA / n_phi).sqrt();
    assert!(
        (phi_mean - MEAN_LOG_LAMBDA).abs() < 4.0 * se,
        "{phi_mean} vs {MEAN_LOG_LAMBDA}"
    );
    // λ(W − μ)² and λμ² are χ²₁: variance 2.
    let se = (2.0 / draws as f64).sqrt();
    assert!(
        (w_scaled / draws as f64 - 1.0).abs() < 4.0 * se,
        "{}",
        w_scaled / draws as f64
    );
    assert!(
        (mu_scaled / draws as f64 - 1.0).abs() < 4.0 * se,
        "{}",
        mu_scaled / draws as f64
    );
}

/// MALA on exp(log_prior) alone (no data): the φ marginal of the model's density must have
/// mean ψ(4) − log 5. This checks the density itself, normalisers of the rows and of μ
/// included (a missing ½φ per row shifts the φ marginal), and MALA's proposals use the
/// gradient. Tolerance: 4 Monte Carlo standard errors (autocorrelation-aware, mcse_mean).
///
/// Break-once: with n/2 in place of (n + 1)/2 (μ's normaliser dropped, density and gradient
/// alike) the φ mean moved to −0.508 against −0.353 (mcse 0.0044) and the test failed.
#[test]
fn mala_on_the_prior_recovers_the_log_precision_mean() {
    let m = tiny_model();
    let dim = m.dim();
    let [_, _, phi_u, phi_v] = m.hyper_blocks();
    let mut rng: ChainRng = stream(17, 0);
    let mut x = vec![0.0; dim];
    m.sample_prior(&mut rng, &mut x).unwrap();
    let grad = |t: &[f64], g: &mut [f64]| {
        g.fill(0.0);
        m.add_grad_log_prior(t, g);
    };
    let eps = 0.02;
    let (mut gx, mut y, mut gy) = (vec![0.0; dim], vec![0.0; dim], vec![0.0; dim]);
    grad(&x, &mut gx);
    let mut lx = m.log_prior(&x);
    let log_q = |to: &[f64], from: &[f64], g_from: &[f64]| -> f64 {
        -to.iter()
            .zip(from)
            .zip(g_from)
            .map(|((t, f), g)| (t - f - eps * g).powi(2))
            .sum::<f64>()
            / (4.0 * eps)
    };
    let iters = 600_000;
    let mut trace = Vec::with_capacity(iters / 10);
    let mut accepted = 0usize;
    let mut xi = vec![0.0; dim];
    for it in 0..iters {
        sgmcmc::rng::fill_standard_normal(&mut rng, &mut xi);
        for j in 0..dim {
            y[j] = x[j] + eps * gx[j] + (2.0 * eps).sqrt() * xi[j];
        }
        grad(&y, &mut gy);
        let ly = m.log_prior(&y);
        let log_a = ly - lx + log_q(&x, &y, &gy) - log_q(&y, &x, &gx);
        if rng.random::<f64>().ln() < log_a {
            std::mem::swap(&mut x, &mut y);
            std::mem::swap(&mut gx, &mut gy);
            lx = ly;
            accepted += 1;
        }
        if it % 10 == 0 {
            let s: f64 = x[phi_u.clone()].iter().chain(&x[phi_v.clone()]).sum();
            trace.push(s / 4.0);
        }
    }
    let rate = accepted as f64 / iters as f64;
    assert!((0.3..0.99).contains(&rate), "acceptance {rate}");
    let mean = trace.iter().sum::<f64>() / trace.len() as f64;
    let se = mcse_mean(&trace);
    assert!(se.is_finite() && se < 0.02, "mcse {se}");
    assert!(
        (mean - MEAN_LOG_LAMBDA).abs() < 4.0 * se,
        "phi mean {mean} vs {MEAN_LOG_LAMBDA} (mcse {se})"
    );
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Break-once: accepting id 0 (no zero check in `parse_id`) made `zero.base` load, and the
/// test failed on its `unwrap_err`.
#[test]
fn loader_errors_name_the_file_and_line() {
    let d = tempfile::tempdir().unwrap();
    let good = "1\t1\t5\t100\n2\t3\t4\t101\n";
    let cases = [
        (
            "fields.base",
            "1\t1\t5\t100\n2\t3\t4\n",
            "line 2",
            "3 tab-separated fields",
        ),
        (
            "zero.base",
            "1\t1\t5\t100\n\n0\t3\t4\t101\n",
            "line 3",
            "user id 0",
        ),
        ("frac.base", "1\t1.5\t5\t100\n", "line 1", "item id \"1.5\""),
        (
            "neg.base",
            "1\t1\t5\t1\n-2\t1\t5\t1\n",
            "line 2",
            "user id \"-2\"",
        ),
        (
            "rating.base",
            "1\t1\tfive\t100\n",
            "line 1",
            "cannot parse \"five\"",
        ),
        (
            "inf.base",
            "1\t1\t3\t1\n1\t2\tinf\t100\n",
            "line 2",
            "not finite",
        ),
        ("empty.base", "\n\n", "0 rows", "empty.base"),
    ];
    for (file, text, place, what) in cases {
        let p = write(&d, file, text);
        let e = load_movielens(&p).unwrap_err().to_string();
        assert!(
            e.contains(file) && e.contains(place) && e.contains(what),
            "{file}: {e}"
        );
        assert!(!e.contains('\n'), "{e}");
    }
    let e = load_movielens(&d.path().join("missing.base")).unwrap_err();
    assert!(
        matches!(e, DataError::Io { .. }) && e.to_string().contains("missing.base"),
        "{e}"
    );
    assert_eq!(
        load_movielens(&write(&d, "ok.base", good)).unwrap().rows(),
        2
    );
}

/// Out-of-range indices: in the training data given fewer users than it has, and in a
/// held-out row beyond the model's counts (the pipeline calls this before scoring).
#[test]
fn indices_beyond_the_counts_are_errors_naming_the_row() {
    let settings = PmfSettings {
        latent_dim: 2,
        users: Some(4),
        ..PmfSettings::default()
    };
    let e = Pmf::new(ratings(18, 20, 5, 6), settings)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("row 5") && e.contains("user index 4") && e.contains("0..4"),
        "{e}"
    );
    let (m, theta) = small_model(18, 2);
    let ok = Features::F64(Matrix::from_vec(vec![4.0, 5.0, 0.0, 0.0], 2, 2).unwrap());
    m.check_held_out_features(&ok, "test").unwrap();
    let bad = Features::F64(Matrix::from_vec(vec![4.0, 5.0, 0.0, 6.0], 2, 2).unwrap());
    let e = m
        .check_held_out_features(&bad, "test")
        .unwrap_err()
        .to_string();
    assert!(e.contains("test: row 2: item index 6"), "{e}");
    // predict: the mean and the normal log density with its constant.
    let mut out = [0.0];
    let lp = m.predict(&theta, &[1.0, 2.0], 3.5, &mut out);
    let z: f64 = m
        .user_factor(1)
        .zip(m.item_factor(2))
        .map(|(a, b)| theta[a] * theta[b])
        .sum();
    assert!((out[0] - z).abs() < 1e-15);
    let want = Normal::new(z, 3f64.powf(-0.5)).unwrap().ln_pdf(3.5);
    assert!((lp - want).abs() < 1e-12, "{lp} vs {want}");
}

/// The real split, if the shared data directory is present.
#[test]
fn movielens_100k_u1_split() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/movielens-100k");
    if !dir.is_dir() {
        println!("skipped: {} is absent", dir.display());
        return;
    }
    let train = load_movielens(&dir.join("u1.base")).unwrap();
    let test = load_movielens(&dir.join("u1.test")).unwrap();
    assert_eq!((train.rows(), test.rows()), (80_000, 20_000));
    assert_eq!(
        movielens_counts(&dir.join("u1.base")).unwrap(),
        Some((943, 1682))
    );
    let settings = PmfSettings {
        users: Some(943),
        items: Some(1682),
        ..PmfSettings::default()
    };
    let m = Pmf::new(train, settings).unwrap();
    assert_eq!((m.users(), m.items(), m.latent_dim()), (943, 1682, 20));
    assert_eq!(m.dim(), 52_580);
    assert_eq!(m.num_data(), 80_000);
    m.check_held_out_features(&test.features, "u1.test")
        .unwrap();
    let names = m.parameter_names();
    assert_eq!(names.len(), 52_580);
    assert_eq!(names[0], "U[0,0]");
    assert_eq!(names[943 * 20], "V[0,0]");
    assert_eq!(names[52_580 - 1], "log_lambda_V[19]");
}

/// The MAP search starts from `map_start`, not θ = 0: from zeros L-BFGS stays on the saddle
/// U = V = 0 (∇_U vanishes at V = 0) and fits only the hyperparameters; from `map_start` it
/// finds factors and a higher log posterior. Break-once: `map_start` returning zeros failed the
/// factor-norm assertion (0).
#[test]
fn the_map_search_leaves_the_zero_saddle() {
    let m = Pmf::new(
        ratings(5, 200, 8, 9),
        PmfSettings {
            latent_dim: 3,
            ..PmfSettings::default()
        },
    )
    .unwrap();
    let options = sgmcmc::optim::lbfgs::LbfgsOptions {
        max_iterations: 500,
        ..Default::default()
    };
    let factors = (m.users() + m.items()) * m.latent_dim();
    let from_zero = sgmcmc::optim::find_map(&m, &vec![0.0; m.dim()], &options).unwrap();
    assert!(from_zero.theta[..factors].iter().all(|v| *v == 0.0));
    let start = m.map_start();
    assert_eq!(start, m.map_start(), "the start is a fixed point");
    let map = sgmcmc::optim::find_map(&m, &start, &options).unwrap();
    let norm = map.theta[..factors]
        .iter()
        .map(|v| v * v)
        .sum::<f64>()
        .sqrt();
    assert!(norm > 1.0, "factor norm {norm}");
    assert!(
        map.log_posterior > from_zero.log_posterior + 1.0,
        "{} vs {}",
        map.log_posterior,
        from_zero.log_posterior
    );
}
