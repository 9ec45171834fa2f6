//! A full-data reference posterior by NUTS (Hoffman & Gelman 2014) from the nuts-rs crate, as
//! the papers' ground truth was NumPyro NUTS on the full data (reference §5.6).
//!
//! nuts-rs sees our [`Model`] through its log-density interface ([`nuts_rs::CpuLogpFunc`]):
//! log π(θ) = log p(θ) + Σᵢ log p(xᵢ | θ) and its gradient, both over all N points by a
//! [`FullDataEvaluator`] (fixed chunks on rayon, summed in chunk order: bit-identical for any
//! thread count). Warm-up adapts a diagonal mass matrix and the step size (nuts-rs's default
//! `DiagNutsSettings`, target acceptance 0.8, tree depth ≤ 10).
//!
//! Chain c draws everything from `rng::chain_stream(seed, c)` (its start, then nuts-rs's own
//! ChaCha8 generator is seeded from it), and runs start to finish on one rayon task, so the draws
//! depend on (seed, c) only, never on the number of threads.
//!
//! Starts: the MAP θ̂ ([`find_map`]) plus jitter, θ₀ = θ̂ + j·s ⊙ z with z ~ N(0, I), j =
//! [`NutsSettings::init_jitter`] and s the Laplace sd at θ̂ ([`laplace_at`]; s = 1 when the
//! Laplace approximation does not exist or D > [`LAPLACE_INIT_MAX_DIM`]). Starting inside the
//! posterior bulk keeps warm-up short on large N; the jitter keeps the chains distinct, so split
//! R-hat still compares chains that started apart.

use super::laplace::{LaplaceApproximation, laplace_at, map_options};
use crate::checkpoint::{StateError, StateReader, StateWriter};
use crate::cpu::clear_upper_vector_state;
use crate::estimator::FullDataEvaluator;
use crate::io::SinkError;
use crate::io::{ParameterRow, summarize_model_draws};
use crate::model::Model;
use crate::model::constraint::constrain_draws;
use crate::moments::{COVARIANCE_MAX_DIM, ReferenceMoments};
use crate::optim::{MapError, MapResult, find_map};
use crate::precondition::{PreconditionedModel, Preconditioner};
use crate::rng::{chain_stream, fill_standard_normal};
use crate::runner::{
    Budget, ChainObserver, ChainPlan, ChainReport, CheckpointStore, Progress, Transition, drive,
};
use nuts_rs::{Chain, CpuLogpFunc, CpuMath, CpuMathError, HasDims, LogpError, Settings};
use rayon::prelude::*;
use std::cell::Cell;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::ops::ControlFlow;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// The nuts-rs release this module is written against (recorded in the reference file).
pub const NUTS_RS_VERSION: &str = "0.19.1";

/// Above this dimension the starting jitter is not scaled by the Laplace sd (its Hessian costs
/// 2D full passes and D² memory); it is then unit-scale.
pub const LAPLACE_INIT_MAX_DIM: usize = 1_000;

/// Settings of a NUTS reference run.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct NutsSettings {
    /// Independent chains (run in parallel). Default 4.
    pub chains: usize,
    /// Warm-up (adaptation) iterations per chain, discarded. Default 1000.
    pub warmup: usize,
    /// Draws kept per chain after warm-up. Default 1000.
    pub draws: usize,
    /// The user seed every chain's stream derives from. Default 0.
    pub seed: u64,
    /// Starting jitter in Laplace standard deviations (0: every chain starts at the MAP).
    /// Default 1.
    pub init_jitter: f64,
    /// Maximum tree depth (at most 2^depth leapfrog steps per draw). Default 10.
    pub max_depth: u64,
    /// Target mean acceptance statistic of the step-size adaptation. Default 0.8.
    pub target_accept: f64,
    /// Run NUTS in φ with θ = θ̂ + Lφ, LLᵀ the Laplace covariance at the MAP (a dense metric
    /// fixed at Σ̂, with nuts-rs's diagonal adaptation on top; Stan's dense metric is the same
    /// construction), for D ≤ 1,000. The draws are mapped back to θ. On a badly conditioned
    /// posterior (a9a) this is what lets the trees stay short. Default false.
    pub dense_laplace_metric: bool,
}

