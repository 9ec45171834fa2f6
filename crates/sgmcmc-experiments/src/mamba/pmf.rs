//! The MAMBA paper's matrix-factorisation experiment (§4.2, App. C.2; reference §5.6–5.7):
//! Bayesian PMF on MovieLens 100K (`u1.base` for training, `u1.test` for the RMSE; d = 20,
//! 52,580 parameters); six samplers tuned by MAMBA-KSD (R = 10 s, log10 step −2 … −7.5 × batch
//! 100/10/1 %, SGHMC L ∈ {5, 10}), grid search (2,000 iterations per step at 10 %, MAP +
//! N(0, 1) starts, selected by test RMSE) and the 1/N heuristic; then each choice runs for 20 s
//! from the MAP and reports the columns of the paper's Tables 2, 6 and 7: KSD (its curve against
//! time is the paper's Figure 2), ξ(σ̂) against a full-batch NUTS reference, test RMSE and draws.
//!
//! At D = 52,580 a run's draws are thinned (every `final_thin`-th iterate kept) and the first
//! `final_burn_in` of them dropped ("burn-in removed", §4.2). The KSD of P draws costs ≈ 4P²D
//! FLOPs, so MAMBA scores at most `tune_max_scored` draws per arm and round, and a final run's
//! KSD at most `final_max_scored`.

use super::MambaError;
use super::{ExperimentSpec, FinalMetrics, FinishedRun, HarnessSettings, real_data_grid};
use serde::Serialize;
use sgmcmc::diagnostics::accuracy;
use sgmcmc::estimator::BatchSize;
use sgmcmc::reference::ReferenceMoments;
use sgmcmc::tuning::TuneScores;
use sgmcmc_runfile::config::{
    DataConfig, EvaluationConfig, GridSearchConfig, GridSelection, ModelConfig, RunConfig,
};
use std::path::{Path, PathBuf};
use std::time::Instant;

pub use super::SAMPLERS;

/// One tuning method's choice and its final runs.
pub type MethodResult = super::MethodResult<PmfRun>;
/// One sampler's results.
pub type SamplerResult = super::SamplerResult<PmfRun>;

/// The paper's Table 6 (log10 step / batch % / L): MAMBA-KSD, grid search, heuristic.
pub const PAPER_TABLE_6: [[&str; 3]; 6] = [
    ["−5 / 1", "−3.5 / 10", "−4.9 / 10"],
    ["−5 / 1", "−3.5 / 10", "−4.9 / 10"],
    ["−6 / 1 / 5", "−5 / 10 / 10", "−4.9 / 10 / 10"],
    ["−6 / 1 / 5", "−5 / 10 / 10", "−4.9 / 10 / 10"],
    ["−5 / 10", "−5.5 / 10", "−4.9 / 10"],
    ["−5 / 10", "−5.5 / 10", "−4.9 / 10"],
];

/// The paper's Table 7 (ξ·10², KSD, test RMSE, samples): MAMBA-KSD, grid search, heuristic.
pub const PAPER_TABLE_7: [[(f64, f64, f64, u64); 3]; 6] = [
    [
        (69.2, 213.0, 1.13, 15_681),
        (119.2, 429.0, 1.25, 10_099),
        (71.7, 237.0, 1.13, 9_946),
    ],
    [
        (72.1, 231.0, 1.13, 11_774),
        (133.0, 546.0, 1.25, 6_827),
        (75.0, 284.0, 1.13, 6_897),
    ],
    [
        (79.9, 438.0, 1.13, 3_503),
        (51.2, 3_180.0, 1.25, 1_184),
        (50.3, 3_942.0, 1.25, 1_021),
    ],
    [
        (83.7, 543.0, 1.10, 2_045),
        (55.6, 4_289.0, 1.25, 848),
        (53.2, 4_546.0, 1.25, 847),
    ],
    [
        (40.8, 163.0, 1.12, 9_687),
        (44.2, 170.0, 1.15, 9_743),
        (40.6, 164.0, 1.11, 9_683),
    ],
    [
        (38.5, 205.0, 1.12, 6_527),
        (46.8, 221.0, 1.16, 5_930),
        (38.7, 210.0, 1.11, 6_546),
    ],
];

