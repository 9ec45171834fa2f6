//! CCAdL paper §4.1 (reference §2.7, "Experiment 4.1"): SGHMC, SGNHT and CCAdL on the
//! Normal-Gamma model with N = 100 draws from N(0, 1) and minibatches of n = 10, at
//! h ∈ {0.001, 0.01} × A ∈ {1, 10}, against the closed-form posterior.
//!
//! Error metric (the paper's "RMSE of the distribution" is undefined; reference §2.7 states the
//! library's choice): for each marginal, the RMS difference between the empirical CDF of the draws
//! and the exact CDF on 200 equally spaced points spanning the central 99.9 % interval; the two
//! marginals combined by root mean square. The autocorrelation time is the larger of the two
//! integrated autocorrelation times (Sokal window).
//!
//! The samplers, all in the physical step h: SGNHT is [`Sgnht`] with η = h², a = h·A (the same
//! dynamics as Algorithm 1 without the covariance term, reference §1.4); CCAdL and the paper's
//! SGHMC (Eq. 14) are [`Ccadl`] with the full 2 × 2 covariance.

use rayon::prelude::*;
use serde::Serialize;
use sgmcmc::diagnostics::integrated_autocorr_time;
use sgmcmc::estimator::{BatchSize, Minibatch};
use sgmcmc::io::SinkError;
use sgmcmc::model::{NormalGammaModel, NormalGammaPosterior};
use sgmcmc::rng::{ChainRng, stream};
use sgmcmc::runner::{Budget, ChainObserver, ChainPlan, drive_chain};
use sgmcmc::sampler::{
    Ccadl, CcadlOptions, CcadlScheme, CcadlSettings, CovarianceShape, Sampler, SamplerError, Sgnht,
    SgnhtSettings, standard_normal,
};
use std::ops::ControlFlow;
use std::sync::atomic::AtomicBool;

/// The methods compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// The CCAdL paper's SGHMC (Eq. 14).
    Sghmc,
    /// SGNHT (Algorithm 1 without the covariance term).
    Sgnht,
    /// CCAdL (Algorithm 1).
    Ccadl,
    /// CCAdL with the (N − n)/N finite-population factor (library extension).
    CcadlFinitePopulation,
}

impl Method {
    /// The paper's three methods.
    pub const PAPER: [Method; 3] = [Method::Sghmc, Method::Sgnht, Method::Ccadl];

    /// Display name.
    pub fn label(self) -> &'static str {
        match self {
            Method::Sghmc => "SGHMC",
            Method::Sgnht => "SGNHT",
            Method::Ccadl => "CCAdL",
            Method::CcadlFinitePopulation => "CCAdL + (N−n)/N",
        }
    }

    /// CCAdL-family settings for this method (None for SGNHT).
    fn ccadl_settings(self, a: f64) -> Option<CcadlSettings> {
        let (scheme, finite_population) = match self {
            Method::Sghmc => (CcadlScheme::SghmcComparator, false),
            Method::Ccadl => (CcadlScheme::Ccadl, false),
            Method::CcadlFinitePopulation => (CcadlScheme::Ccadl, true),
            Method::Sgnht => return None,
        };
        Some(CcadlSettings {
            shape: Some(CovarianceShape::Full),
            scheme,
            options: CcadlOptions {
                finite_population,
                ..CcadlOptions::default()
            },
            ..CcadlSettings::new(a)
        })
    }
}

/// Settings of the experiment (defaults: the paper's).
#[derive(Debug, Clone, Serialize)]
pub struct NormalGammaExperiment {
    /// N.
    pub n_data: usize,
    /// n.
    pub batch: usize,
    /// Recorded samples per run (10⁶ in the paper).
    pub samples: usize,
    /// Discarded iterations before recording (the paper does not say; the library uses 5 % of
    /// the samples, ≥ 50 autocorrelation times in every column).
    pub burn_in: usize,
    /// Step sizes h.
    pub steps: Vec<f64>,
    /// Diffusions A.
    pub diffusions: Vec<f64>,
    /// Methods.
    pub methods: Vec<Method>,
    /// Master seed: stream 0 draws the data, stream 1 + k runs configuration k.
    pub seed: u64,
}

