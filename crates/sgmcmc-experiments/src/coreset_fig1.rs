//! The tuning-free coreset paper's Fig. 1 (Chen, Huggins & Campbell 2024; reference §7.10):
//! Hot DoG (r = 10⁻³, hot-start test c = 0.5) against ADAM at learning rates 10ᵏ, k = −3..1,
//! for M ∈ {100, 500, 1000}, K = 2 chains, S = M; the final average squared z-score (median over
//! trials), beside the untrained coreset (w = N/M throughout).
//!
//! Problems: the Gaussian location model (d = 20, N = 10,000 synthetic, the exact AR(1) kernel,
//! closed-form reference) and Poisson regression with the softplus link on the bike-sharing data
//! (slice sampler, the shipped Stan moments).
//!
//! Every (problem, M, trial) uses one coreset and one set of chain starts for all optimisers
//! (paired comparison); runs go in parallel on rayon, each single-threaded and seeded by its
//! trial, so results do not depend on the thread count.

use rayon::prelude::*;
use serde::Serialize;
use sgmcmc::coreset::{
    Adam, Coreset, CoresetKernel, CoresetSettings, ExactGaussianKernel, HotDog, HotStartSettings,
    SliceKernel, SliceSettings, SubsampleScheme, WeightOptimiser, ZScoreTracker, run_coreset_mcmc,
};
use sgmcmc::data::{Features, Matrix, load_bike_sharing, load_bike_sharing_reference};
use sgmcmc::model::{GaussianModel, Glm, Model, NormalPrior, Poisson, PoissonLink};
use sgmcmc::rng::{self, ChainRng, fill_standard_normal};
use std::path::Path;
use std::time::Instant;

/// Chains per run (the paper's K = 2).
const CHAINS: usize = 2;

/// A model with its reference moments; the model's variant says which kernel its chains use.
pub struct Problem {
    /// Name in tables.
    pub name: String,
    /// The model and its kernel.
    pub model: ProblemModel,
    /// Reference posterior means.
    pub mean: Vec<f64>,
    /// Reference posterior standard deviations.
    pub sd: Vec<f64>,
}

/// A problem's model, which fixes its kernel.
pub enum ProblemModel {
    /// The Gaussian location model with the exact AR(1) kernel (β = 0.8), chains started at an
    /// exact draw from π_w at w = N/M (the reference's start).
    ExactGaussian(GaussianModel),
    /// Any model with the hit-and-run slice sampler (w = 10, p = 20, 3 passes), chains started
    /// at N(0, I) (the reference's start).
    Slice(Box<dyn Model>),
}

impl ProblemModel {
    /// The model.
    pub fn model(&self) -> &dyn Model {
        match self {
            ProblemModel::ExactGaussian(m) => m,
            ProblemModel::Slice(m) => m.as_ref(),
        }
    }
}

impl Problem {
    /// The Gaussian location model of reference §7.9: x_n ~ N(0, I_d), prior N(0, I), closed
    /// form μ = Σx/(1 + N), σ² = 1/(1 + N).
    pub fn gaussian_location(n: usize, d: usize, data_seed: u64) -> Result<Self, String> {
        let mut rng = rng::stream(data_seed, rng::streams::SYNTHETIC_DATA);
        let mut x = vec![0.0; n * d];
        fill_standard_normal(&mut rng, &mut x);
        let var = 1.0 / (1.0 + n as f64);
        let mean: Vec<f64> = (0..d)
            .map(|j| x.chunks_exact(d).map(|r| r[j]).sum::<f64>() * var)
            .collect();
        let identity: Vec<f64> = (0..d * d)
            .map(|k| if k / d == k % d { 1.0 } else { 0.0 })
            .collect();
        let features = Features::F64(Matrix::from_vec(x, n, d).map_err(|e| e.to_string())?);
        let model = GaussianModel::new(features, &identity, 1.0).map_err(|e| e.to_string())?;
        Ok(Self {
            name: format!("Gaussian location (d = {d}, N = {n})"),
            model: ProblemModel::ExactGaussian(model),
            mean,
            sd: vec![var.sqrt(); d],
        })
    }

