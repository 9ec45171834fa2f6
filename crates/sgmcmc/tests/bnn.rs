//! The Bayesian neural network of reference §5.6 (`model::Bnn`): gradients against finite
//! differences, per-datum terms against the batched GEMM pass, blocking, f32 features, the
//! predictive distribution, and the MNIST run-file keys on the real data (skipped when absent).

use crate::common;

use common::{dataset, normals};
use rand::RngExt;
use sgmcmc::model::{
    Bnn, CovarianceShape, DataIndex, Model, Predictive, PredictiveTask, Scratch, TermMoments,
};
use sgmcmc::rng::{chain_stream, stream};

/// Inputs, hidden width and classes of the small test network (D = 7·5 + 5 + 5·3 + 3 = 58).
const I: usize = 7;
const H: usize = 5;
const K: usize = 3;
const N: usize = 50;
const D: usize = I * H + H + H * K + K;

/// x ~ N(0, 1) (N × I) and labels uniform in 0..K, with label K − 1 forced on row 0 so that
/// the model sees K classes.
fn data(seed: u64) -> (Vec<f64>, Vec<f64>) {
    let x = normals(seed, 0, N * I);
    let mut rng = stream(seed, 1);
    let mut y: Vec<f64> = (0..N).map(|_| rng.random_range(0..K) as f64).collect();
    y[0] = (K - 1) as f64;
    (x, y)
}

fn model(as_f32: bool, block: usize) -> Bnn {
    let (x, y) = data(11);
    Bnn::new(dataset(x, I, Some(y), as_f32), H, 2.0)
        .unwrap()
        .with_block_rows(block)
        .unwrap()
}

/// θ ~ N(0, 0.8²): softmaxes far from uniform and far from saturated.
fn theta(seed: u64) -> Vec<f64> {
    normals(seed, 2, D).iter().map(|v| 0.8 * v).collect()
}

fn all_rows() -> Vec<DataIndex> {
    (0..N as DataIndex).collect()
}

/// A batch with repeated indices, longer than N.
fn repeated_batch() -> Vec<DataIndex> {
    let mut rng = stream(5, 3);
    let mut b: Vec<DataIndex> = (0..2 * N).map(|_| rng.random_range(0..N as u32)).collect();
    b.extend_from_slice(&[3, 3, 3, 0, 49]);
    b
}

fn max_abs(v: &[f64]) -> f64 {
    v.iter().fold(0.0f64, |m, x| m.max(x.abs()))
}

fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .fold(0.0f64, |m, (x, y)| m.max((x - y).abs()))
}

fn batch_grad(m: &Bnn, theta: &[f64], batch: &[DataIndex], weight: f64) -> (f64, Vec<f64>) {
    let mut g = vec![0.0; m.dim()];
    let ll = m.log_lik_and_add_grad(theta, batch, weight, &mut g, &mut Scratch::new());
    (ll, g)
}

fn log_lik_sum(m: &Bnn, theta: &[f64], batch: &[DataIndex]) -> f64 {
    let mut out = vec![0.0; batch.len()];
    m.log_lik_each(theta, batch, &mut out, &mut Scratch::new());
    out.iter().sum()
}

fn per_datum(m: &Bnn, theta: &[f64], batch: &[DataIndex]) -> Vec<f64> {
    let mut out = vec![0.0; batch.len() * m.dim()];
    m.grad_log_lik_each(theta, batch, &mut out, &mut Scratch::new());
    out
}

/// Central differences of Σ log β_y and of log p(θ) at spot-checked coordinates of each of B,
/// b, A, a. With step h = 1e-5 the truncation error is h²·|f'''|/6 ≈ 1e-10·O(N) and the
/// rounding error ε·|f|/h ≈ 2e-16·60/1e-5 ≈ 1e-9; the tolerance 1e-6·(1 + |g|) is far above
/// both and far below any real error (gradients here are O(1)–O(10)).
///
/// Break-once: dZ1 = H ⊙ dH (the rowsum term of the softmax Jacobian dropped) made the B and b
/// coordinates fail (B[0,0]: gradient −0.421 vs central difference −0.056); restored.
#[test]
fn gradients_match_central_differences() {
    let m = model(false, 1024);
    let th = theta(1);
    let batch = all_rows();
    let (_, g) = batch_grad(&m, &th, &batch, 1.0);
    let mut gp = vec![0.0; D];
    m.add_grad_log_prior(&th, &mut gp);
    let h = 1e-5;
    // B[0,0], B[3,2], B[6,4]; b[0], b[4]; A[0,0], A[2,1], A[4,2]; a[0], a[2].
    let coords = [0, 3 * H + 2, 6 * H + 4, I * H, I * H + 4];
    let oa = I * H + H;
    let coords = coords.into_iter().chain([
        oa,
        oa + 2 * K + 1,
        oa + 4 * K + 2,
        oa + H * K,
        oa + H * K + 2,
    ]);
    let names = m.parameter_names();
    for j in coords {
        let mut up = th.clone();
        let mut down = th.clone();
        up[j] += h;
        down[j] -= h;
        let fd = (log_lik_sum(&m, &up, &batch) - log_lik_sum(&m, &down, &batch)) / (2.0 * h);
        assert!(
            (fd - g[j]).abs() <= 1e-6 * (1.0 + g[j].abs()),
            "{}: gradient {} vs central difference {fd}",
            names[j],
            g[j]
        );
        let fdp = (m.log_prior(&up) - m.log_prior(&down)) / (2.0 * h);
        assert!(
            (fdp - gp[j]).abs() <= 1e-6 * (1.0 + gp[j].abs()),
            "prior {}: {} vs {fdp}",
            names[j],
            gp[j]
        );
    }
    assert_eq!(names.len(), D);
    assert_eq!(
        (names[0].as_str(), names[I * H].as_str(), names[oa].as_str()),
        ("B[0,0]", "b[0]", "A[0,0]")
    );
    assert_eq!(names[D - 1], format!("a[{}]", K - 1));
}

