//! The standard estimator (reference §1.2, §3.1):
//! ĝ(θ) = ∇log p(θ) + (N/n)·Σ_{i∈S} ∇log p(xᵢ | θ), S uniform without replacement, fresh per call.

use super::{BatchSize, EstimatorError, GradientEstimator, Subsampler};
use crate::model::{Model, Scratch};
use crate::rng::ChainRng;

/// Minibatch score estimate with N/n scaling; with n = N it is the exact gradient and draws
/// nothing.
pub struct Minibatch<'m> {
    model: &'m dyn Model,
    batch: usize,
    subsampler: Subsampler,
    scratch: Scratch,
}

impl<'m> Minibatch<'m> {
    /// A minibatch estimator for `model`; errors if the batch size is 0 or exceeds N.
    pub fn new(model: &'m dyn Model, batch: BatchSize) -> Result<Self, EstimatorError> {
        let n_data = model.num_data();
        let batch = batch.resolve(n_data)?;
        Ok(Self {
            model,
            batch,
            subsampler: Subsampler::new(n_data),
            scratch: Scratch::new(),
        })
    }

    /// The resolved batch size n.
    pub fn batch_size(&self) -> usize {
        self.batch
    }
}

impl GradientEstimator for Minibatch<'_> {
    #[inline]
    fn estimate(&mut self, theta: &[f64], out: &mut [f64], rng: &mut ChainRng) {
        out.fill(0.0);
        self.model.add_grad_log_prior(theta, out);
        let n_data = self.subsampler.len();
        if self.batch == n_data {
            self.model
                .add_grad_log_lik(theta, self.subsampler.all(), 1.0, out, &mut self.scratch);
        } else {
            let weight = n_data as f64 / self.batch as f64;
            let batch = self.subsampler.draw(self.batch, rng);
            self.model
                .add_grad_log_lik(theta, batch, weight, out, &mut self.scratch);
        }
    }

    fn cost_per_estimate(&self) -> usize {
        self.batch
    }
}
