//! The baselines of reference §5.5: grid search and the 1/N heuristic
//! ([`super::grid::heuristic_arm`]).
//!
//! Grid search runs every grid point for a fixed number of iterations from the MAP plus
//! Gaussian noise (without the noise the smallest step wins, since the MAP itself scores best)
//! and picks the point with the lowest selection metric, which the caller supplies: the test
//! log-loss in the paper, or the KSD.

use super::TuneError;
use super::arm::Arm;
use super::grid::ArmSettings;
use super::mamba::{TuneContext, Workers};
use crate::rng::fill_standard_normal;
use crate::runner::Budget;
use std::time::Instant;

/// Settings of [`grid_search`].
#[derive(Debug, Clone, PartialEq)]
pub struct GridSearchSettings {
    /// Iterations per grid point.
    pub iterations: u64,
    /// Count `iterations` in gradient estimates: a sampler with L estimates per step runs
    /// ⌈iterations/L⌉ iterations.
    pub count_estimates: bool,
    /// Standard deviation of the noise added to the start.
    pub start_noise: f64,
    /// Keep every `thin`-th iterate for the selection metric.
    pub thin: usize,
    /// Threads (0: every core).
    pub threads: usize,
    /// Seed of every point's stream.
    pub seed: u64,
}

/// One grid point's run.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct GridPoint {
    /// Arm index (grid order).
    pub arm: usize,
    /// Its grid values.
    pub label: String,
    /// The selection metric (+∞: diverged or not computable).
    pub metric: f64,
    /// Draws kept.
    pub draws: usize,
    /// Iterations run.
    pub iterations: usize,
    /// Thread-CPU seconds of sampling.
    pub sampling_seconds: f64,
    /// Seconds of the selection metric.
    pub metric_seconds: f64,
    /// The chain became non-finite.
    pub diverged: bool,
}

/// The result of [`grid_search`].
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct GridSearchOutcome {
    /// Every point, in ranking order (best first; ties in grid order).
    pub points: Vec<GridPoint>,
    /// The winning arm.
    pub winner: usize,
    /// Its kept draws.
    #[cfg_attr(feature = "serde", serde(skip))]
    pub winner_draws: Vec<f64>,
    /// Wall-clock seconds.
    pub wall_seconds: f64,
}

/// Run every arm for `settings.iterations` from `ctx.start` + N(0, σ²·I) and rank by `select`
/// (a function of the kept draws, lower is better).
pub fn grid_search(
    ctx: &TuneContext<'_>,
    arms: &[ArmSettings],
    settings: &GridSearchSettings,
    select: &(dyn Fn(&[f64]) -> f64 + Sync),
) -> Result<GridSearchOutcome, TuneError> {
    let started = Instant::now();
    if !(settings.start_noise.is_finite() && settings.start_noise >= 0.0) {
        return Err(TuneError::Grid(format!(
            "[tune.grid_search] start_noise must be finite and >= 0, got {}",
            settings.start_noise
        )));
    }
    if settings.thin == 0 || settings.iterations == 0 {
        return Err(TuneError::Grid(
            "[tune.grid_search] iterations and thin must be at least 1".into(),
        ));
    }
    ctx.check(arms)?;
    let workers = Workers::new(settings.threads)?;
    let dim = ctx.model.dim();
    let results: Vec<Result<(GridPoint, Vec<f64>), TuneError>> = workers.map(arms.len(), &|a| {
        let mut rng = crate::rng::stream(settings.seed, a as u64);
        let mut start = vec![0.0; dim];
        fill_standard_normal(&mut rng, &mut start);
        start
            .iter_mut()
            .zip(&ctx.start)
            .for_each(|(s, m)| *s = m + settings.start_noise * *s);
        let mut arm = Arm::new(&start, rng);
        let (mut sampler, mut estimator) = ctx.build(&arms[a])?;
        let iterations = if settings.count_estimates {
            settings
                .iterations
                .div_ceil(sampler.estimates_per_step().max(1) as u64)
        } else {
            settings.iterations
        };
        let segment = arm.run_round(
            sampler.as_mut(),
            estimator.as_mut(),
            Budget::Iterations(iterations as usize),
            settings.thin,
        );
        let t = Instant::now();
        let metric = if segment.diverged || segment.draws.is_empty() {
            f64::INFINITY
        } else {
            let m = select(&segment.draws);
            if m.is_finite() { m } else { f64::INFINITY }
        };
        Ok((
            GridPoint {
                arm: a,
                label: arms[a].label(),
                metric,
                draws: segment.len(dim),
                iterations: segment.iterations,
                sampling_seconds: segment.cpu_seconds,
                metric_seconds: t.elapsed().as_secs_f64(),
                diverged: segment.diverged,
            },
            segment.draws,
        ))
    });
    let mut points = Vec::with_capacity(arms.len());
    let mut draws = Vec::with_capacity(arms.len());
    for r in results {
        let (p, d) = r?;
        points.push(p);
        draws.push(d);
    }
    points.sort_by(|a, b| a.metric.total_cmp(&b.metric).then(a.arm.cmp(&b.arm)));
    let winner = points[0].arm;
    Ok(GridSearchOutcome {
        winner,
        winner_draws: std::mem::take(&mut draws[winner]),
        points,
        wall_seconds: started.elapsed().as_secs_f64(),
    })
}
