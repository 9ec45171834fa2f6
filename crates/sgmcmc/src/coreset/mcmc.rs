//! The Coreset MCMC loop (reference §7.3; Algorithms 1–2 of the tuning-free paper, in the
//! reference code's order).
//!
//! For i = 0, 1, …, T (T = training iterations + ⌈draws/K⌉):
//! 1. each chain takes one step of κ_w with the current weights;
//! 2. during warm-up, the chains' hot-start traces get Σₘ w₀ₘ·ℓ_{cₘ}(θ) (or log π_w with the
//!    prior, `trace_includes_prior`), and at i ≥ 3·dim, i mod `check_every` = 0 the hot-start
//!    test (Algorithm 3) may end warm-up; warm-up also ends at the cap (the reference would
//!    never train then: `never_train_without_hot_start`); with `record_trace` each warm-up
//!    sweep also records ‖ĝ‖ (from its own stream) and the statistic where it was checked;
//! 3. for 0 < i ≤ training iterations after warm-up: ĝ from the states just produced (Eq. 4),
//!    one optimiser step, projected onto w ≥ 0;
//! 4. the K states go to the metric and, after training, to the draws.
//!
//! Chain k draws from `rng::chain_stream(seed, k)`; the coreset's points and the subsamples from
//! the stream numbered K, so a run depends only on its seed.
//!
//! Checkpoints ([`CoresetCheckpoints`]): the chains are coupled through the weights, so a
//! checkpoint is the whole joint state (every kernel and stream, the weights and the
//! optimiser, the weight-gradient subsampler, the hot-start traces, the metric's window and the
//! draws so far), taken at least every interval and when the run stops; a run resumed from
//! one makes exactly the sweeps, weights and draws of an uninterrupted run.

use super::CoresetError;
use super::gradient::{SubsampleScheme, WeightGradient};
use super::hot_start::hot_start_median;
use super::kernel::CoresetKernel;
use super::metric::ZScoreTracker;
use super::optim::WeightOptimiser;
use super::posterior::{Coreset, CoresetPosterior, PosteriorWorkspace, weighted_log_lik};
use crate::checkpoint::{StateError, StateReader, StateWriter};
use crate::io::SinkError;
use crate::model::Model;
use crate::rng::{self, ChainRng};
use crate::runner::{
    Budget, ChainObserver, ChainPlan, ChainProgress, Schedule, Transition, drive_from,
};
use std::ops::ControlFlow;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// The hot-start gate (reference §7.3, §7.5).
#[derive(Debug, Clone, PartialEq)]
pub struct HotStartSettings {
    /// Gate the optimiser on the hot-start test (false: train from the first iteration, the
    /// paper's "without hot start").
    pub enabled: bool,
    /// Pass iff the median statistic over chains is below this (c = 0.5).
    pub threshold: f64,
    /// Test every this many iterations once i ≥ 3·dim (the reference's 30; the paper's 1).
    pub check_every: usize,
    /// End warm-up at this iteration whatever the test says (10,000).
    pub max_warmup: usize,
    /// Trace log π_w with the prior (the reference) instead of the coreset log-likelihood at
    /// w₀ (the paper).
    pub trace_includes_prior: bool,
    /// Never train if the test has not passed by the cap (the reference's behaviour).
    pub never_train_without_hot_start: bool,
    /// Record the burn-in trace ([`CoresetRun::burn_in`]: the paper's Figs. 5, 10 and 11).
    /// Costs one extra weight-gradient estimate per warm-up iteration, from its own random
    /// stream, so the run's chains, weights and draws are those of a run without it. Not
    /// checkpointed: a run that records it cannot take checkpoints.
    pub record_trace: bool,
}

impl Default for HotStartSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            threshold: 0.5,
            check_every: 30,
            max_warmup: 10_000,
            trace_includes_prior: false,
            never_train_without_hot_start: false,
            record_trace: false,
        }
    }
}

