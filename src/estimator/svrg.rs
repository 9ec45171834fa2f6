//! SVRG estimator (reference §3.3; Dubey et al. 2016): control variates whose centre θ̂ is moved
//! to the current θ every r calls, with G = ∇log π(θ̂) recomputed on the full data.

use super::control_variate::{add_correction, check_dim, draw_batch, likelihood_part};
use super::{BatchSize, EstimatorError, FullDataEvaluator, GradientEstimator, Subsampler};
use crate::model::{Model, Scratch};
use crate::rng::ChainRng;

/// Stochastic variance-reduced gradient. Calls are numbered i = 0, 1, 2, … (since construction
/// or the last [`GradientEstimator::restart`]); at calls with i mod r = 0 the centre becomes θ,
/// G is recomputed with one full pass, and the estimate is G itself (bit for bit, no minibatch
/// drawn). Other calls return G + [ĝ_S(θ) − ĝ_S(θ̂)] with one shared fresh minibatch S, computed
/// as in [`super::ControlVariates`] (prior difference included).
pub struct Svrg<'m> {
    model: &'m dyn Model,
    batch: usize,
    update_rate: usize,
    calls: usize,
    full_passes: usize,
    centre: Vec<f64>,
    centre_score: Vec<f64>,
    centre_lik_score: Vec<f64>,
    full: FullDataEvaluator<'m>,
    subsampler: Subsampler,
    scratch: Scratch,
}

impl<'m> Svrg<'m> {
    /// SVRG with batch size n and update rate r (`None`: ⌈N/n⌉, one epoch of minibatches).
    /// Errors if the batch size is invalid or r = 0.
    pub fn new(
        model: &'m dyn Model,
        batch: BatchSize,
        update_rate: Option<usize>,
    ) -> Result<Self, EstimatorError> {
        let n_data = model.num_data();
        let batch = batch.resolve(n_data)?;
        let update_rate = match update_rate {
            None => n_data.div_ceil(batch),
            Some(0) => return Err(EstimatorError::BadUpdateRate(0)),
            Some(r) => r,
        };
        Ok(Self {
            model,
            batch,
            update_rate,
            calls: 0,
            full_passes: 0,
            centre: vec![0.0; model.dim()],
            centre_score: vec![0.0; model.dim()],
            centre_lik_score: vec![0.0; model.dim()],
            full: FullDataEvaluator::new(model),
            subsampler: Subsampler::new(n_data),
            scratch: Scratch::new(),
        })
    }

    /// The resolved batch size n.
    pub fn batch_size(&self) -> usize {
        self.batch
    }

    /// The update rate r (calls between centre refreshes).
    pub fn update_rate(&self) -> usize {
        self.update_rate
    }

    /// Full-data passes made so far (one per refresh; never reset).
    pub fn full_passes(&self) -> usize {
        self.full_passes
    }

    /// The current centre θ̂ (zeros before the first call).
    pub fn centre(&self) -> &[f64] {
        &self.centre
    }
}

impl GradientEstimator for Svrg<'_> {
    #[inline]
    fn estimate(&mut self, theta: &[f64], out: &mut [f64], rng: &mut ChainRng) {
        debug_assert!(check_dim(self.model, theta.len()).is_ok());
        let refresh = self.calls.is_multiple_of(self.update_rate);
        self.calls += 1;
        if refresh {
            self.centre.copy_from_slice(theta);
            self.full.grad_log_posterior(theta, &mut self.centre_score);
            likelihood_part(
                self.model,
                theta,
                &self.centre_score,
                &mut self.centre_lik_score,
            );
            self.full_passes += 1;
            out.copy_from_slice(&self.centre_score);
            return;
        }
        out.copy_from_slice(&self.centre_lik_score);
        self.model.add_grad_log_prior(theta, out);
        let batch = draw_batch(&mut self.subsampler, self.batch, rng);
        add_correction(
            self.model,
            theta,
            &self.centre,
            batch,
            out,
            &mut self.scratch,
        );
    }

    /// 2n per call (reference §5.3); in addition every r-th call (a refresh) spends one full
    /// pass of N per-datum gradients instead.
    fn cost_per_estimate(&self) -> usize {
        2 * self.batch
    }

    /// Reset the call counter: the next call refreshes the centre at its θ.
    fn restart(&mut self, _theta: &[f64]) {
        self.calls = 0;
    }
}
