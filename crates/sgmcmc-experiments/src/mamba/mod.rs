//! The shared harness of the MAMBA paper's experiments (paper 000 §4; reference §5.6–5.7):
//! six samplers, each tuned by MAMBA-KSD (optionally MAMBA-FSSD), grid search and the 1/N
//! heuristic; then each choice run `final_runs` times from the MAP for `final_seconds`, with a
//! metric curve against wall-clock time (Figures 1–3: mean ± 2 sd over the runs) and the
//! columns of the paper's tables.
//!
//! An experiment supplies an [`ExperimentSpec`] (its `[data]`/`[model]`/`[evaluation]` tables,
//! `[tune.grid]`, `[tune.grid_search]`) and a [`FinalMetrics`] (what one finished run measures,
//! and its curve); [`logreg`] is the logistic-regression experiment of §4.1.

pub mod bnn;
pub mod fssd_study;
pub mod ksd_estimators;
pub mod logreg;
pub mod pmf;

use crate::plot::{self, Figure, Panel, PlotError, Series};
use serde::Serialize;
use sgmcmc::diagnostics::accuracy::AccuracyError;
use sgmcmc::diagnostics::accuracy::PredictiveMetrics;
use sgmcmc::estimator::BatchSize;
use sgmcmc::io::TimingSink;
use sgmcmc::reference::{NutsError, ReferenceError};
use sgmcmc::reference::{NutsSettings, ReferenceMoments, run_nuts};
use sgmcmc::runner::NoProgress;
use sgmcmc::settings::{EstimatorKind, EstimatorSettings, GridValue, SamplerSettings};
use sgmcmc::stein::SteinError;
use sgmcmc::stein::{ImqKernel, Kernel, ksd};
use sgmcmc::tuning::{ArmRound, ArmSettings, ScoreFunction, TuneError, TuneScores};
use sgmcmc::tuning::{GridValues, TuneGrid};
use sgmcmc_runfile::config::ConfigError;
use sgmcmc_runfile::config::{
    Config, DataConfig, EvaluationConfig, GridSearchConfig, ModelConfig, RunConfig, SamplerTable,
    TuneConfig, TuneMetric,
};
use sgmcmc_runfile::pipeline::PipelineError;
use sgmcmc_runfile::pipeline::{self, Outcome, Prepared, TuneSession, winner_config};
use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// Why a MAMBA experiment could not run: each of its steps' own typed error, or a setting
/// of the experiment out of range.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MambaError {
    /// An experiment setting out of range (the message names the flag).
    #[error("{0}")]
    Setting(String),
    /// Tuning (MAMBA, grid search, the heuristic).
    #[error(transparent)]
    Tune(#[from] TuneError),
    /// Preparing the problem or running a final chain.
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    /// Writing a run file.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The NUTS reference.
    #[error(transparent)]
    Nuts(#[from] NutsError),
    /// Reading or writing the reference moments.
    #[error(transparent)]
    Reference(#[from] ReferenceError),
    /// The test metrics of a final run.
    #[error(transparent)]
    Accuracy(#[from] AccuracyError),
    /// Full-batch scores or a KSD.
    #[error(transparent)]
    Stein(#[from] SteinError),
}

/// The six samplers, by name; [`sampler_settings`] gives each one's settings.
pub const SAMPLERS: [&str; 6] = ["SGLD", "SGLD-CV", "SGHMC", "SGHMC-CV", "SGNHT", "SGNHT-CV"];

/// Sampler `index` of [`SAMPLERS`]: its settings (the step is MAMBA's to choose) and its
/// gradient estimator (minibatch, or control variates at the MAP for the -CV variants).
pub fn sampler_settings(index: usize) -> Option<(SamplerSettings, EstimatorKind)> {
    let estimator = if index.is_multiple_of(2) {
        EstimatorKind::Minibatch
    } else {
        EstimatorKind::ControlVariates
    };
    let sampler = match index / 2 {
        0 => SamplerSettings::sgld(1e-5),
        1 => SamplerSettings::sghmc(1e-6, 5),
        2 => SamplerSettings::sgnht(1e-6),
        _ => return None,
    };
    Some((sampler, estimator))
}

/// What an experiment puts into each sampler's run.
#[derive(Debug, Clone)]
pub struct ExperimentSpec {
    /// What the run files say they are, e.g. "MAMBA logistic regression (paper 000 §4.1)".
    pub title: String,
    /// The data.
    pub data: DataConfig,
    /// The model and its prior.
    pub model: ModelConfig,
    /// The test split or test files and the metrics' settings.
    pub evaluation: Option<EvaluationConfig>,
    /// MAMBA's grid (step sizes and batch sizes).
    pub grid: TuneGrid,
    /// SGHMC's inner steps L on the grid (empty: the sampler's L only).
    pub sghmc_inner_steps: Vec<usize>,
    /// The grid-search baseline (estimates, batch size, start noise, selection).
    pub grid_search: GridSearchConfig,
    /// Thinning of MAMBA's draws before the metric.
    pub tune_thin: usize,
    /// At most this many draws per arm and round scored.
    pub tune_max_scored: Option<usize>,
    /// Per-sampler grids replacing `grid` (index into [`SAMPLERS`]), e.g. the BNN
    /// experiment's SGNHT re-run on log10 steps −5 … −7.5.
    pub grid_overrides: Vec<(usize, TuneGrid)>,
    /// The MAP search: the `map_*` keys of this `[run]` table (its other keys are the
    /// harness's to set).
    pub map: RunConfig,
}

/// The papers' grids: log10 step `from`, `from` − 0.5, …, `to` × the batch sizes
/// `percents` (% of N).
pub fn step_batch_grid(from: f64, to: f64, percents: &[f64]) -> TuneGrid {
    TuneGrid {
        log10_step_size: Some(GridValues::Range { from, to, by: 0.5 }),
        batch_size: Some(percents.iter().map(|&p| BatchSize::percent(p)).collect()),
        ..TuneGrid::default()
    }
}

/// The grid of the PMF and neural-network experiments (App. C.2.3, C.3.3): log10 step
/// −2, −2.5, …, −7.5 × batch 100, 10, 1 % (36 arms; SGHMC adds L ∈ {5, 10}).
pub fn real_data_grid() -> TuneGrid {
    step_batch_grid(-2.0, -7.5, &[100.0, 10.0, 1.0])
}

/// The harness's settings (each experiment maps its own settings onto these).
#[derive(Debug, Clone, Serialize)]
pub struct HarnessSettings {
    /// Seed of the runs.
    pub seed: u64,
    /// MAMBA's R (thread-CPU seconds).
    pub budget_seconds: f64,
    /// Length of each tuned sampler's final run (wall seconds, one chain).
    pub final_seconds: f64,
    /// Independent final runs per choice (seeds `seed`, `seed + 1`, …).
    pub final_runs: usize,
    /// Indices into [`SAMPLERS`].
    pub samplers: Vec<usize>,
    /// Also MAMBA with FSSD-opt.
    pub fssd: bool,
    /// Only MAMBA with FSSD-opt.
    pub fssd_only: bool,
    /// Only MAMBA: no grid search and no heuristic (their choices do not depend on MAMBA's
    /// scores, so a re-run that changes only `tune_scores` can pair its final runs with an
    /// earlier run's baselines of the same seeds).
    pub mamba_only: bool,
    /// Samplers (indices) whose MAMBA is re-run with the full-batch KSD audited.
    pub rank_check: Vec<usize>,
    /// Subsample of MAMBA's control-variate scores.
    pub score_subsample: usize,
    /// MAMBA's scores at the kept draws: the control-variate surrogate or the exact full-data
    /// score (`[tune] scores`).
    pub tune_scores: TuneScores,
    /// Threads for the arms (0: every core).
    pub threads: usize,
    /// Checkpoints of the curves: K evenly spaced times up to `final_seconds`.
    pub curve_points: usize,
    /// Keep every `final_thin`-th iterate of a final run (1: every iterate). At D ≈ 5·10⁴ a
    /// 20 s run at thin 1 would hold tens of GB of draws.
    pub final_thin: usize,
    /// Fraction of a final run's kept draws dropped as burn-in, from the whole run and from
    /// each curve prefix alike (0: none).
    pub final_burn_in: f64,
}

/// The run of sampler `index` as a run file's typed value: the spec's problem and grid,
/// `[run]` for the final runs (one chain for `final_seconds`), and `[tune]` with the metric
/// (KSD, or FSSD-opt when `fssd`).
pub fn run_config(
    spec: &ExperimentSpec,
    settings: &HarnessSettings,
    index: usize,
    fssd: bool,
) -> Result<Config, MambaError> {
    let (method, estimator) = sampler_settings(index).ok_or_else(|| {
        MambaError::Setting(format!(
            "sampler index {index} out of range (0..{})",
            SAMPLERS.len()
        ))
    })?;
    let mut grid = spec
        .grid_overrides
        .iter()
        .find(|(i, _)| *i == index)
        .map_or(&spec.grid, |(_, g)| g)
        .clone();
    if matches!(method, SamplerSettings::Sghmc { .. }) && !spec.sghmc_inner_steps.is_empty() {
        let inner = spec
            .sghmc_inner_steps
            .iter()
            .map(|&l| GridValue::Integer(l as i64))
            .collect();
        grid.sampler.insert("inner_steps".into(), inner);
    }
    let tune = TuneConfig {
        budget_seconds: Some(settings.budget_seconds),
        metric: if fssd {
            TuneMetric::Fssd
        } else {
            TuneMetric::Ksd
        },
        thin: spec.tune_thin,
        max_scored_draws: spec.tune_max_scored,
        score_subsample: settings.score_subsample,
        scores: settings.tune_scores,
        threads: Some(settings.threads),
        grid_search: spec.grid_search.clone(),
        ..TuneConfig::new(grid)
    };
    Ok(Config {
        data: spec.data.clone(),
        model: spec.model.clone(),
        sampler: Some(SamplerTable {
            method,
            schedule: None,
        }),
        gradient: Some(EstimatorSettings {
            estimator,
            ..EstimatorSettings::default()
        }),
        run: RunConfig {
            seed: settings.seed,
            chains: 1,
            budget_seconds: Some(settings.final_seconds),
            ..spec.map.clone()
        },
        evaluation: spec.evaluation.clone(),
        tune: Some(tune),
    })
}

/// The run file of sampler `index` ([`run_config`]) as TOML text, headed by the spec's
/// title: what `sgmcmc experiment` writes beside its results, for `sgmcmc tune` to rerun.
pub fn config_text(
    spec: &ExperimentSpec,
    settings: &HarnessSettings,
    index: usize,
    fssd: bool,
) -> Result<String, MambaError> {
    let cfg = run_config(spec, settings, index, fssd)?;
    let text = cfg.to_toml()?;
    Ok(format!("# {}: {}\n{text}", spec.title, SAMPLERS[index]))
}

/// A finished final run, handed to [`FinalMetrics::measure`].
pub struct FinishedRun<'a> {
    /// Seed of the run.
    pub seed: u64,
    /// Its kept draws, flat `draws × D`: every `final_thin`-th iterate, burn-in included.
    pub draws: &'a [f64],
    /// Iterations the chain ran.
    pub iterations: usize,
    /// When each kept draw was produced (seconds since the chain started).
    pub times: &'a [f64],
    /// The checkpoint times t₁ < … < t_K = `final_seconds`.
    pub checkpoints: &'a [f64],
    /// The rows each checkpoint measures: those produced up to t_k less the first
    /// `final_burn_in` fraction of them. The last window is the run's final draws.
    pub windows: &'a [Range<usize>],
    /// The run's outcome (divergence, `[evaluation]` metrics over all draws).
    pub outcome: &'a Outcome,
    /// The tuning session of the sampler (MAP, its score).
    pub session: &'a TuneSession<'a>,
}

/// What an experiment measures on one finished final run.
pub trait FinalMetrics {
    /// One run's columns of the paper's table.
    type Run: Clone + Serialize;
    /// Name of the curve metric ("KSD", "ECE"): the y-axis label.
    fn curve_name(&self) -> &str;
    /// The curve on a log y axis.
    fn curve_log_scale(&self) -> bool {
        true
    }
    /// The run's columns, and its curve metric on each prefix `run.prefixes[k]`.
    fn measure(&self, run: &FinishedRun<'_>) -> Result<(Self::Run, Vec<f64>), MambaError>;
    /// Column means over runs.
    fn mean(&self, runs: &[Self::Run]) -> Self::Run;
    /// The headline metric (lower is better) that methods are compared on, e.g. the KSD.
    fn primary(&self, run: &Self::Run) -> f64;
    /// One log line of a run.
    fn describe(&self, run: &Self::Run) -> String;
}

/// The curve of one method: the metric at each checkpoint, per run.
#[derive(Debug, Clone, Serialize)]
pub struct Curve {
    /// Checkpoint times (seconds).
    pub seconds: Vec<f64>,
    /// `runs[r][k]`: run r's metric on its draws up to `seconds[k]`.
    pub runs: Vec<Vec<f64>>,
}

/// One tuning method's choice and its final runs.
#[derive(Debug, Clone, Serialize)]
pub struct MethodResult<R> {
    /// "MAMBA-KSD", "MAMBA-FSSD", "grid search" or "heuristic".
    pub method: String,
    /// The chosen settings.
    pub settings: ArmSettings,
    /// `log10 step / batch % [/ L]`, as the paper's tables.
    pub choice: String,
    /// Seconds the tuner took (wall).
    pub tune_seconds: f64,
    /// The mean over `runs` of every column.
    pub mean: R,
    /// Sample sd over `runs` of the primary metric (0 for one run).
    pub primary_sd: f64,
    /// Each final run, in seed order.
    pub runs: Vec<R>,
    /// The metric against time.
    pub curve: Curve,
}

/// MAMBA's timing on one sampler.
#[derive(Debug, Clone, Serialize)]
pub struct MambaTiming {
    /// Arms M.
    pub arms: usize,
    /// Nominal T (thread-CPU seconds).
    pub nominal_seconds: f64,
    /// MAP + MAMBA wall seconds.
    pub wall_seconds: f64,
    /// Sum of the arms' sampling CPU seconds.
    pub sampling_cpu_seconds: f64,
    /// Sum of build + score + metric seconds.
    pub overhead_seconds: f64,
    /// Threads.
    pub threads: usize,
}

/// Rank agreement of the cheap metric with the full-batch KSD in one round.
#[derive(Debug, Clone, Serialize)]
pub struct RoundAgreement {
    /// Round.
    pub round: usize,
    /// Arms with both metrics finite.
    pub arms: usize,
    /// Spearman's ρ over those arms.
    pub spearman: f64,
    /// Arms the cheap metric kept.
    pub kept: usize,
    /// How many of them the full-batch KSD would also have kept.
    pub kept_agreeing: usize,
}

/// One sampler's results.
#[derive(Debug, Clone, Serialize)]
pub struct SamplerResult<R> {
    /// "SGLD", …
    pub sampler: String,
    /// MAMBA-KSD, [MAMBA-FSSD,] grid search, heuristic.
    pub methods: Vec<MethodResult<R>>,
    /// MAMBA-KSD's timing (when it ran).
    pub timing: Option<MambaTiming>,
    /// The rank check, if asked for.
    pub rank_check: Option<Vec<RoundAgreement>>,
}

/// `round i: label metric (draws), …`, best first: the kept arms, or every arm of a round of
/// at most six.
pub fn round_summary(round: &[ArmRound]) -> String {
    let shown: Vec<String> = round
        .iter()
        .filter(|r| r.kept || round.len() <= 6)
        .map(|r| {
            let mark = if r.kept { "*" } else { "" };
            format!("{mark}{} {:.4e} ({} draws)", r.label, r.metric, r.draws)
        })
        .collect();
    format!(
        "round {} ({} arms, * = kept): {}",
        round.first().map_or(0, |r| r.round),
        round.len(),
        shown.join("; ")
    )
}

/// `log10 step / batch % [/ L]`.
pub fn choice(arm: &ArmSettings) -> String {
    let get = |k: &str| {
        arm.values
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.trim_end_matches('%').to_string())
    };
    let mut parts = vec![
        get("log10_step_size").unwrap_or_default(),
        get("batch_size").unwrap_or_default(),
    ];
    if let Some(l) = get("inner_steps") {
        parts.push(l);
    }
    parts.join(" / ")
}

impl FinishedRun<'_> {
    /// The control-variate score surrogate about the MAP on `subsample` points drawn from
    /// stream `stream` of `seed`: the same for every final run of an experiment.
    pub fn surrogate_scores(&self, seed: u64, stream: u64, subsample: usize) -> ScoreFunction<'_> {
        let mut rng = sgmcmc::rng::stream(seed, stream);
        ScoreFunction::control_variates(
            self.session.prepared.model(),
            &self.session.ctx.start,
            &self.session.ctx.start_score,
            subsample,
            &mut rng,
        )
    }

    /// The rows the run's final metrics use (the last window).
    pub fn final_window(&self) -> Range<usize> {
        self.windows.last().cloned().unwrap_or(0..0)
    }

    /// The draws of rows `window`, flat.
    pub fn window_draws(&self, window: &Range<usize>) -> &[f64] {
        let dim = self.session.prepared.model().dim();
        &self.draws[window.start * dim..window.end * dim]
    }

    /// The `[evaluation.test]` metrics of the draws of `window`, at most `max_draws` of them
    /// evenly spaced (`None`: no test split or no predictive model).
    pub fn test_metrics(
        &self,
        window: &Range<usize>,
        max_draws: usize,
    ) -> Result<Option<PredictiveMetrics>, MambaError> {
        test_metrics(self.session.prepared, self.window_draws(window), max_draws)
    }
}

/// The `[evaluation.test]` metrics of `draws` (flat, one chain), at most `max_draws` of them
/// evenly spaced (`None`: no test split or no predictive model).
pub fn test_metrics(
    prepared: &Prepared,
    draws: &[f64],
    max_draws: usize,
) -> Result<Option<PredictiveMetrics>, MambaError> {
    let (Some(ev), Some(predictive)) = (prepared.evaluation.as_ref(), prepared.predictive()) else {
        return Ok(None);
    };
    let Some(test) = ev.test.as_ref() else {
        return Ok(None);
    };
    test.metrics(
        predictive,
        &[draws],
        draws.len() / predictive.dim(),
        max_draws,
        ev.calibration_bins,
    )
    .map(Some)
    .map_err(MambaError::from)
}

/// The reference moments at `path` if it holds `prepared`'s dimension, else NUTS with
/// (chains, warm-up, draws) from the MAP, written to `path`.
pub fn load_or_run_reference(
    path: &Path,
    (chains, warmup, draws): (usize, usize, usize),
    seed: u64,
    prepared: &Prepared,
    log: &mut dyn FnMut(&str),
) -> Result<ReferenceMoments, MambaError> {
    let model = prepared.model();
    if path.exists() {
        let r = ReferenceMoments::load(path)?;
        if r.dim() == model.dim() {
            log(&format!("reference: {} ({})", path.display(), r.method));
            return Ok(r);
        }
        log(&format!(
            "reference: {} has dimension {}, the model {}: recomputing",
            path.display(),
            r.dim(),
            model.dim()
        ));
    }
    let t = Instant::now();
    let nuts = run_nuts(
        model,
        &NutsSettings {
            chains,
            warmup,
            draws,
            seed,
            ..NutsSettings::default()
        },
        &NoProgress,
    )?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).ok();
    }
    nuts.moments.save(path)?;
    log(&format!(
        "reference: NUTS {chains} x ({warmup} + {draws}) in {:.1} s -> {}",
        t.elapsed().as_secs_f64(),
        path.display()
    ));
    Ok(nuts.moments)
}

