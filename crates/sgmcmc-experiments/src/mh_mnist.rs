//! The minibatch MH paper's MNIST experiment (paper 001 §5.2 and App. C; reference §6.8
//! "Logistic regression, MNIST 1 vs 7").
//!
//! Data: the MNIST training 1s and 7s (13,007 images; y = 1 for the digit 1, 0 for 7), pixels
//! in [0, 1]; the test set is a seeded random 1,000 of the 2,163 test 1s and 7s. Model: logistic
//! regression p(y | x, θ) = σ(θᵀx) with θ ∈ R⁷⁸⁴ (no intercept) and a flat prior; θ₀ = 1.
//! Proposal: the random walk θ' = θ + sd·ξ (App. C: variance 0.01, sd 0.1), so ψ = 0.
//!
//! One chain per method, the same number of iterations for each, all at the likelihood
//! temperature T (target p₀(θ)·Πᵢ p(yᵢ | xᵢ, θ)^{1/T}, reference §1.3):
//! - the minibatch Barker test (§6.5: batch increment m = 50, T = 3000, grow policy);
//! - Austerity (§6.7: increment m = 50, ε = 0.02; the same T by default, so that both test the
//!   same posterior; the workshop ran it at T = 1);
//! - the exact full-data Barker test (N points per iteration).
//!
//! Every `record_every` iterations the curve records the data points the test has used so far,
//! the test accuracy and mean test log-likelihood at the current θ (not a posterior average:
//! the paper's Figure 4 plots the chain's state), and the acceptance rate so far. A separate
//! table repeats the Barker chain for m ∈ {5, 10, 20, 50, 100, 200} and reads the test accuracy
//! at iterations 700, 1000 and 1500 (the paper's Figure 4, right).
//!
//! Random streams of `seed` (reference §1.5): 0 picks the test subset, 1–3 run the Barker,
//! Austerity and exact chains, 4 + k·repeats + r runs repeat r of the k-th sensitivity batch.
//! Everything runs on the calling thread, one chain after another, so the report (but for its
//! timings) depends on the seed only.

use crate::held_out::HeldOut;
use serde::Serialize;
use sgmcmc::data::idx::mnist_pair;
use sgmcmc::data::{DataError, Dataset, Features, Matrix};
use sgmcmc::io::SinkError;
use sgmcmc::mh::{
    AcceptanceTest, AusterityTest, BarkerTest, CorrectionBank, CorrectionTable, ExactRule,
    ExactTest, FailurePolicy, MhKernel, MhStatistics, Proposal, VarianceEstimate, WorkshopTest,
};
use sgmcmc::model::{Bernoulli, LogisticRegression, Model, ModelError, NormalPrior};
use sgmcmc::rng::{ChainRng, stream};
use sgmcmc::runner::{Budget, ChainKernel, ChainObserver, ChainPlan, drive_kernel};
use sgmcmc::sampler::SamplerError;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// The digit coded y = 1.
pub const POSITIVE_DIGIT: u8 = 1;
/// The digit coded y = 0 (the paper's y = −1).
pub const NEGATIVE_DIGIT: u8 = 7;

/// Random streams per run are `4 + k·repeats + r`; [`sgmcmc::rng::stream`] jumps once per
/// stream number, so the count is kept small.
const MAX_STREAMS: usize = 1000;

/// At most this many chains per method.
pub const MAX_CHAINS: usize = 100;

/// The stream of chain `chain` of the `k`-th method of [`Method::ALL`]: 1 + k for the first
/// chain of the first three (the streams they had before there were several chains, so their
/// draws are unchanged), else streams from [`MAX_STREAMS`] on, beyond the sensitivity table's.
fn chain_stream(k: usize, chain: usize) -> u64 {
    if chain == 0 && k < 3 {
        1 + k as u64
    } else {
        (MAX_STREAMS + chain * Method::ALL.len() + k) as u64
    }
}

