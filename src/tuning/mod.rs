//! Hyperparameter tuning (reference §5): MAMBA's successive-halving bandit over a grid of sampler
//! settings, scored by a Stein discrepancy.
//!
//! [`halving`] is the bandit itself, independent of samplers: a plan (rounds and per-arm budgets
//! of Algorithm 1) and a driver that asks a caller-supplied closure to run one arm for one round
//! and return its metric.

pub mod halving;

pub use halving::{HalvingError, HalvingOutcome, HalvingPlan, RoundRecord, successive_halving};
