//! `sgmcmc bench`: SGLD iterations/s, one chain, on the demo's synthetic logistic data, against
//! the memory bound of the same access pattern.
//!
//! Per iteration at batch n and d features, the gradient reads n random rows (d values each,
//! which touch ⌈row bytes / 64⌉ or one more cache lines depending on alignment) from DRAM, or
//! with block minibatches (`--scheme block`) n consecutive rows (n·row bytes, streamed); the
//! labels (1 byte each, N bytes in all) and the index permutation stay in cache. It does
//! n·(2d + 2d) FLOPs for the dot products and the gradient update, plus one exp per row (counted
//! as 20 FLOPs). Two bounds are reported: the sequential-bandwidth bound (measured read
//! bandwidth / DRAM bytes per iteration), which random rows cannot reach, and the gather bound:
//! a loop that only gathers and sums the same rows with the same index stream, timed here.
//!
//! `sgmcmc bench --matrix` (module [`matrix`]) times every sampler with every estimator instead;
//! `sgmcmc bench --ksd` (module [`ksd`]) times the KSD and full-batch scores at thinned draws;
//! `sgmcmc bench --bnn DIR` (module [`bnn`]) times the MNIST network's gradient;
//! `sgmcmc bench --pmf FILE` (module [`pmf`]) PMF's SGLD iterations on MovieLens;
//! `sgmcmc bench --libsvm FILE` (module [`sparse`]) a GLM's gradient per row with sparse and
//! dense rows.

mod bnn;
mod ksd;
mod matrix;
mod pmf;
mod sparse;

