//! Gaussian location model with a known posterior, for tests and calibration.
//!
//! Data xᵢ ∈ R^D with xᵢ | θ ~ N(θ, Σ), prior θ ~ N(0, τ₀²I) (τ₀² = ∞: flat). The posterior is
//! N(m, P⁻¹) with P = I/τ₀² + N·Σ⁻¹ and m = P⁻¹Σ⁻¹Σᵢxᵢ (reference §2.0 generalised to a full Σ).
//! [`GaussianModel::target`] makes any N(μ, C) a model (one datum x₁ = μ, Σ = C, flat prior).

use super::{DataIndex, Model, ModelError, NormalPrior, Scratch};
use crate::data::{Element, Features, Matrix};
use crate::rng::ChainRng;
use faer::Mat;
use faer::linalg::solvers::DenseSolveCore;

/// xᵢ ~ N(θ, Σ) with prior N(0, τ₀²I).
pub struct GaussianModel {
    data: Features,
    /// Λ = Σ⁻¹, row-major D×D.
    precision: Vec<f64>,
    /// Λ = I exactly: per-datum log-likelihoods skip the D×D product (O(D), not O(D²)).
    identity: bool,
    /// ½ log|Λ| − (D/2) log 2π.
    log_norm: f64,
    prior: NormalPrior,
}

fn invert_spd(m: &[f64], d: usize, what: &str) -> Result<(Vec<f64>, f64), ModelError> {
    let a = Mat::<f64>::from_fn(d, d, |i, j| m[i * d + j]);
    for i in 0..d {
        for j in 0..i {
            if (a[(i, j)] - a[(j, i)]).abs() > 1e-12 * (a[(i, j)].abs() + a[(j, i)].abs()).max(1.0)
            {
                return Err(ModelError::Setting(format!(
                    "{what} is not symmetric at ({i}, {j})"
                )));
            }
        }
    }
    let llt = a
        .llt(faer::Side::Lower)
        .map_err(|_| ModelError::Setting(format!("{what} is not positive definite")))?;
    let l = llt.L();
    let log_det = 2.0 * (0..d).map(|i| l[(i, i)].ln()).sum::<f64>();
    let inv = llt.inverse();
    Ok(((0..d * d).map(|k| inv[(k / d, k % d)]).collect(), log_det))
}

impl GaussianModel {
    /// Model with data rows `data` (N × D), likelihood covariance `covariance` (row-major D×D,
    /// symmetric positive definite) and prior variance `prior_variance` (∞ for flat).
    pub fn new(
        data: Features,
        covariance: &[f64],
        prior_variance: f64,
    ) -> Result<Self, ModelError> {
        // Sparse rows stay sparse: the row sums below add their stored entries.
        let d = data.cols();
        if covariance.len() != d * d {
            return Err(ModelError::Setting(format!(
                "covariance has {} entries, expected {d}×{d} for {d}-dimensional data",
                covariance.len()
            )));
        }
        let (precision, log_det_cov) = invert_spd(covariance, d, "the likelihood covariance")?;
        let log_norm = -0.5 * log_det_cov - 0.5 * d as f64 * (2.0 * std::f64::consts::PI).ln();
        let identity = (0..d * d).all(|k| precision[k] == if k / d == k % d { 1.0 } else { 0.0 });
        Ok(Self {
            data,
            identity,
            precision,
            log_norm,
            prior: NormalPrior::new(prior_variance)?,
        })
    }

    /// The target N(`mean`, `covariance`) as a model: one datum at the mean, flat prior.
    pub fn target(mean: &[f64], covariance: &[f64]) -> Result<Self, ModelError> {
        let data = Matrix::from_vec(mean.to_vec(), 1, mean.len())?;
        Self::new(Features::F64(data), covariance, f64::INFINITY)
    }

    /// Posterior precision P = I/τ₀² + N·Λ (row-major).
    pub fn posterior_precision(&self) -> Vec<f64> {
        let d = self.dim();
        let n = self.num_data() as f64;
        let prior_precision = if self.prior.variance.is_infinite() {
            0.0
        } else {
            1.0 / self.prior.variance
        };
        let mut p: Vec<f64> = self.precision.iter().map(|l| n * l).collect();
        for i in 0..d {
            p[i * d + i] += prior_precision;
        }
        p
    }

    /// Posterior covariance P⁻¹ (row-major).
    pub fn posterior_covariance(&self) -> Vec<f64> {
        invert_spd(
            &self.posterior_precision(),
            self.dim(),
            "the posterior precision",
        )
        .expect("posterior precision of a valid model is SPD")
        .0
    }

    /// Posterior mean m = P⁻¹Λ Σᵢxᵢ.
    pub fn posterior_mean(&self) -> Vec<f64> {
        let d = self.dim();
        let sum = self.row_sum(&(0..self.num_data() as DataIndex).collect::<Vec<_>>());
        let lam_sum = matvec(&self.precision, &sum, d);
        matvec(&self.posterior_covariance(), &lam_sum, d)
    }

