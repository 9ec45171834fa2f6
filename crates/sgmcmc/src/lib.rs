//! # sgmcmc
//!
//! Stochastic-gradient MCMC for Bayesian inference on large data sets.
//!
//! The crate is organised along the concepts of the field (see `ARCHITECTURE.md`):
//! [`model`] (prior + likelihood over N data points), [`data`] (zero-copy data sets and
//! loaders), [`estimator`] (unbiased score estimates), [`sampler`] (one iteration of a scheme),
//! [`runner`] (the shared loop: budgets, chains, storage), [`diagnostics`] (R-hat, ESS),
//! [`optim`] (the MAP), [`io`] (draw sinks and summaries), [`stein`] (KSD and FSSD sample
//! quality), [`tuning`] (MAMBA) and [`settings`] (typed settings of samplers and
//! estimators). The TOML run file and its pipeline live in the `sgmcmc-runfile` crate.
//!
//! ## A tuned sampler, without a file
//!
//! Find the MAP, let MAMBA choose SGLD's step for control-variate gradients within a budget of
//! per-datum gradient evaluations, and run the winner on two chains:
//!
//! ```
//! use sgmcmc::data::synthetic;
//! use sgmcmc::io::MemorySink;
//! use sgmcmc::model::{Bernoulli, Glm, Model, NormalPrior};
//! use sgmcmc::optim::{find_map, lbfgs::LbfgsOptions};
//! use sgmcmc::runner::{Budget, Chain, NoProgress, RunSettings, run};
//! use sgmcmc::settings::{EstimatorKind, EstimatorSettings, SamplerSettings};
//! use sgmcmc::tuning::{GridValues, MambaSettings, TuneBudget, TuneContext, TuneGrid, TuneScores};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let (data, _truth) = synthetic::logistic_regression(5_000, 3, 1);
//! let model = Glm::new(data, Bernoulli, NormalPrior::new(10.0)?, false)?;
//! let map = find_map(&model, &[0.0; 3], &LbfgsOptions::default())?;
//! let context = TuneContext::at_map(&model, &map.theta, TuneScores::ControlVariates, 500, 0)?;
//! let grid = TuneGrid {
//!     log10_step_size: Some(GridValues::List(vec![-3.0, -4.0, -5.0])),
//!     ..TuneGrid::default()
//! };
//! let gradient = EstimatorSettings {
//!     estimator: EstimatorKind::ControlVariates,
//!     ..EstimatorSettings::default()
//! };
//! let arms = sgmcmc::tuning::expand_grid(&SamplerSettings::sgld(1e-4), &gradient, &grid)?;
//! let tuning = MambaSettings { budget: TuneBudget::ArmEvaluations(1e6), ..MambaSettings::default() };
//! let winner = &arms[sgmcmc::tuning::mamba(&context, &arms, &tuning, &mut |_, _| {})?.winner];
//! let settings = RunSettings { seed: 0, chains: 2, budget: Budget::Iterations(1_000), burn_in: 100, thin: 1 };
//! let sink = MemorySink::new(settings.chains, model.dim());
//! let chain = |_, _: &mut _| {
//!     Ok(Chain::sampler(
//!         winner.sampler.build()?,
//!         winner.gradient.build(&model, Some(&map.theta))?,
//!         map.theta.clone(),
//!     ))
//! };
//! run(&settings, chain, &sink, &NoProgress)?;
//! assert_eq!(sink.into_chains()[0].len(), 1_000 * model.dim());
//! # Ok(())
//! # }
//! ```
//!
//! `crates/sgmcmc/examples/custom_model.rs` does the same for a model of your own (the
//! [`model::Model`] trait).
#![warn(missing_docs)]

pub mod check;
pub mod checkpoint;
pub mod coreset;
pub mod cpu;
pub mod data;
pub mod diagnostics;
pub mod estimator;
pub mod io;
mod lanes;
pub mod mh;
pub mod model;
pub mod moments;
pub mod optim;
pub mod precondition;
pub mod reference;
pub mod rng;
pub mod runner;
pub mod sampler;
pub mod settings;
pub mod stein;
pub mod tuning;
