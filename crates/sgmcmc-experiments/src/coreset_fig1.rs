//! The tuning-free coreset paper's Fig. 1 (Chen, Huggins & Campbell 2024; reference §7.10):
//! Hot DoG (r = 10⁻³, hot-start test c = 0.5) against ADAM at learning rates 10ᵏ, k = −3..1,
//! for M ∈ {100, 500, 1000}, K = 2 chains, S = M; the final average squared z-score (median over
//! trials), beside the untrained coreset (w = N/M throughout).
//!
//! [`Study`] picks the comparison: Fig. 1 (above), the hot-start ablation with the r sweep
//! (Figs. 4 and 6), the other learning-rate-free methods (Figs. 3 and 7), or the burn-in traces
//! of ‖ĝ‖ and the hot-start statistic before any weight is trained (Figs. 5, 10 and 11).
//!
//! Problems (reference §7.9): the Gaussian location model (d = 20, N = 10,000 synthetic, the
//! exact AR(1) kernel, closed-form reference); the sparse regression (N = 50,000 synthetic,
//! the Gibbs kernel, reference from a long full-data Gibbs run); Poisson regression with the
//! softplus link on the bike-sharing data (slice sampler, the shipped Stan moments); and
//! Bradley–Terry on the NBA games (slice sampler, reference from NUTS on the full data). The
//! paper's linear and logistic regressions need flight data that is not shipped.
//!
//! Every (problem, M, trial) uses one coreset and one set of chain starts for all optimisers
//! (paired comparison); runs go in parallel on rayon, each single-threaded and seeded by its
//! trial, so results do not depend on the thread count.

use crate::plot::{Figure, Panel, PlotError, Series};
use crate::trial_store::TrialStore;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sgmcmc::coreset::{
    BurnInPoint, Coreset, CoresetKernel, CoresetSettings, DAdaptSgd, ExactGaussianKernel, HotDog,
    HotStartSettings, SliceKernel, SliceSettings, SparseGibbsKernel, SubsampleScheme,
    WeightOptimiser, ZScoreTracker, run_coreset_mcmc,
};
use sgmcmc::data::{
    Features, Matrix, load_bike_sharing, load_bike_sharing_reference, load_nba_games,
};
use sgmcmc::diagnostics::summarize;
use sgmcmc::model::{
    BradleyTerry, DataIndex, GaussianModel, Glm, Model, NormalPrior, Poisson, PoissonLink,
    SparseRegression,
};
use sgmcmc::reference::{NutsSettings, run_nuts};
use sgmcmc::rng::{self, ChainRng, fill_standard_normal};
use sgmcmc::runner::NoProgress;
use sgmcmc_runfile::config::coreset::OptimiserConfig;
use sgmcmc_runfile::pipeline::build_optimiser;
use std::path::Path;
use std::sync::Arc;
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
    /// How the reference was obtained, with its diagnostics.
    pub reference: String,
}

/// A problem's model, which fixes its kernel.
pub enum ProblemModel {
    /// The Gaussian location model with the exact AR(1) kernel (β = 0.8), chains started at an
    /// exact draw from π_w at w = N/M (the reference's start).
    ExactGaussian(GaussianModel),
    /// The sparse regression with its Gibbs kernel (reference §7.7c), chains started at the
    /// §7.9 start (OLS + N(0, I)).
    Gibbs(Arc<SparseRegression>),
    /// Any model with the hit-and-run slice sampler (w = 10, p = 20, 3 passes), chains started
    /// at N(0, I) (the reference's start).
    Slice(Box<dyn Model>),
}