/// The checkpoint times t_k = k·T/K, k = 1…K.
pub fn checkpoints(final_seconds: f64, points: usize) -> Vec<f64> {
    let k = points.max(1);
    (1..=k)
        .map(|i| final_seconds * i as f64 / k as f64)
        .collect()
}

/// Draws up to each checkpoint: those produced at or before t_k, and every draw at the last.
pub fn prefix_lengths(times: &[f64], checkpoints: &[f64]) -> Vec<usize> {
    let n = checkpoints.len();
    checkpoints
        .iter()
        .enumerate()
        .map(|(k, &t)| {
            if k + 1 == n {
                times.len()
            } else {
                times.partition_point(|&s| s <= t)
            }
        })
        .collect()
}

/// The rows each checkpoint measures: `⌊b·p⌋..p` for the prefix length p of
/// [`prefix_lengths`] and burn-in fraction b.
pub fn checkpoint_windows(times: &[f64], checkpoints: &[f64], burn_in: f64) -> Vec<Range<usize>> {
    prefix_lengths(times, checkpoints)
        .into_iter()
        .map(|p| ((burn_in.clamp(0.0, 1.0) * p as f64).floor() as usize).min(p)..p)
        .collect()
}

/// The rows of `window` a KSD scores: the multiples of `thin = max(min_thin, ⌈len/max_scored⌉)`
/// in it (aligned to row 0, so windows with the same thinning share rows).
pub fn scored_rows(window: &Range<usize>, min_thin: usize, max_scored: usize) -> Vec<usize> {
    let thin = min_thin
        .max(window.len().div_ceil(max_scored.max(1)))
        .max(1);
    (window.start.next_multiple_of(thin)..window.end)
        .step_by(thin)
        .collect()
}