use sgmcmc::data::{Dataset, Features, Matrix, synthetic};
use sgmcmc::estimator::{BatchSize, GradientEstimator, Minibatch, MinibatchScheme, Subsampler};
use sgmcmc::io::SinkError;
use sgmcmc::model::{Bernoulli, Glm, Model, NormalPrior};
use sgmcmc::optim::find_map;
use sgmcmc::optim::lbfgs::LbfgsOptions;
use sgmcmc::rng::{ChainRng, stream};
use sgmcmc::runner::{Budget, ChainObserver, ChainPlan, drive_chain};
use sgmcmc::sampler::{Sampler, Sgld, StepSize};
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// Why a benchmark could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// A bench option out of range, or a chain that left the finite reals (the message names
    /// the flag or the unit).
    #[error("{0}")]
    Setting(String),
    /// A step of the bench failed: what it was doing, and the typed error.
    #[error("{context}: {source}")]
    Step {
        /// What the bench was doing.
        context: String,
        /// The error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A model could not be built.
    #[error(transparent)]
    Model(#[from] sgmcmc::model::ModelError),
    /// An estimator could not be built.
    #[error(transparent)]
    Estimator(#[from] sgmcmc::estimator::EstimatorError),
    /// Sampler or estimator settings could not be built.
    #[error(transparent)]
    Settings(#[from] sgmcmc::settings::SettingsError),
    /// A sampler could not be built.
    #[error(transparent)]
    Sampler(#[from] sgmcmc::sampler::SamplerError),
    /// The MAP search failed.
    #[error(transparent)]
    Map(#[from] sgmcmc::optim::MapError),
    /// The chain's observer failed.
    #[error(transparent)]
    Sink(#[from] SinkError),
    /// Data could not be read.
    #[error(transparent)]
    Data(#[from] sgmcmc::data::DataError),
    /// A KSD could not be computed.
    #[error(transparent)]
    Stein(#[from] sgmcmc::stein::SteinError),
    /// A thread pool could not be started.
    #[error("cannot start a thread pool: {0}")]
    Threads(#[from] rayon::ThreadPoolBuildError),
}

impl BenchError {
    /// `source`, with what the bench was doing.
    fn step(context: String, source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        BenchError::Step {
            context,
            source: source.into(),
        }
    }
}

/// The result of a bench step.
pub type Result<T> = std::result::Result<T, BenchError>;

/// Options of `sgmcmc bench` (clap arguments with the feature `cli`).
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct BenchArgs {
    /// Rows N of the synthetic data.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 1_000_000))]
    rows: usize,
    /// Features d.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 10))]
    dim: usize,
    /// Batch sizes to measure (comma-separated).
    #[cfg_attr(feature = "cli", arg(long, value_delimiter = ',', default_values_t = [10_000usize, 1_000]))]
    batches: Vec<usize>,
    /// Feature storage precisions to measure: f64, f32 (comma-separated).
    #[cfg_attr(feature = "cli", arg(long, value_delimiter = ',', default_values_t = [String::from("f64"), String::from("f32")]))]
    precision: Vec<String>,
    /// Minibatch schemes to measure: uniform (random rows), block (contiguous rows from a
    /// random offset, of the rows in a random order) (comma-separated).
    #[cfg_attr(feature = "cli", arg(long, value_delimiter = ',', default_values_t = [String::from("uniform"), String::from("block")]))]
    scheme: Vec<String>,
    /// Instead: every sampler x every estimator (minibatch, control variates at the MAP, SVRG)
    /// at batch 1 % of N, f64 storage, one chain on one thread, with the bare estimator's cost
    /// and each sampler's cost per estimate relative to SGLD.
    #[cfg_attr(feature = "cli", arg(long, conflicts_with_all = ["batches", "precision", "scheme"]))]
    matrix: bool,
    /// With --matrix: only these samplers (labels as printed, comma-separated); SGLD, the
    /// reference, is always measured.
    #[cfg_attr(feature = "cli", arg(long, value_delimiter = ',', requires = "matrix"))]
    samplers: Vec<String>,
    /// Instead: seconds per IMQ KSD (V-statistic) of 1,000 x 10, 5,000 x 10 and 1,000 x 100
    /// draws on all cores, with FLOPs and the faer GEMM peak, and the cost per draw of
    /// full-batch scores on the synthetic logistic data (--rows x --dim).
    #[cfg_attr(feature = "cli", arg(long, conflicts_with_all = ["matrix", "batches", "precision", "scheme", "samplers"]))]
    ksd: bool,
    /// With --ksd: tile rows of the KSD (default: the library's).
    #[cfg_attr(feature = "cli", arg(long, requires = "ksd"))]
    tile: Option<usize>,
    /// With --ksd: draws at which full-batch scores are timed.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 200, requires = "ksd"))]
    score_draws: usize,
    /// Instead: the 784-100-10 network's gradient on the MNIST train split in this directory
    /// (gradients/s, GFLOP/s against the measured faer GEMM peak of the same shapes, SGLD it/s).
    #[cfg_attr(feature = "cli", arg(long, value_name = "DIR", conflicts_with_all = ["matrix", "ksd", "batches", "precision"]))]
    bnn: Option<PathBuf>,
    /// With --bnn: the minibatch size.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 600, requires = "bnn"))]
    bnn_batch: usize,
    /// Instead: Bayesian PMF on this MovieLens ratings file (e.g. u1.base): SGLD iterations/s
    /// and the parts of an iteration.
    #[cfg_attr(feature = "cli", arg(long, value_name = "FILE", conflicts_with_all = ["matrix", "ksd", "batches", "precision", "bnn"]))]
    pmf: Option<PathBuf>,
    /// With --pmf: the minibatch size.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 800, requires = "pmf"))]
    pmf_batch: usize,
    /// Instead: logistic regression on this LIBSVM file (e.g. a9a) with rows stored sparse
    /// (CSR) and dense: ns per row of a full-data gradient and of a uniform minibatch of 1,000,
    /// one thread, beside the bytes per row.
    #[cfg_attr(feature = "cli", arg(long, value_name = "FILE", conflicts_with_all = ["matrix", "ksd", "batches", "precision", "bnn", "pmf"]))]
    libsvm: Option<PathBuf>,
    /// With --matrix or --ksd: also write the table as JSON to this file.
    #[cfg_attr(feature = "cli", arg(long))]
    json: Option<PathBuf>,
    /// Seconds per timed repeat.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 1.0))]
    seconds: f64,
    /// Timed repeats (the median is reported).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 5))]
    repeats: usize,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Warm-up for 0.2·`seconds` (at least one call); returns how many calls of `step` fill a block
/// of `seconds`.
fn calls_per_block(seconds: f64, mut step: impl FnMut()) -> usize {
    let t = Instant::now();
    let mut calls = 0usize;
    while calls == 0 || t.elapsed().as_secs_f64() < 0.2 * seconds {
        step();
        calls += 1;
    }
    ((calls as f64 / t.elapsed().as_secs_f64()) * seconds).max(1.0) as usize
}

/// The rate (calls/s) of one timed block of `calls` calls of `step`.
fn block_rate(calls: usize, mut step: impl FnMut()) -> f64 {
    let t = Instant::now();
    for _ in 0..calls {
        step();
    }
    calls as f64 / t.elapsed().as_secs_f64()
}

/// Steps the chain at `position` through the runner's loop ([`drive_chain`], as `sgmcmc run`
/// steps a chain, here without a sink) until `budget` is spent, and moves `position` to where
/// it ended. Returns the iterations and the seconds from the first step on (the restart of the
/// estimator and the sampler before it is not timed). A chain that leaves the finite reals is
/// an error: it would time NaN arithmetic, not the sampler.
pub(crate) fn timed_steps<S: Sampler + ?Sized>(
    sampler: &mut S,
    estimator: &mut dyn GradientEstimator,
    rng: &mut ChainRng,
    position: &mut [f64],
    budget: Budget,
) -> Result<(usize, f64)> {
    /// Notes when the first step begins; keeps nothing.
    struct StartClock(Option<Instant>);
    impl<S: ?Sized> ChainObserver<S> for StartClock {
        fn started(&mut self, _: &S) {
            self.0 = Some(Instant::now());
        }
        fn kept(&mut self, _: &S) -> std::result::Result<(), SinkError> {
            Ok(())
        }
    }
    let mut clock = StartClock(None);
    let plan = ChainPlan {
        budget,
        burn_in: 0,
        thin: 1,
    };
    let never = AtomicBool::new(false);
    let outcome = drive_chain(sampler, estimator, rng, position, &plan, &mut clock, &never)?;
    let seconds = clock.0.map_or(0.0, |t| t.elapsed().as_secs_f64());
    if let Some(d) = outcome.divergence {
        return Err(BenchError::Setting(format!(
            "the chain's position or score is not finite at timed iteration {} (the bench's step \
             size is too large for this posterior)",
            d.iteration
        )));
    }
    position.copy_from_slice(&outcome.last_finite_state);
    Ok((outcome.iterations, seconds))
}

/// Iterations/s of a sampler chain stepped by the runner's loop ([`timed_steps`]): a warm-up
/// of 0.2·`seconds` sizes blocks of `seconds`; the median rate of `repeats` blocks, each
/// continuing where the last ended.
pub(crate) fn chain_rate<S: Sampler + ?Sized>(
    sampler: &mut S,
    estimator: &mut dyn GradientEstimator,
    rng: &mut ChainRng,
    init: &[f64],
    seconds: f64,
    repeats: usize,
) -> Result<f64> {
    let mut position = init.to_vec();
    let warm_up = Budget::WallClock(Duration::from_secs_f64(0.2 * seconds));
    let (calls, elapsed) = timed_steps(sampler, estimator, rng, &mut position, warm_up)?;
    let per_block = ((calls as f64 / elapsed) * seconds).max(1.0) as usize;
    let mut rates = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        let budget = Budget::Iterations(per_block);
        let (n, t) = timed_steps(sampler, estimator, rng, &mut position, budget)?;
        rates.push(n as f64 / t);
    }
    Ok(median(rates))
}

/// SGLD's iterations/s on `model` (step ε = 1e-5, uniform minibatches of `batch` without
/// replacement) from `theta`, as [`chain_rate`] times it: the real-data benches' sampler.
pub(crate) fn sgld_rate(
    model: &dyn Model,
    batch: usize,
    theta: &[f64],
    seconds: f64,
    repeats: usize,
) -> Result<f64> {
    let mut est = Minibatch::new(model, BatchSize::Count(batch))?;
    let mut sgld = Sgld::new(StepSize::Langevin(1e-5), 1.0)?;
    let mut rng = stream(3, 0);
    let it_s = chain_rate(&mut sgld, &mut est, &mut rng, theta, seconds, repeats)?;
    black_box(est.cost_per_estimate());
    Ok(it_s)
}

/// Run `step` in timed blocks of at least `seconds`; returns the median rate (calls/s).
fn rate(seconds: f64, repeats: usize, mut step: impl FnMut()) -> f64 {
    let per_block = calls_per_block(seconds, &mut step);
    let rates = (0..repeats)
        .map(|_| block_rate(per_block, &mut step))
        .collect();
    median(rates)
}

fn to_f32(data: &Dataset) -> Dataset {
    let Features::F64(m) = &data.features else {
        unreachable!("synthetic data are f64")
    };
    let x: Vec<f32> = m.as_slice().iter().map(|&v| v as f32).collect();
    Dataset {
        features: Features::F32(Matrix::from_vec(x, m.rows(), m.cols()).expect("same shape")),
        targets: data.targets.clone(),
        feature_names: data.feature_names.clone(),
        features_source: data.features_source.clone(),
        targets_source: data.targets_source.clone(),
    }
}

/// Read-only loop over the same rows (index draws included): the memory bound of the access
/// pattern (a gather of random rows, or a stream of blocks).
fn gather_rate(
    features: &Features,
    n_batch: usize,
    scheme: MinibatchScheme,
    seconds: f64,
    repeats: usize,
) -> f64 {
    let mut sub = Subsampler::new(features.rows());
    sub.set_scheme(scheme);
    let mut rng = stream(99, 0);
    let mut acc = 0.0f64;
    let r = match features {
        Features::F64(m) => rate(seconds, repeats, || {
            let b = sub.batch(n_batch, &mut rng);
            acc += sgmcmc::data::gather_sum(m, b);
        }),
        Features::F32(m) => rate(seconds, repeats, || {
            let b = sub.batch(n_batch, &mut rng);
            acc += sgmcmc::data::gather_sum(m, b);
        }),
        // The SGLD bench generates its rows densely (a measured arm here slowed the loops
        // above by 15 % through code layout alone).
        Features::Sparse(_) => unreachable!("the SGLD bench's synthetic rows are dense"),
    };
    black_box(acc);
    r
}

/// Index drawing alone (by rejection or partial Fisher–Yates, or a block's indices), per batch.
fn index_rate(
    rows: usize,
    n_batch: usize,
    scheme: MinibatchScheme,
    seconds: f64,
    repeats: usize,
) -> f64 {
    let mut sub = Subsampler::new(rows);
    sub.set_scheme(scheme);
    let mut rng = stream(98, 0);
    rate(seconds, repeats, || {
        black_box(sub.batch(n_batch, &mut rng));
    })
}

/// A `--scheme` value.
fn parse_scheme(name: &str) -> Result<MinibatchScheme> {
    match name {
        "uniform" => Ok(MinibatchScheme::Uniform),
        "block" => Ok(MinibatchScheme::Block),
        _ => Err(BenchError::Setting(format!(
            "--scheme: unknown scheme {name:?} (use uniform and/or block)"
        ))),
    }
}

/// `sgmcmc bench`.
pub fn bench(args: &BenchArgs) -> Result<()> {
    if args.repeats == 0 || !(args.seconds.is_finite() && args.seconds > 0.0) {
        return Err(BenchError::Setting(
            "--repeats must be at least 1 and --seconds finite and > 0".to_string(),
        ));
    }
    if args.json.is_some() && !(args.matrix || args.ksd) {
        return Err(BenchError::Setting(
            "--json needs --matrix or --ksd".to_string(),
        ));
    }
    if args.matrix {
        return matrix::matrix(args);
    }
    if args.ksd {
        return ksd::ksd(args);
    }
    if let Some(dir) = &args.bnn {
        return bnn::bnn(args, dir);
    }
    if let Some(file) = &args.pmf {
        return pmf::pmf(args, file);
    }
    if let Some(file) = &args.libsvm {
        return sparse::sparse(args, file);
    }
    for p in &args.precision {
        if p != "f64" && p != "f32" {
            return Err(BenchError::Setting(format!(
                "--precision: unknown precision {p:?} (use f64 and/or f32)"
            )));
        }
    }
    let schemes = args
        .scheme
        .iter()
        .map(|s| parse_scheme(s))
        .collect::<Result<Vec<_>>>()?;
    if args.batches.iter().any(|&b| b == 0 || b > args.rows) {
        return Err(BenchError::Setting(format!(
            "--batches: every batch size must be in 1..={}",
            args.rows
        )));
    }
    println!(
        "sgmcmc bench: SGLD, one chain, synthetic logistic regression N = {}, d = {}; median of {} x {:.1} s; {} threads available",
        args.rows,
        args.dim,
        args.repeats,
        args.seconds,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let (data64, _) = synthetic::logistic_regression(args.rows, args.dim, 20_211_118);
    let bandwidth = sequential_bandwidth(&data64.features, args.repeats);
    println!(
        "memory: sequential read of the {:.0} MB feature matrix: {:.2} GB/s (one thread, 8 \
         accumulators); the read-only columns below sum the same rows as the sampler reads \
         (index draws included): random rows (uniform) or blocks of the rows in a random \
         order (block)",
        (args.rows * args.dim * 8) as f64 / 1e6,
        bandwidth / 1e9
    );
    let mut map_theta = None;
    println!(
        "{:<5} {:<7} {:>7} {:>11} {:>7} {:>12} {:>9} {:>11} {:>9} {:>10} {:>8} {:>12}",
        "prec",
        "scheme",
        "batch",
        "SGLD it/s",
        "ns/row",
        "read it/s",
        "of read",
        "seq-bw it/s",
        "of seq-bw",
        "DRAM MB/it",
        "GFLOP/s",
        "index-only/s"
    );
    for p in &args.precision {
        for &scheme in &schemes {
            let data = if p == "f32" {
                to_f32(&data64)
            } else {
                clone_dataset(&data64)
            };
            // Blocks read the rows in a random order, as the run file's pipeline arranges.
            let data = match scheme {
                MinibatchScheme::Block => data.shuffled(1),
                MinibatchScheme::Uniform => data,
            };
            let model = Glm::new(data, Bernoulli, NormalPrior::new(10.0)?, false)?;
            let theta0 = match &map_theta {
                Some(t) => t,
                None => {
                    map_theta = Some(
                        find_map(&model, &vec![0.0; model.dim()], &LbfgsOptions::default())?.theta,
                    );
                    map_theta.as_ref().expect("just set")
                }
            };
            for &n in &args.batches {
                let mut est = Minibatch::new(&model, BatchSize::Count(n))?.with_scheme(scheme);
                let mut sgld = Sgld::new(StepSize::Langevin(1e-8), 1.0)?;
                let mut rng = stream(1, 0);
                let it_s = chain_rate(
                    &mut sgld,
                    &mut est,
                    &mut rng,
                    theta0,
                    args.seconds,
                    args.repeats,
                )?;
                let gather = gather_rate(model.features(), n, scheme, args.seconds, args.repeats);
                let idx = index_rate(args.rows, n, scheme, args.seconds, args.repeats);
                let elem = if p == "f32" { 4 } else { 8 };
                let row_bytes = args.dim * elem;
                // A random row fetches every cache line it touches (on average over its offset
                // i·row_bytes); a block streams exactly n rows. Only these come from DRAM: the
                // u8 label array (N bytes) and the permutation buffer stay in cache.
                let dram_bytes = match scheme {
                    MinibatchScheme::Uniform => {
                        let lines: f64 = (0..64)
                            .map(|i| ((i * row_bytes) % 64 + row_bytes).div_ceil(64) as f64)
                            .sum::<f64>()
                            / 64.0;
                        n as f64 * lines * 64.0
                    }
                    MinibatchScheme::Block => (n * row_bytes) as f64,
                };
                let seq_bound = bandwidth / dram_bytes;
                let flops = n as f64 * (4.0 * args.dim as f64 + 20.0);
                println!(
                    "{:<5} {:<7} {:>7} {:>11.0} {:>7.1} {:>12.0} {:>8.0}% {:>11.0} {:>8.0}% {:>10.3} {:>8.2} {:>12.0}",
                    p,
                    if scheme == MinibatchScheme::Block {
                        "block"
                    } else {
                        "uniform"
                    },
                    n,
                    it_s,
                    1e9 / (it_s * n as f64),
                    gather,
                    100.0 * it_s / gather,
                    seq_bound,
                    100.0 * it_s / seq_bound,
                    dram_bytes / 1e6,
                    flops * it_s / 1e9,
                    idx
                );
                black_box(est.cost_per_estimate());
            }
        }
    }
    Ok(())
}

/// Bytes/s of one thread's sequential pass summing every value of the matrix into 8
/// independent accumulators (so that the adds, not the memory, never set the pace; one
/// accumulator's dependent adds would cap it near 8 bytes per add latency); median of
/// `repeats`.
fn sequential_bandwidth(features: &Features, repeats: usize) -> f64 {
    let Features::F64(m) = features else {
        unreachable!("synthetic data are f64")
    };
    let data = m.as_slice();
    let rates = (0..repeats.max(1))
        .map(|_| {
            let t = Instant::now();
            let mut acc = [0.0f64; 8];
            let chunks = data.chunks_exact(8);
            let rest: f64 = chunks.remainder().iter().sum();
            for c in chunks {
                for (a, v) in acc.iter_mut().zip(c) {
                    *a += v;
                }
            }
            black_box(acc.iter().sum::<f64>() + rest);
            std::mem::size_of_val(data) as f64 / t.elapsed().as_secs_f64()
        })
        .collect();
    median(rates)
}

fn clone_dataset(d: &Dataset) -> Dataset {
    let Features::F64(m) = &d.features else {
        unreachable!("synthetic data are f64")
    };
    Dataset {
        features: Features::F64(
            Matrix::from_vec(m.as_slice().to_vec(), m.rows(), m.cols()).expect("same shape"),
        ),
        targets: d.targets.clone(),
        feature_names: d.feature_names.clone(),
        features_source: d.features_source.clone(),
        targets_source: d.targets_source.clone(),
    }
}