impl ProblemModel {
    /// The model.
    pub fn model(&self) -> &dyn Model {
        match self {
            ProblemModel::ExactGaussian(m) => m,
            ProblemModel::Gibbs(m) => m.as_ref(),
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
            reference: "closed form".into(),
        })
    }

    /// The sparse regression of reference §7.9 on `n` synthetic points (the paper: 50,000)
    /// from `data_seed`, with its reference from `reference`'s full-data Gibbs chains.
    pub fn sparse_regression(
        n: usize,
        data_seed: u64,
        reference: &GibbsReference,
    ) -> Result<Self, String> {
        let model = Arc::new(SparseRegression::synthetic(n, data_seed).map_err(|e| e.to_string())?);
        let (mean, sd, summary) = reference.run(&model)?;
        Ok(Self {
            name: format!("sparse regression (p = {}, N = {n})", model.p()),
            model: ProblemModel::Gibbs(model),
            mean,
            sd,
            reference: summary,
        })
    }

    /// Bradley–Terry (scale 400, prior N(0, I)) on the NBA games in `dir`, against a NUTS
    /// reference on the full data.
    pub fn nba_bradley_terry(dir: &Path, nuts: &NutsSettings) -> Result<Self, String> {
        let data = load_nba_games(dir).map_err(|e| e.to_string())?;
        let model = BradleyTerry::new(
            data,
            BradleyTerry::DEFAULT_SCALE,
            NormalPrior::new(1.0).map_err(|e| e.to_string())?,
        )
        .map_err(|e| e.to_string())?;
        let r = run_nuts(&model, nuts, &NoProgress).map_err(|e| format!("NUTS reference: {e}"))?;
        let reference = format!(
            "NUTS, {} chains × ({} warm-up + {} draws), seed {}: max R-hat {:.4}, min bulk ESS \
             {:.0}, {} divergences, {:.1} s",
            nuts.chains,
            nuts.warmup,
            nuts.draws,
            nuts.seed,
            r.max_rhat(),
            r.min_ess_bulk(),
            r.divergences(),
            r.seconds
        );
        Ok(Self {
            name: format!("Bradley–Terry, NBA games (N = {})", model.num_data()),
            mean: r.moments.mean.clone(),
            sd: r.moments.sd.clone(),
            model: ProblemModel::Slice(Box::new(model)),
            reference,
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
            reference: "the shipped Stan moments".into(),
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
                    ProblemModel::Gibbs(model) => Ok(Box::new(
                        SparseGibbsKernel::new(Arc::clone(model), rng)
                            .map_err(|e| e.to_string())?,
                    )),
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

/// The sparse regression's reference (reference §7.8): the Gibbs sampler on all N points with
/// w = 1, `chains` chains of `sweeps` sweeps each from the §7.9 start, the first half of each
/// discarded; moments of (β, σ²) pooled over the kept halves. The paper: one chain of 200,000.
#[derive(Debug, Clone, Serialize)]
pub struct GibbsReference {
    /// Independent chains (run in parallel).
    pub chains: usize,
    /// Sweeps per chain, half kept.
    pub sweeps: usize,
    /// Chain c uses stream (seed, c).
    pub seed: u64,
}

impl Default for GibbsReference {
    fn default() -> Self {
        Self {
            chains: 4,
            sweeps: 50_000,
            seed: 7,
        }
    }
}

impl GibbsReference {
    /// (mean, sd, description with R-hat and bulk ESS) of (β, σ²) for `model`.
    pub fn run(
        &self,
        model: &Arc<SparseRegression>,
    ) -> Result<(Vec<f64>, Vec<f64>, String), String> {
        if self.chains < 2 || self.sweeps < 4 {
            return Err(format!(
                "the Gibbs reference needs at least 2 chains of 4 sweeps, got {} of {}",
                self.chains, self.sweeps
            ));
        }
        let started = Instant::now();
        let d = model.p() + 1;
        let n = model.num_data();
        let points: Vec<DataIndex> = (0..n as DataIndex).collect();
        let weights = vec![1.0; n];
        let kept = self.sweeps - self.sweeps / 2;
        // Each chain's kept draws, coordinate-major (d columns of `kept`).
        let columns: Vec<Vec<f64>> = (0..self.chains)
            .into_par_iter()
            .map(|c| -> Result<Vec<f64>, String> {
                let mut rng = rng::stream(self.seed, c as u64);
                let mut kernel = SparseGibbsKernel::new(Arc::clone(model), &mut rng)
                    .map_err(|e| e.to_string())?;
                let target = sgmcmc::coreset::CoresetPosterior {
                    model: model.as_ref(),
                    points: &points,
                    weights: &weights,
                };
                let mut out = vec![0.0; d * kept];
                for sweep in 0..self.sweeps {
                    kernel.step(&target, &mut rng).map_err(|e| e.to_string())?;
                    if let Some(k) = (sweep + kept).checked_sub(self.sweeps) {
                        for (j, &v) in kernel.position().iter().enumerate() {
                            out[j * kept + k] = v;
                        }
                    }
                }
                Ok(out)
            })
            .collect::<Result<_, _>>()?;
        let mut mean = Vec::with_capacity(d);
        let mut sd = Vec::with_capacity(d);
        let (mut max_rhat, mut min_ess) = (0.0f64, f64::INFINITY);
        for j in 0..d {
            let chains: Vec<&[f64]> = columns
                .iter()
                .map(|c| &c[j * kept..(j + 1) * kept])
                .collect();
            let summary = summarize(&chains);
            mean.push(summary.mean);
            sd.push(summary.sd);
            max_rhat = max_rhat.max(summary.rhat);
            min_ess = min_ess.min(summary.ess_bulk);
        }
        let summary = format!(
            "full-data Gibbs, {} chains × {} sweeps (first half discarded), seed {}: max R-hat \
             {max_rhat:.4}, min bulk ESS {min_ess:.0}, {:.1} s",
            self.chains,
            self.sweeps,
            self.seed,
            started.elapsed().as_secs_f64()
        );
        Ok((mean, sd, summary))
    }
}

/// An optimiser of the comparison, without its hot-start gate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum OptimiserKind {
    /// Hot DoG (Algorithm 2) with its r.
    HotDog {
        /// Initial step r.
        r: f64,
    },
    /// DoG (Eq. 5) with its r.
    Dog {
        /// Initial distance r.
        r: f64,
    },
    /// DoWG (Eq. 5) with its r.
    Dowg {
        /// Initial distance r.
        r: f64,
    },
    /// prodigy ADAM with its initial lower bound d₀.
    Prodigy {
        /// d₀.
        d0: f64,
    },
    /// D-Adaptation SGD (γ = 1) with its initial lower bound d₀.
    DAdaptSgd {
        /// d₀.
        d0: f64,
    },
    /// ADAM with γ_τ = α₀/√τ.
    Adam {
        /// α₀.
        learning_rate: f64,
    },
    /// No training: w = N/M throughout.
    Untrained,
}

/// One optimiser of the comparison and whether its training waits for the hot-start test
/// (c = 0.5). The paper's Fig. 1 runs ADAM without the test, and Fig. 7 runs every method
/// both ways.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct OptimiserChoice {
    /// The optimiser.
    pub kind: OptimiserKind,
    /// Training starts only once the hot-start test passes.
    pub hot_start: bool,
}

impl OptimiserChoice {
    /// Hot DoG with its hot-start test: the paper's method.
    pub fn hot_dog(r: f64) -> Self {
        Self {
            kind: OptimiserKind::HotDog { r },
            hot_start: true,
        }
    }

    /// `kind` trained from the first iteration (no hot-start test).
    pub fn cold(kind: OptimiserKind) -> Self {
        Self {
            kind,
            hot_start: false,
        }
    }

    /// Whether this is Hot DoG as the paper runs it (with the test).
    pub fn is_hot_dog(&self) -> bool {
        matches!(self.kind, OptimiserKind::HotDog { .. }) && self.hot_start
    }

    /// Label in tables; the hot-start gate is named where it departs from the paper's use
    /// (on for Hot DoG, off for the others).
    pub fn label(&self) -> String {
        let base = match self.kind {
            OptimiserKind::HotDog { r } => format!("Hot DoG r = {r:e}"),
            OptimiserKind::Dog { r } => format!("DoG r = {r:e}"),
            OptimiserKind::Dowg { r } => format!("DoWG r = {r:e}"),
            OptimiserKind::Prodigy { d0 } => format!("prodigy d₀ = {d0:e}"),
            OptimiserKind::DAdaptSgd { d0 } => format!("D-Adapt SGD d₀ = {d0:e}"),
            OptimiserKind::Adam { learning_rate } => format!("ADAM α₀ = {learning_rate:e}"),
            OptimiserKind::Untrained => return "untrained (w = N/M)".into(),
        };
        match (
            matches!(self.kind, OptimiserKind::HotDog { .. }),
            self.hot_start,
        ) {
            (true, false) => format!("{base}, no hot start"),
            (false, true) => format!("{base}, hot start"),
            _ => base,
        }
    }

    /// The run file's optimiser table for this choice (an untrained coreset's optimiser is
    /// never stepped: ADAM at α₀ = 1 stands in).
    pub fn config(&self) -> OptimiserConfig {
        match self.kind {
            OptimiserKind::HotDog { r } => OptimiserConfig::HotDog {
                r,
                reference_d_correction: false,
            },
            OptimiserKind::Dog { r } => OptimiserConfig::Dog { r },
            OptimiserKind::Dowg { r } => OptimiserConfig::Dowg {
                r,
                keep_r0_in_max: false,
            },
            OptimiserKind::Prodigy { d0 } => OptimiserConfig::Prodigy { d0 },
            OptimiserKind::DAdaptSgd { d0 } => OptimiserConfig::DadaptSgd {
                gamma: DAdaptSgd::DEFAULT_GAMMA,
                d0,
            },
            OptimiserKind::Adam { learning_rate } => OptimiserConfig::Adam { learning_rate },
            OptimiserKind::Untrained => OptimiserConfig::Adam { learning_rate: 1.0 },
        }
    }

    /// The optimiser for `coreset`'s weights, built as a run file's `[coreset.optimiser]`.
    fn build(&self, coreset: &Coreset) -> Result<Box<dyn WeightOptimiser>, String> {
        build_optimiser(&self.config(), coreset).map_err(|e| e.to_string())
    }
}

/// Which of the paper's comparisons to run: the list of optimisers per (problem, M).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Study {
    /// Fig. 1: Hot DoG (r = `hot_dog_r`) against ADAM at each learning rate, beside the
    /// untrained coreset.
    Fig1,
    /// Figs. 4 and 6: Hot DoG at each r of `r_values`, with and without the hot-start test,
    /// against ADAM at each learning rate (the best of which is "optimally tuned").
    HotStart,
    /// Figs. 3 and 7: Hot DoG against DoG and DoWG (each r of `r_values`), prodigy ADAM and
    /// D-Adaptation SGD (d₀ = `d0`) and ADAM (each learning rate), each with and without the
    /// hot-start test.
    Methods,
    /// Figs. 5, 10 and 11: Hot DoG's chains on the untrained coreset for the whole run (the
    /// test's threshold set to 0, so warm-up never ends and no weight moves), recording ‖ĝ‖ at
    /// every iteration and the test statistic at every check; where the statistic first falls
    /// below c = 0.5 is where the test would have passed.
    BurnIn,
}