/// The KSD (IMQ kernel, V-statistic) of each window of `draws`, on its [`scored_rows`], scored
/// by `scores`: the final KSD's thinning applied to every checkpoint. A row's scores are
/// computed once and shared by the windows that keep it. A window with no scored row gives +∞.
pub fn window_ksd_curve(
    draws: &[f64],
    dim: usize,
    windows: &[Range<usize>],
    min_thin: usize,
    max_scored: usize,
    scores: &ScoreFunction<'_>,
) -> Vec<f64> {
    let imq = Kernel::Imq(ImqKernel::default());
    let mut cache: HashMap<usize, Vec<f64>> = HashMap::new();
    windows
        .iter()
        .map(|window| {
            let rows = scored_rows(window, min_thin, max_scored);
            if rows.is_empty() {
                return f64::INFINITY;
            }
            let missing: Vec<usize> = rows
                .iter()
                .copied()
                .filter(|r| !cache.contains_key(r))
                .collect();
            if !missing.is_empty() {
                let flat: Vec<f64> = missing
                    .iter()
                    .flat_map(|&r| draws[r * dim..(r + 1) * dim].iter().copied())
                    .collect();
                let sc = scores.scores(&flat);
                for (i, &r) in missing.iter().enumerate() {
                    cache.insert(r, sc[i * dim..(i + 1) * dim].to_vec());
                }
            }
            let kept: Vec<f64> = rows
                .iter()
                .flat_map(|&r| draws[r * dim..(r + 1) * dim].iter().copied())
                .collect();
            let sc: Vec<f64> = rows.iter().flat_map(|r| cache[r].iter().copied()).collect();
            ksd(&kept, &sc, dim, &imq).map_or(f64::NAN, |k| k.ksd)
        })
        .collect()
}

