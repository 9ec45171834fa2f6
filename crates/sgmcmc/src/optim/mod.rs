//! Optimisation: the maximum a posteriori point, by L-BFGS on the full-data log posterior
//! (the default) or by Adam on minibatch gradients (the MAMBA experiments' way, reference §3.2).

mod adam;
pub mod lbfgs;
mod map;

pub use adam::{AdamMapError, AdamMapOptions, find_map_adam};

pub use map::{MapError, MapResult, find_map};
