//! Shared helpers for the statistical integration tests: seeded synthetic data, Monte Carlo
//! standard errors (reference §1.6) and small dense-matrix algebra for closed forms.
#![allow(dead_code)]

pub mod evaluation;

use rand::RngExt;
use sgmcmc::data::{Dataset, Features, Matrix};
use sgmcmc::diagnostics::mcse_mean;
use sgmcmc::estimator::GradientEstimator;
use sgmcmc::io::SinkError;
use sgmcmc::model::PoissonLink;
use sgmcmc::rng::{ChainRng, chain_stream, fill_standard_normal, stream};
use sgmcmc::runner::{Budget, ChainObserver, ChainPlan, drive_chain};
use sgmcmc::sampler::Sampler;
use std::fs;
use std::io::Write as _;
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::atomic::AtomicBool;

// ---------------------------------------------------------------------------------------------
// Synthetic data (always from a seeded `sgmcmc::rng::stream`).
// ---------------------------------------------------------------------------------------------

/// `len` standard normal draws from stream (`seed`, `s`).
pub fn normals(seed: u64, s: u64, len: usize) -> Vec<f64> {
    let mut rng = stream(seed, s);
    let mut v = vec![0.0; len];
    fill_standard_normal(&mut rng, &mut v);
    v
}

/// A uniform draw in [lo, hi).
pub fn uniform(rng: &mut ChainRng, lo: f64, hi: f64) -> f64 {
    lo + (hi - lo) * rng.random::<f64>()
}

/// Features (N × d, standard normal) and 0/1 labels from a logistic model with coefficients
/// `w` (length d) and intercept `b`.
pub fn logistic_data(seed: u64, n: usize, w: &[f64], b: f64) -> (Vec<f64>, Vec<f64>) {
    let d = w.len();
    let x = normals(seed, 0, n * d);
    let mut rng = stream(seed, 1);
    let y = x
        .chunks_exact(d)
        .map(|row| {
            let z: f64 = row.iter().zip(w).map(|(a, c)| a * c).sum::<f64>() + b;
            let p = 1.0 / (1.0 + (-z).exp());
            if rng.random::<f64>() < p { 1.0 } else { 0.0 }
        })
        .collect();
    (x, y)
}

/// Features (N × d, standard normal) and responses y = xᵀw + b + sd·noise.
pub fn linear_data(seed: u64, n: usize, w: &[f64], b: f64, sd: f64) -> (Vec<f64>, Vec<f64>) {
    let d = w.len();
    let x = normals(seed, 0, n * d);
    let e = normals(seed, 1, n);
    let y = x
        .chunks_exact(d)
        .zip(&e)
        .map(|(row, e)| row.iter().zip(w).map(|(a, c)| a * c).sum::<f64>() + b + sd * e)
        .collect();
    (x, y)
}

/// A data set from row-major f64 features (stored as f32 if `as_f32`) and targets.
pub fn dataset(x: Vec<f64>, cols: usize, y: Option<Vec<f64>>, as_f32: bool) -> Dataset {
    let rows = x.len() / cols;
    let features = if as_f32 {
        Features::F32(
            Matrix::from_vec(x.iter().map(|&v| v as f32).collect(), rows, cols)
                .expect("shape is consistent"),
        )
    } else {
        Features::F64(Matrix::from_vec(x, rows, cols).expect("shape is consistent"))
    };
    Dataset {
        features,
        targets: y,
        feature_names: Vec::new(),
        features_source: "synthetic".into(),
        targets_source: None,
    }
}

/// f64 features wrapped as [`Features`].
pub fn features(x: Vec<f64>, cols: usize) -> Features {
    let rows = x.len() / cols;
    Features::F64(Matrix::from_vec(x, rows, cols).expect("shape is consistent"))
}

// ---------------------------------------------------------------------------------------------
// Monte Carlo statistics (reference §1.6).
// ---------------------------------------------------------------------------------------------

/// Arithmetic mean.
pub fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

/// Sample variance (divisor n − 1).
pub fn var(x: &[f64]) -> f64 {
    let m = mean(x);
    x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (x.len() as f64 - 1.0)
}

/// Column `j` of a flat row-major `rows × dim` array.
pub fn column(flat: &[f64], dim: usize, j: usize) -> Vec<f64> {
    flat.chunks_exact(dim).map(|r| r[j]).collect()
}

