//! How the KSD of an SGLD run is best estimated: the MAMBA paper's App. B.2, Figures 4
//! (a grid of step sizes at batch 1 %) and 5 (a grid of batch sizes at step 10^−4.5), for
//! logistic regression, PMF and the neural network (issue 28, missing experiment 5).
//!
//! Each arm is one SGLD segment from the MAP at a fixed number of per-datum gradient
//! evaluations (the paper: 1 s; a count of evaluations gives the same draws on any machine).
//! Its draws (every iterate, at most `max_draws` evenly spaced) are scored five ways, with the
//! IMQ KSD (c = 1, β = −1/2) of each:
//!
//! - **full batch, all draws**: ∇log π(θ) exactly (N per-datum gradients per draw): the
//!   ground truth the others are ranked against;
//! - **full batch, thinned by 5**;
//! - **stochastic, all draws** and **thinned by 5**: the arm's own minibatch estimate
//!   ∇log p(θ) + (N/n)·Σ_{i∈B} ∇log p(xᵢ | θ) with a fresh minibatch B at each draw (the
//!   paper's "stochastic gradients", Gorham et al. 2020);
//! - **surrogate**: the control-variate surrogate about the MAP on one fixed subsample of m
//!   points ([`sgmcmc::tuning::ScoreFunction`]), the score MAMBA's runs use on PMF and the
//!   neural network.
//!
//! A way of estimating that works ranks the arms as the full-batch KSD does (Spearman's ρ)
//! and picks the same arm.

use super::{
    ExperimentSpec, HarnessSettings, MambaError, fmt_num, label_value, rho_finite, spearman,
};
use crate::plot::{self, Figure, Panel, PlotError, Series};
use serde::Serialize;
use sgmcmc::estimator::BatchSize;
use sgmcmc::stein::{ImqKernel, Kernel, every_kth_row, ksd};
use sgmcmc::tuning::{Arm, GridValues, ScoreFunction, TuneBudget, TuneGrid, run_arm_round_alone};
use sgmcmc_runfile::pipeline::{self, TuneSession};
use std::path::Path;
use std::time::Instant;

/// The five ways of estimating the KSD, in table order.
pub const ESTIMATES: [&str; 5] = [
    "full batch, all draws",
    "full batch, thinned by 5",
    "stochastic, all draws",
    "stochastic, thinned by 5",
    "surrogate (m points), all draws",
];

/// Thinning of the "thinned" estimates (the paper's 5).
pub const THIN: usize = 5;

/// Settings of the study.
#[derive(Debug, Clone, Serialize)]
pub struct KsdEstimatorSettings {
    /// "logistic regression", "PMF", "neural network".
    pub problem: String,
    /// The experiment's problem (data, model, MAP search); its grid is replaced.
    #[serde(skip)]
    pub spec: ExperimentSpec,
    /// Seed and the surrogate's m (`score_subsample`).
    pub harness: HarnessSettings,
    /// Figure 4: the log10 step sizes, at `step_batch_percent`.
    pub log10_steps: Vec<f64>,
    /// Figure 4's batch size (% of N; the paper: 1).
    pub step_batch_percent: f64,
    /// Figure 5: the batch sizes (% of N), at `batch_log10_step`.
    pub batch_percents: Vec<f64>,
    /// Figure 5's log10 step (the paper: −4.5).
    pub batch_log10_step: f64,
    /// Each arm's budget: this many iterations at a 1 % batch, as per-datum gradient
    /// evaluations (`iterations` × ⌈N/100⌉), the same for every arm.
    pub iterations: u64,
    /// At most this many evenly spaced draws of an arm are scored (the "all draws").
    pub max_draws: usize,
}

/// One arm's five KSDs.
#[derive(Debug, Clone, Serialize)]
pub struct ArmKsds {
    /// The arm's grid values.
    pub label: String,
    /// Its log10 step.
    pub log10_step: f64,
    /// Its batch size, % of N.
    pub batch_percent: f64,
    /// Draws kept: every iterate of the segment.
    pub kept: usize,
    /// Draws scored as "all draws" (every iterate, or evenly spaced when more than
    /// `max_draws`).
    pub draws: usize,
    /// The chain left the finite numbers (every KSD is then +∞).
    pub diverged: bool,
    /// One KSD per [`ESTIMATES`] entry.
    pub ksd: Vec<f64>,
}

