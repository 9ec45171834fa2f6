//! Minibatch MH paper (Seita et al.) §5.1, reference §6.8: the Gaussian mixture of Welling & Teh
//! (θ = (0, 1), σ₁² = 10, σ₂² = 1, σₓ² = 2, N = 10,000) at the workshop's settings: likelihood
//! temperature T = 110, minibatch m = 200, random-walk proposal with covariance diag(0.03, 0.03).
//!
//! Compared, each as several independent chains from θ₀ = (0.5, 0):
//! - the minibatch Barker test with X_corr (the library's default: grow the batch when s² ≥ σ²);
//! - the same test with the workshop's `skip` policy;
//! - the workshop test (K minibatches for s, skip at s ≥ 1.2, the bank of FFT curves), with s
//!   as measured and with s smoothed across iterations (the workshop's run);
//! - Austerity (m = 200, ε = 0.1);
//! - full-data MH with the Metropolis rule and with Barker's rule (the exact counterpart of the
//!   minibatch Barker test: same acceptance function, same mixing).
//!
//! The truth is the tempered posterior itself, evaluated on a 2-D grid (the target is
//! two-dimensional, so its marginals are computed to quadrature accuracy rather than estimated
//! from a long chain). Each method's draws are compared with the exact marginal CDFs by the
//! Kolmogorov distance per coordinate; the full-data chains show the distance that Monte Carlo
//! error alone gives at the same length. Also reported: the data each test used per iteration
//! (Austerity's batch sizes against the fixed m) and the skip counts of the skipping tests as m
//! grows (the workshop's "violations").

use rayon::prelude::*;
use serde::Serialize;
use sgmcmc::io::SinkError;
use sgmcmc::mh::{
    AcceptanceTest, AusterityTest, BarkerTest, CorrectionBank, CorrectionTable, ExactRule,
    ExactTest, FailurePolicy, MhKernel, MhStatistics, Proposal, VarianceEstimate, WorkshopTest,
};
use sgmcmc::model::{DataIndex, GaussianMixtureModel, Model, Scratch};
use sgmcmc::rng::stream;
use sgmcmc::runner::{Budget, ChainKernel, ChainObserver, ChainPlan, drive_kernel};
use sgmcmc::sampler::SamplerError;
use std::ops::ControlFlow;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// The tests compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MixtureMethod {
    /// Minibatch Barker test, grow policy (the library's default).
    Barker,
    /// Minibatch Barker test, skip policy.
    BarkerSkip,
    /// The workshop test (§6.6).
    Workshop,
    /// The workshop test with s smoothed across iterations (the workshop's mixture run).
    WorkshopSmoothed,
    /// Austerity's sequential t-test.
    Austerity,
    /// Full-data MH with the Metropolis rule.
    ExactMh,
    /// Full-data MH with Barker's rule (the minibatch Barker test's exact counterpart: the
    /// same acceptance function, so the same mixing).
    ExactBarker,
}

impl MixtureMethod {
    /// All methods, in table order.
    pub const ALL: [MixtureMethod; 7] = [
        MixtureMethod::Barker,
        MixtureMethod::BarkerSkip,
        MixtureMethod::Workshop,
        MixtureMethod::WorkshopSmoothed,
        MixtureMethod::Austerity,
        MixtureMethod::ExactMh,
        MixtureMethod::ExactBarker,
    ];

    /// Display name.
    pub fn label(self) -> &'static str {
        match self {
            MixtureMethod::Barker => "Barker + X_corr (grow)",
            MixtureMethod::BarkerSkip => "Barker + X_corr (skip)",
            MixtureMethod::Workshop => "workshop test (bank, skip)",
            MixtureMethod::WorkshopSmoothed => "workshop test, s smoothed",
            MixtureMethod::Austerity => "Austerity",
            MixtureMethod::ExactMh => "full-data MH (Metropolis)",
            MixtureMethod::ExactBarker => "full-data MH (Barker)",
        }
    }
}

