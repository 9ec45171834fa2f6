//! A constant preconditioner for every sampler, as an affine change of variables.
//!
//! Given a centre c and a factor L with LLᵀ = Σ̃ (an approximation of the posterior covariance,
//! typically the Laplace covariance at the MAP), sample φ with θ = c + Lφ. The density of φ is
//! π(c + Lφ)·|L| and its score is Lᵀ∇log π(θ) ([`PreconditionedModel`]); any sampler run on φ
//! with its usual identity metric is, read back in θ ([`PreconditionedKernel`]), the same
//! sampler with a constant preconditioner:
//! - overdamped schemes (SGLD, pSGLD): θ' = θ + ε·Σ̃·ĝ(θ) + √(2ε)·L·ξ, the preconditioned
//!   Langevin diffusion dθ = Σ̃∇log π dt + √2·Σ̃^{1/2} dW (Girolami & Calderhead 2011 with a
//!   constant metric), whose stationary law is π for any constant Σ̃;
//! - momentum schemes (SGHMC, SGNHT, BAOAB, BADODAB, CCAdL): Hamiltonian dynamics with the
//!   mass matrix M = Σ̃⁻¹ (θ-momentum p = L⁻ᵀ·v), with the friction and noise transformed by the
//!   same L, so the invariant law stays π(θ)·N(p; 0, M) (Neal 2011, §5.4.1; Stan's dense and
//!   diagonal metrics are the same construction).
//!
//! Because drift, noise and momentum all pass through the one map, they cannot be transformed
//! inconsistently, and every estimator (minibatch, control variates, SVRG), the MH test and
//! the noise-covariance estimate of CCAdL see φ-space scores without knowing it. The cost is
//! O(D²) per map for a dense L (two maps per score estimate), O(D) for a diagonal one.

mod kernel;
mod model;

pub use kernel::PreconditionedKernel;
pub use model::PreconditionedModel;

use crate::reference::LaplaceApproximation;

/// Dimensions up to which [`Preconditioner::from_laplace`] keeps the dense factor; beyond, the
/// O(D²) maps would cost more than a minibatch's gradients, so only the diagonal is kept.
pub const DENSE_MAX_DIM: usize = 1_000;

/// The shape of the factor L.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum PreconditionerShape {
    /// L = the lower Cholesky factor of Σ̃ (correlations kept).
    Dense,
    /// L = diag(√Σ̃ⱼⱼ) (scales only).
    Diagonal,
}

/// Why a preconditioner could not be built.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum PreconditionerError {
    /// The centre and the factor disagree on D.
    #[error("preconditioner: the centre has {centre} entries but the covariance is for D = {dim}")]
    Dimension {
        /// Length of the centre.
        centre: usize,
        /// D implied by the covariance or scales.
        dim: usize,
    },
    /// The covariance is not square.
    #[error("preconditioner: a covariance with {0} entries is not a square matrix")]
    NotSquare(usize),
    /// The covariance is not symmetric positive definite (its Cholesky factorisation failed).
    #[error("preconditioner: the covariance is not symmetric positive definite")]
    NotPositiveDefinite,
    /// A scale or centre entry that is not finite (or a scale ≤ 0).
    #[error("preconditioner: entry {index} of the {what} is {value}; it must be finite{}", if *what == "scales" { " and > 0" } else { "" })]
    BadEntry {
        /// "centre" or "scales".
        what: &'static str,
        /// The entry.
        index: usize,
        /// Its value.
        value: f64,
    },
}

/// The factor L of Σ̃ = LLᵀ.
#[derive(Debug, Clone, PartialEq)]
enum Factor {
    /// Lower-triangular L, row-major D × D (the strict upper triangle is zero).
    Dense(Vec<f64>),
    /// The diagonal of L.
    Diagonal(Vec<f64>),
}

/// The affine map θ = c + Lφ of a constant preconditioner Σ̃ = LLᵀ.
#[derive(Debug, Clone, PartialEq)]
pub struct Preconditioner {
    centre: Vec<f64>,
    factor: Factor,
}

fn check_finite(what: &'static str, x: &[f64], positive: bool) -> Result<(), PreconditionerError> {
    match x
        .iter()
        .position(|v| !v.is_finite() || (positive && *v <= 0.0))
    {
        Some(index) => Err(PreconditionerError::BadEntry {
            what,
            index,
            value: x[index],
        }),
        None => Ok(()),
    }
}

impl Preconditioner {
    /// Σ̃ = `covariance` (row-major D × D, symmetric positive definite), L its lower Cholesky
    /// factor (faer), centred at `centre`.
    pub fn dense(centre: &[f64], covariance: &[f64]) -> Result<Self, PreconditionerError> {
        let d = centre.len();
        let side = (covariance.len() as f64).sqrt().round() as usize;
        if side * side != covariance.len() {
            return Err(PreconditionerError::NotSquare(covariance.len()));
        }
        if side != d {
            return Err(PreconditionerError::Dimension {
                centre: d,
                dim: side,
            });
        }
        check_finite("centre", centre, false)?;
        let a = faer::Mat::<f64>::from_fn(d, d, |i, j| {
            0.5 * (covariance[i * d + j] + covariance[j * d + i])
        });
        let llt = a
            .llt(faer::Side::Lower)
            .map_err(|_| PreconditionerError::NotPositiveDefinite)?;
        let l = llt.L();
        let factor: Vec<f64> = (0..d * d)
            .map(|k| {
                let (i, j) = (k / d, k % d);
                if j <= i { l[(i, j)] } else { 0.0 }
            })
            .collect();
        crate::cpu::clear_upper_vector_state();
        if !factor.iter().all(|v| v.is_finite()) {
            return Err(PreconditionerError::NotPositiveDefinite);
        }
        Ok(Self {
            centre: centre.to_vec(),
            factor: Factor::Dense(factor),
        })
    }