    /// For the identity likelihood covariance (Σ = I): the rows `points` (row-major,
    /// `points.len() × D`) and the prior variance τ₀², from which the weighted posterior
    /// N(s²·Σₘwₘxₘ, s²I), s² = 1/(1/τ₀² + Σₘwₘ), follows in closed form (coreset MCMC's exact
    /// kernel, reference §7.7b). An error when Σ ≠ I or a point is out of range.
    pub fn identity_location_rows(
        &self,
        points: &[DataIndex],
    ) -> Result<(Vec<f64>, f64), ModelError> {
        let d = self.dim();
        if !self.identity {
            return Err(ModelError::Setting(
                "the exact Gaussian kernel needs the identity likelihood covariance".into(),
            ));
        }
        let mut rows = vec![0.0; points.len() * d];
        for (row, &i) in rows.chunks_exact_mut(d).zip(points) {
            if i as usize >= self.num_data() {
                return Err(ModelError::Setting(format!(
                    "data point {i} is out of range (N = {})",
                    self.num_data()
                )));
            }
            self.row_f64(i as usize, row);
        }
        Ok((rows, self.prior.variance))
    }

    fn row_sum(&self, batch: &[DataIndex]) -> Vec<f64> {
        let mut s = vec![0.0; self.dim()];
        self.add_row_sum(batch, &mut s);
        s
    }

    fn add_row_sum(&self, batch: &[DataIndex], s: &mut [f64]) {
        fn go<T: Element>(x: &Matrix<T>, batch: &[DataIndex], s: &mut [f64]) {
            for &i in batch {
                for (a, &v) in s.iter_mut().zip(x.row(i as usize)) {
                    *a += v.to_f64();
                }
            }
        }
        match &self.data {
            Features::F64(x) => go(x, batch, s),
            Features::F32(x) => go(x, batch, s),
            Features::Sparse(x) => {
                for &i in batch {
                    x.row(i as usize).axpy(1.0, s);
                }
            }
        }
    }

    fn row_f64(&self, i: usize, out: &mut [f64]) {
        self.data.row_into(i, out);
    }
}

fn matvec(a: &[f64], x: &[f64], d: usize) -> Vec<f64> {
    (0..d)
        .map(|i| {
            a[i * d..(i + 1) * d]
                .iter()
                .zip(x)
                .map(|(p, q)| p * q)
                .sum()
        })
        .collect()
}

impl Model for GaussianModel {
    fn name(&self) -> &'static str {
        "gaussian"
    }

    fn dim(&self) -> usize {
        self.data.cols()
    }

    fn num_data(&self) -> usize {
        self.data.rows()
    }

    fn log_prior(&self, theta: &[f64]) -> f64 {
        self.prior.log_density(theta)
    }

    fn add_grad_log_prior(&self, theta: &[f64], grad: &mut [f64]) {
        self.prior.add_grad(theta, grad);
    }

    fn log_lik_each(
        &self,
        theta: &[f64],
        batch: &[DataIndex],
        out: &mut [f64],
        scratch: &mut Scratch,
    ) {
        let d = self.dim();
        let buf = scratch.get(2 * d);
        let (r, lr) = buf.split_at_mut(d);
        for (k, &i) in batch.iter().enumerate() {
            self.row_f64(i as usize, r);
            r.iter_mut().zip(theta).for_each(|(a, t)| *a -= t);
            if self.identity {
                out[k] = self.log_norm - 0.5 * r.iter().map(|a| a * a).sum::<f64>();
                continue;
            }
            for (row, o) in lr.iter_mut().enumerate() {
                *o = self.precision[row * d..(row + 1) * d]
                    .iter()
                    .zip(r.iter())
                    .map(|(p, q)| p * q)
                    .sum();
            }
            out[k] = self.log_norm - 0.5 * r.iter().zip(lr.iter()).map(|(a, b)| a * b).sum::<f64>();
        }
    }

    fn grad_log_lik_each(
        &self,
        theta: &[f64],
        batch: &[DataIndex],
        out: &mut [f64],
        scratch: &mut Scratch,
    ) {
        let d = self.dim();
        let r = scratch.get(d);
        for (k, &i) in batch.iter().enumerate() {
            self.row_f64(i as usize, r);
            r.iter_mut().zip(theta).for_each(|(a, t)| *a -= t);
            let g = &mut out[k * d..(k + 1) * d];
            if self.identity {
                g.copy_from_slice(r);
                continue;
            }
            for (row, o) in g.iter_mut().enumerate() {
                *o = self.precision[row * d..(row + 1) * d]
                    .iter()
                    .zip(r.iter())
                    .map(|(p, q)| p * q)
                    .sum();
            }
        }
    }

    /// Σ_{i∈S} Λ(xᵢ − θ) = Λ(Σ_{i∈S} xᵢ − |S|θ): one pass over the rows, one D×D product.
    fn add_grad_log_lik(
        &self,
        theta: &[f64],
        batch: &[DataIndex],
        weight: f64,
        grad: &mut [f64],
        scratch: &mut Scratch,
    ) {
        let d = self.dim();
        let s = scratch.get(d);
        s.fill(0.0);
        self.add_row_sum(batch, s);
        let n = batch.len() as f64;
        s.iter_mut().zip(theta).for_each(|(a, t)| *a -= n * t);
        for (row, g) in grad.iter_mut().enumerate() {
            let lr: f64 = self.precision[row * d..(row + 1) * d]
                .iter()
                .zip(s.iter())
                .map(|(p, q)| p * q)
                .sum();
            *g += weight * lr;
        }
    }

    fn sample_prior(&self, rng: &mut ChainRng, out: &mut [f64]) -> Result<(), ModelError> {
        self.prior.sample(rng, out)
    }
}
