//! The default path: what `sgmcmc run` does with a run file that has no `[sampler]` table.
//!
//! 1. The MAP by L-BFGS (as `[run] map_*` say).
//! 2. For D ≤ 1,000 the Laplace approximation N(θ̂, Σ̂) there, Σ̂ = (−∇²log π(θ̂))⁻¹ by central
//!    differences (2D full passes), and the preconditioner θ = θ̂ + Lφ with L the Cholesky
//!    factor of Σ̂. Beyond, the Hessian costs too much and a dense L costs O(D²) per score, more
//!    than a minibatch's gradients: L is diagonal, from the empirical Fisher information and
//!    the prior's curvature (`reference::diagonal_curvature`, one pass). In φ the posterior
//!    has roughly unit scale in every direction (along the axes only, for a diagonal L), so
//!    one step serves every parameter.
//! 3. The gradient: the `[gradient]` table if the file has one; else exact gradients for
//!    N ≤ 5,000 (a minibatch saves little there); else control variates centred at the MAP
//!    (Baker et al. 2019) where they pay: their noise variance in φ, V = (N²/n)·max_j
//!    Var_i[∂ⱼℓᵢ(φ) − ∂ⱼℓᵢ(φ̂)], is measured at four Laplace draws (five full passes), and the
//!    smallest batch n ∈ {b, 4b, 16b} (b = N/100 within [100, 1,000], n ≤ N/4) whose noise
//!    raises BAOAB's kinetic temperature by at most 2 % at h = 0.5 (the inflation is about
//!    h·V/(2γ)) is admissible, with 4n (a quarter of the noise, four times the cost) beside it
//!    for MAMBA to weigh; when none is, exact gradients. Rare features (a9a) make V large
//!    along their directions, which is where minibatch noise would bias the spread.
//! 4. The sampler: BAOAB (γ = 1), whose positions are exact on a Gaussian target at any stable
//!    step, so its bias in φ comes only from the posterior's departure from the Laplace
//!    approximation and from the gradient noise. Its step h ∈ {1, 0.56, 0.32, 0.18, 0.1}
//!    (unit scale in φ, so these need no problem-specific range), with the batch size, is
//!    chosen by MAMBA (KSD with
//!    exact scores for N ≤ 100,000, else the control-variate surrogate on 10,000 points;
//!    η = 3) within 20 % of the run's own gradient evaluations at the cheapest arm's cost (or
//!    of its CPU time, with `budget_seconds`).
//! 5. The chains start from independent Laplace draws and run the winner; the resolved run
//!    file (every choice written out, `[run] preconditioner` and `init = "laplace"` included)
//!    goes into `summary.json`, so the same run can be repeated or edited.

use super::{PipelineError, find_run_map, run_settings};
use crate::config::{Config, InitConfig, InitKeyword, PreconditionerChoice, SamplerTable};
use serde::Serialize;
use sgmcmc::estimator::BatchSize;
use sgmcmc::model::{DataIndex, Model, Scratch};
use sgmcmc::optim::MapResult;
use sgmcmc::precondition::{PreconditionedModel, Preconditioner, PreconditionerShape};
use sgmcmc::reference::LaplaceApproximation;
use sgmcmc::runner::Budget;
use sgmcmc::settings::{EstimatorKind, EstimatorSettings, SamplerSettings};
use sgmcmc::stein::{ImqKernel, Kernel};
use sgmcmc::tuning::{
    GridValues, MambaSettings, TuneBudget, TuneContext, TuneGrid, TuneMetricSettings, TuneScores,
    expand_grid, mamba,
};
use std::time::Instant;

/// Data sets up to this size get exact gradients on the default path.
pub const FULL_BATCH_MAX_N: usize = 5_000;

/// The share of the run's budget that tuning may spend.
pub const TUNE_SHARE: f64 = 0.2;

/// log10 of BAOAB's steps h in the Laplace-whitened coordinates.
pub const LOG10_STEPS: [f64; 5] = [0.0, -0.25, -0.5, -0.75, -1.0];

