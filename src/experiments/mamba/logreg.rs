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

use crate::config::{Config, GridSelection};
use crate::diagnostics::accuracy;
use crate::pipeline::{self, Prepared, TuneSession, winner_config};
use crate::reference::{NutsSettings, ReferenceMoments, run_nuts};
use crate::runner::NoProgress;
use crate::stein::{ImqKernel, Kernel, every_kth_row, full_batch_scores, ksd};
use crate::tuning::{ArmRound, ArmSettings, ScoreFunction, TuneError};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// The six samplers: (name, `[sampler]` table body, estimator).
pub const SAMPLERS: [(&str, &str, &str); 6] = [
    ("SGLD", "kind = \"sgld\"\nstep_size = 1e-5", "minibatch"),
    (
        "SGLD-CV",
        "kind = \"sgld\"\nstep_size = 1e-5",
        "control_variates",
    ),
    (
        "SGHMC",
        "kind = \"sghmc\"\nstep_size = 1e-6\ninner_steps = 5",
        "minibatch",
    ),
    (
        "SGHMC-CV",
        "kind = \"sghmc\"\nstep_size = 1e-6\ninner_steps = 5",
        "control_variates",
    ),
    ("SGNHT", "kind = \"sgnht\"\nstep_size = 1e-6", "minibatch"),
    (
        "SGNHT-CV",
        "kind = \"sgnht\"\nstep_size = 1e-6",
        "control_variates",
    ),
];

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
    /// Threads for the arms (0: every core).
    pub threads: usize,
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
            threads: 0,
        }
    }
}