    /// Poisson regression with the softplus link and prior N(0, I₉) on the bike-sharing data
    /// (`poisson_reg.csv`, N = 15,641; reference §7.9), against the shipped Stan moments.
    pub fn bike_sharing_poisson(dir: &Path) -> Result<Self, String> {
        let data = load_bike_sharing(dir).map_err(|e| e.to_string())?;
        let reference = load_bike_sharing_reference(dir).map_err(|e| e.to_string())?;
        let model = Glm::new(
            data,
            Poisson::new(PoissonLink::Softplus),
            NormalPrior::new(1.0).map_err(|e| e.to_string())?,
            false,
        )
        .map_err(|e| e.to_string())?;
        if reference.mean.len() != model.dim() {
            return Err(format!(
                "the Stan reference has {} coordinates, the model {}",
                reference.mean.len(),
                model.dim()
            ));
        }
        Ok(Self {
            name: format!(
                "Poisson regression, bike sharing (N = {})",
                model.num_data()
            ),
            model: ProblemModel::Slice(Box::new(model)),
            mean: reference.mean,
            sd: reference.sd,
        })
    }

    /// The chains of one run, started from `rng`.
    fn kernels(
        &self,
        coreset: &Coreset,
        rng: &mut ChainRng,
    ) -> Result<Vec<Box<dyn CoresetKernel>>, String> {
        (0..CHAINS)
            .map(|_| -> Result<Box<dyn CoresetKernel>, String> {
                match &self.model {
                    ProblemModel::ExactGaussian(model) => {
                        let (rows, prior_variance) = model
                            .identity_location_rows(&coreset.points)
                            .map_err(|e| e.to_string())?;
                        let mut kernel = ExactGaussianKernel::new(
                            rows,
                            prior_variance,
                            ExactGaussianKernel::DEFAULT_BETA,
                            vec![0.0; model.dim()],
                        )
                        .map_err(|e| e.to_string())?;
                        kernel
                            .draw_exact(&coreset.weights, rng)
                            .map_err(|e| e.to_string())?;
                        Ok(Box::new(kernel))
                    }
                    ProblemModel::Slice(model) => {
                        let mut theta0 = vec![0.0; model.dim()];
                        fill_standard_normal(rng, &mut theta0);
                        Ok(Box::new(
                            SliceKernel::new(SliceSettings::default(), theta0)
                                .map_err(|e| e.to_string())?,
                        ))
                    }
                }
            })
            .collect()
    }
}

/// One optimiser of the comparison.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum OptimiserChoice {
    /// Hot DoG with its r.
    HotDog {
        /// Initial step r.
        r: f64,
    },
    /// ADAM with γ_τ = α₀/√τ, no hot-start gate (as in the paper's Fig. 1).
    Adam {
        /// α₀.
        learning_rate: f64,
    },
    /// No training: w = N/M throughout.
    Untrained,
}

impl OptimiserChoice {
    /// Label in tables.
    pub fn label(&self) -> String {
        match self {
            OptimiserChoice::HotDog { r } => format!("Hot DoG (r = {r:e})"),
            OptimiserChoice::Adam { learning_rate } => format!("ADAM α₀ = {learning_rate:e}"),
            OptimiserChoice::Untrained => "untrained (w = N/M)".into(),
        }
    }
}

/// The experiment's settings (defaults: the paper's, except the trial count).
#[derive(Debug, Clone, Serialize)]
pub struct CoresetFig1Settings {
    /// Coreset sizes M.
    pub sizes: Vec<usize>,
    /// ADAM's α₀ grid.
    pub learning_rates: Vec<f64>,
    /// Hot DoG's r.
    pub hot_dog_r: f64,
    /// Optimisation iterations per run.
    pub iterations: usize,
    /// Trials per (problem, M, optimiser); tables give medians.
    pub trials: usize,
    /// Master seed of the runs (trial t uses seed + t).
    pub seed: u64,
}

impl Default for CoresetFig1Settings {
    fn default() -> Self {
        Self {
            sizes: vec![100, 500, 1000],
            learning_rates: vec![1e-3, 1e-2, 1e-1, 1.0, 10.0],
            hot_dog_r: HotDog::DEFAULT_R,
            iterations: 200_000,
            trials: 3,
            seed: 1,
        }
    }
}