/// Settings of the experiment.
#[derive(Debug, Clone, Serialize)]
pub struct MambaPmfSettings {
    /// The MovieLens 100K directory (`u1.base`, `u1.test`, `u.info`).
    pub data_dir: PathBuf,
    /// Seeds, budgets, samplers, final runs, thinning and burn-in.
    pub harness: HarnessSettings,
    /// Grid search: iterations per grid point.
    pub grid_iterations: u64,
    /// MAMBA scores at most this many draws per arm and round.
    pub tune_max_scored: usize,
    /// A final run's KSD scores at most this many of its draws (evenly spaced).
    pub final_max_scored: usize,
    /// Ratings in the control-variate surrogate of a final run's KSD.
    pub final_score_subsample: usize,
    /// Test-RMSE draws (evenly spaced over the window).
    pub rmse_draws: usize,
    /// The NUTS reference (read if it exists, else computed and written).
    pub reference: PathBuf,
    /// NUTS chains, warm-up and draws per chain.
    pub nuts: (usize, usize, usize),
}

impl MambaPmfSettings {
    /// The paper's protocol on `data_dir` (R = 10 s, 20 s final runs), three final runs per
    /// choice, every 10th iterate kept, the first 10 % dropped.
    pub fn new(data_dir: PathBuf) -> Self {
        Self {
            data_dir,
            harness: HarnessSettings {
                seed: 1,
                budget_seconds: 10.0,
                final_seconds: 20.0,
                final_runs: 3,
                samplers: (0..6).collect(),
                fssd: false,
                fssd_only: false,
                mamba_only: false,
                rank_check: Vec::new(),
                score_subsample: 10_000,
                tune_scores: TuneScores::ControlVariates,
                threads: 0,
                curve_points: 5,
                final_thin: 10,
                final_burn_in: 0.1,
            },
            grid_iterations: 2000,
            tune_max_scored: 1000,
            final_max_scored: 500,
            final_score_subsample: 10_000,
            rmse_draws: 1000,
            reference: PathBuf::from("mamba_pmf_out/reference.json"),
            nuts: (2, 500, 1000),
        }
    }

    /// The run files' shared part.
    pub fn spec(&self) -> ExperimentSpec {
        let path = |f: &str| Some(super::absolute_path(&self.data_dir.join(f)));
        ExperimentSpec {
            title: "MAMBA matrix factorisation (paper 000 §4.2)".into(),
            data: DataConfig {
                movielens: path("u1.base"),
                ..DataConfig::default()
            },
            model: ModelConfig::Pmf {
                latent_dim: 20,
                precision: 3.0,
                hyper_shape: 4.0,
                hyper_rate: 5.0,
                users: None,
                items: None,
            },
            evaluation: Some(EvaluationConfig {
                test: Some(DataConfig {
                    movielens: path("u1.test"),
                    ..DataConfig::default()
                }),
                ..EvaluationConfig::default()
            }),
            grid: real_data_grid(),
            sghmc_inner_steps: vec![5, 10],
            grid_search: GridSearchConfig {
                iterations: self.grid_iterations,
                batch_size: BatchSize::percent(10.0),
                start_noise: 1.0,
                select_by: Some(GridSelection::Rmse),
                ..GridSearchConfig::default()
            },
            tune_thin: 10,
            tune_max_scored: Some(self.tune_max_scored),
            grid_overrides: Vec::new(),
            map: RunConfig::default(),
        }
    }
}