/// Mean over several chains of equal length and its MCSE: the chain means are averaged and
/// the per-chain MCSEs (`diagnostics::mcse_mean`, Sokal-windowed τ_int) combined as independent
/// errors, sqrt(Σ mcse_c²)/C.
pub fn pooled_mean_mcse(chains: &[Vec<f64>]) -> (f64, f64) {
    let c = chains.len() as f64;
    let m = chains.iter().map(|x| mean(x)).sum::<f64>() / c;
    let se = chains
        .iter()
        .map(|x| mcse_mean(x).powi(2))
        .sum::<f64>()
        .sqrt()
        / c;
    (m, se)
}

/// Assert |m̂ − want| ≤ 4 MCSE + `approx` (§1.6; `approx` bounds the error of an approximate
/// closed form, 0 for exact ones) and return (m̂, MCSE).
pub fn check(what: &str, series: &[Vec<f64>], want: f64, approx: f64) -> (f64, f64) {
    let (m, se) = pooled_mean_mcse(series);
    eprintln!(
        "{what}: {m:.6} ± {se:.6} (MCSE) vs closed form {want:.6}, z = {:.2}, allowance {approx:.6}",
        (m - want) / se
    );
    assert!(
        (m - want).abs() <= 4.0 * se + approx,
        "{what}: {m} vs closed form {want} (4 MCSE = {}, allowance {approx})",
        4.0 * se
    );
    (m, se)
}

/// Batch-means MCSE of the mean with ⌊√n⌋ batches (reference §1.6).
pub fn batch_means_mcse(x: &[f64]) -> f64 {
    let b = (x.len() as f64).sqrt().floor() as usize;
    let len = x.len() / b;
    let means: Vec<f64> = (0..b).map(|k| mean(&x[k * len..(k + 1) * len])).collect();
    (var(&means) / b as f64).sqrt()
}

// ---------------------------------------------------------------------------------------------
// Small dense matrices (row-major, d × d), plain loops.
// ---------------------------------------------------------------------------------------------

/// A·B.
pub fn matmul(a: &[f64], b: &[f64], d: usize) -> Vec<f64> {
    let mut c = vec![0.0; d * d];
    for i in 0..d {
        for k in 0..d {
            for j in 0..d {
                c[i * d + j] += a[i * d + k] * b[k * d + j];
            }
        }
    }
    c
}

/// Aᵀ.
pub fn transpose(a: &[f64], d: usize) -> Vec<f64> {
    (0..d * d).map(|k| a[(k % d) * d + k / d]).collect()
}

/// A⁻¹ by Gauss–Jordan elimination with partial pivoting.
pub fn inverse(a: &[f64], d: usize) -> Vec<f64> {
    let mut m = a.to_vec();
    let mut inv: Vec<f64> = (0..d * d)
        .map(|k| if k / d == k % d { 1.0 } else { 0.0 })
        .collect();
    for col in 0..d {
        let p = (col..d)
            .max_by(|&i, &j| m[i * d + col].abs().total_cmp(&m[j * d + col].abs()))
            .unwrap();
        for j in 0..d {
            m.swap(col * d + j, p * d + j);
            inv.swap(col * d + j, p * d + j);
        }
        let piv = m[col * d + col];
        assert!(piv.abs() > 1e-300, "singular matrix");
        for j in 0..d {
            m[col * d + j] /= piv;
            inv[col * d + j] /= piv;
        }
        for i in 0..d {
            if i != col {
                let f = m[i * d + col];
                for j in 0..d {
                    m[i * d + j] -= f * m[col * d + j];
                    inv[i * d + j] -= f * inv[col * d + j];
                }
            }
        }
    }
    inv
}

/// A random d×d orthogonal matrix (Gram–Schmidt on a seeded Gaussian matrix); rows are the
/// orthonormal vectors.
pub fn random_orthogonal(seed: u64, d: usize) -> Vec<f64> {
    let mut q = normals(seed, 7, d * d);
    for i in 0..d {
        for k in 0..i {
            let dot: f64 = (0..d).map(|j| q[i * d + j] * q[k * d + j]).sum();
            for j in 0..d {
                q[i * d + j] -= dot * q[k * d + j];
            }
        }
        let norm: f64 = (0..d).map(|j| q[i * d + j].powi(2)).sum::<f64>().sqrt();
        for j in 0..d {
            q[i * d + j] /= norm;
        }
    }
    q
}

