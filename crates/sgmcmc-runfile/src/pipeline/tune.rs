//! `sgmcmc tune`: a run file with a `[tune]` table → the arms, the shared context (MAP, its
//! full-data score, the metric's score function), and MAMBA or a baseline; the winner as a
//! ready-to-run config.
//!
//! Every arm starts at the MAP (reference §5.1), whatever `[run] init` says; control variates
//! are centred there.

use super::{PipelineError, Prepared};
use crate::config::{Config, GridSelection, InitConfig, SamplerTable, TuneConfig, TuneMetric};
use sgmcmc::io::CheckpointDirectory;
use sgmcmc::optim::MapResult;
use sgmcmc::settings::SamplerSettings;
use sgmcmc::stein::{FssdOptSettings, ImqKernel, Kernel, KernelSettings};
use sgmcmc::tuning::{Arm, RoundRunner, run_arm_round_alone};
use sgmcmc::tuning::{
    ArmSettings, GridSearchOutcome, GridSearchSettings, MambaOutcome, MambaProgress, MambaSettings,
    TuneBudget, TuneContext, TuneError, TuneMetricSettings, expand_grid, grid_search,
    heuristic_arm, mamba_on,
};
use std::time::Instant;

/// A checked `[tune]` table over a prepared run.
pub struct TuneSession<'p> {
    /// The run file.
    pub cfg: &'p Config,
    /// Its `[tune]` table.
    pub tune: &'p TuneConfig,
    /// The prepared run (model, test split).
    pub prepared: &'p Prepared,
    /// The shared context of the arms.
    pub ctx: TuneContext<'p>,
    /// Seconds to find the MAP and its score.
    pub map_seconds: f64,
    /// The MAP the arms start from (and control variates centre on).
    pub map: MapResult,
}

/// The file of a run directory's checkpoints that holds MAMBA's progress.
pub const TUNE_PROGRESS: &str = "tune.state";

/// Which tuner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TuneMethod {
    /// MAMBA (successive halving on the Stein discrepancy).
    Mamba,
    /// Grid search: every step (and other non-batch key) at a fixed batch size and iteration
    /// count, selected by test log-loss or KSD.
    GridSearch,
    /// step = 1/N, batch 10 %, L = 10 for SGHMC.
    Heuristic,
}

/// The budget of a `[tune]` table (exactly one of the four keys).
pub fn tune_budget(t: &TuneConfig) -> Result<TuneBudget, TuneError> {
    let given = [
        t.budget_seconds.map(TuneBudget::ArmSeconds),
        t.total_seconds.map(TuneBudget::TotalSeconds),
        t.budget_gradient_evaluations
            .map(TuneBudget::ArmEvaluations),
        t.total_gradient_evaluations
            .map(TuneBudget::TotalEvaluations),
    ];
    let mut set = given.into_iter().flatten();
    match (set.next(), set.next()) {
        (Some(b), None) => Ok(b),
        _ => Err(TuneError::Grid(
            "[tune] give exactly one of `budget_seconds` (R), `total_seconds` (T), \
             `budget_gradient_evaluations` or `total_gradient_evaluations`"
                .into(),
        )),
    }
}

/// The metric of a `[tune]` table.
pub fn tune_metric(t: &TuneConfig) -> TuneMetricSettings {
    let imq = Kernel::Imq(ImqKernel::default());
    match t.metric {
        TuneMetric::Ksd => TuneMetricSettings::Ksd(imq),
        TuneMetric::Fssd => TuneMetricSettings::Fssd(
            KernelSettings::Gaussian { sigma2: None },
            FssdOptSettings::default(),
        ),
        TuneMetric::FssdImq => {
            TuneMetricSettings::Fssd(KernelSettings::default(), FssdOptSettings::default())
        }
    }
}

