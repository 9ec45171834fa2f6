//! The model seam: a prior and a likelihood over N conditionally independent data points.
//!
//! Conventions (reference §1.1): the posterior is π(θ) ∝ p(θ)·Πᵢ p(xᵢ | θ); every method
//! returns log-densities and gradients of log-densities (scores), never of the potential U.
//! Data points are addressed by their index `i ∈ 0..num_data()` as a [`DataIndex`].
//!
//! Hot calls write into caller-provided buffers and get a reusable [`Scratch`], so a sampler
//! iteration does not allocate.

mod bnn;
mod bradley_terry;
pub mod constraint;
mod gaussian;
mod glm;
mod linear;
mod logistic;
pub mod mixture;
mod normal_gamma;
mod normal_mixture;
mod pmf;
mod poisson;
mod predictive;
mod prior;
mod row_kernels;
pub mod sparse_regression;
mod terms;
pub(crate) mod vector_math;

pub use bnn::{BNN_BLOCK, BNN_DEFAULT_HIDDEN, Bnn};
pub use bradley_terry::BradleyTerry;
pub use gaussian::GaussianModel;
pub use glm::{Family, Glm};
pub use linear::{LinearRegression, NoiseModel, Normal};
pub use logistic::{Bernoulli, LogisticRegression};
pub use mixture::GaussianMixtureModel;
pub use normal_gamma::{NormalGammaModel, NormalGammaPosterior};
pub use normal_mixture::{NormalMixture, NormalMixturePriors};
pub use pmf::{Pmf, PmfSettings};
pub use poisson::{Poisson, PoissonLink, PoissonRegression};
pub use predictive::{Predictive, PredictiveFamily, PredictiveTask};
pub use prior::{CauchyPrior, CoefficientPrior, NormalPrior, ParameterPrior, Support};
pub use sparse_regression::{SparseRegression, SparseRegressionSettings};
pub use terms::{CovarianceShape, TermMoments};

use crate::rng::ChainRng;

/// Index of a data point. 32 bits: half the memory traffic of `usize` in index buffers, and
/// data sets up to 4.29 billion rows.
pub type DataIndex = u32;

/// Rows per block in [`Model::add_grad_log_lik_terms`]'s default: two blocks of 512 rows of
/// D ≈ 10 doubles (80 KB) stay in L2.
pub const TERM_BLOCK: usize = 512;

/// Reusable workspace handed to model calls; grows on first use and is then reused.
#[derive(Debug, Default, Clone)]
pub struct Scratch {
    buf: Vec<f64>,
}

impl Scratch {
    /// An empty workspace.
    pub fn new() -> Self {
        Self::default()
    }

    /// A zeroed-or-stale slice of length `len` (contents unspecified); allocates only when
    /// `len` exceeds every earlier request.
    pub fn get(&mut self, len: usize) -> &mut [f64] {
        if self.buf.len() < len {
            self.buf.resize(len, 0.0);
        }
        &mut self.buf[..len]
    }
}

/// Errors a model reports: construction from data, or an unsupported capability.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The data do not fit the model (label outside the support, wrong shape, ...).
    #[error(transparent)]
    Data(#[from] crate::data::DataError),
    /// A setting of the model is invalid.
    #[error("invalid model setting: {0}")]
    Setting(String),
    /// The model does not offer this capability.
    #[error("model `{model}` does not support {what}")]
    Unsupported {
        /// Model name.
        model: &'static str,
        /// The missing capability.
        what: &'static str,
    },
}

/// A Bayesian model with N conditionally independent data points.
///
/// Required: dimension, data count, the log prior and its gradient, and per-batch likelihood
/// terms. The per-datum methods are needed by control variates, CCAdL's noise covariance, the
/// minibatch MH test and coreset MCMC; the default batch methods are built from them, so a
/// custom model may implement only the per-datum ones (and override the batch ones for speed).
pub trait Model: Send + Sync {
    /// Short name used in messages and output metadata.
    fn name(&self) -> &'static str;

    /// Number of parameters D.
    fn dim(&self) -> usize;

    /// Number of data points N.
    fn num_data(&self) -> usize;

    /// Names of the D parameters, in order (used in summaries and output files).
    fn parameter_names(&self) -> Vec<String> {
        (0..self.dim()).map(|j| format!("theta[{j}]")).collect()
    }

    /// Whether some parameters are constrained (σ > 0, ordered means, a probability) and
    /// sampled on an unconstrained scale, so that [`Model::constrain`] is not the identity.
    fn is_constrained(&self) -> bool {
        false
    }

