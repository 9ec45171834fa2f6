//! `sgmcmc bench --matrix`: iterations/s of every sampler with every gradient estimator, one
//! chain on one thread, on the synthetic logistic data at batch 1 % of N (f64 storage).
//!
//! Cost model: an estimate reads n random rows of d features, O(n·d) (2n for control variates
//! and SVRG, plus SVRG's full pass of N rows every r estimates), while a sampler's own update is
//! O(d) per estimate. At n = 10,000 and d = 10 the estimator dominates, so every sampler should
//! cost about what SGLD costs per estimate. The bare estimator is timed too (at the MAP, outside
//! any sampler), so the sampler's own per-iteration cost is iteration time − L·estimate time;
//! that difference of two noisy times resolves only a few per cent of an estimate, so each
//! sampler is also timed alone, on a stub score −θ (a standard normal target, O(d)).
//!
//! Every timed unit (each sampler × estimator chain, each bare estimator) is calibrated once and
//! then timed in rounds: one block of each unit per round, `repeats` rounds, the median block
//! rate reported. Interleaving spreads the machine's slow drifts over all units alike.

use super::{BenchError, Result};
use super::{block_rate, calls_per_block, median, timed_steps};
use serde::Serialize;
use sgmcmc::data::synthetic;
use sgmcmc::estimator::BatchTerms;
use sgmcmc::estimator::{BatchSize, GradientEstimator, Svrg};
use sgmcmc::model::{Bernoulli, CovarianceShape, Glm, Model, NormalPrior, TermMoments};
use sgmcmc::optim::find_map;
use sgmcmc::optim::lbfgs::LbfgsOptions;
use sgmcmc::rng::{ChainRng, stream};
use sgmcmc::runner::Budget;
use sgmcmc::sampler::Sampler;
use sgmcmc::settings::{EstimatorKind, EstimatorSettings, SamplerSettings};
use std::time::Duration;

/// The samplers measured, as typed settings; adding a sampler is one line. The first is the
/// reference that ratios are taken against. Step sizes are small enough that every chain stays
/// finite on this posterior (largest Hessian eigenvalue ≈ 10⁵) under minibatch noise; a
/// sampler's cost does not depend on them.
fn all_samplers() -> Vec<(&'static str, SamplerSettings)> {
    let mut ccadl_diagonal = SamplerSettings::ccadl(1e-4, 1.0);
    if let SamplerSettings::Ccadl { covariance, .. } = &mut ccadl_diagonal {
        *covariance = Some(CovarianceShape::Diagonal);
    }
    vec![
        ("SGLD", SamplerSettings::sgld(1e-7)),
        ("pSGLD", SamplerSettings::psgld(1e-7)),
        ("SGHMC", SamplerSettings::sghmc(1e-7, 5)),
        ("SGNHT", SamplerSettings::sgnht(1e-7)),
        ("BAOAB", SamplerSettings::baoab(1e-4, 1.0)),
        ("BADODAB", SamplerSettings::badodab(1e-4)),
        ("CCAdL", SamplerSettings::ccadl(1e-4, 1.0)),
        ("CCAdL-diag", ccadl_diagonal),
    ]
}

/// The estimators measured (batch 1 % of N; control variates centred at the MAP; SVRG with the
/// config's default update rate r = ⌈N/n⌉).
const ESTIMATORS: &[(&str, EstimatorKind)] = &[
    ("minibatch", EstimatorKind::Minibatch),
    ("control variates", EstimatorKind::ControlVariates),
    ("SVRG", EstimatorKind::Svrg),
];

/// Batch size as a fraction of N.
const BATCH_FRACTION: f64 = 0.01;

/// Seed of the synthetic data (that of the plain bench and the demo).
const DATA_SEED: u64 = 20_211_118;

/// The score of N(0, I), −θ: an O(d) stand-in estimator, so that a chain on it times the
/// sampler's own update.
struct StandardNormalScore;