impl std::str::FromStr for Study {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fig1" => Ok(Study::Fig1),
            "hot-start" => Ok(Study::HotStart),
            "methods" => Ok(Study::Methods),
            "burn-in" => Ok(Study::BurnIn),
            _ => Err(format!(
                "unknown study {s:?}: expected fig1, hot-start, methods or burn-in"
            )),
        }
    }
}

impl Study {
    /// The optimisers this study compares, Hot DoG (r = `hot_dog_r`, hot start) first.
    pub fn optimisers(&self, s: &CoresetFig1Settings) -> Vec<OptimiserChoice> {
        let adam = |hot_start| {
            s.learning_rates
                .iter()
                .map(move |&learning_rate| OptimiserChoice {
                    kind: OptimiserKind::Adam { learning_rate },
                    hot_start,
                })
        };
        let mut list = vec![OptimiserChoice::hot_dog(s.hot_dog_r)];
        match self {
            Study::Fig1 => {
                list.extend(adam(false));
                list.push(OptimiserChoice::cold(OptimiserKind::Untrained));
            }
            Study::HotStart => {
                for &r in &s.r_values {
                    let hot = OptimiserChoice::hot_dog(r);
                    list.push(hot);
                    list.push(OptimiserChoice {
                        hot_start: false,
                        ..hot
                    });
                }
                list.extend(adam(false));
            }
            Study::Methods => {
                for hot_start in [false, true] {
                    let with = |kind| OptimiserChoice { kind, hot_start };
                    list.extend(s.r_values.iter().map(|&r| with(OptimiserKind::Dog { r })));
                    list.extend(s.r_values.iter().map(|&r| with(OptimiserKind::Dowg { r })));
                    list.push(with(OptimiserKind::Prodigy { d0: s.d0 }));
                    list.push(with(OptimiserKind::DAdaptSgd { d0: s.d0 }));
                    list.extend(adam(hot_start));
                }
            }
            Study::BurnIn => {}
        }
        let mut unique: Vec<OptimiserChoice> = Vec::with_capacity(list.len());
        for c in list {
            if !unique.contains(&c) {
                unique.push(c);
            }
        }
        unique
    }
}

