//! MAMBA (reference §5.2; Coullon, South & Nemeth 2021, Algorithm 1): successive halving over
//! a grid of sampler settings, each arm scored by a Stein discrepancy of its latest round.
//!
//! **Parallel arms, each charged its own CPU time.** The arms of a round run on a pool of
//! threads (default: one per core). Each arm's budget is the CPU time of the thread running it
//! ([`Budget::ThreadCpuSeconds`]), not wall time, so an arm is charged for its own work only
//! and the thread count does not change how much sampling an arm gets, hence which arm wins
//! (up to the usual timing noise, and the slowdown two arms sharing memory bandwidth cause
//! each other). The nominal budget T is the sum of the arms' budgets, so on c cores the
//! sampling takes about T/c of wall time. With [`TuneBudget::ArmEvaluations`] or
//! [`TuneBudget::TotalEvaluations`] budgets count per-datum gradient evaluations and a run is
//! reproducible bit for bit from the seed, on any number of threads.
//!
//! Each arm draws from its own stream `rng::stream(seed, arm)`. Every round the arm's sampler and
//! estimator are built afresh (auxiliary state restarts, §5.2) and started from the arm's last
//! iterate. Control variates share one centre (the MAP) and its full-data score, computed once.

use super::TuneError;
use super::arm::Arm;
use super::grid::ArmSettings;
use super::halving::{HalvingPlan, successive_halving_resumed};
use super::progress::{ArmProgress, MambaProgress};
use super::scores::{ScoreFunction, TuneScores};
use crate::estimator::{ControlVariates, FullDataEvaluator, GradientEstimator};
use crate::model::Model;
use crate::runner::Budget;
use crate::sampler::Sampler;
use crate::settings::{EstimatorKind, SettingsError};
use crate::stein::{FssdOptSettings, ImqKernel, Kernel, KernelSettings, fssd_opt, ksd};
use std::cell::RefCell;
use std::sync::Mutex;
use std::time::Instant;

/// The budget of a tuning run.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum TuneBudget {
    /// R in thread-CPU seconds (the paper's budget: the winner's cumulative time when M is a
    /// power of η).
    ArmSeconds(f64),
    /// T in thread-CPU seconds.
    TotalSeconds(f64),
    /// R in per-datum gradient evaluations.
    ArmEvaluations(f64),
    /// T in per-datum gradient evaluations.
    TotalEvaluations(f64),
}

impl TuneBudget {
    fn plan(self, arms: usize, eta: usize) -> Result<HalvingPlan, TuneError> {
        Ok(match self {
            TuneBudget::ArmSeconds(r) | TuneBudget::ArmEvaluations(r) => {
                HalvingPlan::with_arm_budget(arms, eta, r)?
            }
            TuneBudget::TotalSeconds(t) | TuneBudget::TotalEvaluations(t) => {
                HalvingPlan::with_total_budget(arms, eta, t)?
            }
        })
    }

    fn arm_budget(self, per_arm: f64) -> Budget {
        match self {
            TuneBudget::ArmSeconds(_) | TuneBudget::TotalSeconds(_) => {
                Budget::ThreadCpuSeconds(per_arm)
            }
            TuneBudget::ArmEvaluations(_) | TuneBudget::TotalEvaluations(_) => {
                Budget::GradientEvaluations(per_arm.ceil() as u64)
            }
        }
    }

    /// "s" (thread-CPU seconds) or "gradient evaluations".
    pub fn unit(self) -> &'static str {
        match self {
            TuneBudget::ArmSeconds(_) | TuneBudget::TotalSeconds(_) => "s",
            TuneBudget::ArmEvaluations(_) | TuneBudget::TotalEvaluations(_) => {
                "gradient evaluations"
            }
        }
    }
}