/// One cell of the table: a (problem, M, optimiser) over its trials.
#[derive(Debug, Clone, Serialize)]
pub struct Fig1Cell {
    /// Problem name.
    pub problem: String,
    /// M.
    pub size: usize,
    /// The optimiser.
    pub optimiser: OptimiserChoice,
    /// Final metric of each trial.
    pub final_metric: Vec<f64>,
    /// Median of `final_metric`.
    pub median: f64,
    /// Iteration at which warm-up ended, per trial (Hot DoG only).
    pub hot_start_iteration: Vec<Option<usize>>,
    /// Why a trial stopped early, if one did.
    pub stopped: Vec<Option<String>>,
    /// Thread seconds per run (mean).
    pub seconds_per_run: f64,
    /// (iteration, median metric) along the run, for plots.
    pub trace: Vec<(usize, f64)>,
}

/// The experiment's result.
#[derive(Debug, Clone, Serialize)]
pub struct CoresetFig1Report {
    /// The settings.
    pub settings: CoresetFig1Settings,
    /// One cell per (problem, M, optimiser).
    pub cells: Vec<Fig1Cell>,
    /// Wall-clock seconds.
    pub seconds: f64,
}

fn settings_for(size: usize, iterations: usize, choice: OptimiserChoice) -> CoresetSettings {
    CoresetSettings {
        train_iterations: if choice == OptimiserChoice::Untrained {
            0
        } else {
            iterations
        },
        draws: if choice == OptimiserChoice::Untrained {
            iterations * CHAINS
        } else {
            0
        },
        subsample: size,
        scheme: SubsampleScheme::Uniform,
        newton_correction: false,
        hot_start: HotStartSettings {
            enabled: matches!(choice, OptimiserChoice::HotDog { .. }),
            ..HotStartSettings::default()
        },
        record_every: (iterations / 100).max(1),
    }
}

struct TrialResult {
    final_metric: f64,
    hot_start_iteration: Option<usize>,
    stopped: Option<String>,
    seconds: f64,
    trace: Vec<(usize, f64)>,
}

fn run_trial(
    problem: &Problem,
    size: usize,
    choice: OptimiserChoice,
    settings: &CoresetFig1Settings,
    trial: usize,
) -> Result<TrialResult, String> {
    let started = Instant::now();
    let seed = settings.seed + trial as u64;
    let model = problem.model.model();
    // Coreset and chain starts from one stream of the trial: identical for every optimiser.
    let mut init = rng::stream(seed, CHAINS as u64 + 1);
    let coreset = Coreset::uniform(model.num_data(), size, &mut init).map_err(|e| e.to_string())?;
    let mut kernels = problem.kernels(&coreset, &mut init)?;
    let mut optimiser: Box<dyn WeightOptimiser> = match choice {
        OptimiserChoice::HotDog { r } => {
            Box::new(HotDog::new(&coreset.weights, r).map_err(|e| e.to_string())?)
        }
        OptimiserChoice::Adam { learning_rate } => {
            Box::new(Adam::new(size, learning_rate).map_err(|e| e.to_string())?)
        }
        OptimiserChoice::Untrained => Box::new(Adam::new(size, 1.0).map_err(|e| e.to_string())?),
    };
    let mut tracker =
        ZScoreTracker::new(problem.mean.clone(), &problem.sd).map_err(|e| e.to_string())?;
    let run = run_coreset_mcmc(
        model,
        coreset,
        &mut kernels,
        optimiser.as_mut(),
        &settings_for(size, settings.iterations, choice),
        seed,
        Some(&mut tracker),
        None,
        None,
    )
    .map_err(|e| e.to_string())?;
    Ok(TrialResult {
        final_metric: run.metric.last().map_or(f64::NAN, |m| m.1),
        hot_start_iteration: run.hot_start_iteration,
        stopped: run.stopped,
        seconds: started.elapsed().as_secs_f64(),
        trace: run.metric,
    })
}

fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// Run every (problem, M, optimiser, trial); `log` receives a line per finished cell.
pub fn run(
    problems: &[Problem],
    settings: &CoresetFig1Settings,
    log: &(dyn Fn(&str) + Sync),
) -> Result<CoresetFig1Report, String> {
    if settings.trials == 0 || settings.iterations == 0 || settings.sizes.is_empty() {
        return Err("trials, iterations and sizes must be non-empty".into());
    }
    let started = Instant::now();
    let mut choices = vec![OptimiserChoice::HotDog {
        r: settings.hot_dog_r,
    }];
    choices.extend(
        settings
            .learning_rates
            .iter()
            .map(|&learning_rate| OptimiserChoice::Adam { learning_rate }),
    );
    choices.push(OptimiserChoice::Untrained);
    let mut cells_spec = Vec::new();
    for (p, problem) in problems.iter().enumerate() {
        for &size in &settings.sizes {
            if size > problem.model.model().num_data() {
                return Err(format!("M = {size} exceeds N of {}", problem.name));
            }
            for &choice in &choices {
                cells_spec.push((p, size, choice));
            }
        }
    }
    let cells: Vec<Result<Fig1Cell, String>> = cells_spec
        .par_iter()
        .map(|&(p, size, choice)| {
            let problem = &problems[p];
            let trials: Vec<TrialResult> = (0..settings.trials)
                .into_par_iter()
                .map(|t| run_trial(problem, size, choice, settings, t))
                .collect::<Result<_, _>>()?;
            let finals: Vec<f64> = trials.iter().map(|t| t.final_metric).collect();
            let trace = trials[0]
                .trace
                .iter()
                .enumerate()
                .map(|(i, &(it, _))| {
                    let at: Vec<f64> = trials
                        .iter()
                        .filter_map(|t| t.trace.get(i).map(|m| m.1))
                        .collect();
                    (it, median(&at))
                })
                .collect();
            let cell = Fig1Cell {
                problem: problem.name.clone(),
                size,
                optimiser: choice,
                median: median(&finals),
                final_metric: finals,
                hot_start_iteration: trials.iter().map(|t| t.hot_start_iteration).collect(),
                stopped: trials.iter().map(|t| t.stopped.clone()).collect(),
                seconds_per_run: trials.iter().map(|t| t.seconds).sum::<f64>()
                    / trials.len() as f64,
                trace,
            };
            log(&format!(
                "{} M = {size} {}: median final metric {:.4e} ({:.1} s per run)",
                problem.name,
                choice.label(),
                cell.median,
                cell.seconds_per_run
            ));
            Ok(cell)
        })
        .collect();
    Ok(CoresetFig1Report {
        settings: settings.clone(),
        cells: cells.into_iter().collect::<Result<_, _>>()?,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// The tables: per problem, rows M, columns the optimisers (median final metric), and the ratio
/// of Hot DoG to the best ADAM.
pub fn markdown(report: &CoresetFig1Report) -> String {
    let s = &report.settings;
    let mut out = format!(
        "Final average squared z-score (median of {} trials, {} iterations, K = {CHAINS}, S = M).\n\n",
        s.trials, s.iterations
    );
    let mut problems: Vec<&str> = report.cells.iter().map(|c| c.problem.as_str()).collect();
    problems.dedup();
    for problem in problems {
        let cells: Vec<&Fig1Cell> = report
            .cells
            .iter()
            .filter(|c| c.problem == problem)
            .collect();
        let mut labels: Vec<String> = Vec::new();
        for c in &cells {
            let l = c.optimiser.label();
            if !labels.contains(&l) {
                labels.push(l);
            }
        }
        out.push_str(&format!(
            "### {problem}\n\n| M | {} | Hot DoG / best ADAM | best ADAM α₀ |\n|---|",
            labels.join(" | ")
        ));
        out.push_str(&"---|".repeat(labels.len() + 2));
        out.push('\n');
        for &size in &s.sizes {
            let row: Vec<&&Fig1Cell> = cells.iter().filter(|c| c.size == size).collect();
            let hot = row
                .iter()
                .find(|c| matches!(c.optimiser, OptimiserChoice::HotDog { .. }));
            let best_adam = row
                .iter()
                .filter(|c| matches!(c.optimiser, OptimiserChoice::Adam { .. }))
                .min_by(|a, b| a.median.total_cmp(&b.median));
            let values: Vec<String> = row.iter().map(|c| format!("{:.3e}", c.median)).collect();
            let (ratio, best) = match (hot, best_adam) {
                (Some(h), Some(b)) => (
                    format!("{:.2}", h.median / b.median),
                    match b.optimiser {
                        OptimiserChoice::Adam { learning_rate } => format!("{learning_rate:e}"),
                        _ => String::new(),
                    },
                ),
                _ => (String::new(), String::new()),
            };
            out.push_str(&format!(
                "| {size} | {} | {ratio} | {best} |\n",
                values.join(" | ")
            ));
        }
        out.push('\n');
    }
    out
}
