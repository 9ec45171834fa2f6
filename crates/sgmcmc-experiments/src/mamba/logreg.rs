//! The MAMBA paper's logistic-regression experiment (§4.1, App. C.1; reference §5.6–5.7):
//! synthetic N = 10⁶, d = 10 (the paper's generator), the first 800,000 rows for training; six
//! samplers (SGLD, SGLD-CV, SGHMC, SGHMC-CV, SGNHT, SGNHT-CV) tuned by MAMBA-KSD (R = 1 s, the
//! App. C.1.3 grid: log10 step −1 … −7.5 by 0.5 × batch 100/10/1/0.1 %, SGHMC L ∈ {5, 10}),
//! grid search (10 % batch, MAP + N(0, 0.2²) starts, selected by test log-loss) and the 1/N
//! heuristic; then each tuned sampler runs for 10 s from the MAP, ten times with different seeds
//! (the paper's protocol: tune once, average ten runs), and reports the means of the columns of
//! the paper's Tables 1, 4 and 5: KSD, ξ(σ̂) against a NUTS reference, test accuracy, draws.
//!
//! Optionally (MAMBA-FSSD) the FSSD-opt metric, and a rank check: MAMBA again with the
//! full-batch KSD of every arm's round computed beside the cheap metric, to measure their rank
//! correlation.
//!
//! Built on the shared harness of [`super`]: this file holds the problem (data, model, grid),
//! the NUTS reference, what a final run measures ([`LogregMetrics`]: the paper's KSD, with its
//! curve against time, the exact KSD, ξ, accuracy) and the paper's tables.

use super::MambaError;
use super::{ExperimentSpec, FinalMetrics, FinishedRun, HarnessSettings};
use serde::Serialize;
use sgmcmc::diagnostics::accuracy;
use sgmcmc::estimator::BatchSize;
use sgmcmc::reference::ReferenceMoments;
use sgmcmc::stein::{ImqKernel, Kernel, full_batch_scores, ksd};
use sgmcmc::tuning::TuneScores;
use sgmcmc_runfile::config::{
    DataConfig, EvaluationConfig, GridSearchConfig, GridSelection, ModelConfig, PriorKind,
    RunConfig, SyntheticConfig, SyntheticGenerator,
};
use sgmcmc_runfile::pipeline;
use std::path::PathBuf;
use std::time::Instant;

pub use super::{
    MambaTiming, RoundAgreement, SAMPLERS, choice, fmt_num, round_agreement, spearman,
};

/// One tuning method's choice and its final runs.
pub type MethodResult = super::MethodResult<FinalRun>;
/// One sampler's results.
pub type SamplerResult = super::SamplerResult<FinalRun>;

/// The paper's Table 5 (MAMBA-KSD, MAMBA-FSSD, grid search, heuristic): ξ·10² / KSD /
/// accuracy % / draws, per sampler in [`SAMPLERS`] order.
pub const PAPER_TABLE_5: [[(f64, f64, f64, u64); 4]; 6] = [
    [
        (28.3, 66.0, 93.9, 22_255),
        (68.5, 58.0, 93.9, 21_851),
        (12.0, 106.0, 93.9, 4_005),
        (12.1, 100.0, 93.9, 3_484),
    ],
    [
        (5.2, 13.0, 93.9, 55_580),
        (5.9, 23.0, 93.9, 18_792),
        (12.4, 38.0, 93.9, 3_232),
        (27.5, 102.0, 93.9, 2_809),
    ],
    [
        (107.7, 85.0, 93.9, 28_268),
        (82.5, 56.0, 93.9, 5_145),
        (34.5, 174.0, 93.9, 435),
        (3_000.3, 53_972.0, 92.7, 428),
    ],
    [
        (8.4, 18.0, 93.9, 24_001),
        (26.3, 43.0, 93.9, 4_194),
        (31.2, 131.0, 93.9, 355),
        (3_084.0, 51_565.0, 92.7, 346),
    ],
    [
        (55.7, 69.0, 93.9, 21_955),
        (102.5, 68.0, 93.9, 19_845),
        (15.0, 73.0, 93.9, 4_055),
        (71.4, 51.0, 93.9, 4_056),
    ],
    [
        (0.8, 3.0, 93.9, 19_323),
        (2.0, 11.0, 93.9, 3_105),
        (10.5, 12.0, 93.9, 3_329),
        (20.4, 9.0, 93.9, 3_329),
    ],
];