/// Vᵀ·diag(values)·V for V with orthonormal rows (row k is the eigenvector of `values[k]`).
pub fn from_eigen(v: &[f64], values: &[f64], d: usize) -> Vec<f64> {
    let mut out = vec![0.0; d * d];
    for k in 0..d {
        for i in 0..d {
            for j in 0..d {
                out[i * d + j] += values[k] * v[k * d + i] * v[k * d + j];
            }
        }
    }
    out
}

/// Stationary covariance of z' = A z + w, Cov w = Q: solves S = A S Aᵀ + Q by the doubling
/// recipe of reference §2.0 (S ← S + A_k S A_kᵀ, A_k ← A_k², 60 rounds from S = Q, A_0 = A).
pub fn lyapunov_doubling(a: &[f64], q: &[f64], d: usize) -> Vec<f64> {
    let mut s = q.to_vec();
    let mut ak = a.to_vec();
    for _ in 0..60 {
        let asa = matmul(&matmul(&ak, &s, d), &transpose(&ak, d), d);
        s.iter_mut().zip(&asa).for_each(|(x, y)| *x += y);
        ak = matmul(&ak, &ak, d);
    }
    s
}

/// The minibatch setting of reference §2.1: D = 1, N = 100, n = 10, τ₀² = 4, xᵢ ~ N(1, 2²)
/// (stream 41), with its closed forms: posterior precision P and mean m, data variance s²
/// (divisor N), minibatch noise variance V_e = (N²/n)(N − n)/(N − 1)·s², and ε = 0.5/P.
pub struct Section21 {
    pub model: sgmcmc::model::GaussianModel,
    pub n_data: usize,
    pub n: usize,
    pub p: f64,
    pub m: f64,
    pub s2: f64,
    pub v_e: f64,
    pub eps: f64,
}

pub fn section_2_1() -> Section21 {
    let (n_data, n) = (100usize, 10usize);
    let tau0_sq = 4.0;
    let x: Vec<f64> = normals(41, 0, n_data)
        .iter()
        .map(|v| 1.0 + 2.0 * v)
        .collect();
    let model = sgmcmc::model::GaussianModel::new(features(x.clone(), 1), &[1.0], tau0_sq).unwrap();
    let (nd, nb) = (n_data as f64, n as f64);
    let p = 1.0 / tau0_sq + nd;
    let m = x.iter().sum::<f64>() / p;
    let xm = mean(&x);
    let s2 = x.iter().map(|v| (v - xm).powi(2)).sum::<f64>() / nd;
    let v_e = nd * nd / nb * (nd - nb) / (nd - 1.0) * s2;
    Section21 {
        model,
        n_data,
        n,
        p,
        m,
        s2,
        v_e,
        eps: 0.5 / p,
    }
}

/// The Gaussian test model of §2.0 (N × D data, identity likelihood covariance, prior
/// N(0, τ₀²·I)); coordinate j of the data is N(loc_j, scale_j²). Returns the model, P, the
/// posterior mean m and the per-coordinate minibatch noise variance V_e for batch size `n`
/// (without replacement).
pub fn gtm(
    seed: u64,
    n_data: usize,
    n: usize,
    tau0_sq: f64,
    loc: &[f64],
    scale: &[f64],
) -> (sgmcmc::model::GaussianModel, f64, Vec<f64>, Vec<f64>) {
    let d = loc.len();
    let z = normals(seed, 0, n_data * d);
    let x: Vec<f64> = z
        .iter()
        .enumerate()
        .map(|(k, v)| loc[k % d] + scale[k % d] * v)
        .collect();
    let cov: Vec<f64> = (0..d * d)
        .map(|k| f64::from(u8::from(k / d == k % d)))
        .collect();
    let model = sgmcmc::model::GaussianModel::new(features(x.clone(), d), &cov, tau0_sq).unwrap();
    let (nd, nb) = (n_data as f64, n as f64);
    let p = 1.0 / tau0_sq + nd;
    let mut m = Vec::new();
    let mut v_e = Vec::new();
    for j in 0..d {
        let col = column(&x, d, j);
        m.push(col.iter().sum::<f64>() / p);
        let xm = mean(&col);
        let s2 = col.iter().map(|v| (v - xm).powi(2)).sum::<f64>() / nd;
        v_e.push(nd * nd / nb * (nd - nb) / (nd - 1.0) * s2);
    }
    (model, p, m, v_e)
}

