//! The core's test helpers (`crates/sgmcmc/tests/common`), shared by the experiments' tests.
#![allow(dead_code, unused_imports)]

#[path = "../../../sgmcmc/tests/common/mod.rs"]
mod core;
pub use core::*;