impl<'p> TuneSession<'p> {
    /// Check the `[tune]` table, find the MAP and its full-data score, and draw the score
    /// subsample.
    pub fn new(cfg: &'p Config, prepared: &'p Prepared) -> Result<Self, PipelineError> {
        let t = Instant::now();
        let map = super::find_run_map(cfg, prepared.model())?;
        let mut session = Self::from_map(cfg, prepared, map)?;
        session.map_seconds = t.elapsed().as_secs_f64();
        Ok(session)
    }

    /// [`TuneSession::new`] with a MAP found earlier for the same model (e.g. shared by the
    /// samplers of an experiment); `map_seconds` then counts its score only.
    pub fn from_map(
        cfg: &'p Config,
        prepared: &'p Prepared,
        map: MapResult,
    ) -> Result<Self, TuneError> {
        let tune = cfg.tune.as_ref().ok_or_else(|| {
            TuneError::Grid(
                "the run file has no [tune] table (see examples/tune_logistic.toml)".into(),
            )
        })?;
        tune_budget(tune)?;
        let t = Instant::now();
        let ctx = TuneContext::at_map(
            prepared.model(),
            &map.theta,
            tune.scores,
            tune.score_subsample,
            cfg.run.seed,
        )?;
        Ok(Self {
            cfg,
            tune,
            prepared,
            ctx,
            map_seconds: t.elapsed().as_secs_f64(),
            map,
        })
    }

    /// The `[sampler]` method the grid is applied to; a `schedule` is an error (tuning
    /// searches constant steps).
    fn base_sampler(&self) -> Result<&SamplerSettings, TuneError> {
        let table = self.cfg.sampler.as_ref().ok_or_else(|| {
            TuneError::Grid(
                "[tune] needs a [sampler] table: its grid is applied to that method".into(),
            )
        })?;
        if table.schedule.is_some() {
            return Err(TuneError::Grid(
                "[sampler] has a `schedule`; tune searches constant steps, remove the schedule"
                    .into(),
            ));
        }
        Ok(&table.method)
    }

    /// MAMBA's arms: the whole grid.
    pub fn arms(&self) -> Result<Vec<ArmSettings>, TuneError> {
        expand_grid(self.base_sampler()?, self.cfg.gradient(), &self.tune.grid)
    }

    /// MAMBA's settings from the table.
    pub fn mamba_settings(&self) -> Result<MambaSettings, TuneError> {
        Ok(MambaSettings {
            eta: self.tune.eta,
            budget: tune_budget(self.tune)?,
            thin: self.tune.thin,
            max_scored_draws: self.tune.max_scored_draws,
            metric: tune_metric(self.tune),
            threads: self.tune.threads.unwrap_or(0),
            float_round_count: self.tune.float_round_count,
            seed: self.cfg.run.seed,
            audit_full_scores: false,
        })
    }

    /// Run MAMBA; `on_round` sees each round as it ends.
    pub fn mamba(
        &self,
        settings: &MambaSettings,
        elsewhere: Option<&dyn RoundRunner>,
        on_round: &mut dyn FnMut(&[sgmcmc::tuning::ArmRound], f64),
    ) -> Result<(Vec<ArmSettings>, MambaOutcome), TuneError> {
        let arms = self.arms()?;
        let outcome = mamba_on(
            &self.ctx,
            &arms,
            settings,
            None,
            elsewhere,
            on_round,
            &mut |_| Ok(()),
        )?;
        Ok((arms, outcome))
    }

    /// One arm's round of MAMBA on this session (the unit a [`RoundRunner`] sends elsewhere):
    /// arm `arm` of the grid from `state` ([`Arm::encode`]'s bytes) at `budget_per_arm`, on
    /// one thread, as [`TuneSession::mamba`] runs each arm locally; the result as
    /// [`sgmcmc::tuning::ArmRoundResult::encode`]'s bytes.
    pub fn arm_round(
        &self,
        arm: usize,
        state: &[u8],
        round: usize,
        budget_per_arm: f64,
    ) -> Result<Vec<u8>, TuneError> {
        let arms = self.arms()?;
        let settings = self.mamba_settings()?;
        let elsewhere = |e: &dyn std::fmt::Display| TuneError::Elsewhere(e.to_string());
        let chosen = arms.get(arm).ok_or_else(|| {
            TuneError::Elsewhere(format!("arm {arm} of a grid of {} arms", arms.len()))
        })?;
        let state = Arm::decode(state, self.ctx.model.dim()).map_err(|e| elsewhere(&e))?;
        let result = run_arm_round_alone(
            &self.ctx,
            chosen,
            arm,
            state,
            round,
            budget_per_arm,
            &settings,
        )?;
        result.encode().map_err(|e| elsewhere(&e))
    }

