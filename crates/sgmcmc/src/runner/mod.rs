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
mod resume;

pub use crate::sampler::{ChainKernel, SamplerKernel, all_finite};
pub use budget::{Budget, BudgetError, thread_cpu_seconds};
pub use chain::{
    ChainObserver, ChainOutcome, ChainPlan, ChainProgress, Divergence, Transition, drive,
    drive_chain, drive_from, drive_kernel,
};
pub use progress::{NoProgress, Progress};
pub(crate) use resume::Schedule;
pub use resume::{ChainStart, CheckpointHeader, CheckpointStore, Checkpoints, checkpoint_header};

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
    /// Checkpoints saved ([`Checkpoints`]); 0 without checkpointing or for a kernel that
    /// cannot be checkpointed.
    pub checkpoints: usize,
    /// Why the chain took no checkpoints although they were asked for.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub checkpoint_note: Option<String>,
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
    /// A chain's checkpoint could not be restored.
    #[error("resuming chain {chain}: {source}")]
    Resume {
        /// Chain number.
        chain: usize,
        /// Why.
        source: crate::checkpoint::StateError,
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
    run_resumable(settings, make_chain, sink, progress, stop, None, &[])
}

/// [`run_until`] with checkpoints (if `checkpoints` is given) and each chain c beginning as
/// `starts[c]` says (fresh where `starts` is shorter): a chain resumed from its last
/// checkpoint makes exactly the draws after it that an uninterrupted run makes, so `sink`
/// must hand chain c a writer that continues after the checkpoint's draws. Chains whose start
/// is [`ChainStart::Elsewhere`] are skipped: the report holds the others, in chain order.
pub fn run_resumable<'a, F>(
    settings: &RunSettings,
    make_chain: F,
    sink: &dyn DrawSink,
    progress: &dyn Progress,
    stop: &AtomicBool,
    checkpoints: Option<&Checkpoints<'_>>,
    starts: &[ChainStart],
) -> Result<RunReport, RunError>
where
    F: Fn(usize, &mut ChainRng) -> Result<Chain<'a>, RunError>,
{
    settings.validate()?;
    let start = Instant::now();
    let mut prepared = Vec::with_capacity(settings.chains);
    for c in 0..settings.chains {
        let start = starts.get(c).unwrap_or(&ChainStart::Fresh);
        if *start == ChainStart::Elsewhere {
            continue;
        }
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
        prepared.push((c, chain, rng, writer, start));
    }
    let reports = prepared
        .into_par_iter()
        .map(|(c, chain, rng, writer, start)| {
            let ctx = ChainContext {
                settings,
                progress,
                stop,
                checkpoints,
            };
            run_chain(&ctx, c, chain, start, rng, writer)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(RunReport {
        chains: reports,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// A kernel with the chain's stream, as the [`Transition`] the runner drives (the observer
/// sees both, so that it can checkpoint them).
struct Stepping<'k, 'a> {
    kernel: &'k mut (dyn ChainKernel + Send + 'a),
    rng: &'k mut ChainRng,
}

impl Transition for Stepping<'_, '_> {
    type Failure = std::convert::Infallible;
    fn position(&self) -> &[f64] {
        self.kernel.position()
    }
    fn is_finite(&self) -> bool {
        self.kernel.is_finite()
    }
    fn step(&mut self) -> Result<(), Self::Failure> {
        self.kernel.step(self.rng);
        Ok(())
    }
    fn gradient_evaluations(&self) -> u64 {
        self.kernel.gradient_evaluations()
    }
}

/// What every chain of a run shares.
struct ChainContext<'r> {
    settings: &'r RunSettings,
    progress: &'r dyn Progress,
    stop: &'r AtomicBool,
    checkpoints: Option<&'r Checkpoints<'r>>,
}

/// A chain's checkpointing: where to, when next, and what it has run so far.
struct Checkpointer<'r> {
    store: &'r dyn CheckpointStore,
    schedule: resume::Schedule,
    seed: u64,
    /// Seconds the chain ran before this process (a resumed chain's).
    seconds_before: f64,
    started: Instant,
    saved: usize,
    /// Draws whose statistics the store has (the chain's first `statistics_saved`).
    statistics_saved: usize,
}

impl Checkpointer<'_> {
    /// Flushes `writer`, hands the store the statistics of the draws since the last
    /// checkpoint (`statistics` holds those of draws `first_draw..`), and saves the checkpoint
    /// of `chain` after `progress`.
    fn save(
        &mut self,
        chain: usize,
        progress: ChainProgress,
        stepping: &Stepping<'_, '_>,
        writer: &mut dyn ChainWriter,
        (first_draw, statistics): (usize, &[crate::sampler::DrawStatistics]),
    ) -> Result<(), SinkError> {
        writer.flush()?;
        let new = &statistics[self.statistics_saved - first_draw..];
        self.store
            .save_statistics(chain, self.statistics_saved, new)?;
        self.statistics_saved += new.len();
        let header = CheckpointHeader {
            chain,
            seed: self.seed,
            progress,
            seconds: self.seconds_before + self.started.elapsed().as_secs_f64(),
        };
        let bytes = resume::encode(&header, &*stepping.kernel, stepping.rng)
            .expect("checked at the chain's start");
        self.store.save(chain, &bytes)?;
        self.schedule.taken();
        self.saved += 1;
        Ok(())
    }
}

/// The runner's observer of one chain: kept draws to its writer, progress every
/// [`PROGRESS_EVERY`] iterations, checkpoints.
struct Recorder<'w> {
    chain: usize,
    writer: Box<dyn ChainWriter + 'w>,
    progress: &'w dyn Progress,
    /// Per kept draw from `first_draw` on, the kernel's [`ChainKernel::draw_statistics`].
    statistics: Vec<crate::sampler::DrawStatistics>,
    /// The draw `statistics` starts at (a resumed chain's earlier draws are not in it).
    first_draw: usize,
    /// Draws kept so far (a resumed chain's included).
    draws: usize,
    checkpointer: Option<Checkpointer<'w>>,
    /// The writer has just written every draw out (a chunk filled): checkpoint now.
    flushed: bool,
    /// A checkpoint that failed (the chain stops; the run reports it).
    error: Option<SinkError>,
}