/// The paper's Table 4 (selected log10 step / batch % / L): MAMBA-KSD, MAMBA-FSSD, grid
/// search, heuristic.
pub const PAPER_TABLE_4: [[&str; 4]; 6] = [
    ["−6 / 1", "−5.5 / 1", "−6 / 10", "−6 / 10"],
    ["−5 / 0.1", "−5 / 1", "−5 / 10", "−6 / 10"],
    [
        "−7 / 0.1 / 10",
        "−6 / 1 / 5",
        "−7 / 10 / 10",
        "−6 / 10 / 10",
    ],
    [
        "−6.5 / 0.1 / 10",
        "−6 / 1 / 5",
        "−6.5 / 10 / 10",
        "−6 / 10 / 10",
    ],
    ["−7.5 / 1", "−6 / 1", "−7.5 / 10", "−6 / 10"],
    ["−5.5 / 1", "−5 / 10", "−4.5 / 10", "−6 / 10"],
];

/// Settings of the experiment.
#[derive(Debug, Clone, Serialize)]
pub struct MambaLogregSettings {
    /// Rows generated (training = the first (1 − test_fraction)·rows).
    pub rows: usize,
    /// Features d.
    pub dim: usize,
    /// Held-out fraction (the last rows).
    pub test_fraction: f64,
    /// Seed of the data.
    pub data_seed: u64,
    /// Seed of the runs.
    pub seed: u64,
    /// MAMBA's R (thread-CPU seconds).
    pub budget_seconds: f64,
    /// Length of each tuned sampler's final run (wall seconds, one chain).
    pub final_seconds: f64,
    /// Independent final runs per chosen setting (seeds `seed`, `seed + 1`, …); the tables
    /// report their means, as the paper does over ten runs (§4.1).
    pub final_runs: usize,
    /// Grid search: gradient estimates per grid point (SGHMC: ⌈·/L⌉ iterations).
    pub grid_estimates: u64,
    /// Indices into [`SAMPLERS`].
    pub samplers: Vec<usize>,
    /// Also MAMBA with FSSD-opt.
    pub fssd: bool,
    /// Skip MAMBA-KSD, grid search and the heuristic (e.g. to run MAMBA-FSSD alone).
    pub fssd_only: bool,
    /// Samplers (indices) whose MAMBA is re-run with the full-batch KSD audited.
    pub rank_check: Vec<usize>,
    /// The NUTS reference (read if it exists, else computed and written).
    pub reference: PathBuf,
    /// NUTS chains, warm-up and draws per chain.
    pub nuts: (usize, usize, usize),
    /// At most this many evenly spaced draws of a final run enter its exact KSD (full-batch
    /// scores, N row gradients per draw).
    pub ksd_draws: usize,
    /// The paper's KSD of a final run: every `final_thin`-th draw (thinned further to at most
    /// `final_max_scored` draws), scored by the control-variate surrogate on
    /// `final_score_subsample` points.
    pub final_thin: usize,
    /// See `final_thin`.
    pub final_max_scored: usize,
    /// See `final_thin`.
    pub final_score_subsample: usize,
    /// Subsample of MAMBA's control-variate scores.
    pub score_subsample: usize,
    /// MAMBA's scores: the control-variate surrogate or the exact full-data score.
    pub tune_scores: TuneScores,
    /// Threads for the arms (0: every core).
    pub threads: usize,
    /// Checkpoints of the KSD-against-time curves (evenly spaced up to `final_seconds`; the
    /// last is the final KSD).
    pub curve_points: usize,
}