/// How one estimate ranks a panel's arms against the full-batch KSD of all draws.
#[derive(Debug, Clone, Serialize)]
pub struct EstimateSummary {
    /// The [`ESTIMATES`] entry.
    pub estimate: String,
    /// Spearman's ρ with the full-batch KSD over the arms where both are finite.
    pub rho: f64,
    /// Spearman's ρ over every arm, the diverged ones tied last (as MAMBA ranks them).
    pub rho_with_diverged: f64,
    /// The arm it picks (its lowest KSD).
    pub pick: usize,
    /// The pick's full-batch KSD over the lowest full-batch KSD of the panel (1: the best
    /// arm): what a wrong pick costs.
    pub pick_ratio: f64,
}

/// One figure's panel: a grid of arms and how each estimate ranks them.
#[derive(Debug, Clone, Serialize)]
pub struct PanelResult {
    /// "step size" or "batch size".
    pub varies: String,
    /// Per-datum gradient evaluations per arm.
    pub arm_evaluations: u64,
    /// The arms in grid order.
    pub arms: Vec<ArmKsds>,
    /// One per [`ESTIMATES`] entry.
    pub summaries: Vec<EstimateSummary>,
}

/// The whole study of one problem.
#[derive(Debug, Clone, Serialize)]
pub struct KsdEstimatorReport {
    /// Settings.
    pub settings: KsdEstimatorSettings,
    /// N and D.
    pub num_data: usize,
    /// Parameters D.
    pub dim: usize,
    /// The surrogate's m.
    pub surrogate_points: usize,
    /// Iterations of the MAP search that every arm starts from.
    pub map_iterations: usize,
    /// Figure 4 (steps) and Figure 5 (batch sizes).
    pub panels: Vec<PanelResult>,
    /// Seconds for everything.
    pub seconds: f64,
}

/// Stream of the fresh minibatches of the stochastic scores (far from the arms' streams).
const STOCHASTIC_STREAM: u64 = (1 << 20) + 97;