impl Default for NormalGammaExperiment {
    fn default() -> Self {
        Self {
            n_data: 100,
            batch: 10,
            samples: 1_000_000,
            burn_in: 50_000,
            steps: vec![0.001, 0.01],
            diffusions: vec![1.0, 10.0],
            methods: Method::PAPER.to_vec(),
            seed: 2015,
        }
    }
}

/// One run's result.
#[derive(Debug, Clone, Serialize)]
pub struct NormalGammaRow {
    /// Method.
    pub method: Method,
    /// h.
    pub h: f64,
    /// A.
    pub diffusion: f64,
    /// Combined CDF error (RMS of the two marginals'); NaN if the chain left γ > 0.
    pub cdf_rmse: f64,
    /// CDF error of μ and of γ.
    pub cdf_rmse_marginal: [f64; 2],
    /// max of the integrated autocorrelation times of μ and γ.
    pub autocorr_time: f64,
    /// Sample means of μ and γ.
    pub mean: [f64; 2],
    /// Sample variances of μ and γ.
    pub variance: [f64; 2],
    /// Mean thermostat ξ over the recorded iterations (A for SGHMC).
    pub mean_thermostat: f64,
    /// Whether the chain left the support (γ ≤ 0) or diverged.
    pub left_support: bool,
}

/// The data set, the exact posterior and one row per (h, A, method), in the order
/// h, then A, then method.
#[derive(Debug, Clone, Serialize)]
pub struct NormalGammaResult {
    /// The settings used.
    pub settings: NormalGammaExperiment,
    /// The exact posterior.
    pub posterior: [f64; 4],
    /// Exact (E μ, E γ).
    pub posterior_mean: [f64; 2],
    /// Exact (Var μ, Var γ).
    pub posterior_variance: [f64; 2],
    /// The runs.
    pub rows: Vec<NormalGammaRow>,
}

/// The paper's Table 1: (RMSE, autocorrelation time) for SGHMC, SGNHT, CCAdL at (h, A) =
/// (0.001, 1), (0.001, 10), (0.01, 1), (0.01, 10).
pub const PAPER_TABLE_1: [(&str, [(f64, f64); 4]); 3] = [
    (
        "SGHMC",
        [
            (0.0148, 236.12),
            (0.0029, 333.04),
            (0.0531, 29.78),
            (0.0132, 39.33),
        ],
    ),
    (
        "SGNHT",
        [
            (0.0037, 238.32),
            (0.0035, 406.71),
            (0.0044, 26.71),
            (0.0043, 55.00),
        ],
    ),
    (
        "CCAdL",
        [
            (0.0034, 238.06),
            (0.0031, 402.45),
            (0.0021, 26.71),
            (0.0035, 54.43),
        ],
    ),
];

/// N draws from N(0, 1) on stream 0 of `seed`.
pub fn draw_data(n: usize, seed: u64) -> Vec<f64> {
    let mut rng = stream(seed, 0);
    (0..n).map(|_| standard_normal(&mut rng)).collect()
}

/// RMS difference between the empirical CDF of `draws` and `cdf` on `points` equally spaced
/// points of [lo, hi].
pub fn cdf_rmse(
    draws: &mut [f64],
    cdf: impl Fn(f64) -> f64,
    lo: f64,
    hi: f64,
    points: usize,
) -> f64 {
    draws.sort_unstable_by(f64::total_cmp);
    let n = draws.len() as f64;
    let sum: f64 = (0..points)
        .map(|k| {
            let x = lo + (hi - lo) * k as f64 / (points - 1) as f64;
            let empirical = draws.partition_point(|&d| d <= x) as f64 / n;
            (empirical - cdf(x)).powi(2)
        })
        .sum();
    (sum / points as f64).sqrt()
}

/// What to do with the sampler a [`Method`] builds (see [`Method::with_sampler`]).
pub(crate) trait WithSampler {
    /// What the job returns.
    type Output;
    /// Run the job with `sampler`; `thermostat` reads its ξ in physical units (A for SGHMC).
    fn run<S: Sampler>(self, sampler: S, thermostat: &dyn Fn(&S) -> f64) -> Self::Output;
}

