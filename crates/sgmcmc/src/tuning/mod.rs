//! Hyperparameter tuning (reference §5): MAMBA's successive-halving bandit over a grid of sampler
//! settings, scored by a Stein discrepancy, and the paper's baselines.
//!
//! - [`halving`]: the bandit itself, independent of samplers: a plan (rounds and per-arm budgets
//!   of Algorithm 1) and a driver that asks a caller-supplied closure to run one round's arms.
//! - [`arm`]: one arm's round: warm restart from its last position, a budget charged to the arm
//!   (thread CPU time, gradient evaluations or iterations), the round's thinned draws.
//! - [`grid`]: the arms, the Cartesian product of `[tune.grid]` over the run file's tables; the
//!   1/N heuristic's settings.
//! - [`scores`]: scores at kept draws: exact, or a fixed-subsample control-variate surrogate.
//! - [`mamba`]: Algorithm 1 with parallel arms, each charged its own thread CPU time.
//! - [`baselines`]: grid search with a caller-supplied selection metric.
//! - [`progress`]: MAMBA's progress after a round, as bytes, to resume an interrupted run.

pub mod arm;
pub mod baselines;
pub mod grid;
pub mod halving;
pub mod mamba;
pub mod progress;
pub mod scores;

pub use crate::runner::thread_cpu_seconds;
pub use arm::{Arm, Segment};
pub use baselines::{GridPoint, GridSearchOutcome, GridSearchSettings, grid_search};
pub use grid::{ArmSettings, GridValues, TuneGrid, expand_grid, heuristic_arm};
pub use halving::{
    HalvingError, HalvingOutcome, HalvingPlan, RoundRecord, successive_halving,
    successive_halving_observed, successive_halving_resumed,
};
pub use mamba::{
    ArmRound, ArmRoundResult, MambaOutcome, MambaSettings, RoundRunner, TuneBudget, TuneContext,
    TuneMetricSettings, mamba, mamba_on, mamba_resumable, run_arm_round, run_arm_round_alone,
};
pub use progress::{ArmProgress, MambaProgress};
pub use scores::{ScoreFunction, TuneScores};

/// Errors of a tuning run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TuneError {
    /// The grid or a tuning setting is invalid (the message names the key and the value).
    #[error("{0}")]
    Grid(String),
    /// A grid value cannot be applied to the sampler's settings.
    #[error("[tune.grid] `{key}`: {source}")]
    GridKey {
        /// The grid's key.
        key: String,
        /// Why the settings refuse it.
        source: crate::settings::SettingsError,
    },
    /// An arm's settings cannot be built or do not fit the model.
    #[error("arm {index} ({label}): [{table}] {source}")]
    Arm {
        /// The arm's index in grid order.
        index: usize,
        /// The arm's label (its grid values).
        label: String,
        /// `sampler` or `gradient`.
        table: &'static str,
        /// Why.
        source: crate::settings::SettingsError,
    },
    /// The 1/N heuristic's step cannot be set on the sampler.
    #[error("the 1/N heuristic: {0}")]
    Heuristic(crate::settings::SettingsError),
    /// A worker thread for the arms could not be started.
    #[error("cannot start a worker thread: {0}")]
    Thread(#[from] rayon::ThreadPoolBuildError),
    /// The halving plan is invalid.
    #[error(transparent)]
    Halving(#[from] HalvingError),
    /// Saved progress that cannot be resumed (another run's, or damaged).
    #[error("cannot resume the tuning run: {0}")]
    Resume(String),
    /// MAMBA's progress could not be saved.
    #[error("cannot save the tuning progress: {0}")]
    Save(String),
    /// An estimator could not be built.
    #[error(transparent)]
    Estimator(#[from] crate::estimator::EstimatorError),
    /// An arm's sampler or estimator settings cannot be built.
    #[error(transparent)]
    Settings(#[from] crate::settings::SettingsError),
    /// A round's arms run elsewhere ([`RoundRunner`]) failed or came back wrong.
    #[error("the arms' rounds run elsewhere: {0}")]
    Elsewhere(String),
}