/// Per-chain series of (x_j − c)² from flat records of width `w`.
pub fn sq_dev(chains: &[Vec<f64>], w: usize, j: usize, c: f64) -> Vec<Vec<f64>> {
    chains
        .iter()
        .map(|x| x.chunks_exact(w).map(|r| (r[j] - c).powi(2)).collect())
        .collect()
}

pub fn col(chains: &[Vec<f64>], w: usize, j: usize) -> Vec<Vec<f64>> {
    chains.iter().map(|x| column(x, w, j)).collect()
}

/// [`drive_with`]'s observer: `after_burn` once burn-in ends, `record` at every kept draw.
struct Watch<A, F, R> {
    burn: usize,
    after: Option<A>,
    out: Vec<f64>,
    after_burn: F,
    record: R,
}

impl<S, A, F, R> ChainObserver<S> for Watch<A, F, R>
where
    F: Fn(&S) -> A,
    R: Fn(&S, &mut Vec<f64>),
{
    fn started(&mut self, sampler: &S) {
        if self.burn == 0 {
            self.after = Some((self.after_burn)(sampler));
        }
    }
    fn kept(&mut self, sampler: &S) -> Result<(), SinkError> {
        (self.record)(sampler, &mut self.out);
        Ok(())
    }
    fn iterated(&mut self, iteration: usize, sampler: &S) -> ControlFlow<()> {
        if iteration == self.burn {
            self.after = Some((self.after_burn)(sampler));
        }
        ControlFlow::Continue(())
    }
}

// ---------------------------------------------------------------------------------------------
// Driving samplers through the runner's loop (runner::drive_chain), one thread per chain.
// ---------------------------------------------------------------------------------------------

