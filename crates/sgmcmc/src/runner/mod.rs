//! The runner: the one loop every sampler shares.
//!
//! [`drive_chain`] (chain.rs) is the loop: it owns budgets (iterations, wall clock, thread CPU
//! time, gradient evaluations; budget.rs), burn-in, thinning, divergence detection and the stop
//! flag, and hands kept draws to a [`ChainObserver`]; samplers only implement
//! [`Sampler::step`]. [`run`]/[`run_until`] run many chains through it in parallel, with
//! storage and progress; the tuner's arm rounds run through it too. Chain c draws from stream c
//! of the user seed ([`crate::rng::chain_stream`]) and runs start to finish on one thread, so its
//! draws are bit-identical whatever the number of threads.

mod budget;
mod chain;
mod progress;

pub use crate::sampler::{ChainKernel, SamplerKernel, all_finite};
pub use budget::{Budget, BudgetError, thread_cpu_seconds};
pub use chain::{
    ChainObserver, ChainOutcome, ChainPlan, Divergence, Transition, drive, drive_chain,
    drive_kernel,
};
pub use progress::{NoProgress, Progress};

use crate::estimator::GradientEstimator;
use crate::io::{ChainWriter, DrawSink, SinkError};
use crate::rng::{ChainRng, chain_stream};
use crate::sampler::Sampler;
use rayon::prelude::*;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// Run-level settings shared by all chains.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RunSettings {
    /// The user seed every random stream derives from.
    pub seed: u64,
    /// Number of chains.
    pub chains: usize,
    /// When each chain stops.
    pub budget: Budget,
    /// Iterations discarded at the start of each chain.
    pub burn_in: usize,
    /// Keep every `thin`-th iteration after burn-in (≥ 1).
    pub thin: usize,
}

/// One chain, ready to run: its kernel (a sampler with its own gradient estimator,
/// [`Chain::sampler`], or any other [`ChainKernel`] such as minibatch MH) and its starting
/// point.
pub struct Chain<'a> {
    /// The chain's kernel.
    pub kernel: Box<dyn ChainKernel + Send + 'a>,
    /// θ₀.
    pub init: Vec<f64>,
}

impl<'a> Chain<'a> {
    /// `sampler` driven by the chain's own `estimator`, from `init`.
    pub fn sampler(
        sampler: Box<dyn Sampler + 'a>,
        estimator: Box<dyn GradientEstimator + 'a>,
        init: Vec<f64>,
    ) -> Self {
        Chain {
            kernel: Box::new(SamplerKernel::new(sampler, estimator)),
            init,
        }
    }
}

/// What one chain did.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ChainReport {
    /// Chain number.
    pub chain: usize,
    /// Iterations run (burn-in included).
    pub iterations: usize,
    /// Draws kept.
    pub draws: usize,
    /// Wall-clock seconds of this chain.
    pub seconds: f64,
    /// Set if the chain diverged (it then stopped early; its earlier draws are kept).
    pub divergence: Option<Divergence>,
    /// The chain stopped early because a stop was requested (e.g. Ctrl-C); its draws are kept.
    pub interrupted: bool,
    /// The sampler's own counts ([`Sampler::statistics`]), e.g. an MH test's outcomes.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub sampler_statistics: Option<crate::sampler::SamplerStatistics>,
    /// Per kept draw, the chain's state ([`ChainKernel::draw_statistics`]); not in the summary.
    #[cfg_attr(feature = "serde", serde(skip))]
    pub draw_statistics: Vec<crate::sampler::DrawStatistics>,
}

impl ChainReport {
    /// This chain's iterations per second.
    pub fn iterations_per_second(&self) -> f64 {
        self.iterations as f64 / self.seconds.max(f64::MIN_POSITIVE)
    }
}

/// What a run did.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RunReport {
    /// One report per chain, in chain order.
    pub chains: Vec<ChainReport>,
    /// Wall-clock seconds of the whole run.
    pub seconds: f64,
}

impl RunReport {
    /// Chains that diverged.
    pub fn diverged_chains(&self) -> Vec<usize> {
        self.chains
            .iter()
            .filter(|c| c.divergence.is_some())
            .map(|c| c.chain)
            .collect()
    }

    /// Iterations per second of one chain, averaged over chains (each chain's own rate).
    pub fn iterations_per_second(&self) -> f64 {
        let n = self.chains.len().max(1) as f64;
        self.chains
            .iter()
            .map(ChainReport::iterations_per_second)
            .sum::<f64>()
            / n
    }

    /// Total draws kept over all chains.
    pub fn draws(&self) -> usize {
        self.chains.iter().map(|c| c.draws).sum()
    }

    /// Whether a stop request ended any chain early.
    pub fn interrupted(&self) -> bool {
        self.chains.iter().any(|c| c.interrupted)
    }
}