/// One warm-up iteration of the burn-in trace (the tuning-free paper's Figs. 5, 10 and 11).
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct BurnInPoint {
    /// The iteration (sweep) of warm-up.
    pub iteration: usize,
    /// ‖ĝ‖₂: the norm of the weight-gradient estimate (Eq. 4) at the untrained weights and the
    /// states this sweep produced, from the trace's own subsample stream.
    pub gradient_norm: f64,
    /// median(u₁, …, u_K) where the hot-start test was checked at this iteration (None where
    /// it was not, or a trace was still too short).
    pub statistic: Option<f64>,
}

/// Settings of one coreset run.
#[derive(Debug, Clone, PartialEq)]
pub struct CoresetSettings {
    /// Optimisation iterations (the papers' 200,000).
    pub train_iterations: usize,
    /// Draws kept after training, pooled over chains (⌈draws/K⌉ extra iterations).
    pub draws: usize,
    /// Subsample size S of the full-data term (the papers use S = M).
    pub subsample: usize,
    /// How the subsample is drawn.
    pub scheme: SubsampleScheme,
    /// The Newton correction of ĝ (compatibility option).
    pub newton_correction: bool,
    /// The hot-start gate.
    pub hot_start: HotStartSettings,
    /// Record the metric every this many iterations (it is updated at every one).
    pub record_every: usize,
}

/// What a run produced. A run that stops early (a chain failed, or the stop flag) keeps what it
/// had: the weights, the metric so far and the draws taken.
#[derive(Debug, Clone)]
pub struct CoresetRun {
    /// The coreset with its final weights.
    pub coreset: Coreset,
    /// Iteration at which warm-up ended (None: it never ended).
    pub hot_start_iteration: Option<usize>,
    /// Whether the hot-start test passed (false: the cap ended warm-up, or it never ended).
    pub hot_start_passed: bool,
    /// Optimiser steps taken.
    pub optimiser_steps: usize,
    /// Iterations completed.
    pub iterations: usize,
    /// (iteration, metric) every `record_every` iterations and at the last one (empty without
    /// a reference).
    pub metric: Vec<(usize, f64)>,
    /// Draws after training, per chain (row-major, D per draw).
    pub draws: Vec<Vec<f64>>,
    /// Why the run stopped before its end, if it did.
    pub stopped: Option<String>,
    /// One point per warm-up iteration with [`HotStartSettings::record_trace`] (empty
    /// without it).
    pub burn_in: Vec<BurnInPoint>,
}

/// The burn-in trace's own weight-gradient estimator, stream and output buffer, and its points.
struct TraceGradient {
    estimator: WeightGradient,
    rng: ChainRng,
    gradient: Vec<f64>,
    points: Vec<BurnInPoint>,
}

/// The K lockstep kernels and the weights as one [`Transition`] of the joint chain on
/// (θ₁, …, θ_K, w): a step is one sweep (every kernel steps once with the current weights),
/// the hot-start bookkeeping and, while training, one optimiser step on the weights (steps 1–3
/// of the module docs). Its position is the K chains' θ, chain-major.
struct CoresetSweep<'a> {
    model: &'a dyn Model,
    coreset: Coreset,
    initial_weights: Vec<f64>,
    kernels: &'a mut [Box<dyn CoresetKernel>],
    optimiser: &'a mut dyn WeightOptimiser,
    weight_gradient: WeightGradient,
    chain_rngs: Vec<ChainRng>,
    loop_rng: ChainRng,
    workspace: PosteriorWorkspace,
    gradient: Vec<f64>,
    hot: &'a HotStartSettings,
    state_dim: usize,
    train_iterations: usize,
    /// The sweep about to run (0-based; the module docs' i).
    sweep: usize,
    warming_up: bool,
    hot_start_iteration: Option<usize>,
    hot_start_passed: bool,
    traces: Vec<Vec<f64>>,
    /// The burn-in trace, when recorded.
    trace_gradient: Option<TraceGradient>,
    optimiser_steps: usize,
    positions: Vec<f64>,
    /// The run's seed (checked when a checkpoint is read back).
    seed: u64,
}

