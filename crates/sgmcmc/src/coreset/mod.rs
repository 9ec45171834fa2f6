//! Coreset MCMC (Chen & Campbell 2024; Chen, Huggins & Campbell 2024; reference §7): a weighted
//! subset of M data points whose weights are trained while the chains run, so that the coreset
//! posterior π_w approaches the full posterior π in KL divergence.
//!
//! - [`posterior`]: the [`Coreset`] (uniform or class-stratified construction, weights N/M) and
//!   the coreset posterior π_w of Eq. 1;
//! - [`gradient`]: the weight-gradient estimator of Eq. 4 ([`WeightGradient`]);
//! - [`optim`]: the [`WeightOptimiser`] seam with Hot DoG (Algorithm 2), ADAM and the paper's
//!   baselines DoG, DoWG, prodigy ADAM and D-Adaptation SGD (§7.6);
//! - [`hot_start`]: Algorithm 3, the test that the chains have reached stationarity before the
//!   weights start to move;
//! - [`kernel`]: the π_w-invariant Markov kernels ([`CoresetKernel`]);
//! - [`metric`]: the streaming average squared z-score ([`ZScoreTracker`]);
//! - [`slice`]: hit-and-run slice sampling with doubling (Neal 2003), the real-data kernel;
//! - [`mcmc`]: the loop that ties them together ([`run_coreset_mcmc`]).

pub mod gibbs;
pub mod gradient;
pub mod hot_start;
pub mod kernel;
pub mod mcmc;
pub mod metric;
pub mod optim;
pub mod posterior;
pub mod slice;

pub use gibbs::{GibbsError, SparseGibbs};
pub use gradient::{SubsampleScheme, WeightGradient};
pub use hot_start::{hot_start_median, hot_start_passes, hot_start_statistic};
pub use kernel::{
    CoresetKernel, ExactGaussianKernel, KernelError, SamplerKernel, SliceKernel, SparseGibbsKernel,
};
pub use mcmc::{
    BurnInPoint, CoresetCheckpoints, CoresetRun, CoresetSettings, HotStartSettings,
    run_coreset_mcmc,
};
pub use metric::ZScoreTracker;
pub use optim::{Adam, DAdaptSgd, Dog, Dowg, HotDog, OptimiserError, Prodigy, WeightOptimiser};
pub use posterior::{Coreset, CoresetPosterior, PosteriorWorkspace, weighted_log_lik};
pub use slice::{SliceCounters, SliceError, SliceSampler, SliceSettings};

/// Errors in coreset settings.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CoresetError {
    /// A setting out of range (M, S, K, reference dimensions, ...).
    #[error("invalid coreset setting: {0}")]
    Setting(String),
    /// A checkpoint that cannot be read back into this run.
    #[error("coreset checkpoint: {0}")]
    Checkpoint(String),
}