/// Errors of the experiment: each names the file or the setting at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MhMnistError {
    /// Loading the MNIST files failed (missing file, corrupt IDX, ...).
    #[error(transparent)]
    Data(#[from] DataError),
    /// Building the logistic-regression model failed.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// A test or proposal setting was rejected.
    #[error(transparent)]
    Sampler(#[from] SamplerError),
    /// A split lacks one of the two digits, or has too few of them for the test set.
    #[error("{source_name}: {message}")]
    Digits {
        /// The split (directory and file stem).
        source_name: String,
        /// What is missing.
        message: String,
    },
    /// A setting outside its range.
    #[error("invalid setting: {0}")]
    Setting(String),
    /// Writing an output file failed.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Settings (defaults: the workshop's, reference §6.8).
#[derive(Debug, Clone, Serialize)]
pub struct MhMnistSettings {
    /// Directory with `train-*` and `t10k-*` IDX files (gzipped or not).
    pub data_dir: PathBuf,
    /// Iterations of every method's chain (3000).
    pub iterations: usize,
    /// Master seed (1).
    pub seed: u64,
    /// Random-walk standard deviation per coordinate (0.1: App. C's variance 0.01).
    pub proposal_sd: f64,
    /// Batch increment m of the Barker and Austerity tests (50).
    pub batch: usize,
    /// Likelihood temperature T of the Barker and exact tests (3000).
    pub temperature: f64,
    /// Austerity's tolerance ε (0.02).
    pub austerity_tolerance: f64,
    /// Austerity's temperature; `None`: the same T as the others (the workshop: 1).
    pub austerity_temperature: Option<f64>,
    /// Record the curves every this many iterations (50).
    pub record_every: usize,
    /// Test images drawn from the test 1s and 7s (1000).
    pub test_size: usize,
    /// Batch increments of the sensitivity table ({5, 10, 20, 50, 100, 200}).
    pub sensitivity_batches: Vec<usize>,
    /// Iterations at which the sensitivity table reads the test accuracy ({700, 1000, 1500}).
    pub sensitivity_checkpoints: Vec<usize>,
    /// Independent Barker chains per sensitivity batch (5; 0 skips the table).
    pub sensitivity_repeats: usize,
    /// Independent chains per method (1).
    pub chains: usize,
    /// K of the workshop's Algorithm 1: minibatches of m points whose Δ' give the standard
    /// deviation s (10; the workshop: "around 5–10").
    pub workshop_minibatches: usize,
}

impl MhMnistSettings {
    /// The workshop's settings on the MNIST files in `data_dir`.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            iterations: 3000,
            seed: 1,
            proposal_sd: 0.1,
            batch: 50,
            temperature: 3000.0,
            austerity_tolerance: 0.02,
            austerity_temperature: None,
            record_every: 50,
            test_size: 1000,
            sensitivity_batches: vec![5, 10, 20, 50, 100, 200],
            sensitivity_checkpoints: vec![700, 1000, 1500],
            sensitivity_repeats: 5,
            chains: 1,
            workshop_minibatches: 10,
        }
    }

    /// Austerity's likelihood temperature.
    pub fn austerity_t(&self) -> f64 {
        self.austerity_temperature.unwrap_or(self.temperature)
    }

    /// An error naming the first setting out of range.
    pub fn validate(&self) -> Result<(), MhMnistError> {
        let bad = |s: String| Err(MhMnistError::Setting(s));
        let positive = |name: &str, x: f64| {
            if x.is_finite() && x > 0.0 {
                Ok(())
            } else {
                bad(format!("{name} must be finite and > 0, got {x}"))
            }
        };
        if self.iterations == 0 {
            return bad("--iterations must be at least 1".into());
        }
        if !(1..=MAX_CHAINS).contains(&self.chains) {
            return bad(format!(
                "--chains must be in 1..={MAX_CHAINS}, got {}",
                self.chains
            ));
        }
        if self.workshop_minibatches < 2 {
            return bad(format!(
                "--workshop-minibatches (K) must be at least 2 to estimate a standard deviation, got {}",
                self.workshop_minibatches
            ));
        }
        if self.record_every == 0 {
            return bad("--record-every must be at least 1".into());
        }
        if self.test_size == 0 {
            return bad("--test-size must be at least 1".into());
        }
        positive("--proposal-sd", self.proposal_sd)?;
        positive("the temperature T (--temperature)", self.temperature)?;
        positive(
            "Austerity's temperature (--austerity-temperature)",
            self.austerity_t(),
        )?;
        if !(self.austerity_tolerance > 0.0 && self.austerity_tolerance < 1.0) {
            return bad(format!(
                "--austerity-tolerance must be in (0, 1), got {}",
                self.austerity_tolerance
            ));
        }
        if let Some(&m) = std::iter::once(&self.batch)
            .chain(&self.sensitivity_batches)
            .find(|&&m| m < 2)
        {
            return bad(format!(
                "batch increments must be at least 2 (a variance needs two points), got {m}"
            ));
        }
        if self.sensitivity_repeats > 0 && self.sensitivity_checkpoints.contains(&0) {
            return bad("--sensitivity-checkpoints must be at least 1".into());
        }
        if 4 + self.sensitivity_batches.len() * self.sensitivity_repeats > MAX_STREAMS {
            return bad(format!(
                "{} sensitivity batches x {} repeats need more than {MAX_STREAMS} random streams",
                self.sensitivity_batches.len(),
                self.sensitivity_repeats
            ));
        }
        Ok(())
    }
}