/// The problem of an experiment, prepared from its first sampler's run; `log` receives the
/// data line.
pub fn prepare_problem(
    spec: &ExperimentSpec,
    settings: &HarnessSettings,
    log: &mut dyn FnMut(&str),
) -> Result<Prepared, MambaError> {
    let index = settings.samplers.first().copied().unwrap_or(0);
    let cfg = run_config(spec, settings, index, false)?;
    let t = Instant::now();
    let prepared = pipeline::prepare(&cfg)?;
    log(&format!(
        "data: N = {}, D = {}, {:.1} s",
        prepared.model().num_data(),
        prepared.model().dim(),
        t.elapsed().as_secs_f64()
    ));
    Ok(prepared)
}

/// The callback of [`run_samplers`] that receives the samplers finished so far.
pub type Finished<'a, R> = dyn FnMut(&[SamplerResult<R>]) + 'a;

/// Tune every sampler of `settings.samplers` (MAMBA-KSD, [MAMBA-FSSD,] grid search, the 1/N
/// heuristic), then run each choice `final_runs` times from the MAP and measure it with
/// `metrics`; `log` receives progress lines, and `finished` the results so far each time a
/// sampler is done (so that a long experiment that stops early keeps its finished samplers).
pub fn run_samplers<M: FinalMetrics>(
    spec: &ExperimentSpec,
    settings: &HarnessSettings,
    prepared: &Prepared,
    metrics: &M,
    log: &mut dyn FnMut(&str),
    finished: &mut Finished<'_, M::Run>,
) -> Result<Vec<SamplerResult<M::Run>>, MambaError> {
    let other = MambaError::Setting;
    if settings.final_runs == 0 {
        return Err(other("--final-runs must be at least 1".into()));
    }
    let t = Instant::now();
    let base = run_config(spec, settings, 0, false)?;
    let map = pipeline::find_run_map(&base, prepared.model())?;
    log(&format!(
        "MAP: {} {} iterations, log posterior {:.6e}, |grad|_inf {:.2e}, {:.1} s (shared by every sampler and final run)",
        map.iterations,
        match base.run.map_optimizer {
            sgmcmc_runfile::config::MapOptimizer::Lbfgs => "L-BFGS",
            sgmcmc_runfile::config::MapOptimizer::Adam => "Adam",
        },
        map.log_posterior,
        map.gradient_norm,
        t.elapsed().as_secs_f64()
    ));
    let mut samplers = Vec::new();
    for &index in &settings.samplers {
        let cfg = run_config(spec, settings, index, false)?;
        let name = SAMPLERS[index];
        let session = TuneSession::from_map(&cfg, prepared, map.clone())?;
        let mamba_settings = session.mamba_settings()?;
        let mut chosen = Vec::new();
        let mut timing = None;
        if !settings.fssd_only {
            let t = Instant::now();
            let (arms, outcome) = session.mamba(&mamba_settings, None, &mut |round, _| {
                log(&format!("{name}: MAMBA-KSD {}", round_summary(round)));
            })?;
            let mamba_wall = t.elapsed().as_secs_f64();
            let timing_ksd = MambaTiming {
                arms: outcome.arms,
                nominal_seconds: outcome.total_budget,
                wall_seconds: session.map_seconds + mamba_wall,
                sampling_cpu_seconds: outcome.sampling_seconds,
                overhead_seconds: outcome.overhead_seconds,
                threads: outcome.threads,
            };
            log(&format!(
                "{name}: MAMBA-KSD chose {} in {:.2} s wall (T = {:.2} s, ratio {:.3})",
                arms[outcome.winner].label(),
                timing_ksd.wall_seconds,
                timing_ksd.nominal_seconds,
                timing_ksd.wall_seconds / timing_ksd.nominal_seconds
            ));
            chosen.push((
                "MAMBA-KSD".to_string(),
                arms[outcome.winner].clone(),
                mamba_wall,
            ));
            timing = Some(timing_ksd);
        }
        if settings.fssd || settings.fssd_only {
            let cfg_f = run_config(spec, settings, index, true)?;
            let session_f = TuneSession::from_map(&cfg_f, prepared, map.clone())?;
            let t = Instant::now();
            let s = session_f.mamba_settings()?;
            let (arms_f, outcome_f) = session_f.mamba(&s, None, &mut |_, _| {})?;
            log(&format!(
                "{name}: MAMBA-FSSD chose {}",
                arms_f[outcome_f.winner].label()
            ));
            chosen.push((
                "MAMBA-FSSD".into(),
                arms_f[outcome_f.winner].clone(),
                t.elapsed().as_secs_f64(),
            ));
        }
        if !settings.fssd_only && !settings.mamba_only {
            let t = Instant::now();
            let (grid_arms, selection, grid) = session.grid_search()?;
            log(&format!(
                "{name}: grid search (by {selection:?}) chose {} ({:.1} s)",
                grid_arms[grid.winner].label(),
                t.elapsed().as_secs_f64()
            ));
            chosen.push((
                "grid search".into(),
                grid_arms[grid.winner].clone(),
                t.elapsed().as_secs_f64(),
            ));
            chosen.push(("heuristic".into(), session.heuristic()?, 0.0));
        }

        let mut methods = Vec::new();
        for (method, arm, tune_seconds) in chosen {
            let mut runs = Vec::with_capacity(settings.final_runs);
            let mut curve = Curve {
                seconds: checkpoints(settings.final_seconds, settings.curve_points),
                runs: Vec::with_capacity(settings.final_runs),
            };
            for r in 0..settings.final_runs {
                let seed = settings.seed.wrapping_add(r as u64);
                let (run, points) = final_run(
                    settings,
                    &cfg,
                    &session,
                    metrics,
                    &arm,
                    seed,
                    &curve.seconds,
                )?;
                log(&format!(
                    "{name} / {method} / seed {seed}: {}",
                    metrics.describe(&run)
                ));
                runs.push(run);
                curve.runs.push(points);
            }
            let mean = metrics.mean(&runs);
            let primary_sd = sample_sd(runs.iter().map(|r| metrics.primary(r)));
            methods.push(MethodResult {
                method,
                choice: choice(&arm),
                settings: arm,
                tune_seconds,
                mean,
                primary_sd,
                runs,
                curve,
            });
        }

        let rank_check = if settings.rank_check.contains(&index) && !settings.fssd_only {
            let mut audited = mamba_settings.clone();
            audited.audit_full_scores = true;
            let (_, outcome) = session.mamba(&audited, None, &mut |_, _| {})?;
            let agreement: Vec<RoundAgreement> =
                outcome.rounds.iter().map(|r| round_agreement(r)).collect();
            for a in &agreement {
                log(&format!(
                    "{name}: rank check round {}: Spearman {:.3} over {} arms; kept {} of {} agree",
                    a.round, a.spearman, a.arms, a.kept_agreeing, a.kept
                ));
            }
            Some(agreement)
        } else {
            None
        };
        samplers.push(SamplerResult {
            sampler: name.to_string(),
            methods,
            timing,
            rank_check,
        });
        finished(&samplers);
    }
    Ok(samplers)
}