impl Default for NutsSettings {
    fn default() -> Self {
        Self {
            chains: 4,
            warmup: 1000,
            draws: 1000,
            seed: 0,
            init_jitter: 1.0,
            max_depth: 10,
            target_accept: 0.8,
            dense_laplace_metric: false,
        }
    }
}

impl NutsSettings {
    /// Check every setting; the message names the bad one.
    pub fn validate(&self) -> Result<(), NutsError> {
        let bad = |why: String| Err(NutsError::Settings(why));
        if self.chains == 0 {
            return bad("chains must be at least 1".into());
        }
        if self.draws < 4 {
            return bad(format!(
                "draws must be at least 4 per chain (split R-hat and ESS need them), got {}",
                self.draws
            ));
        }
        if !(self.init_jitter.is_finite() && self.init_jitter >= 0.0) {
            return bad(format!(
                "init_jitter must be finite and >= 0, got {}",
                self.init_jitter
            ));
        }
        if !(1..=30).contains(&self.max_depth) {
            return bad(format!(
                "max_depth must be in 1..=30, got {}",
                self.max_depth
            ));
        }
        if !(self.target_accept > 0.0 && self.target_accept < 1.0) {
            return bad(format!(
                "target_accept must be in (0, 1), got {}",
                self.target_accept
            ));
        }
        Ok(())
    }

    /// The nuts-rs settings these stand for.
    fn nuts_rs(&self) -> nuts_rs::DiagNutsSettings {
        let mut s = nuts_rs::DiagNutsSettings {
            num_tune: self.warmup as u64,
            num_draws: self.draws as u64,
            maxdepth: self.max_depth,
            num_chains: self.chains,
            seed: self.seed,
            ..Default::default()
        };
        s.adapt_options.step_size_settings.target_accept = self.target_accept;
        s
    }
}

/// Why a reference run failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NutsError {
    /// A setting is invalid.
    #[error("NUTS reference: {0}")]
    Settings(String),
    /// The MAP (the chains' start) could not be found.
    #[error(transparent)]
    Map(#[from] MapError),
    /// A chain could not start (e.g. log π is not finite at its starting point).
    #[error("NUTS reference, chain {chain}: cannot start: {message}")]
    Start {
        /// The chain.
        chain: usize,
        /// The cause.
        message: String,
    },
    /// nuts-rs stopped a chain with an unrecoverable error.
    #[error("NUTS reference, chain {chain}, iteration {iteration}: {message}")]
    Sampler {
        /// The chain.
        chain: usize,
        /// Iteration (1-based, warm-up included).
        iteration: usize,
        /// The cause.
        message: String,
    },
    /// The draws give no valid moments (e.g. a constant coordinate).
    #[error("NUTS reference: the draws give no valid reference moments: {0}")]
    Moments(String),
    /// A stop request (Ctrl-C) came before every chain had a draw after its warm-up.
    #[error(
        "NUTS reference: interrupted before every chain had finished its warm-up; there are no draws to keep"
    )]
    InterruptedInWarmup,
    /// A finished chain could not be saved, or an earlier run's could not be read back.
    #[error("NUTS reference, chain {chain}: {message}")]
    Checkpoint {
        /// The chain.
        chain: usize,
        /// The cause.
        message: String,
    },
}

/// What one chain did.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct NutsChainReport {
    /// Chain number.
    pub chain: usize,
    /// Divergent transitions after warm-up (energy error > 1000, or a non-finite log density);
    /// any is a warning that the draws may be biased.
    pub divergences: usize,
    /// Divergent transitions during warm-up (common early, harmless).
    pub warmup_divergences: usize,
    /// Log-density evaluations that gave a non-finite value or gradient (each ends its
    /// trajectory as a divergence).
    pub non_finite: usize,
    /// Leapfrog steps, i.e. full-data gradient evaluations (warm-up included).
    pub gradient_evaluations: u64,
    /// Adapted step size after warm-up.
    pub step_size: f64,
    /// The chain's starting point.
    pub init: Vec<f64>,
    /// Wall-clock seconds.
    pub seconds: f64,
}

