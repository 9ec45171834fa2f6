//! The Laplace approximation π ≈ N(θ̂, (−H)⁻¹) at the MAP θ̂, with H = ∇²log π(θ̂) (Bishop 2006,
//! §4.4): a cheap check of a NUTS reference on smooth, unimodal posteriors (issue 4, must-show 3).

use crate::cpu::clear_upper_vector_state;
use crate::estimator::FullDataEvaluator;
use crate::model::Model;
use crate::optim::lbfgs::LbfgsOptions;
use crate::optim::{MapError, find_map};

/// N(mean, covariance) approximating the posterior.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct LaplaceApproximation {
    /// θ̂, the MAP (D).
    pub mean: Vec<f64>,
    /// (−H)⁻¹, D × D row-major (symmetric).
    pub covariance: Vec<f64>,
    /// √diag((−H)⁻¹) (D).
    pub sd: Vec<f64>,
}

impl LaplaceApproximation {
    /// The sds on the scale `model` reports its parameters on ([`Model::constrain`]): for a
    /// model with constrained parameters the approximation pushed through x = g(θ) by the delta
    /// method, sd(xᵢ)² ≈ Σⱼₖ Jᵢⱼ Σⱼₖ Jᵢₖ with J = ∂g/∂θ at the MAP by central differences
    /// (σ = exp(u): sd(σ) ≈ σ̂·sd(u)); [`sd`](Self::sd) itself otherwise.
    pub fn reported_sd(&self, model: &dyn Model) -> Vec<f64> {
        let d = self.mean.len();
        if !model.is_constrained() {
            return self.sd.clone();
        }
        // jacobian[i * d + j] = ∂xᵢ/∂θⱼ.
        let mut jacobian = vec![0.0; d * d];
        let (mut theta, mut plus, mut minus) = (self.mean.clone(), vec![0.0; d], vec![0.0; d]);
        for j in 0..d {
            let h = 1e-6 * self.sd[j].max(f64::MIN_POSITIVE);
            let centre = theta[j];
            theta[j] = centre + h;
            model.constrain(&theta, &mut plus);
            theta[j] = centre - h;
            model.constrain(&theta, &mut minus);
            theta[j] = centre;
            for i in 0..d {
                jacobian[i * d + j] = (plus[i] - minus[i]) / (2.0 * h);
            }
        }
        (0..d)
            .map(|i| {
                let row = &jacobian[i * d..(i + 1) * d];
                let nonzero: Vec<usize> = (0..d).filter(|&j| row[j] != 0.0).collect();
                let variance: f64 = nonzero
                    .iter()
                    .flat_map(|&j| nonzero.iter().map(move |&k| (j, k)))
                    .map(|(j, k)| row[j] * self.covariance[j * d + k] * row[k])
                    .sum();
                variance.max(0.0).sqrt()
            })
            .collect()
    }
}

/// Why the Laplace approximation could not be formed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LaplaceError {
    /// The MAP could not be found.
    #[error(transparent)]
    Map(#[from] MapError),
    /// L-BFGS stopped without meeting a convergence criterion.
    #[error(
        "Laplace approximation: the MAP search did not converge (|grad log pi|_inf = {gradient_norm:.3e} \
         after {iterations} iterations)"
    )]
    MapNotConverged {
        /// ‖∇log π‖_∞ at the last iterate.
        gradient_norm: f64,
        /// L-BFGS iterations run.
        iterations: usize,
    },
    /// The finite-difference Hessian has non-finite entries.
    #[error("Laplace approximation: the Hessian of log pi at the MAP has non-finite entries")]
    NonFiniteHessian,
    /// −H is not positive definite, so (−H)⁻¹ is no covariance.
    #[error(
        "Laplace approximation: -(Hessian of log pi) at the MAP is not positive definite \
         (the posterior is flat or not log-concave in some direction there); no Gaussian approximation exists"
    )]
    NotPositiveDefinite,
}

/// L-BFGS settings for the MAP (as `sgmcmc run` uses for `init = "map"`).
pub(crate) fn map_options() -> LbfgsOptions {
    LbfgsOptions {
        max_iterations: 2_000,
        ..LbfgsOptions::default()
    }
}