/// Run the study; `log` receives progress lines.
pub fn run(
    settings: &KsdEstimatorSettings,
    log: &mut dyn FnMut(&str),
) -> Result<KsdEstimatorReport, MambaError> {
    let started = Instant::now();
    let bad = MambaError::Setting;
    if settings.iterations == 0 {
        return Err(bad("--iterations must be at least 1".into()));
    }
    if settings.max_draws < 2 {
        return Err(bad("--max-draws must be at least 2".into()));
    }
    if settings.log10_steps.is_empty() && settings.batch_percents.is_empty() {
        return Err(bad("no steps and no batch sizes to study".into()));
    }
    let mut spec = settings.spec.clone();
    // Every iterate kept; MAMBA's own metric of an arm (unused here) on two draws only.
    spec.tune_thin = 1;
    spec.tune_max_scored = Some(2);
    spec.grid_overrides.clear();
    spec.sghmc_inner_steps.clear();
    let harness = HarnessSettings {
        samplers: vec![0],
        ..settings.harness.clone()
    };
    let prepared = super::prepare_problem(&spec, &harness, log)?;
    let model = prepared.model();
    let (num_data, dim) = (model.num_data(), model.dim());
    let t = Instant::now();
    let map = pipeline::find_run_map(&super::run_config(&spec, &harness, 0, false)?, model)?;
    log(&format!(
        "MAP: {} iterations, {:.1} s",
        map.iterations,
        t.elapsed().as_secs_f64()
    ));
    let arm_evaluations = settings.iterations * num_data.div_ceil(100) as u64;
    let grids = [
        (
            "step size",
            settings.log10_steps.clone(),
            vec![settings.step_batch_percent],
        ),
        (
            "batch size",
            vec![settings.batch_log10_step],
            settings.batch_percents.clone(),
        ),
    ];
    let mut panels = Vec::new();
    let mut surrogate_points = 0;
    for (varies, steps, percents) in grids {
        if steps.is_empty() || percents.is_empty() {
            continue;
        }
        spec.grid = TuneGrid {
            log10_step_size: Some(GridValues::List(steps)),
            batch_size: Some(percents.iter().map(|&p| BatchSize::percent(p)).collect()),
            ..TuneGrid::default()
        };
        let cfg = super::run_config(&spec, &harness, 0, false)?;
        let session = TuneSession::from_map(&cfg, &prepared, map.clone())?;
        surrogate_points = session.ctx.scores.cost_per_draw();
        let arms = session.arms()?;
        let mut mamba = session.mamba_settings()?;
        mamba.budget = TuneBudget::ArmEvaluations(arm_evaluations as f64);
        let mut rows = Vec::with_capacity(arms.len());
        for (i, arm) in arms.iter().enumerate() {
            let t = Instant::now();
            let state = Arm::new(
                &session.ctx.start,
                sgmcmc::rng::stream(mamba.seed, i as u64),
            );
            let result = run_arm_round_alone(
                &session.ctx,
                arm,
                i,
                state,
                0,
                arm_evaluations as f64,
                &mamba,
            )?;
            let (_, mut estimator) = session.ctx.build(arm)?;
            let mut rng = sgmcmc::rng::stream(mamba.seed, STOCHASTIC_STREAM + i as u64);
            let mut stochastic = |draws: &[f64]| {
                let mut out = vec![0.0; draws.len()];
                for (theta, s) in draws.chunks_exact(dim).zip(out.chunks_exact_mut(dim)) {
                    estimator.estimate(theta, s, &mut rng);
                }
                out
            };
            let batch = arm
                .gradient
                .batch_size
                .resolve(num_data)
                .unwrap_or(num_data);
            let kept = result.draws.len() / dim;
            let (draws, ksds) = if result.record.diverged || kept == 0 {
                (0, vec![f64::INFINITY; ESTIMATES.len()])
            } else {
                let all = every_kth_row(&result.draws, dim, kept.div_ceil(settings.max_draws));
                (
                    all.len() / dim,
                    five_ksds(&all, dim, &session.ctx.scores, &mut stochastic, model),
                )
            };
            let row = ArmKsds {
                label: arm.label(),
                log10_step: label_value(&arm.label(), "log10_step_size").unwrap_or(f64::NAN),
                batch_percent: 100.0 * batch as f64 / num_data as f64,
                kept,
                draws,
                diverged: result.record.diverged,
                ksd: ksds,
            };
            log(&format!(
                "{varies}: {} ({} draws kept, {} scored): {} ({:.1} s)",
                row.label,
                row.kept,
                row.draws,
                row.ksd
                    .iter()
                    .map(|k| fmt_num(*k))
                    .collect::<Vec<_>>()
                    .join(" / "),
                t.elapsed().as_secs_f64()
            ));
            rows.push(row);
        }
        let summaries = summarise(&rows);
        for s in &summaries {
            log(&format!(
                "{varies}: {:<32} rho {:>6.3} ({:>6.3} with the diverged), picks {} (full-batch KSD {} x the lowest)",
                s.estimate,
                s.rho,
                s.rho_with_diverged,
                rows[s.pick].label,
                fmt_num(s.pick_ratio)
            ));
        }
        panels.push(PanelResult {
            varies: varies.into(),
            arm_evaluations,
            arms: rows,
            summaries,
        });
    }
    Ok(KsdEstimatorReport {
        settings: settings.clone(),
        num_data,
        dim,
        surrogate_points,
        map_iterations: map.iterations,
        panels,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// The KSD of `all` (and of every [`THIN`]-th of its rows) with full-batch, stochastic and
/// surrogate scores, in [`ESTIMATES`] order (+∞ where a value is not finite).
fn five_ksds(
    all: &[f64],
    dim: usize,
    surrogate: &ScoreFunction<'_>,
    stochastic: &mut dyn FnMut(&[f64]) -> Vec<f64>,
    model: &dyn sgmcmc::model::Model,
) -> Vec<f64> {
    let imq = Kernel::Imq(ImqKernel::default());
    let value = |draws: &[f64], scores: &[f64]| {
        let k = ksd(draws, scores, dim, &imq).map_or(f64::NAN, |k| k.ksd);
        if k.is_finite() { k } else { f64::INFINITY }
    };
    let thinned = every_kth_row(all, dim, THIN);
    let exact = ScoreFunction::exact(model).scores(all);
    let noisy = stochastic(all);
    vec![
        value(all, &exact),
        value(&thinned, &every_kth_row(&exact, dim, THIN)),
        value(all, &noisy),
        value(&thinned, &every_kth_row(&noisy, dim, THIN)),
        value(all, &surrogate.scores(all)),
    ]
}

/// Each estimate's ρ with the full-batch KSD of all draws, and its pick.
fn summarise(arms: &[ArmKsds]) -> Vec<EstimateSummary> {
    let column = |k: usize| arms.iter().map(|a| a.ksd[k]).collect::<Vec<f64>>();
    let truth = column(0);
    let best = truth.iter().copied().fold(f64::INFINITY, f64::min);
    ESTIMATES
        .iter()
        .enumerate()
        .map(|(k, name)| {
            let values = column(k);
            let pick = (0..values.len())
                .min_by(|&i, &j| values[i].total_cmp(&values[j]))
                .unwrap_or(0);
            EstimateSummary {
                estimate: name.to_string(),
                rho: rho_finite(&values, &truth),
                rho_with_diverged: spearman(&values, &truth),
                pick,
                pick_ratio: truth.get(pick).map_or(f64::NAN, |t| t / best),
            }
        })
        .collect()
}

/// The study's tables.
pub fn markdown(report: &KsdEstimatorReport) -> String {
    let s = &report.settings;
    let mut out = format!(
        "# KSD of SGLD estimated five ways: {} (N = {}, D = {}; paper 000 App. B.2, Figs. 4–5)\n\n\
         Each arm: SGLD from the MAP ({} iterations of its search) for {} per-datum gradient evaluations \
         ({} iterations at a 1 % batch); every iterate kept, at most {} evenly spaced draws scored. Surrogate: control variates about the MAP on m = {} points. \
         KSD: IMQ, c = 1, β = −1/2. Seed {}.\n",
        s.problem,
        report.num_data,
        report.dim,
        report.map_iterations,
        report.panels.first().map_or(0, |p| p.arm_evaluations),
        s.iterations,
        s.max_draws,
        report.surrogate_points,
        s.harness.seed
    );
    for p in &report.panels {
        out.push_str(&format!(
            "\n## Varying the {} ({})\n\n| estimate | ρ with the full-batch KSD, finite arms | ρ, diverged arms tied last | pick | its full-batch KSD ÷ the lowest |\n|---|---|---|---|---|\n",
            p.varies,
            if p.varies == "step size" {
                format!("batch {} %, the paper's Fig. 4", fmt_num(s.step_batch_percent))
            } else {
                format!("log10 step {}, the paper's Fig. 5", fmt_num(s.batch_log10_step))
            }
        ));
        for e in &p.summaries {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} |\n",
                e.estimate,
                rho_cell(e.rho),
                rho_cell(e.rho_with_diverged),
                p.arms[e.pick].label,
                fmt_num(e.pick_ratio)
            ));
        }
        out.push_str("\n| arm | draws kept | draws scored |");
        for e in ESTIMATES {
            out.push_str(&format!(" {e} |"));
        }
        out.push_str("\n|---|---|---|");
        out.push_str(&"---|".repeat(ESTIMATES.len()));
        out.push('\n');
        for a in &p.arms {
            out.push_str(&format!(
                "| {} | {} | {}{} |",
                a.label,
                a.kept,
                a.draws,
                if a.diverged { " (diverged)" } else { "" }
            ));
            for k in &a.ksd {
                out.push_str(&format!(" {} |", fmt_num(*k)));
            }
            out.push('\n');
        }
    }
    out.push_str(&format!("\n{:.1} s in all.\n", report.seconds));
    out
}

