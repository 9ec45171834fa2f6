//! The two-component Gaussian mixture of Welling & Teh (2011), the first experiment of the
//! minibatch Metropolis–Hastings paper (reference §6.8).
//!
//! θ = (θ₁, θ₂) with prior N(0, diag(σ₁², σ₂²)), σ₁² = 10, σ₂² = 1; data xᵢ ∈ R with
//! xᵢ ~ ½·N(θ₁, σₓ²) + ½·N(θ₁ + θ₂, σₓ²), σₓ² = 2. With a = −(x − θ₁)²/(2σₓ²) and
//! b = −(x − θ₁ − θ₂)²/(2σₓ²),
//!
//! ```text
//! log p(x | θ) = log ½ − ½·log(2πσₓ²) + logsumexp(a, b)
//! ```
//!
//! (= log(1/(4√π)) + log[e^a + e^b] at σₓ² = 2), evaluated as max(a, b) + log1p(e^−|a−b|), so
//! it stays finite where e^a and e^b both underflow (θ far from the data). With the
//! responsibility r = e^b/(e^a + e^b) of the second component (a logistic function of b − a),
//!
//! ```text
//! ∂/∂θ₁ = (x − θ₁ − r·θ₂)/σₓ²,   ∂/∂θ₂ = r·(x − θ₁ − θ₂)/σₓ².
//! ```
//!
//! At T = 1 and large N the posterior has modes near (0, 1) and (1, −1).

use rand::RngExt;

use super::{DataIndex, Model, ModelError, Scratch, debug_check_dim};
use crate::data::{DataError, Element, Features, Matrix, PREFETCH_DISTANCE, prefetch_element};
use crate::rng::{ChainRng, fill_standard_normal, stream, streams};

/// The model's constants: prior variances (σ₁², σ₂²) and the component variance σₓ².
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MixtureSettings {
    /// (σ₁², σ₂²), the prior variances of θ₁ and θ₂; `f64::INFINITY` makes that coordinate's
    /// prior flat (the UAI reference simulator omits the prior).
    pub prior_variances: [f64; 2],
    /// σₓ², the variance of each mixture component.
    pub noise_variance: f64,
}

impl Default for MixtureSettings {
    /// The paper's values: σ₁² = 10, σ₂² = 1, σₓ² = 2.
    fn default() -> Self {
        Self {
            prior_variances: [10.0, 1.0],
            noise_variance: 2.0,
        }
    }
}

impl MixtureSettings {
    /// Checks that the variances are positive (prior variances may be ∞, σₓ² must be finite).
    pub fn validate(&self) -> Result<(), ModelError> {
        for (j, &v) in self.prior_variances.iter().enumerate() {
            if v.is_nan() || v <= 0.0 {
                return Err(ModelError::Setting(format!(
                    "prior variance of theta{} must be > 0, got {v}",
                    j + 1
                )));
            }
        }
        let v = self.noise_variance;
        if !v.is_finite() || v <= 0.0 {
            return Err(ModelError::Setting(format!(
                "mixture component variance must be finite and > 0, got {v}"
            )));
        }
        Ok(())
    }

    /// `n` draws xᵢ ~ ½·N(θ₁, σₓ²) + ½·N(θ₁ + θ₂, σₓ²) at θ = `theta_true`, as an n × 1 matrix,
    /// from stream [`streams::SYNTHETIC_DATA`] of `seed`. Per datum: the component (a fair
    /// coin), then the Gaussian noise.
    pub fn simulate(&self, n: usize, theta_true: [f64; 2], seed: u64) -> Features {
        let mut rng = stream(seed, streams::SYNTHETIC_DATA);
        let sd = self.noise_variance.sqrt();
        let x: Vec<f64> = (0..n)
            .map(|_| {
                let second = rng.random::<bool>();
                let z: f64 = rng.sample(rand_distr::StandardNormal);
                theta_true[0] + if second { theta_true[1] } else { 0.0 } + sd * z
            })
            .collect();
        Features::F64(Matrix::from_vec(x, n, 1).expect("n x 1 holds n values"))
    }
}

/// xᵢ ~ ½·N(θ₁, σₓ²) + ½·N(θ₁ + θ₂, σₓ²), prior θ ~ N(0, diag(σ₁², σ₂²)) (module docs).
#[derive(Debug, Clone)]
pub struct GaussianMixtureModel {
    /// The data, converted once to f64 (one value per datum).
    x: Vec<f64>,
    settings: MixtureSettings,
    /// 1/σ₁², 1/σ₂² (0 for a flat coordinate).
    prior_precision: [f64; 2],
    /// 1/σₓ².
    inv_var: f64,
    /// log ½ − ½·log(2πσₓ²).
    log_norm: f64,
}

