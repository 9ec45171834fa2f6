//! The Coreset MCMC loop (reference §7.3; Algorithms 1–2 of the tuning-free paper, in the
//! reference code's order).
//!
//! For i = 0, 1, …, T (T = training iterations + ⌈draws/K⌉):
//! 1. each chain takes one step of κ_w with the current weights;
//! 2. during warm-up, the chains' hot-start traces get Σₘ w₀ₘ·ℓ_{cₘ}(θ) (or log π_w with the
//!    prior, `trace_includes_prior`), and at i ≥ 3·dim, i mod `check_every` = 0 the hot-start
//!    test (Algorithm 3) may end warm-up; warm-up also ends at the cap (the reference would
//!    never train then: `never_train_without_hot_start`);
//! 3. for 0 < i ≤ training iterations after warm-up: ĝ from the states just produced (Eq. 4),
//!    one optimiser step, projected onto w ≥ 0;
//! 4. the K states go to the metric and, after training, to the draws.
//!
//! Chain k draws from `rng::chain_stream(seed, k)`; the coreset's points and the subsamples from
//! the stream numbered K, so a run depends only on its seed.

use super::CoresetError;
use super::gradient::{SubsampleScheme, WeightGradient};
use super::hot_start::hot_start_passes;
use super::kernel::CoresetKernel;
use super::metric::ZScoreTracker;
use super::optim::WeightOptimiser;
use super::posterior::{Coreset, CoresetPosterior, PosteriorWorkspace, weighted_log_lik};
use crate::model::Model;
use crate::rng::{self, ChainRng};
use std::sync::atomic::{AtomicBool, Ordering};

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
        }
    }
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
}

/// One coreset MCMC run: `kernels` (one per chain, K ≥ 2) on `model`'s coreset `coreset`,
/// weights trained by `optimiser`, the metric tracked when `tracker` is given; `stop` ends it at
/// the next iteration boundary. Random streams come from `seed` (see the module docs).
#[allow(clippy::too_many_arguments)]
pub fn run_coreset_mcmc(
    model: &dyn Model,
    mut coreset: Coreset,
    kernels: &mut [Box<dyn CoresetKernel>],
    optimiser: &mut dyn WeightOptimiser,
    settings: &CoresetSettings,
    seed: u64,
    mut tracker: Option<&mut ZScoreTracker>,
    stop: Option<&AtomicBool>,
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
    let mut gradient_estimator =
        WeightGradient::new(model.num_data(), settings.subsample, settings.scheme)?;
    if settings.newton_correction {
        gradient_estimator = gradient_estimator.with_newton_correction();
    }
    if let Some(t) = tracker.as_deref()
        && t.dim() != model.dim()
    {
        return Err(CoresetError::Setting(format!(
            "reference moments have {} coordinates, the model has {}",
            t.dim(),
            model.dim()
        )));
    }
    let m = coreset.len();
    let initial_weights = coreset.weights.clone();
    let mut chain_rngs: Vec<ChainRng> = (0..k).map(|c| rng::chain_stream(seed, c)).collect();
    let mut loop_rng = rng::stream(seed, k as u64);
    let mut ws = PosteriorWorkspace::default();
    let mut gradient = vec![0.0; m];
    let hot = &settings.hot_start;
    let state_dim = kernels.iter().map(|k| k.state_dim()).max().unwrap_or(0);
    let total = settings.train_iterations + settings.draws.div_ceil(k);
    let mut warming_up = hot.enabled;
    let mut hot_start_iteration = (!hot.enabled).then_some(0);
    let mut hot_start_passed = false;
    let mut traces: Vec<Vec<f64>> = vec![Vec::new(); k];
    let mut run = CoresetRun {
        coreset: Coreset {
            points: Vec::new(),
            weights: Vec::new(),
        },
        hot_start_iteration: None,
        hot_start_passed: false,
        optimiser_steps: 0,
        iterations: 0,
        metric: Vec::new(),
        draws: vec![Vec::new(); k],
        stopped: None,
    };
    'outer: for i in 0..=total {
        if stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
            run.stopped = Some(format!("stopped by request before iteration {i}"));
            break;
        }
        let target = CoresetPosterior {
            model,
            points: &coreset.points,
            weights: &coreset.weights,
        };
        for (c, (kernel, chain_rng)) in kernels.iter_mut().zip(&mut chain_rngs).enumerate() {
            let log_density = match kernel.step(&target, chain_rng) {
                Ok(f) => f,
                Err(e) => {
                    run.stopped = Some(format!("chain {c} at iteration {i}: {e}"));
                    break 'outer;
                }
            };
            if warming_up {
                let value = if hot.trace_includes_prior {
                    log_density
                } else {
                    weighted_log_lik(
                        model,
                        &coreset.points,
                        &initial_weights,
                        kernel.position(),
                        &mut ws,
                    )
                };
                traces[c].push(value);
            }
        }
        if warming_up && i >= 3 * state_dim && i % hot.check_every == 0 {
            let views: Vec<&[f64]> = traces.iter().map(Vec::as_slice).collect();
            if hot_start_passes(&views, hot.threshold) {
                warming_up = false;
                hot_start_passed = true;
                hot_start_iteration = Some(i);
            }
        }
        if warming_up && i >= hot.max_warmup && !hot.never_train_without_hot_start {
            warming_up = false;
            hot_start_iteration = Some(i);
        }
        if !warming_up && !traces[0].is_empty() {
            traces.iter_mut().for_each(|t| *t = Vec::new());
        }
        if i > 0 && i <= settings.train_iterations && !warming_up {
            gradient_estimator.estimate(
                model,
                &coreset.points,
                &coreset.weights,
                kernels.iter().map(|k| k.position()),
                &mut loop_rng,
                &mut gradient,
            );
            if let Err(e) = optimiser.step(&mut coreset.weights, &gradient) {
                run.stopped = Some(format!("optimiser step at iteration {i}: {e}"));
                run.iterations = i + 1;
                break;
            }
            run.optimiser_steps += 1;
            if let Some(j) = coreset.weights.iter().position(|w| !w.is_finite()) {
                run.stopped = Some(format!(
                    "weight {j} became {} at iteration {i}",
                    coreset.weights[j]
                ));
                run.iterations = i + 1;
                break;
            }
        }
        for (c, kernel) in kernels.iter().enumerate() {
            let theta = kernel.position();
            if let Some(t) = tracker.as_deref_mut() {
                t.push(theta);
            }
            if i > settings.train_iterations {
                run.draws[c].extend_from_slice(theta);
            }
        }
        if let Some(t) = tracker.as_deref()
            && (i % settings.record_every == 0 || i == total)
        {
            run.metric.push((i, t.metric()));
        }
        run.iterations = i + 1;
    }
    if let (Some(t), Some(&(last, _))) = (tracker.as_deref(), run.metric.last())
        && last + 1 != run.iterations
        && run.iterations > 0
    {
        run.metric.push((run.iterations - 1, t.metric()));
    }
    run.coreset = coreset;
    run.hot_start_iteration = hot_start_iteration;
    run.hot_start_passed = hot_start_passed;
    Ok(run)
}
