//! Full-data reference posteriors (reference §5.4, issue 4): moments of π from a long run of an
//! exact sampler, the yardstick for the accuracy metrics of SG-MCMC draws.

mod moments;

pub use moments::{ReferenceError, ReferenceMoments};