/// The experiment's settings (defaults: the paper's, except the trial count).
#[derive(Debug, Clone, Serialize)]
pub struct CoresetFig1Settings {
    /// Which comparison to run.
    pub study: Study,
    /// Coreset sizes M.
    pub sizes: Vec<usize>,
    /// ADAM's α₀ grid.
    pub learning_rates: Vec<f64>,
    /// Hot DoG's r (the paper's method, against which the others are compared).
    pub hot_dog_r: f64,
    /// The r values of the hot-start study (Hot DoG) and of the methods study (DoG, DoWG); the
    /// paper's grid is 10ᵏ, k = −3..1 (its appendix A.1.2).
    pub r_values: Vec<f64>,
    /// prodigy's and D-Adaptation's initial lower bound d₀ (the paper: 10⁻⁶).
    pub d0: f64,
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
            study: Study::Fig1,
            sizes: vec![100, 500, 1000],
            learning_rates: vec![1e-3, 1e-2, 1e-1, 1.0, 10.0],
            hot_dog_r: HotDog::DEFAULT_R,
            r_values: vec![1e-3, 1e-2, 1e-1, 1.0, 10.0],
            d0: DAdaptSgd::DEFAULT_D0,
            iterations: 200_000,
            trials: 3,
            seed: 1,
        }
    }
}

impl CoresetFig1Settings {
    /// Checks every setting before any run starts.
    pub fn validate(&self) -> Result<(), String> {
        if self.trials == 0 || self.iterations == 0 {
            return Err("trials and iterations must be at least 1".into());
        }
        if self.sizes.is_empty() || self.sizes.contains(&0) {
            return Err(format!(
                "coreset sizes must be a non-empty list of positive sizes, got {:?}",
                self.sizes
            ));
        }
        if matches!(self.study, Study::HotStart | Study::Methods) && self.r_values.is_empty() {
            return Err(format!(
                "the {:?} study needs at least one r value",
                self.study
            ));
        }
        let positive = |what: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(format!("{what} must be finite and > 0, got {v}"))
            }
        };
        positive("Hot DoG's r", self.hot_dog_r)?;
        positive("d0", self.d0)?;
        for &r in &self.r_values {
            positive("every r value", r)?;
        }
        for &a in &self.learning_rates {
            positive("every ADAM learning rate", a)?;
        }
        Ok(())
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
    /// The burn-in study: each trial's summary of its trace (empty for the other studies).
    pub burn_in: Vec<BurnInSummary>,
    /// The burn-in study: the first trial's trace, every iteration (empty otherwise).
    pub burn_in_trace: Vec<BurnInPoint>,
    /// Each trial's final weights in brief (None for a trial stored before they were recorded).
    pub final_weights: Vec<Option<FinalWeights>>,
    /// Each trial's final z-scores per coordinate, (μ̂ⱼ − μⱼ)/σⱼ, whose mean square is the final
    /// metric: which coordinates a poor coreset misses (None for a trial stored before they
    /// were recorded).
    pub final_z: Vec<Option<Vec<f64>>>,
}

/// A trained coreset's weights in brief: where a run put its weight (an optimiser that piles
/// weight on a few points concentrates π_w, which the z-score metric sees).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FinalWeights {
    /// The largest weight.
    pub largest: f64,
    /// The sum of the weights (N/M each before training, so N in all).
    pub total: f64,
    /// Weights at 0.
    pub zeros: usize,
}

impl FinalWeights {
    /// The summary of `weights`.
    pub fn of(weights: &[f64]) -> Self {
        Self {
            largest: weights.iter().copied().fold(0.0, f64::max),
            total: weights.iter().sum(),
            zeros: weights.iter().filter(|&&w| w == 0.0).count(),
        }
    }
}

/// The hot-start threshold c whose crossing the burn-in study reports: the default (the
/// paper's 0.5), with which every other study's Hot DoG runs.
pub fn hot_start_threshold() -> f64 {
    HotStartSettings::default().threshold
}

/// Half-width of the window whose median ‖ĝ‖ is reported around the pass (single values of
/// the stochastic ĝ scatter over an order of magnitude).
const PASS_HALF_WINDOW: usize = 25;

/// What one burn-in trace shows (the paper: "the hot-start test passes and thus burn-in
/// terminates shortly after gradient norms are stabilized").
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BurnInSummary {
    /// The first check whose statistic is below [`hot_start_threshold`]: where Hot DoG's
    /// test passes (None: not within the run).
    pub test_passes: Option<usize>,
    /// The plateau: the median ‖ĝ‖ over the second half of the run.
    pub plateau: f64,
    /// The median ‖ĝ‖ over the first 10 iterations.
    pub norm_start: f64,
    /// The median ‖ĝ‖ over the 51 iterations centred on the pass (fewer at the run's start).
    pub norm_at_pass: Option<f64>,
}