/// The accept/reject tests compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// The minibatch Barker test with X_corr (§6.5).
    Barker,
    /// Austerity's sequential t-test (§6.7).
    Austerity,
    /// The full-data Barker test.
    Exact,
    /// The workshop's Algorithm 1 (§6.6): K minibatches of m give s, skip when s ≥ 1.2,
    /// else a fresh minibatch's Δ' and X_c from the bank curve nearest s; (K + 1)·m points
    /// per test.
    Workshop,
}

impl Method {
    /// The four, in report order.
    pub const ALL: [Method; 4] = [
        Method::Barker,
        Method::Austerity,
        Method::Exact,
        Method::Workshop,
    ];

    /// Display name.
    pub fn label(self) -> &'static str {
        match self {
            Method::Barker => "minibatch Barker",
            Method::Austerity => "Austerity",
            Method::Exact => "exact (full data)",
            Method::Workshop => "workshop Algorithm 1",
        }
    }
}

/// One record of a chain.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CurvePoint {
    /// Iterations done (0: θ₀).
    pub iteration: usize,
    /// Data points (likelihood ratios) the tests used in iterations 1..=iteration.
    pub points: u64,
    /// Fraction of test images whose class has p(y | x, θ) > 1/2 at the current θ.
    pub test_accuracy: f64,
    /// Mean of log p(y | x, θ) over the test images at the current θ.
    pub test_log_lik: f64,
    /// Accepted proposals / iterations so far (0 at iteration 0).
    pub acceptance_rate: f64,
}

/// One method's chain.
#[derive(Debug, Clone, Serialize)]
pub struct MethodRun {
    /// The test.
    pub method: Method,
    /// Which of the method's chains (0, 1, …).
    pub chain: usize,
    /// Its likelihood temperature.
    pub temperature: f64,
    /// Its batch increment m (None for the exact test).
    pub batch: Option<usize>,
    /// The records, at iterations 0, record_every, 2·record_every, … and the last.
    pub curve: Vec<CurvePoint>,
    /// Counts of the chain (points per test in `points_histogram`).
    pub statistics: MhStatistics,
    /// Wall-clock seconds of the chain (evaluations included).
    pub seconds: f64,
}

impl MethodRun {
    /// The last record.
    pub fn last(&self) -> &CurvePoint {
        self.curve
            .last()
            .expect("a curve has at least the record at θ₀")
    }
}

/// The Barker test at one batch increment m over the repeats.
#[derive(Debug, Clone, Serialize)]
pub struct SensitivityRow {
    /// m.
    pub batch: usize,
    /// Test accuracy per repeat (outer) and checkpoint (inner).
    pub accuracy_runs: Vec<Vec<f64>>,
    /// Mean over the repeats, per checkpoint.
    pub accuracy_mean: Vec<f64>,
    /// Sample standard deviation over the repeats, per checkpoint (0 with one repeat).
    pub accuracy_sd: Vec<f64>,
    /// Mean test log-likelihood over the repeats, per checkpoint.
    pub log_lik_mean: Vec<f64>,
    /// Data points per test, over every test of every repeat.
    pub mean_points: f64,
    /// Fraction of tests whose batch grew beyond m.
    pub grown_fraction: f64,
    /// Acceptance rate over every repeat.
    pub acceptance_rate: f64,
}

/// The minibatch-size table.
#[derive(Debug, Clone, Serialize)]
pub struct Sensitivity {
    /// Iterations read.
    pub checkpoints: Vec<usize>,
    /// Chains per m.
    pub repeats: usize,
    /// One row per m.
    pub rows: Vec<SensitivityRow>,
}

/// What was loaded.
#[derive(Debug, Clone, Serialize)]
pub struct DataSummary {
    /// Training images of the digit 1.
    pub train_ones: usize,
    /// Training images of the digit 7.
    pub train_sevens: usize,
    /// Test images of the digits 1 and 7.
    pub test_available: usize,
    /// Test images used.
    pub test_size: usize,
    /// Pixels per image (the dimension of θ).
    pub features: usize,
}

/// The experiment's result.
#[derive(Debug, Clone, Serialize)]
pub struct MhMnistReport {
    /// Settings used.
    pub settings: MhMnistSettings,
    /// The data.
    pub data: DataSummary,
    /// One chain per method, in [`Method::ALL`] order.
    pub methods: Vec<MethodRun>,
    /// The minibatch-size table of the Barker test.
    pub sensitivity: Sensitivity,
    /// Wall-clock seconds in all.
    pub seconds: f64,
}

