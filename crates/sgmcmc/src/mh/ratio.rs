//! Per-datum log-likelihood ratios on a growing minibatch (reference §6.1, §6.5).

use crate::estimator::Subsampler;
use crate::model::{Model, Scratch};
use crate::rng::ChainRng;

/// dᵢ = log p(xᵢ | θ') − log p(xᵢ | θ) for points drawn uniformly without replacement, in
/// increments that never repeat a point within one test (the batch grows by reusing the points
/// already drawn, reference §6.5). The tests scale dᵢ by N/T themselves.
///
/// Buffers grow to the largest batch seen and are then reused, so a run of tests allocates
/// only while its batches keep growing.
pub struct LikelihoodRatios<'m> {
    model: &'m dyn Model,
    points: Subsampler,
    /// Points drawn for the current test.
    used: usize,
    at_current: Vec<f64>,
    at_proposal: Vec<f64>,
    ratios: Vec<f64>,
    scratch: Scratch,
}

// The subsampler's state (its permutation or block stream) and the points drawn for the
// current test; the ratio buffers are workspace.
crate::persist_fields!(LikelihoodRatios<'_> { points, used });

impl<'m> LikelihoodRatios<'m> {
    /// Ratios over the data of `model`.
    pub fn new(model: &'m dyn Model) -> Self {
        Self {
            model,
            points: Subsampler::new(model.num_data()),
            used: 0,
            at_current: Vec::new(),
            at_proposal: Vec::new(),
            ratios: Vec::new(),
            scratch: Scratch::new(),
        }
    }

    /// Draw the points by `scheme`: uniformly (the default), or as one contiguous block per
    /// test from a random offset ([`crate::estimator::MinibatchScheme::Block`]).
    pub fn set_scheme(&mut self, scheme: crate::estimator::MinibatchScheme) {
        self.points.set_scheme(scheme);
    }

    /// Number of data points N.
    pub fn num_data(&self) -> usize {
        self.points.len()
    }

    /// Start a new test: forget the points drawn so far.
    pub fn begin(&mut self) {
        self.used = 0;
    }

    /// Points drawn since [`LikelihoodRatios::begin`].
    pub fn used(&self) -> usize {
        self.used
    }

    /// dᵢ for min(`n`, N − used) new points, drawn uniformly among those not yet used in this
    /// test.
    pub fn draw(
        &mut self,
        current: &[f64],
        proposal: &[f64],
        n: usize,
        rng: &mut ChainRng,
    ) -> &[f64] {
        let n = n.min(self.points.len() - self.used);
        if self.ratios.len() < n {
            self.ratios.resize(n, 0.0);
            self.at_current.resize(n, 0.0);
            self.at_proposal.resize(n, 0.0);
        }
        let batch = self.points.batch_more(self.used, n, rng);
        self.model
            .log_lik_each(current, batch, &mut self.at_current[..n], &mut self.scratch);
        self.model.log_lik_each(
            proposal,
            batch,
            &mut self.at_proposal[..n],
            &mut self.scratch,
        );
        for ((d, new), old) in self.ratios[..n]
            .iter_mut()
            .zip(&self.at_proposal[..n])
            .zip(&self.at_current[..n])
        {
            *d = new - old;
        }
        self.used += n;
        &self.ratios[..n]
    }
}

/// Running mean and sum of squared deviations (Welford), for Δ* and s² as the batch grows.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunningMoments {
    count: usize,
    mean: f64,
    m2: f64,
}

impl RunningMoments {
    /// Add one value.
    #[inline]
    pub fn push(&mut self, x: f64) {
        self.count += 1;
        let delta = x - self.mean;
        self.mean += delta / self.count as f64;
        self.m2 += delta * (x - self.mean);
    }

    /// Values added.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Their mean (0 for none).
    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// Sample variance with divisor n − 1 (+∞ for fewer than two values).
    pub fn sample_variance(&self) -> f64 {
        if self.count < 2 {
            f64::INFINITY
        } else {
            self.m2 / (self.count - 1) as f64
        }
    }

    /// Population variance with divisor n (+∞ for none).
    pub fn population_variance(&self) -> f64 {
        if self.count == 0 {
            f64::INFINITY
        } else {
            self.m2 / self.count as f64
        }
    }
}