impl Default for MambaLogregSettings {
    fn default() -> Self {
        Self {
            rows: 1_000_000,
            dim: 10,
            test_fraction: 0.2,
            data_seed: 2021,
            seed: 1,
            budget_seconds: 1.0,
            final_seconds: 10.0,
            final_runs: 10,
            grid_estimates: 5000,
            samplers: (0..6).collect(),
            fssd: false,
            fssd_only: false,
            rank_check: Vec::new(),
            reference: PathBuf::from("mamba_logreg_reference.json"),
            nuts: (2, 500, 1000),
            ksd_draws: 1000,
            final_thin: 10,
            final_max_scored: 20_000,
            final_score_subsample: 10_000,
            score_subsample: 10_000,
            tune_scores: TuneScores::ControlVariates,
            threads: 0,
            curve_points: 10,
        }
    }
}

impl MambaLogregSettings {
    /// The harness's share of the settings.
    pub fn harness(&self) -> HarnessSettings {
        HarnessSettings {
            seed: self.seed,
            budget_seconds: self.budget_seconds,
            final_seconds: self.final_seconds,
            final_runs: self.final_runs,
            samplers: self.samplers.clone(),
            fssd: self.fssd,
            fssd_only: self.fssd_only,
            mamba_only: false,
            rank_check: self.rank_check.clone(),
            score_subsample: self.score_subsample,
            tune_scores: self.tune_scores,
            threads: self.threads,
            curve_points: self.curve_points,
            final_thin: 1,
            final_burn_in: 0.0,
        }
    }

    /// The problem of §4.1 and the App. C.1.3 grid.
    pub fn spec(&self) -> ExperimentSpec {
        ExperimentSpec {
            title: "MAMBA logistic regression (paper 000 §4.1)".into(),
            data: DataConfig {
                synthetic: Some(SyntheticConfig {
                    rows: self.rows,
                    dim: self.dim,
                    seed: self.data_seed,
                    generator: SyntheticGenerator::Mamba,
                }),
                ..DataConfig::default()
            },
            model: ModelConfig::Logistic {
                prior_variance: 10.0,
                intercept: false,
                prior: PriorKind::Normal,
                prior_scale: None,
                priors: Default::default(),
            },
            evaluation: Some(EvaluationConfig {
                test_fraction: Some(self.test_fraction),
                ..EvaluationConfig::default()
            }),
            grid: super::step_batch_grid(-1.0, -7.5, &[100.0, 10.0, 1.0, 0.1]),
            sghmc_inner_steps: vec![5, 10],
            grid_search: GridSearchConfig {
                estimates: Some(self.grid_estimates),
                batch_size: BatchSize::percent(10.0),
                start_noise: 0.2,
                select_by: Some(GridSelection::LogLoss),
                ..GridSearchConfig::default()
            },
            tune_thin: 10,
            tune_max_scored: None,
            grid_overrides: Vec::new(),
            map: RunConfig::default(),
        }
    }
}

/// One final run of a chosen setting: the columns of the paper's Table 5.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FinalRun {
    /// Seed of the run.
    pub seed: u64,
    /// The run's KSD as MAMBA scores (the paper's): every 10th draw (≤ 20,000 of them),
    /// surrogate scores on 10,000 points. The last point of the method's KSD curve.
    pub ksd: f64,
    /// Draws in `ksd`.
    pub ksd_scored_draws: usize,
    /// KSD with exact full-batch scores on ≤ `ksd_draws` evenly spaced draws.
    pub ksd_exact: f64,
    /// The same draws as `ksd_exact` with the surrogate scores (checks the surrogate).
    pub ksd_exact_draws_surrogate: f64,
    /// ξ(σ̂) = ‖σ̂ − σ_NUTS‖/‖σ_NUTS‖.
    pub xi: f64,
    /// Test accuracy (posterior-mean probability ≥ 1/2).
    pub accuracy: f64,
    /// Draws (iterations) in the run.
    pub draws: usize,
    /// The run diverged.
    pub diverged: bool,
}

