//! SVRG estimator (reference §3.3; Dubey et al. 2016): control variates whose centre θ̂ is moved
//! to the current θ every r calls, with G = ∇log π(θ̂) recomputed on the full data.

use super::{
    BatchSize, BatchTerms, ControlVariates, EstimatorError, FullDataEvaluator, GradientEstimator,
};
use crate::model::{Model, TermMoments};
use crate::rng::ChainRng;

/// Stochastic variance-reduced gradient. Calls are numbered i = 0, 1, 2, … (since construction
/// or the last [`GradientEstimator::restart`]); at calls with i mod r = 0 the centre becomes θ,
/// G is recomputed with one full pass, and the estimate is G itself (bit for bit, no minibatch
/// drawn). Other calls return G + [ĝ_S(θ) − ĝ_S(θ̂)] with one shared fresh minibatch S, computed
/// as in [`super::ControlVariates`] (prior difference included).
pub struct Svrg<'m> {
    cv: ControlVariates<'m>,
    update_rate: usize,
    calls: usize,
    full_passes: usize,
    passes_at_restart: usize,
    full: FullDataEvaluator<'m>,
}

impl<'m> Svrg<'m> {
    /// SVRG with batch size n and update rate r (`None`: ⌈N/n⌉, one epoch of minibatches).
    /// Errors if the batch size is invalid or r = 0.
    pub fn new(
        model: &'m dyn Model,
        batch: BatchSize,
        update_rate: Option<usize>,
    ) -> Result<Self, EstimatorError> {
        let cv = ControlVariates::uncentred(model, batch)?;
        let update_rate = match update_rate {
            None => model.num_data().div_ceil(cv.batch_size()),
            Some(0) => return Err(EstimatorError::BadUpdateRate(0)),
            Some(r) => r,
        };
        Ok(Self {
            cv,
            update_rate,
            calls: 0,
            full_passes: 0,
            passes_at_restart: 0,
            full: FullDataEvaluator::new(model),
        })
    }

    /// The resolved batch size n.
    pub fn batch_size(&self) -> usize {
        self.cv.batch_size()
    }

    /// The update rate r (calls between centre refreshes).
    pub fn update_rate(&self) -> usize {
        self.update_rate
    }

    /// Full-data passes made so far (one per refresh; never reset).
    pub fn full_passes(&self) -> usize {
        self.full_passes
    }

    /// Count the call; on a refresh call move the centre to θ, write G into `out` and return
    /// true.
    #[inline]
    fn refresh_if_due(&mut self, theta: &[f64], out: &mut [f64]) -> bool {
        let refresh = self.calls.is_multiple_of(self.update_rate);
        self.calls += 1;
        if refresh {
            self.cv.recentre(theta, &mut self.full);
            self.full_passes += 1;
            out.copy_from_slice(self.cv.centre_score());
        }
        refresh
    }

    /// The current centre θ̂ (zeros before the first call).
    pub fn centre(&self) -> &[f64] {
        self.cv.centre()
    }

    /// Draw minibatches with replacement (`minibatch_with_replacement`, SGMCMCJax).
    pub fn with_replacement(mut self, on: bool) -> Self {
        self.cv = self.cv.with_replacement(on);
        self
    }

    /// Draw minibatches by `scheme` ([`super::MinibatchScheme`]; contiguous blocks read the
    /// rows at bandwidth).
    pub fn with_scheme(mut self, scheme: super::MinibatchScheme) -> Self {
        self.cv = self.cv.with_scheme(scheme);
        self
    }
}

crate::persist_fields!(Svrg<'_> {
    cv,
    calls,
    full_passes,
    passes_at_restart
});

impl GradientEstimator for Svrg<'_> {
    crate::checkpoint::state_through_persist!();

    /// At calls i ≡ 0 (mod r) the centre moves to θ and the estimate is the full-data score G
    /// itself (bit for bit); otherwise it is the control-variate estimate about the centre.
    #[inline]
    fn estimate(&mut self, theta: &[f64], out: &mut [f64], rng: &mut ChainRng) {
        if !self.refresh_if_due(theta, out) {
            self.cv.estimate(theta, out, rng);
        }
    }

    /// As [`ControlVariates`]; a refresh call is exact and reports no terms.
    fn estimate_with_terms(
        &mut self,
        theta: &[f64],
        out: &mut [f64],
        moments: &mut TermMoments,
        rng: &mut ChainRng,
    ) -> BatchTerms {
        if self.refresh_if_due(theta, out) {
            BatchTerms::EXACT
        } else {
            self.cv.estimate_with_terms(theta, out, moments, rng)
        }
    }

    /// 2n per call (reference §5.3); in addition every r-th call (a refresh) spends one full
    /// pass of N per-datum gradients instead.
    fn cost_per_estimate(&self) -> usize {
        self.cv.cost_per_estimate()
    }

    /// Reset the call counter: the next call refreshes the centre at its θ.
    fn restart(&mut self, _theta: &[f64]) {
        self.calls = 0;
        self.passes_at_restart = self.full_passes;
    }

    /// N per full pass (centre refresh) since the last restart.
    fn extra_evaluations_since_restart(&self) -> u64 {
        ((self.full_passes - self.passes_at_restart) * self.cv.num_data()) as u64
    }

    /// As for control variates; refresh calls draw no minibatch, so a reuse window's batch is
    /// drawn by its first non-refresh call.
    fn reuse_batch(&mut self, on: bool) {
        self.cv.reuse_batch(on);
    }
}
