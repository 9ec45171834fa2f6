//! The stochastic-gradient samplers on the posteriordb suite (issue 27, must-show 2).
//!
//! Each posterior's run file ([`Prepared::run_toml`](super::Prepared::run_toml), the file
//! `--export` writes) goes through the same pipeline as `sgmcmc run`, in four ways
//! ([`SgMethod`]): SGLD and BAOAB with exact gradients at a small step in the Laplace-whitened
//! coordinates, the file as it is (the default path: MAP, preconditioner, the gradient it
//! chooses, MAMBA's step), and the default path told to use control-variate gradients on 10 %
//! minibatches (every posterior here has N ≤ 5,000, where the default path itself takes exact
//! gradients). The constrained draws of the chains that did not diverge are compared with the
//! reference as NUTS's are ([`super::compare`]).

use super::{Comparison, NutsReport, Posterior, PosteriordbError, SD_TOLERANCE, Z_TOLERANCE};
use serde::Serialize;
use sgmcmc::estimator::BatchSize;
use sgmcmc::model::constraint::constrain_draws;
use sgmcmc::runner::NoProgress;
use sgmcmc::settings::{EstimatorKind, EstimatorSettings, SamplerSettings};
use sgmcmc_runfile::config::{Config, InitConfig, InitKeyword, PreconditionerChoice, SamplerTable};
use sgmcmc_runfile::pipeline::default_path::{self, DefaultPathReport};
use sgmcmc_runfile::pipeline::{self, PipelineError};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// SGLD's step ε on the full-batch row (catalogue convention, h = 2ε = 0.01), in the
/// Laplace-whitened φ: on a unit Gaussian its stationary variance is 1/(1 − ε/2), sds 0.125 %
/// too large.
pub const SGLD_STEP: f64 = 0.005;

/// BAOAB's step h on the full-batch row, in φ (friction 1).
pub const BAOAB_STEP: f64 = 0.1;

/// The minibatch of the control-variate row, as a fraction of N.
pub const CONTROL_VARIATE_BATCH: f64 = 0.1;

/// How a stochastic-gradient row samples a posterior.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SgMethod {
    /// SGLD, exact gradients, ε = [`SGLD_STEP`], dense Laplace preconditioner, chains from
    /// Laplace draws.
    SgldFullBatch,
    /// BAOAB (γ = 1), exact gradients, h = [`BAOAB_STEP`], as above.
    BaoabFullBatch,
    /// The exported run file unchanged: the default path.
    DefaultPath,
    /// The default path with `[gradient] estimator = "control_variates"` on
    /// [`CONTROL_VARIATE_BATCH`] of the data.
    DefaultPathControlVariates,
}

impl SgMethod {
    /// Every method, in the table's order.
    pub const ALL: [SgMethod; 4] = [
        SgMethod::SgldFullBatch,
        SgMethod::BaoabFullBatch,
        SgMethod::DefaultPath,
        SgMethod::DefaultPathControlVariates,
    ];