impl CoresetSweep<'_> {
    fn chain_position(&self, c: usize) -> &[f64] {
        self.kernels[c].position()
    }
}

impl Transition for CoresetSweep<'_> {
    /// Why the run stopped (a kernel's or the optimiser's failure, or a non-finite weight).
    type Failure = String;

    fn position(&self) -> &[f64] {
        &self.positions
    }

    fn step(&mut self) -> Result<(), String> {
        let i = self.sweep;
        let hot = self.hot;
        let target = CoresetPosterior {
            model: self.model,
            points: &self.coreset.points,
            weights: &self.coreset.weights,
        };
        for (c, (kernel, chain_rng)) in self
            .kernels
            .iter_mut()
            .zip(&mut self.chain_rngs)
            .enumerate()
        {
            let log_density = kernel
                .step(&target, chain_rng)
                .map_err(|e| format!("chain {c} at iteration {i}: {e}"))?;
            if self.warming_up {
                let value = if hot.trace_includes_prior {
                    log_density
                } else {
                    weighted_log_lik(
                        self.model,
                        &self.coreset.points,
                        &self.initial_weights,
                        kernel.position(),
                        &mut self.workspace,
                    )
                };
                self.traces[c].push(value);
            }
        }
        let warming_up = self.warming_up;
        let mut statistic = None;
        if self.warming_up && i >= 3 * self.state_dim && i.is_multiple_of(hot.check_every) {
            let views: Vec<&[f64]> = self.traces.iter().map(Vec::as_slice).collect();
            statistic = hot_start_median(&views);
            if statistic.is_some_and(|median| median < hot.threshold) {
                self.warming_up = false;
                self.hot_start_passed = true;
                self.hot_start_iteration = Some(i);
            }
        }
        if warming_up && let Some(trace) = self.trace_gradient.as_mut() {
            trace.estimator.estimate(
                self.model,
                &self.coreset.points,
                &self.coreset.weights,
                self.kernels.iter().map(|k| k.position()),
                &mut trace.rng,
                &mut trace.gradient,
            );
            trace.points.push(BurnInPoint {
                iteration: i,
                gradient_norm: trace.gradient.iter().map(|g| g * g).sum::<f64>().sqrt(),
                statistic,
            });
        }
        if self.warming_up && i >= hot.max_warmup && !hot.never_train_without_hot_start {
            self.warming_up = false;
            self.hot_start_iteration = Some(i);
        }
        if !self.warming_up && !self.traces[0].is_empty() {
            self.traces.iter_mut().for_each(|t| *t = Vec::new());
        }
        if i > 0 && i <= self.train_iterations && !self.warming_up {
            self.weight_gradient.estimate(
                self.model,
                &self.coreset.points,
                &self.coreset.weights,
                self.kernels.iter().map(|k| k.position()),
                &mut self.loop_rng,
                &mut self.gradient,
            );
            self.optimiser
                .step(&mut self.coreset.weights, &self.gradient)
                .map_err(|e| format!("optimiser step at iteration {i}: {e}"))?;
            self.optimiser_steps += 1;
            if let Some(j) = self.coreset.weights.iter().position(|w| !w.is_finite()) {
                return Err(format!(
                    "weight {j} became {} at iteration {i}",
                    self.coreset.weights[j]
                ));
            }
        }
        for (chunk, kernel) in self
            .positions
            .chunks_exact_mut(self.model.dim())
            .zip(self.kernels.iter())
        {
            chunk.copy_from_slice(kernel.position());
        }
        self.sweep += 1;
        Ok(())
    }
}

/// Saves a checkpoint (each replaces the last: write it atomically); the error says why not.
pub type SaveCheckpoint<'a> = &'a mut dyn FnMut(&[u8]) -> Result<(), String>;

