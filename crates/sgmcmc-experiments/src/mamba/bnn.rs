//! The MAMBA paper's neural-network experiment (§4.3, App. C.3; reference §5.6–5.7): the
//! 784-100-10 softmax network on MNIST (60,000 training images, the 10,000 t10k images for the
//! test metrics; 79,510 weights, N(0, 1) priors); six samplers tuned by MAMBA-KSD (R = 10 s,
//! log10 step −2 … −7.5 × batch 100/10/1 %, SGHMC L ∈ {5, 10}; SGNHT on −5 … −7.5 as the
//! paper's re-run), grid search (1,000 gradient estimates per step at 10 %, MAP + N(0, 1)
//! starts, selected by test accuracy: the paper does not name the metric) and the 1/N
//! heuristic; then each choice runs for 300 s from the MAP and reports the columns of the
//! paper's Tables 3, 8 and 9: ECE and MCE (10 equal-width bins on [0, 1], confidence = the top
//! class of the posterior-mean probabilities), test accuracy and iterations. The ECE against
//! time is the paper's Figure 3.
//!
//! The MAP is found once and shared by every sampler and final run: L-BFGS with
//! `map_iterations` (200 by default: each iteration is about one full-data gradient, ≈ 0.5 s
//! here), or Adam as in the authors' code (5,000 steps at learning rate 1e-3 on 10 % batches).

use super::MambaError;
use super::{ExperimentSpec, FinalMetrics, FinishedRun, HarnessSettings, real_data_grid};
use serde::Serialize;
use sgmcmc::estimator::BatchSize;
use sgmcmc::tuning::{TuneGrid, TuneScores};
use sgmcmc_runfile::config::{
    DataConfig, EvaluationConfig, GridSearchConfig, GridSelection, MapOptimizer, ModelConfig,
    RunConfig,
};
use sgmcmc_runfile::pipeline;
use std::path::{Path, PathBuf};
use std::time::Instant;

pub use super::SAMPLERS;

/// One tuning method's choice and its final runs.
pub type MethodResult = super::MethodResult<BnnRun>;
/// One sampler's results.
pub type SamplerResult = super::SamplerResult<BnnRun>;

/// L-BFGS iterations of the MAP by default (each about one full-data gradient).
const DEFAULT_LBFGS_ITERATIONS: usize = 200;

/// Adam steps of the MAP by default (the authors' NN MAP).
const DEFAULT_ADAM_ITERATIONS: usize = 5_000;

/// The paper's Table 8 (log10 step / batch % / L): MAMBA-KSD, grid search, heuristic.
pub const PAPER_TABLE_8: [[&str; 3]; 6] = [
    ["−5.5 / 1", "−3.5 / 10", "−4.8 / 10"],
    ["−5.5 / 1", "−3.5 / 10", "−4.8 / 10"],
    ["−6.5 / 1 / 5", "−5 / 10 / 10", "−4.8 / 10 / 10"],
    ["−6 / 1 / 5", "−5 / 10 / 10", "−4.8 / 10 / 10"],
    ["−5 / 1", "−5 / 10", "−4.8 / 10"],
    ["−7.5 / 1", "−4.5 / 10", "−4.8 / 10"],
];

/// The paper's Table 9 (ECE %, MCE %, test accuracy %, samples): MAMBA-KSD, grid search,
/// heuristic.
pub const PAPER_TABLE_9: [[(f64, f64, f64, u64); 3]; 6] = [
    [
        (1.04, 36.4, 93.1, 96_922),
        (14.6, 42.1, 93.8, 16_343),
        (0.8, 23.3, 93.3, 15_192),
    ],
    [
        (0.9, 15.7, 93.1, 67_395),
        (8.8, 40.7, 94.2, 9_659),
        (0.7, 22.0, 93.2, 9_534),
    ],
    [
        (0.7, 47.1, 93.0, 23_671),
        (20.1, 65.5, 92.5, 1_761),
        (50.9, 71.6, 91.7, 1_717),
    ],
    [
        (0.7, 21.3, 93.1, 15_327),
        (25.1, 55.2, 82.9, 1_013),
        (40.8, 74.8, 90.1, 984),
    ],
    [
        (9.3, 45.7, 94.0, 88_021),
        (5.4, 42.2, 95.1, 17_062),
        (6.2, 43.2, 95.2, 16_727),
    ],
    [
        (0.9, 27.4, 93.1, 62_389),
        (7.7, 42.3, 94.6, 9_372),
        (7.0, 51.5, 95.0, 9_382),
    ],
];

/// SGNHT's grid in the paper's re-run (reference §5.6): log10 step −5 … −7.5.
pub fn sgnht_grid() -> TuneGrid {
    super::step_batch_grid(-5.0, -7.5, &[100.0, 10.0, 1.0])
}

