//! Optimisation: the maximum a posteriori point by L-BFGS on the full-data log posterior.

pub mod lbfgs;
mod map;

pub use map::{MapError, MapResult, find_map, laplace_covariance};
