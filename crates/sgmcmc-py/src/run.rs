//! A run on a thread of its own: the run file's pipeline (`prepare` → the default path if there
//! is no sampler → `execute_resolved` → `summary_json`), polled from Python for progress and
//! messages, stopped through the runner's stop flag, and joined for its draws.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use numpy::{PyArray1, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use sgmcmc::io::{CheckpointDirectory, ExistingRun, RunDirectory};
use sgmcmc::model::constraint::constrain_draws;
use sgmcmc::runner::{ChainReport, Progress};
use sgmcmc_runfile::config::Config;
use sgmcmc_runfile::pipeline::{self, default_path};

use crate::SgmcmcError;
use crate::callback::{Batcher, CallbackModel, CallbackShared};

/// Iterations done per chain, read by the Python side's progress bar.
struct Counters {
    /// A user model's batcher, told which chain runs on which thread.
    batcher: Option<Arc<Batcher>>,
    done: Vec<AtomicUsize>,
    /// Each chain's iterations if its budget is a count (0: not known).
    total: Vec<AtomicUsize>,
    finished: Vec<AtomicBool>,
}

impl Counters {
    fn new(chains: usize, batcher: Option<Arc<Batcher>>) -> Self {
        Self {
            batcher,
            done: (0..chains).map(|_| AtomicUsize::new(0)).collect(),
            total: (0..chains).map(|_| AtomicUsize::new(0)).collect(),
            finished: (0..chains).map(|_| AtomicBool::new(false)).collect(),
        }
    }
}

impl Progress for Counters {
    fn chain_started(&self, chain: usize, total: Option<usize>) {
        if let Some(b) = &self.batcher {
            b.enter(chain);
        }
        if let Some(t) = self.total.get(chain) {
            t.store(total.unwrap_or(0), Ordering::Relaxed);
        }
    }
    fn advanced(&self, chain: usize, iterations: usize) {
        if let Some(d) = self.done.get(chain) {
            d.store(iterations, Ordering::Relaxed);
        }
    }
    fn chain_finished(&self, chain: usize, report: &ChainReport) {
        if let Some(d) = self.done.get(chain) {
            d.store(report.iterations, Ordering::Relaxed);
        }
        if let Some(f) = self.finished.get(chain) {
            f.store(true, Ordering::Relaxed);
        }
        if let Some(b) = &self.batcher {
            b.leave(chain);
        }
    }
}

/// What a finished run hands back.
enum Output {
    /// A sampling run.
    Draws {
        /// Per chain, its kept draws row-major (draws × D).
        draws: Vec<Vec<f64>>,
        dim: usize,
        names: Vec<String>,
        /// `summary.json`'s content.
        summary: String,
        /// Per chain, the state at each kept draw (step, thermostat, MH acceptance).
        statistics: Vec<Vec<sgmcmc::sampler::DrawStatistics>>,
        /// For a model with constrained parameters, the same draws on the unconstrained scale
        /// θ the sampler moved in (ArviZ's `unconstrained_posterior`).
        unconstrained: Option<Vec<Vec<f64>>>,
    },
    /// A Stein discrepancy report (JSON).
    Report(String),
    /// Bytes (an arm's round).
    Bytes(Vec<u8>),
    /// A matrix, row-major (full-batch scores of a block of draws), and the seconds it took.
    Matrix {
        values: Vec<f64>,
        cols: usize,
        seconds: f64,
    },
    /// A tuning run.
    Tuned {
        /// `tune.json`'s content.
        report: String,
        /// The winner's run file (JSON).
        winner_config: String,
        /// The winner's draws over its rounds (flat draws × D), if the method keeps any.
        winner_draws: Option<Vec<f64>>,
        dim: usize,
        names: Vec<String>,
    },
}

/// What to do with the model.
#[derive(Debug, Clone)]
enum Job {
    Sample {
        /// Continue the run in the output directory from its checkpoints.
        resume: bool,
    },
    /// Resolve and record a run whose chains run as separate tasks, and create its store
    /// (`sgmcmc run --prepare`).
    Prepare,
    /// Chains of a prepared run, each from its checkpoint if it has one (`--chains`).
    Chains(Vec<usize>),
    /// Summarise a prepared run whose chains are all in (`--finish`).
    Finish,
    /// A tuning method; its rounds are checkpointed in the output directory, if given.
    Tune {
        method: pipeline::TuneMethod,
        /// Continue the tuning run in the output directory after its last saved round.
        resume: bool,
        /// Runs MAMBA's arms elsewhere: a Python callable `(round, [(arm, state bytes)],
        /// budget per arm, MAP) -> [result bytes]` (an executor's tasks).
        elsewhere: Option<Arc<Py<PyAny>>>,
    },
    /// One arm's round of MAMBA at the given MAP (a task of a tuning run elsewhere).
    ArmRound(ArmRoundTask),
    /// The NUTS reference of the full-data posterior.
    Reference(sgmcmc::reference::NutsSettings),
    /// Coreset MCMC (the coreset run file's tables).
    Coreset(Box<sgmcmc_runfile::config::coreset::CoresetFile>),
    /// The KSD (and FSSD-opt) of given draws: per chain, flat draws × D.
    Stein {
        chains: Vec<Vec<f64>>,
        /// Columns of every chain's draws.
        cols: usize,
        thin: usize,
        fssd: bool,
        scores: SteinScores,
    },
}

