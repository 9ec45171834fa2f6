//! Control-variate estimator (reference §3.2; Baker, Fearnhead, Fox & Nemeth 2019):
//! ĝ(θ) = G + [ĝ_S(θ) − ĝ_S(θ̂)], G = ∇log π(θ̂) computed once, S one fresh uniform minibatch
//! shared by both standard estimates ĝ_S. Written out:
//! ĝ(θ) = ∇log p(θ) + L̂ + (N/n)·[Σ_{i∈S} ∇log p(xᵢ | θ) − Σ_{i∈S} ∇log p(xᵢ | θ̂)], with
//! L̂ = G − ∇log p(θ̂) the full-data likelihood score at θ̂.
//!
//! The prior terms of the bracket, ∇log p(θ) − ∇log p(θ̂), do **not** cancel unless the prior
//! is flat (§3.2 says they do); dropping them biases the estimate by exactly that difference.
//! They cost one O(D) prior-gradient call per estimate.

use super::{
    BatchSize, BatchTerms, EstimatorError, FullDataEvaluator, GradientEstimator, Subsampler,
};
use crate::model::{Model, Scratch, TermMoments};
use crate::rng::ChainRng;

/// Score estimate with a fixed centre θ̂ (normally the MAP). Unbiased for any θ̂; its variance is
/// O(‖θ − θ̂‖²) for smooth log-likelihoods. With n = N the whole data set is used in its stored
/// order (no random numbers drawn) and the estimate is the full gradient up to rounding.
pub struct ControlVariates<'m> {
    model: &'m dyn Model,
    batch: usize,
    centre: Vec<f64>,
    centre_score: Vec<f64>,
    centre_lik_score: Vec<f64>,
    subsampler: Subsampler,
    scratch: Scratch,
}

impl<'m> ControlVariates<'m> {
    /// Control variates about `centre`: one full pass computes G = ∇log π(θ̂) here. Errors if the
    /// batch size is invalid or `centre` does not have the model's dimension.
    pub fn new(
        model: &'m dyn Model,
        batch: BatchSize,
        centre: &[f64],
    ) -> Result<Self, EstimatorError> {
        check_dim(model, centre.len())?;
        let mut cv = Self::uncentred(model, batch)?;
        cv.recentre(centre, &mut FullDataEvaluator::new(model));
        Ok(cv)
    }

    /// Control variates about `centre` with its full-data score G = ∇log π(θ̂) already known
    /// (e.g. shared by many estimators with one centre, as MAMBA's arms are): no pass over the
    /// data. Errors as [`Self::new`], or if `centre_score` does not have the model's dimension.
    pub fn with_centre_score(
        model: &'m dyn Model,
        batch: BatchSize,
        centre: &[f64],
        centre_score: &[f64],
    ) -> Result<Self, EstimatorError> {
        check_dim(model, centre.len())?;
        check_dim(model, centre_score.len())?;
        let mut cv = Self::uncentred(model, batch)?;
        cv.centre.copy_from_slice(centre);
        cv.centre_score.copy_from_slice(centre_score);
        likelihood_part(model, centre, centre_score, &mut cv.centre_lik_score);
        Ok(cv)
    }

    /// The estimator with θ̂ = 0 and no score computed yet: [`Self::recentre`] must run before
    /// the first estimate (SVRG does that on its first call).
    pub(super) fn uncentred(
        model: &'m dyn Model,
        batch: BatchSize,
    ) -> Result<Self, EstimatorError> {
        let n_data = model.num_data();
        let batch = batch.resolve(n_data)?;
        Ok(Self {
            model,
            batch,
            centre: vec![0.0; model.dim()],
            centre_score: vec![0.0; model.dim()],
            centre_lik_score: vec![0.0; model.dim()],
            subsampler: Subsampler::new(n_data),
            scratch: Scratch::new(),
        })
    }

