//! Why MAMBA-FSSD picks the largest step on the logistic regression of §4.1 (issue 28,
//! missing experiment 4), and which form of FSSD-opt ranks the arms as the exact KSD and the
//! error of the variances ξ do.
//!
//! Every arm of MAMBA's grid runs one round-0 segment from the MAP (MAMBA's own
//! [`run_arm_round_alone`], at round 0's budget per arm unless set), and the same kept draws
//! with the same surrogate scores are scored by several Stein metrics ([`VARIANTS`]): FSSD-opt
//! with the paper's IMQ kernel (c = 1; kgof's power criterion on a 20 % split, FSSD_V: the
//! library's MAMBA-FSSD until this study), the MAMBA code's (one location, U-statistic
//! objective, raw FSSD²_U; reference §4.5), forms that change one thing at a time, and the
//! Gaussian kernel with a median-heuristic width that MAMBA-FSSD now uses. Each metric is then compared with the ground truths of the
//! arm's draws: the KSD with exact full-batch scores and ξ(σ̂) against the NUTS reference.
//! A metric that works ranks the arms like them and picks an arm they rate well.

use super::{ExperimentSpec, MambaError, SAMPLERS, fmt_num, label_value, rho_finite};
use crate::mamba_logreg::MambaLogregSettings;
use serde::Serialize;
use sgmcmc::diagnostics::accuracy;
use sgmcmc::reference::ReferenceMoments;
use sgmcmc::stein::{
    FssdObjective, FssdOptSettings, ImqKernel, Kernel, KernelSettings, every_kth_row, fssd_opt,
};
use sgmcmc::tuning::mamba::discrepancy;
use sgmcmc::tuning::{Arm, HalvingPlan, TuneBudget, TuneMetricSettings, run_arm_round_alone};
use sgmcmc_runfile::pipeline::{self, TuneSession};
use std::path::PathBuf;
use std::time::Instant;

/// One Stein metric the study scores every arm by (lower ranks better, as MAMBA keeps the
/// lowest).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Variant {
    /// MAMBA-KSD's metric: the V-statistic KSD, IMQ c = 1.
    Ksd,
    /// IMQ c = 1 (the paper's kernel), J = 10 locations optimised by the power criterion on
    /// 20 % of the draws, FSSD_V on the other 80 % (`metric = "fssd_imq"`).
    PowerCriterionV,
    /// J = 10 locations optimised by FSSD²_U on all draws (no split), FSSD_V there.
    UObjectiveV,
    /// The same locations, the raw FSSD²_U (can be negative).
    UObjectiveRawU,
    /// The MAMBA code: one location (its J identical locations), FSSD²_U objective, raw
    /// FSSD²_U.
    PaperCode,
    /// The power criterion with a Gaussian kernel, median-heuristic width optimised with the
    /// locations: MAMBA-FSSD (`metric = "fssd"`).
    GaussianPowerCriterionV,
    /// [`Variant::PowerCriterionV`] on standardised draws: x/σ̂ and s·σ̂ per coordinate (σ̂ the
    /// draws' sd), so the kernel's width is in units of the sample's own spread.
    StandardisedPowerCriterionV,
}

/// The metrics of the study, in table order.
pub const VARIANTS: [Variant; 7] = [
    Variant::Ksd,
    Variant::PowerCriterionV,
    Variant::UObjectiveV,
    Variant::UObjectiveRawU,
    Variant::PaperCode,
    Variant::GaussianPowerCriterionV,
    Variant::StandardisedPowerCriterionV,
];