    /// Its name in the table.
    pub fn label(self) -> &'static str {
        match self {
            SgMethod::SgldFullBatch => "SGLD full batch, ε = 0.005",
            SgMethod::BaoabFullBatch => "BAOAB full batch, h = 0.1",
            SgMethod::DefaultPath => "default path",
            SgMethod::DefaultPathControlVariates => "default path, control variates 10 %",
        }
    }

    /// The run file of this method for `posterior`.
    pub fn config(self, posterior: &Posterior, settings: &SgSettings) -> Result<Config, String> {
        let text = posterior
            .prepared
            .run_toml(&posterior.name, &posterior.model_name);
        let mut cfg = Config::from_toml(&text, "run.toml").map_err(|e| e.to_string())?;
        cfg.run.seed = settings.seed;
        cfg.run.chains = settings.chains;
        let full_batch = |cfg: &mut Config, sampler: SamplerSettings, iterations: usize| {
            cfg.sampler = Some(SamplerTable {
                method: sampler,
                schedule: None,
            });
            cfg.gradient = Some(EstimatorSettings {
                estimator: EstimatorKind::Full,
                ..EstimatorSettings::default()
            });
            cfg.run.preconditioner = PreconditionerChoice::Dense;
            cfg.run.init = InitConfig::Keyword(InitKeyword::Laplace);
            cfg.run.iterations = Some(iterations);
            cfg.run.burn_in = iterations / 20;
        };
        match self {
            SgMethod::SgldFullBatch => full_batch(
                &mut cfg,
                SamplerSettings::sgld(SGLD_STEP),
                settings.sgld_iterations,
            ),
            SgMethod::BaoabFullBatch => full_batch(
                &mut cfg,
                SamplerSettings::baoab(BAOAB_STEP, 1.0),
                settings.baoab_iterations,
            ),
            SgMethod::DefaultPath => {}
            SgMethod::DefaultPathControlVariates => {
                cfg.gradient = Some(EstimatorSettings {
                    estimator: EstimatorKind::ControlVariates,
                    batch_size: BatchSize::Fraction(CONTROL_VARIATE_BATCH),
                    ..EstimatorSettings::default()
                });
            }
        }
        let iterations = cfg
            .run
            .iterations
            .unwrap_or(sgmcmc_runfile::config::DEFAULT_ITERATIONS);
        cfg.run.thin = iterations.div_ceil(settings.max_draws_per_chain).max(1);
        Ok(cfg)
    }
}

/// The run lengths of the stochastic-gradient rows.
#[derive(Debug, Clone, Serialize)]
pub struct SgSettings {
    /// The seed of every run.
    pub seed: u64,
    /// Chains per run.
    pub chains: usize,
    /// SGLD's iterations per chain (a twentieth of them burn-in): its autocorrelation time in
    /// φ is about 2/ε = 400 iterations.
    pub sgld_iterations: usize,
    /// BAOAB's iterations per chain (a twentieth burn-in).
    pub baoab_iterations: usize,
    /// Draws kept per chain at most (the rest thinned away).
    pub max_draws_per_chain: usize,
}

impl Default for SgSettings {
    fn default() -> Self {
        Self {
            seed: 1,
            chains: 4,
            sgld_iterations: 200_000,
            baoab_iterations: 40_000,
            max_draws_per_chain: 10_000,
        }
    }
}

/// One method on one posterior.
#[derive(Debug, Clone, Serialize)]
pub struct SgRow {
    /// The posterior.
    pub posterior: String,
    /// The method.
    pub method: SgMethod,
    /// The sampler that ran (the default path's choice on its rows).
    pub sampler: SamplerSettings,
    /// The gradient estimator that ran.
    pub gradient: EstimatorSettings,
    /// Its minibatch size (N for exact gradients).
    pub batch_size: usize,
    /// N.
    pub num_data: usize,
    /// What the default path chose and why (MAMBA's arms, rounds and winner).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_path: Option<DefaultPathReport>,
    /// The comparison with the reference (chains that did not diverge).
    pub comparison: Comparison,
    /// Iterations per chain after burn-in.
    pub iterations: usize,
    /// Draws kept per chain.
    pub draws_per_chain: usize,
    /// Chains that diverged.
    pub diverged_chains: usize,
    /// Largest R-hat.
    pub max_rhat: f64,
    /// Smallest bulk ESS.
    pub min_ess_bulk: f64,
    /// The bias check's verdict (`None` when it was skipped).
    pub bias_check_passed: Option<bool>,
    /// The bias check's KSD test p-value.
    pub bias_check_p: Option<f64>,
    /// Seconds of sampling.
    pub seconds: f64,
    /// Seconds in all: MAP, preconditioner, tuning, sampling, bias check.
    pub total_seconds: f64,
}