impl NutsChainReport {
    /// The report of chain `chain` started at `init`, before its first transition.
    fn new(chain: usize, init: Vec<f64>) -> Self {
        Self {
            chain,
            divergences: 0,
            warmup_divergences: 0,
            non_finite: 0,
            gradient_evaluations: 0,
            step_size: f64::NAN,
            init,
            seconds: 0.0,
        }
    }
}

/// A NUTS reference run: the moments for the reference file and everything behind them.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct NutsReference {
    /// Mean, sd, covariance, bulk ESS and R-hat (what `sgmcmc reference` writes).
    pub moments: ReferenceMoments,
    /// Per-parameter summary (mean, sd, quantiles, bulk/tail ESS, R-hat, MCSE).
    pub parameters: Vec<ParameterRow>,
    /// One report per chain.
    pub chains: Vec<NutsChainReport>,
    /// Draws after warm-up: `draws[c]` is chain c, row-major `draws × D`.
    #[cfg_attr(feature = "serde", serde(skip))]
    pub draws: Vec<Vec<f64>>,
    /// The MAP the chains started around.
    pub map: MapResult,
    /// The Laplace approximation at the MAP, if it exists (and D ≤ [`LAPLACE_INIT_MAX_DIM`]).
    pub laplace: Option<LaplaceApproximation>,
    /// Its sds on the scale the moments are on ([`LaplaceApproximation::reported_sd`]).
    pub laplace_sd: Option<Vec<f64>>,
    /// Wall-clock seconds of the sampling (MAP and Laplace excluded).
    pub seconds: f64,
    /// A stop request ended the chains early: the moments are those of the draws made until
    /// then, each chain cut to the shortest (`moments.draws_per_chain`).
    pub interrupted: bool,
}

impl NutsReference {
    /// Divergent transitions after warm-up, over all chains.
    pub fn divergences(&self) -> usize {
        self.chains.iter().map(|c| c.divergences).sum()
    }

    /// Largest R-hat over the parameters (NaN with one chain).
    pub fn max_rhat(&self) -> f64 {
        self.moments.rhat.iter().copied().fold(f64::NAN, f64::max)
    }

    /// Smallest bulk ESS over the parameters.
    pub fn min_ess_bulk(&self) -> f64 {
        self.moments
            .ess_bulk
            .iter()
            .copied()
            .fold(f64::NAN, f64::min)
    }

    /// Per coordinate, the NUTS sd relative to the Laplace sd, σ_NUTS/σ_Laplace − 1 (None without
    /// a Laplace approximation).
    pub fn sd_relative_to_laplace(&self) -> Option<Vec<f64>> {
        let laplace = self.laplace_sd.as_ref()?;
        Some(
            self.moments
                .sd
                .iter()
                .zip(laplace)
                .map(|(n, l)| n / l - 1.0)
                .collect(),
        )
    }

    /// Full-data gradient evaluations over all chains.
    pub fn gradient_evaluations(&self) -> u64 {
        self.chains.iter().map(|c| c.gradient_evaluations).sum()
    }
}

/// log π and ∇log π over the full data, as nuts-rs asks for them.
struct Density<'m, 'c> {
    eval: FullDataEvaluator<'m>,
    dim: usize,
    non_finite: &'c Cell<usize>,
}

/// A non-finite log density or gradient: recoverable, so nuts-rs ends the trajectory as a
/// divergence instead of stopping the chain.
#[derive(Debug, thiserror::Error)]
#[error("log density or its gradient is not finite")]
struct NonFinite;

impl LogpError for NonFinite {
    fn is_recoverable(&self) -> bool {
        true
    }
}

impl HasDims for Density<'_, '_> {
    fn dim_sizes(&self) -> HashMap<String, u64> {
        HashMap::from([
            ("unconstrained_parameter".to_string(), self.dim as u64),
            ("dim".to_string(), self.dim as u64),
        ])
    }
}

impl CpuLogpFunc for Density<'_, '_> {
    type LogpError = NonFinite;
    type FlowParameters = ();
    type ExpandedVector = Vec<f64>;