impl Variant {
    /// Short column name.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Ksd => "KSD",
            Variant::PowerCriterionV => "FSSD IMQ",
            Variant::UObjectiveV => "FSSD U-opt, V",
            Variant::UObjectiveRawU => "FSSD U-opt, raw U",
            Variant::PaperCode => "FSSD paper code",
            Variant::GaussianPowerCriterionV => "FSSD Gaussian",
            Variant::StandardisedPowerCriterionV => "FSSD standardised",
        }
    }

    /// MAMBA's own settings of this metric, for the variants MAMBA can run (their values
    /// come from MAMBA's [`discrepancy`]).
    pub fn mamba_metric(self) -> Option<TuneMetricSettings> {
        match self {
            Variant::Ksd => Some(TuneMetricSettings::Ksd(Kernel::Imq(ImqKernel::default()))),
            Variant::PowerCriterionV => Some(TuneMetricSettings::Fssd(
                KernelSettings::default(),
                FssdOptSettings::default(),
            )),
            Variant::GaussianPowerCriterionV => Some(TuneMetricSettings::Fssd(
                KernelSettings::Gaussian { sigma2: None },
                FssdOptSettings::default(),
            )),
            _ => None,
        }
    }

    /// What it computes.
    pub fn description(self) -> &'static str {
        match self {
            Variant::Ksd => "MAMBA-KSD's metric: V-statistic KSD, IMQ c = 1, β = −1/2",
            Variant::PowerCriterionV => {
                "the paper's IMQ kernel (c = 1), J = 10 locations by Adam (100 steps, 10⁻³) on the power criterion over 20 % of the draws, FSSD_V on the other 80 % (MAMBA-FSSD before this study; now `metric = \"fssd_imq\"`)"
            }
            Variant::UObjectiveV => {
                "IMQ c = 1, J = 10 locations by Adam on FSSD²_U over all draws (the paper's objective, independent locations), FSSD_V"
            }
            Variant::UObjectiveRawU => {
                "as the previous column, ranked by the raw FSSD²_U (can be negative; lowest wins)"
            }
            Variant::PaperCode => {
                "the MAMBA code: its J locations are one point, FSSD²_U objective on all draws, raw FSSD²_U"
            }
            Variant::GaussianPowerCriterionV => {
                "Gaussian kernel, median-heuristic width optimised with the locations, power criterion on 20 %, FSSD_V (MAMBA-FSSD now, `metric = \"fssd\"`)"
            }
            Variant::StandardisedPowerCriterionV => {
                "FSSD IMQ on standardised draws (x/σ̂, s·σ̂ per coordinate)"
            }
        }
    }
}

/// Settings of the study.
#[derive(Debug, Clone, Serialize)]
pub struct FssdStudySettings {
    /// The problem (rows, data seed, seed, score subsample, samplers) as in `mamba-logreg`.
    pub logreg: MambaLogregSettings,
    /// CPU seconds per arm (`None`: MAMBA's round-0 budget per arm for R = `budget_seconds`).
    pub arm_seconds: Option<f64>,
    /// Per-datum gradient evaluations per arm instead of seconds (the same draws on any
    /// machine; overrides `arm_seconds`).
    pub arm_evaluations: Option<u64>,
    /// At most this many evenly spaced draws of an arm enter its exact KSD.
    pub exact_draws: usize,
    /// The NUTS reference for ξ (read if it exists, else computed and written; `None`: no ξ).
    pub reference: Option<PathBuf>,
}

impl Default for FssdStudySettings {
    fn default() -> Self {
        Self {
            logreg: MambaLogregSettings {
                samplers: vec![0, 2],
                ..MambaLogregSettings::default()
            },
            arm_seconds: None,
            arm_evaluations: None,
            exact_draws: 1000,
            reference: None,
        }
    }
}

/// One arm's segment and its metrics.
#[derive(Debug, Clone, Serialize)]
pub struct ArmScores {
    /// The arm's grid values.
    pub label: String,
    /// Kept draws (every `thin`-th iteration, as MAMBA keeps them).
    pub draws: usize,
    /// The chain left the finite numbers (every metric is then +∞, as in MAMBA).
    pub diverged: bool,
    /// KSD with exact full-batch scores on ≤ `exact_draws` evenly spaced draws.
    pub exact_ksd: f64,
    /// ξ(σ̂) of the draws against the reference (NaN without one).
    pub xi: f64,
    /// Mean over coordinates of the draws' sd, in units of the reference sd (NaN without one).
    pub spread: f64,
    /// One value per [`VARIANTS`] entry (+∞ where MAMBA would rank the arm last).
    pub values: Vec<f64>,
}