/// The discrepancy an arm is ranked by (lower is better).
#[derive(Debug, Clone, PartialEq)]
pub enum TuneMetricSettings {
    /// KSD with this kernel, reported as sqrt(KSD²_V).
    Ksd(Kernel),
    /// FSSD-opt (FSSD_V at the optimised locations) with this kernel, resolved on each arm's
    /// draws (a Gaussian without a width takes the median heuristic of those draws), and
    /// optimiser.
    Fssd(KernelSettings, FssdOptSettings),
}

impl Default for TuneMetricSettings {
    fn default() -> Self {
        TuneMetricSettings::Ksd(Kernel::Imq(ImqKernel::default()))
    }
}

/// Settings of a MAMBA run.
#[derive(Debug, Clone, PartialEq)]
pub struct MambaSettings {
    /// Pruning rate η.
    pub eta: usize,
    /// R or T.
    pub budget: TuneBudget,
    /// Keep every `thin`-th iterate of a round.
    pub thin: usize,
    /// Score at most this many of a round's kept draws (evenly spaced) for the metric (`None`:
    /// all). At D ≈ 5·10⁴ the KSD of P draws costs ≈ 4P²D FLOPs, 2·10¹¹ at P = 1000.
    pub max_scored_draws: Option<usize>,
    /// The metric.
    pub metric: TuneMetricSettings,
    /// Threads for the arms (0: every core).
    pub threads: usize,
    /// `mamba_float_round_count`.
    pub float_round_count: bool,
    /// Seed of every arm's stream.
    pub seed: u64,
    /// Also compute the KSD with exact full-batch scores at the same draws (outside the
    /// budget), to check the ranking of a cheaper score function.
    pub audit_full_scores: bool,
}

impl Default for MambaSettings {
    fn default() -> Self {
        Self {
            eta: 3,
            budget: TuneBudget::ArmSeconds(1.0),
            thin: 10,
            max_scored_draws: None,
            metric: TuneMetricSettings::default(),
            threads: 0,
            float_round_count: false,
            seed: 0,
            audit_full_scores: false,
        }
    }
}

/// What the arms share: the model, the starting point and control-variate centre (the MAP) with
/// its full-data score, and the score function of the metric.
pub struct TuneContext<'m> {
    /// The model.
    pub model: &'m dyn Model,
    /// Where every arm starts, and the centre of control-variate estimators (the MAP).
    pub start: Vec<f64>,
    /// ∇log π at `start` (full data).
    pub start_score: Vec<f64>,
    /// Scores at kept draws.
    pub scores: ScoreFunction<'m>,
}

/// Stream of the seed that draws the score subsample of [`TuneContext::at_map`] (far from the
/// arms' streams).
pub const SCORE_STREAM: u64 = (1 << 20) + 48;

impl<'m> TuneContext<'m> {
    /// The arms' shared context at the MAP `map` of `model`: its full-data score (one pass)
    /// and the score function the metric uses at kept draws (`scores`: exact, or the
    /// control-variate surrogate on `subsample` points drawn from stream [`SCORE_STREAM`] of
    /// `seed`, the same for every arm).
    pub fn at_map(
        model: &'m dyn Model,
        map: &[f64],
        scores: TuneScores,
        subsample: usize,
        seed: u64,
    ) -> Result<Self, TuneError> {
        let dim = model.dim();
        if map.len() != dim {
            return Err(TuneError::Grid(format!(
                "the MAP has {} coordinates, the model {dim}",
                map.len()
            )));
        }
        if subsample == 0 {
            return Err(TuneError::Grid(
                "[tune] score_subsample must be at least 1".into(),
            ));
        }
        let mut start_score = vec![0.0; dim];
        FullDataEvaluator::new(model).grad_log_posterior(map, &mut start_score);
        let mut rng = crate::rng::stream(seed, SCORE_STREAM);
        let scores =
            ScoreFunction::from_config(scores, model, map, &start_score, subsample, &mut rng);
        Ok(Self {
            model,
            start: map.to_vec(),
            start_score,
            scores,
        })
    }
}