    /// Grid search's arms: the grid without its batch sizes, at `[tune.grid_search]
    /// batch_size`.
    pub fn grid_search_arms(&self) -> Result<Vec<ArmSettings>, TuneError> {
        let mut grid = self.tune.grid.clone();
        grid.batch_size = Some(vec![self.tune.grid_search.batch_size]);
        expand_grid(self.base_sampler()?, self.cfg.gradient(), &grid)
    }

    /// How grid search selects: the configured choice, else log-loss when there is a test
    /// split, else KSD.
    pub fn grid_selection(&self) -> Result<GridSelection, TuneError> {
        let has_test = self
            .prepared
            .evaluation
            .as_ref()
            .is_some_and(|e| e.test.is_some())
            && self.prepared.predictive().is_some();
        match self.tune.grid_search.select_by {
            Some(s) if s.needs_test_split() && !has_test => Err(TuneError::Grid(format!(
                "[tune.grid_search] select_by = \"{}\" needs a test split: add \
                 `[evaluation] test_fraction` (or `[evaluation.test]`)",
                s.name()
            ))),
            Some(s @ GridSelection::Rmse) if self.is_classifier() => Err(TuneError::Grid(format!(
                "[tune.grid_search] select_by = \"{}\" is for regression models; this model is \
                 a classifier (use \"accuracy\", \"ece\" or \"log_loss\")",
                s.name()
            ))),
            Some(s @ (GridSelection::Accuracy | GridSelection::Ece)) if !self.is_classifier() => {
                Err(TuneError::Grid(format!(
                    "[tune.grid_search] select_by = \"{}\" is for classifiers; this model is a \
                     regression (use \"rmse\" or \"log_loss\")",
                    s.name()
                )))
            }
            Some(s) => Ok(s),
            None if has_test => Ok(GridSelection::LogLoss),
            None => Ok(GridSelection::Ksd),
        }
    }

    fn is_classifier(&self) -> bool {
        self.prepared.predictive().is_some_and(|p| {
            matches!(
                p.task(),
                sgmcmc::model::PredictiveTask::Classification { .. }
            )
        })
    }

    /// Run grid search.
    pub fn grid_search(
        &self,
    ) -> Result<(Vec<ArmSettings>, GridSelection, GridSearchOutcome), TuneError> {
        let arms = self.grid_search_arms()?;
        let selection = self.grid_selection()?;
        let g = &self.tune.grid_search;
        let settings = GridSearchSettings {
            iterations: g.estimates.unwrap_or(g.iterations),
            count_estimates: g.estimates.is_some(),
            start_noise: g.start_noise,
            thin: self.tune.thin,
            threads: self.tune.threads.unwrap_or(0),
            seed: self.cfg.run.seed,
        };
        let ksd = TuneMetricSettings::Ksd(Kernel::Imq(ImqKernel::default()));
        let seed = self.cfg.run.seed;
        let outcome = match selection {
            GridSelection::Ksd => grid_search(&self.ctx, &arms, &settings, &|draws| {
                self.ctx.metric(draws, &ksd, seed)
            })?,
            GridSelection::LogLoss
            | GridSelection::Rmse
            | GridSelection::Accuracy
            | GridSelection::Ece => {
                let predictive = self.prepared.predictive().expect("checked above");
                let ev = self.prepared.evaluation.as_ref().expect("checked above");
                let test = ev.test.as_ref().expect("checked above");
                let dim = self.ctx.model.dim();
                grid_search(&self.ctx, &arms, &settings, &|draws| {
                    test.metrics(
                        predictive,
                        &[draws],
                        draws.len() / dim,
                        ev.predictive_draws,
                        ev.calibration_bins,
                    )
                    .ok()
                    .and_then(|m| match selection {
                        GridSelection::Rmse => m.rmse,
                        GridSelection::Accuracy => m.accuracy.map(|a| 1.0 - a),
                        GridSelection::Ece => m.ece,
                        _ => Some(m.log_loss_mamba),
                    })
                    .filter(|v| v.is_finite())
                    .unwrap_or(f64::INFINITY)
                })?
            }
        };
        Ok((arms, selection, outcome))
    }

