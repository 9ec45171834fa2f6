//! Sparse linear regression with a spike-and-slab prior (George & McCulloch 1993; reference §7.9,
//! the coreset paper's "sparse linear regression"):
//!
//! ```text
//! y_n | β, σ² ~ N(x_nᵀβ, σ²)                 ℓ_n = −½[log σ² + (y_n − x_nᵀβ)²/σ²]
//! σ² ~ InvGamma(ν/2, νλ/2)
//! γ_i ~ Bernoulli(q),  β_i | γ_i ~ N(0, τ_i²),  τ_i = c·τ if γ_i = 1 (slab), τ if γ_i = 0 (spike)
//! ```
//!
//! θ = (β₁..β_p, σ²) holds the continuous coordinates only. The indicators γ are summed out of
//! the prior here (each β_i has the two-component mixture prior q·N(0, (cτ)²) + (1 − q)·N(0, τ²),
//! evaluated in log space); the Gibbs kernel of `coreset::gibbs` carries γ as auxiliary state.
//! The model is defined for σ² > 0 only: there the log prior is −∞, and the log-likelihood and
//! the gradients are NaN, so a chain that leaves the support is reported as diverged.

use super::{DataIndex, Model, ModelError, Scratch};
use crate::cpu::clear_upper_vector_state;
use crate::data::DataError;
use crate::rng::{self, ChainRng, fill_standard_normal};
use faer::MatRef;
use faer::linalg::solvers::SolveLstsq;
use rand::RngExt;
use statrs::function::gamma::ln_gamma;

const HALF_LN_2PI: f64 = 0.918_938_533_204_672_8;

/// β* of the synthetic data set (reference §7.9): five zero and five large coefficients.
pub const SYNTHETIC_BETA: [f64; 10] = [0.0, 0.0, 0.0, 0.0, 0.0, 5.0, 5.0, 5.0, 5.0, 5.0];
/// Noise standard deviation of the synthetic data set (reference §7.9): ε ~ N(0, 25²).
pub const SYNTHETIC_NOISE_SD: f64 = 25.0;

/// The prior's settings (reference §7.9); the defaults are the paper's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SparseRegressionSettings {
    /// ν: σ² ~ InvGamma(ν/2, νλ/2). Default 0.1.
    pub nu: f64,
    /// λ: σ² ~ InvGamma(ν/2, νλ/2). Default 1.
    pub lambda: f64,
    /// q = P(γ_i = 1), the prior inclusion probability, in (0, 1). Default 0.1.
    pub q: f64,
    /// τ: the spike's standard deviation. Default 0.1.
    pub tau: f64,
    /// c: the slab's standard deviation is c·τ. Default 10.
    pub c: f64,
}

impl Default for SparseRegressionSettings {
    fn default() -> Self {
        Self {
            nu: 0.1,
            lambda: 1.0,
            q: 0.1,
            tau: 0.1,
            c: 10.0,
        }
    }
}

impl SparseRegressionSettings {
    /// Check every setting: ν, λ, τ, c positive and finite, q in (0, 1).
    pub fn validate(&self) -> Result<(), ModelError> {
        for (name, v) in [
            ("nu", self.nu),
            ("lambda", self.lambda),
            ("tau", self.tau),
            ("c", self.c),
        ] {
            if !(v > 0.0 && v.is_finite()) {
                return Err(ModelError::Setting(format!(
                    "sparse regression: {name} must be positive and finite, got {v}"
                )));
            }
        }
        if !(self.q > 0.0 && self.q < 1.0) {
            return Err(ModelError::Setting(format!(
                "sparse regression: q must lie in (0, 1), got {}",
                self.q
            )));
        }
        Ok(())
    }

    /// The slab's standard deviation c·τ.
    pub fn slab_sd(&self) -> f64 {
        self.c * self.tau
    }

    /// log[P(γ_i = 1 | β_i) / P(γ_i = 0 | β_i)] = log(q/(1 − q)) − log c + β_i²(1 − 1/c²)/(2τ²),
    /// the log ratio of q·N(β_i; 0, (cτ)²) to (1 − q)·N(β_i; 0, τ²) written out, so it never
    /// forms a density that could underflow.
    pub fn slab_log_odds(&self, beta_i: f64) -> f64 {
        let Self { q, tau, c, .. } = *self;
        (q / (1.0 - q)).ln() - c.ln() + 0.5 * beta_i * beta_i * (1.0 - 1.0 / (c * c)) / (tau * tau)
    }