    fn dim(&self) -> usize {
        self.dim
    }

    fn logp(&mut self, position: &[f64], gradient: &mut [f64]) -> Result<f64, NonFinite> {
        // nuts-rs's vector code (pulp, AVX2) runs on this thread between our calls.
        clear_upper_vector_state();
        let lp = self.eval.log_posterior_and_grad(position, gradient);
        if lp.is_finite() && gradient.iter().all(|g| g.is_finite()) {
            Ok(lp)
        } else {
            self.non_finite.set(self.non_finite.get() + 1);
            Err(NonFinite)
        }
    }

    fn expand_vector<R: rand::Rng + ?Sized>(
        &mut self,
        _rng: &mut R,
        array: &[f64],
    ) -> Result<Vec<f64>, CpuMathError> {
        Ok(array.to_vec())
    }
}

/// Run NUTS on the full-data posterior of `model` and return the reference moments with their
/// diagnostics (bulk ESS and rank-normalised split R-hat, Vehtari et al. 2021, from
/// [`crate::diagnostics`]). Divergences and non-finite log densities are counted in the
/// chain reports, never fatal; an unrecoverable sampler error is an error naming the chain.
pub fn run_nuts(
    model: &dyn Model,
    settings: &NutsSettings,
    progress: &dyn Progress,
) -> Result<NutsReference, NutsError> {
    run_nuts_until(model, settings, progress, &AtomicBool::new(false))
}

/// The chains an earlier, interrupted run finished, and where this run keeps each chain it
/// finishes: a NUTS reference resumes per chain. Chain c is a pure function of (seed, c), so
/// a chain run again from its start gives the draws it would have given; only the chains not
/// finished before the interruption are run again.
pub struct FinishedChains<'a> {
    /// Where each chain goes once it has all its draws ([`encode_chain`]).
    pub store: &'a dyn CheckpointStore,
    /// The earlier run's finished chains, by chain (`None`, or a shorter vector: run it).
    pub earlier: Vec<Option<Vec<u8>>>,
}

/// Version of a finished chain's encoding (another version is refused).
const CHAIN_FORMAT: u64 = 1;

/// A finished chain as bytes: its report and its draws (in the sampler's coordinates), with
/// the settings that made them, so that another run's chain is refused on reading.
fn encode_chain(
    settings: &NutsSettings,
    report: &NutsChainReport,
    draws: &[f64],
) -> Result<Vec<u8>, StateError> {
    let mut w = StateWriter::new();
    w.field("format", &CHAIN_FORMAT);
    w.field("chain", &report.chain);
    w.field("seed", &settings.seed);
    w.field("warmup", &settings.warmup);
    w.field("draws", &settings.draws);
    w.field("divergences", &report.divergences);
    w.field("warmup_divergences", &report.warmup_divergences);
    w.field("non_finite", &report.non_finite);
    w.field("gradient_evaluations", &report.gradient_evaluations);
    w.field("step_size", &report.step_size);
    w.field("init", &report.init);
    w.field("seconds", &report.seconds);
    w.field_with("theta", |w| w.f64s(draws));
    w.finish()
}

/// Reads chain `c` of a run with `settings` in `d` dimensions back from [`encode_chain`]'s bytes.
fn decode_chain(
    bytes: &[u8],
    settings: &NutsSettings,
    c: usize,
    d: usize,
) -> Result<(NutsChainReport, Vec<f64>), StateError> {
    let mut r = StateReader::new(bytes);
    let expect = |r: &mut StateReader<'_>, name: &str, wanted: u64| {
        let mut found = 0_u64;
        r.field(name, &mut found)?;
        if found == wanted {
            Ok(())
        } else {
            Err(StateError::Invalid(format!(
                "`{name}` is {found} in the saved chain, {wanted} in this run"
            )))
        }
    };
    expect(&mut r, "format", CHAIN_FORMAT)?;
    expect(&mut r, "chain", c as u64)?;
    expect(&mut r, "seed", settings.seed)?;
    expect(&mut r, "warmup", settings.warmup as u64)?;
    expect(&mut r, "draws", settings.draws as u64)?;
    let mut report = NutsChainReport::new(c, vec![0.0; d]);
    r.field("divergences", &mut report.divergences)?;
    r.field("warmup_divergences", &mut report.warmup_divergences)?;
    r.field("non_finite", &mut report.non_finite)?;
    r.field("gradient_evaluations", &mut report.gradient_evaluations)?;
    r.field("step_size", &mut report.step_size)?;
    r.field("init", &mut report.init)?;
    r.field("seconds", &mut report.seconds)?;
    let mut draws = Vec::new();
    r.field("theta", &mut draws)?;
    r.finish()?;
    if report.init.len() != d || draws.len() != settings.draws * d {
        return Err(StateError::Invalid(format!(
            "the saved chain has {} values in {} dimensions, this run needs {} draws of {d}",
            draws.len(),
            report.init.len(),
            settings.draws
        )));
    }
    Ok((report, draws))
}

