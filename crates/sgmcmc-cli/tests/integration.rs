//! Every integration test of `sgmcmc-cli` in one test binary, one module per file of this
//! directory: one link and one copy of the library's generic code instead of one per file
//! (most of CI's compile time). One file's tests:
//! `cargo test --release -p sgmcmc-cli --test integration FILE::`.

mod bench_cli;
mod ccadl_mnist_cli;
mod cli;
mod common;
mod constrained_runs;
mod coreset_cli;
mod coreset_models_cli;
mod evaluation_cli;
mod fixture_draws;
mod mamba_experiments;
mod mh_mnist_cli;
mod reference_cli;
mod resume_cli;
mod robustness_cli;
mod split_cli;
mod tune_cli;