    /// Move the centre to `theta` and recompute G = ∇log π(θ̂) with one full pass of `full`.
    pub(super) fn recentre(&mut self, theta: &[f64], full: &mut FullDataEvaluator<'_>) {
        self.centre.copy_from_slice(theta);
        full.grad_log_posterior(theta, &mut self.centre_score);
        likelihood_part(
            self.model,
            theta,
            &self.centre_score,
            &mut self.centre_lik_score,
        );
    }

    /// The resolved batch size n.
    pub fn batch_size(&self) -> usize {
        self.batch
    }

    /// The number of data points N.
    pub fn num_data(&self) -> usize {
        self.model.num_data()
    }

    /// The centre θ̂.
    pub fn centre(&self) -> &[f64] {
        &self.centre
    }

    /// The full-data score at the centre, G = ∇log π(θ̂).
    pub fn centre_score(&self) -> &[f64] {
        &self.centre_score
    }

    /// Draw minibatches with replacement (`minibatch_with_replacement`, SGMCMCJax; see
    /// [`Subsampler::set_with_replacement`]).
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

crate::persist_fields!(ControlVariates<'_> {
    centre,
    centre_score,
    centre_lik_score,
    subsampler
});

impl GradientEstimator for ControlVariates<'_> {
    crate::checkpoint::state_through_persist!();

    #[inline]
    fn estimate(&mut self, theta: &[f64], out: &mut [f64], rng: &mut ChainRng) {
        out.copy_from_slice(&self.centre_lik_score);
        let batch = self.subsampler.batch(self.batch, rng);
        // ∇log p(θ) + (N/n)·[Σ_{i∈batch} ∇log p(xᵢ | θ) − Σ_{i∈batch} ∇log p(xᵢ | θ̂)]: two
        // weighted passes over the same minibatch, no allocation.
        let weight = self.model.num_data() as f64 / batch.len() as f64;
        self.model.add_grad_estimate(
            theta,
            Some(&self.centre),
            batch,
            weight,
            out,
            &mut self.scratch,
        );
        let (model, n) = (self.model, self.batch);
        self.subsampler
            .announce_blocks_ahead(|first| model.will_read(first, n));
    }

    /// 2n: n per-datum gradients at θ and n at θ̂ (reference §5.3).
    fn cost_per_estimate(&self) -> usize {
        2 * self.batch
    }

    /// Terms tₖ = ∇log p(x_{Sₖ} | θ) − ∇log p(x_{Sₖ} | θ̂), weight N/n; with n = N the whole
    /// data set is used and the estimate is exact, so no terms are passed.
    fn estimate_with_terms(
        &mut self,
        theta: &[f64],
        out: &mut [f64],
        moments: &mut TermMoments,
        rng: &mut ChainRng,
    ) -> BatchTerms {
        let population = self.subsampler.len();
        if self.batch == population {
            self.estimate(theta, out, rng);
            return BatchTerms::EXACT;
        }
        out.copy_from_slice(&self.centre_lik_score);
        self.model.add_grad_log_prior(theta, out);
        let batch = self.subsampler.batch(self.batch, rng);
        let weight = population as f64 / self.batch as f64;
        self.model.add_grad_log_lik_terms(
            theta,
            Some(&self.centre),
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

/// The dimension check shared by the control-variate estimators.
fn check_dim(model: &dyn Model, got: usize) -> Result<(), EstimatorError> {
    if got == model.dim() {
        Ok(())
    } else {
        Err(EstimatorError::DimensionMismatch {
            expected: model.dim(),
            got,
        })
    }
}

/// `lik = score − ∇log p(centre)`: the likelihood part of a full-data score.
fn likelihood_part(model: &dyn Model, centre: &[f64], score: &[f64], lik: &mut [f64]) {
    lik.fill(0.0);
    model.add_grad_log_prior(centre, lik);
    lik.iter_mut().zip(score).for_each(|(l, s)| *l = s - *l);
}