impl Method {
    /// Build this method's sampler at (h, A) and hand it to `job`: CCAdL and the SGHMC
    /// comparator are [`Ccadl`] with the full covariance; SGNHT is [`Sgnht`] in v-units,
    /// η = h², a = h·A, whose thermostat α = h·ξ.
    pub(crate) fn with_sampler<W: WithSampler>(
        self,
        h: f64,
        a: f64,
        job: W,
    ) -> Result<W::Output, SamplerError> {
        Ok(match self.ccadl_settings(a) {
            Some(settings) => job.run(Ccadl::new(h, settings)?, &Ccadl::thermostat),
            None => {
                let settings = SgnhtSettings {
                    diffusion: h * a,
                    temperature: 1.0,
                };
                job.run(Sgnht::new(h * h, settings)?, &|s: &Sgnht| {
                    s.thermostat() / h
                })
            }
        })
    }
}

/// One Normal-Gamma run of a method at (h, A).
struct NormalGammaJob<'a> {
    config: (Method, f64, f64),
    model: &'a NormalGammaModel,
    post: &'a NormalGammaPosterior,
    cfg: &'a NormalGammaExperiment,
    rng: ChainRng,
}

impl WithSampler for NormalGammaJob<'_> {
    type Output = NormalGammaRow;
    fn run<S: Sampler>(self, sampler: S, thermostat: &dyn Fn(&S) -> f64) -> NormalGammaRow {
        run_one(
            self.config,
            sampler,
            thermostat,
            (self.model, self.post, self.cfg),
            self.rng,
        )
    }
}

/// One run's kept draws and thermostat sum; stops the chain when θ₁ ≤ 0.
struct Record<'t, S> {
    series: [Vec<f64>; 2],
    thermostat_sum: f64,
    thermostat: &'t dyn Fn(&S) -> f64,
}

impl<S: Sampler> ChainObserver<S> for Record<'_, S> {
    fn kept(&mut self, sampler: &S) -> Result<(), SinkError> {
        let theta = sampler.position();
        self.series[0].push(theta[0]);
        self.series[1].push(theta[1]);
        self.thermostat_sum += (self.thermostat)(sampler);
        Ok(())
    }

    fn iterated(&mut self, _iteration: usize, sampler: &S) -> ControlFlow<()> {
        if sampler.position()[1] > 0.0 {
            ControlFlow::Continue(())
        } else {
            ControlFlow::Break(())
        }
    }
}

/// Run `sampler` for the configuration `(method, h, A)` on `(model, posterior, settings)`.
fn run_one<S: Sampler>(
    (method, h, a): (Method, f64, f64),
    mut sampler: S,
    thermostat: &dyn Fn(&S) -> f64,
    (model, post, cfg): (
        &NormalGammaModel,
        &NormalGammaPosterior,
        &NormalGammaExperiment,
    ),
    mut rng: ChainRng,
) -> NormalGammaRow {
    let mut estimator = Minibatch::new(model, BatchSize::Count(cfg.batch)).expect("valid batch");
    let plan = ChainPlan {
        budget: Budget::Iterations(cfg.samples),
        burn_in: cfg.burn_in,
        thin: 1,
    };
    let mut record = Record {
        series: [
            Vec::with_capacity(cfg.samples),
            Vec::with_capacity(cfg.samples),
        ],
        thermostat_sum: 0.0,
        thermostat,
    };
    let outcome = drive_chain(
        &mut sampler,
        &mut estimator,
        &mut rng,
        &[0.0, 1.0],
        &plan,
        &mut record,
        &AtomicBool::new(false),
    )
    .expect("recording in memory cannot fail");
    // Leaving the support: a non-finite state, or a precision θ₁ ≤ 0 (the observer's stop).
    let left_support = outcome.divergence.is_some() || outcome.stopped_by_observer;
    let Record {
        mut series,
        thermostat_sum,
        ..
    } = record;
    if left_support {
        return NormalGammaRow {
            method,
            h,
            diffusion: a,
            cdf_rmse: f64::NAN,
            cdf_rmse_marginal: [f64::NAN; 2],
            autocorr_time: f64::NAN,
            mean: [f64::NAN; 2],
            variance: [f64::NAN; 2],
            mean_thermostat: f64::NAN,
            left_support,
        };
    }
    let mut mean = [0.0; 2];
    let mut variance = [0.0; 2];
    let mut act: [f64; 2] = [0.0; 2];
    let mut err = [0.0; 2];
    for j in 0..2 {
        let s = &mut series[j];
        let n = s.len() as f64;
        mean[j] = s.iter().sum::<f64>() / n;
        variance[j] = s.iter().map(|v| (v - mean[j]).powi(2)).sum::<f64>() / (n - 1.0);
        act[j] = integrated_autocorr_time(s);
        let (lo, hi) = post.central_interval(j, 0.999);
        err[j] = cdf_rmse(s, |x| post.marginal_cdf(j, x), lo, hi, 200);
    }
    NormalGammaRow {
        method,
        h,
        diffusion: a,
        cdf_rmse: ((err[0] * err[0] + err[1] * err[1]) / 2.0).sqrt(),
        cdf_rmse_marginal: err,
        autocorr_time: act[0].max(act[1]),
        mean,
        variance,
        mean_thermostat: thermostat_sum / cfg.samples as f64,
        left_support,
    }
}

