//! [`PreconditionedModel`]: a model in the coordinates φ of θ = c + Lφ.

use super::Preconditioner;
use crate::model::{DataIndex, Model, ModelError, Scratch};
use crate::rng::ChainRng;
use std::cell::Cell;

thread_local! {
    /// Per-thread workspaces (θ and a θ-space gradient) for the `&self` model calls, taken
    /// out and put back, so the hot calls allocate only the first time on each thread.
    static THETA: Cell<Vec<f64>> = const { Cell::new(Vec::new()) };
    static GRAD: Cell<Vec<f64>> = const { Cell::new(Vec::new()) };
}

/// Run `f` with two per-thread buffers of length `d` (contents unspecified).
fn with_buffers<R>(d: usize, f: impl FnOnce(&mut [f64], &mut [f64]) -> R) -> R {
    let mut theta = THETA.take();
    let mut grad = GRAD.take();
    theta.resize(d, 0.0);
    grad.resize(d, 0.0);
    let out = f(&mut theta, &mut grad);
    THETA.set(theta);
    GRAD.set(grad);
    out
}

/// The posterior of φ, where θ = c + Lφ: log π_φ(φ) = log π(c + Lφ) (+ log|L|, a constant,
/// left out) and ∇_φ = Lᵀ∇_θ, term by term, so per-datum terms, control variates, SVRG, the
/// MH test's log-likelihood ratios and CCAdL's noise covariance all work in φ.
pub struct PreconditionedModel<'m> {
    inner: &'m dyn Model,
    map: &'m Preconditioner,
}

impl<'m> PreconditionedModel<'m> {
    /// `inner` in the coordinates of `map`. Errors when the dimensions differ.
    pub fn new(inner: &'m dyn Model, map: &'m Preconditioner) -> Result<Self, ModelError> {
        if inner.dim() != map.dim() {
            return Err(ModelError::Setting(format!(
                "the preconditioner is for D = {} but model `{}` has D = {}",
                map.dim(),
                inner.name(),
                inner.dim()
            )));
        }
        Ok(Self { inner, map })
    }

    /// The map θ = c + Lφ.
    pub fn preconditioner(&self) -> &Preconditioner {
        self.map
    }

    /// `f` at θ = c + Lφ.
    fn at_theta<R>(&self, phi: &[f64], f: impl FnOnce(&[f64]) -> R) -> R {
        with_buffers(phi.len(), |theta, _| {
            self.map.to_theta(phi, theta);
            f(theta)
        })
    }

    /// `weight`-free helper: compute a θ-space gradient with `f` into a zeroed buffer and add
    /// Lᵀ of it to `grad`; returns what `f` returns.
    fn pulled_back<R>(
        &self,
        phi: &[f64],
        grad: &mut [f64],
        f: impl FnOnce(&[f64], &mut [f64]) -> R,
    ) -> R {
        with_buffers(phi.len(), |theta, g| {
            self.map.to_theta(phi, theta);
            g.fill(0.0);
            let out = f(theta, g);
            self.map.add_pull_back(g, grad);
            out
        })
    }
}

impl Model for PreconditionedModel<'_> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn dim(&self) -> usize {
        self.inner.dim()
    }

    fn num_data(&self) -> usize {
        self.inner.num_data()
    }

    fn will_read(&self, first: usize, n: usize) {
        self.inner.will_read(first, n);
    }

    /// The inner model's names (a [`super::PreconditionedKernel`] reports θ, not φ).
    fn parameter_names(&self) -> Vec<String> {
        self.inner.parameter_names()
    }

    fn is_constrained(&self) -> bool {
        self.inner.is_constrained()
    }

    /// The inner model's constrained values at θ(φ).
    fn constrain(&self, phi: &[f64], out: &mut [f64]) {
        self.at_theta(phi, |theta| self.inner.constrain(theta, out));
    }

    fn log_prior(&self, phi: &[f64]) -> f64 {
        self.at_theta(phi, |theta| self.inner.log_prior(theta))
    }

    fn add_grad_log_prior(&self, phi: &[f64], grad: &mut [f64]) {
        self.pulled_back(phi, grad, |theta, g| {
            self.inner.add_grad_log_prior(theta, g)
        });
    }

    fn log_lik_each(
        &self,
        phi: &[f64],
        batch: &[DataIndex],
        out: &mut [f64],
        scratch: &mut Scratch,
    ) {
        self.at_theta(phi, |theta| {
            self.inner.log_lik_each(theta, batch, out, scratch)
        });
    }

    fn grad_log_lik_each(
        &self,
        phi: &[f64],
        batch: &[DataIndex],
        out: &mut [f64],
        scratch: &mut Scratch,
    ) {
        self.at_theta(phi, |theta| {
            self.inner.grad_log_lik_each(theta, batch, out, scratch)
        });
        for row in out.chunks_exact_mut(phi.len()) {
            self.map.pull_back_in_place(row);
        }
    }

    fn add_grad_log_lik(
        &self,
        phi: &[f64],
        batch: &[DataIndex],
        weight: f64,
        grad: &mut [f64],
        scratch: &mut Scratch,
    ) {
        self.pulled_back(phi, grad, |theta, g| {
            self.inner
                .add_grad_log_lik(theta, batch, weight, g, scratch)
        });
    }

    /// θ_p = c + Lφ_p for the whole block, the inner model's block call, then Lᵀ per draw.
    fn add_grad_log_lik_draws(
        &self,
        phis: &[f64],
        batch: &[DataIndex],
        grads: &mut [f64],
        scratch: &mut Scratch,
    ) {
        let d = self.dim();
        with_buffers(phis.len(), |thetas, theta_grads| {
            for (phi, theta) in phis.chunks_exact(d).zip(thetas.chunks_exact_mut(d)) {
                self.map.to_theta(phi, theta);
            }
            theta_grads.fill(0.0);
            self.inner
                .add_grad_log_lik_draws(thetas, batch, theta_grads, scratch);
            for (g, grad) in theta_grads.chunks_exact(d).zip(grads.chunks_exact_mut(d)) {
                self.map.add_pull_back(g, grad);
            }
        })
    }

    fn log_lik_and_add_grad(
        &self,
        phi: &[f64],
        batch: &[DataIndex],
        weight: f64,
        grad: &mut [f64],
        scratch: &mut Scratch,
    ) -> f64 {
        self.pulled_back(phi, grad, |theta, g| {
            self.inner
                .log_lik_and_add_grad(theta, batch, weight, g, scratch)
        })
    }

    // add_grad_log_lik_terms: the trait's default, built on grad_log_lik_each above, so the
    // terms (and CCAdL's moments of them) are φ-space terms.

    fn map_start(&self) -> Vec<f64> {
        let mut phi = vec![0.0; self.dim()];
        self.map.to_phi(&self.inner.map_start(), &mut phi);
        phi
    }

    fn sample_prior(&self, rng: &mut ChainRng, out: &mut [f64]) -> Result<(), ModelError> {
        let mut theta = vec![0.0; out.len()];
        self.inner.sample_prior(rng, &mut theta)?;
        self.map.to_phi(&theta, out);
        Ok(())
    }
}