/// Run `chains` chains (one thread each) of the sampler/estimator pair `make(c)` from `theta0`
/// on stream c of `seed` through `runner::drive_chain`: `burn` iterations discarded, then `n`
/// iterations, after every `thin`-th of which `record` appends what it wants to the chain's
/// series. `after_burn` sees the sampler once, after burn-in (e.g. to read a frozen
/// preconditioner); its output is returned with each chain's series. A chain that diverges
/// fails the test.
#[allow(clippy::too_many_arguments)]
pub fn drive_with<S, E, A>(
    chains: usize,
    seed: u64,
    make: impl Fn(usize) -> (S, E) + Sync,
    theta0: &[f64],
    burn: usize,
    n: usize,
    thin: usize,
    after_burn: impl Fn(&S) -> A + Sync,
    record: impl Fn(&S, &mut Vec<f64>) + Sync,
) -> Vec<(A, Vec<f64>)>
where
    S: Sampler,
    E: GradientEstimator,
    A: Send,
{
    assert!(thin >= 1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..chains)
            .map(|c| {
                let (make, after_burn, record) = (&make, &after_burn, &record);
                scope.spawn(move || {
                    let (mut s, mut e) = make(c);
                    let mut rng = chain_stream(seed, c);
                    let mut watch = Watch {
                        burn,
                        after: None,
                        out: Vec::new(),
                        after_burn,
                        record,
                    };
                    let plan = ChainPlan {
                        budget: Budget::Iterations(n),
                        burn_in: burn,
                        thin,
                    };
                    let stop = AtomicBool::new(false);
                    let outcome =
                        drive_chain(&mut s, &mut e, &mut rng, theta0, &plan, &mut watch, &stop)
                            .expect("the test's observer stores nothing");
                    assert!(outcome.divergence.is_none(), "chain {c} diverged");
                    (watch.after.expect("burn-in ended"), watch.out)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// [`drive_with`] recording after every iteration, with nothing read after burn-in.
pub fn drive<S, E>(
    chains: usize,
    seed: u64,
    make: impl Fn(usize) -> (S, E) + Sync,
    theta0: &[f64],
    burn: usize,
    n: usize,
    record: impl Fn(&S, &mut Vec<f64>) + Sync,
) -> Vec<Vec<f64>>
where
    S: Sampler,
    E: GradientEstimator,
{
    drive_with(chains, seed, make, theta0, burn, n, 1, |_| (), record)
        .into_iter()
        .map(|(_, x)| x)
        .collect()
}

/// Dot product.
pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(a, b)| a * b).sum()
}

/// The exact score ∇log π(θ) by a full pass ([`sgmcmc::estimator::FullBatch`]).
pub fn full_gradient(model: &dyn sgmcmc::model::Model, theta: &[f64]) -> Vec<f64> {
    let mut g = vec![0.0; theta.len()];
    sgmcmc::estimator::FullBatch::new(model).estimate(theta, &mut g, &mut stream(0, 0));
    g
}

/// z-test of E[ĝ] = ∇log π per coordinate over `reps` independent estimates of `est` (from
/// stream `seed`): the standard error of their mean is sd/√reps; 4 SE (§1.6). Every coordinate
/// must also have noise.
pub fn assert_unbiased_estimates(
    est: &mut dyn GradientEstimator,
    model: &dyn sgmcmc::model::Model,
    theta: &[f64],
    reps: usize,
    seed: u64,
    label: &str,
) {
    let d = model.dim();
    let full = full_gradient(model, theta);
    let draws = draw_estimates(est, theta, reps, seed);
    for (j, &want) in full.iter().enumerate() {
        let col = column(&draws, d, j);
        let (m, v) = (mean(&col), var(&col));
        let tol = 4.0 * (v / reps as f64).sqrt();
        assert!(v > 0.0, "{label}: coordinate {j} has no noise");
        assert!(
            (m - want).abs() <= tol,
            "{label}: coordinate {j}: mean of estimates {m} vs full gradient {want} (tol {tol})"
        );
    }
}

/// `reps` estimates at `theta` from stream 0 of `seed`, row-major reps × D.
pub fn draw_estimates(
    est: &mut dyn GradientEstimator,
    theta: &[f64],
    reps: usize,
    seed: u64,
) -> Vec<f64> {
    let d = theta.len();
    let mut rng = stream(seed, 0);
    let mut out = vec![0.0; reps * d];
    for row in out.chunks_exact_mut(d) {
        est.estimate(theta, row, &mut rng);
    }
    out
}

/// Central difference of `f` at `theta` in every coordinate j, with step `step(θⱼ)`.
pub fn central_diff_with(
    theta: &[f64],
    step: impl Fn(f64) -> f64,
    f: impl Fn(&[f64]) -> f64,
) -> Vec<f64> {
    let mut t = theta.to_vec();
    (0..theta.len())
        .map(|j| {
            let h = step(theta[j]);
            t[j] = theta[j] + h;
            let up = f(&t);
            t[j] = theta[j] - h;
            let down = f(&t);
            t[j] = theta[j];
            (up - down) / (2.0 * h)
        })
        .collect()
}

/// An IDX file (MNIST's format): magic (type code 0x08 and `dims.len()` dimensions), the sizes
/// big-endian, then `data`.
pub fn idx_bytes(dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut out = vec![0, 0, 0x08, dims.len() as u8];
    for d in dims {
        out.extend_from_slice(&d.to_be_bytes());
    }
    out.extend_from_slice(data);
    out
}

// ---------------------------------------------------------------------------------------------
// The coreset paper's regression data (tests/coreset_models.rs and the CLI's run-file tests).
// ---------------------------------------------------------------------------------------------

/// Standard-normal features (n × d) and Poisson counts with rate λ(xᵀw + b) for `link`.
pub fn poisson_data(
    seed: u64,
    n: usize,
    w: &[f64],
    b: f64,
    link: PoissonLink,
) -> (Vec<f64>, Vec<f64>) {
    let d = w.len();
    let x = normals(seed, 0, n * d);
    let mut rng = stream(seed, 1);
    let y = x
        .chunks_exact(d)
        .map(|row| {
            let z = row.iter().zip(w).map(|(a, c)| a * c).sum::<f64>() + b;
            let lambda = match link {
                PoissonLink::Log => z.exp(),
                PoissonLink::Softplus => z.exp().ln_1p(),
            };
            rng.sample(rand_distr::Poisson::new(lambda).unwrap())
        })
        .collect();
    (x, y)
}

/// Games between teams with sparse, unordered ids; y drawn from the model at strengths `s`.
pub fn games(seed: u64, n: usize) -> (Vec<f64>, Vec<f64>, Vec<i64>) {
    let ids = [1610612760i64, 7, 1610612737, 42, 99];
    let mut rng = stream(seed, 0);
    let mut x = Vec::new();
    let mut y = Vec::new();
    for _ in 0..n {
        let h = rng.random_range(0..ids.len());
        let mut v = rng.random_range(0..ids.len() - 1);
        if v >= h {
            v += 1;
        }
        x.push(ids[h] as f64);
        x.push(ids[v] as f64);
        y.push(f64::from(u8::from(rng.random::<f64>() < 0.6)));
    }
    let mut sorted = ids.to_vec();
    sorted.sort_unstable();
    (x, y, sorted)
}

pub fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// The header of the NBA games file.
pub const NBA_HEADER: &str =
    "GAME_DATE_EST,GAME_ID,HOME_TEAM_ID,VISITOR_TEAM_ID,PTS_home,HOME_TEAM_WINS";

// ---------------------------------------------------------------------------------------------
// A synthetic MNIST (the MH paper's 1s-vs-7s experiment and its CLI test).
// ---------------------------------------------------------------------------------------------

/// The side of an image.
pub const SIDE: usize = 28;

pub fn write_gz(path: &Path, bytes: &[u8]) {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(bytes).unwrap();
    fs::write(path, enc.finish().unwrap()).unwrap();
}

/// Images for `labels`: a bright 4 × 4 block at rows/cols 4–7 for a 1, at 20–23 for a 7, at
/// 12–15 for anything else, and faint noise on about 5 % of the other pixels. With θ = 1 every
/// image has θᵀx > 0 (all predicted "1"); a θ that is negative on the 7s' block separates the
/// classes with a margin.
pub fn images(labels: &[u8], seed: u64) -> Vec<u8> {
    let mut rng = stream(seed, 0);
    let mut px = vec![0u8; labels.len() * SIDE * SIDE];
    for (img, &label) in px.chunks_exact_mut(SIDE * SIDE).zip(labels) {
        for p in img.iter_mut() {
            if rng.random::<f64>() < 0.05 {
                *p = rng.random_range(0..40);
            }
        }
        let at = match label {
            1 => 4,
            7 => 20,
            _ => 12,
        };
        for r in at..at + 4 {
            for c in at..at + 4 {
                img[r * SIDE + c] = rng.random_range(200..=255);
            }
        }
    }
    px
}

/// Labels: `ones` 1s, `sevens` 7s and `zeros` 0s, interleaved.
pub fn labels(ones: usize, sevens: usize, zeros: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let (mut a, mut b, mut c) = (ones, sevens, zeros);
    while a + b + c > 0 {
        for (left, digit) in [(&mut a, 1u8), (&mut b, 7), (&mut c, 0)] {
            if *left > 0 {
                out.push(digit);
                *left -= 1;
            }
        }
    }
    out
}

/// Labels with `count` of each `digit`, interleaved (one of each in turn while any is left).
pub fn synthetic_digits(counts: &[(u8, usize)]) -> Vec<u8> {
    let mut left: Vec<(u8, usize)> = counts.to_vec();
    let mut out = Vec::new();
    while left.iter().any(|&(_, n)| n > 0) {
        for (digit, n) in &mut left {
            if *n > 0 {
                out.push(*digit);
                *n -= 1;
            }
        }
    }
    out
}

pub fn write_split(dir: &Path, split: &str, labels: &[u8], seed: u64) {
    let n = labels.len() as u32;
    write_gz(
        &dir.join(format!("{split}-images-idx3-ubyte.gz")),
        &idx_bytes(&[n, SIDE as u32, SIDE as u32], &images(labels, seed)),
    );
    write_gz(
        &dir.join(format!("{split}-labels-idx1-ubyte.gz")),
        &idx_bytes(&[n], labels),
    );
}

/// A synthetic MNIST directory (gzipped IDX, 28 × 28) in `dir`. Training: 200 1s, 200 7s, 110 0s (N = 400 after filtering); test: 150 1s, 150 7s, 40 0s.
pub fn synthetic_mnist(dir: &Path) {
    write_split(dir, "train", &labels(200, 200, 110), 11);
    write_split(dir, "t10k", &labels(150, 150, 40), 12);
}
