//! The sparse-regression Gibbs kernel of reference §7.7(c) (George & McCulloch 1993), invariant
//! for the coreset posterior π_w of [`SparseRegression`] on weighted points (x_m, y_m, w_m),
//! W = Σ_m w_m. The state is (β, σ², γ): θ = (β, σ²) is the model's parameter vector, and
//! γ ∈ {0,1}^p is auxiliary state kept in [`SparseGibbs`]. One sweep:
//!
//! 1. β | γ, σ² ~ N(P⁻¹b, P⁻¹) with P = Σ_m (w_m/σ²)·x_m x_mᵀ + diag(τ_i(γ)⁻²) and
//!    b = Σ_m (w_m/σ²)·x_m y_m; τ_i(γ) = c·τ if γ_i = 1, else τ. The prior on β is not scaled
//!    by σ². Drawn as β = L⁻ᵀ(L⁻¹b + z), z ~ N(0, I), with P = LLᵀ (faer Cholesky of the
//!    symmetrised P).
//! 2. σ² | β ~ InvGamma((W + ν)/2, (Σ_m w_m (y_m − x_mᵀβ)² + νλ)/2).
//! 3. γ_i | β_i ~ Bernoulli(P(γ_i = 1 | β_i)), the textbook full conditional
//!    q·N(β_i; 0, (cτ)²) / [q·N(β_i; 0, (cτ)²) + (1 − q)·N(β_i; 0, τ²)], evaluated as a logistic
//!    function of the log odds (never 0/0), coordinates visited in a random permutation.
//!
//! The sweep returns log π_w(β, σ²) = log π₀(β, σ²) + Σ_m w_m ℓ_m(β, σ²) at the new state, with γ
//! summed out of the prior, as [`Model::log_prior`] and [`Model::log_lik_each`] define it.
//!
//! The reference code's variant of step 3 (compatibility option
//! `sparse_gibbs_reference_gamma_update`, reference §7.7(c)) is not implemented: it can produce
//! 0/0, and it is off by default.

use crate::cpu::clear_upper_vector_state;
use crate::model::{DataIndex, Model, ModelError, SparseRegression, SparseRegressionSettings};
use crate::rng::{ChainRng, fill_standard_normal};
use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt;
use faer::linalg::triangular_solve::{
    solve_lower_triangular_in_place, solve_upper_triangular_in_place,
};
use faer::{MatMut, MatRef, Par};
use rand::RngExt;
use rand::seq::SliceRandom;

/// Errors of the Gibbs kernel: inputs that do not fit the model, or a failed factorisation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GibbsError {
    /// `points` and `weights` differ in length.
    #[error("{points} coreset points but {weights} weights")]
    LengthMismatch {
        /// Number of points.
        points: usize,
        /// Number of weights.
        weights: usize,
    },
    /// A point index is not a row of the data.
    #[error("coreset point {position} is data row {point}, but the data have {num_data} rows")]
    PointOutOfRange {
        /// Position in `points`.
        position: usize,
        /// The index.
        point: DataIndex,
        /// Number of data rows.
        num_data: usize,
    },
    /// A weight is negative or not finite.
    #[error("weight {position} must be finite and >= 0, got {value}")]
    InvalidWeight {
        /// Position in `weights`.
        position: usize,
        /// The weight.
        value: f64,
    },
    /// θ, β or γ has the wrong length.
    #[error("{what} has length {got} but the model needs {expected}")]
    WrongDimension {
        /// `"theta"`, `"beta"` or `"gamma"`.
        what: &'static str,
        /// Required length.
        expected: usize,
        /// Given length.
        got: usize,
    },
    /// σ² is not positive and finite.
    #[error("sigma2 must be positive and finite, got {0}")]
    InvalidVariance(f64),
    /// The precision matrix of β | γ, σ² is not numerically positive definite.
    #[error("the precision of beta | gamma, sigma2 is not positive definite (pivot {pivot})")]
    NotPositiveDefinite {
        /// The failing pivot.
        pivot: usize,
    },
    /// A parameter of a conditional distribution is out of range (e.g. total weight overflow).
    #[error("the {what} is {value}, which is not positive and finite")]
    InvalidConditional {
        /// Which parameter.
        what: &'static str,
        /// Its value.
        value: f64,
    },
    /// The model could not provide the chain start (e.g. a rank-deficient design).
    #[error(transparent)]
    Model(#[from] ModelError),
}