/// [`run_nuts`] that ends every chain at its next transition once `stop` is set (Ctrl-C): the
/// reference then comes from the draws after warm-up made until then, each chain cut to the
/// shortest ([`NutsReference::interrupted`]); stopped before every chain has one, it is
/// [`NutsError::InterruptedInWarmup`].
pub fn run_nuts_until(
    model: &dyn Model,
    settings: &NutsSettings,
    progress: &dyn Progress,
    stop: &AtomicBool,
) -> Result<NutsReference, NutsError> {
    run_nuts_resumable(model, settings, progress, stop, None)
}

/// [`run_nuts_until`] that takes the chains `finished` holds from an earlier run instead of
/// running them, and saves each chain it finishes there (see [`FinishedChains`]); the result
/// is the one an uninterrupted run would have given, bit for bit.
pub fn run_nuts_resumable(
    model: &dyn Model,
    settings: &NutsSettings,
    progress: &dyn Progress,
    stop: &AtomicBool,
    finished: Option<&FinishedChains<'_>>,
) -> Result<NutsReference, NutsError> {
    settings.validate()?;
    let d = model.dim();
    let map = find_map(model, &model.map_start(), &map_options())?;
    let laplace = if d <= LAPLACE_INIT_MAX_DIM {
        laplace_at(model, &map.theta).ok()
    } else {
        None
    };
    let scale: Vec<f64> = match &laplace {
        Some(l) => l.sd.clone(),
        None => vec![1.0; d],
    };
    // The dense Laplace metric: NUTS on the model in φ, from φ̂ = 0 with unit jitter.
    let metric = match (&laplace, settings.dense_laplace_metric) {
        (Some(l), true) => Some(
            Preconditioner::dense(&l.mean, &l.covariance)
                .map_err(|e| NutsError::Settings(format!("dense Laplace metric: {e}")))?,
        ),
        (None, true) => {
            return Err(NutsError::Settings(format!(
                "the dense Laplace metric needs the Laplace approximation at the MAP, which \
                 failed or was skipped (D = {d}, at most {LAPLACE_INIT_MAX_DIM})"
            )));
        }
        _ => None,
    };
    let phi_model = metric
        .as_ref()
        .map(|p| PreconditionedModel::new(model, p))
        .transpose()
        .map_err(|e| NutsError::Settings(e.to_string()))?;
    let (target, start, scale): (&dyn Model, Vec<f64>, Vec<f64>) = match &phi_model {
        Some(m) => (m, vec![0.0; d], vec![1.0; d]),
        None => (model, map.theta.clone(), scale),
    };

    let started = Instant::now();
    let results: Vec<(NutsChainReport, Vec<f64>)> = (0..settings.chains)
        .into_par_iter()
        .map(|c| {
            let checkpoint_error = |e: &dyn std::fmt::Display| NutsError::Checkpoint {
                chain: c,
                message: e.to_string(),
            };
            let earlier = finished
                .and_then(|f| f.earlier.get(c))
                .and_then(Option::as_ref);
            if let Some(bytes) = earlier {
                return decode_chain(bytes, settings, c, d).map_err(|e| checkpoint_error(&e));
            }
            let (report, draws) = run_chain(target, settings, c, &start, &scale, progress, stop)?;
            if let Some(f) = finished
                && draws.len() == settings.draws * d
            {
                let bytes =
                    encode_chain(settings, &report, &draws).map_err(|e| checkpoint_error(&e))?;
                f.store.save(c, &bytes).map_err(|e| checkpoint_error(&e))?;
            }
            Ok((report, draws))
        })
        .collect::<Result<_, _>>()?;
    let seconds = started.elapsed().as_secs_f64();
    let (mut chains, mut draws): (Vec<_>, Vec<_>) = results.into_iter().unzip();
    // After a stop, every chain is cut to the shortest (moments of equal-length chains).
    let kept = draws.iter().map(|c| c.len() / d).min().unwrap_or(0);
    let interrupted = kept < settings.draws;
    if kept == 0 {
        return Err(NutsError::InterruptedInWarmup);
    }
    for chain in &mut draws {
        chain.truncate(kept * d);
    }
    if let Some(p) = &metric {
        let mut theta = vec![0.0; d];
        for (report, chain) in chains.iter_mut().zip(draws.iter_mut()) {
            p.to_theta(&report.init, &mut theta);
            report.init.copy_from_slice(&theta);
            for row in chain.chunks_exact_mut(d) {
                p.to_theta(row, &mut theta);
                row.copy_from_slice(&theta);
            }
        }
    }

    let names = model.parameter_names();
    let slices: Vec<&[f64]> = draws.iter().map(Vec::as_slice).collect();
    // The summary and the moments on the constrained scale the names refer to (σ, not
    // log σ), where a run's `[evaluation]` compares its draws with them; the draws stay θ.
    let parameters = summarize_model_draws(model, &slices);
    let constrained: Option<Vec<Vec<f64>>> = model
        .is_constrained()
        .then(|| slices.iter().map(|c| constrain_draws(model, c)).collect());
    let reported: Vec<&[f64]> = match &constrained {
        Some(c) => c.iter().map(Vec::as_slice).collect(),
        None => slices.clone(),
    };
    let (mean, sd, covariance) = pooled_moments(&reported, d, d <= COVARIANCE_MAX_DIM);
    let divergences: usize = chains.iter().map(|c| c.divergences).sum();
    let moments = ReferenceMoments {
        method: format!(
            "NUTS (nuts-rs {NUTS_RS_VERSION}, {}), {} chains x {} draws after {} \
             warm-up, seed {}, start MAP + {} Laplace sd jitter; {divergences} divergent transitions \
             after warm-up{}",
            if metric.is_some() {
                "dense metric at the Laplace covariance, adapted diagonal on top"
            } else {
                "diagonal mass matrix"
            },
            settings.chains,
            settings.draws,
            settings.warmup,
            settings.seed,
            settings.init_jitter,
            if interrupted {
                format!(
                    "; INTERRUPTED: {kept} of {} draws per chain",
                    settings.draws
                )
            } else {
                String::new()
            }
        ),
        parameter_names: names,
        sd,
        mean,
        covariance,
        ess_bulk: parameters.iter().map(|p| p.stats.ess_bulk).collect(),
        rhat: parameters.iter().map(|p| p.stats.rhat).collect(),
        chains: settings.chains,
        draws_per_chain: kept,
    };
    moments.validate().map_err(NutsError::Moments)?;
    Ok(NutsReference {
        moments,
        parameters,
        chains,
        draws,
        map,
        laplace_sd: laplace.as_ref().map(|l| l.reported_sd(model)),
        laplace,
        seconds,
        interrupted,
    })
}

