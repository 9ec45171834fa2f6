//! The standard estimator (reference §1.2, §3.1):
//! ĝ(θ) = ∇log p(θ) + (N/n)·Σ_{i∈S} ∇log p(xᵢ | θ), S uniform without replacement, fresh per call
//! (with replacement: [`Minibatch::with_replacement`]; one S for several calls:
//! [`GradientEstimator::reuse_batch`]).

use super::{
    BatchSize, BatchTerms, EstimatorError, FullDataEvaluator, GradientEstimator, Subsampler,
};
use crate::model::{Model, Scratch, TermMoments};
use crate::rng::ChainRng;

/// Minibatch score estimate with N/n scaling; with n = N it is the exact gradient (computed
/// exactly as [`super::FullBatch`] does, bit for bit) and draws nothing.
pub struct Minibatch<'m> {
    model: &'m dyn Model,
    batch: usize,
    subsampler: Subsampler,
    scratch: Scratch,
    full: Option<FullDataEvaluator<'m>>,
}

impl<'m> Minibatch<'m> {
    /// A minibatch estimator for `model`; errors if the batch size is 0 or exceeds N.
    pub fn new(model: &'m dyn Model, batch: BatchSize) -> Result<Self, EstimatorError> {
        let n_data = model.num_data();
        let batch = batch.resolve(n_data)?;
        let full = (batch == n_data).then(|| FullDataEvaluator::new(model));
        Ok(Self {
            model,
            batch,
            subsampler: Subsampler::new(n_data),
            scratch: Scratch::new(),
            full,
        })
    }

    /// The resolved batch size n.
    pub fn batch_size(&self) -> usize {
        self.batch
    }

    /// Draw minibatches with replacement (`minibatch_with_replacement`, SGMCMCJax; see
    /// [`Subsampler::set_with_replacement`]): still unbiased, noise covariance (N²/n)·C(θ).
    pub fn with_replacement(mut self, on: bool) -> Self {
        self.subsampler.set_with_replacement(on);
        self
    }

    /// Draw minibatches by `scheme` ([`super::MinibatchScheme`]; contiguous blocks read the
    /// rows at bandwidth).
    pub fn with_scheme(mut self, scheme: super::MinibatchScheme) -> Self {
        self.subsampler.set_scheme(scheme);
        self
    }
}

crate::persist_fields!(Minibatch<'_> { subsampler });

impl GradientEstimator for Minibatch<'_> {
    crate::checkpoint::state_through_persist!();

    #[inline]
    fn estimate(&mut self, theta: &[f64], out: &mut [f64], rng: &mut ChainRng) {
        if let Some(full) = &mut self.full {
            return full.grad_log_posterior(theta, out);
        }
        out.fill(0.0);
        let weight = self.subsampler.len() as f64 / self.batch as f64;
        let batch = self.subsampler.batch(self.batch, rng);
        self.model
            .add_grad_estimate(theta, None, batch, weight, out, &mut self.scratch);
        let (model, n) = (self.model, self.batch);
        self.subsampler
            .announce_blocks_ahead(|first| model.will_read(first, n));
    }

    fn cost_per_estimate(&self) -> usize {
        self.batch
    }

    /// Terms tₖ = ∇log p(x_{Sₖ} | θ), weight N/n; with n = N the exact gradient and no terms.
    fn estimate_with_terms(
        &mut self,
        theta: &[f64],
        out: &mut [f64],
        moments: &mut TermMoments,
        rng: &mut ChainRng,
    ) -> BatchTerms {
        if let Some(full) = &mut self.full {
            full.grad_log_posterior(theta, out);
            return BatchTerms::EXACT;
        }
        out.fill(0.0);
        self.model.add_grad_log_prior(theta, out);
        let population = self.subsampler.len();
        let weight = population as f64 / self.batch as f64;
        let batch = self.subsampler.batch(self.batch, rng);
        self.model.add_grad_log_lik_terms(
            theta,
            None,
            batch,
            weight,
            out,
            moments,
            &mut self.scratch,
        );
        let (model, n) = (self.model, self.batch);
        self.subsampler
            .announce_blocks_ahead(|first| model.will_read(first, n));
        BatchTerms {
            rows: self.batch,
            weight,
            population,
        }
    }

    fn reuse_batch(&mut self, on: bool) {
        self.subsampler.reuse_batch(on);
    }
}