impl ChainObserver<Stepping<'_, '_>> for Recorder<'_> {
    fn kept(&mut self, stepping: &Stepping<'_, '_>) -> Result<(), SinkError> {
        self.statistics.push(stepping.kernel.draw_statistics());
        let held = self.writer.pending();
        self.writer.push(stepping.kernel.position())?;
        self.draws += 1;
        // A chunk went out (a writer that holds nothing back, such as memory, never triggers).
        self.flushed = held > 0 && self.writer.pending() == 0;
        Ok(())
    }

    fn iterated(
        &mut self,
        iteration: usize,
        stepping: &Stepping<'_, '_>,
    ) -> std::ops::ControlFlow<()> {
        if iteration.is_multiple_of(PROGRESS_EVERY) {
            self.progress.advanced(self.chain, iteration);
        }
        if let Some(cp) = &mut self.checkpointer
            && (std::mem::take(&mut self.flushed) || cp.schedule.due())
        {
            let progress = ChainProgress {
                iterations: iteration,
                draws: self.draws,
            };
            let statistics = (self.first_draw, self.statistics.as_slice());
            if let Err(e) = cp.save(
                self.chain,
                progress,
                stepping,
                self.writer.as_mut(),
                statistics,
            ) {
                self.error = Some(e);
                return std::ops::ControlFlow::Break(());
            }
        }
        std::ops::ControlFlow::Continue(())
    }
}

/// The budget left to a chain that already ran `seconds` (wall-clock and CPU budgets; the
/// others count on from the checkpoint's counters).
fn remaining_budget(budget: Budget, seconds: f64) -> Budget {
    match budget {
        Budget::WallClock(limit) => {
            Budget::WallClock(limit.saturating_sub(std::time::Duration::from_secs_f64(seconds)))
        }
        Budget::ThreadCpuSeconds(limit) => Budget::ThreadCpuSeconds((limit - seconds).max(0.0)),
        other => other,
    }
}