    /// Σ̃ = diag(`scales`²), centred at `centre`.
    pub fn diagonal(centre: &[f64], scales: &[f64]) -> Result<Self, PreconditionerError> {
        if scales.len() != centre.len() {
            return Err(PreconditionerError::Dimension {
                centre: centre.len(),
                dim: scales.len(),
            });
        }
        check_finite("centre", centre, false)?;
        check_finite("scales", scales, true)?;
        Ok(Self {
            centre: centre.to_vec(),
            factor: Factor::Diagonal(scales.to_vec()),
        })
    }

    /// From a Laplace approximation N(θ̂, Σ̂): centre θ̂ and Σ̃ = Σ̂ in the given shape.
    pub fn from_laplace(
        laplace: &LaplaceApproximation,
        shape: PreconditionerShape,
    ) -> Result<Self, PreconditionerError> {
        match shape {
            PreconditionerShape::Dense => Self::dense(&laplace.mean, &laplace.covariance),
            PreconditionerShape::Diagonal => Self::diagonal(&laplace.mean, &laplace.sd),
        }
    }

    /// The shape the default path uses for D parameters: dense up to [`DENSE_MAX_DIM`].
    pub fn default_shape(dim: usize) -> PreconditionerShape {
        if dim <= DENSE_MAX_DIM {
            PreconditionerShape::Dense
        } else {
            PreconditionerShape::Diagonal
        }
    }

    /// D.
    pub fn dim(&self) -> usize {
        self.centre.len()
    }

    /// The centre c.
    pub fn centre(&self) -> &[f64] {
        &self.centre
    }

    /// The shape of L.
    pub fn shape(&self) -> PreconditionerShape {
        match self.factor {
            Factor::Dense(_) => PreconditionerShape::Dense,
            Factor::Diagonal(_) => PreconditionerShape::Diagonal,
        }
    }

    /// θ = c + Lφ.
    pub fn to_theta(&self, phi: &[f64], theta: &mut [f64]) {
        let d = self.dim();
        debug_assert!(phi.len() == d && theta.len() == d);
        match &self.factor {
            Factor::Dense(l) => {
                for (i, (t, row)) in theta.iter_mut().zip(l.chunks_exact(d)).enumerate() {
                    let dot: f64 = row[..=i].iter().zip(&phi[..=i]).map(|(a, b)| a * b).sum();
                    *t = self.centre[i] + dot;
                }
            }
            Factor::Diagonal(s) => {
                for (((t, c), s), p) in theta.iter_mut().zip(&self.centre).zip(s).zip(phi) {
                    *t = c + s * p;
                }
            }
        }
    }

    /// φ = L⁻¹(θ − c) (forward substitution for a dense L).
    pub fn to_phi(&self, theta: &[f64], phi: &mut [f64]) {
        let d = self.dim();
        debug_assert!(phi.len() == d && theta.len() == d);
        match &self.factor {
            Factor::Dense(l) => {
                for i in 0..d {
                    let row = &l[i * d..i * d + i];
                    let dot: f64 = row.iter().zip(&phi[..i]).map(|(a, b)| a * b).sum();
                    phi[i] = (theta[i] - self.centre[i] - dot) / l[i * d + i];
                }
            }
            Factor::Diagonal(s) => {
                for (((p, t), c), s) in phi.iter_mut().zip(theta).zip(&self.centre).zip(s) {
                    *p = (t - c) / s;
                }
            }
        }
    }

    /// `out += weight · Lᵀg`: a θ-space score pulled back to φ.
    pub fn add_pull_back(&self, g: &[f64], out: &mut [f64]) {
        let d = self.dim();
        debug_assert!(g.len() == d && out.len() == d);
        match &self.factor {
            Factor::Dense(l) => {
                // (Lᵀg)ᵢ = Σ_{k ≥ i} L_ki g_k, accumulated row by row of L (contiguous reads).
                for (k, row) in l.chunks_exact(d).enumerate() {
                    let gk = g[k];
                    for (o, a) in out[..=k].iter_mut().zip(&row[..=k]) {
                        *o += a * gk;
                    }
                }
            }
            Factor::Diagonal(s) => {
                for ((o, s), g) in out.iter_mut().zip(s).zip(g) {
                    *o += s * g;
                }
            }
        }
    }

    /// g ← Lᵀg in place: (Lᵀg)ᵢ reads only g_k for k ≥ i, so increasing i never reads an
    /// overwritten entry.
    pub fn pull_back_in_place(&self, g: &mut [f64]) {
        let d = self.dim();
        debug_assert_eq!(g.len(), d);
        match &self.factor {
            Factor::Dense(l) => {
                for i in 0..d {
                    let mut sum = 0.0;
                    for k in i..d {
                        sum += l[k * d + i] * g[k];
                    }
                    g[i] = sum;
                }
            }
            Factor::Diagonal(s) => {
                for (g, s) in g.iter_mut().zip(s) {
                    *g *= s;
                }
            }
        }
    }
}