/// A sampler and its gradient estimator, ready for a round.
pub type ArmParts<'a> = (Box<dyn Sampler>, Box<dyn GradientEstimator + 'a>);

impl TuneContext<'_> {
    /// A fresh sampler and estimator for `arm`: control variates reuse the shared centre score
    /// (no pass over the data).
    pub fn build(&self, arm: &ArmSettings) -> Result<ArmParts<'_>, TuneError> {
        let sampler = arm.sampler.build()?;
        let estimator: Box<dyn GradientEstimator + '_> = match arm.gradient.estimator {
            EstimatorKind::ControlVariates => Box::new(
                ControlVariates::with_centre_score(
                    self.model,
                    arm.gradient.batch_size,
                    &self.start,
                    &self.start_score,
                )?
                .with_replacement(arm.gradient.with_replacement)
                .with_scheme(arm.gradient.scheme),
            ),
            _ => arm.gradient.build(self.model, Some(&self.start))?,
        };
        Ok((sampler, estimator))
    }

    /// Check every arm against the model (batch sizes, sampler with estimator) before running.
    pub fn check(&self, arms: &[ArmSettings]) -> Result<(), TuneError> {
        for (i, arm) in arms.iter().enumerate() {
            let named = |table: &'static str, source: SettingsError| TuneError::Arm {
                index: i,
                label: arm.label(),
                table,
                source,
            };
            arm.gradient
                .check(self.model)
                .map_err(|e| named("gradient", e))?;
            arm.sampler
                .check_with_estimator(&arm.gradient, self.model)
                .map_err(|e| named("sampler", e))?;
        }
        Ok(())
    }

    /// The metric of `draws` (scored here): +∞ for no draws or a non-finite value.
    pub fn metric(&self, draws: &[f64], metric: &TuneMetricSettings, seed: u64) -> f64 {
        let d = self.model.dim();
        if draws.is_empty() {
            return f64::INFINITY;
        }
        let scores = self.scores.scores(draws);
        finite_or_inf(discrepancy(draws, &scores, d, metric, seed))
    }

    /// The KSD of `draws` with exact full-batch scores (the audit of a cheaper score function).
    pub fn full_batch_ksd(&self, draws: &[f64], kernel: &Kernel) -> f64 {
        if draws.is_empty() {
            return f64::INFINITY;
        }
        let scores = ScoreFunction::exact(self.model).scores(draws);
        finite_or_inf(
            ksd(draws, &scores, self.model.dim(), kernel)
                .map(|k| k.ksd)
                .unwrap_or(f64::NAN),
        )
    }
}

fn finite_or_inf(x: f64) -> f64 {
    if x.is_finite() { x } else { f64::INFINITY }
}

/// The metric value of draws with their scores (NaN when it cannot be computed, e.g. too few
/// draws for FSSD-opt's split).
pub fn discrepancy(
    draws: &[f64],
    scores: &[f64],
    dim: usize,
    metric: &TuneMetricSettings,
    seed: u64,
) -> f64 {
    if scores.iter().any(|s| !s.is_finite()) {
        return f64::NAN;
    }
    match metric {
        TuneMetricSettings::Ksd(kernel) => ksd(draws, scores, dim, kernel)
            .map(|k| k.ksd)
            .unwrap_or(f64::NAN),
        TuneMetricSettings::Fssd(kernel, opt) => {
            let mut rng = crate::rng::stream(seed, FSSD_STREAM);
            kernel
                .resolve(draws, dim)
                .and_then(|kernel| fssd_opt(draws, scores, dim, &kernel, opt, &mut rng))
                .map(|f| f.value.value)
                .unwrap_or(f64::NAN)
        }
    }
}

/// Stream FSSD-opt's split and locations draw from (far from arm numbers).
const FSSD_STREAM: u64 = (1 << 20) + 32;