impl FinalRun {
    /// Column means over `runs` (draws rounded); `diverged` if any run diverged.
    pub fn mean(runs: &[FinalRun]) -> FinalRun {
        let n = runs.len().max(1) as f64;
        let avg = |f: fn(&FinalRun) -> f64| runs.iter().map(f).sum::<f64>() / n;
        FinalRun {
            seed: runs.first().map_or(0, |r| r.seed),
            ksd: avg(|r| r.ksd),
            ksd_scored_draws: avg(|r| r.ksd_scored_draws as f64).round() as usize,
            ksd_exact: avg(|r| r.ksd_exact),
            ksd_exact_draws_surrogate: avg(|r| r.ksd_exact_draws_surrogate),
            xi: avg(|r| r.xi),
            accuracy: avg(|r| r.accuracy),
            draws: avg(|r| r.draws as f64).round() as usize,
            diverged: runs.iter().any(|r| r.diverged),
        }
    }
}

/// The whole experiment.
#[derive(Debug, Clone, Serialize)]
pub struct MambaLogregReport {
    /// Settings.
    pub settings: MambaLogregSettings,
    /// The reference (method string).
    pub reference_method: String,
    /// Per sampler.
    pub samplers: Vec<SamplerResult>,
    /// Seconds for everything.
    pub seconds: f64,
}

/// The run file of sampler `index` (data, model, test split, `[tune]` grid of App. C.1.3).
pub fn config_text(
    settings: &MambaLogregSettings,
    index: usize,
    fssd: bool,
) -> Result<String, MambaError> {
    super::config_text(&settings.spec(), &settings.harness(), index, fssd)
}

/// What a final run of §4.1 measures: the paper's KSD (every `final_thin`-th draw, at most
/// `final_max_scored`, control-variate scores on `final_score_subsample` points) on each
/// prefix up to the checkpoints, the exact KSD on ≤ `ksd_draws` draws, ξ against the NUTS
/// reference and the test accuracy.
pub struct LogregMetrics<'a> {
    /// The experiment's settings.
    pub settings: &'a MambaLogregSettings,
    /// The NUTS reference moments.
    pub reference: &'a ReferenceMoments,
}

impl FinalMetrics for LogregMetrics<'_> {
    type Run = FinalRun;

    fn curve_name(&self) -> &str {
        "KSD"
    }

    fn measure(&self, run: &FinishedRun<'_>) -> Result<(FinalRun, Vec<f64>), MambaError> {
        let settings = self.settings;
        let model = run.session.prepared.model();
        let dim = model.dim();
        let draws = run.draws;
        let p = draws.len() / dim;
        let scores = run.surrogate_scores(
            settings.seed,
            (1 << 20) + 80,
            settings.final_score_subsample,
        );
        let imq = Kernel::Imq(ImqKernel::default());
        let ksd_of =
            |d: &[f64], sc: &[f64]| ksd(d, sc, dim, &imq).map(|k| k.ksd).unwrap_or(f64::NAN);
        let curve = super::window_ksd_curve(
            draws,
            dim,
            run.windows,
            settings.final_thin,
            settings.final_max_scored,
            &scores,
        );
        let (mut ksd_exact, mut ksd_check, mut scored, mut xi) =
            (f64::INFINITY, f64::INFINITY, 0, f64::INFINITY);
        if p > 0 {
            let thin = p.div_ceil(settings.ksd_draws.max(1)).max(1);
            let exact = full_batch_scores(model, draws, dim, thin)?;
            ksd_exact = ksd_of(&exact.draws, &exact.scores);
            ksd_check = ksd_of(&exact.draws, &scores.scores(&exact.draws));
            let thin = settings
                .final_thin
                .max(p.div_ceil(settings.final_max_scored.max(1)))
                .max(1);
            scored = p.div_ceil(thin);
            xi = accuracy::relative_sd_error(&[draws], dim, self.reference).unwrap_or(f64::NAN);
        }
        let accuracy = run
            .test_metrics(
                &run.final_window(),
                sgmcmc_runfile::config::DEFAULT_PREDICTIVE_DRAWS,
            )?
            .and_then(|m| m.accuracy)
            .unwrap_or(f64::NAN);
        let final_run = FinalRun {
            seed: run.seed,
            ksd: curve.last().copied().unwrap_or(f64::INFINITY),
            ksd_scored_draws: scored,
            ksd_exact,
            ksd_exact_draws_surrogate: ksd_check,
            xi,
            accuracy,
            draws: p,
            diverged: !run.outcome.diverged_chains.is_empty(),
        };
        Ok((final_run, curve))
    }

    fn mean(&self, runs: &[FinalRun]) -> FinalRun {
        FinalRun::mean(runs)
    }

    fn primary(&self, run: &FinalRun) -> f64 {
        run.ksd
    }

    fn describe(&self, run: &FinalRun) -> String {
        format!(
            "KSD {:.3} ({} draws; exact on {}: {:.3}, surrogate there {:.3}), xi {:.4}, accuracy {:.4}, {} draws{}",
            run.ksd,
            run.ksd_scored_draws,
            self.settings.ksd_draws.min(run.draws),
            run.ksd_exact,
            run.ksd_exact_draws_surrogate,
            run.xi,
            run.accuracy,
            run.draws,
            if run.diverged { " (diverged)" } else { "" }
        )
    }
}