/// The summary of one burn-in trace (points at consecutive iterations from 0).
pub fn summarise_burn_in(points: &[BurnInPoint]) -> BurnInSummary {
    let norms: Vec<f64> = points.iter().map(|p| p.gradient_norm).collect();
    let plateau = median(&norms[norms.len() / 2..]);
    let threshold = hot_start_threshold();
    let test_passes = points
        .iter()
        .find(|p| p.statistic.is_some_and(|u| u < threshold))
        .map(|p| p.iteration);
    let w = PASS_HALF_WINDOW;
    BurnInSummary {
        test_passes,
        plateau,
        norm_start: median(&norms[..norms.len().min(10)]),
        norm_at_pass: test_passes
            .and_then(|i| points.iter().position(|p| p.iteration == i))
            .map(|k| median(&norms[k.saturating_sub(w)..(k + w + 1).min(norms.len())])),
    }
}

/// A problem of the report and how its reference was obtained.
#[derive(Debug, Clone, Serialize)]
pub struct ProblemInfo {
    /// Name in tables.
    pub name: String,
    /// The reference's method and diagnostics.
    pub reference: String,
}

/// The experiment's result.
#[derive(Debug, Clone, Serialize)]
pub struct CoresetFig1Report {
    /// The settings.
    pub settings: CoresetFig1Settings,
    /// The problems and their references.
    pub problems: Vec<ProblemInfo>,
    /// One cell per (problem, M, optimiser).
    pub cells: Vec<Fig1Cell>,
    /// Trials taken from the trial store (finished by an earlier run), not run by this one.
    pub reused_trials: usize,
    /// Wall-clock seconds.
    pub seconds: f64,
}

fn settings_for(
    size: usize,
    iterations: usize,
    choice: OptimiserChoice,
    study: Study,
) -> CoresetSettings {
    let hot_start = if study == Study::BurnIn {
        // Warm-up for the whole run: the statistic is never below 0, and no weight moves.
        HotStartSettings {
            enabled: true,
            threshold: 0.0,
            max_warmup: iterations,
            never_train_without_hot_start: true,
            record_trace: true,
            ..HotStartSettings::default()
        }
    } else {
        HotStartSettings {
            enabled: choice.hot_start,
            ..HotStartSettings::default()
        }
    };
    CoresetSettings {
        train_iterations: if choice.kind == OptimiserKind::Untrained {
            0
        } else {
            iterations
        },
        draws: if choice.kind == OptimiserKind::Untrained {
            iterations * CHAINS
        } else {
            0
        },
        subsample: size,
        scheme: SubsampleScheme::Uniform,
        newton_correction: false,
        hot_start,
        record_every: (iterations / 100).max(1),
    }
}

struct TrialResult {
    final_metric: f64,
    hot_start_iteration: Option<usize>,
    stopped: Option<String>,
    seconds: f64,
    trace: Vec<(usize, f64)>,
    burn_in: Vec<BurnInPoint>,
    final_weights: Option<FinalWeights>,
    final_z: Option<Vec<f64>>,
}

/// What identifies a trial in a [`TrialStore`]: everything its result depends on. The problem
/// enters by name and reference moments (which change with its data), the optimiser by its
/// label (which prints its setting exactly).
#[derive(Serialize)]
struct TrialKey {
    /// Bumped when a trial's computation changes.
    format: u32,
    problem: String,
    reference_mean: Vec<u64>,
    reference_sd: Vec<u64>,
    study: Study,
    iterations: usize,
    size: usize,
    optimiser: String,
    seed: u64,
}

impl TrialKey {
    fn new(
        problem: &Problem,
        size: usize,
        choice: OptimiserChoice,
        settings: &CoresetFig1Settings,
        trial: usize,
    ) -> Self {
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect();
        // Format 2 for the slice-sampler problems: their log-likelihoods became vectorised
        // (Bradley–Terry's log σ, Poisson's softplus link), which moves their values by an ulp
        // or two and so their chains; the exact-kernel and Gibbs problems did not change.
        let format = match problem.model {
            ProblemModel::Slice(_) => 2,
            ProblemModel::ExactGaussian(_) | ProblemModel::Gibbs(_) => 1,
        };
        Self {
            format,
            problem: problem.name.clone(),
            reference_mean: bits(&problem.mean),
            reference_sd: bits(&problem.sd),
            study: settings.study,
            iterations: settings.iterations,
            size,
            optimiser: choice.label(),
            seed: settings.seed + trial as u64,
        }
    }
}

/// A [`TrialResult`] as stored: f64 as their bits (exact, NaN and ∞ included).
#[derive(Serialize, Deserialize)]
struct StoredTrial {
    final_metric: u64,
    hot_start_iteration: Option<usize>,
    stopped: Option<String>,
    seconds: u64,
    trace: Vec<(usize, u64)>,
    /// (iteration, ‖ĝ‖, statistic) of the burn-in study.
    burn_in: Vec<(usize, u64, Option<u64>)>,
    /// (largest, total, zeros) of the final weights; absent in trials stored before 2026-11-29.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    final_weights: Option<(u64, u64, usize)>,
    /// The final z-score of each coordinate; absent in trials stored before 2026-11-29.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    final_z: Option<Vec<u64>>,
}