/// Where a Stein job's full-batch scores come from, and what it returns.
#[derive(Debug, Clone)]
enum SteinScores {
    /// Computed here; the discrepancy is returned.
    Compute,
    /// Given per chain for its thinned draws (computed by tasks elsewhere); the discrepancy.
    Given(Vec<Vec<f64>>),
    /// Computed here and returned, with no discrepancy (a task's block of draws).
    Only,
}

/// `start_run`'s `arm_round`: (MAP, arm, state, round, budget per arm).
type ArmRoundArgs = (Vec<f64>, usize, Vec<u8>, usize, f64);

/// One arm's round of MAMBA, as the run's driver sends it.
#[derive(Debug, Clone)]
struct ArmRoundTask {
    /// The MAP every arm starts from (found once, by the driver).
    map: Vec<f64>,
    /// The arm's grid index.
    arm: usize,
    /// Its state ([`sgmcmc::tuning::Arm::encode`]).
    state: Vec<u8>,
    round: usize,
    budget_per_arm: f64,
}

/// MAMBA's rounds run by a Python callable (an executor's tasks), the halving staying here.
struct PythonRounds {
    callable: Arc<Py<PyAny>>,
    map: Vec<f64>,
    dim: usize,
}

impl sgmcmc::tuning::RoundRunner for PythonRounds {
    fn run_round(
        &self,
        round: usize,
        arms: &[(usize, sgmcmc::tuning::Arm)],
        budget_per_arm: f64,
    ) -> Result<Vec<sgmcmc::tuning::ArmRoundResult>, sgmcmc::tuning::TuneError> {
        use sgmcmc::tuning::{ArmRoundResult, TuneError};
        let failed = |e: &dyn std::fmt::Display| TuneError::Elsewhere(e.to_string());
        let mut items = Vec::with_capacity(arms.len());
        for (a, state) in arms {
            items.push((*a, state.encode().map_err(|e| failed(&e))?));
        }
        let returned: Vec<Vec<u8>> = Python::attach(|py| {
            let items: Vec<(usize, Bound<'_, pyo3::types::PyBytes>)> = items
                .iter()
                .map(|(a, bytes)| (*a, pyo3::types::PyBytes::new(py, bytes)))
                .collect();
            self.callable
                .call1(py, (round, items, budget_per_arm, self.map.clone()))?
                .extract(py)
        })
        .map_err(|e: PyErr| failed(&e))?;
        if returned.len() != arms.len() {
            return Err(TuneError::Elsewhere(format!(
                "round {round}: {} results for {} arms",
                returned.len(),
                arms.len()
            )));
        }
        returned
            .iter()
            .map(|bytes| ArmRoundResult::decode(bytes, self.dim).map_err(|e| failed(&e)))
            .collect()
    }
}

/// Why a run failed: a message, or the error a user model's callback raised.
enum Failure {
    Message(String),
    Callback(PyErr),
}

enum State {
    Running,
    Done(Result<Output, Failure>),
    Taken,
}

struct Shared {
    stop: Arc<AtomicBool>,
    /// What the run has to say with its result (a user model's first non-finite value).
    note: Mutex<Option<String>>,
    progress: Counters,
    messages: Mutex<Vec<String>>,
    state: Mutex<State>,
    finished: Condvar,
}

impl Shared {
    fn say(&self, line: impl Into<String>) {
        self.messages
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(line.into());
    }
}

/// A run in progress (`sgmcmc._sgmcmc.start_run`).
#[pyclass(module = "sgmcmc._sgmcmc")]
pub struct RunHandle {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
    chains: usize,
}

/// Start the run whose run-file tables are `config_json` (the TOML file's tables as JSON). With
/// `features`, the data are these arrays (the `[data]` table is then ignored); with `model`, a
/// user's model in Python (`[model] kind = "external"`; see `callback.rs`); with `out`, the
/// draws stream to `out/draws.zarr` and the summary goes to `out/summary.json`, as with `sgmcmc
/// run`. Errors in the settings are raised here; the rest when the run is joined.
#[pyfunction]
#[pyo3(signature = (config_json, features=None, targets=None, feature_names=None, out=None, model=None, job="sample", draws=None, thin=1, fssd=false, nuts=None, coreset=None, overwrite=false, resume=false, chains=None, rounds=None, arm_round=None, scores=None))]
#[allow(clippy::too_many_arguments)]
pub fn start_run(
    config_json: &str,
    features: Option<&Bound<'_, PyAny>>,
    targets: Option<&Bound<'_, PyAny>>,
    feature_names: Option<Vec<String>>,
    out: Option<PathBuf>,
    model: Option<&Bound<'_, PyAny>>,
    job: &str,
    draws: Option<Vec<numpy::PyReadonlyArray2<'_, f64>>>,
    thin: usize,
    fssd: bool,
    nuts: Option<(usize, usize, usize, bool)>,
    coreset: Option<&str>,
    overwrite: bool,
    resume: bool,
    chains: Option<Vec<usize>>,
    rounds: Option<Py<PyAny>>,
    arm_round: Option<ArmRoundArgs>,
    scores: Option<Vec<numpy::PyReadonlyArray2<'_, f64>>>,
) -> PyResult<RunHandle> {
    let cfg: Config = serde_json::from_str(config_json)
        .map_err(|e| SgmcmcError::new_err(format!("settings: {e}")))?;
    let job = match job {
        "sample" => Job::Sample { resume },
        "prepare" => Job::Prepare,
        "chains" => Job::Chains(chains.unwrap_or_default()),
        "finish" => Job::Finish,
        "arm_round" => {
            let (map, arm, state, round, budget_per_arm) = arm_round.ok_or_else(|| {
                SgmcmcError::new_err(
                    "job \"arm_round\" needs arm_round=(map, arm, state, round, budget)",
                )
            })?;
            Job::ArmRound(ArmRoundTask {
                map,
                arm,
                state,
                round,
                budget_per_arm,
            })
        }
        "coreset" => {
            let file = serde_json::from_str(coreset.unwrap_or("{}"))
                .map_err(|e| SgmcmcError::new_err(format!("coreset settings: {e}")))?;
            Job::Coreset(Box::new(file))
        }
        "reference" => {
            let (chains, warmup, draws, dense) = nuts.unwrap_or((4, 1000, 1000, false));
            let settings = sgmcmc::reference::NutsSettings {
                chains,
                warmup,
                draws,
                seed: cfg.run.seed,
                dense_laplace_metric: dense,
                ..sgmcmc::reference::NutsSettings::default()
            };
            settings
                .validate()
                .map_err(|e| SgmcmcError::new_err(e.to_string()))?;
            Job::Reference(settings)
        }
        "stein" | "scores" => {
            let draws = draws.unwrap_or_default();
            let cols = draws.first().map_or(0, |a| a.shape()[1]);
            if draws.iter().any(|a| a.shape()[1] != cols) {
                return Err(SgmcmcError::new_err(
                    "draws: the chains have different numbers of parameters",
                ));
            }
            let chains: Vec<Vec<f64>> = draws
                .iter()
                .map(|a| a.as_array().iter().copied().collect())
                .collect();
            if thin == 0 {
                return Err(SgmcmcError::new_err("thin must be at least 1"));
            }
            let scores = match (job, scores) {
                ("scores", _) => SteinScores::Only,
                (_, Some(given)) => {
                    if given.len() != chains.len() {
                        return Err(SgmcmcError::new_err(format!(
                            "scores: {} arrays for {} chains",
                            given.len(),
                            chains.len()
                        )));
                    }
                    SteinScores::Given(
                        given
                            .iter()
                            .map(|a| a.as_array().iter().copied().collect())
                            .collect(),
                    )
                }
                (_, None) => SteinScores::Compute,
            };
            Job::Stein {
                chains,
                cols,
                thin,
                fssd,
                scores,
            }
        }
        "mamba" => Job::Tune {
            method: pipeline::TuneMethod::Mamba,
            resume,
            elsewhere: rounds.map(Arc::new),
        },
        "grid_search" => Job::Tune {
            method: pipeline::TuneMethod::GridSearch,
            resume,
            elsewhere: None,
        },
        "heuristic" => Job::Tune {
            method: pipeline::TuneMethod::Heuristic,
            resume,
            elsewhere: None,
        },
        other => {
            return Err(SgmcmcError::new_err(format!(
                "method: \"{other}\" is not one of \"mamba\", \"grid_search\", \"heuristic\""
            )));
        }
    };
    pipeline::run_settings(&cfg).map_err(|e| SgmcmcError::new_err(e.to_string()))?;
    // The output directory is held (locked) from here until the run's thread ends.
    if resume
        && (overwrite || out.is_none() || !matches!(job, Job::Sample { .. } | Job::Tune { .. }))
    {
        return Err(SgmcmcError::new_err(
            "resume=True continues a sample() or tune() run in `out`: give `out`, and not overwrite=True",
        ));
    }
    let existing = match (overwrite, resume || matches!(job, Job::Finish)) {
        (true, _) => ExistingRun::Overwrite,
        (false, true) => ExistingRun::Resume,
        (false, false) => ExistingRun::Refuse,
    };
    if matches!(job, Job::Prepare | Job::Chains(_) | Job::Finish) && out.is_none() {
        return Err(SgmcmcError::new_err(
            "a run split into tasks needs `out`: a directory every task can reach",
        ));
    }
    let out = out
        .map(|dir| match &job {
            Job::Chains(chains) => RunDirectory::open_chains(&dir, chains),
            _ => RunDirectory::open(&dir, existing),
        })
        .transpose()
        .map_err(|e| SgmcmcError::new_err(e.to_string()))?;
    let chains = match &job {
        Job::Reference(n) => n.chains,
        Job::Coreset(file) => file.coreset.chains,
        _ => cfg.run.chains,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let source = match (features, model) {
        (Some(x), None) => Source::Arrays(crate::data::dataset(
            x,
            targets,
            feature_names.unwrap_or_default(),
        )?),
        (None, Some(object)) => {
            let batcher = Arc::new(Batcher::new(chains, crate::callback::CHAIN_GROUPS));
            let callbacks = Arc::new(CallbackShared {
                error: Mutex::new(None),
                stop: Arc::clone(&stop),
                non_finite: Mutex::new(None),
            });
            let model = CallbackModel::new(object, Arc::clone(&batcher), Arc::clone(&callbacks))?;
            Source::User {
                model,
                batcher,
                callbacks,
            }
        }
        (None, None) => Source::RunFile,
        (Some(_), Some(_)) => {
            return Err(SgmcmcError::new_err(
                "give either data arrays (a built-in model) or a user model, not both",
            ));
        }
    };
    let batcher = match &source {
        Source::User { batcher, .. } => Some(Arc::clone(batcher)),
        _ => None,
    };
    let shared = Arc::new(Shared {
        stop,
        note: Mutex::new(None),
        progress: Counters::new(chains, batcher),
        messages: Mutex::new(Vec::new()),
        state: Mutex::new(State::Running),
        finished: Condvar::new(),
    });
    let worker = Arc::clone(&shared);
    let thread = std::thread::Builder::new()
        .name("sgmcmc-run".into())
        .spawn(move || {
            let result = run_source(cfg, source, job, out, &worker);
            *worker.state.lock().unwrap_or_else(|e| e.into_inner()) = State::Done(result);
            worker.finished.notify_all();
        })
        .map_err(|e| SgmcmcError::new_err(format!("cannot start the run's thread: {e}")))?;
    Ok(RunHandle {
        shared,
        thread: Mutex::new(Some(thread)),
        chains,
    })
}

/// Where the model comes from.
enum Source {
    /// The run file's `[data]` and `[model]` tables.
    RunFile,
    /// Arrays handed over for the `[model]` table.
    Arrays(sgmcmc::data::Dataset),
    /// A user's model in Python.
    User {
        model: CallbackModel,
        batcher: Arc<Batcher>,
        callbacks: Arc<CallbackShared>,
    },
}

fn run_source(
    cfg: Config,
    source: Source,
    job: Job,
    out: Option<RunDirectory>,
    shared: &Shared,
) -> Result<Output, Failure> {
    if let Job::Coreset(file) = &job {
        return coreset(file, source, shared);
    }
    match source {
        Source::RunFile => {
            let prepared = pipeline::prepare(&cfg);
            execute(cfg, prepared, job, out, shared)
        }
        Source::Arrays(ds) => {
            let prepared = pipeline::prepare_data(&cfg, ds);
            execute(cfg, prepared, job, out, shared)
        }
        Source::User {
            model, callbacks, ..
        } => {
            // Every chain on a thread of its own, so that one Python call serves them all.
            let threads = cfg
                .run
                .chains
                .max(std::thread::available_parallelism().map_or(1, usize::from));
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(|i| format!("sgmcmc-chain-{i}"))
                .build()
                .map_err(|e| Failure::Message(format!("cannot start the chains' threads: {e}")))?;
            let prepared = pipeline::prepare_model(&cfg, Box::new(model));
            let result = pool.install(|| execute(cfg, prepared, job, out, shared));
            let error = callbacks
                .error
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            let note = callbacks
                .non_finite
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            if let Some(note) = &note {
                *shared.note.lock().unwrap_or_else(|e| e.into_inner()) = Some(note.clone());
            }
            match (error, result, note) {
                (Some(e), _, _) => Err(Failure::Callback(e)),
                (None, Err(Failure::Message(m)), Some(note)) => {
                    Err(Failure::Message(format!("{m} ({note})")))
                }
                (None, result, _) => result,
            }
        }
    }
}

fn execute(
    cfg: Config,
    prepared: Result<pipeline::Prepared, pipeline::PipelineError>,
    job: Job,
    out: Option<RunDirectory>,
    shared: &Shared,
) -> Result<Output, Failure> {
    let text = |e: pipeline::PipelineError| Failure::Message(e.to_string());
    let prepared = prepared.map_err(text)?;
    let resume = match job {
        Job::Tune {
            method,
            resume,
            elsewhere,
        } => {
            return tune(
                &cfg,
                &prepared,
                method,
                out.as_ref(),
                resume,
                elsewhere,
                shared,
            );
        }
        Job::ArmRound(task) => {
            let map = sgmcmc::optim::MapResult {
                theta: task.map,
                log_posterior: f64::NAN,
                gradient_norm: f64::NAN,
                iterations: 0,
                evaluations: 0,
                converged: true,
            };
            let failed = |e: &dyn std::fmt::Display| Failure::Message(e.to_string());
            let session =
                pipeline::TuneSession::from_map(&cfg, &prepared, map).map_err(|e| failed(&e))?;
            let bytes = session
                .arm_round(task.arm, &task.state, task.round, task.budget_per_arm)
                .map_err(|e| failed(&e))?;
            return Ok(Output::Bytes(bytes));
        }
        Job::Stein {
            chains,
            cols,
            thin,
            fssd,
            scores,
        } => {
            let dim = prepared.model().dim();
            if cols != dim {
                return Err(Failure::Message(format!(
                    "draws: {cols} parameters, but the model has {dim} ({})",
                    prepared.model().parameter_names().join(", ")
                )));
            }
            return stein(&prepared, &chains, thin, fssd, scores);
        }
        Job::Reference(settings) => return reference(&prepared, &settings, shared),
        Job::Coreset(_) => unreachable!("run_source runs coreset jobs before preparing a run"),
        Job::Chains(chains) => {
            let dir = out
                .as_ref()
                .ok_or_else(|| Failure::Message("no `out`".into()))?;
            return run_chains(&cfg, &prepared, dir, &chains, shared);
        }
        Job::Finish => {
            let dir = out
                .as_ref()
                .ok_or_else(|| Failure::Message("no `out`".into()))?;
            let (recorded, _) =
                pipeline::recorded_run(dir, &cfg, prepared.model()).map_err(text)?;
            let output = pipeline::RunOutput::in_directory(dir, true);
            let unfinished = pipeline::unfinished_chains(&recorded, &output).map_err(text)?;
            if !unfinished.is_empty() {
                return Err(Failure::Message(format!(
                    "the run in {} is not finished: chains {unfinished:?} do not have all their \
                     draws yet",
                    dir.path().display()
                )));
            }
            true
        }
        Job::Sample { resume } => resume,
        Job::Prepare => false,
    };
    let prepare = matches!(job, Job::Prepare);
    let finish = matches!(job, Job::Finish);
    let model = prepared.model();
    let (cfg, resolved, recorded_choices) = match (&out, resume) {
        (Some(dir), true) => {
            // The run as resolved when it started; its chains go on from their checkpoints.
            let (resolved_cfg, report) = pipeline::recorded_run(dir, &cfg, model).map_err(text)?;
            if !finish {
                shared.say(format!(
                    "continuing the run in {} from its checkpoints",
                    dir.path().display()
                ));
            }
            (resolved_cfg, None, report)
        }
        _ => {
            if default_path::takes_default_path(&cfg) {
                shared.say(
                    "default path (no sampler given): MAP, Laplace preconditioner, gradient, then MAMBA's step",
                );
            }
            let given = cfg.clone();
            let (cfg, resolved) = default_path::resolve_if_needed(cfg, model).map_err(text)?;
            for line in resolved.iter().flat_map(|r| &r.report.choices) {
                shared.say(format!("  {line}"));
            }
            if let Some(dir) = &out {
                pipeline::record_run(
                    dir,
                    &given,
                    model,
                    &cfg,
                    resolved.as_ref().map(|r| &r.report),
                )
                .map_err(text)?;
            }
            (cfg, resolved, None)
        }
    };
    let output = out
        .as_ref()
        .map(|dir| pipeline::RunOutput::in_directory(dir, resume));
    if let (true, Some(output)) = (prepare, &output) {
        let draws = pipeline::prepare_store(&cfg, model, output).map_err(text)?;
        let report = serde_json::json!({ "chains": cfg.run.chains, "draws": draws });
        return Ok(Output::Report(report.to_string()));
    }
    let (mut outcome, draws) = pipeline::execute_resolved(
        &cfg,
        &prepared,
        resolved,
        output.as_ref(),
        &shared.progress,
        &shared.stop,
    )
    .map_err(text)?;
    if recorded_choices.is_some() {
        outcome.default_path = recorded_choices;
    }
    if let Some(check) = &outcome.bias_check {
        shared.say(check.describe());
    }
    let summary = pipeline::summary_json(&outcome, &cfg, model);
    if let Some(dir) = &out {
        pipeline::write_summary(dir.path(), &summary).map_err(text)?;
    }
    let statistics = outcome
        .run
        .chains
        .into_iter()
        .map(|c| c.draw_statistics)
        .collect();
    // On the constrained scale (σ, not log σ), as the store and the summary; θ beside.
    let (draws, unconstrained) = constrained_chains(model, draws);
    Ok(Output::Draws {
        draws,
        dim: model.dim(),
        names: model.parameter_names(),
        summary: summary.to_string(),
        statistics,
        unconstrained,
    })
}

/// Chains `chains` of the prepared run in `dir`, each from its checkpoint if it has one (as
/// `sgmcmc run --chains`): per chain, its draws, those it had from its checkpoint, its
/// iterations and seconds here, and whether it diverged.
fn run_chains(
    given: &Config,
    prepared: &pipeline::Prepared,
    dir: &RunDirectory,
    chains: &[usize],
    shared: &Shared,
) -> Result<Output, Failure> {
    let text = |e: pipeline::PipelineError| Failure::Message(e.to_string());
    let (cfg, output) =
        pipeline::chains_task_output(dir, given, prepared.model(), chains).map_err(text)?;
    let (outcome, _) = pipeline::execute_resolved(
        &cfg,
        prepared,
        None,
        Some(&output),
        &shared.progress,
        &shared.stop,
    )
    .map_err(text)?;
    let reports: Vec<serde_json::Value> = outcome
        .run
        .chains
        .iter()
        .map(|chain| {
            serde_json::json!({
                "chain": chain.chain,
                "draws": chain.draws,
                "from_checkpoint": outcome.resumed_draws.as_ref().map_or(0, |kept| kept[chain.chain]),
                "iterations": chain.iterations,
                "seconds": chain.seconds,
                "diverged": chain.divergence.is_some(),
            })
        })
        .collect();
    let report = serde_json::json!({
        "chains": reports,
        "interrupted": outcome.interrupted,
        "process": std::process::id(),
    });
    Ok(Output::Report(report.to_string()))
}

/// Coreset MCMC on the file's settings over `source`'s model: the draws after training, and a
/// summary with the coreset (points, weights), the hot start and the metric along the run.
fn coreset(
    file: &sgmcmc_runfile::config::coreset::CoresetFile,
    source: Source,
    shared: &Shared,
) -> Result<Output, Failure> {
    use pipeline::CoresetModel;
    let text = |e: pipeline::PipelineError| Failure::Message(e.to_string());
    let (outcome, callbacks) = match source {
        Source::RunFile => (pipeline::run_coreset_file(file, &shared.stop, None), None),
        Source::Arrays(ds) => (
            pipeline::run_coreset(file, CoresetModel::Data(ds), &shared.stop, None),
            None,
        ),
        Source::User {
            model, callbacks, ..
        } => (
            pipeline::run_coreset(
                file,
                CoresetModel::External(Box::new(model)),
                &shared.stop,
                None,
            ),
            Some(callbacks),
        ),
    };
    if let Some(e) =
        callbacks.and_then(|c| c.error.lock().unwrap_or_else(|e| e.into_inner()).take())
    {
        return Err(Failure::Callback(e));
    }
    let outcome = outcome.map_err(text)?;
    let run = &outcome.run;
    let dim = outcome.parameter_names.len();
    let chains: Vec<&[f64]> = run.draws.iter().map(Vec::as_slice).collect();
    let parameters = if chains.iter().all(|c| c.len() >= dim && dim > 0) {
        sgmcmc::io::summarize_parameters(&outcome.parameter_names, &chains)
    } else {
        Vec::new()
    };
    let summary = serde_json::json!({
        "method": "coreset",
        "optimiser": outcome.optimiser,
        "kernel": outcome.kernel,
        "num_data": outcome.num_data,
        "seconds": outcome.seconds,
        "coreset": { "points": run.coreset.points, "weights": run.coreset.weights },
        "hot_start_iteration": run.hot_start_iteration,
        "hot_start_passed": run.hot_start_passed,
        "optimiser_steps": run.optimiser_steps,
        "iterations": run.iterations,
        "metric": run.metric,
        "stopped": run.stopped,
        "chains": run.draws.len(),
        "summarised_chains": (0..run.draws.len()).collect::<Vec<_>>(),
        "parameters": parameters,
    });
    Ok(Output::Draws {
        draws: outcome.run.draws,
        dim,
        names: outcome.parameter_names,
        summary: summary.to_string(),
        statistics: Vec::new(),
        unconstrained: None,
    })
}

/// Chains of θ on `model`'s constrained scale, and θ itself when that differs (moved
/// unchanged, with no θ beside, when the model has no constraints).
fn constrained_chains(
    model: &dyn sgmcmc::model::Model,
    chains: Vec<Vec<f64>>,
) -> (Vec<Vec<f64>>, Option<Vec<Vec<f64>>>) {
    if !model.is_constrained() {
        return (chains, None);
    }
    let constrained = chains.iter().map(|c| constrain_draws(model, c)).collect();
    (constrained, Some(chains))
}

/// NUTS (nuts-rs) on the full-data posterior: the draws, and the summary with each chain's
/// step size, divergences and gradient evaluations.
fn reference(
    prepared: &pipeline::Prepared,
    settings: &sgmcmc::reference::NutsSettings,
    shared: &Shared,
) -> Result<Output, Failure> {
    let model = prepared.model();
    let result = sgmcmc::reference::run_nuts_until(model, settings, &shared.progress, &shared.stop)
        .map_err(|e| Failure::Message(e.to_string()))?;
    if result.divergences() > 0 {
        shared.say(format!(
            "WARNING: {} divergent transitions after warm-up; the reference may be biased",
            result.divergences()
        ));
    }
    let summary = serde_json::json!({
        "method": "nuts",
        "settings": {
            "chains": settings.chains,
            "warmup": settings.warmup,
            "draws": settings.draws,
            "seed": settings.seed,
            "dense_laplace_metric": settings.dense_laplace_metric,
        },
        "reference": result,
        "chains": settings.chains,
        "summarised_chains": (0..settings.chains).collect::<Vec<_>>(),
        "parameters": result.parameters,
        "interrupted": result.interrupted,
    });
    let (draws, unconstrained) = constrained_chains(model, result.draws);
    Ok(Output::Draws {
        draws,
        dim: model.dim(),
        names: model.parameter_names(),
        summary: summary.to_string(),
        statistics: Vec::new(),
        unconstrained,
    })
}

/// The KSD (IMQ) and optionally FSSD-opt of `chains` (each thinned by `thin`) with full-batch
/// scores, as `sgmcmc ksd` computes them.
fn stein(
    prepared: &pipeline::Prepared,
    chains: &[Vec<f64>],
    thin: usize,
    fssd: bool,
    given: SteinScores,
) -> Result<Output, Failure> {
    use sgmcmc::stein::{self, FssdSettings, SteinSettings};
    let message = |e: &dyn std::fmt::Display| Failure::Message(e.to_string());
    let model = prepared.model();
    let dim = model.dim();
    // Given on the constrained scale (σ), as `sample` returns them; scored on θ (log σ), where
    // the Stein identity holds.
    let chains: Vec<Vec<f64>> = chains
        .iter()
        .map(|c| sgmcmc::model::constraint::unconstrain_draws(model, c))
        .collect::<Result<_, _>>()
        .map_err(|e| message(&format!("draws: {e}")))?;
    let (mut kept, mut scores, mut score_seconds) = (Vec::new(), Vec::new(), 0.0);
    for (c, chain) in chains.iter().enumerate().filter(|(_, c)| !c.is_empty()) {
        if let SteinScores::Given(given) = &given {
            let thinned = sgmcmc::stein::every_kth_row(chain, dim, thin);
            if given[c].len() != thinned.len() {
                return Err(Failure::Message(format!(
                    "scores: chain {c} has {} values for {} thinned draws of {dim} parameters",
                    given[c].len(),
                    thinned.len() / dim.max(1)
                )));
            }
            kept.extend_from_slice(&thinned);
            scores.extend_from_slice(&given[c]);
            continue;
        }
        let t = stein::full_batch_scores(model, chain, dim, thin).map_err(|e| message(&e))?;
        kept.extend_from_slice(&t.draws);
        scores.extend_from_slice(&t.scores);
        score_seconds += t.seconds;
    }
    if let SteinScores::Only = given {
        return Ok(Output::Matrix {
            values: scores,
            cols: dim,
            seconds: score_seconds,
        });
    }
    if kept.is_empty() {
        return Err(Failure::Message("draws: there are none".into()));
    }
    let settings = SteinSettings {
        fssd: fssd.then(FssdSettings::default),
        ..SteinSettings::default()
    };
    let report = stein::evaluate(&kept, &scores, dim, &settings).map_err(|e| message(&e))?;
    let value = serde_json::json!({
        "thin": thin,
        "score_seconds": score_seconds,
        "report": report,
    });
    Ok(Output::Report(value.to_string()))
}

/// MAMBA, grid search or the heuristic on the `[tune]` table, each round's ranking said as it
/// ends. With an output directory, the run is recorded there and MAMBA's progress saved after
/// every round (as `sgmcmc tune --out`), so that `resume` continues it after its last saved
/// round; `tune.json` is written there at the end.
fn tune(
    cfg: &Config,
    prepared: &pipeline::Prepared,
    method: pipeline::TuneMethod,
    out: Option<&RunDirectory>,
    resume: bool,
    elsewhere: Option<Arc<Py<PyAny>>>,
    shared: &Shared,
) -> Result<Output, Failure> {
    let started = std::time::Instant::now();
    let message = |e: &dyn std::fmt::Display| Failure::Message(e.to_string());
    let session = pipeline::TuneSession::new(cfg, prepared).map_err(|e| message(&e))?;
    let model = prepared.model();
    let checkpoints = match out {
        Some(dir) => {
            if resume {
                pipeline::recorded_tuning(dir, cfg, model).map_err(|e| message(&e))?;
            } else {
                pipeline::record_tuning(dir, cfg, model).map_err(|e| message(&e))?;
            }
            Some(CheckpointDirectory::of(dir))
        }
        None => None,
    };
    let mut on_round = |records: &[sgmcmc::tuning::ArmRound], budget: f64| {
        if let Some(best) = records.first() {
            shared.say(format!(
                "round {}: {} arms at {budget:.4e} each; best {} (metric {:.4e})",
                best.round,
                records.len(),
                best.label,
                best.metric
            ));
        }
    };
    let rounds = elsewhere.map(|callable| PythonRounds {
        callable,
        map: session.map.theta.clone(),
        dim: model.dim(),
    });
    let tuned = session
        .tune(
            method,
            checkpoints.as_ref().map(|c| (c, resume)),
            rounds
                .as_ref()
                .map(|r| r as &dyn sgmcmc::tuning::RoundRunner),
            &mut on_round,
        )
        .map_err(|e| message(&e))?;
    let report = tuned.report(session.map_seconds, started.elapsed().as_secs_f64());
    let winner = session.winner_config(tuned.winner());
    if let Some(dir) = out {
        let text = serde_json::to_string_pretty(&report).map_err(|e| message(&e))?;
        dir.write("tune.json", text.as_bytes()).map_err(|e| {
            message(&format!(
                "cannot write {}: {e}",
                dir.join("tune.json").display()
            ))
        })?;
    }
    Ok(Output::Tuned {
        report: report.to_string(),
        winner_config: serde_json::to_string(&winner).map_err(|e| message(&e))?,
        winner_draws: tuned.winner_draws().map(<[f64]>::to_vec),
        dim: model.dim(),
        names: model.parameter_names(),
    })
}

#[pymethods]
impl RunHandle {
    /// Wait up to `timeout` seconds (GIL released) for the run to end; whether it has.
    fn wait(&self, py: Python<'_>, timeout: f64) -> bool {
        let timeout = Duration::from_secs_f64(timeout.clamp(0.0, 3600.0));
        let shared = Arc::clone(&self.shared);
        py.detach(move || {
            let state = shared.state.lock().unwrap_or_else(|e| e.into_inner());
            let (state, _) = shared
                .finished
                .wait_timeout_while(state, timeout, |s| matches!(s, State::Running))
                .unwrap_or_else(|e| e.into_inner());
            !matches!(*state, State::Running)
        })
    }

    /// Per chain: iterations done, iterations in all (0 if the budget is not a count), finished.
    fn progress(&self) -> Vec<(usize, usize, bool)> {
        let p = &self.shared.progress;
        (0..self.chains)
            .map(|c| {
                (
                    p.done[c].load(Ordering::Relaxed),
                    p.total[c].load(Ordering::Relaxed),
                    p.finished[c].load(Ordering::Relaxed),
                )
            })
            .collect()
    }

    /// Lines the run has to say since the last call (the default path's choices, the bias check).
    fn messages(&self) -> Vec<String> {
        std::mem::take(
            &mut *self
                .shared
                .messages
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        )
    }

    /// Ask every chain to stop at its next iteration; the draws so far are kept.
    fn stop(&self) {
        self.shared.stop.store(true, Ordering::Relaxed);
    }

    /// Wait for the end of the run and return `{"draws": [array (draws, D) per chain], "names":
    /// [...], "summary": "<summary.json>"}`; raises `SgmcmcError` if the run failed.
    fn result<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        while !self.wait(py, 0.2) {
            py.check_signals()?;
        }
        if let Some(t) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            t.join()
                .map_err(|_| SgmcmcError::new_err("the run's thread panicked"))?;
        }
        let state = std::mem::replace(
            &mut *self.shared.state.lock().unwrap_or_else(|e| e.into_inner()),
            State::Taken,
        );
        let output = match state {
            State::Done(Ok(o)) => o,
            State::Done(Err(Failure::Message(e))) => return Err(SgmcmcError::new_err(e)),
            State::Done(Err(Failure::Callback(e))) => {
                // The user's own exception, traceback kept, with a note on where it came from.
                let _ = e.value(py).call_method1(
                    "add_note",
                    ("raised by the model's callback while sampling (sgmcmc)",),
                );
                return Err(e);
            }
            State::Taken => return Err(SgmcmcError::new_err("the run's result was already taken")),
            State::Running => unreachable!("waited for the end of the run"),
        };
        let dict = PyDict::new(py);
        if let Some(note) = self
            .shared
            .note
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            dict.set_item("note", note)?;
        }
        match output {
            Output::Report(report) => dict.set_item("report", report)?,
            Output::Bytes(bytes) => {
                dict.set_item("bytes", pyo3::types::PyBytes::new(py, &bytes))?;
            }
            Output::Matrix {
                values,
                cols,
                seconds,
            } => {
                let rows = values.len() / cols.max(1);
                dict.set_item(
                    "matrix",
                    PyArray1::from_vec(py, values).reshape([rows, cols])?,
                )?;
                dict.set_item("seconds", seconds)?;
            }
            Output::Draws {
                draws,
                dim,
                names,
                summary,
                statistics,
                unconstrained,
            } => {
                dict.set_item("sample_stats", sample_stats(py, &statistics)?)?;
                dict.set_item("draws", chain_arrays(py, draws, dim)?)?;
                if let Some(theta) = unconstrained {
                    dict.set_item("unconstrained", chain_arrays(py, theta, dim)?)?;
                }
                dict.set_item("names", names)?;
                dict.set_item("summary", summary)?;
            }
            Output::Tuned {
                report,
                winner_config,
                winner_draws,
                dim,
                names,
            } => {
                dict.set_item("report", report)?;
                dict.set_item("winner_config", winner_config)?;
                if let Some(d) = winner_draws {
                    let rows = d.len() / dim.max(1);
                    dict.set_item(
                        "winner_draws",
                        PyArray1::from_vec(py, d).reshape([rows, dim])?,
                    )?;
                }
                dict.set_item("names", names)?;
            }
        }
        Ok(dict)
    }
}