/// Settings of the experiment.
#[derive(Debug, Clone, Serialize)]
pub struct MambaBnnSettings {
    /// The MNIST directory (train and t10k IDX files).
    pub data_dir: PathBuf,
    /// Seeds, budgets, samplers, final runs, thinning and burn-in.
    pub harness: HarnessSettings,
    /// Grid search: gradient estimates per grid point (SGHMC: ⌈·/L⌉ iterations).
    pub grid_estimates: u64,
    /// The MAP's optimiser: L-BFGS (default) or Adam, as the authors' code found it.
    pub map_optimizer: MapOptimizer,
    /// Iterations of the MAP search (unset: 200 for L-BFGS, 5,000 for Adam).
    pub map_iterations: Option<usize>,
    /// Adam's learning rate (the authors' NN MAP: 1e-3).
    pub map_learning_rate: f64,
    /// Adam's minibatch size (the authors' NN MAP: 10 %).
    pub map_batch: BatchSize,
    /// MAMBA scores at most this many draws per arm and round.
    pub tune_max_scored: usize,
    /// The test metrics of a window use at most this many of its draws (evenly spaced).
    pub ece_draws: usize,
}

impl MambaBnnSettings {
    /// The paper's protocol on `data_dir` (R = 10 s, 300 s final runs from the MAP), one final
    /// run per choice, every 50th iterate kept, the first 10 % dropped.
    pub fn new(data_dir: PathBuf) -> Self {
        Self {
            data_dir,
            harness: HarnessSettings {
                seed: 1,
                budget_seconds: 10.0,
                final_seconds: 300.0,
                final_runs: 1,
                samplers: (0..6).collect(),
                fssd: false,
                fssd_only: false,
                mamba_only: false,
                rank_check: Vec::new(),
                score_subsample: 1000,
                tune_scores: TuneScores::ControlVariates,
                threads: 0,
                curve_points: 5,
                final_thin: 50,
                final_burn_in: 0.1,
            },
            grid_estimates: 1000,
            map_optimizer: MapOptimizer::Lbfgs,
            map_iterations: None,
            map_learning_rate: 1e-3,
            map_batch: BatchSize::percent(10.0),
            tune_max_scored: 300,
            ece_draws: 300,
        }
    }

    /// The run files' shared part.
    pub fn spec(&self) -> ExperimentSpec {
        let path = |f: &str| Some(super::absolute_path(&self.data_dir.join(f)));
        ExperimentSpec {
            title: "MAMBA Bayesian neural network (paper 000 §4.3)".into(),
            data: DataConfig {
                mnist: path("train"),
                ..DataConfig::default()
            },
            model: ModelConfig::Bnn {
                hidden: 100,
                prior_variance: 1.0,
            },
            evaluation: Some(EvaluationConfig {
                calibration_bins: 10,
                test: Some(DataConfig {
                    mnist: path("t10k"),
                    ..DataConfig::default()
                }),
                ..EvaluationConfig::default()
            }),
            grid: real_data_grid(),
            sghmc_inner_steps: vec![5, 10],
            grid_search: GridSearchConfig {
                estimates: Some(self.grid_estimates),
                batch_size: BatchSize::percent(10.0),
                start_noise: 1.0,
                select_by: Some(GridSelection::Accuracy),
                ..GridSearchConfig::default()
            },
            tune_thin: 10,
            tune_max_scored: Some(self.tune_max_scored),
            grid_overrides: vec![(4, sgnht_grid())],
            map: self.map_run(),
        }
    }

    /// The `[run]` table's MAP search.
    fn map_run(&self) -> RunConfig {
        match self.map_optimizer {
            MapOptimizer::Lbfgs => RunConfig {
                map_iterations: Some(self.map_iterations.unwrap_or(DEFAULT_LBFGS_ITERATIONS)),
                ..RunConfig::default()
            },
            MapOptimizer::Adam => RunConfig {
                map_optimizer: MapOptimizer::Adam,
                map_iterations: Some(self.map_iterations.unwrap_or(DEFAULT_ADAM_ITERATIONS)),
                map_learning_rate: Some(self.map_learning_rate),
                map_batch_size: Some(self.map_batch),
                ..RunConfig::default()
            },
        }
    }
}

/// One final run of a chosen setting: the columns of the paper's Table 9.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BnnRun {
    /// Seed of the run.
    pub seed: u64,
    /// ECE (a fraction) of the posterior-mean probabilities: the last point of the curve.
    pub ece: f64,
    /// MCE (a fraction).
    pub mce: f64,
    /// Test accuracy (a fraction).
    pub accuracy: f64,
    /// Draws the test metrics averaged over.
    pub predictive_draws: usize,
    /// Iterations the chain ran in the budget (the paper's "number of samples").
    pub iterations: usize,
    /// Draws kept after thinning and burn-in.
    pub draws: usize,
    /// The run diverged.
    pub diverged: bool,
}