/// Σ per-datum rows = batch gradient (to 1e-12 of its size) on a batch with repeated indices,
/// the weight scales it, and `log_lik_and_add_grad` returns Σ `log_lik_each`.
///
/// Break-once: writing ∇_b = 2·dz1 in `write_term` failed the first assertion (per-datum sum
/// against the batch gradient); restored.
#[test]
fn per_datum_gradients_sum_to_the_batch_gradient() {
    let m = model(false, 1024);
    let th = theta(2);
    let batch = repeated_batch();
    let rows = per_datum(&m, &th, &batch);
    let mut sum = vec![0.0; D];
    for r in rows.chunks_exact(D) {
        sum.iter_mut().zip(r).for_each(|(s, v)| *s += v);
    }
    let w = 2.5;
    let (ll, g) = batch_grad(&m, &th, &batch, w);
    let scaled: Vec<f64> = sum.iter().map(|s| w * s).collect();
    let tol = 1e-12 * max_abs(&scaled);
    assert!(max_diff(&g, &scaled) <= tol, "{}", max_diff(&g, &scaled));
    // add_grad_log_lik adds onto what is there.
    let mut g2 = vec![1.0; D];
    m.add_grad_log_lik(&th, &batch, w, &mut g2, &mut Scratch::new());
    g2.iter_mut().for_each(|v| *v -= 1.0);
    assert!(max_diff(&g2, &scaled) <= tol);
    let want = log_lik_sum(&m, &th, &batch);
    assert!((ll - want).abs() <= 1e-12 * want.abs(), "{ll} vs {want}");
    // Repeated rows have identical terms.
    let k: Vec<usize> = (0..batch.len()).filter(|&k| batch[k] == 3).collect();
    assert!(k.len() >= 3);
    assert_eq!(
        rows[k[0] * D..(k[0] + 1) * D],
        rows[k[1] * D..(k[1] + 1) * D]
    );
}

/// Blocks of 7 rows give what one block gives (to rounding) for every batch method.
///
/// Break-once: `for_blocks` passing the block's start as 0 (every block writing over the
/// first rows of `out`) failed the log_lik_each comparison; restored.
#[test]
fn blocked_processing_agrees_with_one_block() {
    let one = model(false, 1024);
    let blocked = model(false, 7);
    let th = theta(3);
    let batch = repeated_batch();
    assert!(batch.len() > 7 * 10);
    let (ll1, g1) = batch_grad(&one, &th, &batch, 1.0);
    let (ll2, g2) = batch_grad(&blocked, &th, &batch, 1.0);
    assert!(max_diff(&g1, &g2) <= 1e-12 * max_abs(&g1));
    assert!((ll1 - ll2).abs() <= 1e-12 * ll1.abs());
    let mut e1 = vec![0.0; batch.len()];
    let mut e2 = vec![0.0; batch.len()];
    one.log_lik_each(&th, &batch, &mut e1, &mut Scratch::new());
    blocked.log_lik_each(&th, &batch, &mut e2, &mut Scratch::new());
    assert!(max_diff(&e1, &e2) <= 1e-13 * max_abs(&e1));
    let r1 = per_datum(&one, &th, &batch);
    let r2 = per_datum(&blocked, &th, &batch);
    assert!(max_diff(&r1, &r2) <= 1e-13 * max_abs(&r1));
    // One scratch reused across calls of different batch lengths gives the same answer.
    let mut s = Scratch::new();
    let mut g3 = vec![0.0; D];
    blocked.add_grad_log_lik(&th, &batch[..5], 1.0, &mut g3, &mut s);
    g3.fill(0.0);
    blocked.add_grad_log_lik(&th, &batch, 1.0, &mut g3, &mut s);
    assert_eq!(g3, g2);
}