/// One arm in one round.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ArmRound {
    /// Round i.
    pub round: usize,
    /// Arm index (grid order).
    pub arm: usize,
    /// Its grid values, `key=value, …`.
    pub label: String,
    /// The metric of this round's draws (+∞: diverged, NaN, or no draws).
    pub metric: f64,
    /// The KSD with full-batch scores at the same draws, when audited.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub full_batch_ksd: Option<f64>,
    /// Draws kept this round.
    pub draws: usize,
    /// Of them, the draws the metric scored (all, or evenly spaced ones up to
    /// `max_scored_draws`).
    pub scored_draws: usize,
    /// Iterations run this round.
    pub iterations: usize,
    /// Per-datum gradient evaluations spent.
    pub gradient_evaluations: u64,
    /// Thread-CPU seconds of sampling (the budgeted part).
    pub sampling_seconds: f64,
    /// Seconds building the sampler and estimator, scoring the draws and computing the metric.
    pub overhead_seconds: f64,
    /// The chain became non-finite.
    pub diverged: bool,
    /// Survived the round.
    pub kept: bool,
}

/// The result of [`mamba`].
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct MambaOutcome {
    /// Number of arms M.
    pub arms: usize,
    /// η.
    pub eta: usize,
    /// K.
    pub rounds_planned: usize,
    /// T, in the budget's unit.
    pub total_budget: f64,
    /// The budget's unit.
    pub budget_unit: &'static str,
    /// Every round, each in ranking order (best first).
    pub rounds: Vec<Vec<ArmRound>>,
    /// The winning arm (grid index).
    pub winner: usize,
    /// Its metric in the last round.
    pub winner_metric: f64,
    /// The winner's kept draws over all rounds (P × D row-major).
    #[cfg_attr(feature = "serde", serde(skip))]
    pub winner_draws: Vec<f64>,
    /// The winner's last iterate.
    pub winner_position: Vec<f64>,
    /// Wall-clock seconds of the whole run.
    pub wall_seconds: f64,
    /// Sum of the arms' sampling CPU seconds.
    pub sampling_seconds: f64,
    /// Sum of the arms' overhead seconds (build, scores, metric).
    pub overhead_seconds: f64,
    /// Threads the arms ran on.
    pub threads: usize,
    /// Rounds taken from the saved progress of an interrupted run (not run again).
    pub resumed_rounds: usize,
}

struct ArmState {
    arm: Arm,
    draws: Vec<f64>,
}

/// One arm's round as it comes back from where it ran.
#[derive(Debug, Clone)]
pub struct ArmRoundResult {
    /// The round's record (its label is set from the grid where the halving runs).
    pub record: ArmRound,
    /// The arm's position and random stream after the round.
    pub state: Arm,
    /// The round's kept draws (row-major, D per row).
    pub draws: Vec<f64>,
}

/// Runs the arms of one round. Each arm's round is a pure function of the run (model, MAP,
/// settings), the arm's grid index, its state before the round ([`Arm`]: position and random
/// stream), the round and the budget ([`run_arm_round`]), so it may run anywhere; with
/// budgets in gradient evaluations, the same bits come back from any machine.
pub trait RoundRunner {
    /// For each `(grid index, state)` of `arms`, in that order, the arm's round of round
    /// `round` at `budget_per_arm` (in the budget's unit).
    fn run_round(
        &self,
        round: usize,
        arms: &[(usize, Arm)],
        budget_per_arm: f64,
    ) -> Result<Vec<ArmRoundResult>, TuneError>;
}

/// The arms of a round on this process's workers (threads), each charged its own thread CPU.
struct LocalRounds<'a, 'm> {
    ctx: &'a TuneContext<'m>,
    arms: &'a [ArmSettings],
    settings: &'a MambaSettings,
    workers: &'a Workers,
}