/// BAOAB's friction γ on the default path.
pub const FRICTION: f64 = 1.0;

/// The largest rise of BAOAB's kinetic temperature that control-variate noise may cause at
/// [`NOISE_STEP`] (h·V/(2γ) ≤ this).
pub const NOISE_TOLERANCE: f64 = 0.02;

/// The step at which the gradient noise is judged.
pub const NOISE_STEP: f64 = 0.5;

/// Tuning scores are exact up to this N, the control-variate surrogate beyond.
pub const EXACT_TUNE_SCORES_MAX_N: usize = 100_000;

/// What the default path chose, and why (in `summary.json` under `default_path`).
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct DefaultPathReport {
    /// L-BFGS iterations of the MAP search.
    pub map_iterations: usize,
    /// Seconds of the MAP search.
    pub map_seconds: f64,
    /// Seconds of the Laplace approximation (the Hessian and its inverse).
    pub laplace_seconds: f64,
    /// The preconditioner.
    pub preconditioner: PreconditionerShape,
    /// The gradient estimator the run uses.
    pub gradient: EstimatorSettings,
    /// The sampler the run uses.
    pub sampler: SamplerSettings,
    /// Arms MAMBA compared.
    pub arms: usize,
    /// MAMBA's budget T, in `budget_unit`.
    pub tune_budget: f64,
    /// "gradient evaluations" or "seconds" (thread CPU).
    pub budget_unit: String,
    /// Wall-clock seconds of the tuning.
    pub tune_seconds: f64,
    /// The winner's KSD in the last round.
    pub winner_ksd: f64,
    /// MAMBA's rounds, each arm's grid values and KSD (best first).
    pub rounds: Vec<Vec<(String, f64)>>,
    /// Each choice and its reason, one line each.
    pub choices: Vec<String>,
}

/// A run file resolved by the default path, with what it found on the way.
pub struct Resolved {
    /// The run file with every choice written out.
    pub config: Config,
    /// The MAP.
    pub map: MapResult,
    /// The Laplace approximation at the MAP (up to D = 1,000; beyond, the preconditioner comes
    /// from the diagonal curvature instead).
    pub laplace: Option<LaplaceApproximation>,
    /// The choices and their reasons.
    pub report: DefaultPathReport,
}

/// Whether `cfg` takes the default path (it has no `[sampler]` table).
pub fn takes_default_path(cfg: &Config) -> bool {
    cfg.sampler.is_none()
}

/// `cfg` itself when it has a `[sampler]` table; otherwise its run-level settings are validated
/// (before the MAP and the tuning) and the default path resolves it ([`resolve`]).
pub fn resolve_if_needed(
    cfg: Config,
    model: &dyn Model,
) -> Result<(Config, Option<Resolved>), PipelineError> {
    if !takes_default_path(&cfg) {
        return Ok((cfg, None));
    }
    run_settings(&cfg)?;
    let resolved = resolve(&cfg, model)?;
    Ok((resolved.config.clone(), Some(resolved)))
}

