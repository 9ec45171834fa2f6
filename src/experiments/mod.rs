//! Reproductions of the papers' experiments, as library functions that the CLI's
//! `sgmcmc experiment` runs and the tests check (results in `docs/experiments/`).

pub mod coreset_fig1;
pub mod mamba;
pub mod mh_mixture;
pub mod mh_mnist;
pub mod normal_gamma;

/// The logistic-regression experiment under its former path.
pub use mamba::logreg as mamba_logreg;