/// The mean and precision of β | γ, σ² (step 1), for tests and diagnostics.
#[derive(Debug, Clone, PartialEq)]
pub struct BetaConditional {
    /// P⁻¹b.
    pub mean: Vec<f64>,
    /// P, row-major p × p (symmetric).
    pub precision: Vec<f64>,
}

/// InvGamma(shape, scale): density ∝ x^(−shape−1)·exp(−scale/x).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InvGamma {
    /// Shape (W + ν)/2.
    pub shape: f64,
    /// Scale (Σ_m w_m r_m² + νλ)/2.
    pub scale: f64,
}

/// Check the weighted points against the model; returns W = Σ w_m.
fn check_points(
    model: &SparseRegression,
    points: &[DataIndex],
    weights: &[f64],
) -> Result<f64, GibbsError> {
    if points.len() != weights.len() {
        return Err(GibbsError::LengthMismatch {
            points: points.len(),
            weights: weights.len(),
        });
    }
    let num_data = model.num_data();
    if let Some(position) = points.iter().position(|&i| i as usize >= num_data) {
        return Err(GibbsError::PointOutOfRange {
            position,
            point: points[position],
            num_data,
        });
    }
    if let Some(position) = weights.iter().position(|w| !(*w >= 0.0 && w.is_finite())) {
        return Err(GibbsError::InvalidWeight {
            position,
            value: weights[position],
        });
    }
    Ok(weights.iter().sum())
}

fn check_sigma2(s2: f64) -> Result<(), GibbsError> {
    if s2 > 0.0 && s2.is_finite() {
        Ok(())
    } else {
        Err(GibbsError::InvalidVariance(s2))
    }
}

/// `gram` (p × p, lower triangle, column-major) = Σ w_m x_m x_mᵀ and `xty` = Σ w_m x_m y_m.
///
/// Hand-written rank-one updates: the rows are gathered by index and p ≈ 10, so a GEMM would
/// first need a weighted copy of the rows and gain nothing at this size.
fn weighted_moments(
    model: &SparseRegression,
    points: &[DataIndex],
    weights: &[f64],
    gram: &mut [f64],
    xty: &mut [f64],
) {
    let p = model.p();
    gram.fill(0.0);
    xty.fill(0.0);
    for (&m, &w) in points.iter().zip(weights) {
        let x = model.row(m as usize);
        let wy = w * model.response(m as usize);
        for (j, &xj) in x.iter().enumerate() {
            xty[j] += wy * xj;
            let wxj = w * xj;
            let col = &mut gram[j * p..(j + 1) * p];
            for (g, &xi) in col[j..].iter_mut().zip(&x[j..]) {
                *g += wxj * xi;
            }
        }
    }
}

/// P = gram/σ² + diag(τ_i(γ)⁻²) (column-major, full: the lower triangle mirrored into the upper,
/// so P is exactly symmetric) and `rhs` = xty/σ².
fn assemble_precision(
    settings: &SparseRegressionSettings,
    gram: &[f64],
    xty: &[f64],
    gamma: &[bool],
    s2: f64,
    precision: &mut [f64],
    rhs: &mut [f64],
) {
    let p = xty.len();
    let inv = 1.0 / s2;
    let (spike, slab) = (settings.tau, settings.slab_sd());
    for j in 0..p {
        for i in j..p {
            let v = gram[j * p + i] * inv;
            precision[j * p + i] = v;
            precision[i * p + j] = v;
        }
        let t = if gamma[j] { slab } else { spike };
        precision[j * p + j] += 1.0 / (t * t);
        rhs[j] = xty[j] * inv;
    }
}

