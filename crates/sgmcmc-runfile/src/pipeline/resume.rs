//! Runs that outlive their process: what a run directory records so that `--resume` (or
//! `resume=True` in Python) continues a killed or interrupted run with exactly the draws an
//! uninterrupted one would have made.
//!
//! A run writes `checkpoints/run.json` ([`RunState`]) before its first draw: the run file as
//! given, and the run file as resolved (the default path's choices; MAMBA's tuning is timed, so
//! it is not run again), with the default path's report. Each chain's checkpoint
//! (`checkpoints/chain-<c>.state`, [`sgmcmc::runner::Checkpoints`]) follows its draws in
//! `draws.zarr`. To continue, the same run file is given again; the chains go on from their
//! checkpoints, a chain without one starts afresh.
//!
//! `sgmcmc tune` records its run the same way (command `tune`) and saves MAMBA's progress after
//! every round (`checkpoints/tune.state`, [`sgmcmc::tuning::MambaProgress`]). `sgmcmc
//! reference` records its run (command `reference`, with its NUTS options) in a directory
//! beside the reference file and keeps each finished chain there
//! ([`sgmcmc::reference::FinishedChains`]).

use super::{DefaultPathReport, PipelineError};
use crate::config::Config;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sgmcmc::io::{CheckpointDirectory, RunDirectory};
use sgmcmc::model::Model;
use std::path::PathBuf;

/// Version of `run.json`'s layout.
const FORMAT: u32 = 1;

/// What `checkpoints/run.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunState {
    /// The layout's version.
    pub format: u32,
    /// The command that runs in the directory: `run` (draws) or `tune` (MAMBA's rounds).
    #[serde(default = "run_command")]
    pub command: String,
    /// The run file as given (a continued run must be given the same).
    pub run_file: serde_json::Value,
    /// The run file as it runs (the default path's choices written out).
    pub resolved: Config,
    /// What the default path chose, when it ran.
    pub default_path: Option<DefaultPathReport>,
    /// The model's data points and parameters (data handed over from Python are not in the
    /// run file: a continued run checks at least their shape).
    pub num_data: usize,
    /// The model's parameter names.
    pub parameters: Vec<String>,
    /// The command's own options that the run depends on (`reference`: the NUTS settings;
    /// null for `run` and `tune`, whose run file holds everything).
    #[serde(default)]
    pub options: serde_json::Value,
}

/// Where a run's draws and checkpoints go, and whether it continues an earlier run.
#[derive(Debug, Clone)]
pub struct RunOutput {
    /// The Zarr store of the draws.
    pub zarr: PathBuf,
    /// The chains' checkpoints (none: the run cannot be continued).
    pub checkpoints: Option<CheckpointDirectory>,
    /// Continue the chains from their checkpoints and the store's draws.
    pub resume: bool,
    /// Run only these chains of the run (each from its checkpoint, if it has one), beside
    /// other processes that run the others into the same store; `None`: every chain.
    pub only: Option<Vec<usize>>,
}

impl RunOutput {
    /// Draws into `zarr` only: no checkpoints.
    pub fn draws_only(zarr: PathBuf) -> Self {
        Self {
            zarr,
            checkpoints: None,
            resume: false,
            only: None,
        }
    }

    /// The draws (`draws.zarr`) and checkpoints of run directory `dir`.
    pub fn in_directory(dir: &RunDirectory, resume: bool) -> Self {
        Self {
            zarr: dir.join("draws.zarr"),
            checkpoints: Some(CheckpointDirectory::of(dir)),
            resume,
            only: None,
        }
    }
}

fn run_command() -> String {
    RUN.to_string()
}

/// [`RunState::command`] of `sgmcmc run` (and `sample()` in Python).
const RUN: &str = "run";
/// [`RunState::command`] of `sgmcmc tune`.
const TUNE: &str = "tune";
/// [`RunState::command`] of `sgmcmc reference`.
const REFERENCE: &str = "reference";

fn as_json(cfg: &Config) -> serde_json::Value {
    serde_json::to_value(cfg).unwrap_or(serde_json::Value::Null)
}

fn file_error(
    checkpoints: &CheckpointDirectory,
    action: &'static str,
    source: std::io::Error,
) -> PipelineError {
    PipelineError::File {
        path: checkpoints.path().join("run.json"),
        action,
        source,
    }
}

/// Records a new run in `dir` (before its first draw): `given` as the user gave it, `resolved`
/// as it runs.
pub fn record_run(
    dir: &RunDirectory,
    given: &Config,
    model: &dyn Model,
    resolved: &Config,
    default_path: Option<&DefaultPathReport>,
) -> Result<(), PipelineError> {
    record(dir, RUN, given, model, resolved, default_path, Value::Null)
}

