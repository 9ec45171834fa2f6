//! Every integration test of `sgmcmc-runfile` in one test binary, one module per file of this
//! directory: one link and one copy of the library's generic code instead of one per file
//! (most of CI's compile time). One file's tests:
//! `cargo test --release -p sgmcmc-runfile --test integration FILE::`.

mod bnn_mnist_run_file;
#[path = "../../sgmcmc/tests/common/mod.rs"]
mod common;
mod default_path;
mod evaluation_table;
mod map_run_file;
