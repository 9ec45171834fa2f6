//! Helpers of the `[evaluation]` tests (the core's tests/evaluation.rs and the CLI's
//! tests/evaluation_cli.rs): reference moments, the conjugate linear-regression posterior,
//! exact Gaussian chains, data files.

use super::{inverse, normals};
use ndarray::{Array1, Array2};
use ndarray_npy::write_npy;
use sgmcmc::data::{Features, Matrix};
use sgmcmc::reference::ReferenceMoments;
use std::path::Path;

pub fn close(got: f64, want: f64, tol: f64, what: &str) {
    assert!(
        (got - want).abs() <= tol,
        "{what}: got {got}, want {want} (tol {tol})"
    );
}

/// Reference moments with the given mean and covariance (names theta[j]).
pub fn reference(mean: Vec<f64>, covariance: Vec<f64>, names: Vec<String>) -> ReferenceMoments {
    let d = mean.len();
    ReferenceMoments {
        method: "closed form (test)".into(),
        parameter_names: names,
        sd: (0..d).map(|j| covariance[j * d + j].sqrt()).collect(),
        mean,
        covariance,
        ess_bulk: vec![1e6; d],
        rhat: vec![1.0; d],
        chains: 1,
        draws_per_chain: 0,
    }
}

pub fn names(d: usize) -> Vec<String> {
    (0..d).map(|j| format!("beta[{j}]")).collect()
}

/// Lower Cholesky factor of a small SPD matrix (row-major).
pub fn cholesky(a: &[f64], d: usize) -> Vec<f64> {
    let mut l = vec![0.0; d * d];
    for i in 0..d {
        for j in 0..=i {
            let s: f64 = (0..j).map(|k| l[i * d + k] * l[j * d + k]).sum();
            l[i * d + j] = if i == j {
                (a[i * d + i] - s).sqrt()
            } else {
                (a[i * d + j] - s) / l[j * d + j]
            };
        }
    }
    l
}

/// The conjugate posterior of linear regression without intercept, noise variance 1, prior
/// N(0, τ²I): precision P = XᵀX + I/τ², covariance P⁻¹, mean P⁻¹Xᵀy.
pub fn conjugate_posterior(x: &[f64], y: &[f64], d: usize, tau2: f64) -> (Vec<f64>, Vec<f64>) {
    let mut p = vec![0.0; d * d];
    let mut xty = vec![0.0; d];
    for (row, yi) in x.chunks_exact(d).zip(y) {
        for a in 0..d {
            xty[a] += row[a] * yi;
            for b in 0..d {
                p[a * d + b] += row[a] * row[b];
            }
        }
    }
    (0..d).for_each(|a| p[a * d + a] += 1.0 / tau2);
    let cov = inverse(&p, d);
    let mean = (0..d)
        .map(|a| (0..d).map(|b| cov[a * d + b] * xty[b]).sum())
        .collect();
    (mean, cov)
}

/// `chains` chains of `n` exact draws from N(mean, cov), each draw scaled about the mean by
/// `scale` and shifted by `shift`·sd in every coordinate.
pub fn gaussian_chains(
    seed: u64,
    mean: &[f64],
    cov: &[f64],
    chains: usize,
    n: usize,
    scale: f64,
    shift: f64,
) -> Vec<Vec<f64>> {
    let d = mean.len();
    let l = cholesky(cov, d);
    (0..chains)
        .map(|c| {
            let z = normals(seed, c as u64, n * d);
            let mut out = vec![0.0; n * d];
            for (zr, o) in z.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
                for a in 0..d {
                    let lz: f64 = (0..=a).map(|b| l[a * d + b] * zr[b]).sum();
                    o[a] = mean[a] + scale * lz + shift * cov[a * d + a].sqrt();
                }
            }
            out
        })
        .collect()
}

pub fn write_xy(dir: &Path, stem: &str, x: &[f64], y: &[f64], d: usize) {
    let n = y.len();
    write_npy(
        dir.join(format!("{stem}_x.npy")),
        &Array2::from_shape_vec((n, d), x.to_vec()).unwrap(),
    )
    .unwrap();
    write_npy(
        dir.join(format!("{stem}_y.npy")),
        &Array1::from_vec(y.to_vec()),
    )
    .unwrap();
}

pub fn f64_features(x: Vec<f64>, cols: usize) -> Features {
    let rows = x.len() / cols;
    Features::F64(Matrix::from_vec(x, rows, cols).unwrap())
}

pub fn logit(p: f64) -> f64 {
    (p / (1.0 - p)).ln()
}

/// The linear-regression run tables of the `[evaluation]` end-to-end tests.
pub const LINEAR_RUN: &str = "[model]\nkind = \"linear\"\nprior_variance = 10.0\nnoise_variance = 1.0\n\n\
     [sampler]\nkind = \"sgld\"\nstep_size = 2e-4\n\n[gradient]\nestimator = \"full\"\n\n\
     [run]\nseed = 3\nchains = 4\niterations = 5000\nburn_in = 500\ninit = \"map\"\n";