/// The training and test models of the experiment.
pub struct MnistOnesSevens {
    /// Logistic regression on the training 1s and 7s (flat prior, no intercept).
    pub train: LogisticRegression,
    /// The same model on the chosen test images (its likelihood scores the test set).
    pub test: LogisticRegression,
    /// Counts.
    pub summary: DataSummary,
}

/// The rows labelled 1 or 7 (in file order), and the counts of 1s and of 7s.
fn ones_and_sevens(labels: &[u8]) -> (Vec<usize>, usize, usize) {
    let rows: Vec<usize> = (0..labels.len())
        .filter(|&i| labels[i] == POSITIVE_DIGIT || labels[i] == NEGATIVE_DIGIT)
        .collect();
    let ones = rows
        .iter()
        .filter(|&&i| labels[i] == POSITIVE_DIGIT)
        .count();
    let sevens = rows.len() - ones;
    (rows, ones, sevens)
}

/// A data set of the given rows of `images`, y = 1 for the digit 1 and 0 otherwise.
fn subset(
    images: &Matrix<f32>,
    labels: &[u8],
    rows: &[usize],
    source: String,
) -> Result<Dataset, DataError> {
    let cols = images.cols();
    let mut pixels = Vec::with_capacity(rows.len() * cols);
    for &i in rows {
        pixels.extend_from_slice(images.row(i));
    }
    let targets = rows
        .iter()
        .map(|&i| f64::from(u8::from(labels[i] == POSITIVE_DIGIT)))
        .collect();
    Ok(Dataset {
        features: Features::F32(Matrix::from_vec(pixels, rows.len(), cols)?),
        targets: Some(targets),
        feature_names: Vec::new(),
        features_source: source,
        targets_source: None,
    })
}

/// Load the training 1s and 7s and a random `settings.test_size` of the test 1s and 7s
/// (stream 0 of the seed), as flat-prior logistic regressions without intercept.
pub fn load(settings: &MhMnistSettings) -> Result<MnistOnesSevens, MhMnistError> {
    let dir = &settings.data_dir;
    let split_name = |split: &str| format!("{} ({split} split)", dir.display());
    let (train_images, train_labels) = mnist_pair::<f32>(dir, "train")?;
    let (test_images, test_labels) = mnist_pair::<f32>(dir, "t10k")?;
    if test_images.cols() != train_images.cols() {
        return Err(MhMnistError::Digits {
            source_name: split_name("t10k"),
            message: format!(
                "test images have {} pixels but training images have {}",
                test_images.cols(),
                train_images.cols()
            ),
        });
    }
    let (train_rows, train_ones, train_sevens) = ones_and_sevens(&train_labels);
    if train_ones == 0 || train_sevens == 0 {
        return Err(MhMnistError::Digits {
            source_name: split_name("train"),
            message: format!(
                "needs images of both digits 1 and 7, found {train_ones} 1s and {train_sevens} 7s \
                 among {} images",
                train_labels.len()
            ),
        });
    }
    let (test_rows, _, _) = ones_and_sevens(&test_labels);
    if test_rows.len() < settings.test_size {
        return Err(MhMnistError::Digits {
            source_name: split_name("t10k"),
            message: format!(
                "has {} images of the digits 1 and 7, fewer than the {} test images asked for \
                 (--test-size)",
                test_rows.len(),
                settings.test_size
            ),
        });
    }
    let mut rng = stream(settings.seed, 0);
    let mut chosen: Vec<usize> =
        rand::seq::index::sample(&mut rng, test_rows.len(), settings.test_size)
            .into_iter()
            .map(|k| test_rows[k])
            .collect();
    chosen.sort_unstable();
    let summary = DataSummary {
        train_ones,
        train_sevens,
        test_available: test_rows.len(),
        test_size: chosen.len(),
        features: train_images.cols(),
    };
    let flat = NormalPrior::new(f64::INFINITY)?;
    let train = subset(
        &train_images,
        &train_labels,
        &train_rows,
        format!("{} (digits 1 and 7)", split_name("train")),
    )?;
    drop(train_images);
    let test = subset(
        &test_images,
        &test_labels,
        &chosen,
        format!("{} (test subset)", split_name("t10k")),
    )?;
    Ok(MnistOnesSevens {
        train: LogisticRegression::new(train, Bernoulli, flat, false)?,
        test: LogisticRegression::new(test, Bernoulli, flat, false)?,
        summary,
    })
}

/// Test accuracy and mean test log-likelihood at θ.
struct TestSet<'m>(HeldOut<'m>);