    /// The 1/N heuristic's settings (batch from `[tune.grid_search] batch_size`).
    pub fn heuristic(&self) -> Result<ArmSettings, TuneError> {
        heuristic_arm(
            self.base_sampler()?,
            self.cfg.gradient(),
            self.ctx.model.num_data(),
            self.tune.grid_search.batch_size,
        )
    }

    /// MAMBA saving its progress after every round in `checkpoints` (`tune.state`), and with
    /// `resume` continuing from the progress saved there (from the start when there is none).
    pub fn mamba_checkpointed(
        &self,
        settings: &MambaSettings,
        checkpoints: &CheckpointDirectory,
        resume: bool,
        elsewhere: Option<&dyn RoundRunner>,
        on_round: &mut dyn FnMut(&[sgmcmc::tuning::ArmRound], f64),
    ) -> Result<(Vec<ArmSettings>, MambaOutcome), TuneError> {
        let arms = self.arms()?;
        let path = checkpoints.path().join(TUNE_PROGRESS);
        let unreadable =
            |e: &dyn std::fmt::Display| TuneError::Resume(format!("{}: {e}", path.display()));
        let progress = match resume {
            true => checkpoints
                .read_file(TUNE_PROGRESS)
                .map_err(|e| unreadable(&e))?
                .map(|bytes| MambaProgress::decode(&bytes, &arms, self.ctx.model.dim()))
                .transpose()
                .map_err(|e| unreadable(&e))?,
            false => None,
        };
        let mut save = |p: &MambaProgress| {
            let bytes = p.encode().map_err(|e| unreadable(&e))?;
            checkpoints
                .write_file(TUNE_PROGRESS, &bytes)
                .map_err(|e| TuneError::Save(format!("{}: {e}", path.display())))
        };
        let outcome = mamba_on(
            &self.ctx, &arms, settings, progress, elsewhere, on_round, &mut save,
        )?;
        Ok((arms, outcome))
    }

    /// Run `method`; `on_round` sees each of MAMBA's rounds as it ends (with the budget per arm
    /// of that round). With `checkpoints`, MAMBA saves its progress after every round and, when
    /// `resume` is set, continues from it ([`TuneSession::mamba_checkpointed`]); grid search and
    /// the heuristic run whole (they are deterministic). With `elsewhere`, MAMBA's arms run
    /// there round by round (e.g. as tasks on a cluster); the halving stays here.
    pub fn tune(
        &self,
        method: TuneMethod,
        checkpoints: Option<(&CheckpointDirectory, bool)>,
        elsewhere: Option<&dyn RoundRunner>,
        on_round: &mut dyn FnMut(&[sgmcmc::tuning::ArmRound], f64),
    ) -> Result<Tuned, TuneError> {
        Ok(match method {
            TuneMethod::Mamba => {
                let settings = self.mamba_settings()?;
                let (arms, outcome) = match checkpoints {
                    Some((dir, resume)) => {
                        self.mamba_checkpointed(&settings, dir, resume, elsewhere, on_round)?
                    }
                    None => self.mamba(&settings, elsewhere, on_round)?,
                };
                Tuned::Mamba {
                    arms,
                    settings,
                    outcome: Box::new(outcome),
                }
            }
            TuneMethod::GridSearch => {
                let (arms, selection, outcome) = self.grid_search()?;
                Tuned::GridSearch {
                    arms,
                    selection,
                    outcome: Box::new(outcome),
                }
            }
            TuneMethod::Heuristic => Tuned::Heuristic {
                arm: self.heuristic()?,
            },
        })
    }