/// Run `arm` for `final_seconds` from the MAP (one chain, every `final_thin`-th iterate kept,
/// seed `seed`, no `[evaluation]`),
/// recording when each draw was produced, and measure it with `metrics`.
fn final_run<M: FinalMetrics>(
    settings: &HarnessSettings,
    cfg: &Config,
    session: &TuneSession<'_>,
    metrics: &M,
    arm: &ArmSettings,
    seed: u64,
    checkpoints: &[f64],
) -> Result<(M::Run, Vec<f64>), MambaError> {
    let mut run_cfg = winner_config(cfg, arm);
    run_cfg.run.seed = seed;
    run_cfg.run.chains = 1;
    run_cfg.run.iterations = None;
    run_cfg.run.budget_seconds = Some(settings.final_seconds);
    run_cfg.run.thin = settings.final_thin.max(1);
    run_cfg.run.summary = false;
    run_cfg.run.burn_in = 0;
    // Each experiment measures its own test metrics on the run's window (`test_metrics`).
    run_cfg.evaluation = None;
    run_cfg.run.bias_check = false;
    let stop = AtomicBool::new(false);
    let timing = TimingSink::new(1);
    let (outcome, chains) = pipeline::execute_prepared_with_sink(
        &run_cfg,
        session.prepared,
        None,
        Some(&timing),
        pipeline::Known {
            map: Some(&session.map),
            laplace: None,
        },
        &NoProgress,
        &stop,
    )?;
    let times = timing.into_times().swap_remove(0);
    let windows = checkpoint_windows(&times, checkpoints, settings.final_burn_in);
    metrics.measure(&FinishedRun {
        seed,
        draws: &chains[0],
        iterations: outcome.run.chains.first().map_or(0, |c| c.iterations),
        times: &times,
        checkpoints,
        windows: &windows,
        outcome: &outcome,
        session,
    })
}

/// The sample standard deviation (n − 1), 0 for fewer than two values.
pub fn sample_sd(values: impl Iterator<Item = f64> + Clone) -> f64 {
    let n = values.clone().count();
    if n < 2 {
        return 0.0;
    }
    let mean = values.clone().sum::<f64>() / n as f64;
    (values.map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1) as f64).sqrt()
}

/// The curves as a table (the numbers behind the SVG): per sampler and method, the mean ± 2 sd
/// over the final runs of `metric` × `scale` (e.g. 100 for a fraction in per cent) at each
/// checkpoint (runs with a non-finite value there are left out and counted).
pub fn curve_table<R>(samplers: &[SamplerResult<R>], metric: &str, scale: f64) -> String {
    let Some(seconds) = samplers
        .iter()
        .flat_map(|r| &r.methods)
        .map(|m| &m.curve.seconds)
        .next()
    else {
        return String::new();
    };
    let mut s = format!(
        "\n**{metric} against time** (the paper's figure: mean ± 2 sd over the final runs at each \
         checkpoint; [k] = runs left out: non-finite, or no draw kept yet):\n\n| sampler | method |"
    );
    for t in seconds {
        s.push_str(&format!(" {} s |", fmt_num(*t)));
    }
    s.push_str(&format!("\n|---|---|{}\n", "---|".repeat(seconds.len())));
    for r in samplers {
        for m in &r.methods {
            s.push_str(&format!("| {} | {} |", r.sampler, m.method));
            for k in 0..m.curve.seconds.len() {
                let at: Vec<f64> = m
                    .curve
                    .runs
                    .iter()
                    .filter_map(|run| run.get(k).map(|x| scale * x))
                    .collect();
                let finite: Vec<f64> = at.iter().copied().filter(|x| x.is_finite()).collect();
                let left_out = at.len() - finite.len();
                let cell = if finite.is_empty() {
                    "n/a".to_string()
                } else {
                    let mean = finite.iter().sum::<f64>() / finite.len() as f64;
                    let sd = sample_sd(finite.iter().copied());
                    format!("{} ± {}", fmt_num(mean), fmt_num(2.0 * sd))
                };
                let note = if left_out > 0 {
                    format!(" [{left_out}]")
                } else {
                    String::new()
                };
                s.push_str(&format!(" {cell}{note} |"));
            }
            s.push('\n');
        }
    }
    s
}