impl<'m> TestSet<'m> {
    fn new(model: &'m LogisticRegression) -> Self {
        Self(HeldOut::new(model))
    }

    /// (accuracy, mean log p(y | x, θ)). A prediction is correct when its class has
    /// probability > 1/2, i.e. log p(y | x, θ) > −ln 2.
    fn evaluate(&mut self, theta: &[f64]) -> (f64, f64) {
        let log_lik = self.0.log_liks(theta);
        let n = log_lik.len() as f64;
        let correct = log_lik
            .iter()
            .filter(|&&l| l > -std::f64::consts::LN_2)
            .count();
        (correct as f64 / n, log_lik.iter().sum::<f64>() / n)
    }
}

/// Run one MH chain of `iterations` from θ₀ = 1, recording at the (increasing) iterations of
/// `record_at`; `on_record` sees each record.
fn run_chain(
    train: &LogisticRegression,
    test_set: &mut TestSet<'_>,
    test: AcceptanceTest,
    proposal_sd: f64,
    record_at: &[usize],
    mut rng: ChainRng,
    on_record: &mut dyn FnMut(&CurvePoint),
) -> Result<(Vec<CurvePoint>, MhStatistics), MhMnistError> {
    // The random walk computes no gradient: the kernel has no estimator.
    let mut sampler = MhKernel::new(train, Proposal::RandomWalk { sd: proposal_sd }, test, None)?;
    let theta0 = vec![1.0; train.dim()];
    let plan = ChainPlan {
        budget: Budget::Iterations(record_at.last().copied().unwrap_or(0)),
        burn_in: 0,
        thin: 1,
    };
    let mut curve = CurveRecord {
        test_set,
        record_at,
        next: 0,
        curve: Vec::with_capacity(record_at.len()),
        on_record,
    };
    drive_kernel(
        &mut sampler,
        &mut rng,
        &theta0,
        &plan,
        &mut curve,
        &AtomicBool::new(false),
    )
    .expect("recording in memory cannot fail");
    Ok((curve.curve, sampler.statistics().clone()))
}

/// Records the test metrics at the iterations of `record_at` (0 = the start).
struct CurveRecord<'a, 't> {
    test_set: &'a mut TestSet<'t>,
    record_at: &'a [usize],
    next: usize,
    curve: Vec<CurvePoint>,
    on_record: &'a mut dyn FnMut(&CurvePoint),
}

impl CurveRecord<'_, '_> {
    fn record(&mut self, iteration: usize, sampler: &MhKernel<'_>) {
        while self.record_at.get(self.next) == Some(&iteration) {
            let (test_accuracy, test_log_lik) = self.test_set.evaluate(sampler.position());
            let stats = sampler.statistics();
            let point = CurvePoint {
                iteration,
                points: stats.points,
                test_accuracy,
                test_log_lik,
                acceptance_rate: stats.acceptance_rate(),
            };
            (self.on_record)(&point);
            self.curve.push(point);
            self.next += 1;
        }
    }
}

impl ChainObserver<MhKernel<'_>> for CurveRecord<'_, '_> {
    fn started(&mut self, sampler: &MhKernel<'_>) {
        self.record(0, sampler);
    }

    fn kept(&mut self, _sampler: &MhKernel<'_>) -> Result<(), SinkError> {
        Ok(())
    }

    fn iterated(&mut self, iteration: usize, sampler: &MhKernel<'_>) -> ControlFlow<()> {
        self.record(iteration, sampler);
        ControlFlow::Continue(())
    }
}

/// 0, every, 2·every, …, and `iterations` itself.
pub fn record_iterations(iterations: usize, every: usize) -> Vec<usize> {
    let mut at: Vec<usize> = (0..=iterations).step_by(every.max(1)).collect();
    if at.last() != Some(&iterations) {
        at.push(iterations);
    }
    at
}

/// The test of `method` under `settings` at batch increment `batch`.
fn acceptance_test(
    method: Method,
    settings: &MhMnistSettings,
    batch: usize,
) -> Result<AcceptanceTest, MhMnistError> {
    Ok(match method {
        Method::Barker => AcceptanceTest::Barker(BarkerTest::new(
            CorrectionTable::default_table(),
            batch,
            settings.temperature,
            FailurePolicy::Grow,
            VarianceEstimate::FinitePopulation,
        )?),
        Method::Austerity => AcceptanceTest::Austerity(AusterityTest::new(
            batch,
            settings.austerity_tolerance,
            settings.austerity_t(),
        )?),
        Method::Exact => {
            AcceptanceTest::Exact(ExactTest::new(ExactRule::Barker, settings.temperature)?)
        }
        Method::Workshop => {
            let bank = CorrectionBank::workshop()
                .map_err(|e| MhMnistError::Setting(format!("the X_corr bank: {e}")))?;
            AcceptanceTest::Workshop(WorkshopTest::new(
                bank,
                batch,
                settings.workshop_minibatches,
                1.2,
                settings.temperature,
            )?)
        }
    })
}

