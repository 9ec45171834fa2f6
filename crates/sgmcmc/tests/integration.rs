//! Every integration test of `sgmcmc` in one test binary, one module per file of this
//! directory: one link and one copy of the library's generic code instead of one per file
//! (most of CI's compile time). One file's tests:
//! `cargo test --release -p sgmcmc --test integration FILE::`.

mod bias_check;
mod bnn;
mod ccadl;
mod common;
mod constraints;
mod coreset_burn_in;
mod coreset_mcmc;
mod coreset_models;
mod coreset_optim;
mod coreset_resume;
mod coreset_slice;
mod coreset_sparse;
mod estimators;
mod estimators_block;
mod estimators_cv;
mod evaluation;
mod idx_loader;
mod map_adam;
mod mh_correction;
mod mh_tests;
mod mixture_model;
mod model_gradients;
mod pmf;
mod preconditioned_samplers;
mod reference;
mod resume;
mod runner;
mod samplers_exact_gaussian;
mod samplers_psgld_sghmc;
mod samplers_thermostats;
mod schedules;
mod scores_block;
mod sgld_exactness;
mod sparse_features;
mod stein;
mod stein_gof;
mod tuning_arm;
mod tuning_halving;
mod tuning_mamba;
