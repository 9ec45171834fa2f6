//! Full-batch scores at a block of draws (`FullDataEvaluator::grad_log_posterior_draws`,
//! `Model::add_grad_log_lik_draws`): the GLMs' matrix-product kernel against one exact pass per
//! draw, for every family, link, precision and intercept setting, across tile, chunk and pass
//! boundaries; the default (one call per draw) for other models; the preconditioned model; and
//! independence from the thread count.
//!
//! The two routes add the same terms in a different order (GEMM blocking against a row loop),
//! so they agree to rounding: |diff| ≲ N·ε·max|term| ≈ 1e-11 relative to the score's scale
//! here, far below any wrong factor, sign, missing intercept or mis-assigned draw (O(1)).
//!
//! Broken once to see these fail (2026-11-26): dropping the intercept from z in
//! `Glm::grad_draws_rows` failed `glm_block_scores_equal_per_draw_scores` (logistic with
//! intercept: 1243.9 against 1599.9) and `wrapped_and_scattered_batches`; taking every tile's
//! draws from the first tile (`thetas[..q * dim]`) failed it and `draws_beyond_one_pass` at
//! draw 64.

use crate::common;

use common::{dataset, linear_data, logistic_data, normals};
use sgmcmc::estimator::FullDataEvaluator;
use sgmcmc::model::{
    Bernoulli, DataIndex, GaussianModel, LinearRegression, LogisticRegression, Model, NoiseModel,
    Normal, NormalPrior, Poisson, PoissonLink, PoissonRegression, Scratch,
};
use sgmcmc::precondition::{PreconditionedModel, Preconditioner};

/// Rows: five chunks of the evaluator (16,384 rows each), the last one partial, and a last
/// tile of the GLM kernel (256 rows) that is partial too.
const ROWS: usize = 70_001;
const COLS: usize = 4;
/// Draws: two full tiles of 64 and a partial one.
const DRAWS: usize = 131;
const REL: f64 = 1e-11;

/// `got ≈ want` entry-wise to REL·max(1, |want| over the same draw).
fn assert_close_rows(got: &[f64], want: &[f64], dim: usize, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (p, (g, w)) in got
        .chunks_exact(dim)
        .zip(want.chunks_exact(dim))
        .enumerate()
    {
        let scale = w.iter().fold(1.0f64, |m, v| m.max(v.abs()));
        for (j, (a, b)) in g.iter().zip(w).enumerate() {
            assert!(
                (a - b).abs() <= REL * scale,
                "{what}: draw {p}, coordinate {j}: block {a}, per draw {b} (scale {scale})"
            );
        }
    }
}

/// `count` draws around `centre` with spread `scale`.
fn draws_near(centre: &[f64], count: usize, scale: f64, seed: u64) -> Vec<f64> {
    let d = centre.len();
    normals(seed, 7, count * d)
        .chunks_exact(d)
        .flat_map(|z| {
            z.iter()
                .zip(centre)
                .map(|(z, c)| c + scale * z)
                .collect::<Vec<_>>()
        })
        .collect()
}

fn per_draw_scores(model: &dyn Model, thetas: &[f64]) -> Vec<f64> {
    let d = model.dim();
    let mut eval = FullDataEvaluator::new(model);
    let mut out = vec![0.0; thetas.len()];
    for (t, s) in thetas.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
        eval.grad_log_posterior(t, s);
    }
    out
}

fn block_scores(model: &dyn Model, thetas: &[f64]) -> Vec<f64> {
    let mut out = vec![f64::NAN; thetas.len()];
    FullDataEvaluator::new(model).grad_log_posterior_draws(thetas, &mut out);
    out
}

fn check(model: &dyn Model, centre: &[f64], scale: f64, what: &str) {
    let thetas = draws_near(centre, DRAWS, scale, 3);
    let want = per_draw_scores(model, &thetas);
    assert!(want.iter().all(|v| v.is_finite()), "{what}: finite scores");
    assert_close_rows(&block_scores(model, &thetas), &want, model.dim(), what);
}

#[test]
fn glm_block_scores_equal_per_draw_scores() {
    let w = [0.8, -1.2, 0.5, 0.3];
    let (x, y) = logistic_data(21, ROWS, &w, 0.4);
    for intercept in [false, true] {
        for as_f32 in [false, true] {
            let model = LogisticRegression::new(
                dataset(x.clone(), COLS, Some(y.clone()), as_f32),
                Bernoulli,
                NormalPrior::new(3.0).unwrap(),
                intercept,
            )
            .unwrap();
            let mut centre = w.to_vec();
            if intercept {
                centre.push(0.4);
            }
            let what = format!("logistic (intercept {intercept}, f32 {as_f32})");
            check(&model, &centre, 0.5, &what);
        }
    }

    let (x, y) = linear_data(22, ROWS, &w, -0.7, 0.8);
    for noise in [
        NoiseModel::Fixed { variance: 0.7 },
        NoiseModel::Learned {
            prior_variance: 2.0,
        },
    ] {
        let model = LinearRegression::new(
            dataset(x.clone(), COLS, Some(y.clone()), false),
            Normal::new(noise).unwrap(),
            NormalPrior::new(4.0).unwrap(),
            true,
        )
        .unwrap();
        let mut centre = w.to_vec();
        centre.push(-0.7);
        if matches!(noise, NoiseModel::Learned { .. }) {
            centre.push(2.0 * 0.8f64.ln());
        }
        check(&model, &centre, 0.05, &format!("linear ({noise:?})"));
    }

    // Counts from the log link's rates at a small coefficient vector.
    let wp = [0.3, -0.2, 0.1, 0.25];
    let rates: Vec<f64> = x
        .chunks_exact(COLS)
        .map(|r| (r.iter().zip(&wp).map(|(a, b)| a * b).sum::<f64>() + 0.5).exp())
        .collect();
    let counts: Vec<f64> = rates
        .iter()
        .zip(normals(23, 1, ROWS))
        .map(|(l, e)| (l + l.sqrt() * e).round().max(0.0))
        .collect();
    for link in [PoissonLink::Log, PoissonLink::Softplus] {
        let model = PoissonRegression::new(
            dataset(x.clone(), COLS, Some(counts.clone()), false),
            Poisson::new(link),
            NormalPrior::new(2.0).unwrap(),
            true,
        )
        .unwrap();
        let centre = [0.3, -0.2, 0.1, 0.25, 0.5];
        check(&model, &centre, 0.05, &format!("poisson ({link:?})"));
    }
}