/// The curves as an SVG figure: one panel per sampler, one series per method (mean ± 2 sd
/// over the final runs, the paper's Figures 1–3). Methods whose curve has no drawable point
/// (every run diverged) are left out and named in the returned list.
pub fn write_curves_svg<R>(
    path: &Path,
    title: &str,
    metric: &str,
    log_y: bool,
    samplers: &[SamplerResult<R>],
) -> Result<Vec<String>, PlotError> {
    let mut left_out = Vec::new();
    let drawable = |v: &f64| v.is_finite() && (!log_y || *v > 0.0);
    let mut panels = Vec::new();
    for s in samplers {
        let mut series = Vec::new();
        for m in &s.methods {
            let line = Series::mean_and_sd(&m.method, m.curve.seconds.clone(), &m.curve.runs)?;
            if line.mean.iter().any(drawable) {
                series.push(line);
            } else {
                left_out.push(format!("{} / {}", s.sampler, m.method));
            }
        }
        if !series.is_empty() {
            panels.push(Panel {
                title: s.sampler.clone(),
                series,
            });
        }
    }
    plot::write_svg(
        path,
        &Figure::new(title, "wall-clock time (s)", metric, log_y, panels),
    )?;
    Ok(left_out)
}

/// Spearman's ρ (average ranks for ties) and kept-set agreement of one audited round.
pub fn round_agreement(round: &[ArmRound]) -> RoundAgreement {
    let both: Vec<(f64, f64)> = round
        .iter()
        .filter_map(|r| match r.full_batch_ksd {
            Some(f) if r.metric.is_finite() && f.is_finite() => Some((r.metric, f)),
            _ => None,
        })
        .collect();
    let a: Vec<f64> = both.iter().map(|x| x.0).collect();
    let b: Vec<f64> = both.iter().map(|x| x.1).collect();
    let kept = round.iter().filter(|r| r.kept).count();
    // The arms the full-batch KSD would keep: its `kept` best (infinite last, grid order on ties).
    let mut by_full: Vec<&ArmRound> = round.iter().collect();
    by_full.sort_by(|x, y| {
        let fx = x.full_batch_ksd.unwrap_or(f64::INFINITY);
        let fy = y.full_batch_ksd.unwrap_or(f64::INFINITY);
        fx.total_cmp(&fy).then(x.arm.cmp(&y.arm))
    });
    let full_kept: Vec<usize> = by_full.iter().take(kept).map(|r| r.arm).collect();
    let kept_agreeing = round
        .iter()
        .filter(|r| r.kept && full_kept.contains(&r.arm))
        .count();
    RoundAgreement {
        round: round.first().map_or(0, |r| r.round),
        arms: both.len(),
        spearman: spearman(&a, &b),
        kept,
        kept_agreeing,
    }
}

/// Spearman's rank correlation with average ranks for ties (NaN for fewer than 2 points).
pub fn spearman(a: &[f64], b: &[f64]) -> f64 {
    if a.len() < 2 || a.len() != b.len() {
        return f64::NAN;
    }
    let (ra, rb) = (ranks(a), ranks(b));
    let n = a.len() as f64;
    let mean = (n + 1.0) / 2.0;
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for (x, y) in ra.iter().zip(&rb) {
        sab += (x - mean) * (y - mean);
        saa += (x - mean) * (x - mean);
        sbb += (y - mean) * (y - mean);
    }
    sab / (saa * sbb).sqrt()
}

/// Spearman's ρ over the pairs where both are finite.
pub fn rho_finite(a: &[f64], b: &[f64]) -> f64 {
    let (x, y): (Vec<f64>, Vec<f64>) = a
        .iter()
        .zip(b)
        .filter(|(p, q)| p.is_finite() && q.is_finite())
        .map(|(p, q)| (*p, *q))
        .unzip();
    spearman(&x, &y)
}

/// The value of `key` in an arm's label ("key=value, …"), e.g. its `log10_step_size`.
pub fn label_value(label: &str, key: &str) -> Option<f64> {
    label
        .split(", ")
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
}

fn ranks(x: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..x.len()).collect();
    order.sort_by(|&i, &j| x[i].total_cmp(&x[j]));
    let mut r = vec![0.0; x.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && x[order[j + 1]] == x[order[i]] {
            j += 1;
        }
        let average = (i + j) as f64 / 2.0 + 1.0;
        for &k in &order[i..=j] {
            r[k] = average;
        }
        i = j + 1;
    }
    r
}

/// Whether `r` has MAMBA-KSD and both baselines (not, e.g., a `--fssd-only` run), so that
/// [`beats_baselines`] has something to compare.
pub fn has_baselines<R>(r: &SamplerResult<R>) -> bool {
    ["MAMBA-KSD", "grid search", "heuristic"]
        .iter()
        .all(|name| r.methods.iter().any(|m| m.method == *name))
}

/// Whether MAMBA-KSD's value (as `value` reads a method) is below both baselines'.
pub fn beats_baselines<R>(r: &SamplerResult<R>, value: impl Fn(&MethodResult<R>) -> f64) -> bool {
    let get = |m: &str| r.methods.iter().find(|x| x.method == m).map(&value);
    match (get("MAMBA-KSD"), get("grid search"), get("heuristic")) {
        (Some(m), Some(g), Some(h)) => m < g && m < h,
        _ => false,
    }
}

/// In how many seeds MAMBA-KSD's final run has a lower `value` than both baselines' runs of
/// the same seed.
pub fn runs_beating_baselines<R>(r: &SamplerResult<R>, value: impl Fn(&R) -> f64) -> usize {
    let get = |m: &str| r.methods.iter().find(|x| x.method == m);
    let (Some(m), Some(g), Some(h)) = (get("MAMBA-KSD"), get("grid search"), get("heuristic"))
    else {
        return 0;
    };
    m.runs
        .iter()
        .zip(&g.runs)
        .zip(&h.runs)
        .filter(|((m, g), h)| value(m) < value(g) && value(m) < value(h))
        .count()
}