    /// P(γ_i = 1 | β_i) = q·N(β_i; 0, (cτ)²) / [q·N(β_i; 0, (cτ)²) + (1 − q)·N(β_i; 0, τ²)]
    /// (reference §7.7(c) step 3), the logistic function of [`Self::slab_log_odds`]: exactly 1
    /// or 0 in the far tails, never 0/0.
    pub fn slab_probability(&self, beta_i: f64) -> f64 {
        let t = self.slab_log_odds(beta_i);
        if t >= 0.0 {
            1.0 / (1.0 + (-t).exp())
        } else {
            let e = t.exp();
            e / (1.0 + e)
        }
    }

    /// log[q·N(β_i; 0, (cτ)²) + (1 − q)·N(β_i; 0, τ²)] by log-sum-exp.
    pub fn log_spike_slab(&self, beta_i: f64) -> f64 {
        let (slab, spike) = (self.slab_sd(), self.tau);
        let a = self.q.ln() - HALF_LN_2PI - slab.ln() - 0.5 * (beta_i / slab).powi(2);
        let b = (1.0 - self.q).ln() - HALF_LN_2PI - spike.ln() - 0.5 * (beta_i / spike).powi(2);
        let (hi, lo) = if a >= b { (a, b) } else { (b, a) };
        hi + (lo - hi).exp().ln_1p()
    }

    /// d/dβ_i of [`Self::log_spike_slab`] = −β_i·[P/(cτ)² + (1 − P)/τ²], P = P(γ_i = 1 | β_i).
    pub fn grad_log_spike_slab(&self, beta_i: f64) -> f64 {
        let p = self.slab_probability(beta_i);
        let slab = self.slab_sd();
        -beta_i * (p / (slab * slab) + (1.0 - p) / (self.tau * self.tau))
    }
}

/// Linear regression with unknown noise variance and a spike-and-slab prior on the coefficients
/// (module doc); θ = (β₁..β_p, σ²).
#[derive(Debug, Clone)]
pub struct SparseRegression {
    /// Row-major N × p.
    x: Vec<f64>,
    y: Vec<f64>,
    p: usize,
    settings: SparseRegressionSettings,
    /// (ν/2)·log(νλ/2) − lnΓ(ν/2): the InvGamma normalising constant.
    inv_gamma_log_norm: f64,
}

fn non_finite_kind(v: f64) -> &'static str {
    if v.is_nan() {
        "NaN"
    } else if v > 0.0 {
        "inf"
    } else {
        "-inf"
    }
}

impl SparseRegression {
    /// The model for features `x` (row-major N × p) and responses `y` (length N).
    pub fn new(
        x: Vec<f64>,
        y: Vec<f64>,
        p: usize,
        settings: SparseRegressionSettings,
    ) -> Result<Self, ModelError> {
        settings.validate()?;
        let source_name = || "sparse regression data".to_string();
        if p == 0 {
            return Err(DataError::Empty {
                source_name: source_name(),
                what: "columns",
            }
            .into());
        }
        if y.is_empty() {
            return Err(DataError::Empty {
                source_name: source_name(),
                what: "rows",
            }
            .into());
        }
        if x.len() != y.len().saturating_mul(p) {
            return Err(DataError::ShapeMismatch {
                rows: y.len(),
                cols: p,
                len: x.len(),
            }
            .into());
        }
        if let Some(k) = x.iter().position(|v| !v.is_finite()) {
            return Err(DataError::NonFinite {
                source_name: source_name(),
                row: k / p + 1,
                column: Some((k % p + 1).to_string()),
                kind: non_finite_kind(x[k]),
            }
            .into());
        }
        if let Some(k) = y.iter().position(|v| !v.is_finite()) {
            return Err(DataError::NonFinite {
                source_name: source_name(),
                row: k + 1,
                column: None,
                kind: non_finite_kind(y[k]),
            }
            .into());
        }
        let a = 0.5 * settings.nu;
        let b = 0.5 * settings.nu * settings.lambda;
        Ok(Self {
            x,
            y,
            p,
            settings,
            inv_gamma_log_norm: a * b.ln() - ln_gamma(a),
        })
    }