/// Resolve a run file without a `[sampler]` table (see the module docs).
pub fn resolve(cfg: &Config, model: &dyn Model) -> Result<Resolved, PipelineError> {
    let (n, d) = (model.num_data(), model.dim());
    let settings = run_settings(cfg)?;
    let mut choices = Vec::new();

    let started = Instant::now();
    let map = find_run_map(cfg, model)?;
    let map_seconds = started.elapsed().as_secs_f64();
    if !map.converged {
        return Err(PipelineError::RunFile(format!(
            "default path: the MAP search did not converge in {} iterations (|grad log pi|_inf = \
             {:.2e}); raise [run] map_iterations, or give a [sampler] table",
            map.iterations, map.gradient_norm
        )));
    }
    choices.push(format!(
        "MAP by L-BFGS: {} iterations, {map_seconds:.2} s",
        map.iterations
    ));

    let started = Instant::now();
    let asked = cfg
        .run
        .preconditioner
        .shape(Some(Preconditioner::default_shape(d)));
    let use_preconditioner = asked.is_some();
    let shape = asked.unwrap_or(PreconditionerShape::Diagonal);
    // Without a preconditioner the tuning still runs on φ = θ − θ̂ (unit scales).
    let (preconditioner, laplace) = if use_preconditioner {
        super::preconditioner_at(model, &map.theta, shape, None)?
    } else {
        (Preconditioner::diagonal(&map.theta, &vec![1.0; d])?, None)
    };
    let laplace_seconds = started.elapsed().as_secs_f64();
    choices.push(if use_preconditioner {
        let scales = match &laplace {
            Some(l) => format!(
                "Laplace sds {:.3e} to {:.3e}",
                l.sd.iter().copied().fold(f64::INFINITY, f64::min),
                l.sd.iter().copied().fold(0.0, f64::max)
            ),
            None => {
                "scales from the empirical Fisher information and the prior's curvature".to_string()
            }
        };
        format!(
            "preconditioner: {} at the MAP ({}; {scales}), {laplace_seconds:.2} s",
            match (shape, &laplace) {
                (PreconditionerShape::Dense, _) => "the dense Laplace covariance",
                (PreconditionerShape::Diagonal, Some(_)) => "the Laplace sds",
                (PreconditionerShape::Diagonal, None) => "the diagonal curvature",
            },
            match (cfg.run.preconditioner, shape) {
                (PreconditionerChoice::Auto, PreconditionerShape::Dense) =>
                    format!("D = {d} <= {}", sgmcmc::precondition::DENSE_MAX_DIM),
                (PreconditionerChoice::Auto, PreconditionerShape::Diagonal) =>
                    format!("D = {d} > {}", sgmcmc::precondition::DENSE_MAX_DIM),
                _ => "as [run] preconditioner asks".to_string(),
            }
        )
    } else {
        "preconditioner: none ([run] preconditioner = \"none\"); steps are in the units of theta"
            .to_string()
    });

    // The gradient estimator: given, exact, or control variates at a batch size whose noise
    // is small in φ.
    let phi_model = PreconditionedModel::new(model, &preconditioner)?;
    let mut phi_map = vec![0.0; d];
    preconditioner.to_phi(&map.theta, &mut phi_map);
    let full = EstimatorSettings {
        estimator: EstimatorKind::Full,
        ..EstimatorSettings::default()
    };
    // `batches`: the admissible batch sizes MAMBA chooses among (None: the estimator's own).
    let mut batches: Option<Vec<BatchSize>> = None;
    let gradient = match &cfg.gradient {
        Some(g) => {
            choices.push("gradient: the [gradient] table, as given".into());
            g.clone()
        }
        None if n <= FULL_BATCH_MAX_N => {
            choices.push(format!(
                "gradient: exact (N = {n} <= {FULL_BATCH_MAX_N}: a minibatch would save little)"
            ));
            full
        }
        None => {
            let base = (n / 100).clamp(100, 1_000);
            let spread = cv_noise_spread(&phi_model, &phi_map, cfg.run.seed);
            let inflation =
                |b: usize| NOISE_STEP * spread * (n as f64).powi(2) / b as f64 / (2.0 * FRICTION);
            let candidates: Vec<usize> = [base, 4 * base, 16 * base]
                .into_iter()
                .filter(|&b| b <= n / 4)
                .collect();
            match candidates
                .iter()
                .find(|&&b| inflation(b) <= NOISE_TOLERANCE)
            {
                Some(&b) => {
                    // b and 4b (noise 4x smaller) when 4b fits: MAMBA weighs cost against noise.
                    let mut grid = vec![BatchSize::Count(b)];
                    if 4 * b <= n / 4 {
                        grid.push(BatchSize::Count(4 * b));
                    }
                    choices.push(format!(
                        "gradient: control variates centred at the MAP (N = {n}): batch size {} for \
                         MAMBA to choose; their noise raises the temperature by {:.2} % at h = \
                         {NOISE_STEP} with {b}",
                        grid.iter()
                            .map(|g| g.resolve(n).unwrap_or(0).to_string())
                            .collect::<Vec<_>>()
                            .join(" or "),
                        100.0 * inflation(b)
                    ));
                    batches = Some(grid);
                    EstimatorSettings {
                        estimator: EstimatorKind::ControlVariates,
                        batch_size: BatchSize::Count(b),
                        ..EstimatorSettings::default()
                    }
                }
                None => {
                    let b = candidates.last().copied().unwrap_or(base);
                    choices.push(format!(
                        "gradient: exact (control variates would raise the temperature by {:.1} % \
                         at h = {NOISE_STEP} even with batch size {b}, more than {:.0} %)",
                        100.0 * inflation(b),
                        100.0 * NOISE_TOLERANCE
                    ));
                    full
                }
            }
        }
    };

    // MAMBA over BAOAB's step (and the admissible batch sizes) on the preconditioned model.
    let grid = TuneGrid {
        log10_step_size: Some(GridValues::List(LOG10_STEPS.to_vec())),
        batch_size: batches,
        ..TuneGrid::default()
    };
    let base = SamplerSettings::baoab(1.0, FRICTION);
    let arms = expand_grid(&base, &gradient, &grid)?;
    // The share is of the cheapest arm's run, so tuning stays within it whichever arm wins.
    let cheapest_cost = arms
        .iter()
        .map(|a| cost_per_iteration(&a.gradient, n))
        .min()
        .unwrap_or(n);
    let budget = match settings.budget {
        Budget::Iterations(iterations) => TuneBudget::TotalEvaluations(
            TUNE_SHARE
                * (settings.chains * (iterations + settings.burn_in)) as f64
                * cheapest_cost as f64,
        ),
        // budget_seconds is per chain: the run spends chains × t seconds of CPU.
        Budget::WallClock(t) => {
            TuneBudget::TotalSeconds(TUNE_SHARE * t.as_secs_f64() * settings.chains as f64)
        }
        _ => TuneBudget::TotalEvaluations(TUNE_SHARE * 1e9),
    };
    let (budget_value, budget_unit) = match budget {
        TuneBudget::TotalEvaluations(t) => (t, "gradient evaluations"),
        TuneBudget::TotalSeconds(t) => (t, "seconds"),
        TuneBudget::ArmEvaluations(r) => (r, "gradient evaluations per arm"),
        TuneBudget::ArmSeconds(r) => (r, "seconds per arm"),
    };
    let scores = if n <= EXACT_TUNE_SCORES_MAX_N {
        TuneScores::Full
    } else {
        TuneScores::ControlVariates
    };
    let started = Instant::now();
    let ctx = TuneContext::at_map(&phi_model, &phi_map, scores, 10_000, cfg.run.seed)?;
    let tuning = MambaSettings {
        eta: 3,
        budget,
        thin: 5,
        max_scored_draws: Some(500),
        metric: TuneMetricSettings::Ksd(Kernel::Imq(ImqKernel::default())),
        threads: 0,
        float_round_count: false,
        seed: cfg.run.seed,
        audit_full_scores: false,
    };
    let outcome = mamba(&ctx, &arms, &tuning, &mut |_, _| {})?;
    let tune_seconds = started.elapsed().as_secs_f64();
    let winner = &arms[outcome.winner];
    choices.push(format!(
        "sampler: BAOAB (friction {FRICTION}) with h = {:.3}{}, chosen by MAMBA among {} arms in \
         {budget_value:.3e} {budget_unit} ({:.0} % of the run's), {tune_seconds:.2} s",
        winner.sampler.build().map_or(f64::NAN, |s| s.step_size()),
        match winner.gradient.estimator {
            EstimatorKind::ControlVariates => format!(
                ", batch size {}",
                winner.gradient.batch_size.resolve(n).unwrap_or(0)
            ),
            _ => String::new(),
        },
        arms.len(),
        TUNE_SHARE * 100.0
    ));

    let mut config = cfg.clone();
    config.sampler = Some(SamplerTable {
        method: winner.sampler.clone(),
        schedule: None,
    });
    config.gradient = Some(winner.gradient.clone());
    config.run.preconditioner = if use_preconditioner {
        match shape {
            PreconditionerShape::Dense => PreconditionerChoice::Dense,
            PreconditionerShape::Diagonal => PreconditionerChoice::Diagonal,
        }
    } else {
        PreconditionerChoice::None
    };
    if config.run.init == InitConfig::default() {
        config.run.init = InitConfig::Keyword(InitKeyword::Laplace);
    }
    config.tune = None;
    let report = DefaultPathReport {
        map_iterations: map.iterations,
        map_seconds,
        laplace_seconds,
        preconditioner: shape,
        gradient: winner.gradient.clone(),
        sampler: winner.sampler.clone(),
        arms: arms.len(),
        tune_budget: budget_value,
        budget_unit: budget_unit.to_string(),
        tune_seconds,
        winner_ksd: outcome.winner_metric,
        rounds: outcome
            .rounds
            .iter()
            .map(|round| round.iter().map(|a| (a.label.clone(), a.metric)).collect())
            .collect(),
        choices,
    };
    Ok(Resolved {
        config,
        map,
        laplace,
        report,
    })
}