/// Three significant figures or so; "inf" for non-finite values.
pub fn fmt_num(x: f64) -> String {
    if !x.is_finite() {
        "inf".into()
    } else if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// `p` made absolute, so the run files work from anywhere.
pub fn absolute_path(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// The column of a method in the papers' three-method tables (Tables 6–9: MAMBA-KSD, grid
/// search, heuristic).
pub fn paper_column(method: &str) -> Option<usize> {
    match method {
        "MAMBA-KSD" => Some(0),
        "grid search" => Some(1),
        "heuristic" => Some(2),
        _ => None,
    }
}

/// The methods' names, from the first sampler.
fn method_names<R>(samplers: &[SamplerResult<R>]) -> Vec<String> {
    samplers
        .first()
        .map(|r| r.methods.iter().map(|m| m.method.clone()).collect())
        .unwrap_or_default()
}

/// One sentence on where MAMBA's scores came from, for the tables.
pub fn tune_scores_note(settings: &HarnessSettings) -> String {
    let mut note = match settings.tune_scores {
        TuneScores::ControlVariates => format!(
            "\nMAMBA-KSD's scores: the control-variate surrogate on {} data points about the MAP \
             (`[tune] scores = \"control_variates\"`).\n",
            settings.score_subsample
        ),
        TuneScores::Full => "\nMAMBA-KSD's scores: the exact full-data score at every scored draw \
             (`[tune] scores = \"full\"`).\n"
            .to_string(),
    };
    if settings.mamba_only {
        note.push_str("\nOnly MAMBA-KSD was run (`--mamba-only`): no grid search, no heuristic.\n");
    }
    note
}

/// The selected-hyperparameters table: each method's choice `|` the paper's (`paper(sampler
/// index in SAMPLERS, method)`, from the paper's table `paper_name`).
pub fn choice_table<R>(
    samplers: &[SamplerResult<R>],
    paper_name: &str,
    paper: &dyn Fn(usize, &str) -> Option<String>,
) -> String {
    use std::fmt::Write;
    let methods = method_names(samplers);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "**Selected hyperparameters** (log10 step / batch % / L), ours | paper ({paper_name}):\n"
    );
    let _ = writeln!(s, "| sampler | {} |", methods.join(" | "));
    let _ = writeln!(s, "|---|{}", "---|".repeat(methods.len()));
    for r in samplers {
        let idx = SAMPLERS.iter().position(|x| *x == r.sampler).unwrap_or(0);
        let cells: Vec<String> = r
            .methods
            .iter()
            .map(|m| {
                let theirs = paper(idx, &m.method).unwrap_or_default();
                format!("{} \\| {theirs}", m.choice)
            })
            .collect();
        let _ = writeln!(s, "| {} | {} |", r.sampler, cells.join(" | "));
    }
    s
}

/// A table with one row per sampler and one `cell(sampler index in SAMPLERS, method)` per
/// method.
pub fn final_table<R>(
    samplers: &[SamplerResult<R>],
    cell: &dyn Fn(usize, &MethodResult<R>) -> String,
) -> String {
    use std::fmt::Write;
    let methods = method_names(samplers);
    let mut s = String::new();
    let _ = writeln!(s, "| sampler | {} |", methods.join(" | "));
    let _ = writeln!(s, "|---|{}", "---|".repeat(methods.len()));
    for r in samplers {
        let idx = SAMPLERS.iter().position(|x| *x == r.sampler).unwrap_or(0);
        let cells: Vec<String> = r.methods.iter().map(|m| cell(idx, m)).collect();
        let _ = writeln!(s, "| {} | {} |", r.sampler, cells.join(" | "));
    }
    s
}

/// "MAMBA-KSD's mean `metric` below both baselines': k of n samplers", and run by run when
/// there are several final runs (lower `value` is better).
pub fn beats_summary<R>(
    samplers: &[SamplerResult<R>],
    metric: &str,
    harness: &HarnessSettings,
    value: impl Fn(&R) -> f64 + Copy,
) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    if !samplers.iter().any(has_baselines) {
        return s;
    }
    let _ = writeln!(
        s,
        "**MAMBA-KSD's mean {metric} below both baselines'**: {} of {} samplers.\n",
        samplers
            .iter()
            .filter(|r| beats_baselines(r, |m| value(&m.mean)))
            .count(),
        samplers.len()
    );
    if harness.final_runs > 1 {
        let _ = writeln!(
            s,
            "Run by run (paired by seed: every method's runs have seeds {}–{}), MAMBA-KSD's \
             {metric} below both baselines': {}.\n",
            harness.seed,
            harness.seed + harness.final_runs as u64 - 1,
            samplers
                .iter()
                .map(|r| format!(
                    "{} {} of {}",
                    r.sampler,
                    runs_beating_baselines(r, value),
                    harness.final_runs
                ))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    s
}

/// The MAMBA-KSD wall-clock table (MAP + MAMBA against the nominal budget T).
pub fn timing_table<R>(samplers: &[SamplerResult<R>]) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "**MAMBA-KSD wall clock** (the MAP's full-data score + MAMBA; the MAP itself is found \
         once per experiment) against the nominal budget T:\n"
    );
    let _ = writeln!(
        s,
        "| sampler | arms | T (s) | wall (s) | wall / T | sampling CPU (s) | build + scores + KSD (s) | threads |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|");
    for r in samplers {
        let Some(t) = &r.timing else { continue };
        let _ = writeln!(
            s,
            "| {} | {} | {:.3} | {:.3} | {:.3} | {:.2} | {:.2} | {} |",
            r.sampler,
            t.arms,
            t.nominal_seconds,
            t.wall_seconds,
            t.wall_seconds / t.nominal_seconds,
            t.sampling_cpu_seconds,
            t.overhead_seconds,
            t.threads
        );
    }
    s
}