    /// x = c(θ): the parameters on the scale the model states them (the scale of
    /// [`Model::parameter_names`], of draws, summaries and reference moments) from the
    /// unconstrained θ every other method takes (`model::constraint`). The identity by default.
    fn constrain(&self, theta: &[f64], out: &mut [f64]) {
        out.copy_from_slice(theta);
    }

    /// θ = c⁻¹(x), the inverse of [`Model::constrain`] (an initial point or earlier draws given
    /// on the constrained scale); an error names a value outside its parameter's range. A copy
    /// by default.
    fn unconstrain(&self, x: &[f64], out: &mut [f64]) -> Result<(), ModelError> {
        out.copy_from_slice(x);
        Ok(())
    }

    /// log p(θ), up to a constant.
    fn log_prior(&self, theta: &[f64]) -> f64;

    /// `grad += ∇ log p(θ)`.
    fn add_grad_log_prior(&self, theta: &[f64], grad: &mut [f64]);

    /// `out[k] = log p(x_{batch[k]} | θ)`.
    fn log_lik_each(
        &self,
        theta: &[f64],
        batch: &[DataIndex],
        out: &mut [f64],
        scratch: &mut Scratch,
    );

    /// Row-major `batch.len() × D`: row k is `∇ log p(x_{batch[k]} | θ)`.
    fn grad_log_lik_each(
        &self,
        theta: &[f64],
        batch: &[DataIndex],
        out: &mut [f64],
        scratch: &mut Scratch,
    );

    /// `grad += weight · Σ_{i∈batch} ∇ log p(xᵢ | θ)`. The weight carries the N/n scaling of
    /// minibatch estimates (and signs for control variates) without a second pass.
    fn add_grad_log_lik(
        &self,
        theta: &[f64],
        batch: &[DataIndex],
        weight: f64,
        grad: &mut [f64],
        scratch: &mut Scratch,
    ) {
        let d = self.dim();
        let mut buf = std::mem::take(&mut scratch.buf);
        if buf.len() < batch.len() * d {
            buf.resize(batch.len() * d, 0.0);
        }
        self.grad_log_lik_each(theta, batch, &mut buf[..batch.len() * d], scratch);
        for row in buf[..batch.len() * d].chunks_exact(d) {
            for (g, r) in grad.iter_mut().zip(row) {
                *g += weight * r;
            }
        }
        scratch.buf = buf;
    }

    /// `grads[p] += Σ_{i∈batch} ∇log p(xᵢ | θ_p)` for every draw θ_p of a block (`thetas` and
    /// `grads` row-major P × D): the likelihood part of full-batch scores at many draws. The
    /// default makes one [`Model::add_grad_log_lik`] call per draw; a model whose likelihood
    /// goes through a matrix product overrides it to read each row once for the whole block
    /// (the GLMs: Z = XΘᵀ, then G += RᵀX with R = ∂log p/∂Z, two GEMMs per tile of rows).
    fn add_grad_log_lik_draws(
        &self,
        thetas: &[f64],
        batch: &[DataIndex],
        grads: &mut [f64],
        scratch: &mut Scratch,
    ) {
        add_grad_log_lik_per_draw(self, thetas, batch, grads, scratch);
    }

    /// `Σ_{i∈batch} log p(xᵢ | θ)` and `grad += weight · Σ ∇ log p(xᵢ | θ)` in one pass.
    fn log_lik_and_add_grad(
        &self,
        theta: &[f64],
        batch: &[DataIndex],
        weight: f64,
        grad: &mut [f64],
        scratch: &mut Scratch,
    ) -> f64 {
        self.add_grad_log_lik(theta, batch, weight, grad, scratch);
        let mut buf = std::mem::take(&mut scratch.buf);
        if buf.len() < batch.len() {
            buf.resize(batch.len(), 0.0);
        }
        self.log_lik_each(theta, batch, &mut buf[..batch.len()], scratch);
        let total = buf[..batch.len()].iter().sum();
        scratch.buf = buf;
        total
    }