impl From<&TrialResult> for StoredTrial {
    fn from(t: &TrialResult) -> Self {
        Self {
            final_metric: t.final_metric.to_bits(),
            hot_start_iteration: t.hot_start_iteration,
            stopped: t.stopped.clone(),
            seconds: t.seconds.to_bits(),
            trace: t.trace.iter().map(|&(i, m)| (i, m.to_bits())).collect(),
            burn_in: t
                .burn_in
                .iter()
                .map(|p| {
                    (
                        p.iteration,
                        p.gradient_norm.to_bits(),
                        p.statistic.map(f64::to_bits),
                    )
                })
                .collect(),
            final_weights: t
                .final_weights
                .map(|w| (w.largest.to_bits(), w.total.to_bits(), w.zeros)),
            final_z: t
                .final_z
                .as_ref()
                .map(|z| z.iter().map(|x| x.to_bits()).collect()),
        }
    }
}

impl From<StoredTrial> for TrialResult {
    fn from(t: StoredTrial) -> Self {
        Self {
            final_metric: f64::from_bits(t.final_metric),
            hot_start_iteration: t.hot_start_iteration,
            stopped: t.stopped,
            seconds: f64::from_bits(t.seconds),
            trace: t
                .trace
                .into_iter()
                .map(|(i, m)| (i, f64::from_bits(m)))
                .collect(),
            burn_in: t
                .burn_in
                .into_iter()
                .map(|(iteration, g, s)| BurnInPoint {
                    iteration,
                    gradient_norm: f64::from_bits(g),
                    statistic: s.map(f64::from_bits),
                })
                .collect(),
            final_weights: t.final_weights.map(|(largest, total, zeros)| FinalWeights {
                largest: f64::from_bits(largest),
                total: f64::from_bits(total),
                zeros,
            }),
            final_z: t
                .final_z
                .map(|z| z.into_iter().map(f64::from_bits).collect()),
        }
    }
}