impl SgRow {
    /// Every mean within [`Z_TOLERANCE`] combined MCSE and every sd within [`SD_TOLERANCE`]:
    /// the NUTS criterion, which a stochastic-gradient sampler's bias may fail.
    pub fn passes(&self) -> bool {
        self.diverged_chains == 0
            && self.comparison.max_abs_z() <= Z_TOLERANCE
            && self.comparison.max_sd_error() <= SD_TOLERANCE
    }

    /// The sampler and step, and for the default path what MAMBA picked among how many arms.
    pub fn choice(&self) -> String {
        let sampler = match &self.sampler {
            SamplerSettings::Baoab {
                step_size,
                friction,
                ..
            } => format!("BAOAB h = {step_size:.3}, γ = {friction}"),
            SamplerSettings::Sgld {
                step_size: Some(s), ..
            } => format!("SGLD ε = {s}"),
            other => format!("{other:?}"),
        };
        let gradient = if self.batch_size >= self.num_data {
            "exact".to_string()
        } else {
            let kind = match self.gradient.estimator {
                EstimatorKind::ControlVariates => "control variates",
                EstimatorKind::Svrg => "SVRG",
                EstimatorKind::Minibatch | EstimatorKind::Full => "minibatch",
            };
            format!("{kind}, n = {} of {}", self.batch_size, self.num_data)
        };
        match &self.default_path {
            Some(d) => format!("{sampler} (MAMBA, {} arms); {gradient}", d.arms),
            None => format!("{sampler}; {gradient}"),
        }
    }
}

/// Run `method` on `posterior`.
pub fn sg_row(
    posterior: &Posterior,
    method: SgMethod,
    settings: &SgSettings,
) -> Result<SgRow, PosteriordbError> {
    let failed = |message: String| PosteriordbError::Sampler {
        posterior: posterior.name.clone(),
        method: method.label(),
        message,
    };
    let pipeline_failed = |e: PipelineError| failed(e.to_string());
    let started = Instant::now();
    let cfg = method.config(posterior, settings).map_err(failed)?;
    let model = posterior
        .prepared
        .model()
        .map_err(|e| failed(e.to_string()))?;
    let prepared = pipeline::prepare_model(&cfg, model).map_err(pipeline_failed)?;
    let (cfg, resolved) =
        default_path::resolve_if_needed(cfg, prepared.model()).map_err(pipeline_failed)?;
    let (outcome, chains) = pipeline::execute_resolved(
        &cfg,
        &prepared,
        resolved,
        None,
        &NoProgress,
        &AtomicBool::new(false),
    )
    .map_err(pipeline_failed)?;
    let model = prepared.model();
    let kept: Vec<Vec<f64>> = outcome
        .summarised_chains
        .iter()
        .map(|&c| constrain_draws(model, &chains[c]))
        .collect();
    if kept.is_empty() {
        return Err(failed("every chain diverged".into()));
    }
    let gradient = cfg.gradient().clone();
    let n = model.num_data();
    let batch_size = match gradient.estimator {
        EstimatorKind::Full => n,
        _ => gradient
            .batch_size
            .resolve(n)
            .map_err(|e| failed(e.to_string()))?,
    };
    let (passed, p) = match &outcome.bias_check {
        Some(pipeline::BiasCheckOutcome::Done(c)) => {
            (Some(c.passed), c.test.as_ref().map(|t| t.p_value))
        }
        _ => (None, None),
    };
    let stats = |f: fn(&sgmcmc::io::ParameterRow) -> f64| outcome.parameters.iter().map(f);
    Ok(SgRow {
        posterior: posterior.name.clone(),
        method,
        sampler: pipeline::sampler_of(&cfg)
            .map_err(pipeline_failed)?
            .method
            .clone(),
        gradient,
        batch_size,
        num_data: n,
        default_path: outcome.default_path.clone(),
        comparison: super::compare(posterior, &kept),
        iterations: cfg
            .run
            .iterations
            .unwrap_or(sgmcmc_runfile::config::DEFAULT_ITERATIONS),
        draws_per_chain: kept[0].len() / model.dim(),
        diverged_chains: outcome.diverged_chains.len(),
        max_rhat: stats(|r| r.stats.rhat).fold(0.0, f64::max),
        min_ess_bulk: stats(|r| r.stats.ess_bulk).fold(f64::INFINITY, f64::min),
        bias_check_passed: passed,
        bias_check_p: p,
        seconds: outcome.seconds,
        total_seconds: started.elapsed().as_secs_f64(),
    })
}