/// Logistic regression without intercept on `rows` rows drawn around `w`.
fn logistic_without_intercept(seed: u64, rows: usize, w: &[f64]) -> LogisticRegression {
    let (x, y) = logistic_data(seed, rows, w, 0.0);
    LogisticRegression::new(
        dataset(x, COLS, Some(y), false),
        Bernoulli,
        NormalPrior::new(3.0).unwrap(),
        false,
    )
    .unwrap()
}

/// More draws than one pass takes (256): the evaluator passes over the data twice.
#[test]
fn draws_beyond_one_pass() {
    let w = [0.8, -1.2, 0.5, 0.3];
    let model = logistic_without_intercept(24, 20_000, &w);
    let thetas = draws_near(&w, 300, 0.5, 5);
    let want = per_draw_scores(&model, &thetas);
    assert_close_rows(&block_scores(&model, &thetas), &want, 4, "300 draws");
}

/// A block that wraps around the end of the data, and a batch of scattered rows (the per-draw
/// fallback), through the model call itself, added onto a non-zero buffer.
#[test]
fn wrapped_and_scattered_batches() {
    let w = [0.8, -1.2, 0.5, 0.3];
    let n = 1_000;
    let (x, y) = logistic_data(25, n, &w, 0.2);
    let model = LogisticRegression::new(
        dataset(x, COLS, Some(y), true),
        Bernoulli,
        NormalPrior::new(3.0).unwrap(),
        true,
    )
    .unwrap();
    let d = model.dim();
    let thetas = draws_near(&[0.8, -1.2, 0.5, 0.3, 0.2], 70, 0.5, 6);
    let wrapped: Vec<DataIndex> = (n as DataIndex - 300..n as DataIndex)
        .chain(0..400)
        .collect();
    let scattered: Vec<DataIndex> = vec![999, 3, 0, 7, 3, 500];
    for (batch, what) in [(wrapped, "wrapped block"), (scattered, "scattered rows")] {
        let base: Vec<f64> = (0..thetas.len()).map(|k| 0.01 * k as f64).collect();
        let mut got = base.clone();
        model.add_grad_log_lik_draws(&thetas, &batch, &mut got, &mut Scratch::new());
        let mut want = base;
        for (t, g) in thetas.chunks_exact(d).zip(want.chunks_exact_mut(d)) {
            model.add_grad_log_lik(t, &batch, 1.0, g, &mut Scratch::new());
        }
        assert_close_rows(&got, &want, d, what);
    }
}

/// Models without a block kernel take the trait's default: exactly the per-draw scores.
#[test]
fn default_block_scores_are_the_per_draw_scores() {
    let obs = normals(26, 1, 5_000 * 2);
    let model = GaussianModel::new(common::features(obs, 2), &[1.0, 0.3, 0.3, 2.0], 10.0).unwrap();
    let thetas = draws_near(&[0.0, 0.0], 17, 0.3, 7);
    assert_eq!(
        block_scores(&model, &thetas),
        per_draw_scores(&model, &thetas)
    );
}

/// The preconditioned model maps the block to θ, calls the inner block kernel and pulls each
/// score back: the same as its per-draw scores.
#[test]
fn preconditioned_block_scores() {
    let w = [0.8, -1.2, 0.5, 0.3];
    let model = logistic_without_intercept(27, 30_000, &w);
    let covariance = [
        0.04, 0.01, 0.0, 0.0, //
        0.01, 0.09, 0.02, 0.0, //
        0.0, 0.02, 0.01, 0.0, //
        0.0, 0.0, 0.0, 0.02,
    ];
    let pre = Preconditioner::dense(&w, &covariance).unwrap();
    let phi_model = PreconditionedModel::new(&model, &pre).unwrap();
    check(&phi_model, &[0.0; 4], 1.0, "preconditioned logistic");
}

#[test]
fn block_scores_do_not_depend_on_the_thread_count() {
    let w = [0.8, -1.2, 0.5, 0.3];
    let model = logistic_without_intercept(28, 40_000, &w);
    let thetas = draws_near(&w, 90, 0.5, 8);
    let in_pool = |threads: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| block_scores(&model, &thetas))
    };
    let one = in_pool(1);
    assert_eq!(one, in_pool(2));
    assert_eq!(one, in_pool(3));
}