/// One chain from start to end on the calling thread.
fn run_chain(
    model: &dyn Model,
    settings: &NutsSettings,
    c: usize,
    map: &[f64],
    scale: &[f64],
    progress: &dyn Progress,
    stop: &AtomicBool,
) -> Result<(NutsChainReport, Vec<f64>), NutsError> {
    let started = Instant::now();
    let d = map.len();
    let mut rng = chain_stream(settings.seed, c);
    let mut init = vec![0.0; d];
    fill_standard_normal(&mut rng, &mut init);
    for ((x, m), s) in init.iter_mut().zip(map).zip(scale) {
        *x = m + settings.init_jitter * s * *x;
    }
    let non_finite = Cell::new(0);
    let density = Density {
        eval: FullDataEvaluator::new(model),
        dim: d,
        non_finite: &non_finite,
    };
    // nuts-rs reports anyhow errors; `{:#}` prints their chain of causes.
    let start_error = |e: &dyn std::fmt::Display| NutsError::Start {
        chain: c,
        message: format!("{e:#}"),
    };
    let mut chain = settings
        .nuts_rs()
        .new_chain(c as u64, CpuMath::new(density), &mut rng)
        .map_err(|e| start_error(&e))?;
    chain.set_position(&init).map_err(|e| start_error(&e))?;
    let init_position = init.clone();

    let total = settings.warmup + settings.draws;
    progress.chain_started(c, Some(total));
    let mut draws = Vec::with_capacity(settings.draws * d);
    let mut report = NutsChainReport::new(c, init);
    let mut step = NutsStep {
        chain,
        chain_index: c,
        position: init_position,
        iterations: 0,
        last: LastTransition::default(),
        math: PhantomData,
    };
    let mut recorder = NutsRecorder {
        warmup: settings.warmup,
        draws: &mut draws,
        report: &mut report,
        progress,
    };
    let plan = ChainPlan {
        budget: Budget::Iterations(settings.draws),
        burn_in: settings.warmup,
        thin: 1,
    };
    let outcome = drive(&mut step, &plan, &mut recorder, stop)
        .expect("NUTS keeps its draws in memory and cannot fail to store them");
    if let Some(failure) = outcome.failure {
        return Err(failure);
    }
    report.non_finite = non_finite.get();
    report.seconds = started.elapsed().as_secs_f64();
    progress.chain_finished(
        c,
        &ChainReport {
            chain: c,
            iterations: outcome.iterations,
            draws: outcome.draws,
            seconds: report.seconds,
            divergence: None,
            interrupted: outcome.interrupted,
            sampler_statistics: None,
            draw_statistics: Vec::new(),
            checkpoints: 0,
            checkpoint_note: None,
        },
    );
    Ok((report, draws))
}