/// Run the experiment; `log` receives progress lines and `partial` the report of the samplers
/// finished so far, after each one.
pub fn run(
    settings: &MambaLogregSettings,
    log: &mut dyn FnMut(&str),
    partial: &mut dyn FnMut(&MambaLogregReport),
) -> Result<MambaLogregReport, MambaError> {
    let started = Instant::now();
    let other = MambaError::Setting;
    if settings.final_runs == 0 {
        return Err(other("--final-runs must be at least 1".into()));
    }
    let base_cfg = super::run_config(&settings.spec(), &settings.harness(), 0, false)?;
    let t = Instant::now();
    let prepared = pipeline::prepare(&base_cfg)?;
    log(&format!(
        "data: {} rows x {} (training {}), {:.1} s",
        settings.rows,
        settings.dim,
        prepared.model().num_data(),
        t.elapsed().as_secs_f64()
    ));
    let reference = super::load_or_run_reference(
        &settings.reference,
        settings.nuts,
        settings.seed,
        &prepared,
        log,
    )?;
    let metrics = LogregMetrics {
        settings,
        reference: &reference,
    };
    let report = |samplers: Vec<SamplerResult>| MambaLogregReport {
        settings: settings.clone(),
        reference_method: reference.method.clone(),
        samplers,
        seconds: started.elapsed().as_secs_f64(),
    };
    let samplers = super::run_samplers(
        &settings.spec(),
        &settings.harness(),
        &prepared,
        &metrics,
        log,
        &mut |done| partial(&report(done.to_vec())),
    )?;
    Ok(report(samplers))
}

/// The KSD curves of the final runs as an SVG (one panel per sampler, mean ± 2 sd over the
/// runs per method; the paper's Figure 1). Returns the methods left out (no finite KSD).
pub fn write_ksd_curves(
    path: &std::path::Path,
    report: &MambaLogregReport,
) -> Result<Vec<String>, crate::plot::PlotError> {
    super::write_curves_svg(
        path,
        &format!(
            "Logistic regression: KSD against time (mean ± 2 sd over {} runs)",
            report.settings.final_runs
        ),
        "KSD",
        true,
        &report.samplers,
    )
}

