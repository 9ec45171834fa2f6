//! # sgmcmc-experiments
//!
//! Reproductions of the papers' experiments and the benchmarks, as library functions that the
//! CLI's `sgmcmc experiment` and `sgmcmc bench` run and the tests check (results in
//! `docs/experiments/`), on top of the [`sgmcmc`] core. [`plot`] draws their figures.
#![warn(missing_docs)]

pub mod bench;
pub mod ccadl_mnist;
pub mod coreset_fig1;
mod held_out;
pub mod mamba;
pub mod mh_mixture;
pub mod mh_mnist;
pub mod normal_gamma;
pub mod plot;
pub mod posteriordb;
pub mod run_figure;
pub mod trial_store;

/// The logistic-regression experiment under its former path.
pub use mamba::logreg as mamba_logreg;