/// What one NUTS transition reported.
#[derive(Debug, Clone, Copy, Default)]
struct LastTransition {
    gradient_evaluations: u64,
    diverging: bool,
    step_size: f64,
}

/// A nuts-rs chain as a [`Transition`] of the runner's loop: a step is one `draw` (warm-up
/// adaptation included). NUTS handles its own divergent transitions (counted, never fatal),
/// so the state always counts as finite; a sampler error ends the chain with a [`NutsError`].
struct NutsStep<C, M> {
    chain: C,
    chain_index: usize,
    position: Vec<f64>,
    /// Draws so far (warm-up included), for the error message.
    iterations: usize,
    last: LastTransition,
    math: PhantomData<M>,
}

impl<M: nuts_rs::Math, C: Chain<M>> Transition for NutsStep<C, M> {
    type Failure = NutsError;

    fn position(&self) -> &[f64] {
        &self.position
    }

    fn is_finite(&self) -> bool {
        true
    }

    fn step(&mut self) -> Result<(), NutsError> {
        let (position, info) = self.chain.draw().map_err(|e| NutsError::Sampler {
            chain: self.chain_index,
            iteration: self.iterations + 1,
            message: format!("{e:#}"),
        })?;
        self.position.copy_from_slice(&position);
        self.iterations += 1;
        self.last = LastTransition {
            gradient_evaluations: info.num_steps,
            diverging: info.diverging,
            step_size: info.step_size,
        };
        Ok(())
    }
}

/// Watches a NUTS chain: divergences (warm-up apart), gradient evaluations, the adapted step,
/// the draws after warm-up and the progress.
struct NutsRecorder<'a> {
    warmup: usize,
    draws: &'a mut Vec<f64>,
    report: &'a mut NutsChainReport,
    progress: &'a dyn Progress,
}