/// The report as Markdown tables beside the paper's.
pub fn markdown(report: &MambaLogregReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let methods: Vec<String> = report
        .samplers
        .first()
        .map(|r| r.methods.iter().map(|m| m.method.clone()).collect())
        .unwrap_or_default();
    let paper_col = |m: &str| match m {
        "MAMBA-KSD" => Some(0),
        "MAMBA-FSSD" => Some(1),
        "grid search" => Some(2),
        "heuristic" => Some(3),
        _ => None,
    };
    s.push_str(&super::choice_table(
        &report.samplers,
        "Table 4",
        &|idx, method| paper_col(method).map(|c| PAPER_TABLE_4[idx][c].to_string()),
    ));
    s.push_str(&super::tune_scores_note(&report.settings.harness()));
    let _ = writeln!(
        s,
        "\n**Final {} s runs**, mean over {} runs (seeds {}…): ξ(σ̂)·10² / KSD ± sd / test \
         accuracy % / draws, ours | paper (Table 5, a mean over 10 runs):\n",
        report.settings.final_seconds, report.settings.final_runs, report.settings.seed
    );
    let _ = writeln!(s, "| sampler | {} |", methods.join(" | "));
    let _ = writeln!(s, "|---|{}", "---|".repeat(methods.len()));
    for r in &report.samplers {
        let idx = SAMPLERS.iter().position(|x| *x == r.sampler).unwrap_or(0);
        let cells: Vec<String> = r
            .methods
            .iter()
            .map(|m| {
                let ours = format!(
                    "{} / {} ± {} / {:.1} / {}{}",
                    fmt_num(100.0 * m.mean.xi),
                    fmt_num(m.mean.ksd),
                    fmt_num(m.primary_sd),
                    100.0 * m.mean.accuracy,
                    m.mean.draws,
                    if m.mean.diverged { " (diverged)" } else { "" }
                );
                let paper = paper_col(&m.method).map_or(String::new(), |c| {
                    let (x, k, a, d) = PAPER_TABLE_5[idx][c];
                    format!("{x} / {k} / {a} / {d}")
                });
                format!("{ours} \\| {paper}")
            })
            .collect();
        let _ = writeln!(s, "| {} | {} |", r.sampler, cells.join(" | "));
    }
    let _ = writeln!(
        s,
        "\nKSD above: every {}th draw of the run (at most {} of them), scored by the \
         control-variate surrogate on {} points. Below: the exact KSD (full-batch scores) on at \
         most {} evenly spaced draws of the same runs, and the surrogate on those same draws.\n",
        report.settings.final_thin,
        report.settings.final_max_scored,
        report.settings.final_score_subsample,
        report.settings.ksd_draws
    );
    let _ = writeln!(
        s,
        "| sampler | {} |",
        methods
            .iter()
            .map(|m| format!("{m}: exact / surrogate"))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let _ = writeln!(s, "|---|{}", "---|".repeat(methods.len()));
    for r in &report.samplers {
        let cells: Vec<String> = r
            .methods
            .iter()
            .map(|m| {
                format!(
                    "{} / {}",
                    fmt_num(m.mean.ksd_exact),
                    fmt_num(m.mean.ksd_exact_draws_surrogate)
                )
            })
            .collect();
        let _ = writeln!(s, "| {} | {} |", r.sampler, cells.join(" | "));
    }
    if !report.samplers.iter().any(super::has_baselines) {
        s.push_str(&super::curve_table(&report.samplers, "KSD", 1.0));
        return s;
    }
    let _ = writeln!(
        s,
        "\n**MAMBA-KSD's mean KSD below both baselines'**: {} of {} samplers (the paper's KSD \
         above); {} of {} by the exact KSD on ≤ {} draws.\n",
        report
            .samplers
            .iter()
            .filter(|r| beats_baselines(r, |m| m.mean.ksd))
            .count(),
        report.samplers.len(),
        report
            .samplers
            .iter()
            .filter(|r| beats_baselines(r, |m| m.mean.ksd_exact))
            .count(),
        report.samplers.len(),
        report.settings.ksd_draws
    );
    if report.settings.final_runs > 1 {
        let _ = writeln!(
            s,
            "Run by run (paired by seed: every method's runs have seeds {}–{}), MAMBA-KSD's KSD \
             below both baselines': {}.\n",
            report.settings.seed,
            report.settings.seed + report.settings.final_runs as u64 - 1,
            report
                .samplers
                .iter()
                .map(|r| format!(
                    "{} {} of {}",
                    r.sampler,
                    runs_beating_baselines(r),
                    report.settings.final_runs
                ))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    s.push_str(&super::curve_table(&report.samplers, "KSD", 1.0));
    s.push_str(&super::timing_table(&report.samplers));
    s.push_str(&super::rank_check_table(&report.samplers));
    s
}

/// Whether MAMBA-KSD's final KSD (as `ksd` reads it) is below both baselines'.
pub fn beats_baselines(r: &SamplerResult, ksd: impl Fn(&MethodResult) -> f64) -> bool {
    super::beats_baselines(r, ksd)
}

/// In how many seeds MAMBA-KSD's final run has a lower KSD than both baselines' runs of the
/// same seed.
pub fn runs_beating_baselines(r: &SamplerResult) -> usize {
    super::runs_beating_baselines(r, |run| run.ksd)
}