impl RoundRunner for LocalRounds<'_, '_> {
    fn run_round(
        &self,
        round: usize,
        arms: &[(usize, Arm)],
        budget_per_arm: f64,
    ) -> Result<Vec<ArmRoundResult>, TuneError> {
        self.workers
            .map(arms.len(), &|i| {
                let (a, state) = &arms[i];
                run_arm_round(
                    self.ctx,
                    &self.arms[*a],
                    *a,
                    state.clone(),
                    round,
                    budget_per_arm,
                    self.settings,
                )
            })
            .into_iter()
            .collect()
    }
}

/// [`run_arm_round`] on a one-thread pool of its own, as [`mamba`] runs each arm locally, so
/// that what runs in parallel inside it (a full-data pass, the KSD's tiles) is charged to it
/// alike: how a task elsewhere runs an arm's round.
pub fn run_arm_round_alone(
    ctx: &TuneContext<'_>,
    arm: &ArmSettings,
    index: usize,
    state: Arm,
    round: usize,
    budget_per_arm: f64,
    settings: &MambaSettings,
) -> Result<ArmRoundResult, TuneError> {
    let mut results = Workers::new(1)?.map(1, &|_| {
        run_arm_round(
            ctx,
            arm,
            index,
            state.clone(),
            round,
            budget_per_arm,
            settings,
        )
    });
    results.pop().expect("one task ran")
}

/// Arm `index` (settings `arm`) from `state` for one round of MAMBA at `budget_per_arm`:
/// a fresh sampler and estimator restarted at the arm's position (§5.2), the round's draws
/// kept every `thin`-th iteration, and their metric (at most `max_scored_draws` of them,
/// evenly spaced; +∞ if the chain diverged).
pub fn run_arm_round(
    ctx: &TuneContext<'_>,
    arm: &ArmSettings,
    index: usize,
    mut state: Arm,
    round: usize,
    budget_per_arm: f64,
    settings: &MambaSettings,
) -> Result<ArmRoundResult, TuneError> {
    let t = Instant::now();
    let (mut sampler, mut estimator) = ctx.build(arm)?;
    let build = t.elapsed().as_secs_f64();
    let segment = state.run_round(
        sampler.as_mut(),
        estimator.as_mut(),
        settings.budget.arm_budget(budget_per_arm),
        settings.thin,
    );
    drop((sampler, estimator));
    let t = Instant::now();
    let d = ctx.model.dim();
    let capped;
    let scored = match settings.max_scored_draws {
        Some(cap) if segment.len(d) > cap => {
            let thin = segment.len(d).div_ceil(cap.max(1));
            capped = crate::stein::every_kth_row(&segment.draws, d, thin);
            &capped
        }
        _ => &segment.draws,
    };
    let metric = if segment.diverged {
        f64::INFINITY
    } else {
        ctx.metric(
            scored,
            &settings.metric,
            settings.seed ^ ((round as u64) << 32 | index as u64),
        )
    };
    let overhead = build + t.elapsed().as_secs_f64();
    let full_batch_ksd = settings.audit_full_scores.then(|| {
        // The audit is a KSD with an IMQ kernel: MAMBA-KSD's own, else c = 1, β = −1/2.
        let audit_kernel = match settings.metric {
            TuneMetricSettings::Ksd(k @ Kernel::Imq(_)) => k,
            _ => Kernel::Imq(ImqKernel::default()),
        };
        ctx.full_batch_ksd(scored, &audit_kernel)
    });
    let record = ArmRound {
        round,
        arm: index,
        label: arm.label(),
        metric,
        full_batch_ksd,
        draws: segment.len(d),
        scored_draws: scored.len() / d,
        iterations: segment.iterations,
        gradient_evaluations: segment.gradient_evaluations,
        sampling_seconds: segment.cpu_seconds,
        overhead_seconds: overhead,
        diverged: segment.diverged,
        kept: false,
    };
    Ok(ArmRoundResult {
        record,
        state,
        draws: segment.draws,
    })
}