/// Errors that stop a run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// `chains = 0`.
    #[error("invalid run settings: chains must be at least 1")]
    NoChains,
    /// `thin = 0`.
    #[error("invalid run settings: thin must be at least 1")]
    ZeroThin,
    /// A budget that cannot be spent.
    #[error("invalid run settings: {0}")]
    Budget(#[from] BudgetError),
    /// A chain's sampler or estimator settings cannot be built.
    #[error(transparent)]
    Build(#[from] crate::settings::SettingsError),
    /// A chain's starting point has a NaN or infinite coordinate.
    #[error("chain {chain}: initial point is not finite: {init:?}")]
    NonFiniteInit {
        /// Chain number.
        chain: usize,
        /// The starting point.
        init: Vec<f64>,
    },
    /// Building a chain failed (the caller's own error, kept typed as the source).
    #[error("chain {chain}: {source}")]
    ChainSetup {
        /// Chain number.
        chain: usize,
        /// Why.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Draws could not be stored.
    #[error("storing draws of chain {chain}: {source}")]
    Sink {
        /// Chain number.
        chain: usize,
        /// The storage error.
        source: SinkError,
    },
}

impl RunSettings {
    fn validate(&self) -> Result<(), RunError> {
        if self.chains == 0 {
            return Err(RunError::NoChains);
        }
        if self.thin == 0 {
            return Err(RunError::ZeroThin);
        }
        Ok(self.budget.check()?)
    }
}

/// Iterations between progress reports.
const PROGRESS_EVERY: usize = 4096;

/// Draw statistics reserved per chain up front (the rest grow as draws come).
const DRAW_STATISTICS_RESERVE: usize = 4096;

/// Run `settings.chains` chains in parallel. `make_chain(c, rng)` builds chain c, drawing any
/// randomness it needs (e.g. an initial point) from the chain's own stream `rng`, which the
/// chain then continues to use. Draws go to `sink`; a diverging chain is stopped and reported
/// while the others finish.
pub fn run<'a, F>(
    settings: &RunSettings,
    make_chain: F,
    sink: &dyn DrawSink,
    progress: &dyn Progress,
) -> Result<RunReport, RunError>
where
    F: Fn(usize, &mut ChainRng) -> Result<Chain<'a>, RunError>,
{
    run_until(
        settings,
        make_chain,
        sink,
        progress,
        &AtomicBool::new(false),
    )
}

/// [`run`], and every chain also stops at the first iteration boundary after `stop` becomes
/// true (e.g. set by a Ctrl-C handler); its draws so far are flushed and it is reported as
/// interrupted.
pub fn run_until<'a, F>(
    settings: &RunSettings,
    make_chain: F,
    sink: &dyn DrawSink,
    progress: &dyn Progress,
    stop: &AtomicBool,
) -> Result<RunReport, RunError>
where
    F: Fn(usize, &mut ChainRng) -> Result<Chain<'a>, RunError>,
{
    settings.validate()?;
    let start = Instant::now();
    let mut prepared = Vec::with_capacity(settings.chains);
    for c in 0..settings.chains {
        let mut rng = chain_stream(settings.seed, c);
        let chain = make_chain(c, &mut rng)?;
        if !chain.init.iter().all(|v| v.is_finite()) {
            return Err(RunError::NonFiniteInit {
                chain: c,
                init: chain.init,
            });
        }
        let writer = sink
            .chain_writer(c)
            .map_err(|source| RunError::Sink { chain: c, source })?;
        prepared.push((c, chain, rng, writer));
    }
    let reports = prepared
        .into_par_iter()
        .map(|(c, chain, rng, writer)| run_chain(settings, c, chain, rng, writer, progress, stop))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(RunReport {
        chains: reports,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// The runner's observer of one chain: kept draws to its writer, progress every
/// [`PROGRESS_EVERY`] iterations.
struct Recorder<'w> {
    chain: usize,
    writer: Box<dyn ChainWriter + 'w>,
    progress: &'w dyn Progress,
    /// Per kept draw, the kernel's [`ChainKernel::draw_statistics`].
    statistics: Vec<crate::sampler::DrawStatistics>,
}

impl<K: ChainKernel + ?Sized> ChainObserver<K> for Recorder<'_> {
    fn kept(&mut self, kernel: &K) -> Result<(), SinkError> {
        self.statistics.push(kernel.draw_statistics());
        self.writer.push(kernel.position())
    }

    fn iterated(&mut self, iteration: usize, _kernel: &K) -> std::ops::ControlFlow<()> {
        if iteration.is_multiple_of(PROGRESS_EVERY) {
            self.progress.advanced(self.chain, iteration);
        }
        std::ops::ControlFlow::Continue(())
    }
}

fn run_chain(
    settings: &RunSettings,
    c: usize,
    chain: Chain<'_>,
    mut rng: ChainRng,
    writer: Box<dyn ChainWriter + '_>,
    progress: &dyn Progress,
    stop: &AtomicBool,
) -> Result<ChainReport, RunError> {
    let Chain { mut kernel, init } = chain;
    let start = Instant::now();
    progress.chain_started(c, settings.budget.total_iterations(settings.burn_in));
    let sink_err = |source| RunError::Sink { chain: c, source };
    let plan = ChainPlan {
        budget: settings.budget,
        burn_in: settings.burn_in,
        thin: settings.thin,
    };
    let mut recorder = Recorder {
        chain: c,
        writer,
        progress,
        // Room for the first draws' statistics only: a budget may be far larger than the
        // draws a run keeps before it is stopped.
        statistics: Vec::with_capacity(match settings.budget {
            Budget::Iterations(n) => (n / settings.thin.max(1) + 1).min(DRAW_STATISTICS_RESERVE),
            _ => 0,
        }),
    };
    let outcome = drive_kernel(kernel.as_mut(), &mut rng, &init, &plan, &mut recorder, stop)
        .map_err(sink_err)?;
    recorder.writer.finish().map_err(sink_err)?;
    let report = ChainReport {
        chain: c,
        iterations: outcome.iterations,
        draws: outcome.draws,
        seconds: start.elapsed().as_secs_f64(),
        divergence: outcome.divergence,
        interrupted: outcome.interrupted,
        sampler_statistics: kernel.statistics(),
        draw_statistics: recorder.statistics,
    };
    progress.chain_finished(c, &report);
    Ok(report)
}