/// Per-datum quantities at a fixed θ.
#[derive(Clone, Copy)]
struct Kernel {
    theta1: f64,
    theta2: f64,
    inv_var: f64,
    log_norm: f64,
}

impl Kernel {
    /// (log p(x | θ), r) with r the responsibility of the second component, both from one
    /// exponential: logsumexp(a, b) = max(a, b) + log1p(e^−|a−b|).
    #[inline(always)]
    fn eval(&self, x: f64) -> (f64, f64, f64, f64) {
        let u = x - self.theta1;
        let v = u - self.theta2;
        let a = -0.5 * self.inv_var * u * u;
        let b = -0.5 * self.inv_var * v * v;
        let e = (-(a - b).abs()).exp();
        let log_lik = self.log_norm + a.max(b) + e.ln_1p();
        let r = if b >= a {
            1.0 / (1.0 + e)
        } else {
            e / (1.0 + e)
        };
        (log_lik, r, u, v)
    }

    #[inline(always)]
    fn log_lik(&self, x: f64) -> f64 {
        self.eval(x).0
    }

    /// (∂/∂θ₁, ∂/∂θ₂) of log p(x | θ), and log p(x | θ).
    #[inline(always)]
    fn grad(&self, x: f64) -> ([f64; 2], f64) {
        let (log_lik, r, u, v) = self.eval(x);
        let g2 = r * v * self.inv_var;
        ([(u - r * self.theta2) * self.inv_var, g2], log_lik)
    }
}

impl GaussianMixtureModel {
    /// θ_true = (0, 1) of the paper's simulated data.
    pub const THETA_TRUE: [f64; 2] = [0.0, 1.0];

    /// The model with the paper's constants ([`MixtureSettings::default`]) on an N × 1 `data`.
    pub fn new(data: Features) -> Result<Self, ModelError> {
        Self::with_settings(data, MixtureSettings::default())
    }

    /// The model on an N × 1 `data` with the given constants. Errors on a data set that is not
    /// one column, has no rows or holds a NaN/±∞, and on invalid settings.
    pub fn with_settings(data: Features, settings: MixtureSettings) -> Result<Self, ModelError> {
        settings.validate()?;
        let x = one_column_values(&data, "the Gaussian mixture")?;
        let prior_precision = settings.prior_variances.map(|v| 1.0 / v);
        let inv_var = 1.0 / settings.noise_variance;
        let log_norm = -std::f64::consts::LN_2
            - 0.5 * (2.0 * std::f64::consts::PI * settings.noise_variance).ln();
        Ok(Self {
            x,
            settings,
            prior_precision,
            inv_var,
            log_norm,
        })
    }

    /// The paper's data: `n` draws at `theta_true` with σₓ² = 2 (the experiments use
    /// θ_true = [`Self::THETA_TRUE`], n = 10,000); see [`MixtureSettings::simulate`].
    pub fn simulate(n: usize, theta_true: [f64; 2], seed: u64) -> Features {
        MixtureSettings::default().simulate(n, theta_true, seed)
    }

    /// The model's constants.
    pub fn settings(&self) -> MixtureSettings {
        self.settings
    }

    /// The data values x₁..x_N.
    pub fn data(&self) -> &[f64] {
        &self.x
    }

    fn kernel(&self, theta: &[f64]) -> Kernel {
        debug_check_dim(self, theta);
        Kernel {
            theta1: theta[0],
            theta2: theta[1],
            inv_var: self.inv_var,
            log_norm: self.log_norm,
        }
    }

    /// Calls `f(k, x_{batch[k]})` for every k, prefetching ahead (the data may exceed the cache
    /// when N is large, e.g. 10⁶ in the UAI experiment).
    #[inline(always)]
    fn for_each(&self, batch: &[DataIndex], mut f: impl FnMut(usize, f64)) {
        for (k, &i) in batch.iter().enumerate() {
            if let Some(&ahead) = batch.get(k + PREFETCH_DISTANCE) {
                prefetch_element(&self.x, ahead as usize);
            }
            f(k, self.x[i as usize]);
        }
    }
}

/// An error naming the first NaN or ±∞ of the scalar observations `x` (1-based row).
pub(super) fn check_finite(x: &[f64], source_name: &str) -> Result<(), DataError> {
    match x.iter().position(|v| !v.is_finite()) {
        None => Ok(()),
        Some(row) => Err(DataError::NonFinite {
            source_name: source_name.to_string(),
            row: row + 1,
            column: None,
            kind: if x[row].is_nan() {
                "NaN"
            } else if x[row] > 0.0 {
                "inf"
            } else {
                "-inf"
            },
        }),
    }
}