/// Checkpoints of a coreset run (see the module docs).
pub struct CoresetCheckpoints<'a> {
    /// Saves a checkpoint.
    pub save: SaveCheckpoint<'a>,
    /// The longest time between two checkpoints.
    pub interval: Duration,
    /// A checkpoint of an earlier run of the same settings and seed to continue from.
    pub resume: Option<Vec<u8>>,
}

/// Version of the coreset checkpoint's layout (another version is refused).
const FORMAT: u64 = 1;

/// Watches the sweeps: the draws after training (per chain) and the metric; takes the
/// checkpoints.
struct CoresetRecorder<'t, 'c> {
    tracker: Option<&'t mut ZScoreTracker>,
    record_every: usize,
    /// The last sweep (the module docs' T).
    last: usize,
    draws: Vec<Vec<f64>>,
    metric: Vec<(usize, f64)>,
    checkpoints: Option<(SaveCheckpoint<'c>, Schedule)>,
    /// Why a checkpoint could not be saved (the run stops there).
    checkpoint_failure: Option<String>,
}

impl CoresetRecorder<'_, '_> {
    /// Draws kept per chain so far.
    fn draws_kept(&self, sweep: &CoresetSweep<'_>) -> usize {
        self.draws[0].len() / sweep.model.dim().max(1)
    }

    /// The recorder's part of a checkpoint (the tracker's window, the metric, the draws).
    fn save(&self, w: &mut StateWriter) {
        match self.tracker.as_deref() {
            Some(t) => w.field("tracker", t),
            None => w.field_with("tracker", |w| w.nested(0)),
        }
        let (at, values): (Vec<usize>, Vec<f64>) = self.metric.iter().copied().unzip();
        w.field("metric_at", &at);
        w.field("metric", &values);
        w.field("kept_draws", &self.draws);
    }

    fn load(&mut self, r: &mut StateReader<'_>) -> Result<(), StateError> {
        match self.tracker.as_deref_mut() {
            Some(t) => r.field("tracker", t)?,
            None => r.field_with("tracker", |r| r.nested(0))?,
        }
        let (mut at, mut values) = (Vec::<usize>::new(), Vec::<f64>::new());
        r.field("metric_at", &mut at)?;
        r.field("metric", &mut values)?;
        if at.len() != values.len() {
            return Err(StateError::Invalid(
                "the metric's iterations and values differ in length".into(),
            ));
        }
        self.metric = at.into_iter().zip(values).collect();
        r.field("kept_draws", &mut self.draws)
    }

    /// Saves the whole state after `progress`.
    fn checkpoint(
        &mut self,
        sweep: &CoresetSweep<'_>,
        progress: ChainProgress,
        seed: u64,
    ) -> Result<(), String> {
        let bytes = encode(sweep, self, progress, seed).map_err(|e| e.to_string())?;
        let Some((save, schedule)) = self.checkpoints.as_mut() else {
            return Ok(());
        };
        save(&bytes)?;
        schedule.taken();
        Ok(())
    }
}

impl CoresetSweep<'_> {
    fn save(&self, w: &mut StateWriter) {
        let points: Vec<usize> = self.coreset.points.iter().map(|&p| p as usize).collect();
        w.field("points", &points);
        w.field("weights", &self.coreset.weights);
        w.field_with("kernels", |w| {
            w.nested(self.kernels.len());
            for kernel in self.kernels.iter() {
                w.field_with("kernel", |w| kernel.save_state(w));
            }
        });
        w.field_with("optimiser", |w| self.optimiser.save_state(w));
        w.field("weight_gradient", &self.weight_gradient);
        w.field("chain_rngs", &self.chain_rngs);
        w.field("loop_rng", &self.loop_rng);
        w.field("sweep", &self.sweep);
        w.field("warming_up", &self.warming_up);
        w.field("hot_start_iteration", &self.hot_start_iteration);
        w.field("hot_start_passed", &self.hot_start_passed);
        w.field("traces", &self.traces);
        w.field("optimiser_steps", &self.optimiser_steps);
    }

