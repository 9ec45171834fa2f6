//! Typed settings: complete, serialisable descriptions of what a run is made of, each with one
//! constructor path and one place for its unit conversions and validation.
//!
//! - [`SamplerSettings`]: the sampler and its hyperparameters (`[sampler]` in a run file);
//!   [`SamplerSettings::build`] gives a fresh [`crate::sampler::Sampler`].
//! - [`ScheduleSettings`]: a step-size schedule, resolved against the sampler's step and the
//!   run's length into a [`crate::sampler::StepSchedule`].
//! - [`EstimatorSettings`]: the gradient estimator (`[gradient]`);
//!   [`EstimatorSettings::build`] gives a fresh [`crate::estimator::GradientEstimator`].
//!
//! The run file of the CLI is composed of these values (serde, unknown keys rejected), and the
//! tuner's arms are pairs of them; a Rust user builds them directly.

mod estimator;
mod sampler;
mod schedule;

pub use estimator::{EstimatorKind, EstimatorSettings};
pub use sampler::{GridValue, MhTestKind, SamplerSettings};
pub use schedule::ScheduleSettings;

use crate::estimator::EstimatorError;
use crate::mh::correction::CorrectionError;
use crate::sampler::SamplerError;

/// Settings that cannot be built, as one line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    /// A sampler value out of range (step ≤ 0, L = 0, …).
    #[error(transparent)]
    Sampler(#[from] SamplerError),
    /// An estimator value out of range (batch larger than N, …).
    #[error(transparent)]
    Estimator(#[from] EstimatorError),
    /// The minibatch MH test's correction distribution cannot be built.
    #[error(transparent)]
    Correction(#[from] CorrectionError),
    /// Both or neither of a sampler's two step conventions.
    #[error("give exactly one of {0}")]
    OneStepKey(&'static str),
    /// `kind = "mh"` asked for without a model.
    #[error(
        "kind = \"mh\" is a chain kernel of its own that reads the model: it runs under \
         `sgmcmc run`, not here (e.g. MAMBA tunes the stochastic-gradient samplers only)"
    )]
    MhNeedsModel,
    /// A step schedule for minibatch MH, whose proposal scale is fixed.
    #[error("kind = \"mh\" takes no step schedule: its proposal scale is fixed for the run")]
    MhSchedule,
    /// A stochastic-gradient sampler where minibatch MH was expected.
    #[error("this needs kind = \"mh\"")]
    NotMh,
    /// The MH test's batch increment exceeds the data.
    #[error("batch_size = {batch} is larger than the data (N = {n})")]
    MhBatchTooLarge {
        /// The batch increment m.
        batch: usize,
        /// N.
        n: usize,
    },
    /// A gradient proposal with SVRG, whose centre moves between the forward and reverse
    /// densities.
    #[error(
        "kind = \"mh\" with a gradient proposal needs one fixed gradient per iteration for its \
         forward and reverse densities; SVRG's centre moves between them: use estimator = \
         \"minibatch\", \"control_variates\" or \"full\""
    )]
    MhGradientWithSvrg,
    /// CCAdL with minibatches of one point.
    #[error(
        "kind = \"ccadl\" estimates the gradient-noise covariance from each minibatch and needs batch_size >= 2, got {0}"
    )]
    CcadlBatch(usize),
    /// `with_replacement` on the full-data estimator.
    #[error("`with_replacement` applies to minibatch estimators, not estimator = \"full\"")]
    ReplacementWithFull,
    /// `with_replacement` together with `scheme = "block"`.
    #[error("`with_replacement` draws random rows; it cannot be combined with scheme = \"block\"")]
    ReplacementWithBlocks,
    /// `update_rate` on an estimator other than SVRG.
    #[error("`update_rate` applies to estimator = \"svrg\" only")]
    UpdateRateWithoutSvrg,
    /// Control variates without a centre.
    #[error("control variates need a centre (the MAP); none was computed")]
    MissingCentre,
    /// A cyclical schedule under a wall-clock budget, without its length.
    #[error(
        "schedule: a cyclical schedule needs the total iterations K, which a wall-clock budget \
         (`budget_seconds`) does not fix; give `iterations` in the schedule"
    )]
    CyclicalNeedsIterations,
    /// A schedule value out of range.
    #[error("schedule: {0}")]
    Schedule(SamplerError),
    /// A key the sampler does not have, or a value of the wrong type for it.
    #[error("{0}")]
    Key(String),
    /// A step asked of a sampler without one (`kind = "mh"`: its proposal has the scale).
    #[error("kind = \"mh\" has no step size to set")]
    NoStep,
}