impl GradientEstimator for StandardNormalScore {
    fn estimate(&mut self, theta: &[f64], out: &mut [f64], _rng: &mut ChainRng) {
        for (o, t) in out.iter_mut().zip(theta) {
            *o = -t;
        }
    }

    fn cost_per_estimate(&self) -> usize {
        0
    }

    /// Exact, so CCAdL's covariance update (O(n·D²), part of its chain rows) is not in its
    /// "alone" time.
    fn estimate_with_terms(
        &mut self,
        theta: &[f64],
        out: &mut [f64],
        _moments: &mut TermMoments,
        rng: &mut ChainRng,
    ) -> BatchTerms {
        self.estimate(theta, out, rng);
        BatchTerms::EXACT
    }
}

/// The sampler settings of [`all_samplers`], validated: those `only` names (all if empty),
/// always with the reference first.
fn sampler_configs(only: &[String]) -> Result<Vec<(&'static str, SamplerSettings)>> {
    let samplers = all_samplers();
    for name in only {
        if !samplers.iter().any(|(label, _)| label == name) {
            let known: Vec<&str> = samplers.iter().map(|s| s.0).collect();
            return Err(BenchError::Setting(format!(
                "bench --matrix: unknown sampler `{name}` (known: {})",
                known.join(", ")
            )));
        }
    }
    samplers
        .into_iter()
        .enumerate()
        .filter(|(k, (label, _))| *k == 0 || only.is_empty() || only.iter().any(|o| o == label))
        .map(|(_, (label, settings))| {
            settings
                .build()
                .map_err(|e| BenchError::step(format!("bench sampler {label}"), e))?;
            Ok((label, settings))
        })
        .collect()
}

/// What one timed unit runs.
enum Work<'m> {
    /// A chain, stepped by the runner's loop ([`timed_steps`]) from `position`.
    Chain {
        sampler: Box<dyn Sampler>,
        estimator: Box<dyn GradientEstimator + 'm>,
        position: Vec<f64>,
    },
    /// The estimator alone at a fixed θ: one `estimate` per call.
    Bare {
        estimator: Box<dyn GradientEstimator + 'm>,
        theta: Vec<f64>,
        out: Vec<f64>,
    },
}

/// A timed unit with its own random stream, block length and block rates.
struct Unit<'m> {
    label: String,
    work: Work<'m>,
    rng: ChainRng,
    calls: usize,
    rates: Vec<f64>,
}

impl Unit<'_> {
    /// Steps a chain unit under `budget`, continuing where it last ended; returns the
    /// iterations and their seconds.
    fn run_chain(&mut self, budget: Budget) -> Result<(usize, f64)> {
        let Work::Chain {
            sampler,
            estimator,
            position,
        } = &mut self.work
        else {
            unreachable!("run_chain is called on chains only")
        };
        timed_steps(
            sampler.as_mut(),
            estimator.as_mut(),
            &mut self.rng,
            position,
            budget,
        )
        .map_err(|e| BenchError::step(format!("bench --matrix: {}", self.label), e))
    }

    /// One estimate of a bare unit.
    fn estimate(&mut self) {
        if let Work::Bare {
            estimator,
            theta,
            out,
        } = &mut self.work
        {
            estimator.estimate(theta, out, &mut self.rng);
        }
    }

    /// Fails loudly if the bare estimate is no longer finite.
    fn check_finite(&self) -> Result<()> {
        let Work::Bare { out, .. } = &self.work else {
            return Ok(());
        };
        if out.iter().all(|v| v.is_finite()) {
            Ok(())
        } else {
            Err(BenchError::Setting(format!(
                "bench --matrix: {}: the estimate is not finite after a timed block",
                self.label
            )))
        }
    }

    fn calibrate(&mut self, seconds: f64) -> Result<()> {
        if matches!(self.work, Work::Chain { .. }) {
            let warm_up = Budget::WallClock(Duration::from_secs_f64(0.2 * seconds));
            let (calls, elapsed) = self.run_chain(warm_up)?;
            self.calls = ((calls as f64 / elapsed) * seconds).max(1.0) as usize;
            Ok(())
        } else {
            self.calls = calls_per_block(seconds, || self.estimate());
            self.check_finite()
        }
    }

    fn time_block(&mut self) -> Result<()> {
        let calls = self.calls;
        if matches!(self.work, Work::Chain { .. }) {
            let (n, t) = self.run_chain(Budget::Iterations(calls))?;
            self.rates.push(n as f64 / t);
            Ok(())
        } else {
            let r = block_rate(calls, || self.estimate());
            self.rates.push(r);
            self.check_finite()
        }
    }

    fn rate(&self) -> f64 {
        median(self.rates.clone())
    }
}