/// Per statistic that any draw has, one array per chain (NaN or false where a draw has none):
/// `{"step_size": [...], "thermostat": [...], "accepted": [...]}`.
fn sample_stats<'py>(
    py: Python<'py>,
    statistics: &[Vec<sgmcmc::sampler::DrawStatistics>],
) -> PyResult<Bound<'py, PyDict>> {
    use sgmcmc::sampler::DrawStatistics;
    /// One array per chain of `get` at each draw, `missing` where a draw has none; `None` if
    /// no draw has it.
    fn per_chain<'py, T: numpy::Element + Copy>(
        py: Python<'py>,
        statistics: &[Vec<DrawStatistics>],
        get: impl Fn(&DrawStatistics) -> Option<T>,
        missing: T,
    ) -> Option<Vec<Bound<'py, PyArray1<T>>>> {
        statistics
            .iter()
            .flatten()
            .any(|s| get(s).is_some())
            .then(|| {
                statistics
                    .iter()
                    .map(|c| {
                        let v: Vec<T> = c.iter().map(|s| get(s).unwrap_or(missing)).collect();
                        PyArray1::from_vec(py, v)
                    })
                    .collect()
            })
    }
    let stats = PyDict::new(py);
    if let Some(a) = per_chain(py, statistics, |s| s.step_size, f64::NAN) {
        stats.set_item("step_size", a)?;
    }
    if let Some(a) = per_chain(py, statistics, |s| s.thermostat, f64::NAN) {
        stats.set_item("thermostat", a)?;
    }
    if let Some(a) = per_chain(py, statistics, |s| s.accepted, false) {
        stats.set_item("accepted", a)?;
    }
    Ok(stats)
}