/// Run MAMBA over `arms`; `on_round` sees each round's records (ranking order) as it ends.
pub fn mamba(
    ctx: &TuneContext<'_>,
    arms: &[ArmSettings],
    settings: &MambaSettings,
    on_round: &mut dyn FnMut(&[ArmRound], f64),
) -> Result<MambaOutcome, TuneError> {
    mamba_resumable(ctx, arms, settings, None, on_round, &mut |_| Ok(()))
}

/// [`mamba`], continued from `resume` (the progress of an interrupted run with the same
/// settings: its rounds are not run again, and `on_round` sees them first, as they were), and
/// handing `on_progress` the progress after every round (to save it; an error it returns stops
/// the run and is returned).
pub fn mamba_resumable(
    ctx: &TuneContext<'_>,
    arms: &[ArmSettings],
    settings: &MambaSettings,
    resume: Option<MambaProgress>,
    on_round: &mut dyn FnMut(&[ArmRound], f64),
    on_progress: &mut dyn FnMut(&MambaProgress) -> Result<(), TuneError>,
) -> Result<MambaOutcome, TuneError> {
    mamba_on(ctx, arms, settings, resume, None, on_round, on_progress)
}

/// [`mamba_resumable`] with each round's arms run by `elsewhere` (e.g. as tasks on a cluster)
/// instead of on this process's threads; the halving, the records and the progress stay here.
/// `None`: on this process's threads.
pub fn mamba_on(
    ctx: &TuneContext<'_>,
    arms: &[ArmSettings],
    settings: &MambaSettings,
    resume: Option<MambaProgress>,
    elsewhere: Option<&dyn RoundRunner>,
    on_round: &mut dyn FnMut(&[ArmRound], f64),
    on_progress: &mut dyn FnMut(&MambaProgress) -> Result<(), TuneError>,
) -> Result<MambaOutcome, TuneError> {
    let started = Instant::now();
    if settings.thin == 0 {
        return Err(TuneError::Grid("[tune] thin must be at least 1".into()));
    }
    if settings.max_scored_draws == Some(0) {
        return Err(TuneError::Grid(
            "[tune] max_scored_draws must be at least 1".into(),
        ));
    }
    ctx.check(arms)?;
    let mut plan = settings.budget.plan(arms.len(), settings.eta)?;
    if settings.float_round_count {
        plan = plan.with_float_round_count();
    }
    let workers = Workers::new(settings.threads)?;
    let mut states: Vec<Mutex<ArmState>> = (0..arms.len())
        .map(|i| {
            Mutex::new(ArmState {
                arm: Arm::new(&ctx.start, crate::rng::stream(settings.seed, i as u64)),
                draws: Vec::new(),
            })
        })
        .collect();
    let (done, earlier) = match resume {
        Some(progress) => {
            let done = resumed_rounds(&plan, &progress)?;
            for a in progress.arms {
                states[a.arm] = Mutex::new(ArmState {
                    arm: a.state,
                    draws: a.draws,
                });
            }
            for (round, record) in progress.rounds.iter().zip(&done) {
                on_round(round, record.budget_per_arm);
            }
            (done, progress.rounds)
        }
        None => (Vec::new(), Vec::new()),
    };
    let resumed_rounds = done.len();
    // Each round's records, pushed by `run_round` in survivor order and put in ranking order by
    // the observer once the halving has ranked them.
    let records: RefCell<Vec<Vec<ArmRound>>> = RefCell::new(earlier);
    let failure: RefCell<Option<TuneError>> = RefCell::new(None);
    let local = LocalRounds {
        ctx,
        arms,
        settings,
        workers: &workers,
    };
    let runner: &dyn RoundRunner = elsewhere.unwrap_or(&local);
    let run_round = |round: usize, survivors: &[usize], budget: f64| {
        if failure.borrow().is_some() {
            return vec![f64::INFINITY; survivors.len()];
        }
        let inputs: Vec<(usize, Arm)> = survivors
            .iter()
            .map(|&a| (a, states[a].lock().expect("no arm task panics").arm.clone()))
            .collect();
        let results = runner
            .run_round(round, &inputs, budget)
            .and_then(|results| {
                let arms_back: Vec<usize> = results.iter().map(|r| r.record.arm).collect();
                if arms_back != survivors {
                    return Err(TuneError::Elsewhere(format!(
                        "round {round}: the arms' rounds came back for arms {arms_back:?}, not \
                     {survivors:?}"
                    )));
                }
                Ok(results)
            });
        let results = match results {
            Ok(results) => results,
            Err(e) => {
                failure.borrow_mut().get_or_insert(e);
                return vec![f64::INFINITY; survivors.len()];
            }
        };
        let mut round_records = Vec::with_capacity(results.len());
        for (a, result) in survivors.iter().zip(results) {
            let mut state = states[*a].lock().expect("no arm task panics");
            state.arm = result.state;
            state.draws.extend_from_slice(&result.draws);
            round_records.push(ArmRound {
                label: arms[*a].label(),
                ..result.record
            });
        }
        let metrics: Vec<f64> = round_records.iter().map(|r| r.metric).collect();
        records.borrow_mut().push(round_records);
        metrics
    };
    let observe = |ranked: &super::RoundRecord| {
        // A failed round has no records; the run ends with the failure.
        if failure.borrow().is_some() {
            return;
        }
        let mut records = records.borrow_mut();
        let round = records.last_mut().expect("the round just ran");
        let position = |arm: usize| {
            ranked
                .ranking
                .iter()
                .position(|r| r.0 == arm)
                .expect("every arm of the round is ranked")
        };
        round.sort_by_key(|r| position(r.arm));
        for r in round.iter_mut() {
            r.kept = ranked.kept.contains(&r.arm);
            if !r.kept && !ranked.kept.is_empty() {
                // A pruned arm's draws are never needed again.
                states[r.arm].lock().expect("no arm task panics").draws = Vec::new();
            }
        }
        on_round(round, ranked.budget_per_arm);
        if failure.borrow().is_some() {
            return;
        }
        // The arms the next round runs; after the last round with none kept, every arm of
        // it (the winner is among them).
        let carried: Vec<usize> = if ranked.kept.is_empty() {
            ranked.ranking.iter().map(|r| r.0).collect()
        } else {
            ranked.kept.clone()
        };
        let progress = MambaProgress {
            rounds: records.clone(),
            arms: carried
                .iter()
                .map(|&arm| {
                    let state = states[arm].lock().expect("no arm task panics");
                    ArmProgress {
                        arm,
                        state: state.arm.clone(),
                        draws: state.draws.clone(),
                    }
                })
                .collect(),
        };
        if let Err(e) = on_progress(&progress) {
            failure.borrow_mut().get_or_insert(e);
        }
    };
    let outcome = successive_halving_resumed(&plan, done, run_round, observe);
    if let Some(e) = failure.into_inner() {
        return Err(e);
    }
    let rounds = records.into_inner();
    let winner_state = states[outcome.winner].lock().expect("no arm task panics");
    let sampling_seconds = rounds.iter().flatten().map(|r| r.sampling_seconds).sum();
    let overhead_seconds = rounds.iter().flatten().map(|r| r.overhead_seconds).sum();
    Ok(MambaOutcome {
        arms: arms.len(),
        eta: plan.eta(),
        rounds_planned: plan.rounds(),
        total_budget: plan.total_budget(),
        budget_unit: settings.budget.unit(),
        rounds,
        winner: outcome.winner,
        winner_metric: outcome.winner_metric,
        winner_draws: winner_state.draws.clone(),
        winner_position: winner_state.arm.position().to_vec(),
        wall_seconds: started.elapsed().as_secs_f64(),
        sampling_seconds,
        overhead_seconds,
        threads: workers.len(),
        resumed_rounds,
    })
}