    /// The synthetic data set of reference §7.9 with the default prior: `n` rows of
    /// x ~ N(0, I₁₀), y = xᵀβ* + ε, β* = [`SYNTHETIC_BETA`], ε ~ N(0, 25²), drawn from
    /// stream (`seed`, [`rng::streams::SYNTHETIC_DATA`]): x row by row, then ε.
    pub fn synthetic(n: usize, seed: u64) -> Result<Self, ModelError> {
        let p = SYNTHETIC_BETA.len();
        let mut rng = rng::stream(seed, rng::streams::SYNTHETIC_DATA);
        let mut x = vec![0.0; n * p];
        fill_standard_normal(&mut rng, &mut x);
        let mut y = vec![0.0; n];
        fill_standard_normal(&mut rng, &mut y);
        for (yn, row) in y.iter_mut().zip(x.chunks_exact(p)) {
            let mean: f64 = row.iter().zip(&SYNTHETIC_BETA).map(|(a, b)| a * b).sum();
            *yn = mean + SYNTHETIC_NOISE_SD * *yn;
        }
        Self::new(x, y, p, SparseRegressionSettings::default())
    }

    /// Number of coefficients p (θ has p + 1 coordinates).
    pub fn p(&self) -> usize {
        self.p
    }

    /// The prior's settings.
    pub fn settings(&self) -> &SparseRegressionSettings {
        &self.settings
    }

    /// Feature row x_n (length p).
    #[inline]
    pub fn row(&self, n: usize) -> &[f64] {
        &self.x[n * self.p..(n + 1) * self.p]
    }

    /// Response y_n.
    #[inline]
    pub fn response(&self, n: usize) -> f64 {
        self.y[n]
    }

    /// The features, row-major N × p.
    pub fn features(&self) -> &[f64] {
        &self.x
    }

    /// The responses.
    pub fn responses(&self) -> &[f64] {
        &self.y
    }

    /// The full-data least-squares estimate β̂ = argmin ‖Xβ − y‖² (the chain start of §7.9), by
    /// faer's Householder QR. An error if X is numerically rank deficient (a diagonal entry of
    /// R below N·ε·max|R_jj|), where β̂ is not unique.
    pub fn ols(&self) -> Result<Vec<f64>, ModelError> {
        let n = self.y.len();
        if n < self.p {
            return Err(ModelError::Setting(format!(
                "sparse regression: least squares needs at least p = {} rows, the data have {n}",
                self.p
            )));
        }
        let x = MatRef::from_row_major_slice(&self.x, n, self.p);
        let qr = x.qr();
        let r = qr.thin_R();
        let max = (0..self.p).map(|j| r[(j, j)].abs()).fold(0.0, f64::max);
        let tol = n as f64 * f64::EPSILON * max;
        if let Some(j) = (0..self.p).find(|&j| r[(j, j)].is_nan() || r[(j, j)].abs() <= tol) {
            clear_upper_vector_state();
            return Err(ModelError::Setting(format!(
                "sparse regression: the design matrix is rank deficient (column {} depends on \
                 the others), so the least-squares start is not unique",
                j + 1
            )));
        }
        let sol = qr.solve_lstsq(MatRef::from_column_major_slice(&self.y, n, 1));
        clear_upper_vector_state();
        Ok((0..self.p).map(|j| sol[(j, 0)]).collect())
    }

    /// Σ_i log[q·N(β_i; 0, (cτ)²) + (1 − q)·N(β_i; 0, τ²)], γ summed out.
    fn log_prior_beta(&self, beta: &[f64]) -> f64 {
        beta.iter().map(|&b| self.settings.log_spike_slab(b)).sum()
    }
}