/// ρ to three decimals; "–" where it is undefined (fewer than two arms, or constant).
fn rho_cell(rho: f64) -> String {
    if rho.is_nan() {
        "–".into()
    } else {
        format!("{rho:.3}")
    }
}

/// The figure: one panel per grid, the five KSDs against log10 step or log10 batch %.
pub fn write_svg(path: &Path, report: &KsdEstimatorReport) -> Result<(), PlotError> {
    let panels = report
        .panels
        .iter()
        .map(|p| {
            let x: Vec<f64> = p
                .arms
                .iter()
                .map(|a| {
                    if p.varies == "step size" {
                        a.log10_step
                    } else {
                        a.batch_percent.log10()
                    }
                })
                .collect();
            Panel {
                title: format!(
                    "{}: {} (x: log10 {})",
                    report.settings.problem,
                    p.varies,
                    if p.varies == "step size" {
                        "step"
                    } else {
                        "batch %"
                    }
                ),
                series: ESTIMATES
                    .iter()
                    .enumerate()
                    .map(|(k, name)| {
                        Series::line(*name, x.clone(), p.arms.iter().map(|a| a.ksd[k]).collect())
                    })
                    .collect(),
            }
        })
        .collect();
    plot::write_svg(
        path,
        &Figure::new(
            "KSD of SGLD, five estimates (paper 000, Figs. 4-5)",
            "log10 step or log10 batch (%)",
            "KSD",
            true,
            panels,
        ),
    )
}