fn run_chain(
    ctx: &ChainContext<'_>,
    c: usize,
    chain: Chain<'_>,
    start: &ChainStart,
    mut rng: ChainRng,
    writer: Box<dyn ChainWriter + '_>,
) -> Result<ChainReport, RunError> {
    let settings = ctx.settings;
    let Chain { mut kernel, init } = chain;
    let started = Instant::now();
    ctx.progress
        .chain_started(c, settings.budget.total_iterations(settings.burn_in));
    let sink_err = |source| RunError::Sink { chain: c, source };
    let (done, seconds_before) = match start {
        ChainStart::Fresh => {
            kernel.start(&init, &mut rng);
            (ChainProgress::default(), 0.0)
        }
        ChainStart::Resume(bytes) => {
            let header = resume::decode(bytes, c, settings.seed, kernel.as_mut(), &mut rng)
                .map_err(|source| RunError::Resume { chain: c, source })?;
            (header.progress, header.seconds)
        }
        ChainStart::Elsewhere => unreachable!("chains run elsewhere are not prepared"),
    };
    let plan = ChainPlan {
        budget: remaining_budget(settings.budget, seconds_before),
        burn_in: settings.burn_in,
        thin: settings.thin,
    };
    // Checkpoints if asked for and the kernel can save its state.
    let (checkpointer, checkpoint_note) = match ctx.checkpoints {
        None => (None, None),
        Some(cp) => {
            let mut probe = crate::checkpoint::StateWriter::new();
            kernel.save_state(&mut probe);
            match probe.finish() {
                Ok(_) => (
                    Some(Checkpointer {
                        store: cp.store,
                        schedule: resume::Schedule::new(cp.interval),
                        seed: settings.seed,
                        seconds_before,
                        started,
                        saved: 0,
                        statistics_saved: done.draws,
                    }),
                    None,
                ),
                Err(e) => (None, Some(e.to_string())),
            }
        }
    };
    let mut recorder = Recorder {
        chain: c,
        writer,
        progress: ctx.progress,
        // Room for the first draws' statistics only: a budget may be far larger than the
        // draws a run keeps before it is stopped.
        statistics: Vec::with_capacity(match settings.budget {
            Budget::Iterations(n) => (n / settings.thin.max(1) + 1).min(DRAW_STATISTICS_RESERVE),
            _ => 0,
        }),
        first_draw: done.draws,
        draws: done.draws,
        checkpointer,
        flushed: false,
        error: None,
    };
    let mut stepping = Stepping {
        kernel: kernel.as_mut(),
        rng: &mut rng,
    };
    let outcome =
        drive_from(&mut stepping, &plan, done, &mut recorder, ctx.stop).map_err(sink_err)?;
    if let Some(e) = recorder.error.take() {
        return Err(sink_err(e));
    }
    // The last checkpoint: where the chain ended (finished or interrupted), so that a resumed
    // run goes on from there; a diverged chain keeps its last finite checkpoint.
    if outcome.divergence.is_none()
        && let Some(cp) = &mut recorder.checkpointer
    {
        let progress = ChainProgress {
            iterations: outcome.iterations,
            draws: outcome.draws,
        };
        let statistics = (recorder.first_draw, recorder.statistics.as_slice());
        cp.save(c, progress, &stepping, recorder.writer.as_mut(), statistics)
            .map_err(sink_err)?;
    }
    let checkpoints = recorder.checkpointer.as_ref().map_or(0, |cp| cp.saved);
    recorder.writer.finish().map_err(sink_err)?;
    let report = ChainReport {
        chain: c,
        iterations: outcome.iterations,
        draws: outcome.draws,
        seconds: started.elapsed().as_secs_f64() + seconds_before,
        divergence: outcome.divergence,
        interrupted: outcome.interrupted,
        sampler_statistics: kernel.statistics(),
        draw_statistics: recorder.statistics,
        checkpoints,
        checkpoint_note,
    };
    ctx.progress.chain_finished(c, &report);
    Ok(report)
}
