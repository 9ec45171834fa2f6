//! Exact full-data evaluation: log π(θ) and ∇log π(θ) over all N points.
//!
//! The data are cut into fixed chunks of [`CHUNK`] rows evaluated in parallel; partial sums are
//! then added in chunk order, so the result is bit-identical whatever the number of threads.

use super::{BatchTerms, GradientEstimator};
use crate::model::{DataIndex, Model, Scratch, TermMoments};
use crate::rng::ChainRng;
use rayon::prelude::*;

/// Rows per parallel chunk (fixed, so the summation order never depends on the thread count).
pub const CHUNK: usize = 16_384;

/// Draws per pass over the data in [`FullDataEvaluator::grad_log_posterior_draws`]: bounds
/// the per-chunk buffers (chunks × 256 × D doubles) while reading the data once per 256 draws.
pub const DRAWS_PER_PASS: usize = 256;

struct Part {
    grad: Vec<f64>,
    /// The chunk's likelihood gradients at a block of draws (P × D).
    block: Vec<f64>,
    log_lik: f64,
    scratch: Scratch,
}

/// Evaluates the full-data log posterior and its gradient; buffers are allocated once.
pub struct FullDataEvaluator<'m> {
    model: &'m dyn Model,
    indices: Vec<DataIndex>,
    parts: Vec<Part>,
}

impl<'m> FullDataEvaluator<'m> {
    /// An evaluator for `model` (allocates N indices and one gradient buffer per chunk).
    pub fn new(model: &'m dyn Model) -> Self {
        let n = model.num_data();
        let indices: Vec<DataIndex> = (0..n as u64).map(|i| i as DataIndex).collect();
        let parts = (0..n.div_ceil(CHUNK))
            .map(|_| Part {
                grad: vec![0.0; model.dim()],
                block: Vec::new(),
                log_lik: 0.0,
                scratch: Scratch::new(),
            })
            .collect();
        Self {
            model,
            indices,
            parts,
        }
    }

    /// The model evaluated.
    pub fn model(&self) -> &'m dyn Model {
        self.model
    }

    fn run(&mut self, theta: &[f64], with_log_lik: bool) {
        let model = self.model;
        self.parts
            .par_iter_mut()
            .zip(self.indices.par_chunks(CHUNK))
            .for_each(|(part, chunk)| {
                part.grad.fill(0.0);
                part.log_lik = if with_log_lik {
                    model.log_lik_and_add_grad(theta, chunk, 1.0, &mut part.grad, &mut part.scratch)
                } else {
                    model.add_grad_log_lik(theta, chunk, 1.0, &mut part.grad, &mut part.scratch);
                    0.0
                };
            });
    }

    fn reduce_grad(&self, theta: &[f64], grad: &mut [f64]) {
        grad.fill(0.0);
        self.model.add_grad_log_prior(theta, grad);
        for part in &self.parts {
            grad.iter_mut().zip(&part.grad).for_each(|(g, p)| *g += p);
        }
    }

    /// Writes ∇log π(θ) into `grad` and returns log π(θ) (up to an additive constant).
    pub fn log_posterior_and_grad(&mut self, theta: &[f64], grad: &mut [f64]) -> f64 {
        self.run(theta, true);
        self.reduce_grad(theta, grad);
        self.model.log_prior(theta) + self.parts.iter().map(|p| p.log_lik).sum::<f64>()
    }

    /// Writes ∇log π(θ) into `grad`.
    pub fn grad_log_posterior(&mut self, theta: &[f64], grad: &mut [f64]) {
        self.run(theta, false);
        self.reduce_grad(theta, grad);
    }

    /// Writes ∇log π(θ_p) into row p of `grads` for every row θ_p of `thetas` (both P × D
    /// row-major): full-batch scores at many draws, with the data read once per
    /// [`DRAWS_PER_PASS`] draws ([`Model::add_grad_log_lik_draws`]; the GLMs go through matrix
    /// products). Chunks are summed in chunk order, so the result does not depend on the
    /// thread count; it can differ from [`Self::grad_log_posterior`] in the last bits.
    pub fn grad_log_posterior_draws(&mut self, thetas: &[f64], grads: &mut [f64]) {
        let model = self.model;
        let d = model.dim();
        assert_eq!(thetas.len(), grads.len(), "draws and scores differ in size");
        let pass = DRAWS_PER_PASS * d.max(1);
        for (block, out) in thetas.chunks(pass).zip(grads.chunks_mut(pass)) {
            self.parts
                .par_iter_mut()
                .zip(self.indices.par_chunks(CHUNK))
                .for_each(|(part, chunk)| {
                    part.block.clear();
                    part.block.resize(block.len(), 0.0);
                    model.add_grad_log_lik_draws(block, chunk, &mut part.block, &mut part.scratch);
                });
            for (p, (theta, g)) in block
                .chunks_exact(d)
                .zip(out.chunks_exact_mut(d))
                .enumerate()
            {
                g.fill(0.0);
                model.add_grad_log_prior(theta, g);
                for part in &self.parts {
                    g.iter_mut()
                        .zip(&part.block[p * d..(p + 1) * d])
                        .for_each(|(g, b)| *g += b);
                }
            }
        }
    }
}

/// The exact gradient as an estimator (zero variance, cost N per estimate).
pub struct FullBatch<'m> {
    eval: FullDataEvaluator<'m>,
}

impl<'m> FullBatch<'m> {
    /// Full-data gradients of `model`.
    pub fn new(model: &'m dyn Model) -> Self {
        Self {
            eval: FullDataEvaluator::new(model),
        }
    }
}

crate::persist_fields!(FullBatch<'_> {});

impl GradientEstimator for FullBatch<'_> {
    crate::checkpoint::state_through_persist!();

    fn estimate(&mut self, theta: &[f64], out: &mut [f64], _rng: &mut ChainRng) {
        self.eval.grad_log_posterior(theta, out);
    }

    fn cost_per_estimate(&self) -> usize {
        self.eval.model.num_data()
    }

    /// Exact: no random part, no terms.
    fn estimate_with_terms(
        &mut self,
        theta: &[f64],
        out: &mut [f64],
        _moments: &mut TermMoments,
        _rng: &mut ChainRng,
    ) -> BatchTerms {
        self.eval.grad_log_posterior(theta, out);
        BatchTerms::EXACT
    }
}