/// The experiment's settings (defaults: the workshop's).
#[derive(Debug, Clone, Serialize)]
pub struct MhMixtureSettings {
    /// N.
    pub data: usize,
    /// Seed of the data.
    pub data_seed: u64,
    /// Likelihood temperature T.
    pub temperature: f64,
    /// Minibatch m (Barker's batch and increment, the workshop's minibatch, Austerity's
    /// increment).
    pub batch: usize,
    /// Random-walk standard deviation per coordinate (√0.03).
    pub proposal_sd: f64,
    /// Austerity's ε.
    pub austerity_tolerance: f64,
    /// K of the workshop test.
    pub workshop_minibatches: usize,
    /// Moving-average weight of s for the smoothed workshop test.
    pub workshop_smoothing: f64,
    /// Kept iterations per chain.
    pub iterations: usize,
    /// Iterations discarded first (every method alike).
    pub burn_in: usize,
    /// Independent chains per method.
    pub chains: usize,
    /// Start of every chain.
    pub start: [f64; 2],
    /// Master seed of the chains.
    pub seed: u64,
    /// Batch sizes of the skip-count sweep (empty: no sweep).
    pub sweep_batches: Vec<usize>,
    /// Grid points per axis for the exact marginals.
    pub grid_points: usize,
}

impl Default for MhMixtureSettings {
    fn default() -> Self {
        Self {
            data: 10_000,
            data_seed: 2017,
            temperature: 110.0,
            batch: 200,
            proposal_sd: 0.03f64.sqrt(),
            austerity_tolerance: 0.1,
            workshop_minibatches: 10,
            workshop_smoothing: 0.05,
            iterations: 10_000,
            burn_in: 1_000,
            chains: 10,
            start: [0.5, 0.0],
            seed: 1,
            sweep_batches: vec![50, 100, 150, 200, 250, 300],
            grid_points: 200,
        }
    }
}

/// The exact marginals of the tempered posterior on a grid.
#[derive(Debug, Clone, Serialize)]
pub struct ExactMarginals {
    /// Per coordinate: the grid's lower edge, cell width and cell masses (summing to 1).
    pub axes: [MarginalAxis; 2],
    /// Posterior means.
    pub mean: [f64; 2],
    /// Posterior standard deviations.
    pub sd: [f64; 2],
    /// Largest cell mass on the grid's border, relative to the largest cell (the grid must
    /// cover the posterior: this must be tiny).
    pub border_mass_ratio: f64,
}

/// One coordinate's marginal on the grid.
#[derive(Debug, Clone, Serialize)]
pub struct MarginalAxis {
    /// Lower edge of the first cell.
    pub lower: f64,
    /// Cell width.
    pub width: f64,
    /// Mass of each cell.
    pub masses: Vec<f64>,
}

impl MarginalAxis {
    /// The marginal CDF at `x`, linear within each cell.
    pub fn cdf(&self, x: f64) -> f64 {
        let pos = (x - self.lower) / self.width;
        if pos <= 0.0 {
            return 0.0;
        }
        let cell = pos.floor() as usize;
        if cell >= self.masses.len() {
            return 1.0;
        }
        let below: f64 = self.masses[..cell].iter().sum();
        below + (pos - cell as f64) * self.masses[cell]
    }
}

/// One method's result over its chains.
#[derive(Debug, Clone, Serialize)]
pub struct MethodOutcome {
    /// Which test.
    pub method: MixtureMethod,
    /// Kolmogorov distance to the exact marginal per coordinate, per chain.
    pub ks: Vec<[f64; 2]>,
    /// The same for all chains' draws pooled.
    pub ks_pooled: [f64; 2],
    /// Mean of the pooled draws.
    pub mean: [f64; 2],
    /// Standard deviation of the pooled draws.
    pub sd: [f64; 2],
    /// The chains' counts, merged (kept iterations only).
    pub stats: MhStatistics,
    /// Chains that stopped on an error (none expected).
    pub failed: usize,
    /// Seconds of all chains (thread time summed is not measured: wall of the method).
    pub seconds: f64,
}

/// Skip counts of one skipping test at one batch size.
#[derive(Debug, Clone, Serialize)]
pub struct SweepRow {
    /// Which test.
    pub method: MixtureMethod,
    /// m.
    pub batch: usize,
    /// Skipped iterations per chain (of `iterations + burn_in`).
    pub skipped: Vec<u64>,
}

