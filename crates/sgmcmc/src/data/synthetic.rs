//! Built-in synthetic data sets (generated in memory from a seed; nothing is downloaded).

use super::{Dataset, Features, Matrix};
use crate::rng::{ChainRng, fill_standard_normal};
use rand::RngExt;
use rand::SeedableRng;

/// The demo's logistic-regression data: xᵢ ~ N(0, I_d), θ* ~ N(0, I_d),
/// yᵢ ~ Bernoulli(σ(xᵢᵀθ*)), all drawn from one stream of `seed`. Returns the data set and θ*.
pub fn logistic_regression(rows: usize, dim: usize, seed: u64) -> (Dataset, Vec<f64>) {
    let mut rng = ChainRng::seed_from_u64(seed);
    let mut theta_star = vec![0.0; dim];
    fill_standard_normal(&mut rng, &mut theta_star);
    let mut x = vec![0.0; rows * dim];
    fill_standard_normal(&mut rng, &mut x);
    let source = format!("synthetic logistic data ({rows} x {dim}, seed {seed})");
    let data = labelled(x, &theta_star, rows, dim, &mut rng, source, seed);
    (data, theta_star)
}

/// The coreset papers' Gaussian location data (reference §7.9): xᵢ ~ N(0, I_d), no targets,
/// from one stream of `seed`.
pub fn gaussian_location(rows: usize, dim: usize, seed: u64) -> Dataset {
    let mut rng = ChainRng::seed_from_u64(seed);
    let mut x = vec![0.0; rows * dim];
    fill_standard_normal(&mut rng, &mut x);
    Dataset {
        features: Features::F64(Matrix::from_vec(x, rows, dim).expect("rows × dim values")),
        targets: None,
        feature_names: Vec::new(),
        features_source: format!("synthetic Gaussian location data ({rows} x {dim}, seed {seed})"),
        targets_source: None,
    }
}

/// The MAMBA paper's logistic-regression data (App. C.1; its reference generator): one
/// b ~ U(−0.4, 0.4), θ* ~ N(0, 10·I_d), xᵢ ~ N(0, Σ_X) with Σ_X[j, k] = b^|j−k|, and
/// yᵢ ~ Bernoulli(σ(xᵢᵀθ*)), all from one stream of `seed`. Σ_X is the AR(1) covariance, so a
/// row is drawn as x₁ = z₁, x_j = b·x_{j−1} + √(1 − b²)·z_j with z ~ N(0, I). Returns the data
/// set, θ* and b.
pub fn correlated_logistic_regression(
    rows: usize,
    dim: usize,
    seed: u64,
) -> (Dataset, Vec<f64>, f64) {
    let mut rng = ChainRng::seed_from_u64(seed);
    let b: f64 = rng.random_range(-0.4..0.4);
    let mut theta_star = vec![0.0; dim];
    fill_standard_normal(&mut rng, &mut theta_star);
    theta_star.iter_mut().for_each(|t| *t *= 10f64.sqrt());
    let mut x = vec![0.0; rows * dim];
    fill_standard_normal(&mut rng, &mut x);
    let innovation = (1.0 - b * b).sqrt();
    for row in x.chunks_exact_mut(dim.max(1)) {
        for j in 1..row.len() {
            row[j] = b * row[j - 1] + innovation * row[j];
        }
    }
    let source = format!(
        "synthetic correlated logistic data (MAMBA; {rows} x {dim}, b = {b:.4}, seed {seed})"
    );
    let data = labelled(x, &theta_star, rows, dim, &mut rng, source, seed);
    (data, theta_star, b)
}

/// The data set of features `x` (rows × dim, row-major) with labels yᵢ ~ Bernoulli(σ(xᵢᵀθ*))
/// drawn from `rng`, in row order.
fn labelled(
    x: Vec<f64>,
    theta_star: &[f64],
    rows: usize,
    dim: usize,
    rng: &mut ChainRng,
    features_source: String,
    seed: u64,
) -> Dataset {
    let y: Vec<f64> = x
        .chunks_exact(dim.max(1))
        .map(|row| {
            let z: f64 = row.iter().zip(theta_star).map(|(a, t)| a * t).sum();
            let p = 1.0 / (1.0 + (-z).exp());
            f64::from(u8::from(rng.random::<f64>() < p))
        })
        .collect();
    let features = Matrix::from_vec(x, rows, dim).expect("shape is consistent by construction");
    Dataset {
        features: Features::F64(features),
        targets: Some(y),
        feature_names: (0..dim).map(|j| format!("beta[{j}]")).collect(),
        features_source,
        targets_source: Some(format!("synthetic labels (seed {seed})")),
    }
}

#[cfg(test)]
mod tests {
    /// The MAMBA generator's features have the AR(1) covariance b^|j−k| (within 5 standard
    /// errors of a sample covariance from 40,000 rows) and b lies in (−0.4, 0.4).
    #[test]
    fn mamba_features_have_the_ar1_covariance() {
        let (data, theta, b) = super::correlated_logistic_regression(40_000, 4, 9);
        assert!(b.abs() < 0.4 && b != 0.0);
        assert_eq!(theta.len(), 4);
        let super::Features::F64(x) = &data.features else {
            unreachable!()
        };
        let n = x.rows() as f64;
        for j in 0..4 {
            for k in j..4 {
                let c: f64 = (0..x.rows())
                    .map(|i| x.row(i)[j] * x.row(i)[k])
                    .sum::<f64>()
                    / n;
                let want = b.powi((k - j) as i32);
                // Var(x_j x_k) = 1 + want² for a bivariate normal with unit variances.
                let se = ((1.0 + want * want) / n).sqrt();
                assert!((c - want).abs() < 5.0 * se, "({j}, {k}): {c} vs {want}");
            }
        }
    }

    #[test]
    fn labels_follow_the_true_model() {
        let (data, theta) = super::logistic_regression(20_000, 3, 5);
        let y = data.targets.as_ref().unwrap();
        // Mean of y equals mean of σ(xᵀθ*) up to binomial error (sd ≤ 0.5/√N).
        let super::Features::F64(x) = &data.features else {
            unreachable!()
        };
        let p_mean: f64 = (0..x.rows())
            .map(|i| {
                let z: f64 = x.row(i).iter().zip(&theta).map(|(a, b)| a * b).sum();
                1.0 / (1.0 + (-z).exp())
            })
            .sum::<f64>()
            / x.rows() as f64;
        let y_mean = y.iter().sum::<f64>() / y.len() as f64;
        assert!((y_mean - p_mean).abs() < 4.0 * 0.5 / (y.len() as f64).sqrt());
    }
}
