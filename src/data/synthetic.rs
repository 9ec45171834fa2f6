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
    let y: Vec<f64> = x
        .chunks_exact(dim.max(1))
        .map(|row| {
            let z: f64 = row.iter().zip(&theta_star).map(|(a, b)| a * b).sum();
            let p = 1.0 / (1.0 + (-z).exp());
            f64::from(u8::from(rng.random::<f64>() < p))
        })
        .collect();
    let features = Matrix::from_vec(x, rows, dim).expect("shape is consistent by construction");
    let data = Dataset {
        features: Features::F64(features),
        targets: Some(y),
        feature_names: (0..dim).map(|j| format!("beta[{j}]")).collect(),
        features_source: format!("synthetic logistic data ({rows} x {dim}, seed {seed})"),
        targets_source: Some(format!("synthetic labels (seed {seed})")),
    };
    (data, theta_star)
}

#[cfg(test)]
mod tests {
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