/// Σ w_m (y_m − x_mᵀβ)².
fn weighted_ssr(
    model: &SparseRegression,
    points: &[DataIndex],
    weights: &[f64],
    beta: &[f64],
) -> f64 {
    points
        .iter()
        .zip(weights)
        .map(|(&m, &w)| {
            let x = model.row(m as usize);
            let r =
                model.response(m as usize) - x.iter().zip(beta).map(|(a, b)| a * b).sum::<f64>();
            w * r * r
        })
        .sum()
}

fn inv_gamma_params(settings: &SparseRegressionSettings, total_weight: f64, ssr: f64) -> InvGamma {
    InvGamma {
        shape: 0.5 * (total_weight + settings.nu),
        scale: 0.5 * (ssr + settings.nu * settings.lambda),
    }
}

/// Cholesky factor of `precision` (column-major p × p) in place, lower triangle.
fn cholesky(precision: &mut [f64], p: usize, stack: &mut MemStack) -> Result<(), GibbsError> {
    let result = llt::factor::cholesky_in_place(
        MatMut::from_column_major_slice_mut(precision, p, p),
        Default::default(),
        Par::Seq,
        stack,
        Default::default(),
    );
    clear_upper_vector_state();
    match result {
        Ok(_) => Ok(()),
        Err(llt::factor::LltError::NonPositivePivot { index }) => {
            Err(GibbsError::NotPositiveDefinite { pivot: index })
        }
    }
}

fn cholesky_buffer(p: usize) -> MemBuffer {
    MemBuffer::new(llt::factor::cholesky_in_place_scratch::<f64>(
        p,
        Par::Seq,
        Default::default(),
    ))
}

/// Step 1's conditional β | γ, σ² on the weighted points: mean P⁻¹b and precision P (module
/// doc). Allocates; the sweep uses the same assembly on its workspace.
pub fn beta_conditional(
    model: &SparseRegression,
    points: &[DataIndex],
    weights: &[f64],
    gamma: &[bool],
    sigma2: f64,
) -> Result<BetaConditional, GibbsError> {
    check_points(model, points, weights)?;
    check_sigma2(sigma2)?;
    let p = model.p();
    if gamma.len() != p {
        return Err(GibbsError::WrongDimension {
            what: "gamma",
            expected: p,
            got: gamma.len(),
        });
    }
    let (mut gram, mut xty) = (vec![0.0; p * p], vec![0.0; p]);
    weighted_moments(model, points, weights, &mut gram, &mut xty);
    let (mut precision, mut mean) = (vec![0.0; p * p], vec![0.0; p]);
    assemble_precision(
        model.settings(),
        &gram,
        &xty,
        gamma,
        sigma2,
        &mut precision,
        &mut mean,
    );
    let mut factor = precision.clone();
    cholesky(&mut factor, p, MemStack::new(&mut cholesky_buffer(p)))?;
    let l = MatRef::from_column_major_slice(&factor, p, p);
    solve_lower_triangular_in_place(
        l,
        MatMut::from_column_major_slice_mut(&mut mean, p, 1),
        Par::Seq,
    );
    solve_upper_triangular_in_place(
        l.transpose(),
        MatMut::from_column_major_slice_mut(&mut mean, p, 1),
        Par::Seq,
    );
    clear_upper_vector_state();
    // Column-major symmetric = row-major symmetric.
    Ok(BetaConditional { mean, precision })
}

/// Step 2's conditional σ² | β on the weighted points:
/// InvGamma((W + ν)/2, (Σ_m w_m (y_m − x_mᵀβ)² + νλ)/2).
pub fn sigma2_conditional(
    model: &SparseRegression,
    points: &[DataIndex],
    weights: &[f64],
    beta: &[f64],
) -> Result<InvGamma, GibbsError> {
    let total = check_points(model, points, weights)?;
    if beta.len() != model.p() {
        return Err(GibbsError::WrongDimension {
            what: "beta",
            expected: model.p(),
            got: beta.len(),
        });
    }
    let ssr = weighted_ssr(model, points, weights, beta);
    Ok(inv_gamma_params(model.settings(), total, ssr))
}

