//! Every integration test of `sgmcmc-experiments` in one test binary, one module per file of this
//! directory: one link and one copy of the library's generic code instead of one per file
//! (most of CI's compile time). One file's tests:
//! `cargo test --release -p sgmcmc-experiments --test integration FILE::`.

mod ccadl_mnist_experiment;
mod common;
mod coreset_studies;
mod mamba_fssd_study;
mod mamba_ksd_estimators;
mod mh_mixture_experiment;
mod mh_mnist_experiment;
mod normal_gamma_experiment;
mod plot;
mod posteriordb;