/// `round i: label metric (draws), …`, best first: the kept arms, or every arm of a round of
/// at most six.
fn round_summary(round: &[ArmRound]) -> String {
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

/// One tuning method's choice and its final runs.
#[derive(Debug, Clone, Serialize)]
pub struct MethodResult {
    /// "MAMBA-KSD", "MAMBA-FSSD", "grid search" or "heuristic".
    pub method: String,
    /// The chosen settings.
    pub settings: ArmSettings,
    /// `log10 step / batch % [/ L]`, as the paper's Table 4.
    pub choice: String,
    /// Seconds the tuner took (wall).
    pub tune_seconds: f64,
    /// The mean over `runs` of every column (`diverged`: any run diverged).
    pub mean: FinalRun,
    /// Standard deviation of `ksd` over `runs` (0 for one run).
    pub ksd_sd: f64,
    /// Each final run, in seed order.
    pub runs: Vec<FinalRun>,
}

/// One final run of a chosen setting: the columns of the paper's Table 5.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FinalRun {
    /// Seed of the run.
    pub seed: u64,
    /// The run's KSD as MAMBA scores (the paper's): every 10th draw (≤ 20,000 of them),
    /// surrogate scores on 10,000 points.
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

/// MAMBA's timing on one sampler (must-show 3).
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
pub struct SamplerResult {
    /// "SGLD", …
    pub sampler: String,
    /// MAMBA-KSD, [MAMBA-FSSD,] grid search, heuristic.
    pub methods: Vec<MethodResult>,
    /// MAMBA-KSD's timing (when it ran).
    pub timing: Option<MambaTiming>,
    /// The rank check, if asked for.
    pub rank_check: Option<Vec<RoundAgreement>>,
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
pub fn config_text(settings: &MambaLogregSettings, index: usize, fssd: bool) -> String {
    let (_, sampler, estimator) = SAMPLERS[index];
    let inner = if sampler.contains("sghmc") {
        "inner_steps = [5, 10]\n"
    } else {
        ""
    };
    format!(
        r#"# MAMBA logistic regression (paper 000 §4.1): {name}
[data]
synthetic = {{ rows = {rows}, dim = {dim}, seed = {data_seed}, generator = "mamba" }}

[model]
kind = "logistic"
prior_variance = 10.0

[sampler]
{sampler}

[gradient]
estimator = "{estimator}"

[run]
seed = {seed}
chains = 1
budget_seconds = {final_seconds}

[evaluation]
test_fraction = {test_fraction}

[tune]
budget_seconds = {budget}
metric = "{metric}"
thin = 10
score_subsample = {m}
threads = {threads}

[tune.grid]
log10_step_size = {{ from = -1.0, to = -7.5, by = 0.5 }}
batch_size = ["100%", "10%", "1%", "0.1%"]
{inner}
[tune.grid_search]
estimates = {grid}
batch_size = "10%"
start_noise = 0.2
select_by = "log_loss"
"#,
        name = SAMPLERS[index].0,
        rows = settings.rows,
        dim = settings.dim,
        data_seed = settings.data_seed,
        seed = settings.seed,
        final_seconds = settings.final_seconds,
        test_fraction = settings.test_fraction,
        budget = settings.budget_seconds,
        metric = if fssd { "fssd" } else { "ksd" },
        m = settings.score_subsample,
        threads = settings.threads,
        grid = settings.grid_estimates,
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

/// Run the experiment; `log` receives progress lines.
pub fn run(
    settings: &MambaLogregSettings,
    log: &mut dyn FnMut(&str),
) -> Result<MambaLogregReport, TuneError> {
    let started = Instant::now();
    let other = |e: String| TuneError::Grid(e);
    if settings.final_runs == 0 {
        return Err(other("--final-runs must be at least 1".into()));
    }
    let base_cfg = Config::from_toml(&config_text(settings, 0, false), "mamba-logreg")
        .map_err(|e| other(e.to_string()))?;
    let t = Instant::now();
    let prepared = pipeline::prepare(&base_cfg)?;
    log(&format!(
        "data: {} rows x {} (training {}), {:.1} s",
        settings.rows,
        settings.dim,
        prepared.model().num_data(),
        t.elapsed().as_secs_f64()
    ));
    let reference = load_or_run_reference(settings, &prepared, log)?;
    let mut samplers = Vec::new();
    for &index in &settings.samplers {
        let name = SAMPLERS[index].0;
        let cfg = Config::from_toml(&config_text(settings, index, false), name)
            .map_err(|e| other(e.to_string()))?;
        let session = TuneSession::new(&cfg, &prepared)?;
        let mut methods = Vec::new();

        let mamba_settings = session.mamba_settings()?;
        let mut chosen = Vec::new();
        let mut timing = None;
        if !settings.fssd_only {
            // MAMBA-KSD.
            let t = Instant::now();
            let (arms, outcome) = session.mamba(&mamba_settings, &mut |round, _| {
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
            let cfg_f = Config::from_toml(&config_text(settings, index, true), name)
                .map_err(|e| other(e.to_string()))?;
            let session_f = TuneSession::new(&cfg_f, &prepared)?;
            let t = Instant::now();
            let s = session_f.mamba_settings()?;
            let (arms_f, outcome_f) = session_f.mamba(&s, &mut |_, _| {})?;
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

        if !settings.fssd_only {
            // Grid search.
            let t = Instant::now();
            let (grid_arms, selection, grid) = session.grid_search()?;
            debug_assert_eq!(selection, GridSelection::LogLoss);
            log(&format!(
                "{name}: grid search chose {} ({:.1} s)",
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

        let mut rng = crate::rng::stream(settings.seed, (1 << 20) + 80);
        let final_scores = ScoreFunction::control_variates(
            prepared.model(),
            &session.ctx.start,
            &session.ctx.start_score,
            settings.final_score_subsample,
            &mut rng,
        );
        for (method, arm, tune_seconds) in chosen {
            let mut runs = Vec::with_capacity(settings.final_runs);
            for r in 0..settings.final_runs {
                let seed = settings.seed.wrapping_add(r as u64);
                let run = final_run(
                    settings,
                    &final_scores,
                    &cfg,
                    &prepared,
                    &reference,
                    &arm,
                    seed,
                )?;
                log(&format!(
                    "{name} / {method} / seed {seed}: KSD {:.3} ({} draws; exact on {}: {:.3}, surrogate there {:.3}), xi {:.4}, accuracy {:.4}, {} draws{}",
                    run.ksd,
                    run.ksd_scored_draws,
                    settings.ksd_draws.min(run.draws),
                    run.ksd_exact,
                    run.ksd_exact_draws_surrogate,
                    run.xi,
                    run.accuracy,
                    run.draws,
                    if run.diverged { " (diverged)" } else { "" }
                ));
                runs.push(run);
            }
            let mean = FinalRun::mean(&runs);
            let ksd_sd = sample_sd(runs.iter().map(|r| r.ksd));
            methods.push(MethodResult {
                method,
                choice: choice(&arm),
                settings: arm,
                tune_seconds,
                mean,
                ksd_sd,
                runs,
            });
        }

        let rank_check = if settings.rank_check.contains(&index) && !settings.fssd_only {
            let mut audited = mamba_settings.clone();
            audited.audit_full_scores = true;
            let (_, outcome) = session.mamba(&audited, &mut |_, _| {})?;
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
    }
    Ok(MambaLogregReport {
        settings: settings.clone(),
        reference_method: reference.method.clone(),
        samplers,
        seconds: started.elapsed().as_secs_f64(),
    })
}

fn load_or_run_reference(
    settings: &MambaLogregSettings,
    prepared: &Prepared,
    log: &mut dyn FnMut(&str),
) -> Result<ReferenceMoments, TuneError> {
    let model = prepared.model();
    if settings.reference.exists() {
        let r = ReferenceMoments::load(&settings.reference)
            .map_err(|e| TuneError::Grid(e.to_string()))?;
        if r.dim() == model.dim() {
            log(&format!(
                "reference: {} ({})",
                settings.reference.display(),
                r.method
            ));
            return Ok(r);
        }
    }
    let t = Instant::now();
    let (chains, warmup, draws) = settings.nuts;
    let nuts = run_nuts(
        model,
        &NutsSettings {
            chains,
            warmup,
            draws,
            seed: settings.seed,
            ..NutsSettings::default()
        },
        &NoProgress,
    )
    .map_err(|e| TuneError::Grid(e.to_string()))?;
    nuts.moments
        .save(&settings.reference)
        .map_err(|e| TuneError::Grid(e.to_string()))?;
    log(&format!(
        "reference: NUTS {chains} x ({warmup} + {draws}) in {:.1} s -> {}",
        t.elapsed().as_secs_f64(),
        settings.reference.display()
    ));
    Ok(nuts.moments)
}

/// Run `arm` for `final_seconds` from the MAP (one chain, seed `seed`) and measure it: the
/// columns of the paper's Table 5.
pub fn final_run(
    settings: &MambaLogregSettings,
    scores: &ScoreFunction<'_>,
    cfg: &Config,
    prepared: &Prepared,
    reference: &ReferenceMoments,
    arm: &ArmSettings,
    seed: u64,
) -> Result<FinalRun, TuneError> {
    let mut run_cfg = winner_config(cfg, arm);
    run_cfg.run.seed = seed;
    run_cfg.run.chains = 1;
    run_cfg.run.iterations = None;
    run_cfg.run.budget_seconds = Some(settings.final_seconds);
    run_cfg.run.thin = 1;
    run_cfg.run.burn_in = 0;
    let stop = AtomicBool::new(false);
    let (outcome, chains) =
        pipeline::execute_prepared_keeping_draws(&run_cfg, prepared, None, &NoProgress, &stop)?;
    let model = prepared.model();
    let dim = model.dim();
    let draws = &chains[0];
    let p = draws.len() / dim;
    let diverged = !outcome.diverged_chains.is_empty();
    let imq = Kernel::Imq(ImqKernel::default());
    let ksd_of = |d: &[f64], sc: &[f64]| ksd(d, sc, dim, &imq).map(|k| k.ksd).unwrap_or(f64::NAN);
    let (mut ksd_exact, mut ksd_check, mut ksd_paper, mut scored) =
        (f64::INFINITY, f64::INFINITY, f64::INFINITY, 0);
    let mut xi = f64::INFINITY;
    if p > 0 {
        let thin = p.div_ceil(settings.ksd_draws.max(1)).max(1);
        let exact = full_batch_scores(model, draws, dim, thin)
            .map_err(|e| TuneError::Grid(e.to_string()))?;
        ksd_exact = ksd_of(&exact.draws, &exact.scores);
        ksd_check = ksd_of(&exact.draws, &scores.scores(&exact.draws));
        let thin = settings
            .final_thin
            .max(p.div_ceil(settings.final_max_scored.max(1)))
            .max(1);
        let kept = every_kth_row(draws, dim, thin);
        scored = kept.len() / dim;
        ksd_paper = ksd_of(&kept, &scores.scores(&kept));
        xi = accuracy::relative_sd_error(&[draws.as_slice()], dim, reference).unwrap_or(f64::NAN);
    }
    let accuracy = match &outcome.evaluation {
        Some(pipeline::EvaluationOutcome::Done(r)) => r
            .test
            .as_ref()
            .and_then(|t| t.metrics.accuracy)
            .unwrap_or(f64::NAN),
        _ => f64::NAN,
    };
    Ok(FinalRun {
        seed,
        ksd: ksd_paper,
        ksd_scored_draws: scored,
        ksd_exact,
        ksd_exact_draws_surrogate: ksd_check,
        xi,
        accuracy,
        draws: p,
        diverged,
    })
}

/// The sample standard deviation (n − 1), 0 for fewer than two values.
fn sample_sd(values: impl Iterator<Item = f64> + Clone) -> f64 {
    let n = values.clone().count();
    if n < 2 {
        return 0.0;
    }
    let mean = values.clone().sum::<f64>() / n as f64;
    (values.map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1) as f64).sqrt()
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
    let _ = writeln!(
        s,
        "**Selected hyperparameters** (log10 step / batch % / L), ours | paper (Table 4):\n"
    );
    let _ = writeln!(s, "| sampler | {} |", methods.join(" | "));
    let _ = writeln!(s, "|---|{}", "---|".repeat(methods.len()));
    for r in &report.samplers {
        let idx = SAMPLERS.iter().position(|x| x.0 == r.sampler).unwrap_or(0);
        let cells: Vec<String> = r
            .methods
            .iter()
            .map(|m| {
                let paper = paper_col(&m.method).map_or("", |c| PAPER_TABLE_4[idx][c]);
                format!("{} \\| {paper}", m.choice)
            })
            .collect();
        let _ = writeln!(s, "| {} | {} |", r.sampler, cells.join(" | "));
    }
    let _ = writeln!(
        s,
        "\n**Final {} s runs**, mean over {} runs (seeds {}…): ξ(σ̂)·10² / KSD ± sd / test \
         accuracy % / draws, ours | paper (Table 5, a mean over 10 runs):\n",
        report.settings.final_seconds, report.settings.final_runs, report.settings.seed
    );
    let _ = writeln!(s, "| sampler | {} |", methods.join(" | "));
    let _ = writeln!(s, "|---|{}", "---|".repeat(methods.len()));
    for r in &report.samplers {
        let idx = SAMPLERS.iter().position(|x| x.0 == r.sampler).unwrap_or(0);
        let cells: Vec<String> = r
            .methods
            .iter()
            .map(|m| {
                let ours = format!(
                    "{} / {} ± {} / {:.1} / {}{}",
                    fmt_num(100.0 * m.mean.xi),
                    fmt_num(m.mean.ksd),
                    fmt_num(m.ksd_sd),
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
            "Run by run (the r-th run of every method shares seed {} + r), MAMBA-KSD's KSD below \
             both baselines': {}.\n",
            report.settings.seed,
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
    let _ = writeln!(
        s,
        "**MAMBA-KSD wall clock** (MAP + MAMBA) against the nominal budget T:\n"
    );
    let _ = writeln!(
        s,
        "| sampler | arms | T (s) | wall (s) | wall / T | sampling CPU (s) | build + scores + KSD (s) | threads |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|");
    for r in &report.samplers {
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
    let checks: Vec<&SamplerResult> = report
        .samplers
        .iter()
        .filter(|r| r.rank_check.is_some())
        .collect();
    if !checks.is_empty() {
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
    }
    s
}

/// Whether MAMBA-KSD's final KSD (as `ksd` reads it) is below both baselines'.
pub fn beats_baselines(r: &SamplerResult, ksd: impl Fn(&MethodResult) -> f64) -> bool {
    let get = |m: &str| r.methods.iter().find(|x| x.method == m).map(&ksd);
    match (get("MAMBA-KSD"), get("grid search"), get("heuristic")) {
        (Some(m), Some(g), Some(h)) => m < g && m < h,
        _ => false,
    }
}

/// In how many seeds MAMBA-KSD's final run has a lower KSD than both baselines' runs of the
/// same seed.
pub fn runs_beating_baselines(r: &SamplerResult) -> usize {
    let get = |m: &str| r.methods.iter().find(|x| x.method == m);
    let (Some(m), Some(g), Some(h)) = (get("MAMBA-KSD"), get("grid search"), get("heuristic"))
    else {
        return 0;
    };
    m.runs
        .iter()
        .zip(&g.runs)
        .zip(&h.runs)
        .filter(|((m, g), h)| m.ksd < g.ksd && m.ksd < h.ksd)
        .count()
}

fn fmt_num(x: f64) -> String {
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