/// Step 3's conditional P(γ_i = 1 | β_i), in log space
/// ([`SparseRegressionSettings::slab_probability`]).
pub fn gamma_conditional(model: &SparseRegression, beta_i: f64) -> f64 {
    model.settings().slab_probability(beta_i)
}

/// The chain start of reference §7.9 [lib]: β₀ = β̂_OLS + N(0, I) (full-data least squares) and
/// σ²₀ = |var(Xβ₀ − y) + N(0, 1)| (sample variance, divisor N − 1; the absolute value keeps it
/// positive). γ₀ is the kernel's business: the first sweep's step 3 redraws it.
pub fn initial_state(model: &SparseRegression, rng: &mut ChainRng) -> Result<Vec<f64>, GibbsError> {
    let p = model.p();
    let mut theta = model.ols()?;
    let mut noise = vec![0.0; p + 1];
    fill_standard_normal(rng, &mut noise);
    for (t, z) in theta.iter_mut().zip(&noise) {
        *t += z;
    }
    let n = model.num_data();
    let residual = |k: usize| {
        let x = model.row(k);
        x.iter().zip(&theta).map(|(a, b)| a * b).sum::<f64>() - model.response(k)
    };
    let mean = (0..n).map(residual).sum::<f64>() / n as f64;
    let var = if n > 1 {
        (0..n).map(|k| (residual(k) - mean).powi(2)).sum::<f64>() / (n - 1) as f64
    } else {
        0.0
    };
    theta.push((var + noise[p]).abs());
    Ok(theta)
}

/// The Gibbs kernel's state γ and its workspaces (module doc). After construction a sweep does
/// not allocate.
pub struct SparseGibbs {
    gamma: Vec<bool>,
    /// Σ w x xᵀ, lower triangle, column-major p × p.
    gram: Vec<f64>,
    xty: Vec<f64>,
    /// P, then its Cholesky factor (column-major p × p).
    factor: Vec<f64>,
    work: Vec<f64>,
    order: Vec<usize>,
    stack: MemBuffer,
}

// γ and the order of its updates (shuffled in place each sweep) carry over; the rest is
// recomputed from the weights at every sweep.
crate::persist_fields!(SparseGibbs { gamma, order });

impl std::fmt::Debug for SparseGibbs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SparseGibbs")
            .field("gamma", &self.gamma)
            .finish_non_exhaustive()
    }
}

impl SparseGibbs {
    /// A kernel for `model` with γ = 0 (all coefficients in the spike). γ is first read by
    /// step 1 of the first sweep; choose it with [`Self::with_initial_gamma`], or draw it from
    /// step 3's conditional at the chain start with [`Self::draw_gamma`].
    pub fn new(model: &SparseRegression) -> Self {
        let p = model.p();
        Self {
            gamma: vec![false; p],
            gram: vec![0.0; p * p],
            xty: vec![0.0; p],
            factor: vec![0.0; p * p],
            work: vec![0.0; p],
            order: (0..p).collect(),
            stack: cholesky_buffer(p),
        }
    }

    /// Start from the indicators `gamma` (length p).
    pub fn with_initial_gamma(mut self, gamma: &[bool]) -> Result<Self, GibbsError> {
        self.set_gamma(gamma)?;
        Ok(self)
    }

    /// Replace γ (length p).
    pub fn set_gamma(&mut self, gamma: &[bool]) -> Result<(), GibbsError> {
        if gamma.len() != self.gamma.len() {
            return Err(GibbsError::WrongDimension {
                what: "gamma",
                expected: self.gamma.len(),
                got: gamma.len(),
            });
        }
        self.gamma.copy_from_slice(gamma);
        Ok(())
    }

