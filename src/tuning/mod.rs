//! Hyperparameter tuning (reference §5): MAMBA's successive-halving bandit over a grid of sampler
//! settings, scored by a Stein discrepancy.
//!
//! [`halving`] is the bandit itself, independent of samplers: a plan (rounds and per-arm budgets
//! of Algorithm 1) and a driver that asks a caller-supplied closure to run one arm for one round
//! and return its metric. [`arm`] runs one arm for one round: warm restart from its last
//! position, a budget charged to the arm (thread CPU time or gradient evaluations), the round's
//! thinned draws with their recorded scores.

pub mod arm;
pub mod halving;

pub use arm::{Arm, ArmBudget, Segment, thread_cpu_seconds};
pub use halving::{HalvingError, HalvingOutcome, HalvingPlan, RoundRecord, successive_halving};
