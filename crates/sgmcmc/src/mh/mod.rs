//! Minibatch Metropolis–Hastings (reference §6).
//!
//! The Barker test of Seita, Pan, Chen & Canny decides with Δ* + X_nc + X_c > 0, where the
//! minibatch noise plus X_nc ~ N(0, σ² − s²) plays a Gaussian N(0, σ²) and X_c is drawn from the
//! correction distribution C_σ that turns that Gaussian into a standard logistic variable.
//! - [`correction`] builds C_σ (ridge least squares §6.3(a), the workshop's FFT bank §6.3(b))
//!   and samples it by inverse CDF (§6.4);
//! - [`ratio`]: per-datum log-likelihood ratios on a growing minibatch drawn without replacement;
//! - [`test`]: the minibatch Barker test, the workshop's variant (K minibatches, skip at
//!   s ≥ 1.2, the bank), Austerity's sequential t-test, the exact full-data Barker and
//!   Metropolis tests;
//! - [`proposal`]: random walk, Langevin and Hamiltonian proposals with their density ratios;
//! - [`kernel`]: [`MhKernel`], proposal + test as a chain kernel of its own
//!   ([`crate::sampler::ChainKernel`]; only gradient proposals hold an estimator), with outcome
//!   counts for the run summary.

pub mod correction;
pub mod kernel;
pub mod proposal;
pub mod ratio;
pub mod test;

pub use crate::sampler::MhStatistics;
pub use correction::{CorrectionBank, CorrectionTable, correction_table};
pub use kernel::{AcceptanceTest, MhKernel};
pub use proposal::Proposal;
pub use ratio::LikelihoodRatios;
pub use test::{
    AusterityTest, BarkerTest, Decision, ExactRule, ExactTest, FailurePolicy, Outcome,
    VarianceEstimate, WorkshopTest, corrected_barker_decision,
};