/// The halving records of `progress`'s rounds, after checking that it fits `plan`: as many arms
/// per round as the plan gives, and the surviving arms those its last round carried on.
fn resumed_rounds(
    plan: &HalvingPlan,
    progress: &MambaProgress,
) -> Result<Vec<super::RoundRecord>, TuneError> {
    let sizes = plan.survivors_per_round();
    let mismatch = |what: String| {
        TuneError::Resume(format!(
            "the saved progress does not fit this run's plan ({} arms, η = {}): {what}",
            plan.arms(),
            plan.eta()
        ))
    };
    if progress.rounds.len() > sizes.len() {
        return Err(mismatch(format!(
            "{} rounds done of {}",
            progress.rounds.len(),
            sizes.len()
        )));
    }
    let mut done = Vec::with_capacity(progress.rounds.len());
    for (i, (round, &size)) in progress.rounds.iter().zip(&sizes).enumerate() {
        if round.len() != size {
            return Err(mismatch(format!(
                "round {i} has {} arms, the plan {size}",
                round.len()
            )));
        }
        let ranking: Vec<(usize, f64)> = round
            .iter()
            .map(|r| {
                (
                    r.arm,
                    if r.metric.is_nan() {
                        f64::INFINITY
                    } else {
                        r.metric
                    },
                )
            })
            .collect();
        let kept: Vec<usize> = round.iter().filter(|r| r.kept).map(|r| r.arm).collect();
        done.push(super::RoundRecord {
            round: i,
            budget_per_arm: plan.round_budget(size),
            ranking,
            kept,
        });
    }
    let mut carried: Vec<usize> = match done.last() {
        Some(last) if last.kept.is_empty() => last.ranking.iter().map(|r| r.0).collect(),
        Some(last) => last.kept.clone(),
        None => Vec::new(),
    };
    let mut saved: Vec<usize> = progress.arms.iter().map(|a| a.arm).collect();
    carried.sort_unstable();
    saved.sort_unstable();
    if carried != saved {
        return Err(mismatch(format!(
            "the arms saved ({saved:?}) are not those the last round kept ({carried:?})"
        )));
    }
    Ok(done)
}