/// Records a new tuning run (`sgmcmc tune`) in `dir`, before its first round.
pub fn record_tuning(
    dir: &RunDirectory,
    cfg: &Config,
    model: &dyn Model,
) -> Result<(), PipelineError> {
    record(dir, TUNE, cfg, model, cfg, None, Value::Null)
}

/// Records a new NUTS reference run (`sgmcmc reference`) of `cfg`'s model with `options` (its
/// NUTS settings) in `dir`, before its first chain.
pub fn record_reference(
    dir: &RunDirectory,
    cfg: &Config,
    model: &dyn Model,
    options: Value,
) -> Result<(), PipelineError> {
    record(dir, REFERENCE, cfg, model, cfg, None, options)
}

/// Checks that `dir` holds a reference run of `cfg` on `model`'s data with the same `options`.
pub fn recorded_reference(
    dir: &RunDirectory,
    cfg: &Config,
    model: &dyn Model,
    options: &Value,
) -> Result<(), PipelineError> {
    let state = recorded(dir, REFERENCE, cfg, model)?;
    if &state.options != options {
        return Err(PipelineError::RunFile(format!(
            "the reference run in {} was started with other options ({}), now {options}; \
             continue it with the same options, or start afresh with --overwrite",
            dir.path().display(),
            state.options
        )));
    }
    Ok(())
}

/// Checks that `dir` holds a tuning run of `cfg` on `model`'s data, as [`recorded_run`] does
/// for a sampling run.
pub fn recorded_tuning(
    dir: &RunDirectory,
    cfg: &Config,
    model: &dyn Model,
) -> Result<(), PipelineError> {
    recorded(dir, TUNE, cfg, model).map(|_| ())
}

fn record(
    dir: &RunDirectory,
    command: &str,
    given: &Config,
    model: &dyn Model,
    resolved: &Config,
    default_path: Option<&DefaultPathReport>,
    options: Value,
) -> Result<(), PipelineError> {
    let state = RunState {
        format: FORMAT,
        command: command.to_string(),
        run_file: as_json(given),
        resolved: resolved.clone(),
        default_path: default_path.cloned(),
        num_data: model.num_data(),
        parameters: model.parameter_names(),
        options,
    };
    let checkpoints = CheckpointDirectory::of(dir);
    let text = serde_json::to_vec_pretty(&state).expect("a run state serialises");
    checkpoints
        .write_run_state(&text)
        .map_err(|e| file_error(&checkpoints, "cannot write", e))
}

/// The run recorded in `dir`, checked against the run file `given` now and its `model`: the
/// resolved file to run and the default path's report. An error names what does not match.
pub fn recorded_run(
    dir: &RunDirectory,
    given: &Config,
    model: &dyn Model,
) -> Result<(Config, Option<DefaultPathReport>), PipelineError> {
    recorded(dir, RUN, given, model).map(|s| (s.resolved, s.default_path))
}

fn recorded(
    dir: &RunDirectory,
    command: &str,
    given: &Config,
    model: &dyn Model,
) -> Result<RunState, PipelineError> {
    let checkpoints = CheckpointDirectory::of(dir);
    let text = checkpoints
        .read_run_state()
        .map_err(|e| file_error(&checkpoints, "cannot read", e))?
        .ok_or_else(|| {
            PipelineError::RunFile(format!(
                "{} holds no run to continue (no checkpoints/run.json); run without --resume",
                dir.path().display()
            ))
        })?;
    let state: RunState = serde_json::from_str(&text).map_err(|e| {
        PipelineError::RunFile(format!(
            "{}: not a run state this version reads: {e}",
            checkpoints.path().join("run.json").display()
        ))
    })?;
    if state.format != FORMAT {
        return Err(PipelineError::RunFile(format!(
            "{}: run state format {}, this version reads {FORMAT}",
            checkpoints.path().join("run.json").display(),
            state.format
        )));
    }
    if state.command != command {
        return Err(PipelineError::RunFile(format!(
            "{} holds a run of `sgmcmc {}`, not of `sgmcmc {command}`; continue it with that \
             command, or start a new run (another directory, or --overwrite)",
            dir.path().display(),
            state.command
        )));
    }
    if state.run_file != as_json(given) {
        return Err(PipelineError::RunFile(format!(
            "the run in {} was started with other settings; continue it with the same run file, \
             or start a new run (another directory, or --overwrite)",
            dir.path().display()
        )));
    }
    let names = model.parameter_names();
    if (state.num_data, &state.parameters) != (model.num_data(), &names) {
        return Err(PipelineError::RunFile(format!(
            "the run in {} was started on other data: {} data points and parameters ({}), now {} ({}); \
             continue it with the same data",
            dir.path().display(),
            state.num_data,
            state.parameters.join(", "),
            model.num_data(),
            names.join(", ")
        )));
    }
    Ok(state)
}