/// f32 features: bit-identical to f64 features holding the same (f32-rounded) values, and
/// within ~1e-6 of the gradient on the unrounded f64 features.
///
/// Break-once: scaling the gathered f32 rows by 1.0001 failed the bit-identical comparison;
/// restored.
#[test]
fn f32_features_give_the_f64_gradient() {
    let (x, y) = data(11);
    let rounded: Vec<f64> = x.iter().map(|&v| f64::from(v as f32)).collect();
    let m32 = Bnn::new(dataset(x.clone(), I, Some(y.clone()), true), H, 2.0).unwrap();
    let m64r = Bnn::new(dataset(rounded, I, Some(y.clone()), false), H, 2.0).unwrap();
    let m64 = Bnn::new(dataset(x, I, Some(y), false), H, 2.0).unwrap();
    let th = theta(4);
    let batch = repeated_batch();
    let (_, g32) = batch_grad(&m32, &th, &batch, 1.0);
    let (_, g64r) = batch_grad(&m64r, &th, &batch, 1.0);
    let (_, g64) = batch_grad(&m64, &th, &batch, 1.0);
    assert_eq!(g32, g64r);
    let rel = max_diff(&g32, &g64) / max_abs(&g64);
    assert!(rel > 0.0 && rel < 1e-6, "{rel}");
}

/// `predict` gives a distribution over the K classes whose labelled entry is
/// exp(log_lik_each), and returns that log-likelihood.
///
/// Break-once: `predict` skipping the hidden bias b failed the comparison with log_lik_each
/// (row 0: −2.004 vs −2.339); restored.
#[test]
fn predict_matches_the_likelihood() {
    let (x, y) = data(11);
    let m = model(false, 1024);
    assert_eq!(m.task(), PredictiveTask::Classification { classes: K });
    assert_eq!(m.input_columns(), I);
    let th = theta(5);
    let batch = all_rows();
    let mut ll = vec![0.0; N];
    m.log_lik_each(&th, &batch, &mut ll, &mut Scratch::new());
    let mut p = vec![0.0; K];
    for i in 0..N {
        let lp = m.predict(&th, &x[i * I..(i + 1) * I], y[i], &mut p);
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-14);
        assert!(p.iter().all(|&v| v > 0.0 && v < 1.0));
        assert!((lp - ll[i]).abs() < 1e-12, "row {i}: {lp} vs {}", ll[i]);
        assert!((p[y[i] as usize] - ll[i].exp()).abs() < 1e-14);
    }
    // Held-out labels outside 0..K are errors naming the row.
    assert_eq!(
        m.prepare_held_out_targets(&[0.0, 2.0], "t").unwrap(),
        vec![0.0, 2.0]
    );
    let e = m
        .prepare_held_out_targets(&[0.0, 1.0, 3.0], "t")
        .unwrap_err();
    assert!(e.to_string().contains("row 3"), "{e}");
}

/// The fused terms method: its gradient is the batch gradient, and the moments it feeds equal
/// those of the dense per-datum rows (differences from a centre for control variates).
///
/// Break-once: adding the centre's ∇_a term (`+=` instead of `-=`) failed the sum-of-terms
/// comparison `s1 == s2`; restored.
#[test]
fn terms_match_dense_per_datum_rows() {
    let m = model(false, 7);
    let th = theta(6);
    let centre = theta(7);
    let batch = repeated_batch();
    let w = 1.5;
    for c in [None, Some(centre.as_slice())] {
        let mut fused = TermMoments::new(CovarianceShape::Diagonal, D);
        let mut dense = TermMoments::new(CovarianceShape::Diagonal, D);
        fused.begin();
        dense.begin();
        let mut g = vec![0.0; D];
        m.add_grad_log_lik_terms(&th, c, &batch, w, &mut g, &mut fused, &mut Scratch::new());
        let mut rows = per_datum(&m, &th, &batch);
        if let Some(c) = c {
            let rc = per_datum(&m, c, &batch);
            rows.iter_mut().zip(&rc).for_each(|(r, v)| *r -= v);
        }
        dense.add_rows(&rows);
        let mut s1 = vec![0.0; D];
        let mut s2 = vec![0.0; D];
        fused.sum_of_terms(&mut s1);
        dense.sum_of_terms(&mut s2);
        assert_eq!(s1, s2);
        let scaled: Vec<f64> = s2.iter().map(|v| w * v).collect();
        assert!(max_diff(&g, &scaled) <= 1e-12 * max_abs(&scaled));
        let mut q1 = vec![0.0; D];
        let mut q2 = vec![0.0; D];
        fused.add_centred_second_moments(1.0, &mut q1);
        dense.add_centred_second_moments(1.0, &mut q2);
        assert_eq!(q1, q2);
        assert!(max_abs(&q1) > 0.0);
    }
}