/// The values of an N × 1 data set, for the models of scalar observations (`what` names the
/// model in errors): an error for another width, no rows, or a NaN/±∞ (row named).
pub(super) fn one_column_values(data: &Features, what: &str) -> Result<Vec<f64>, ModelError> {
    if data.cols() != 1 {
        return Err(ModelError::Setting(format!(
            "{what} takes one value per datum (an N x 1 matrix), got {} columns",
            data.cols()
        )));
    }
    fn to_f64<T: Element>(m: &Matrix<T>) -> Vec<f64> {
        m.as_slice().iter().map(|v| v.to_f64()).collect()
    }
    let x = match data {
        Features::F64(m) => to_f64(m),
        Features::F32(m) => to_f64(m),
        Features::Sparse(m) => to_f64(&m.to_dense()),
    };
    let source_name = format!("{what} data");
    if x.is_empty() {
        return Err(DataError::Empty {
            source_name,
            what: "rows",
        }
        .into());
    }
    check_finite(&x, &source_name)?;
    Ok(x)
}

impl Model for GaussianMixtureModel {
    fn name(&self) -> &'static str {
        "gaussian_mixture"
    }

    fn dim(&self) -> usize {
        2
    }

    fn num_data(&self) -> usize {
        self.x.len()
    }

    fn parameter_names(&self) -> Vec<String> {
        vec!["theta1".to_string(), "theta2".to_string()]
    }

    /// −θ₁²/(2σ₁²) − θ₂²/(2σ₂²) (without the normalising constant).
    fn log_prior(&self, theta: &[f64]) -> f64 {
        debug_check_dim(self, theta);
        let [p1, p2] = self.prior_precision;
        -0.5 * (p1 * theta[0] * theta[0] + p2 * theta[1] * theta[1])
    }

    /// `grad += (−θ₁/σ₁², −θ₂/σ₂²)`.
    fn add_grad_log_prior(&self, theta: &[f64], grad: &mut [f64]) {
        debug_check_dim(self, theta);
        grad[0] -= self.prior_precision[0] * theta[0];
        grad[1] -= self.prior_precision[1] * theta[1];
    }

    fn log_lik_each(
        &self,
        theta: &[f64],
        batch: &[DataIndex],
        out: &mut [f64],
        _scratch: &mut Scratch,
    ) {
        let kernel = self.kernel(theta);
        let out = &mut out[..batch.len()];
        self.for_each(batch, |k, x| out[k] = kernel.log_lik(x));
    }

    fn grad_log_lik_each(
        &self,
        theta: &[f64],
        batch: &[DataIndex],
        out: &mut [f64],
        _scratch: &mut Scratch,
    ) {
        let kernel = self.kernel(theta);
        let out = &mut out[..2 * batch.len()];
        self.for_each(batch, |k, x| {
            let (g, _) = kernel.grad(x);
            out[2 * k..2 * k + 2].copy_from_slice(&g);
        });
    }

    /// One pass, no buffer: the per-datum gradients summed in batch order.
    fn add_grad_log_lik(
        &self,
        theta: &[f64],
        batch: &[DataIndex],
        weight: f64,
        grad: &mut [f64],
        _scratch: &mut Scratch,
    ) {
        let kernel = self.kernel(theta);
        let mut sum = [0.0; 2];
        self.for_each(batch, |_, x| {
            let (g, _) = kernel.grad(x);
            sum[0] += g[0];
            sum[1] += g[1];
        });
        grad[0] += weight * sum[0];
        grad[1] += weight * sum[1];
    }

    /// One pass, no buffer: log-likelihood and gradient from the same exponential per datum.
    fn log_lik_and_add_grad(
        &self,
        theta: &[f64],
        batch: &[DataIndex],
        weight: f64,
        grad: &mut [f64],
        _scratch: &mut Scratch,
    ) -> f64 {
        let kernel = self.kernel(theta);
        let (mut sum, mut total) = ([0.0; 2], 0.0);
        self.for_each(batch, |_, x| {
            let (g, log_lik) = kernel.grad(x);
            sum[0] += g[0];
            sum[1] += g[1];
            total += log_lik;
        });
        grad[0] += weight * sum[0];
        grad[1] += weight * sum[1];
        total
    }

    /// θ ~ N(0, diag(σ₁², σ₂²)); an error if either coordinate's prior is flat.
    fn sample_prior(&self, rng: &mut ChainRng, out: &mut [f64]) -> Result<(), ModelError> {
        if self
            .settings
            .prior_variances
            .iter()
            .any(|v| v.is_infinite())
        {
            return Err(ModelError::Setting(
                "cannot draw from a flat prior (a prior variance is inf); choose another init"
                    .into(),
            ));
        }
        fill_standard_normal(rng, &mut out[..2]);
        for (o, v) in out.iter_mut().zip(self.settings.prior_variances) {
            *o *= v.sqrt();
        }
        Ok(())
    }
}