/// The stochastic-gradient rows on every posterior of a folder.
#[derive(Debug, Clone, Serialize)]
pub struct SgReport {
    /// The run lengths.
    pub settings: SgSettings,
    /// One row per posterior and method, posterior by posterior.
    pub rows: Vec<SgRow>,
}

/// `methods` on the posteriors `names` of `dir`, one after the other (each run's chains in
/// parallel); `each` sees every row as it is done.
pub fn sg_report(
    dir: &Path,
    names: &[String],
    methods: &[SgMethod],
    settings: &SgSettings,
    mut each: impl FnMut(&SgRow),
) -> Result<SgReport, PosteriordbError> {
    let mut rows = Vec::with_capacity(names.len() * methods.len());
    for name in names {
        let posterior = super::load(dir, name)?;
        for &method in methods {
            let row = sg_row(&posterior, method, settings)?;
            each(&row);
            rows.push(row);
        }
    }
    Ok(SgReport {
        settings: settings.clone(),
        rows,
    })
}

impl SgReport {
    /// The summary table, each posterior's NUTS row (from `nuts`, if given) above its
    /// stochastic-gradient rows, then every parameter's row, in Markdown.
    pub fn markdown(&self, nuts: Option<&NutsReport>) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "| posterior | method | sampler and gradient | max \\|z\\| | max \\|sd/sd_ref − 1\\| | ξ | max R-hat | min bulk ESS | bias check p | seconds (all) | within NUTS tolerance |\n|---|---|---|---|---|---|---|---|---|---|---|"
        );
        let mut posterior = "";
        for r in &self.rows {
            if r.posterior != posterior {
                posterior = &r.posterior;
                if let Some(n) = nuts.and_then(|n| n.rows.iter().find(|n| n.posterior == posterior))
                {
                    let c = &n.comparison;
                    let _ = writeln!(
                        s,
                        "| {posterior} | NUTS | 4 × 5,000 draws | {:.2} | {:.1} % | {:.1} % | {:.3} | {:.0} | – | {:.1} | {} |",
                        c.max_abs_z(),
                        100.0 * c.max_sd_error(),
                        100.0 * c.xi,
                        n.max_rhat,
                        n.min_ess_bulk,
                        n.seconds,
                        if n.passes() { "yes" } else { "**no**" }
                    );
                }
            }
            let c = &r.comparison;
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.2} | {:.1} % | {:.1} % | {:.3} | {:.0} | {} | {:.1} | {} |",
                r.posterior,
                r.method.label(),
                r.choice(),
                c.max_abs_z(),
                100.0 * c.max_sd_error(),
                100.0 * c.xi,
                r.max_rhat,
                r.min_ess_bulk,
                match (r.bias_check_p, r.bias_check_passed) {
                    (Some(p), Some(true)) => format!("{p:.3}"),
                    (Some(p), Some(false)) => format!("**{p:.3}** (failed)"),
                    (None, Some(false)) => "failed".into(),
                    _ => "–".into(),
                },
                r.total_seconds,
                if r.passes() { "yes" } else { "**no**" }
            );
        }
        s.push_str(&super::parameter_header(&["posterior", "method"]));
        for r in &self.rows {
            s.push_str(
                &r.comparison
                    .parameter_rows(&[&r.posterior, r.method.label()]),
            );
        }
        s
    }
}