/// The trial from `store` if it holds it (and whether it did), else run and store it.
fn stored_or_run_trial(
    problem: &Problem,
    size: usize,
    choice: OptimiserChoice,
    settings: &CoresetFig1Settings,
    trial: usize,
    store: Option<&TrialStore>,
) -> Result<(TrialResult, bool), String> {
    let Some(store) = store else {
        return Ok((run_trial(problem, size, choice, settings, trial)?, false));
    };
    let key = TrialKey::new(problem, size, choice, settings, trial);
    if let Some(stored) = store.load::<_, StoredTrial>(&key)? {
        return Ok((stored.into(), true));
    }
    let result = run_trial(problem, size, choice, settings, trial)?;
    store.save(&key, &StoredTrial::from(&result))?;
    Ok((result, false))
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
    let mut optimiser = choice.build(&coreset)?;
    let mut tracker =
        ZScoreTracker::new(problem.mean.clone(), &problem.sd).map_err(|e| e.to_string())?;
    let run = run_coreset_mcmc(
        model,
        coreset,
        &mut kernels,
        optimiser.as_mut(),
        &settings_for(size, settings.iterations, choice, settings.study),
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
        final_weights: Some(FinalWeights::of(&run.coreset.weights)),
        final_z: Some(tracker.z_scores()),
        trace: run.metric,
        burn_in: run.burn_in,
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
    run_with_store(problems, settings, log, None)
}

/// [`run`], keeping every finished trial in `store` and reusing the trials it already holds
/// (from an earlier run stopped part-way, or one with fewer trials or other sizes): the report
/// is the one an uninterrupted run gives, except the reused trials' timings.
pub fn run_with_store(
    problems: &[Problem],
    settings: &CoresetFig1Settings,
    log: &(dyn Fn(&str) + Sync),
    store: Option<&TrialStore>,
) -> Result<CoresetFig1Report, String> {
    settings.validate()?;
    let started = Instant::now();
    let choices = settings.study.optimisers(settings);
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
    let cells: Vec<Result<(Fig1Cell, usize), String>> = cells_spec
        .par_iter()
        .map(|&(p, size, choice)| {
            let problem = &problems[p];
            let (trials, reused): (Vec<TrialResult>, Vec<bool>) = (0..settings.trials)
                .into_par_iter()
                .map(|t| stored_or_run_trial(problem, size, choice, settings, t, store))
                .collect::<Result<Vec<_>, _>>()?
                .into_iter()
                .unzip();
            let reused = reused.iter().filter(|&&r| r).count();
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
                burn_in: trials
                    .iter()
                    .filter(|t| !t.burn_in.is_empty())
                    .map(|t| summarise_burn_in(&t.burn_in))
                    .collect(),
                burn_in_trace: trials[0].burn_in.clone(),
                final_weights: trials.iter().map(|t| t.final_weights).collect(),
                final_z: trials.iter().map(|t| t.final_z.clone()).collect(),
            };
            log(&format!(
                "{} M = {size} {}: median final metric {:.4e} ({:.1} s per run{})",
                problem.name,
                choice.label(),
                cell.median,
                cell.seconds_per_run,
                if reused > 0 {
                    format!("; {reused} of {} trials reused", settings.trials)
                } else {
                    String::new()
                }
            ));
            Ok((cell, reused))
        })
        .collect();
    let cells: Vec<(Fig1Cell, usize)> = cells.into_iter().collect::<Result<_, _>>()?;
    let reused_trials = cells.iter().map(|c| c.1).sum();
    Ok(CoresetFig1Report {
        settings: settings.clone(),
        problems: problems
            .iter()
            .map(|p| ProblemInfo {
                name: p.name.clone(),
                reference: p.reference.clone(),
            })
            .collect(),
        cells: cells.into_iter().map(|c| c.0).collect(),
        reused_trials,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// The tables: per problem, one row per optimiser and, for each M, its median final metric and
/// that median over Hot DoG's (the paper's Fig. 7 reads this ratio: above 1, Hot DoG is
/// better); a last row gives Hot DoG over the best ADAM without the hot-start test (the paper's
/// "optimally-tuned ADAM").
pub fn markdown(report: &CoresetFig1Report) -> String {
    let s = &report.settings;
    if s.study == Study::BurnIn {
        return burn_in_markdown(report);
    }
    let mut out = format!(
        "Study {:?}: final average squared z-score, median of {} trials (seeds {}..={}), {} \
         iterations, K = {CHAINS}, S = M; \"/ Hot DoG\": the median over Hot DoG's (r = {:e}, \
         hot start), above 1 when Hot DoG is better.\n\n",
        s.study,
        s.trials,
        s.seed,
        s.seed + s.trials as u64 - 1,
        s.iterations,
        s.hot_dog_r
    );
    if report.reused_trials > 0 {
        out.push_str(&format!(
            "{} trials were finished by an earlier run with the same settings and taken from its \
             trial store (their seconds per run are that run's).\n\n",
            report.reused_trials
        ));
    }
    for info in &report.problems {
        out.push_str(&format!("- {}: {}\n", info.name, info.reference));
    }
    out.push('\n');
    let mut problems: Vec<&str> = report.cells.iter().map(|c| c.problem.as_str()).collect();
    problems.dedup();
    let reference = OptimiserChoice::hot_dog(s.hot_dog_r);
    for problem in problems {
        let cells: Vec<&Fig1Cell> = report
            .cells
            .iter()
            .filter(|c| c.problem == problem)
            .collect();
        let mut choices: Vec<OptimiserChoice> = Vec::new();
        for c in &cells {
            if !choices.contains(&c.optimiser) {
                choices.push(c.optimiser);
            }
        }
        let cell = |choice: &OptimiserChoice, size: usize| {
            cells
                .iter()
                .find(|c| c.optimiser == *choice && c.size == size)
        };
        out.push_str(&format!("### {problem}\n\n| optimiser |"));
        for size in &s.sizes {
            out.push_str(&format!(" M = {size} | / Hot DoG |"));
        }
        out.push_str(&format!("\n|---|{}\n", "---|---|".repeat(s.sizes.len())));
        for choice in &choices {
            out.push_str(&format!("| {} |", choice.label()));
            for &size in &s.sizes {
                let median = cell(choice, size).map_or(f64::NAN, |c| c.median);
                let hot = cell(&reference, size).map_or(f64::NAN, |c| c.median);
                out.push_str(&format!(" {median:.3e} | {:.3} |", median / hot));
            }
            out.push('\n');
        }
        out.push_str("| Hot DoG / best ADAM (its α₀) |");
        for &size in &s.sizes {
            let best = choices
                .iter()
                .filter(|c| !c.hot_start && matches!(c.kind, OptimiserKind::Adam { .. }))
                .filter_map(|c| cell(c, size))
                .min_by(|a, b| a.median.total_cmp(&b.median));
            match (cell(&reference, size), best) {
                (Some(h), Some(b)) => {
                    let rate = match b.optimiser.kind {
                        OptimiserKind::Adam { learning_rate } => learning_rate,
                        _ => f64::NAN,
                    };
                    out.push_str(&format!(" {:.2} | ({rate:e}) |", h.median / b.median));
                }
                _ => out.push_str(" | |"),
            }
        }
        out.push_str("\n\n");
        if cells
            .iter()
            .any(|c| c.final_weights.iter().any(Option::is_some))
        {
            per_trial_table(
                &mut out,
                "Final weights per trial, largest / total (N/M each and N in all before \
                 training; – for a trial stored before they were recorded)",
                &s.sizes,
                &choices,
                &cell,
                |c: &Fig1Cell| {
                    list(
                        c.final_weights
                            .iter()
                            .map(|w| w.map(|w| format!("{:.3e} / {:.3e}", w.largest, w.total))),
                    )
                },
            );
        }
        if cells.iter().any(|c| c.final_z.iter().any(Option::is_some)) {
            per_trial_table(
                &mut out,
                "Final z-scores per trial, the coordinate j (from 0) with the largest |zⱼ| and zⱼ \
                 (the metric is the mean of zⱼ² over the coordinates; – for a trial stored \
                 before they were recorded)",
                &s.sizes,
                &choices,
                &cell,
                |c: &Fig1Cell| {
                    list(c.final_z.iter().map(|z| {
                        z.as_ref().and_then(|z| {
                            (0..z.len())
                                .max_by(|&a, &b| z[a].abs().total_cmp(&z[b].abs()))
                                .map(|j| format!("{j}: {:+.1}", z[j]))
                        })
                    }))
                },
            );
        }
    }
    out
}

/// A table with a row per optimiser and a column per M, each cell `entry` of its
/// (optimiser, M) cell (empty where there is none), under the line `title`.
fn per_trial_table<'a>(
    out: &mut String,
    title: &str,
    sizes: &[usize],
    choices: &[OptimiserChoice],
    cell: &dyn Fn(&OptimiserChoice, usize) -> Option<&'a &'a Fig1Cell>,
    entry: impl Fn(&Fig1Cell) -> String,
) {
    out.push_str(&format!("{title}:\n\n| optimiser |"));
    for size in sizes {
        out.push_str(&format!(" M = {size} |"));
    }
    out.push_str(&format!("\n|---|{}\n", "---|".repeat(sizes.len())));
    for choice in choices {
        out.push_str(&format!("| {} |", choice.label()));
        for &size in sizes {
            let text = cell(choice, size).map_or_else(String::new, |c| entry(c));
            out.push_str(&format!(" {text} |"));
        }
        out.push('\n');
    }
    out.push('\n');
}

/// "a, b, c" with "–" for a missing value.
fn list<T: std::fmt::Display>(values: impl Iterator<Item = Option<T>>) -> String {
    values
        .map(|v| v.map_or_else(|| "–".to_string(), |v| v.to_string()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The burn-in study's tables: per problem and M, where each trial's test passes, and ‖ĝ‖ at
/// the start and around the pass relative to its plateau.
fn burn_in_markdown(report: &CoresetFig1Report) -> String {
    let s = &report.settings;
    let mut out = format!(
        "Study BurnIn: K = {CHAINS} chains on the untrained coreset (w = N/M) for {} iterations, \
         S = M; ‖ĝ‖ at every iteration, the hot-start statistic median(u₁, …, u_K) every {} \
         iterations from 3·dim; {} trials (seeds {}..={}). \"passes\": the first check below c = \
         {}, where Hot DoG's test ends warm-up. ‖ĝ‖ is a stochastic estimate, \
         so each value is a median: over the first 10 iterations (\"start\"), over the {} \
         iterations centred on the pass, and over the second half of the run (\"plateau\").\n\n",
        s.iterations,
        HotStartSettings::default().check_every,
        s.trials,
        s.seed,
        s.seed + s.trials as u64 - 1,
        hot_start_threshold(),
        2 * PASS_HALF_WINDOW + 1
    );
    if report.reused_trials > 0 {
        out.push_str(&format!(
            "{} trials were finished by an earlier run with the same settings and taken from its \
             trial store (their seconds per run are that run's).\n\n",
            report.reused_trials
        ));
    }
    for info in &report.problems {
        out.push_str(&format!("- {}: {}\n", info.name, info.reference));
    }
    out.push('\n');
    let mut problems: Vec<&str> = report.cells.iter().map(|c| c.problem.as_str()).collect();
    problems.dedup();
    for problem in problems {
        out.push_str(&format!(
            "### {problem}\n\n| M | passes at, per trial | ‖ĝ‖ at the pass / plateau, per trial | \
             ‖ĝ‖ start / plateau, per trial | plateau, per trial |\n|---|---|---|---|---|\n"
        ));
        for cell in report.cells.iter().filter(|c| c.problem == problem) {
            let b = &cell.burn_in;
            let ratio = |x: f64, t: &BurnInSummary| format!("{:.3}", x / t.plateau);
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} |\n",
                cell.size,
                list(b.iter().map(|t| t.test_passes)),
                list(b.iter().map(|t| t.norm_at_pass.map(|x| ratio(x, t)))),
                list(
                    b.iter()
                        .map(|t| Some(format!("{:.3e}", t.norm_start / t.plateau)))
                ),
                list(b.iter().map(|t| Some(format!("{:.3e}", t.plateau)))),
            ));
        }
        out.push('\n');
    }
    out
}

/// The burn-in study's figure (the paper's Figs. 5, 10 and 11): one panel per problem and M,
/// the first trial's ‖ĝ‖ and test statistic against the iteration, with c = 0.5; None for the
/// other studies.
pub fn burn_in_figure(report: &CoresetFig1Report) -> Option<Figure> {
    let panels: Vec<Panel> = report
        .cells
        .iter()
        .filter(|c| !c.burn_in_trace.is_empty())
        .map(|cell| {
            let t = &cell.burn_in_trace;
            let (checks, statistic): (Vec<f64>, Vec<f64>) = t
                .iter()
                .filter_map(|p| p.statistic.map(|u| (p.iteration as f64, u)))
                .filter(|&(_, u)| u > 0.0 && u.is_finite())
                .unzip();
            let last = t.last().map_or(0.0, |p| p.iteration as f64);
            Panel {
                title: format!("{}, M = {}", cell.problem, cell.size),
                series: vec![
                    Series::line(
                        "‖ĝ‖ (trial 1)",
                        t.iter().map(|p| p.iteration as f64).collect(),
                        t.iter().map(|p| p.gradient_norm).collect(),
                    ),
                    Series::line("median u (trial 1)", checks, statistic),
                    Series::line(
                        format!("c = {}", hot_start_threshold()),
                        vec![0.0, last],
                        vec![hot_start_threshold(); 2],
                    ),
                ],
            }
        })
        .collect();
    (!panels.is_empty()).then(|| {
        Figure::new(
            "Burn-in on the untrained coreset: weight-gradient norm and hot-start statistic",
            "iteration",
            "‖ĝ‖ and median u (log scale)",
            true,
            panels,
        )
    })
}

/// Writes [`burn_in_figure`] to `path` if the report has burn-in traces.
pub fn write_burn_in_figure(report: &CoresetFig1Report, path: &Path) -> Result<bool, PlotError> {
    match burn_in_figure(report) {
        Some(figure) => crate::plot::write_svg(path, &figure).map(|()| true),
        None => Ok(false),
    }
}