/// One final run of a chosen setting: the columns of the paper's Table 7.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PmfRun {
    /// Seed of the run.
    pub seed: u64,
    /// KSD of the window's draws (≤ `final_max_scored`, control-variate scores): the last
    /// point of the method's curve.
    pub ksd: f64,
    /// Draws in `ksd`.
    pub ksd_scored_draws: usize,
    /// ξ(σ̂) = ‖σ̂ − σ_NUTS‖/‖σ_NUTS‖ over all 52,580 coordinates.
    pub xi: f64,
    /// Test RMSE of the posterior-mean rating.
    pub rmse: f64,
    /// Iterations the chain ran in the budget (the paper's "number of samples").
    pub iterations: usize,
    /// Draws kept after thinning and burn-in.
    pub draws: usize,
    /// The run diverged.
    pub diverged: bool,
}

impl PmfRun {
    /// Column means over `runs`; `diverged` if any run diverged.
    pub fn mean(runs: &[PmfRun]) -> PmfRun {
        let n = runs.len().max(1) as f64;
        let avg = |f: fn(&PmfRun) -> f64| runs.iter().map(f).sum::<f64>() / n;
        PmfRun {
            seed: runs.first().map_or(0, |r| r.seed),
            ksd: avg(|r| r.ksd),
            ksd_scored_draws: avg(|r| r.ksd_scored_draws as f64).round() as usize,
            xi: avg(|r| r.xi),
            rmse: avg(|r| r.rmse),
            iterations: avg(|r| r.iterations as f64).round() as usize,
            draws: avg(|r| r.draws as f64).round() as usize,
            diverged: runs.iter().any(|r| r.diverged),
        }
    }
}

/// What a final run of §4.2 measures.
pub struct PmfMetrics<'a> {
    /// The experiment's settings.
    pub settings: &'a MambaPmfSettings,
    /// The NUTS reference moments.
    pub reference: &'a ReferenceMoments,
}

impl FinalMetrics for PmfMetrics<'_> {
    type Run = PmfRun;

    fn curve_name(&self) -> &str {
        "KSD"
    }

    fn measure(&self, run: &FinishedRun<'_>) -> Result<(PmfRun, Vec<f64>), MambaError> {
        let settings = self.settings;
        let model = run.session.prepared.model();
        let dim = model.dim();
        let scores = run.surrogate_scores(
            settings.harness.seed,
            (1 << 20) + 81,
            settings.final_score_subsample,
        );
        let curve = super::window_ksd_curve(
            run.draws,
            dim,
            run.windows,
            1,
            settings.final_max_scored,
            &scores,
        );
        let window = run.final_window();
        let draws = run.window_draws(&window);
        let xi = if window.is_empty() {
            f64::INFINITY
        } else {
            accuracy::relative_sd_error(&[draws], dim, self.reference).unwrap_or(f64::NAN)
        };
        let rmse = if window.is_empty() {
            f64::INFINITY
        } else {
            run.test_metrics(&window, settings.rmse_draws)?
                .and_then(|m| m.rmse)
                .unwrap_or(f64::NAN)
        };
        Ok((
            PmfRun {
                seed: run.seed,
                ksd: curve.last().copied().unwrap_or(f64::INFINITY),
                ksd_scored_draws: super::scored_rows(&window, 1, settings.final_max_scored).len(),
                xi,
                rmse,
                iterations: run.iterations,
                draws: window.len(),
                diverged: !run.outcome.diverged_chains.is_empty(),
            },
            curve,
        ))
    }

    fn mean(&self, runs: &[PmfRun]) -> PmfRun {
        PmfRun::mean(runs)
    }

    fn primary(&self, run: &PmfRun) -> f64 {
        run.ksd
    }

    fn describe(&self, run: &PmfRun) -> String {
        format!(
            "KSD {:.1} ({} draws), xi {:.4}, RMSE {:.4}, {} iterations ({} draws kept){}",
            run.ksd,
            run.ksd_scored_draws,
            run.xi,
            run.rmse,
            run.iterations,
            run.draws,
            if run.diverged { " (diverged)" } else { "" }
        )
    }
}

/// The whole experiment.
#[derive(Debug, Clone, Serialize)]
pub struct MambaPmfReport {
    /// Settings.
    pub settings: MambaPmfSettings,
    /// The reference (method string).
    pub reference_method: String,
    /// Per sampler.
    pub samplers: Vec<SamplerResult>,
    /// Seconds for everything.
    pub seconds: f64,
}