/// The whole experiment's result.
#[derive(Debug, Clone, Serialize)]
pub struct MhMixtureReport {
    /// The settings run.
    pub settings: MhMixtureSettings,
    /// The exact marginals.
    pub exact: ExactMarginals,
    /// One entry per method.
    pub methods: Vec<MethodOutcome>,
    /// Skip counts as m grows.
    pub sweep: Vec<SweepRow>,
    /// Seconds for the whole experiment.
    pub seconds: f64,
}

/// Errors of the experiment.
#[derive(Debug, thiserror::Error)]
pub enum MhMixtureError {
    /// A setting out of range.
    #[error("mh-mixture: {0}")]
    Setting(String),
    /// The mixture model could not be built.
    #[error("mh-mixture: {0}")]
    Model(#[from] sgmcmc::model::ModelError),
    /// An MH kernel could not be built.
    #[error("mh-mixture: {0}")]
    Sampler(#[from] SamplerError),
    /// The workshop's correction bank could not be built.
    #[error("mh-mixture: {0}")]
    Correction(#[from] sgmcmc::mh::correction::CorrectionError),
    /// Every chain of a method failed its KS computation.
    #[error("mh-mixture: every chain of {0} failed")]
    AllChainsFailed(String),
}

/// Run the experiment; `log` receives progress lines.
pub fn run(
    settings: &MhMixtureSettings,
    log: &mut dyn FnMut(&str),
) -> Result<MhMixtureReport, MhMixtureError> {
    check(settings)?;
    let started = Instant::now();
    let data = GaussianMixtureModel::simulate(
        settings.data,
        GaussianMixtureModel::THETA_TRUE,
        settings.data_seed,
    );
    let model = GaussianMixtureModel::new(data)?;
    let t = Instant::now();
    let exact = exact_marginals(&model, settings.temperature, settings.grid_points);
    log(&format!(
        "exact tempered posterior on a {n} x {n} grid: mean ({:.4}, {:.4}), sd ({:.4}, {:.4}), \
         border mass ratio {:.1e} ({:.1} s)",
        exact.mean[0],
        exact.mean[1],
        exact.sd[0],
        exact.sd[1],
        exact.border_mass_ratio,
        t.elapsed().as_secs_f64(),
        n = settings.grid_points,
    ));
    let bank = CorrectionBank::workshop()?;
    let mut methods = Vec::new();
    for (index, method) in MixtureMethod::ALL.into_iter().enumerate() {
        let t = Instant::now();
        let runs: Vec<Result<ChainRun, MhMixtureError>> = (0..settings.chains)
            .into_par_iter()
            .map(|chain| {
                let test = build_test(method, settings, settings.batch, bank)?;
                run_chain(
                    &model,
                    test,
                    settings,
                    settings.seed,
                    (index * 1000 + chain) as u64,
                )
            })
            .collect();
        let outcome = summarise(method, runs, &exact, t.elapsed().as_secs_f64())?;
        log(&format!(
            "{}: KS ({:.4}, {:.4}) pooled, acceptance {:.3}, {:.1} points per test, {} skipped \
             ({:.1} s)",
            method.label(),
            outcome.ks_pooled[0],
            outcome.ks_pooled[1],
            outcome.stats.acceptance_rate(),
            outcome.stats.mean_points(),
            outcome.stats.skipped,
            outcome.seconds
        ));
        methods.push(outcome);
    }
    let mut sweep = Vec::new();
    for method in [
        MixtureMethod::BarkerSkip,
        MixtureMethod::Workshop,
        MixtureMethod::WorkshopSmoothed,
    ] {
        for &batch in &settings.sweep_batches {
            let skipped = (0..settings.chains)
                .into_par_iter()
                .map(|chain| {
                    let test = build_test(method, settings, batch, bank)?;
                    let sweep_stream = (10_000 + batch * 100 + chain) as u64;
                    let run = run_chain(&model, test, settings, settings.seed + 1, sweep_stream)?;
                    Ok(run.stats.skipped + run.burn_in_skipped)
                })
                .collect::<Result<Vec<u64>, MhMixtureError>>()?;
            log(&format!(
                "sweep: {} at m = {batch}: skipped {skipped:?}",
                method.label()
            ));
            sweep.push(SweepRow {
                method,
                batch,
                skipped,
            });
        }
    }
    Ok(MhMixtureReport {
        settings: settings.clone(),
        exact,
        methods,
        sweep,
        seconds: started.elapsed().as_secs_f64(),
    })
}

fn check(s: &MhMixtureSettings) -> Result<(), MhMixtureError> {
    let bad = |what: String| Err(MhMixtureError::Setting(what));
    if s.chains == 0 || s.iterations == 0 {
        return bad("chains and iterations must be at least 1".into());
    }
    if s.batch < 2 || s.batch > s.data || s.sweep_batches.iter().any(|&b| b < 2 || b > s.data) {
        return bad(format!(
            "every batch size must be in 2..={} (N), got {} and sweep {:?}",
            s.data, s.batch, s.sweep_batches
        ));
    }
    if s.grid_points < 10 {
        return bad(format!(
            "grid_points must be at least 10, got {}",
            s.grid_points
        ));
    }
    Ok(())
}

fn build_test(
    method: MixtureMethod,
    s: &MhMixtureSettings,
    batch: usize,
    bank: &'static CorrectionBank,
) -> Result<AcceptanceTest, MhMixtureError> {
    let table = CorrectionTable::default_table();
    let barker = |policy| {
        BarkerTest::new(
            table,
            batch,
            s.temperature,
            policy,
            VarianceEstimate::FinitePopulation,
        )
    };
    Ok(match method {
        MixtureMethod::Barker => AcceptanceTest::Barker(barker(FailurePolicy::Grow)?),
        MixtureMethod::BarkerSkip => AcceptanceTest::Barker(barker(FailurePolicy::Skip)?),
        MixtureMethod::Workshop | MixtureMethod::WorkshopSmoothed => {
            let test = WorkshopTest::new(bank, batch, s.workshop_minibatches, 1.2, s.temperature)?;
            AcceptanceTest::Workshop(if method == MixtureMethod::WorkshopSmoothed {
                test.with_smoothing(s.workshop_smoothing)?
            } else {
                test
            })
        }
        MixtureMethod::Austerity => AcceptanceTest::Austerity(AusterityTest::new(
            batch,
            s.austerity_tolerance,
            s.temperature,
        )?),
        MixtureMethod::ExactMh => {
            AcceptanceTest::Exact(ExactTest::new(ExactRule::Metropolis, s.temperature)?)
        }
        MixtureMethod::ExactBarker => {
            AcceptanceTest::Exact(ExactTest::new(ExactRule::Barker, s.temperature)?)
        }
    })
}

struct ChainRun {
    /// Kept draws, row-major (iterations × 2).
    draws: Vec<f64>,
    /// Counts over the kept iterations.
    stats: MhStatistics,
    /// Skips during burn-in.
    burn_in_skipped: u64,
}

fn run_chain(
    model: &GaussianMixtureModel,
    test: AcceptanceTest,
    s: &MhMixtureSettings,
    seed: u64,
    stream_index: u64,
) -> Result<ChainRun, MhMixtureError> {
    let mut rng = stream(seed, stream_index);
    // The random walk computes no gradient: the kernel has no estimator.
    let mut sampler = MhKernel::new(
        model,
        Proposal::RandomWalk { sd: s.proposal_sd },
        test,
        None,
    )?;
    let plan = ChainPlan {
        budget: Budget::Iterations(s.iterations),
        burn_in: s.burn_in,
        thin: 1,
    };
    let mut record = MixtureRecord {
        burn_in: s.burn_in,
        draws: Vec::with_capacity(2 * s.iterations),
        burn_in_stats: MhStatistics::default(),
    };
    drive_kernel(
        &mut sampler,
        &mut rng,
        &s.start,
        &plan,
        &mut record,
        &AtomicBool::new(false),
    )
    .expect("recording in memory cannot fail");
    Ok(ChainRun {
        draws: record.draws,
        stats: subtract(sampler.statistics(), &record.burn_in_stats),
        burn_in_skipped: record.burn_in_stats.skipped,
    })
}

/// A chain's kept draws, and the test's counts at the end of burn-in.
struct MixtureRecord {
    burn_in: usize,
    draws: Vec<f64>,
    burn_in_stats: MhStatistics,
}

impl ChainObserver<MhKernel<'_>> for MixtureRecord {
    fn started(&mut self, sampler: &MhKernel<'_>) {
        self.burn_in_stats = sampler.statistics().clone();
    }

    fn kept(&mut self, sampler: &MhKernel<'_>) -> Result<(), SinkError> {
        self.draws.extend_from_slice(sampler.position());
        Ok(())
    }

    fn iterated(&mut self, iteration: usize, sampler: &MhKernel<'_>) -> ControlFlow<()> {
        if iteration == self.burn_in {
            self.burn_in_stats = sampler.statistics().clone();
        }
        ControlFlow::Continue(())
    }
}

/// The counts of `total` minus those of `before` (the kept iterations' counts).
fn subtract(total: &MhStatistics, before: &MhStatistics) -> MhStatistics {
    let mut histogram = total.points_histogram.clone();
    for (k, v) in &before.points_histogram {
        if let Some(count) = histogram.get_mut(k) {
            *count -= v;
        }
    }
    histogram.retain(|_, v| *v > 0);
    MhStatistics {
        iterations: total.iterations - before.iterations,
        accepted: total.accepted - before.accepted,
        rejected: total.rejected - before.rejected,
        skipped: total.skipped - before.skipped,
        exhausted_by_sign: total.exhausted_by_sign - before.exhausted_by_sign,
        grown: total.grown - before.grown,
        rejected_by_prior: total.rejected_by_prior - before.rejected_by_prior,
        points: total.points - before.points,
        points_histogram: histogram,
        final_temperature: total.final_temperature,
    }
}

fn summarise(
    method: MixtureMethod,
    runs: Vec<Result<ChainRun, MhMixtureError>>,
    exact: &ExactMarginals,
    seconds: f64,
) -> Result<MethodOutcome, MhMixtureError> {
    let mut ks = Vec::new();
    let mut pooled: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let mut stats = MhStatistics::default();
    let mut failed = 0;
    for run in runs {
        let Ok(run) = run else {
            failed += 1;
            continue;
        };
        let mut per_chain = [0.0; 2];
        for j in 0..2 {
            let mut x: Vec<f64> = run.draws.iter().skip(j).step_by(2).copied().collect();
            per_chain[j] = kolmogorov_distance(&mut x, &exact.axes[j]);
            pooled[j].extend(x);
        }
        ks.push(per_chain);
        stats.merge(&run.stats);
    }
    if ks.is_empty() {
        return Err(MhMixtureError::AllChainsFailed(method.label().to_string()));
    }
    let mut ks_pooled = [0.0; 2];
    let mut mean = [0.0; 2];
    let mut sd = [0.0; 2];
    for j in 0..2 {
        let x = &mut pooled[j];
        let n = x.len() as f64;
        mean[j] = x.iter().sum::<f64>() / n;
        sd[j] = (x.iter().map(|v| (v - mean[j]).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        ks_pooled[j] = kolmogorov_distance(x, &exact.axes[j]);
    }
    Ok(MethodOutcome {
        method,
        ks,
        ks_pooled,
        mean,
        sd,
        stats,
        failed,
        seconds,
    })
}

/// sup_x |F_n(x) − F(x)| of the draws `x` (sorted in place) against the marginal CDF F.
pub fn kolmogorov_distance(x: &mut [f64], marginal: &MarginalAxis) -> f64 {
    x.sort_by(f64::total_cmp);
    let n = x.len() as f64;
    x.iter()
        .enumerate()
        .map(|(i, &v)| {
            let f = marginal.cdf(v);
            (f - i as f64 / n).abs().max((f - (i + 1) as f64 / n).abs())
        })
        .fold(0.0, f64::max)
}

/// The tempered posterior p₀(θ)·Πᵢ p(xᵢ | θ)^{1/T} on a `points` × `points` grid of cells
/// (midpoint rule), its marginals, means and standard deviations. A coarse pass over a wide box
/// finds the cells holding mass above 10⁻¹² of the peak; the fine grid spans them with a margin.
pub fn exact_marginals(
    model: &GaussianMixtureModel,
    temperature: f64,
    points: usize,
) -> ExactMarginals {
    // Coarse pass over a wide box, then the fine grid over the box holding the coarse mass.
    let coarse = grid_masses(model, temperature, [(-6.0, 8.0), (-8.0, 8.0)], 141);
    let bounds = mass_bounds(&coarse, 1e-12);
    let fine = grid_masses(model, temperature, bounds, points);
    let axes = [marginal(&fine, 0), marginal(&fine, 1)];
    let mut mean = [0.0; 2];
    let mut sd = [0.0; 2];
    for j in 0..2 {
        let a = &axes[j];
        let centre = |k: usize| a.lower + (k as f64 + 0.5) * a.width;
        mean[j] = a
            .masses
            .iter()
            .enumerate()
            .map(|(k, p)| p * centre(k))
            .sum();
        // Midpoint-rule variance plus the within-cell variance w²/12.
        let var: f64 = a
            .masses
            .iter()
            .enumerate()
            .map(|(k, p)| p * (centre(k) - mean[j]).powi(2))
            .sum::<f64>()
            + a.width * a.width / 12.0;
        sd[j] = var.sqrt();
    }
    let max = fine.masses.iter().copied().fold(0.0, f64::max);
    let n = fine.points;
    let border = (0..n)
        .flat_map(|k| [(0, k), (n - 1, k), (k, 0), (k, n - 1)])
        .map(|(i, j)| fine.masses[i * n + j])
        .fold(0.0, f64::max);
    ExactMarginals {
        axes,
        mean,
        sd,
        border_mass_ratio: border / max,
    }
}

struct Grid {
    bounds: [(f64, f64); 2],
    points: usize,
    /// Row-major masses (θ₁ index major), summing to 1.
    masses: Vec<f64>,
}

fn grid_masses(
    model: &GaussianMixtureModel,
    temperature: f64,
    bounds: [(f64, f64); 2],
    points: usize,
) -> Grid {
    let width = |j: usize| (bounds[j].1 - bounds[j].0) / points as f64;
    let centre = |j: usize, k: usize| bounds[j].0 + (k as f64 + 0.5) * width(j);
    let all: Vec<DataIndex> = (0..model.num_data() as DataIndex).collect();
    let log_density: Vec<f64> = (0..points * points)
        .into_par_iter()
        .map_init(
            || (Scratch::new(), vec![0.0; all.len()]),
            |(scratch, out), cell| {
                let theta = [centre(0, cell / points), centre(1, cell % points)];
                model.log_lik_each(&theta, &all, out, scratch);
                model.log_prior(&theta) + out.iter().sum::<f64>() / temperature
            },
        )
        .collect();
    let top = log_density
        .iter()
        .copied()
        .fold(f64::NEG_INFINITY, f64::max);
    let mut masses: Vec<f64> = log_density.iter().map(|l| (l - top).exp()).collect();
    let total: f64 = masses.iter().sum();
    masses.iter_mut().for_each(|m| *m /= total);
    Grid {
        bounds,
        points,
        masses,
    }
}

/// The box (with a two-cell margin) of the cells whose mass exceeds `tol` times the largest.
fn mass_bounds(grid: &Grid, tol: f64) -> [(f64, f64); 2] {
    let n = grid.points;
    let max = grid.masses.iter().copied().fold(0.0, f64::max);
    let (mut lo, mut hi) = ([n; 2], [0usize; 2]);
    for (cell, &m) in grid.masses.iter().enumerate() {
        if m > tol * max {
            let idx = [cell / n, cell % n];
            for j in 0..2 {
                lo[j] = lo[j].min(idx[j]);
                hi[j] = hi[j].max(idx[j]);
            }
        }
    }
    let mut bounds = [(0.0, 0.0); 2];
    for j in 0..2 {
        let (a, b) = grid.bounds[j];
        let w = (b - a) / n as f64;
        bounds[j] = (
            a + lo[j].saturating_sub(2) as f64 * w,
            a + (hi[j] + 3).min(n) as f64 * w,
        );
    }
    bounds
}

fn marginal(grid: &Grid, axis: usize) -> MarginalAxis {
    let n = grid.points;
    let mut masses = vec![0.0; n];
    for (cell, &m) in grid.masses.iter().enumerate() {
        let k = if axis == 0 { cell / n } else { cell % n };
        masses[k] += m;
    }
    let (a, b) = grid.bounds[axis];
    MarginalAxis {
        lower: a,
        width: (b - a) / n as f64,
        masses,
    }
}

/// Buckets of points per decision, as multiples of m: 1, 2, 3, 4–5, 6–20, 21 up to N − 1, N.
fn bucket_label(points: usize, m: usize, n: usize) -> (usize, String) {
    let k = points.div_ceil(m);
    match k {
        _ if points >= n => (6, format!("all {n}")),
        0 | 1 => (0, format!("{m}")),
        2 => (1, format!("{}", 2 * m)),
        3 => (2, format!("{}", 3 * m)),
        4 | 5 => (3, format!("{}–{}", 4 * m, 5 * m)),
        6..=20 => (4, format!("{}–{}", 6 * m, 20 * m)),
        _ => (5, format!("{}–{}", 21 * m, n - 1)),
    }
}

/// The report as markdown tables.
pub fn markdown(report: &MhMixtureReport) -> String {
    use std::fmt::Write;
    let s = &report.settings;
    let e = &report.exact;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Tempered posterior (T = {}, N = {}), exact on a {} × {} grid: mean ({:.4}, {:.4}), sd \
         ({:.4}, {:.4}).\n",
        s.temperature, s.data, s.grid_points, s.grid_points, e.mean[0], e.mean[1], e.sd[0], e.sd[1]
    );
    let _ = writeln!(
        out,
        "{} chains × {} kept iterations (after {} burn-in) per method from θ₀ = ({}, {}); random \
         walk sd {:.4}; m = {}.\n",
        s.chains, s.iterations, s.burn_in, s.start[0], s.start[1], s.proposal_sd, s.batch
    );
    let _ = writeln!(
        out,
        "| test | KS θ₁ (mean ± sd over chains) | KS θ₂ | KS pooled (θ₁, θ₂) | mean (θ₁, θ₂) | sd \
         (θ₁, θ₂) | acceptance | data per iteration | skipped |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|");
    for m in &report.methods {
        let ms = |j: usize| {
            let v: Vec<f64> = m.ks.iter().map(|k| k[j]).collect();
            let mean = v.iter().sum::<f64>() / v.len() as f64;
            let sd = if v.len() > 1 {
                (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
            } else {
                0.0
            };
            format!("{mean:.4} ± {sd:.4}")
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | ({:.4}, {:.4}) | ({:.4}, {:.4}) | ({:.4}, {:.4}) | {:.3} | {:.1} | \
             {} ({:.2} %) |",
            m.method.label(),
            ms(0),
            ms(1),
            m.ks_pooled[0],
            m.ks_pooled[1],
            m.mean[0],
            m.mean[1],
            m.sd[0],
            m.sd[1],
            m.stats.acceptance_rate(),
            m.stats.mean_points(),
            m.stats.skipped,
            100.0 * m.stats.skipped as f64 / m.stats.iterations.max(1) as f64
        );
    }
    let _ = writeln!(
        out,
        "\nData used per decision (counts over all chains' kept iterations; the Barker test's \
         fixed m = {}):\n",
        s.batch
    );
    let buckets: Vec<String> = (0..7)
        .map(|b| {
            [
                s.batch,
                2 * s.batch,
                3 * s.batch,
                4 * s.batch,
                6 * s.batch,
                21 * s.batch,
                s.data,
            ]
            .get(b)
            .map(|&p| bucket_label(p, s.batch, s.data).1)
            .unwrap_or_default()
        })
        .collect();
    let _ = writeln!(out, "| test | {} |", buckets.join(" | "));
    let _ = writeln!(out, "|---|{}", "---|".repeat(buckets.len()));
    for m in &report.methods {
        let mut counts = [0u64; 7];
        for (&points, &c) in &m.stats.points_histogram {
            counts[bucket_label(points, s.batch, s.data).0] += c;
        }
        let cells: Vec<String> = counts.iter().map(|c| c.to_string()).collect();
        let _ = writeln!(out, "| {} | {} |", m.method.label(), cells.join(" | "));
    }
    if !report.sweep.is_empty() {
        let _ = writeln!(
            out,
            "\nSkipped iterations of {} per chain (burn-in included), as m grows:\n",
            s.iterations + s.burn_in
        );
        let _ = writeln!(out, "| test | m | skipped per chain | mean |");
        let _ = writeln!(out, "|---|---|---|---|");
        for r in &report.sweep {
            let mean = r.skipped.iter().sum::<u64>() as f64 / r.skipped.len() as f64;
            let _ = writeln!(
                out,
                "| {} | {} | {:?} | {:.1} |",
                r.method.label(),
                r.batch,
                r.skipped,
                mean
            );
        }
    }
    out
}