impl<C, M> ChainObserver<NutsStep<C, M>> for NutsRecorder<'_>
where
    M: nuts_rs::Math,
    C: Chain<M>,
{
    fn kept(&mut self, step: &NutsStep<C, M>) -> Result<(), SinkError> {
        self.draws.extend_from_slice(&step.position);
        Ok(())
    }

    fn iterated(&mut self, iteration: usize, step: &NutsStep<C, M>) -> ControlFlow<()> {
        let last = step.last;
        self.report.gradient_evaluations += last.gradient_evaluations;
        let warming_up = iteration <= self.warmup;
        if last.diverging {
            if warming_up {
                self.report.warmup_divergences += 1;
            } else {
                self.report.divergences += 1;
            }
        }
        if !warming_up {
            self.report.step_size = last.step_size;
        }
        self.progress.advanced(step.chain_index, iteration);
        ControlFlow::Continue(())
    }
}

/// Pooled mean, sd and covariance (D × D row-major, divisor S − 1) of the chains' draws. Without
/// `with_covariance` (D > [`COVARIANCE_MAX_DIM`]: D² values would not fit in memory for PMF or
/// the BNN) the covariance is empty and the sd comes from a two-pass variance.
fn pooled_moments(
    chains: &[&[f64]],
    d: usize,
    with_covariance: bool,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let s: usize = chains.iter().map(|c| c.len() / d).sum();
    let mut mean = vec![0.0; d];
    for row in chains.iter().flat_map(|c| c.chunks_exact(d)) {
        mean.iter_mut().zip(row).for_each(|(m, x)| *m += x);
    }
    mean.iter_mut().for_each(|m| *m /= s as f64);
    let denom = (s as f64 - 1.0).max(1.0);
    if !with_covariance {
        let mut ss = vec![0.0; d];
        for row in chains.iter().flat_map(|c| c.chunks_exact(d)) {
            for ((v, x), m) in ss.iter_mut().zip(row).zip(&mean) {
                *v += (x - m) * (x - m);
            }
        }
        let sd = ss.iter().map(|v| (v / denom).sqrt()).collect();
        return (mean, sd, Vec::new());
    }
    let rows: Vec<&[f64]> = chains.iter().flat_map(|c| c.chunks_exact(d)).collect();
    let x = faer::Mat::<f64>::from_fn(s, d, |k, j| rows[k][j] - mean[j]);
    let xtx = x.transpose() * &x;
    clear_upper_vector_state();
    let covariance: Vec<f64> = (0..d * d)
        .map(|k| {
            let (i, j) = (k / d, k % d);
            0.5 * (xtx[(i, j)] + xtx[(j, i)]) / denom
        })
        .collect();
    let sd = (0..d).map(|j| covariance[j * d + j].sqrt()).collect();
    (mean, sd, covariance)
}

#[cfg(test)]
mod tests {
    use super::pooled_moments;

    /// Both paths give the same mean and sd (the sd of the covariance path is the root of its
    /// diagonal); only the covariance path fills the covariance. Break-once: dividing the
    /// two-pass variance by S instead of S − 1 failed the sd comparison (relative 0.167 at S = 6).
    #[test]
    fn moments_without_covariance_match_the_covariance_path() {
        let a = [1.0, -2.0, 0.5, 3.0, 2.0, -1.0, 0.0, 4.0, 1.5];
        let b = [2.5, 0.0, -0.5, -1.0, 1.0, 2.0, 0.25, -3.0, 0.75];
        let chains: [&[f64]; 2] = [&a, &b];
        let (m1, s1, c1) = pooled_moments(&chains, 3, true);
        let (m2, s2, c2) = pooled_moments(&chains, 3, false);
        assert_eq!(c1.len(), 9);
        assert!(c2.is_empty());
        for j in 0..3 {
            assert!((m1[j] - m2[j]).abs() < 1e-14);
            assert!(
                (s1[j] - s2[j]).abs() < 1e-12 * s1[j],
                "{j}: {} vs {}",
                s1[j],
                s2[j]
            );
        }
        // Coordinate 0 by hand: values 1, 3, 0, 2.5, -1, 0.25.
        let x = [1.0, 3.0, 0.0, 2.5, -1.0, 0.25];
        let mean = x.iter().sum::<f64>() / 6.0;
        let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / 5.0;
        assert!((s2[0] - var.sqrt()).abs() < 1e-12);
    }
}
