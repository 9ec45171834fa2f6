//! Coreset MCMC (Chen & Campbell 2024; Chen, Huggins & Campbell 2024; reference §7): a weighted
//! subset of M data points whose weights are trained while the chains run.
//!
//! This first part holds the weight optimisers and the hot-start test:
//! - [`optim`]: the [`WeightOptimiser`] seam with Hot DoG (Algorithm 2) and ADAM;
//! - [`hot_start`]: Algorithm 3, the test that the chains have reached stationarity before the
//!   weights start to move.

pub mod hot_start;
pub mod optim;

pub use hot_start::{hot_start_passes, hot_start_statistic};
pub use optim::{Adam, HotDog, OptimiserError, WeightOptimiser};
