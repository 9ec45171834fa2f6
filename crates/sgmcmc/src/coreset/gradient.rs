//! The weight-gradient estimator of Eq. 4 (reference §7.2).
//!
//! With chain states θ₁..θ_K and a subsample S_t of size S, every log-likelihood is centred over
//! the chains, ℓ̄ₙ(θₖ) = ℓₙ(θₖ) − (1/K)·Σⱼ ℓₙ(θⱼ), and
//!
//! ```text
//! ĝ = G·(Gᵀw − c)/(K − 1)
//! G[m, k] = ℓ̄_{cₘ}(θₖ)                    (M × K)
//! c[k]    = centred (N/S)·Σ_{s∈S_t} ℓ_s(θₖ)
//! ```
//!
//! the sample covariance (divisor K − 1) behind ∇_w KL(π_w ‖ π) = Cov_{π_w}[ℓ_coreset, Σwℓ − Σℓ]
//! (Eq. 3). Cost: (M + S)·K log-likelihood evaluations.

use super::CoresetError;
use crate::estimator::Subsampler;
use crate::model::{DataIndex, Model, Scratch};
use crate::rng::ChainRng;

/// How the subsample S_t of the full-data term is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SubsampleScheme {
    /// Uniformly without replacement, fresh at every call (the paper; default).
    #[default]
    Uniform,
    /// The reference code's deterministic cyclic scan in file order (compatibility option
    /// `coreset_cyclic_scan`): the next S points from a cursor, wrapping around at N.
    CyclicScan,
}

/// Eq. 4 with its buffers: no allocation per call after construction.
#[derive(Debug, Clone)]
pub struct WeightGradient {
    n_data: usize,
    subsample_size: usize,
    scheme: SubsampleScheme,
    newton_correction: bool,
    subsampler: Subsampler,
    cursor: usize,
    scan: Vec<DataIndex>,
    /// G, column k = chain k (M values each).
    centred: Vec<f64>,
    full: Vec<f64>,
    values: Vec<f64>,
    scratch: Scratch,
}

// The subsampler (its stream position, a permutation) and the cyclic scan's cursor carry over;
// the rest is scratch.
crate::persist_fields!(WeightGradient { subsampler, cursor });

impl WeightGradient {
    /// An estimator for a model with `n_data` points and subsamples of `subsample_size`.
    pub fn new(
        n_data: usize,
        subsample_size: usize,
        scheme: SubsampleScheme,
    ) -> Result<Self, CoresetError> {
        if subsample_size == 0 || subsample_size > n_data {
            return Err(CoresetError::Setting(format!(
                "subsample size S = {subsample_size} must lie in 1..={n_data} (N)"
            )));
        }
        Ok(Self {
            n_data,
            subsample_size,
            scheme,
            newton_correction: false,
            subsampler: Subsampler::new(n_data),
            cursor: 0,
            scan: Vec::with_capacity(subsample_size),
            centred: Vec::new(),
            full: Vec::new(),
            values: Vec::new(),
            scratch: Scratch::new(),
        })
    }

    /// Divide ĝₘ by Σₖ G²ₘₖ/(K − 1) (compatibility option `coreset_newton_correction`, off in
    /// every experiment of the papers); coordinates with Σₖ G²ₘₖ = 0 are left as they are.
    pub fn with_newton_correction(mut self) -> Self {
        self.newton_correction = true;
        self
    }

    /// Draw this call's subsample into `self.scan` (uniform, or the next block of the cyclic
    /// scan).
    fn draw_subsample(&mut self, rng: &mut ChainRng) {
        self.scan.clear();
        let (n, s) = (self.n_data, self.subsample_size);
        match self.scheme {
            SubsampleScheme::Uniform => self.scan.extend_from_slice(self.subsampler.draw(s, rng)),
            SubsampleScheme::CyclicScan => {
                let tail = (n - self.cursor).min(s);
                self.scan
                    .extend((self.cursor..self.cursor + tail).map(|i| i as DataIndex));
                self.scan.extend((0..s - tail).map(|i| i as DataIndex));
                self.cursor = if tail < s {
                    s - tail
                } else {
                    (self.cursor + s) % n
                };
            }
        }
    }

    /// Write ĝ into `out` (M values) for the coreset `points` with `weights` and the chain
    /// `states` (K ≥ 2), drawing the subsample from `rng`.
    pub fn estimate<'s>(
        &mut self,
        model: &dyn Model,
        points: &[DataIndex],
        weights: &[f64],
        states: impl ExactSizeIterator<Item = &'s [f64]> + Clone,
        rng: &mut ChainRng,
        out: &mut [f64],
    ) {
        let (m, k) = (points.len(), states.len());
        debug_assert!(k >= 2 && weights.len() == m && out.len() == m);
        if self.centred.len() < m * k {
            self.centred.resize(m * k, 0.0);
        }
        self.full.resize(k, 0.0);
        for (chain, theta) in states.clone().enumerate() {
            let column = &mut self.centred[chain * m..(chain + 1) * m];
            model.log_lik_each(theta, points, column, &mut self.scratch);
        }
        let scale = self.n_data as f64 / self.subsample_size as f64;
        let s = self.subsample_size;
        if self.values.len() < s {
            self.values.resize(s, 0.0);
        }
        // One subsample for all chains, as in the paper and the reference.
        self.draw_subsample(rng);
        for (chain, theta) in states.enumerate() {
            let values = &mut self.values[..s];
            model.log_lik_each(theta, &self.scan, values, &mut self.scratch);
            self.full[chain] = scale * values.iter().sum::<f64>();
        }
        centre_over_chains(&mut self.centred[..m * k], m, k);
        let mean_full = self.full.iter().sum::<f64>() / k as f64;
        self.full.iter_mut().for_each(|c| *c -= mean_full);
        // h = Gᵀw − c, then ĝ = G·h/(K − 1).
        out.fill(0.0);
        for chain in 0..k {
            let column = &self.centred[chain * m..(chain + 1) * m];
            let h = column.iter().zip(weights).map(|(g, w)| g * w).sum::<f64>() - self.full[chain];
            for (o, g) in out.iter_mut().zip(column) {
                *o += g * h;
            }
        }
        let divisor = (k - 1) as f64;
        for (i, o) in out.iter_mut().enumerate() {
            *o /= divisor;
            if self.newton_correction {
                let curvature = (0..k)
                    .map(|chain| self.centred[chain * m + i].powi(2))
                    .sum::<f64>()
                    / divisor;
                if curvature > 0.0 {
                    *o /= curvature;
                }
            }
        }
    }
}

/// Subtract from each row of the M × K matrix (stored column by column) its mean over columns.
fn centre_over_chains(g: &mut [f64], m: usize, k: usize) {
    for i in 0..m {
        let mean = (0..k).map(|c| g[c * m + i]).sum::<f64>() / k as f64;
        for c in 0..k {
            g[c * m + i] -= mean;
        }
    }
}