    fn load(&mut self, r: &mut StateReader<'_>) -> Result<(), StateError> {
        let mut points = Vec::<usize>::new();
        r.field("points", &mut points)?;
        if !points
            .iter()
            .map(|&p| p as u64)
            .eq(self.coreset.points.iter().map(|&p| u64::from(p)))
        {
            return Err(StateError::Invalid(
                "the checkpoint's coreset holds other data points (another seed, size or data?)"
                    .into(),
            ));
        }
        r.field("weights", &mut self.coreset.weights)?;
        let kernels = &mut *self.kernels;
        r.field_with("kernels", |r| {
            r.nested(kernels.len())?;
            kernels
                .iter_mut()
                .try_for_each(|kernel| r.field_with("kernel", |r| kernel.load_state(r)))
        })?;
        r.field_with("optimiser", |r| self.optimiser.load_state(r))?;
        r.field("weight_gradient", &mut self.weight_gradient)?;
        r.field("chain_rngs", &mut self.chain_rngs)?;
        r.field("loop_rng", &mut self.loop_rng)?;
        r.field("sweep", &mut self.sweep)?;
        r.field("warming_up", &mut self.warming_up)?;
        r.field("hot_start_iteration", &mut self.hot_start_iteration)?;
        r.field("hot_start_passed", &mut self.hot_start_passed)?;
        r.field("traces", &mut self.traces)?;
        r.field("optimiser_steps", &mut self.optimiser_steps)?;
        if self.coreset.weights.len() != self.coreset.points.len()
            || self.chain_rngs.len() != self.kernels.len()
        {
            return Err(StateError::Invalid(
                "the checkpoint has another number of weights or chains".into(),
            ));
        }
        let d = self.model.dim();
        for (chunk, kernel) in self.positions.chunks_exact_mut(d).zip(self.kernels.iter()) {
            if kernel.position().len() != d {
                return Err(StateError::Invalid(format!(
                    "a restored chain has {} coordinates, the model {d}",
                    kernel.position().len()
                )));
            }
            chunk.copy_from_slice(kernel.position());
        }
        Ok(())
    }
}

/// The checkpoint of the run after `progress`.
fn encode(
    sweep: &CoresetSweep<'_>,
    recorder: &CoresetRecorder<'_, '_>,
    progress: ChainProgress,
    seed: u64,
) -> Result<Vec<u8>, StateError> {
    let mut w = StateWriter::new();
    w.field("format", &FORMAT);
    w.field("seed", &seed);
    w.field("iterations", &progress.iterations);
    w.field("draws", &progress.draws);
    sweep.save(&mut w);
    recorder.save(&mut w);
    w.finish()
}

/// Restores `sweep` and `recorder` from [`encode`]'s bytes; the progress they had.
fn decode(
    bytes: &[u8],
    sweep: &mut CoresetSweep<'_>,
    recorder: &mut CoresetRecorder<'_, '_>,
    seed: u64,
) -> Result<ChainProgress, StateError> {
    let mut r = StateReader::new(bytes);
    let mut format = 0u64;
    r.field("format", &mut format)?;
    if format != FORMAT {
        return Err(StateError::Invalid(format!(
            "format {format}, this version reads format {FORMAT}"
        )));
    }
    let mut saved_seed = 0u64;
    r.field("seed", &mut saved_seed)?;
    if saved_seed != seed {
        return Err(StateError::Invalid(format!(
            "of a run with seed {saved_seed}, not {seed}"
        )));
    }
    let mut progress = ChainProgress::default();
    r.field("iterations", &mut progress.iterations)?;
    r.field("draws", &mut progress.draws)?;
    sweep.load(&mut r)?;
    recorder.load(&mut r)?;
    r.finish()?;
    Ok(progress)
}

