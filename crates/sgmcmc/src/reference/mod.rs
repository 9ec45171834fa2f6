//! Full-data reference posteriors (reference §5.4, issue 4): moments of π from a long run of an
//! exact sampler, the yardstick for the accuracy metrics of SG-MCMC draws.
//!
//! `run_nuts` (feature `nuts`, on by default) drives nuts-rs's NUTS over the full data and
//! returns [`ReferenceMoments`] (the file `sgmcmc reference` writes) with their ESS and R-hat;
//! [`laplace`] is the Gaussian approximation at the MAP it can be checked against.

mod laplace;
#[cfg(feature = "nuts")]
mod nuts;

pub use crate::moments::{COVARIANCE_MAX_DIM, ReferenceError, ReferenceMoments};
pub use laplace::{
    LaplaceApproximation, LaplaceError, diagonal_curvature, hessian_log_posterior, laplace,
    laplace_at,
};
#[cfg(feature = "nuts")]
pub use nuts::{
    FinishedChains, LAPLACE_INIT_MAX_DIM, NUTS_RS_VERSION, NutsChainReport, NutsError,
    NutsReference, NutsSettings, run_nuts, run_nuts_resumable, run_nuts_until,
};