/// Why the Normal-Gamma experiment could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NormalGammaError {
    /// An experiment setting out of range.
    #[error("{0}")]
    Setting(String),
    /// The model could not be built.
    #[error(transparent)]
    Model(#[from] sgmcmc::model::ModelError),
    /// A sampler could not be built.
    #[error(transparent)]
    Sampler(#[from] sgmcmc::sampler::SamplerError),
}

/// Run every configuration (in parallel over the cores; each run has its own stream, so the
/// result does not depend on the thread count).
pub fn run(cfg: &NormalGammaExperiment) -> Result<NormalGammaResult, NormalGammaError> {
    if cfg.batch < 2 {
        return Err(NormalGammaError::Setting(
            "the batch must hold at least 2 points (CCAdL's covariance)".to_string(),
        ));
    }
    if cfg.batch > cfg.n_data {
        return Err(NormalGammaError::Setting(format!(
            "batch {} is larger than N = {}",
            cfg.batch, cfg.n_data
        )));
    }
    if cfg.samples < 1000 {
        return Err(NormalGammaError::Setting(
            "at least 1000 samples are needed".to_string(),
        ));
    }
    let model = NormalGammaModel::new(draw_data(cfg.n_data, cfg.seed))?;
    let post = model.posterior();
    let mut configs = Vec::new();
    for &h in &cfg.steps {
        if !(h.is_finite() && h > 0.0) {
            return Err(NormalGammaError::Setting(format!(
                "step size h must be finite and > 0, got {h}"
            )));
        }
        for &a in &cfg.diffusions {
            if !(a.is_finite() && a > 0.0) {
                return Err(NormalGammaError::Setting(format!(
                    "diffusion A must be finite and > 0, got {a}"
                )));
            }
            for &m in &cfg.methods {
                configs.push((m, h, a));
            }
        }
    }
    let rows = configs
        .par_iter()
        .enumerate()
        .map(|(k, &(m, h, a))| {
            let job = NormalGammaJob {
                config: (m, h, a),
                model: &model,
                post: &post,
                cfg,
                rng: stream(cfg.seed, 1 + k as u64),
            };
            Ok(m.with_sampler(h, a, job)?)
        })
        .collect::<Result<_, NormalGammaError>>()?;
    Ok(NormalGammaResult {
        settings: cfg.clone(),
        posterior: [post.mu, post.kappa, post.alpha, post.beta],
        posterior_mean: post.mean(),
        posterior_variance: post.variance(),
        rows,
    })
}

/// The result as a Markdown table: one row per method, one column per (h, A), each cell
/// "(CDF RMSE, autocorrelation time)", followed by the paper's Table 1.
pub fn markdown(result: &NormalGammaResult) -> String {
    let cfg = &result.settings;
    let mut out = String::new();
    let mut header = String::from("| method |");
    let mut rule = String::from("|---|");
    for &h in &cfg.steps {
        for &a in &cfg.diffusions {
            header += &format!(" h = {h}, A = {a} |");
            rule += "---|";
        }
    }
    out += &format!("{header}\n{rule}\n");
    for &m in &cfg.methods {
        out += &format!("| {} |", m.label());
        for &h in &cfg.steps {
            for &a in &cfg.diffusions {
                let cell = result
                    .rows
                    .iter()
                    .find(|r| r.method == m && r.h == h && r.diffusion == a)
                    .map_or("—".to_string(), |r| {
                        if r.left_support {
                            "left γ > 0".to_string()
                        } else {
                            format!("({:.4}, {:.1})", r.cdf_rmse, r.autocorr_time)
                        }
                    });
                out += &format!(" {cell} |");
            }
        }
        out += "\n";
    }
    out
}