impl ArmScores {
    /// The arm's log10 step size, read from its grid values.
    pub fn log10_step(&self) -> Option<f64> {
        label_value(&self.label, "log10_step_size")
    }
}

/// A table cell: "–" for NaN (not measured), else [`fmt_num`].
fn cell(x: f64) -> String {
    if x.is_nan() { "–".into() } else { fmt_num(x) }
}

/// How one metric ranks the arms.
#[derive(Debug, Clone, Serialize)]
pub struct VariantSummary {
    /// The metric.
    pub variant: Variant,
    /// Spearman's ρ with the exact KSD over the arms where both are finite.
    pub rho_exact_ksd: f64,
    /// Spearman's ρ with ξ over the arms where both are finite.
    pub rho_xi: f64,
    /// Spearman's ρ with the exact KSD over the best third of the arms by the exact KSD (how
    /// well the metric orders the arms MAMBA's later rounds choose between).
    pub rho_exact_ksd_best_third: f64,
    /// The arm it picks (its lowest value): grid index.
    pub pick: usize,
    /// The pick's rank by the exact KSD (1: the exact KSD's own pick).
    pub pick_rank_exact_ksd: usize,
    /// Of the arms the metric keeps in round 0 (its best ⌊M/3⌋), how many the exact KSD would
    /// also keep.
    pub kept_agreeing: usize,
    /// ⌊M/3⌋.
    pub kept: usize,
}

/// One sampler's study.
#[derive(Debug, Clone, Serialize)]
pub struct SamplerStudy {
    /// "SGLD", …
    pub sampler: String,
    /// Each arm's budget: CPU seconds, or gradient evaluations with `--arm-evaluations`.
    pub arm_budget: f64,
    /// Its unit ("s" or "gradient evaluations").
    pub arm_budget_unit: String,
    /// Every arm of the grid, in grid order.
    pub arms: Vec<ArmScores>,
    /// One per [`VARIANTS`] entry.
    pub summaries: Vec<VariantSummary>,
}

/// The whole study.
#[derive(Debug, Clone, Serialize)]
pub struct FssdStudyReport {
    /// Settings.
    pub settings: FssdStudySettings,
    /// The metrics, described.
    pub variants: Vec<(Variant, String)>,
    /// The reference (method string), if any.
    pub reference_method: Option<String>,
    /// Per sampler.
    pub samplers: Vec<SamplerStudy>,
    /// Seconds for everything.
    pub seconds: f64,
}

/// Stream the FSSD variants draw their splits and locations from (far from the arms').
const STUDY_STREAM: u64 = (1 << 20) + 96;

/// The value of `variant` on `draws` with their `scores` (NaN where it cannot be computed).
/// The variants MAMBA can run ([`Variant::mamba_metric`]) are computed by MAMBA's
/// [`discrepancy`]; with `seed` the one MAMBA gives the arm, their values are the ones MAMBA
/// ranks.
pub fn variant_value(
    variant: Variant,
    draws: &[f64],
    scores: &[f64],
    dim: usize,
    seed: u64,
) -> f64 {
    let imq = Kernel::Imq(ImqKernel::default());
    let power = FssdOptSettings::default();
    let u_objective = FssdOptSettings {
        objective: FssdObjective::UStatistic,
        ..FssdOptSettings::default()
    };
    let fssd = |draws: &[f64], scores: &[f64], kernel: &Kernel, opt: &FssdOptSettings| {
        let mut rng = sgmcmc::rng::stream(seed, STUDY_STREAM);
        fssd_opt(draws, scores, dim, kernel, opt, &mut rng).map(|f| f.value)
    };
    if scores.iter().any(|s| !s.is_finite()) {
        return f64::NAN;
    }
    let value = match variant {
        Variant::Ksd | Variant::PowerCriterionV | Variant::GaussianPowerCriterionV => {
            return variant
                .mamba_metric()
                .map_or(f64::NAN, |m| discrepancy(draws, scores, dim, &m, seed));
        }
        Variant::UObjectiveV => fssd(draws, scores, &imq, &u_objective).map(|f| f.value),
        Variant::UObjectiveRawU => fssd(draws, scores, &imq, &u_objective).map(|f| f.squared_u),
        Variant::PaperCode => {
            let one = FssdOptSettings {
                num_locations: 1,
                ..u_objective
            };
            fssd(draws, scores, &imq, &one).map(|f| f.squared_u)
        }
        Variant::StandardisedPowerCriterionV => {
            let (x, s) = standardised(draws, scores, dim);
            fssd(&x, &s, &imq, &power).map(|f| f.value)
        }
    };
    value.unwrap_or(f64::NAN)
}