impl Model for SparseRegression {
    fn name(&self) -> &'static str {
        "sparse_regression"
    }

    fn dim(&self) -> usize {
        self.p + 1
    }

    fn num_data(&self) -> usize {
        self.y.len()
    }

    fn parameter_names(&self) -> Vec<String> {
        (0..self.p)
            .map(|j| format!("beta[{j}]"))
            .chain(std::iter::once("sigma2".to_string()))
            .collect()
    }

    /// log InvGamma(σ²; ν/2, νλ/2) + Σ_i log[q·N(β_i; 0, (cτ)²) + (1 − q)·N(β_i; 0, τ²)]
    /// (normalised), −∞ for σ² ≤ 0.
    fn log_prior(&self, theta: &[f64]) -> f64 {
        super::debug_check_dim(self, theta);
        let s2 = theta[self.p];
        if s2.is_nan() || s2 <= 0.0 {
            return f64::NEG_INFINITY;
        }
        let a = 0.5 * self.settings.nu;
        let b = a * self.settings.lambda;
        self.inv_gamma_log_norm - (a + 1.0) * s2.ln() - b / s2
            + self.log_prior_beta(&theta[..self.p])
    }

    /// ∂/∂β_i = −β_i·[P_i/(cτ)² + (1 − P_i)/τ²] with P_i = P(γ_i = 1 | β_i);
    /// ∂/∂σ² = −(ν/2 + 1)/σ² + (νλ/2)/σ⁴. NaN for σ² ≤ 0.
    fn add_grad_log_prior(&self, theta: &[f64], grad: &mut [f64]) {
        super::debug_check_dim(self, theta);
        let s2 = theta[self.p];
        if s2.is_nan() || s2 <= 0.0 {
            grad.fill(f64::NAN);
            return;
        }
        for (g, &b) in grad.iter_mut().zip(&theta[..self.p]) {
            *g += self.settings.grad_log_spike_slab(b);
        }
        let a = 0.5 * self.settings.nu;
        let b = a * self.settings.lambda;
        grad[self.p] += -(a + 1.0) / s2 + b / (s2 * s2);
    }

    /// ℓ_n = −½[log σ² + (y_n − x_nᵀβ)²/σ²]; NaN for σ² ≤ 0.
    fn log_lik_each(&self, theta: &[f64], batch: &[DataIndex], out: &mut [f64], _: &mut Scratch) {
        super::debug_check_dim(self, theta);
        let (beta, s2) = (&theta[..self.p], theta[self.p]);
        let log_s2 = if s2 > 0.0 { s2.ln() } else { f64::NAN };
        for (o, &n) in out.iter_mut().zip(batch) {
            let r = self.response(n as usize) - dot(self.row(n as usize), beta);
            *o = -0.5 * (log_s2 + r * r / s2);
        }
    }

    /// ∇_β ℓ_n = r_n·x_n/σ², ∂ℓ_n/∂σ² = −½[1/σ² − r_n²/σ⁴], r_n = y_n − x_nᵀβ; NaN for σ² ≤ 0.
    fn grad_log_lik_each(
        &self,
        theta: &[f64],
        batch: &[DataIndex],
        out: &mut [f64],
        _: &mut Scratch,
    ) {
        super::debug_check_dim(self, theta);
        let (beta, s2) = (&theta[..self.p], theta[self.p]);
        let inv = if s2 > 0.0 { 1.0 / s2 } else { f64::NAN };
        for (row_out, &n) in out.chunks_exact_mut(self.p + 1).zip(batch) {
            let x = self.row(n as usize);
            let r = self.response(n as usize) - dot(x, beta);
            for (o, xi) in row_out[..self.p].iter_mut().zip(x) {
                *o = r * inv * xi;
            }
            row_out[self.p] = -0.5 * (inv - r * r * inv * inv);
        }
    }

    fn add_grad_log_lik(
        &self,
        theta: &[f64],
        batch: &[DataIndex],
        weight: f64,
        grad: &mut [f64],
        _: &mut Scratch,
    ) {
        super::debug_check_dim(self, theta);
        let (beta, s2) = (&theta[..self.p], theta[self.p]);
        let inv = if s2 > 0.0 { 1.0 / s2 } else { f64::NAN };
        let mut sum_r2 = 0.0;
        for &n in batch {
            let x = self.row(n as usize);
            let r = self.response(n as usize) - dot(x, beta);
            sum_r2 += r * r;
            let c = weight * r * inv;
            for (g, xi) in grad[..self.p].iter_mut().zip(x) {
                *g += c * xi;
            }
        }
        grad[self.p] += weight * -0.5 * (batch.len() as f64 * inv - sum_r2 * inv * inv);
    }

    /// β = 0 and σ² = the mean of y² (the residual variance at β = 0), at least 1: σ² is not
    /// transformed, and the default θ = 0 puts σ² = 0 outside the support (log density −∞).
    fn map_start(&self) -> Vec<f64> {
        let mut start = vec![0.0; self.p + 1];
        let mean_square = self.y.iter().map(|y| y * y).sum::<f64>() / self.y.len() as f64;
        start[self.p] = mean_square.max(1.0);
        start
    }

    /// σ² ~ InvGamma(ν/2, νλ/2), γ_i ~ Bernoulli(q), β_i ~ N(0, τ_i²).
    fn sample_prior(&self, rng: &mut ChainRng, out: &mut [f64]) -> Result<(), ModelError> {
        let a = 0.5 * self.settings.nu;
        let b = a * self.settings.lambda;
        let g = rand_distr::Gamma::new(a, 1.0)
            .map_err(|e| ModelError::Setting(format!("sparse regression prior: {e}")))?;
        fill_standard_normal(rng, &mut out[..self.p]);
        for o in &mut out[..self.p] {
            let slab = rng.random::<f64>() < self.settings.q;
            *o *= if slab {
                self.settings.slab_sd()
            } else {
                self.settings.tau
            };
        }
        out[self.p] = b / rng.sample(g);
        Ok(())
    }
}

#[inline]
fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}