    /// Step 3 alone: γ_i ~ Bernoulli(P(γ_i = 1 | β_i)) for every i, in a random permutation.
    /// `beta` has length p.
    pub fn draw_gamma(
        &mut self,
        model: &SparseRegression,
        beta: &[f64],
        rng: &mut ChainRng,
    ) -> Result<(), GibbsError> {
        if beta.len() != self.gamma.len() || model.p() != self.gamma.len() {
            return Err(GibbsError::WrongDimension {
                what: "beta",
                expected: self.gamma.len(),
                got: beta.len(),
            });
        }
        self.order.shuffle(rng);
        let settings = model.settings();
        for &i in &self.order {
            self.gamma[i] = rng.random::<f64>() < settings.slab_probability(beta[i]);
        }
        Ok(())
    }

    /// The current indicators γ.
    pub fn gamma(&self) -> &[bool] {
        &self.gamma
    }

    /// One sweep of steps 1–3 (module doc) over the weighted `points` (data rows) from
    /// θ = (β, σ²), updated in place; returns log π_w at the new θ. θ is left unchanged on error.
    pub fn sweep(
        &mut self,
        model: &SparseRegression,
        points: &[DataIndex],
        weights: &[f64],
        theta: &mut [f64],
        rng: &mut ChainRng,
    ) -> Result<f64, GibbsError> {
        let p = model.p();
        if theta.len() != p + 1 {
            return Err(GibbsError::WrongDimension {
                what: "theta",
                expected: p + 1,
                got: theta.len(),
            });
        }
        if self.gamma.len() != p {
            return Err(GibbsError::WrongDimension {
                what: "gamma",
                expected: p,
                got: self.gamma.len(),
            });
        }
        let total = check_points(model, points, weights)?;
        check_sigma2(theta[p])?;
        let settings = model.settings();

        // Step 1: β | γ, σ² = N(P⁻¹b, P⁻¹), drawn as L⁻ᵀ(L⁻¹b + z).
        weighted_moments(model, points, weights, &mut self.gram, &mut self.xty);
        assemble_precision(
            settings,
            &self.gram,
            &self.xty,
            &self.gamma,
            theta[p],
            &mut self.factor,
            &mut self.work,
        );
        cholesky(&mut self.factor, p, MemStack::new(&mut self.stack))?;
        let l = MatRef::from_column_major_slice(&self.factor, p, p);
        solve_lower_triangular_in_place(
            l,
            MatMut::from_column_major_slice_mut(&mut self.work, p, 1),
            Par::Seq,
        );
        for w in self.work.iter_mut() {
            *w += rng.sample::<f64, _>(rand_distr::StandardNormal);
        }
        solve_upper_triangular_in_place(
            l.transpose(),
            MatMut::from_column_major_slice_mut(&mut self.work, p, 1),
            Par::Seq,
        );
        clear_upper_vector_state();
        let beta = &self.work;

        // Step 2: σ² | β ~ InvGamma(shape, scale) = scale / Gamma(shape, 1).
        let ssr = weighted_ssr(model, points, weights, beta);
        let ig = inv_gamma_params(settings, total, ssr);
        let gamma_dist =
            rand_distr::Gamma::new(ig.shape, 1.0).map_err(|_| GibbsError::InvalidConditional {
                what: "shape of sigma2 | beta",
                value: ig.shape,
            })?;
        let s2 = ig.scale / rng.sample(gamma_dist);
        check_sigma2(s2)?;
        theta[..p].copy_from_slice(beta);
        theta[p] = s2;

        // Step 3: γ_i | β_i, coordinates in a random permutation.
        self.draw_gamma(model, &theta[..p], rng)?;

        // log π_w = log π₀ + Σ w_m ℓ_m, Σ w_m ℓ_m = −½[W log σ² + SSR/σ²].
        Ok(model.log_prior(theta) - 0.5 * (total * s2.ln() + ssr / s2))
    }
}