/// One estimator timed alone.
#[derive(Serialize)]
struct EstimatorRow {
    estimator: &'static str,
    /// Per-datum gradients per estimate (`cost_per_estimate`; SVRG's full passes not included).
    row_gradients_per_estimate: usize,
    estimates_per_second: f64,
    microseconds_per_estimate: f64,
    /// Every timed block's rate (estimates/s), in round order.
    block_rates: Vec<f64>,
}

/// One sampler on the O(d) stub score: its own cost per iteration.
#[derive(Serialize)]
struct AloneRow {
    sampler: &'static str,
    nanoseconds_per_iteration: f64,
    block_rates: Vec<f64>,
}

/// One sampler × estimator chain.
#[derive(Serialize)]
struct CellRow {
    sampler: &'static str,
    estimator: &'static str,
    config: SamplerSettings,
    estimates_per_step: usize,
    iterations_per_second: f64,
    /// Every timed block's rate (iterations/s), in round order.
    block_rates: Vec<f64>,
    estimates_per_second: f64,
    microseconds_per_estimate: f64,
    /// Time per estimate over SGLD's with the same estimator.
    per_estimate_vs_reference: f64,
    /// Time per iteration − estimates per step × the bare estimator's time per estimate.
    overhead_microseconds_per_iteration: f64,
    /// The sampler alone (on the stub score), as a fraction of this chain's time per iteration.
    alone_fraction_of_iteration: f64,
}

/// The whole measurement, as `--json` writes it.
#[derive(Serialize)]
struct MatrixReport {
    command: String,
    rows: usize,
    dim: usize,
    batch: usize,
    svrg_update_rate: usize,
    storage: &'static str,
    threads: usize,
    seconds_per_block: f64,
    repeats: usize,
    reference_sampler: &'static str,
    samplers: Vec<&'static str>,
    estimators: Vec<&'static str>,
    bare_estimators: Vec<EstimatorRow>,
    samplers_alone: Vec<AloneRow>,
    cells: Vec<CellRow>,
    worst_per_estimate_vs_reference: f64,
}

/// `sgmcmc bench --matrix`.
pub fn matrix(args: &super::BenchArgs) -> Result<()> {
    let samplers = sampler_configs(&args.samplers)?;
    let (data, _) = synthetic::logistic_regression(args.rows, args.dim, DATA_SEED);
    let model = Glm::new(data, Bernoulli, NormalPrior::new(10.0)?, false)?;
    let batch = BatchSize::Fraction(BATCH_FRACTION).resolve(model.num_data())?;
    let update_rate = Svrg::new(&model, BatchSize::Count(batch), None)?.update_rate();
    // The control-variate centre, shared by every chain (found with all threads).
    let map = find_map(&model, &vec![0.0; model.dim()], &LbfgsOptions::default())?.theta;
    println!(
        "sgmcmc bench --matrix: one chain on one thread, synthetic logistic regression N = {}, d = {}, \
         f64 storage, batch n = {batch} (1 % of N); control variates centred at the MAP; SVRG \
         update rate r = {update_rate} (default ⌈N/n⌉); median of {} interleaved blocks of {:.2} s",
        args.rows, args.dim, args.repeats, args.seconds
    );
    // One thread: SVRG's full passes would otherwise run on every core.
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;
    let report = pool.install(|| measure(args, &model, &map, &samplers, batch, update_rate))?;
    print_report(&report);
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report).expect("report serialises");
        std::fs::write(path, text + "\n")
            .map_err(|e| BenchError::step(format!("cannot write {}", path.display()), e))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