impl BnnRun {
    /// Column means over `runs`; `diverged` if any run diverged.
    pub fn mean(runs: &[BnnRun]) -> BnnRun {
        let n = runs.len().max(1) as f64;
        let avg = |f: fn(&BnnRun) -> f64| runs.iter().map(f).sum::<f64>() / n;
        BnnRun {
            seed: runs.first().map_or(0, |r| r.seed),
            ece: avg(|r| r.ece),
            mce: avg(|r| r.mce),
            accuracy: avg(|r| r.accuracy),
            predictive_draws: avg(|r| r.predictive_draws as f64).round() as usize,
            iterations: avg(|r| r.iterations as f64).round() as usize,
            draws: avg(|r| r.draws as f64).round() as usize,
            diverged: runs.iter().any(|r| r.diverged),
        }
    }
}

/// What a final run of §4.3 measures: the test ECE, MCE and accuracy of each checkpoint's
/// window (at most `ece_draws` evenly spaced draws of it).
pub struct BnnMetrics<'a> {
    /// The experiment's settings.
    pub settings: &'a MambaBnnSettings,
}

impl FinalMetrics for BnnMetrics<'_> {
    type Run = BnnRun;

    fn curve_name(&self) -> &str {
        "ECE"
    }

    fn measure(&self, run: &FinishedRun<'_>) -> Result<(BnnRun, Vec<f64>), MambaError> {
        let mut last = (f64::INFINITY, f64::INFINITY, f64::NAN, 0);
        let mut curve = Vec::with_capacity(run.windows.len());
        for window in run.windows {
            last = if window.is_empty() {
                (f64::INFINITY, f64::INFINITY, f64::NAN, 0)
            } else {
                let m = run
                    .test_metrics(window, self.settings.ece_draws)?
                    .ok_or_else(|| MambaError::Setting("the run has no test split".into()))?;
                (
                    m.ece.unwrap_or(f64::NAN),
                    m.mce.unwrap_or(f64::NAN),
                    m.accuracy.unwrap_or(f64::NAN),
                    m.draws,
                )
            };
            curve.push(last.0);
        }
        let (ece, mce, accuracy, predictive_draws) = last;
        Ok((
            BnnRun {
                seed: run.seed,
                ece,
                mce,
                accuracy,
                predictive_draws,
                iterations: run.iterations,
                draws: run.final_window().len(),
                diverged: !run.outcome.diverged_chains.is_empty(),
            },
            curve,
        ))
    }

    fn mean(&self, runs: &[BnnRun]) -> BnnRun {
        BnnRun::mean(runs)
    }

    fn primary(&self, run: &BnnRun) -> f64 {
        run.ece
    }

    fn describe(&self, run: &BnnRun) -> String {
        format!(
            "ECE {:.2} %, MCE {:.2} %, accuracy {:.2} % (over {} draws), {} iterations ({} draws kept){}",
            100.0 * run.ece,
            100.0 * run.mce,
            100.0 * run.accuracy,
            run.predictive_draws,
            run.iterations,
            run.draws,
            if run.diverged { " (diverged)" } else { "" }
        )
    }
}

/// The whole experiment.
#[derive(Debug, Clone, Serialize)]
pub struct MambaBnnReport {
    /// Settings.
    pub settings: MambaBnnSettings,
    /// Per sampler.
    pub samplers: Vec<SamplerResult>,
    /// Seconds for everything.
    pub seconds: f64,
}

/// The run file of sampler `index`.
pub fn config_text(settings: &MambaBnnSettings, index: usize) -> Result<String, MambaError> {
    super::config_text(&settings.spec(), &settings.harness, index, false)
}

/// Run the experiment; `log` receives progress lines and `partial` the report of the samplers
/// finished so far, after each one.
pub fn run(
    settings: &MambaBnnSettings,
    log: &mut dyn FnMut(&str),
    partial: &mut dyn FnMut(&MambaBnnReport),
) -> Result<MambaBnnReport, MambaError> {
    let started = Instant::now();
    let prepared = super::prepare_problem(&settings.spec(), &settings.harness, log)?;
    let metrics = BnnMetrics { settings };
    let report = |samplers: Vec<SamplerResult>| MambaBnnReport {
        settings: settings.clone(),
        samplers,
        seconds: started.elapsed().as_secs_f64(),
    };
    let samplers = super::run_samplers(
        &settings.spec(),
        &settings.harness,
        &prepared,
        &metrics,
        log,
        &mut |done| partial(&report(done.to_vec())),
    )?;
    Ok(report(samplers))
}