/// The draws of a Zarr store written by `sgmcmc run` (or `sample(..., out=...)`):
/// `{"draws": [array (draws, D) per chain], "names": [...], "sample_stats": {...}}` (the
/// statistics as `sample_stats` gives them; empty when the store has none), and
/// `"unconstrained"` (per chain of the posterior group) when the store has an
/// `unconstrained_posterior`.
#[pyfunction]
#[pyo3(signature = (path, variable="theta"))]
pub fn read_store<'py>(
    py: Python<'py>,
    path: PathBuf,
    variable: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let (stored, mut statistics, unconstrained) = py
        .detach(|| {
            let unconstrained = path
                .join(sgmcmc::io::zarr::UNCONSTRAINED)
                .is_dir()
                .then(|| sgmcmc::io::zarr_read::read_unconstrained(&path, variable))
                .transpose()?;
            Ok::<_, sgmcmc::io::SinkError>((
                sgmcmc::io::read_all_chains(&path, variable)?,
                sgmcmc::io::read_draw_statistics(&path)?,
                unconstrained,
            ))
        })
        .map_err(|e| SgmcmcError::new_err(e.to_string()))?;
    // Statistics are stored for the posterior's chains: none for a chain left out of it.
    statistics.resize(stored.chains.len(), Vec::new());
    let dict = PyDict::new(py);
    dict.set_item("draws", chain_arrays(py, stored.chains, stored.dim)?)?;
    dict.set_item("names", stored.parameter_names)?;
    dict.set_item("sample_stats", sample_stats(py, &statistics)?)?;
    if let Some(theta) = unconstrained {
        dict.set_item("unconstrained", chain_arrays(py, theta.chains, theta.dim)?)?;
    }
    Ok(dict)
}

/// Each chain's row-major draws as a (draws, `dim`) array.
fn chain_arrays<'py>(
    py: Python<'py>,
    chains: Vec<Vec<f64>>,
    dim: usize,
) -> PyResult<Vec<Bound<'py, numpy::PyArray2<f64>>>> {
    chains
        .into_iter()
        .map(|d| {
            let rows = d.len() / dim.max(1);
            PyArray1::from_vec(py, d).reshape([rows, dim])
        })
        .collect()
}