/// Workers for the arms: `threads` (0: one per core) single-thread rayon pools.
///
/// Each arm runs start to end inside one worker's pool, so anything parallel inside it (a
/// full-data gradient for a 100 % batch, the KSD's tiles) runs on that same thread and is
/// charged to the arm's thread CPU time; with one shared pool, idle workers would help a full
/// pass uncharged.
pub(crate) struct Workers(Vec<rayon::ThreadPool>);

impl Workers {
    pub(crate) fn new(threads: usize) -> Result<Self, TuneError> {
        let n = if threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            threads
        };
        let pools = (0..n)
            .map(|_| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(1)
                    .build()
                    .map_err(TuneError::Thread)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self(pools))
    }

    /// Number of workers.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// `f(0..n)` spread over the workers (each task whole on one worker), results in order.
    pub(crate) fn map<R: Send>(&self, n: usize, f: &(dyn Fn(usize) -> R + Sync)) -> Vec<R> {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let next = AtomicUsize::new(0);
        let results: Vec<Mutex<Option<R>>> = (0..n).map(|_| Mutex::new(None)).collect();
        std::thread::scope(|scope| {
            for pool in &self.0 {
                let (next, results) = (&next, &results);
                scope.spawn(move || {
                    pool.install(|| {
                        loop {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            if i >= n {
                                break;
                            }
                            let r = f(i);
                            *results[i].lock().expect("no task panics") = Some(r);
                        }
                    })
                });
            }
        });
        results
            .into_iter()
            .map(|m| {
                m.into_inner()
                    .expect("no task panics")
                    .expect("every task ran")
            })
            .collect()
    }
}