/// The control of the ECE cells: the test metrics of the MAP alone, the point every final run
/// starts from (some cells average only a few draws near it).
#[derive(Debug, Clone, Serialize)]
pub struct MapControl {
    /// Settings (the MAP search among them).
    pub settings: MambaBnnSettings,
    /// Iterations of the MAP search.
    pub map_iterations: usize,
    /// log π at the MAP (up to a constant).
    pub log_posterior: f64,
    /// ECE (a fraction) of the MAP's class probabilities on the test images.
    pub ece: f64,
    /// MCE (a fraction).
    pub mce: f64,
    /// Test accuracy (a fraction).
    pub accuracy: f64,
    /// Seconds for everything.
    pub seconds: f64,
}

/// The MAP of the experiment's settings (the same search as [`run`]'s) and its test ECE, MCE
/// and accuracy as a single draw.
pub fn map_control(
    settings: &MambaBnnSettings,
    log: &mut dyn FnMut(&str),
) -> Result<MapControl, MambaError> {
    let started = Instant::now();
    let spec = settings.spec();
    let prepared = super::prepare_problem(&spec, &settings.harness, log)?;
    let index = settings.harness.samplers.first().copied().unwrap_or(0);
    let cfg = super::run_config(&spec, &settings.harness, index, false)?;
    let map = pipeline::find_run_map(&cfg, prepared.model())?;
    log(&format!(
        "MAP: {} iterations, log posterior {:.6e}, {:.1} s",
        map.iterations,
        map.log_posterior,
        started.elapsed().as_secs_f64()
    ));
    let m = super::test_metrics(&prepared, &map.theta, 1)?
        .ok_or_else(|| MambaError::Setting("the experiment has no test split".into()))?;
    Ok(MapControl {
        settings: settings.clone(),
        map_iterations: map.iterations,
        log_posterior: map.log_posterior,
        ece: m.ece.unwrap_or(f64::NAN),
        mce: m.mce.unwrap_or(f64::NAN),
        accuracy: m.accuracy.unwrap_or(f64::NAN),
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// The ECE curves of the final runs as an SVG (the paper's Figure 3).
pub fn write_ece_curves(
    path: &Path,
    report: &MambaBnnReport,
) -> Result<Vec<String>, crate::plot::PlotError> {
    super::write_curves_svg(
        path,
        &format!(
            "BNN on MNIST: test ECE against time (mean ± 2 sd over {} runs)",
            report.settings.harness.final_runs
        ),
        "ECE",
        true,
        &report.samplers,
    )
}

/// The report as Markdown tables beside the paper's.
pub fn markdown(report: &MambaBnnReport) -> String {
    use std::fmt::Write;
    let h = &report.settings.harness;
    let mut s = super::choice_table(&report.samplers, "Table 8", &|sampler, method| {
        super::paper_column(method).map(|c| PAPER_TABLE_8[sampler][c].to_string())
    });
    s.push_str(&super::tune_scores_note(h));
    let _ = writeln!(
        s,
        "\n**Final {} s runs** from the MAP, every {}th iterate kept and the first {:.0} % of \
         those dropped, mean over {} run(s) (seeds {}…): ECE % ± sd / MCE % / test accuracy % / \
         iterations, ours | paper (Table 9):\n",
        h.final_seconds,
        h.final_thin,
        100.0 * h.final_burn_in,
        h.final_runs,
        h.seed
    );
    s.push_str(&super::final_table(
        &report.samplers,
        &|sampler, m: &MethodResult| {
            let ours = format!(
                "{:.2} ± {:.2} / {:.1} / {:.1} / {}{}",
                100.0 * m.mean.ece,
                100.0 * m.primary_sd,
                100.0 * m.mean.mce,
                100.0 * m.mean.accuracy,
                m.mean.iterations,
                if m.mean.diverged { " (diverged)" } else { "" }
            );
            let paper = super::paper_column(&m.method).map_or(String::new(), |c| {
                let (e, x, a, d) = PAPER_TABLE_9[sampler][c];
                format!("{e} / {x} / {a} / {d}")
            });
            format!("{ours} \\| {paper}")
        },
    ));
    let _ = writeln!(
        s,
        "\nTest metrics: the posterior-mean class probabilities over at most {} evenly spaced \
         draws of the window on the 10,000 t10k images; ECE and MCE over 10 equal-width bins on \
         [0, 1] of the top-class probability. Grid search selects by test accuracy.\n",
        report.settings.ece_draws
    );
    s.push_str(&super::beats_summary(&report.samplers, "ECE", h, |r| r.ece));
    s.push_str(&super::curve_table(&report.samplers, "ECE (%)", 100.0));
    s.push_str(&super::timing_table(&report.samplers));
    s
}