/// Prior draws have variance σ² (here 2): 200·58 draws, sd of the variance estimate
/// σ²·√(2/11600) ≈ 0.026; 5 sd allowed. The prior is −‖θ‖²/(2σ²).
///
/// Break-once: drawing with sd σ² instead of σ failed the variance assertion; restored.
#[test]
fn prior_draws_and_density() {
    let m = model(false, 1024);
    let mut rng = chain_stream(9, 0);
    let mut out = vec![0.0; D];
    let (mut s, mut ss, mut n) = (0.0, 0.0, 0.0);
    for _ in 0..200 {
        m.sample_prior(&mut rng, &mut out).unwrap();
        out.iter().for_each(|v| {
            s += v;
            ss += v * v;
            n += 1.0;
        });
    }
    let var = ss / n - (s / n).powi(2);
    assert!((var - 2.0).abs() < 5.0 * 2.0 * (2.0 / n).sqrt(), "{var}");
    let th = theta(8);
    let want = -th.iter().map(|v| v * v).sum::<f64>() / 4.0;
    assert!((m.log_prior(&th) - want).abs() < 1e-14 * want.abs());
}

/// Bad settings and data are errors that name the problem.
///
/// Break-once: accepting hidden = 0 in `Bnn::new` failed the first `unwrap_err`; restored.
#[test]
fn bad_input_is_a_clear_error() {
    let (x, mut y) = data(11);
    let e = Bnn::new(dataset(x.clone(), I, Some(y.clone()), false), 0, 1.0).unwrap_err();
    assert!(e.to_string().contains("hidden"), "{e}");
    let e = Bnn::new(dataset(x.clone(), I, Some(y.clone()), false), 3, -1.0).unwrap_err();
    assert!(e.to_string().contains("prior_variance"), "{e}");
    let e = Bnn::new(dataset(x.clone(), I, None, false), 3, 1.0).unwrap_err();
    assert!(e.to_string().contains("labels"), "{e}");
    y[4] = 1.5;
    let e = Bnn::new(dataset(x, I, Some(y), false), 3, 1.0).unwrap_err();
    assert!(e.to_string().contains("row 5"), "{e}");
}

/// The MAP search starts from `map_start`, where the hidden units differ: from θ = 0 every
/// hidden unit keeps identical incoming weights through L-BFGS (their gradients are equal), so
/// the "MAP" is a one-unit network. Break-once: `map_start` returning zeros failed the
/// distinct-columns assertion (largest column difference 0).
#[test]
fn the_map_search_breaks_the_hidden_symmetry() {
    let m = model(false, 1024);
    let options = sgmcmc::optim::lbfgs::LbfgsOptions {
        max_iterations: 200,
        ..Default::default()
    };
    // Largest difference between hidden unit 0's incoming weights (column 0 of B, and b₀) and
    // every other unit's.
    let spread = |theta: &[f64]| {
        let mut worst = 0.0f64;
        for k in 1..H {
            for j in 0..=I {
                // j = I is the bias b, stored right after B.
                let (a, b) = if j < I {
                    (theta[j * H], theta[j * H + k])
                } else {
                    (theta[I * H], theta[I * H + k])
                };
                worst = worst.max((a - b).abs());
            }
        }
        worst
    };
    let from_zero = sgmcmc::optim::find_map(&m, &vec![0.0; D], &options).unwrap();
    assert!(
        spread(&from_zero.theta) < 1e-12,
        "{}",
        spread(&from_zero.theta)
    );
    let map = sgmcmc::optim::find_map(&m, &m.map_start(), &options).unwrap();
    assert!(spread(&map.theta) > 1e-2, "{}", spread(&map.theta));
    assert!(map.log_posterior > from_zero.log_posterior);
}

/// `predict_rows` (two GEMMs over the block) equals `predict` row by row. Break-once: dropping
/// the hidden bias b in `predict_rows` failed at row 0.
#[test]
fn predict_rows_matches_predict() {
    let m = model(false, 1024);
    let th = theta(4);
    let (x, y) = data(11);
    let rows = 9;
    let mut ll = vec![0.0; rows];
    let mut out = vec![0.0; rows * K];
    m.predict_rows(&th, &x[..rows * I], &y[..rows], &mut ll, &mut out);
    let mut one = vec![0.0; K];
    for r in 0..rows {
        let l = m.predict(&th, &x[r * I..(r + 1) * I], y[r], &mut one);
        assert!((l - ll[r]).abs() < 1e-12 * (1.0 + l.abs()), "row {r}");
        for c in 0..K {
            assert!((one[c] - out[r * K + c]).abs() < 1e-12, "row {r} class {c}");
        }
    }
}