/// max_j Var_i[∂ⱼℓᵢ(φ) − ∂ⱼℓᵢ(φ̂)] over the data, averaged over four draws φ ~ N(φ̂, I) (the
/// Laplace approximation in φ): the control-variate estimate with batch n then has variance
/// ≈ N²/n times this in its noisiest coordinate.
fn cv_noise_spread(phi_model: &dyn Model, centre: &[f64], seed: u64) -> f64 {
    const PROBES: usize = 4;
    const BLOCK: usize = 512;
    let (n, d) = (phi_model.num_data(), phi_model.dim());
    let mut rng = sgmcmc::rng::stream(seed, sgmcmc::rng::streams::SHARED_INIT);
    let mut scratch = Scratch::new();
    let mut at = vec![0.0; BLOCK * d];
    let mut at_centre = vec![0.0; BLOCK * d];
    let mut total = vec![0.0; d];
    for _ in 0..PROBES {
        let mut phi = vec![0.0; d];
        sgmcmc::rng::fill_standard_normal(&mut rng, &mut phi);
        phi.iter_mut().zip(centre).for_each(|(p, c)| *p += c);
        let (mut sum, mut sum_sq) = (vec![0.0; d], vec![0.0; d]);
        let mut start = 0;
        while start < n {
            let rows: Vec<DataIndex> = (start..(start + BLOCK).min(n))
                .map(|i| i as DataIndex)
                .collect();
            let len = rows.len() * d;
            phi_model.grad_log_lik_each(&phi, &rows, &mut at[..len], &mut scratch);
            phi_model.grad_log_lik_each(centre, &rows, &mut at_centre[..len], &mut scratch);
            for (a, c) in at[..len]
                .chunks_exact(d)
                .zip(at_centre[..len].chunks_exact(d))
            {
                for j in 0..d {
                    let diff = a[j] - c[j];
                    sum[j] += diff;
                    sum_sq[j] += diff * diff;
                }
            }
            start += BLOCK;
        }
        for j in 0..d {
            let mean = sum[j] / n as f64;
            total[j] += (sum_sq[j] / n as f64 - mean * mean) / PROBES as f64;
        }
    }
    total.into_iter().fold(0.0, f64::max)
}

/// Per-datum gradient evaluations of one iteration of a one-estimate sampler.
fn cost_per_iteration(gradient: &EstimatorSettings, n: usize) -> usize {
    let batch = gradient.batch_size.resolve(n).unwrap_or(n);
    match gradient.estimator {
        EstimatorKind::Full => n,
        EstimatorKind::ControlVariates | EstimatorKind::Svrg => 2 * batch,
        _ => batch,
    }
}