    /// The run file with `arm`'s sampler and gradient tables, no `[tune]` table, every chain
    /// starting at the MAP, and paths made absolute: ready for `sgmcmc run`.
    pub fn winner_config(&self, arm: &ArmSettings) -> Config {
        winner_config(self.cfg, arm)
    }
}

/// What a tuner found ([`TuneSession::tune`]).
pub enum Tuned {
    /// MAMBA's rounds and winner.
    Mamba {
        /// The arms, in grid order.
        arms: Vec<ArmSettings>,
        /// MAMBA's settings.
        settings: MambaSettings,
        /// The rounds and the winner.
        outcome: Box<MambaOutcome>,
    },
    /// Grid search's points and winner.
    GridSearch {
        /// The arms, in grid order.
        arms: Vec<ArmSettings>,
        /// How the winner was selected.
        selection: GridSelection,
        /// The points and the winner.
        outcome: Box<GridSearchOutcome>,
    },
    /// The 1/N heuristic's settings.
    Heuristic {
        /// The settings.
        arm: ArmSettings,
    },
}

impl Tuned {
    /// The winner's settings.
    pub fn winner(&self) -> &ArmSettings {
        match self {
            Tuned::Mamba { arms, outcome, .. } => &arms[outcome.winner],
            Tuned::GridSearch { arms, outcome, .. } => &arms[outcome.winner],
            Tuned::Heuristic { arm } => arm,
        }
    }

    /// The winner's draws over its rounds (none for the heuristic).
    pub fn winner_draws(&self) -> Option<&[f64]> {
        match self {
            Tuned::Mamba { outcome, .. } => Some(&outcome.winner_draws),
            Tuned::GridSearch { outcome, .. } => Some(&outcome.winner_draws),
            Tuned::Heuristic { .. } => None,
        }
    }

    /// The report (`tune.json`): the method, its outcome, the winner's settings and timings.
    pub fn report(&self, map_seconds: f64, wall_seconds: f64) -> serde_json::Value {
        let mut report = match self {
            Tuned::Mamba { outcome, .. } => serde_json::json!({
                "method": "mamba",
                "outcome": outcome,
                "map_seconds": map_seconds,
            }),
            Tuned::GridSearch {
                selection, outcome, ..
            } => serde_json::json!({
                "method": "grid_search",
                "selection": selection,
                "outcome": outcome,
                "map_seconds": map_seconds,
            }),
            Tuned::Heuristic { .. } => serde_json::json!({ "method": "heuristic" }),
        };
        report["winner_settings"] = serde_json::json!(self.winner());
        if !matches!(self, Tuned::Heuristic { .. }) {
            report["tune_wall_seconds"] = serde_json::json!(wall_seconds);
        }
        report
    }
}

/// [`TuneSession::winner_config`].
pub fn winner_config(cfg: &Config, arm: &ArmSettings) -> Config {
    let mut out = cfg.clone();
    out.sampler = Some(SamplerTable {
        method: arm.sampler.clone(),
        schedule: None,
    });
    out.gradient = Some(arm.gradient.clone());
    out.tune = None;
    out.run.init = InitConfig::default();
    let abs = |p: &mut std::path::PathBuf| {
        if let Ok(a) = std::path::absolute(&*p) {
            *p = a;
        }
    };
    let data = |d: &mut crate::config::DataConfig| {
        for p in [
            &mut d.features,
            &mut d.targets,
            &mut d.table,
            &mut d.libsvm,
            &mut d.movielens,
        ]
        .into_iter()
        .flatten()
        {
            abs(p);
        }
    };
    data(&mut out.data);
    if let Some(ev) = &mut out.evaluation {
        ev.reference.iter_mut().for_each(abs);
        if let Some(t) = &mut ev.test {
            data(t);
        }
    }
    out
}