/// Draws divided and scores multiplied by each coordinate's sample sd (a coordinate with
/// sd 0 is left as it is): the target in the new coordinates has the scores s·σ̂.
pub fn standardised(draws: &[f64], scores: &[f64], dim: usize) -> (Vec<f64>, Vec<f64>) {
    let sd: Vec<f64> = column_sds(draws, dim)
        .into_iter()
        .map(|v| if v > 0.0 && v.is_finite() { v } else { 1.0 })
        .collect();
    let scale = |v: &[f64], f: &dyn Fn(f64, f64) -> f64| -> Vec<f64> {
        v.chunks_exact(dim)
            .flat_map(|r| r.iter().zip(&sd).map(|(&a, &s)| f(a, s)))
            .collect()
    };
    (scale(draws, &|x, s| x / s), scale(scores, &|g, s| g * s))
}

/// Run the study; `log` receives progress lines.
pub fn run(
    settings: &FssdStudySettings,
    log: &mut dyn FnMut(&str),
) -> Result<FssdStudyReport, MambaError> {
    let started = Instant::now();
    let bad = MambaError::Setting;
    if settings.exact_draws == 0 {
        return Err(bad("--exact-draws must be at least 1".into()));
    }
    if let Some(s) = settings.arm_seconds
        && !(s.is_finite() && s > 0.0)
    {
        return Err(bad(format!("--arm-seconds must be > 0, got {s}")));
    }
    if settings.arm_evaluations == Some(0) {
        return Err(bad("--arm-evaluations must be at least 1".into()));
    }
    if settings.logreg.samplers.is_empty() {
        return Err(bad("no samplers to study".into()));
    }
    let lr = &settings.logreg;
    let spec: ExperimentSpec = lr.spec();
    let harness = lr.harness();
    let base = super::run_config(&spec, &harness, lr.samplers[0], false)?;
    let t = Instant::now();
    let prepared = pipeline::prepare(&base)?;
    let model = prepared.model();
    log(&format!(
        "data: {} rows x {} (training {}), {:.1} s",
        lr.rows,
        lr.dim,
        model.num_data(),
        t.elapsed().as_secs_f64()
    ));
    let reference = match &settings.reference {
        Some(path) => Some(super::load_or_run_reference(
            path, lr.nuts, lr.seed, &prepared, log,
        )?),
        None => None,
    };
    let map = pipeline::find_run_map(&base, model)?;
    log(&format!("MAP: {} iterations", map.iterations));
    let mut samplers = Vec::new();
    for &index in &lr.samplers {
        let cfg = super::run_config(&spec, &harness, index, false)?;
        let session = TuneSession::from_map(&cfg, &prepared, map.clone())?;
        let arms = session.arms()?;
        let mut mamba = session.mamba_settings()?;
        let arm_budget = match (settings.arm_evaluations, settings.arm_seconds) {
            (Some(n), _) => {
                mamba.budget = TuneBudget::ArmEvaluations(n as f64);
                n as f64
            }
            (None, Some(s)) => s,
            (None, None) => HalvingPlan::with_arm_budget(arms.len(), mamba.eta, lr.budget_seconds)
                .map_err(|e| bad(format!("MAMBA's plan: {e}")))?
                .round_budget(arms.len()),
        };
        let unit = mamba.budget.unit();
        let name = SAMPLERS[index];
        log(&format!(
            "{name}: {} arms at {} {unit} each",
            arms.len(),
            fmt_num(arm_budget)
        ));
        let mut rows = Vec::with_capacity(arms.len());
        for (i, arm) in arms.iter().enumerate() {
            let state = Arm::new(
                &session.ctx.start,
                sgmcmc::rng::stream(mamba.seed, i as u64),
            );
            let result = run_arm_round_alone(&session.ctx, arm, i, state, 0, arm_budget, &mamba)?;
            rows.push(score_arm(
                &session,
                &result.draws,
                result.record.diverged,
                arm.label(),
                (settings.exact_draws, mamba.seed ^ i as u64),
                reference.as_ref(),
            ));
        }
        let study = summarise(name, (arm_budget, unit), rows, mamba.eta);
        for s in &study.summaries {
            log(&format!(
                "{name}: {:<18} rho(exact KSD) {:>6} (best third {:>6}), rho(xi) {:>6}, picks {} (rank {} by the exact KSD), keeps {}/{} of the exact KSD's",
                s.variant.name(),
                cell(s.rho_exact_ksd),
                cell(s.rho_exact_ksd_best_third),
                cell(s.rho_xi),
                study.arms[s.pick].label,
                s.pick_rank_exact_ksd,
                s.kept_agreeing,
                s.kept
            ));
        }
        samplers.push(study);
    }
    Ok(FssdStudyReport {
        settings: settings.clone(),
        variants: VARIANTS
            .iter()
            .map(|v| (*v, v.description().to_string()))
            .collect(),
        reference_method: reference.map(|r| r.method),
        samplers,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Every metric of one arm's draws, with its ground truths.
fn score_arm(
    session: &TuneSession<'_>,
    draws: &[f64],
    diverged: bool,
    label: String,
    (exact_draws, seed): (usize, u64),
    reference: Option<&ReferenceMoments>,
) -> ArmScores {
    let dim = session.ctx.model.dim();
    let n = draws.len() / dim;
    let imq = Kernel::Imq(ImqKernel::default());
    let (mut exact_ksd, mut xi, mut spread) = (f64::INFINITY, f64::NAN, f64::NAN);
    let mut values = vec![f64::INFINITY; VARIANTS.len()];
    if !diverged && n > 0 {
        let scores = session.ctx.scores.scores(draws);
        for (v, value) in VARIANTS.iter().zip(values.iter_mut()) {
            let x = variant_value(*v, draws, &scores, dim, seed);
            *value = if x.is_finite() { x } else { f64::INFINITY };
        }
        let thin = n.div_ceil(exact_draws).max(1);
        exact_ksd = session
            .ctx
            .full_batch_ksd(&every_kth_row(draws, dim, thin), &imq);
        if let Some(r) = reference {
            xi = accuracy::relative_sd_error(&[draws], dim, r).unwrap_or(f64::NAN);
            spread = mean_sd_ratio(draws, dim, r);
        }
    }
    ArmScores {
        label,
        draws: n,
        diverged,
        exact_ksd,
        xi,
        spread,
        values,
    }
}

/// Mean over coordinates of sd(draws)/sd(reference).
fn mean_sd_ratio(draws: &[f64], dim: usize, reference: &ReferenceMoments) -> f64 {
    let sds = column_sds(draws, dim);
    sds.iter()
        .zip(&reference.sd)
        .map(|(s, r)| s / r)
        .sum::<f64>()
        / dim as f64
}

/// Each coordinate's sample sd (divisor n − 1; NaN for fewer than two draws).
fn column_sds(draws: &[f64], dim: usize) -> Vec<f64> {
    let n = draws.len() / dim.max(1);
    (0..dim)
        .map(|j| {
            if n < 2 {
                return f64::NAN;
            }
            let col = draws.chunks_exact(dim).map(|r| r[j]);
            let mean = col.clone().sum::<f64>() / n as f64;
            (col.map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1) as f64).sqrt()
        })
        .collect()
}

/// How each metric ranks the arms against the exact KSD and ξ.
fn summarise(
    name: &str,
    (arm_budget, unit): (f64, &str),
    arms: Vec<ArmScores>,
    eta: usize,
) -> SamplerStudy {
    let m = arms.len();
    let kept = (m / eta.max(1)).max(1);
    let exact: Vec<f64> = arms.iter().map(|a| a.exact_ksd).collect();
    let xi: Vec<f64> = arms.iter().map(|a| a.xi).collect();
    let exact_order = order(&exact);
    let exact_rank = |arm: usize| exact_order.iter().position(|&a| a == arm).unwrap_or(m) + 1;
    let summaries = VARIANTS
        .iter()
        .enumerate()
        .map(|(k, &variant)| {
            let values: Vec<f64> = arms.iter().map(|a| a.values[k]).collect();
            let by_value = order(&values);
            let pick = by_value[0];
            let kept_agreeing = by_value[..kept]
                .iter()
                .filter(|a| exact_order[..kept].contains(a))
                .count();
            let best: Vec<usize> = exact_order[..kept].to_vec();
            let pick_of = |v: &[f64]| best.iter().map(|&a| v[a]).collect::<Vec<f64>>();
            VariantSummary {
                variant,
                rho_exact_ksd: rho_finite(&values, &exact),
                rho_exact_ksd_best_third: rho_finite(&pick_of(&values), &pick_of(&exact)),
                rho_xi: rho_finite(&values, &xi),
                pick,
                pick_rank_exact_ksd: exact_rank(pick),
                kept_agreeing,
                kept,
            }
        })
        .collect();
    SamplerStudy {
        sampler: name.to_string(),
        arm_budget,
        arm_budget_unit: unit.to_string(),
        arms,
        summaries,
    }
}

/// Arm indices from lowest value to highest (NaN last, ties in grid order).
fn order(values: &[f64]) -> Vec<usize> {
    let mut o: Vec<usize> = (0..values.len()).collect();
    let key = |x: f64| if x.is_nan() { f64::INFINITY } else { x };
    o.sort_by(|&i, &j| key(values[i]).total_cmp(&key(values[j])));
    o
}

/// The study's tables: per sampler, how each metric ranks the arms, then every arm.
pub fn markdown(report: &FssdStudyReport) -> String {
    let mut out = String::from("# Which Stein metric ranks MAMBA's arms (logistic regression)\n\n");
    for (v, d) in &report.variants {
        out.push_str(&format!("- **{}**: {d}\n", v.name()));
    }
    for s in &report.samplers {
        out.push_str(&format!(
            "\n## {}: {} arms, {} {} each from the MAP\n\n",
            s.sampler,
            s.arms.len(),
            fmt_num(s.arm_budget),
            s.arm_budget_unit
        ));
        out.push_str("| metric | ρ with the exact KSD | among its best third | ρ with ξ | pick | its exact-KSD rank | pick's ξ | round-0 keeps agreeing |\n|---|---|---|---|---|---|---|---|\n");
        for v in &s.summaries {
            let a = &s.arms[v.pick];
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {}/{} |\n",
                v.variant.name(),
                cell(v.rho_exact_ksd),
                cell(v.rho_exact_ksd_best_third),
                cell(v.rho_xi),
                a.label,
                v.pick_rank_exact_ksd,
                cell(a.xi),
                v.kept_agreeing,
                v.kept
            ));
        }
        out.push_str("\n| arm | draws | exact KSD | ξ | sd / reference sd |");
        for v in VARIANTS {
            out.push_str(&format!(" {} |", v.name()));
        }
        out.push_str("\n|---|---|---|---|---|");
        out.push_str(&"---|".repeat(VARIANTS.len()));
        out.push('\n');
        for a in &s.arms {
            out.push_str(&format!(
                "| {} | {}{} | {} | {} | {} |",
                a.label,
                a.draws,
                if a.diverged { " (diverged)" } else { "" },
                fmt_num(a.exact_ksd),
                cell(a.xi),
                cell(a.spread)
            ));
            for x in &a.values {
                out.push_str(&format!(" {} |", fmt_num(*x)));
            }
            out.push('\n');
        }
    }
    out.push_str(&format!("\n{:.1} s in all.\n", report.seconds));
    out
}