/// The run file of sampler `index`.
pub fn config_text(settings: &MambaPmfSettings, index: usize) -> Result<String, MambaError> {
    super::config_text(&settings.spec(), &settings.harness, index, false)
}

/// Run the experiment; `log` receives progress lines and `partial` the report of the samplers
/// finished so far, after each one.
pub fn run(
    settings: &MambaPmfSettings,
    log: &mut dyn FnMut(&str),
    partial: &mut dyn FnMut(&MambaPmfReport),
) -> Result<MambaPmfReport, MambaError> {
    let started = Instant::now();
    let prepared = super::prepare_problem(&settings.spec(), &settings.harness, log)?;
    let reference = super::load_or_run_reference(
        &settings.reference,
        settings.nuts,
        settings.harness.seed,
        &prepared,
        log,
    )?;
    let metrics = PmfMetrics {
        settings,
        reference: &reference,
    };
    let report = |samplers: Vec<SamplerResult>| MambaPmfReport {
        settings: settings.clone(),
        reference_method: reference.method.clone(),
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

/// The KSD curves of the final runs as an SVG (the paper's Figure 2).
pub fn write_ksd_curves(
    path: &Path,
    report: &MambaPmfReport,
) -> Result<Vec<String>, crate::plot::PlotError> {
    super::write_curves_svg(
        path,
        &format!(
            "PMF on MovieLens 100K: KSD against time (mean ± 2 sd over {} runs)",
            report.settings.harness.final_runs
        ),
        "KSD",
        true,
        &report.samplers,
    )
}

/// The report as Markdown tables beside the paper's.
pub fn markdown(report: &MambaPmfReport) -> String {
    use std::fmt::Write;
    let h = &report.settings.harness;
    let mut s = super::choice_table(&report.samplers, "Table 6", &|sampler, method| {
        super::paper_column(method).map(|c| PAPER_TABLE_6[sampler][c].to_string())
    });
    s.push_str(&super::tune_scores_note(h));
    let _ = writeln!(
        s,
        "\n**Final {} s runs** from the MAP, every {}th iterate kept and the first {:.0} % of \
         those dropped, mean over {} runs (seeds {}…): ξ(σ̂)·10² / KSD ± sd / test RMSE / \
         iterations, ours | paper (Table 7):\n",
        h.final_seconds,
        h.final_thin,
        100.0 * h.final_burn_in,
        h.final_runs,
        h.seed
    );
    let body = super::final_table(&report.samplers, &|sampler, m: &MethodResult| {
        let ours = format!(
            "{} / {} ± {} / {:.3} / {}{}",
            super::fmt_num(100.0 * m.mean.xi),
            super::fmt_num(m.mean.ksd),
            super::fmt_num(m.primary_sd),
            m.mean.rmse,
            m.mean.iterations,
            if m.mean.diverged { " (diverged)" } else { "" }
        );
        let paper = super::paper_column(&m.method).map_or(String::new(), |c| {
            let (x, k, r, d) = PAPER_TABLE_7[sampler][c];
            format!("{x} / {k} / {r} / {d}")
        });
        format!("{ours} \\| {paper}")
    });
    s.push_str(&body);
    let _ = writeln!(
        s,
        "\nKSD: at most {} evenly spaced draws of the window, scored by the control-variate \
         surrogate on {} ratings about the MAP. ξ(σ̂) over all {} coordinates against the \
         reference ({}). RMSE: the posterior-mean rating over at most {} draws.\n",
        report.settings.final_max_scored,
        report.settings.final_score_subsample,
        52_580,
        report.reference_method,
        report.settings.rmse_draws
    );
    s.push_str(&super::beats_summary(&report.samplers, "KSD", h, |r| r.ksd));
    s.push_str(&super::curve_table(&report.samplers, "KSD", 1.0));
    s.push_str(&super::timing_table(&report.samplers));
    s
}