/// Mean and sample standard deviation (0 for fewer than two values).
fn mean_sd(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    if xs.len() < 2 {
        return (mean, 0.0);
    }
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

/// Run the experiment; `log` receives progress lines.
pub fn run(
    settings: &MhMnistSettings,
    log: &mut dyn FnMut(&str),
) -> Result<MhMnistReport, MhMnistError> {
    let started = Instant::now();
    settings.validate()?;
    let data = load(settings)?;
    let s = &data.summary;
    log(&format!(
        "data: {} training images ({} 1s, {} 7s), {} of {} test 1s and 7s, {} pixels; {:.1} s",
        s.train_ones + s.train_sevens,
        s.train_ones,
        s.train_sevens,
        s.test_size,
        s.test_available,
        s.features,
        started.elapsed().as_secs_f64()
    ));
    let n_data = data.train.num_data();
    let mut test_set = TestSet::new(&data.test);
    let record_at = record_iterations(settings.iterations, settings.record_every);
    // About ten progress lines per chain.
    let log_every = (record_at.len() / 10).max(1);

    let mut methods = Vec::new();
    let runs = Method::ALL
        .into_iter()
        .enumerate()
        .flat_map(|(k, method)| (0..settings.chains).map(move |chain| (k, method, chain)));
    for (k, method, chain) in runs {
        let label = if settings.chains > 1 {
            format!("{} (chain {})", method.label(), chain + 1)
        } else {
            method.label().to_string()
        };
        let test = acceptance_test(method, settings, settings.batch)?;
        let t = Instant::now();
        let mut records = 0;
        let (curve, statistics) = run_chain(
            &data.train,
            &mut test_set,
            test,
            settings.proposal_sd,
            &record_at,
            stream(settings.seed, chain_stream(k, chain)),
            &mut |p| {
                if records % log_every == 0 || p.iteration == settings.iterations {
                    log(&format!(
                        "{label}: iteration {}/{}, {} points ({:.2} passes), test accuracy {:.4}, \
                         test log-lik {:.4}, acceptance {:.3}",
                        p.iteration,
                        settings.iterations,
                        p.points,
                        p.points as f64 / n_data as f64,
                        p.test_accuracy,
                        p.test_log_lik,
                        p.acceptance_rate
                    ));
                }
                records += 1;
            },
        )?;
        let seconds = t.elapsed().as_secs_f64();
        log(&format!(
            "{label}: {}; {seconds:.1} s",
            statistics.describe()
        ));
        methods.push(MethodRun {
            method,
            chain,
            temperature: match method {
                Method::Austerity => settings.austerity_t(),
                _ => settings.temperature,
            },
            batch: (method != Method::Exact).then_some(settings.batch),
            curve,
            statistics,
            seconds,
        });
    }

    let mut checkpoints = settings.sensitivity_checkpoints.clone();
    checkpoints.sort_unstable();
    checkpoints.dedup();
    let mut rows = Vec::new();
    if settings.sensitivity_repeats > 0 {
        for (k, &batch) in settings.sensitivity_batches.iter().enumerate() {
            let t = Instant::now();
            let mut accuracy_runs = Vec::new();
            let mut log_lik_runs = Vec::new();
            let mut total = MhStatistics::default();
            for r in 0..settings.sensitivity_repeats {
                let test = acceptance_test(Method::Barker, settings, batch)?;
                let rng = stream(
                    settings.seed,
                    (4 + k * settings.sensitivity_repeats + r) as u64,
                );
                let (curve, statistics) = run_chain(
                    &data.train,
                    &mut test_set,
                    test,
                    settings.proposal_sd,
                    &checkpoints,
                    rng,
                    &mut |_| {},
                )?;
                accuracy_runs.push(curve.iter().map(|p| p.test_accuracy).collect::<Vec<_>>());
                log_lik_runs.push(curve.iter().map(|p| p.test_log_lik).collect::<Vec<_>>());
                total.merge(&statistics);
            }
            let column =
                |runs: &[Vec<f64>], j: usize| runs.iter().map(|r| r[j]).collect::<Vec<_>>();
            let stats: Vec<(f64, f64)> = (0..checkpoints.len())
                .map(|j| mean_sd(&column(&accuracy_runs, j)))
                .collect();
            let row = SensitivityRow {
                batch,
                accuracy_mean: stats.iter().map(|s| s.0).collect(),
                accuracy_sd: stats.iter().map(|s| s.1).collect(),
                log_lik_mean: (0..checkpoints.len())
                    .map(|j| mean_sd(&column(&log_lik_runs, j)).0)
                    .collect(),
                accuracy_runs,
                mean_points: total.mean_points(),
                grown_fraction: total.grown as f64 / total.iterations.max(1) as f64,
                acceptance_rate: total.acceptance_rate(),
            };
            log(&format!(
                "sensitivity m = {batch}: test accuracy {} at iterations {:?}; {:.1} points per \
                 test; {:.1} s",
                row.accuracy_mean
                    .iter()
                    .map(|a| format!("{a:.4}"))
                    .collect::<Vec<_>>()
                    .join(" / "),
                checkpoints,
                row.mean_points,
                t.elapsed().as_secs_f64()
            ));
            rows.push(row);
        }
    }

    Ok(MhMnistReport {
        settings: settings.clone(),
        data: data.summary.clone(),
        methods,
        sensitivity: Sensitivity {
            checkpoints,
            repeats: settings.sensitivity_repeats,
            rows,
        },
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// The q-quantile (nearest rank) of the points-per-test histogram.
pub fn points_quantile(stats: &MhStatistics, q: f64) -> usize {
    let total: u64 = stats.points_histogram.values().sum();
    let rank = ((q * total as f64).ceil() as u64).clamp(1, total.max(1));
    let mut seen = 0;
    for (&points, &count) in &stats.points_histogram {
        seen += count;
        if seen >= rank {
            return points;
        }
    }
    0
}

/// The record of `run` with the most data points not above `budget`, if the chain used at
/// least `budget` points in all.
pub fn at_budget(run: &MethodRun, budget: u64) -> Option<&CurvePoint> {
    if run.last().points < budget {
        return None;
    }
    run.curve.iter().rev().find(|p| p.points <= budget)
}

/// The report as Markdown tables: the methods' summary, the curves at about ten iterations,
/// accuracy at equal data budgets, and the minibatch-size table.
pub fn markdown(report: &MhMnistReport) -> String {
    let st = &report.settings;
    let n_train = report.data.train_ones + report.data.train_sevens;
    let n_data = n_train as f64;
    let mut out = String::new();
    out += &format!(
        "N = {} training images ({} 1s, {} 7s), {} test images (of {}), D = {}; random walk \
         sd {}, {} iterations per chain, {} chain(s) per method, K = {} minibatches for the \
         workshop test's s, seed {}.\n\n",
        n_train,
        report.data.train_ones,
        report.data.train_sevens,
        report.data.test_size,
        report.data.test_available,
        report.data.features,
        st.proposal_sd,
        st.iterations,
        st.chains,
        st.workshop_minibatches,
        st.seed
    );

    out += "### Methods (final state)\n\n";
    out += "| method | chain | T | m | test accuracy | test log-lik | acceptance | data points | \
            passes | points per test: mean / median / 90 % / max | tests using all N | s |\n";
    out += "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    for run in &report.methods {
        let last = run.last();
        let stats = &run.statistics;
        let full = stats.points_histogram.get(&n_train).copied().unwrap_or(0);
        out += &format!(
            "| {} | {} | {} | {} | {:.4} | {:.4} | {:.3} | {} | {:.1} | {:.1} / {} / {} / {} | {:.2} % | {:.1} |\n",
            run.method.label(),
            run.chain + 1,
            run.temperature,
            run.batch.map_or("—".into(), |m| m.to_string()),
            last.test_accuracy,
            last.test_log_lik,
            last.acceptance_rate,
            last.points,
            last.points as f64 / n_data,
            stats.mean_points(),
            points_quantile(stats, 0.5),
            points_quantile(stats, 0.9),
            points_quantile(stats, 1.0),
            100.0 * full as f64 / stats.iterations.max(1) as f64,
            run.seconds
        );
    }

    out += "\n### Test accuracy / mean test log-likelihood along the chains\n\n";
    let first_chains: Vec<&MethodRun> = report.methods.iter().filter(|r| r.chain == 0).collect();
    if st.chains > 1 {
        out += "The first chain of each method.\n\n";
    }
    let Some(first) = first_chains.first() else {
        return out;
    };
    let mut header = String::from("| iteration |");
    let mut rule = String::from("|---|");
    for run in &first_chains {
        header += &format!(" {}: points, accuracy, log-lik |", run.method.label());
        rule += "---|";
    }
    out += &format!("{header}\n{rule}\n");
    let n = first.curve.len();
    let step = ((n - 1) / 10).max(1);
    let mut shown: Vec<usize> = (0..n).step_by(step).collect();
    if shown.last() != Some(&(n - 1)) {
        shown.push(n - 1);
    }
    for &i in &shown {
        out += &format!("| {} |", first.curve[i].iteration);
        for run in &first_chains {
            let p = &run.curve[i];
            out += &format!(
                " {}, {:.4}, {:.4} |",
                p.points, p.test_accuracy, p.test_log_lik
            );
        }
        out += "\n";
    }

    out += "\n### At equal data cost (the record with the most points ≤ the budget)\n\n";
    if st.chains > 1 {
        out += &format!(
            "Test accuracy and log-likelihood, mean ± sd over the chains that used at least the \
             budget (of {}; their number in brackets where fewer); — where none did.\n\n",
            st.chains
        );
    } else {
        out += "Test accuracy / log-likelihood (iteration); — where the chain used fewer points \
                in all.\n\n";
    }
    let most = report
        .methods
        .iter()
        .map(|r| r.last().points)
        .max()
        .unwrap_or(0);
    let mut header = String::from("| data points |");
    let mut rule = String::from("|---|");
    for method in Method::ALL {
        header += &format!(" {} |", method.label());
        rule += "---|";
    }
    out += &format!("{header}\n{rule}\n");
    let mut budget: u64 = 10_000;
    while budget <= most {
        for b in [budget, 3 * budget] {
            if b > most {
                break;
            }
            out += &format!("| {b} |");
            for method in Method::ALL {
                let reached: Vec<&CurvePoint> = report
                    .methods
                    .iter()
                    .filter(|r| r.method == method)
                    .filter_map(|r| at_budget(r, b))
                    .collect();
                out += &match reached[..] {
                    [] => " — |".into(),
                    [p] if st.chains == 1 => format!(
                        " {:.4} / {:.4} ({}) |",
                        p.test_accuracy, p.test_log_lik, p.iteration
                    ),
                    _ => {
                        let (acc, acc_sd) =
                            mean_sd(&reached.iter().map(|p| p.test_accuracy).collect::<Vec<_>>());
                        let (ll, ll_sd) =
                            mean_sd(&reached.iter().map(|p| p.test_log_lik).collect::<Vec<_>>());
                        let fewer = if reached.len() < st.chains {
                            format!(" ({})", reached.len())
                        } else {
                            String::new()
                        };
                        format!(" {acc:.4} ± {acc_sd:.4} / {ll:.4} ± {ll_sd:.4}{fewer} |")
                    }
                };
            }
            out += "\n";
        }
        budget *= 10;
    }

    let sens = &report.sensitivity;
    if !sens.rows.is_empty() {
        out += &format!(
            "\n### Minibatch Barker test: batch increment m (T = {}, {} chain(s) per m, mean ± sd)\n\n",
            st.temperature, sens.repeats
        );
        let mut header = String::from("| m |");
        let mut rule = String::from("|---|");
        for c in &sens.checkpoints {
            header += &format!(" accuracy at {c} |");
            rule += "---|";
        }
        if let Some(c) = sens.checkpoints.last() {
            header += &format!(" log-lik at {c} |");
            rule += "---|";
        }
        header += " points per test | tests grown | acceptance |";
        rule += "---|---|---|";
        out += &format!("{header}\n{rule}\n");
        for row in &sens.rows {
            out += &format!("| {} |", row.batch);
            for (m, s) in row.accuracy_mean.iter().zip(&row.accuracy_sd) {
                out += &format!(" {m:.4} ± {s:.4} |");
            }
            if let Some(l) = row.log_lik_mean.last() {
                out += &format!(" {l:.4} |");
            }
            out += &format!(
                " {:.1} | {:.1} % | {:.3} |\n",
                row.mean_points,
                100.0 * row.grown_fraction,
                row.acceptance_rate
            );
        }
    }
    out
}

/// Write `report.json` and `tables.md` into `dir` (created if needed).
pub fn write_outputs(report: &MhMnistReport, dir: &Path) -> Result<(), MhMnistError> {
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| MhMnistError::Write { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let path = dir.join("report.json");
    let json = serde_json::to_string_pretty(report).map_err(|e| io(&path)(e.into()))?;
    std::fs::write(&path, json + "\n").map_err(io(&path))?;
    let path = dir.join("tables.md");
    std::fs::write(&path, markdown(report)).map_err(io(&path))?;
    Ok(())
}