fn measure(
    args: &super::BenchArgs,
    model: &dyn Model,
    map: &[f64],
    samplers: &[(&'static str, SamplerSettings)],
    batch: usize,
    update_rate: usize,
) -> Result<MatrixReport> {
    let gradient = |kind| EstimatorSettings {
        estimator: kind,
        batch_size: BatchSize::Fraction(BATCH_FRACTION),
        update_rate: None,
        ..EstimatorSettings::default()
    };
    let mut units = Vec::new();
    let mut seed_stream = 0;
    let mut next_rng = || {
        seed_stream += 1;
        stream(7, seed_stream)
    };
    // Bare estimators first, then the samplers alone, then the chains, sampler-major.
    for &(label, kind) in ESTIMATORS {
        let mut estimator = gradient(kind).build(model, Some(map))?;
        estimator.restart(map);
        units.push(Unit {
            label: format!("bare {label}"),
            work: Work::Bare {
                estimator,
                theta: map.to_vec(),
                out: vec![0.0; map.len()],
            },
            rng: next_rng(),
            calls: 0,
            rates: Vec::new(),
        });
    }
    for (s_label, config) in samplers {
        let sampler = config.build()?;
        let rng = next_rng();
        let estimator: Box<dyn GradientEstimator> = Box::new(StandardNormalScore);
        units.push(Unit {
            label: format!("{s_label} alone"),
            work: Work::Chain {
                sampler,
                estimator,
                position: map.to_vec(),
            },
            rng,
            calls: 0,
            rates: Vec::new(),
        });
    }
    for (s_label, config) in samplers {
        for &(e_label, kind) in ESTIMATORS {
            let estimator = gradient(kind).build(model, Some(map))?;
            let sampler = config.build()?;
            let rng = next_rng();
            // The runner's loop restarts the estimator, then the sampler, at the MAP.
            units.push(Unit {
                label: format!("{s_label} x {e_label}"),
                work: Work::Chain {
                    sampler,
                    estimator,
                    position: map.to_vec(),
                },
                rng,
                calls: 0,
                rates: Vec::new(),
            });
        }
    }
    for unit in &mut units {
        unit.calibrate(args.seconds)?;
    }
    for _ in 0..args.repeats {
        for unit in &mut units {
            unit.time_block()?;
        }
    }

    let (bare_units, rest) = units.split_at(ESTIMATORS.len());
    let (alone_units, chain_units) = rest.split_at(samplers.len());
    let bare_rates: Vec<f64> = bare_units.iter().map(Unit::rate).collect();
    let bare_estimators = ESTIMATORS
        .iter()
        .zip(bare_units)
        .zip(&bare_rates)
        .map(|((&(label, _), unit), &r)| {
            let Work::Bare { estimator, .. } = &unit.work else {
                unreachable!("bare units come first")
            };
            EstimatorRow {
                estimator: label,
                row_gradients_per_estimate: estimator.cost_per_estimate(),
                estimates_per_second: r,
                microseconds_per_estimate: 1e6 / r,
                block_rates: unit.rates.clone(),
            }
        })
        .collect();
    let samplers_alone: Vec<AloneRow> = samplers
        .iter()
        .zip(alone_units)
        .map(|((label, _), unit)| AloneRow {
            sampler: label,
            nanoseconds_per_iteration: 1e9 / unit.rate(),
            block_rates: unit.rates.clone(),
        })
        .collect();
    let mut cells: Vec<CellRow> = Vec::new();
    let rows = samplers
        .iter()
        .zip(&samplers_alone)
        .zip(chain_units.chunks(ESTIMATORS.len()));
    for (((s_label, config), alone), row_units) in rows {
        for (e, unit) in row_units.iter().enumerate() {
            let Work::Chain { sampler, .. } = &unit.work else {
                unreachable!("chain units come last")
            };
            let l = sampler.estimates_per_step();
            let it_s = unit.rate();
            let per_estimate = 1.0 / (it_s * l as f64);
            // The reference is the first sampler, whose cells come first.
            let reference = cells
                .get(e)
                .map_or(per_estimate, |c: &CellRow| 1.0 / c.estimates_per_second);
            cells.push(CellRow {
                sampler: s_label,
                estimator: ESTIMATORS[e].0,
                config: config.clone(),
                estimates_per_step: l,
                iterations_per_second: it_s,
                block_rates: unit.rates.clone(),
                estimates_per_second: it_s * l as f64,
                microseconds_per_estimate: 1e6 * per_estimate,
                per_estimate_vs_reference: per_estimate / reference,
                overhead_microseconds_per_iteration: 1e6 * (1.0 / it_s - l as f64 / bare_rates[e]),
                alone_fraction_of_iteration: alone.nanoseconds_per_iteration * 1e-9 * it_s,
            });
        }
    }
    let worst = cells
        .iter()
        .map(|c| c.per_estimate_vs_reference)
        .fold(f64::NEG_INFINITY, f64::max);
    Ok(MatrixReport {
        command: std::env::args().collect::<Vec<_>>().join(" "),
        rows: args.rows,
        dim: args.dim,
        batch,
        svrg_update_rate: update_rate,
        storage: "f64",
        threads: 1,
        seconds_per_block: args.seconds,
        repeats: args.repeats,
        reference_sampler: samplers[0].0,
        samplers: samplers.iter().map(|s| s.0).collect(),
        estimators: ESTIMATORS.iter().map(|e| e.0).collect(),
        bare_estimators,
        samplers_alone,
        cells,
        worst_per_estimate_vs_reference: worst,
    })
}

fn print_report(r: &MatrixReport) {
    println!(
        "\n{:<17} {:>17} {:>13} {:>12}",
        "bare estimator", "rows per estimate", "estimates/s", "µs/estimate"
    );
    for e in &r.bare_estimators {
        println!(
            "{:<17} {:>17} {:>13.0} {:>12.2}",
            e.estimator,
            e.row_gradients_per_estimate,
            e.estimates_per_second,
            e.microseconds_per_estimate
        );
    }
    println!("\n{:<8} {:>29}", "sampler", "alone on the O(d) stub, ns/it");
    for a in &r.samplers_alone {
        println!("{:<8} {:>29.0}", a.sampler, a.nanoseconds_per_iteration);
    }
    println!(
        "\n{:<8} {:<17} {:>2} {:>10} {:>12} {:>12} {:>13} {:>21}",
        "sampler",
        "estimator",
        "L",
        "it/s",
        "estimates/s",
        "µs/estimate",
        format!("vs {} /est", r.reference_sampler),
        "sampler overhead µs/it"
    );
    for c in &r.cells {
        println!(
            "{:<8} {:<17} {:>2} {:>10.0} {:>12.0} {:>12.2} {:>12.2}x {:>21.2}",
            c.sampler,
            c.estimator,
            c.estimates_per_step,
            c.iterations_per_second,
            c.estimates_per_second,
            c.microseconds_per_estimate,
            c.per_estimate_vs_reference,
            c.overhead_microseconds_per_iteration
        );
    }
    println!(
        "\nworst time per estimate relative to {} with the same estimator: {:.2}x",
        r.reference_sampler, r.worst_per_estimate_vs_reference
    );
}