/// The Laplace approximation at the MAP: θ̂ by L-BFGS from [`Model::map_start`] ([`find_map`]), then
/// [`laplace_at`]. Costs the MAP search plus 2D full-data gradient passes.
pub fn laplace(model: &dyn Model) -> Result<LaplaceApproximation, LaplaceError> {
    let map = find_map(model, &model.map_start(), &map_options())?;
    if !map.converged {
        return Err(LaplaceError::MapNotConverged {
            gradient_norm: map.gradient_norm,
            iterations: map.iterations,
        });
    }
    laplace_at(model, &map.theta)
}

/// The Laplace approximation N(θ̂, (−H)⁻¹) at a given mode θ̂: H from
/// [`hessian_log_posterior`], inverted through a Cholesky factorisation of −H (faer).
pub fn laplace_at(model: &dyn Model, mode: &[f64]) -> Result<LaplaceApproximation, LaplaceError> {
    let d = mode.len();
    let hess = hessian_log_posterior(model, mode);
    if !hess.iter().all(|h| h.is_finite()) {
        return Err(LaplaceError::NonFiniteHessian);
    }
    let neg_h = faer::Mat::<f64>::from_fn(d, d, |i, j| -hess[i * d + j]);
    let llt = neg_h
        .llt(faer::Side::Lower)
        .map_err(|_| LaplaceError::NotPositiveDefinite)?;
    let inv = faer::linalg::solvers::DenseSolveCore::inverse(&llt);
    let covariance: Vec<f64> = (0..d * d)
        .map(|k| {
            let (i, j) = (k / d, k % d);
            0.5 * (inv[(i, j)] + inv[(j, i)])
        })
        .collect();
    clear_upper_vector_state();
    let sd: Vec<f64> = (0..d).map(|j| covariance[j * d + j].sqrt()).collect();
    if !sd.iter().all(|s| s.is_finite() && *s > 0.0) {
        return Err(LaplaceError::NotPositiveDefinite);
    }
    Ok(LaplaceApproximation {
        mean: mode.to_vec(),
        covariance,
        sd,
    })
}

/// H = ∇²log π(θ), D × D row-major, by central differences of the full-data gradient
/// (column j = (∇log π(θ + hⱼeⱼ) − ∇log π(θ − hⱼeⱼ)) / 2hⱼ, hⱼ = ε^{1/3}·max(|θⱼ|, 1), the step
/// that balances truncation and rounding error), then symmetrised, (H + Hᵀ)/2. Costs 2D full
/// passes; the passes are parallel and thread-count independent ([`FullDataEvaluator`]).
pub fn hessian_log_posterior(model: &dyn Model, theta: &[f64]) -> Vec<f64> {
    let d = theta.len();
    let mut eval = FullDataEvaluator::new(model);
    let mut hess = vec![0.0; d * d];
    let (mut plus, mut minus) = (vec![0.0; d], vec![0.0; d]);
    let mut at = theta.to_vec();
    let step = f64::EPSILON.cbrt();
    for j in 0..d {
        let h = step * theta[j].abs().max(1.0);
        // The step actually taken (θⱼ ± h is rounded).
        at[j] = theta[j] + h;
        let up = at[j];
        eval.grad_log_posterior(&at, &mut plus);
        at[j] = theta[j] - h;
        let down = at[j];
        eval.grad_log_posterior(&at, &mut minus);
        at[j] = theta[j];
        for i in 0..d {
            hess[i * d + j] = (plus[i] - minus[i]) / (up - down);
        }
    }
    for i in 0..d {
        for j in 0..i {
            let s = 0.5 * (hess[i * d + j] + hess[j * d + i]);
            hess[i * d + j] = s;
            hess[j * d + i] = s;
        }
    }
    hess
}

/// Rows per block of [`diagonal_curvature`]'s pass (blocks run in parallel and are summed in
/// block order, so the result does not depend on the thread count).
const CURVATURE_BLOCK: usize = 4_096;

