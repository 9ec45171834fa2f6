//! MCMC convergence diagnostics after Vehtari, Gelman, Simpson, Carpenter & Bürkner (2021),
//! "Rank-normalization, folding, and localization: an improved R-hat for assessing
//! convergence of MCMC", matching ArviZ numerically.

pub mod accuracy;
mod autocorr;
mod ess;
mod rhat;
mod summary;
#[cfg(test)]
mod tests;

pub use autocorr::{autocorrelation, autocovariance, integrated_autocorr_time, mcse_mean};
pub use ess::{ess_bulk, ess_mean, ess_tail};
pub use rhat::rhat;
pub use summary::{ParameterSummary, quantile, summarize};