impl ChainObserver<CoresetSweep<'_>> for CoresetRecorder<'_, '_> {
    fn kept(&mut self, sweep: &CoresetSweep<'_>) -> Result<(), SinkError> {
        for (c, draws) in self.draws.iter_mut().enumerate() {
            draws.extend_from_slice(sweep.chain_position(c));
        }
        Ok(())
    }

    /// Runner iteration j is sweep i = j − 1.
    fn iterated(&mut self, iteration: usize, sweep: &CoresetSweep<'_>) -> ControlFlow<()> {
        let i = iteration - 1;
        if let Some(t) = self.tracker.as_deref_mut() {
            for c in 0..self.draws.len() {
                t.push(sweep.chain_position(c));
            }
            if i.is_multiple_of(self.record_every) || i == self.last {
                self.metric.push((i, t.metric()));
            }
        }
        if let Some((_, schedule)) = self.checkpoints.as_mut()
            && schedule.due()
        {
            let progress = ChainProgress {
                iterations: iteration,
                draws: self.draws_kept(sweep),
            };
            if let Err(e) = self.checkpoint(sweep, progress, sweep.seed) {
                self.checkpoint_failure = Some(e);
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    }
}

/// One coreset MCMC run: `kernels` (one per chain, K ≥ 2) on `model`'s coreset `coreset`,
/// weights trained by `optimiser`, the metric tracked when `tracker` is given; `stop` ends it at
/// the next iteration boundary. Random streams come from `seed` (see the module docs). The
/// sweeps run through the runner's loop ([`crate::runner::drive`]): T + 1 iterations, the
/// first `train_iterations` + 1 of them burn-in. With `checkpoints`, the run saves its whole
/// state at least every interval, when it stops early and when it ends, and continues from
/// the given checkpoint of an earlier run (an unreadable one, or one of another run, is an
/// error before any sweep).
#[allow(clippy::too_many_arguments)]
pub fn run_coreset_mcmc(
    model: &dyn Model,
    coreset: Coreset,
    kernels: &mut [Box<dyn CoresetKernel>],
    optimiser: &mut dyn WeightOptimiser,
    settings: &CoresetSettings,
    seed: u64,
    tracker: Option<&mut ZScoreTracker>,
    stop: Option<&AtomicBool>,
    checkpoints: Option<CoresetCheckpoints<'_>>,
) -> Result<CoresetRun, CoresetError> {
    let k = kernels.len();
    if k < 2 {
        return Err(CoresetError::Setting(format!(
            "coreset MCMC needs at least 2 chains, got {k}"
        )));
    }
    if settings.record_every == 0 || settings.hot_start.check_every == 0 {
        return Err(CoresetError::Setting(
            "record_every and check_every must be at least 1".into(),
        ));
    }
    let mut weight_gradient =
        WeightGradient::new(model.num_data(), settings.subsample, settings.scheme)?;
    if settings.newton_correction {
        weight_gradient = weight_gradient.with_newton_correction();
    }
    if settings.hot_start.record_trace && checkpoints.is_some() {
        return Err(CoresetError::Setting(
            "the burn-in trace (record_trace) is not checkpointed: record it without checkpoints"
                .into(),
        ));
    }
    let trace_gradient = settings.hot_start.record_trace.then(|| TraceGradient {
        estimator: weight_gradient.clone(),
        rng: rng::stream(seed, rng::streams::BURN_IN_TRACE),
        gradient: vec![0.0; coreset.len()],
        points: Vec::new(),
    });
    if let Some(t) = tracker.as_deref()
        && t.dim() != model.dim()
    {
        return Err(CoresetError::Setting(format!(
            "reference moments have {} coordinates, the model has {}",
            t.dim(),
            model.dim()
        )));
    }
    if let Some(c) = kernels
        .iter()
        .position(|kernel| kernel.position().len() != model.dim())
    {
        return Err(CoresetError::Setting(format!(
            "chain {c}'s kernel has {} coordinates, the model has {}",
            kernels[c].position().len(),
            model.dim()
        )));
    }
    let m = coreset.len();
    let hot = &settings.hot_start;
    let state_dim = kernels.iter().map(|k| k.state_dim()).max().unwrap_or(0);
    let last = settings.train_iterations + settings.draws.div_ceil(k);
    let positions = kernels.iter().flat_map(|k| k.position().to_vec()).collect();
    let mut sweep = CoresetSweep {
        model,
        initial_weights: coreset.weights.clone(),
        coreset,
        kernels,
        optimiser,
        weight_gradient,
        chain_rngs: (0..k).map(|c| rng::chain_stream(seed, c)).collect(),
        loop_rng: rng::stream(seed, k as u64),
        workspace: PosteriorWorkspace::default(),
        gradient: vec![0.0; m],
        hot,
        state_dim,
        train_iterations: settings.train_iterations,
        sweep: 0,
        warming_up: hot.enabled,
        hot_start_iteration: (!hot.enabled).then_some(0),
        hot_start_passed: false,
        traces: vec![Vec::new(); k],
        trace_gradient,
        optimiser_steps: 0,
        positions,
        seed,
    };
    let (checkpoints, resume) = match checkpoints {
        Some(c) => (Some((c.save, Schedule::new(c.interval))), c.resume),
        None => (None, None),
    };
    let mut recorder = CoresetRecorder {
        tracker,
        record_every: settings.record_every,
        last,
        draws: vec![Vec::new(); k],
        metric: Vec::new(),
        checkpoints,
        checkpoint_failure: None,
    };
    let done = match resume {
        Some(bytes) => decode(&bytes, &mut sweep, &mut recorder, seed)
            .map_err(|e| CoresetError::Checkpoint(e.to_string()))?,
        None => ChainProgress::default(),
    };
    let plan = ChainPlan {
        // T + 1 sweeps in all: the iterations budget counts those after burn-in.
        budget: Budget::Iterations(last - settings.train_iterations),
        burn_in: settings.train_iterations + 1,
        thin: 1,
    };
    let never = AtomicBool::new(false);
    let outcome = drive_from(
        &mut sweep,
        &plan,
        done,
        &mut recorder,
        stop.unwrap_or(&never),
    )
    .expect("the coreset recorder keeps draws in memory and cannot fail");
    let iterations = outcome.iterations;
    // The last checkpoint: where the run ended or was stopped (not a failed or diverged
    // state; the one before stays).
    if recorder.checkpoints.is_some()
        && recorder.checkpoint_failure.is_none()
        && outcome.failure.is_none()
        && outcome.divergence.is_none()
    {
        let progress = ChainProgress {
            iterations,
            draws: recorder.draws_kept(&sweep),
        };
        if let Err(e) = recorder.checkpoint(&sweep, progress, seed) {
            recorder.checkpoint_failure = Some(e);
        }
    }
    let stopped = if let Some(e) = recorder.checkpoint_failure.take() {
        Some(format!("cannot save a checkpoint: {e}"))
    } else if let Some(failure) = outcome.failure {
        Some(failure)
    } else if let Some(d) = outcome.divergence {
        Some(format!(
            "a chain's state became non-finite at iteration {}",
            d.iteration.saturating_sub(1)
        ))
    } else if outcome.interrupted {
        Some(format!("stopped by request before iteration {iterations}"))
    } else {
        None
    };
    let mut metric = recorder.metric;
    if let (Some(t), Some(&(recorded, _))) = (recorder.tracker.as_deref(), metric.last())
        && recorded + 1 != iterations
        && iterations > 0
    {
        metric.push((iterations - 1, t.metric()));
    }
    Ok(CoresetRun {
        coreset: sweep.coreset,
        hot_start_iteration: sweep.hot_start_iteration,
        hot_start_passed: sweep.hot_start_passed,
        optimiser_steps: sweep.optimiser_steps,
        iterations,
        metric,
        draws: recorder.draws,
        stopped,
        burn_in: sweep.trace_gradient.map_or_else(Vec::new, |t| t.points),
    })
}
