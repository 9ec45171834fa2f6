//! # sgmcmc
//!
//! Stochastic-gradient MCMC for Bayesian inference on large data sets.
//!
//! The crate is organised along the concepts of the field (see `ARCHITECTURE.md`):
//! [`model`] (prior + likelihood over N data points), [`data`] (zero-copy data sets and
//! loaders), [`estimator`] (unbiased score estimates), [`sampler`] (one iteration of a scheme),
//! [`runner`] (the shared loop: budgets, chains, storage), [`diagnostics`] (R-hat, ESS),
//! [`optim`] (the MAP), [`io`] (draw sinks and summaries), [`stein`] (KSD and FSSD sample
//! quality) and [`config`] (the TOML run file).
#![warn(missing_docs)]

pub mod config;
pub mod coreset;
pub mod cpu;
pub mod data;
pub mod diagnostics;
pub mod estimator;
pub mod io;
pub mod mh;
pub mod model;
pub mod moments;
pub mod optim;
pub mod pipeline;
pub mod reference;
pub mod rng;
pub mod runner;
pub mod sampler;
pub mod settings;
pub mod stein;
pub mod tuning;