/// The rank-check table (empty when no sampler was checked).
pub fn rank_check_table<R>(samplers: &[SamplerResult<R>]) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let checks: Vec<&SamplerResult<R>> =
        samplers.iter().filter(|r| r.rank_check.is_some()).collect();
    if checks.is_empty() {
        return s;
    }
    let _ = writeln!(
        s,
        "\n**Rank check**: the surrogate-score KSD against the full-batch KSD at the same draws, per round:\n"
    );
    let _ = writeln!(
        s,
        "| sampler | round | arms (both finite) | Spearman ρ | kept by both / kept |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|");
    for r in checks {
        for a in r.rank_check.as_ref().expect("filtered") {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.4} | {} / {} |",
                r.sampler, a.round, a.arms, a.spearman, a.kept_agreeing, a.kept
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_follow_the_draw_times_and_end_with_every_draw() {
        let times = [0.1, 0.2, 0.25, 0.6, 0.9, 1.05];
        let cps = checkpoints(1.0, 4);
        assert_eq!(cps, vec![0.25, 0.5, 0.75, 1.0]);
        // The last draw came after the budget (the runner checks the clock before a step).
        assert_eq!(prefix_lengths(&times, &cps), vec![3, 3, 4, 6]);
        assert_eq!(prefix_lengths(&[], &cps), vec![0, 0, 0, 0]);
    }

    /// Every point of the curve is the KSD computed directly on the prefix's thinned rows, with
    /// the thinning rule of the final KSD (so the last point is the final KSD).
    /// Checked once by breaking the code: caching each row's scores under `r + 1` made this
    /// test fail (a kept row missing from the cache; restored).
    #[test]
    fn prefix_ksd_curve_matches_the_direct_ksd_of_each_prefix() {
        let (data, _) = sgmcmc::data::synthetic::logistic_regression(2000, 3, 5);
        let prior = sgmcmc::model::NormalPrior::new(10.0).unwrap();
        let glm = sgmcmc::model::Glm::new(data, sgmcmc::model::Bernoulli, prior, false).unwrap();
        let model: &dyn sgmcmc::model::Model = &glm;
        let dim = model.dim();
        let p = 401;
        // Deterministic, irregular draws near the origin.
        let draws: Vec<f64> = (0..p * dim)
            .map(|i| ((i * 7919 % 1000) as f64 / 1000.0 - 0.5) * 0.2)
            .collect();
        let scores = ScoreFunction::exact(model);
        let prefixes = [0, 37, 120, 401];
        let windows: Vec<Range<usize>> = prefixes.iter().map(|&p| 0..p).collect();
        let curve = window_ksd_curve(&draws, dim, &windows, 2, 50, &scores);
        assert_eq!(curve[0], f64::INFINITY);
        let imq = Kernel::Imq(ImqKernel::default());
        for (&n, &got) in prefixes.iter().zip(&curve).skip(1) {
            let thin = 2usize.max(n.div_ceil(50));
            let kept = sgmcmc::stein::every_kth_row(&draws[..n * dim], dim, thin);
            let want = ksd(&kept, &scores.scores(&kept), dim, &imq).unwrap().ksd;
            assert!(
                (got - want).abs() <= 1e-12 * want,
                "prefix {n}: {got} vs {want}"
            );
        }
        // The points differ (the curve is not one value repeated).
        assert!(curve[1] != curve[3]);

        // Windows with burn-in dropped (as `checkpoint_windows` gives for b = 0.3): rows
        // 36..121 at thin 2 are 36, 38, …, 120; rows 120..401 at thin 6 are 120, 126, …, 396.
        let times: Vec<f64> = (0..p).map(|i| i as f64 / p as f64).collect();
        let burnt = checkpoint_windows(&times, &[0.3, 1.0], 0.3);
        assert_eq!(burnt, vec![36..121, 120..401]);
        let curve = window_ksd_curve(&draws, dim, &burnt, 2, 50, &scores);
        for (window, &got) in burnt.iter().zip(&curve) {
            let rows = scored_rows(window, 2, 50);
            let thin = 2usize.max(window.len().div_ceil(50));
            assert_eq!(rows[0], window.start.next_multiple_of(thin));
            assert!(rows.iter().all(|r| r % thin == 0 && window.contains(r)));
            assert!(rows.len() <= 51);
            let kept: Vec<f64> = rows
                .iter()
                .flat_map(|&r| draws[r * dim..(r + 1) * dim].iter().copied())
                .collect();
            let want = ksd(&kept, &scores.scores(&kept), dim, &imq).unwrap().ksd;
            assert!((got - want).abs() <= 1e-12 * want, "{window:?}");
        }
    }

    /// The curve table gives mean ± 2 sd over the finite runs at each checkpoint and counts
    /// the runs it leaves out.
    #[test]
    fn curve_table_gives_mean_and_two_sd_of_the_finite_runs() {
        let method = MethodResult {
            method: "MAMBA-KSD".to_string(),
            settings: ArmSettings {
                sampler: sampler_settings(0).unwrap().0,
                gradient: sgmcmc::settings::EstimatorSettings::default(),
                values: Vec::new(),
            },
            choice: String::new(),
            tune_seconds: 0.0,
            mean: (),
            primary_sd: 0.0,
            runs: vec![(), (), ()],
            curve: Curve {
                seconds: vec![1.0, 2.0],
                runs: vec![vec![1.0, 10.0], vec![3.0, 20.0], vec![f64::INFINITY, 30.0]],
            },
        };
        let sampler = SamplerResult {
            sampler: "SGLD".to_string(),
            methods: vec![method],
            timing: None,
            rank_check: None,
        };
        // A run without the baselines (e.g. --fssd-only) has no "below both baselines" line.
        assert!(!has_baselines(&sampler));
        let harness = logreg::MambaLogregSettings::default().harness();
        assert!(beats_summary(std::slice::from_ref(&sampler), "KSD", &harness, |_| 0.0).is_empty());
        let table = curve_table(std::slice::from_ref(&sampler), "KSD", 1.0);
        // t = 1: runs 1 and 3 → 2 ± 2·√2; t = 2: 20 ± 2·10.
        assert!(
            table.contains("| SGLD | MAMBA-KSD | 2.00 ± 2.83 [1] | 20.0 ± 20.0 |"),
            "{table}"
        );
        assert!(table.contains("| 1.00 s | 2.00 s |"), "{table}");
        // A fraction printed in per cent (the network's ECE) is scaled before the mean and sd.
        let table = curve_table(&[sampler], "ECE (%)", 100.0);
        assert!(
            table.contains("| SGLD | MAMBA-KSD | 200 ± 283 [1] | 2000 ± 2000 |"),
            "{table}"
        );
    }

    /// The run files the experiments write (`configs/*.toml`) read back to the typed runs the
    /// harness executes, for every experiment and sampler (an unserialisable or lossy key
    /// would fail here).
    #[test]
    fn written_run_files_read_back_to_the_runs_executed() {
        let logreg = logreg::MambaLogregSettings::default();
        let pmf = pmf::MambaPmfSettings::new(PathBuf::from("movielens"));
        let mut bnn = bnn::MambaBnnSettings::new(PathBuf::from("mnist"));
        bnn.map_optimizer = sgmcmc_runfile::config::MapOptimizer::Adam;
        let cases = [
            (logreg.spec(), logreg.harness()),
            (pmf.spec(), pmf.harness.clone()),
            (bnn.spec(), bnn.harness.clone()),
        ];
        for (spec, harness) in &cases {
            for index in 0..SAMPLERS.len() {
                for fssd in [false, true] {
                    let cfg = run_config(spec, harness, index, fssd).unwrap();
                    let text = config_text(spec, harness, index, fssd).unwrap();
                    assert!(text.starts_with(&format!("# {}", spec.title)));
                    assert_eq!(Config::from_toml(&text, "written").unwrap(), cfg, "{text}");
                }
            }
        }
        let err = run_config(&cases[0].0, &cases[0].1, 6, false).unwrap_err();
        assert!(err.to_string().contains("out of range"), "{err}");
    }

    #[test]
    fn spearman_with_ties() {
        assert!((spearman(&[1.0, 2.0, 3.0], &[10.0, 20.0, 30.0]) - 1.0).abs() < 1e-15);
        assert!((spearman(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]) + 1.0).abs() < 1e-15);
        assert_eq!(ranks(&[2.0, 1.0, 2.0]), vec![2.5, 1.0, 2.5]);
    }
}