    /// `grad += ∇log p(θ) + weight·Σ_{i∈batch} ∇log p(xᵢ | θ)`, and `− weight·Σ ∇log p(xᵢ | θ̂)`
    /// when `centre` is Some(θ̂): the model evaluations of one minibatch (or control-variate)
    /// estimate in one call. The default makes them one after the other, in that order; a model
    /// whose evaluations are remote (the Python package's callbacks) overrides it to make one
    /// round trip.
    fn add_grad_estimate(
        &self,
        theta: &[f64],
        centre: Option<&[f64]>,
        batch: &[DataIndex],
        weight: f64,
        grad: &mut [f64],
        scratch: &mut Scratch,
    ) {
        self.add_grad_log_prior(theta, grad);
        self.add_grad_log_lik(theta, batch, weight, grad, scratch);
        if let Some(centre) = centre {
            self.add_grad_log_lik(centre, batch, -weight, grad, scratch);
        }
    }

    /// `grad += weight·Σₖ tₖ`, each term tₖ also added to `moments` (CCAdL's noise covariance),
    /// where tₖ = `∇log p(x_{batch[k]} | θ)`, minus `∇log p(x_{batch[k]} | θ̂)` when `centre` is
    /// Some(θ̂) (the control-variate difference). The default computes the terms with
    /// [`Model::grad_log_lik_each`] in blocks of [`TERM_BLOCK`] rows; a model with a row loop of
    /// its own should override it with one fused pass that never writes the terms out (the GLMs
    /// do).
    #[allow(clippy::too_many_arguments)]
    fn add_grad_log_lik_terms(
        &self,
        theta: &[f64],
        centre: Option<&[f64]>,
        batch: &[DataIndex],
        weight: f64,
        grad: &mut [f64],
        moments: &mut TermMoments,
        scratch: &mut Scratch,
    ) {
        let d = self.dim();
        let mut buf = std::mem::take(&mut scratch.buf);
        let block_len = TERM_BLOCK.min(batch.len()) * d;
        if buf.len() < 2 * block_len {
            buf.resize(2 * block_len, 0.0);
        }
        for block in batch.chunks(TERM_BLOCK) {
            let (rows, at_centre) = buf.split_at_mut(block.len() * d);
            self.grad_log_lik_each(theta, block, rows, scratch);
            if let Some(centre) = centre {
                let at_centre = &mut at_centre[..rows.len()];
                self.grad_log_lik_each(centre, block, at_centre, scratch);
                rows.iter_mut()
                    .zip(at_centre.iter())
                    .for_each(|(t, c)| *t -= c);
            }
            for t in rows.chunks_exact(d) {
                grad.iter_mut().zip(t).for_each(|(g, t)| *g += weight * t);
                moments.add(t);
            }
        }
        scratch.buf = buf;
    }

    /// A hint that rows `first`, `first + 1`, …, `first + n − 1` (mod N) will be read soon: a
    /// block minibatch drawn ahead (`estimator::Subsampler::announce_blocks_ahead`). A model
    /// whose data is a memory-mapped file starts reading them from disk
    /// (`data::Matrix::advise_will_read`), so that several blocks are in flight while it
    /// computes; the default ignores it, and it never changes a result.
    fn will_read(&self, _first: usize, _n: usize) {}

    /// The point the MAP search (L-BFGS) starts from. Zeros by default; a model for which
    /// θ = 0 is a stationary point that is not the mode overrides it with a fixed small point
    /// (matrix factorisation: ∇_U vanishes at V = 0; a network whose hidden units are all
    /// equal never breaks their symmetry).
    fn map_start(&self) -> Vec<f64> {
        vec![0.0; self.dim()]
    }

    /// A draw from the prior into `out` (used by `init = "prior"`).
    fn sample_prior(&self, _rng: &mut ChainRng, _out: &mut [f64]) -> Result<(), ModelError> {
        Err(ModelError::Unsupported {
            model: self.name(),
            what: "drawing from the prior",
        })
    }
}

/// [`Model::add_grad_log_lik_draws`] one draw at a time: one [`Model::add_grad_log_lik`] call
/// per row of `thetas` (the default, and the GLMs' route for scattered batches).
pub(crate) fn add_grad_log_lik_per_draw(
    model: &(impl Model + ?Sized),
    thetas: &[f64],
    batch: &[DataIndex],
    grads: &mut [f64],
    scratch: &mut Scratch,
) {
    let d = model.dim();
    for (theta, grad) in thetas.chunks_exact(d).zip(grads.chunks_exact_mut(d)) {
        model.add_grad_log_lik(theta, batch, 1.0, grad, scratch);
    }
}

/// Check that θ has the model's dimension (a programming error otherwise).
#[inline]
pub(crate) fn debug_check_dim(model: &(impl Model + ?Sized), theta: &[f64]) {
    debug_assert_eq!(
        theta.len(),
        model.dim(),
        "θ has the wrong dimension for {}",
        model.name()
    );
}