/// Rademacher probes of the prior's curvature in [`diagonal_curvature`].
const PRIOR_PROBES: u64 = 4;

/// Scales for a diagonal preconditioner where the Hessian is too costly (2D full passes):
/// sⱼ = (Fⱼⱼ + Pⱼⱼ)^{-1/2} at the mode θ̂, with F the empirical Fisher information of the
/// likelihood, Σᵢ (∂ⱼ log p(xᵢ | θ̂))² (one pass over the per-datum gradients; it equals the
/// likelihood's curvature in expectation for a well-specified model), and P the prior's
/// curvature −∂²log p(θ̂)/∂θⱼ², from central differences of the prior's gradient along four
/// Rademacher probes (exact for a prior that is a product over coordinates, as every built-in
/// one but PMF's hierarchical prior is). sⱼ is the *conditional* sd of θⱼ under the Laplace
/// approximation, not the marginal one; entries with non-positive or non-finite curvature
/// get the largest finite scale.
pub fn diagonal_curvature(model: &dyn Model, mode: &[f64]) -> Result<Vec<f64>, LaplaceError> {
    use crate::model::{DataIndex, Scratch};
    use rayon::prelude::*;
    let (n, d) = (model.num_data(), model.dim());
    let blocks: Vec<Vec<f64>> = (0..n.div_ceil(CURVATURE_BLOCK))
        .into_par_iter()
        .map(|b| {
            let rows: Vec<DataIndex> = (b * CURVATURE_BLOCK..((b + 1) * CURVATURE_BLOCK).min(n))
                .map(|i| i as DataIndex)
                .collect();
            let mut scratch = Scratch::new();
            let mut grads = vec![0.0; 256 * d];
            let mut sum = vec![0.0; d];
            for part in rows.chunks(256) {
                let g = &mut grads[..part.len() * d];
                model.grad_log_lik_each(mode, part, g, &mut scratch);
                for row in g.chunks_exact(d) {
                    sum.iter_mut().zip(row).for_each(|(s, v)| *s += v * v);
                }
            }
            sum
        })
        .collect();
    let mut curvature = vec![0.0; d];
    for block in &blocks {
        curvature.iter_mut().zip(block).for_each(|(c, b)| *c += b);
    }
    // The prior's curvature along Rademacher probes (a fixed stream: deterministic).
    let mut rng = crate::rng::stream(0, crate::rng::streams::SHARED_INIT);
    let step = f64::EPSILON.cbrt();
    let (mut plus, mut minus) = (vec![0.0; d], vec![0.0; d]);
    let mut at = vec![0.0; d];
    let mut prior = vec![0.0; d];
    for _ in 0..PRIOR_PROBES {
        let signs: Vec<f64> = (0..d)
            .map(|_| {
                if rand::RngExt::random::<bool>(&mut rng) {
                    1.0
                } else {
                    -1.0
                }
            })
            .collect();
        let h: Vec<f64> = mode.iter().map(|t| step * t.abs().max(1.0)).collect();
        for j in 0..d {
            at[j] = mode[j] + h[j] * signs[j];
        }
        plus.fill(0.0);
        model.add_grad_log_prior(&at, &mut plus);
        for j in 0..d {
            at[j] = mode[j] - h[j] * signs[j];
        }
        minus.fill(0.0);
        model.add_grad_log_prior(&at, &mut minus);
        for j in 0..d {
            prior[j] -= (plus[j] - minus[j]) / (2.0 * h[j] * signs[j]) / PRIOR_PROBES as f64;
        }
    }
    let scales: Vec<f64> = curvature
        .iter()
        .zip(&prior)
        .map(|(f, p)| 1.0 / (f + p).sqrt())
        .collect();
    let largest = scales
        .iter()
        .copied()
        .filter(|s| s.is_finite() && *s > 0.0)
        .fold(f64::NAN, f64::max);
    if largest.is_nan() {
        return Err(LaplaceError::NotPositiveDefinite);
    }
    Ok(scales
        .into_iter()
        .map(|s| if s.is_finite() && s > 0.0 { s } else { largest })
        .collect())
}
