//! CCAdL paper §4.2 (reference §2.7, "Experiment 4.2"): Bayesian logistic regression on MNIST
//! 7s against 9s, SGHMC, SGNHT and CCAdL at h ∈ {0.2, 0.5, 1}·10⁻⁴ × A ∈ {1, 10}.
//!
//! Data: the 12,214 training and 2,037 test images of the digits 7 (y = 1) and 9 (y = 0),
//! pixels in [0, 1], projected to 100 features by a fixed Gaussian matrix with N(0, 1/100)
//! entries (the paper does not give its projection; reference §2.7). Model:
//! p(y | x, w) = σ(wᵀx) without intercept, prior w ~ N(0, I) (the paper's exp(−wᵀw/2)).
//! Minibatches of n = 500; CCAdL with the full 100 × 100 covariance; every chain starts at
//! w = 0 with p₀ ~ N(0, I).
//!
//! Measured, per run:
//! - the paper's Figure 2, top row: the test log-likelihood (summed over the test images) at the
//!   posterior mean, after each pass through the training data. The posterior mean is the
//!   running average of every θₜ since the start (the paper does not say where its average
//!   starts); the log-likelihood at the current θₜ is recorded beside it;
//! - the paper's Figure 2, bottom row (for the runs at A = `marginal_diffusion`): after the
//!   passes above (the paper starts "when the test log likelihood stabilizes"), the mean and
//!   covariance of `marginal_samples` further draws, against a NUTS reference (the paper uses a
//!   long standard-HMC run). Reported: each coordinate's mean error in reference sds, the ratio
//!   of sds, and the 95 % ellipses of coordinates 2 and 5 (1-based, as the paper's w2, w5).
//!
//! Random streams of `seed` (reference §1.5): 0 draws the projection, 1 + r·K + k runs
//! configuration k (of K) in repeat r; the NUTS reference uses its own seed. Runs go in parallel
//! and each has its own stream, so the report (but for its timings) does not depend on the
//! thread count.

use crate::held_out::HeldOut;
use crate::normal_gamma::{Method, WithSampler};
use crate::plot::{Figure, Panel, PlotError, Series, SeriesStyle, write_svg};
use rayon::prelude::*;
use serde::Serialize;
use sgmcmc::data::idx::mnist_pair;
use sgmcmc::data::{DataError, Dataset, Features, Matrix};
use sgmcmc::estimator::{BatchSize, EstimatorError, Minibatch};
use sgmcmc::io::SinkError;
use sgmcmc::model::{Bernoulli, LogisticRegression, Model, ModelError, NormalPrior};
use sgmcmc::reference::{NutsError, NutsSettings, run_nuts};
use sgmcmc::rng::{ChainRng, stream};
use sgmcmc::runner::{Budget, ChainObserver, ChainPlan, NoProgress, drive_chain};
use sgmcmc::sampler::{Sampler, SamplerError, standard_normal};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// The digit coded y = 1.
pub const POSITIVE_DIGIT: u8 = 7;
/// The digit coded y = 0 (the paper's y = −1).
pub const NEGATIVE_DIGIT: u8 = 9;

/// The coordinates of the paper's 2-D marginals, 0-based (its w2 and w5).
pub const PAIR: [usize; 2] = [1, 4];

/// √χ²₂(0.95): the radius of the 95 % ellipse of a bivariate normal in whitened coordinates.
const ELLIPSE_RADIUS_95: f64 = 2.447_746_830_680_816;

/// Settings of the experiment (defaults: the paper's, with `marginal_samples` a fifth of its
/// 10⁶, and 3 repeats of what it ran once; 600 passes is the length of its longest curve).
#[derive(Debug, Clone, Serialize)]
pub struct CcadlMnistSettings {
    /// Directory of the MNIST IDX files.
    pub data_dir: PathBuf,
    /// Features after the random projection (100).
    pub projection_dim: usize,
    /// Minibatch size n (500).
    pub batch: usize,
    /// Step sizes h.
    pub steps: Vec<f64>,
    /// Diffusions A.
    pub diffusions: Vec<f64>,
    /// Methods.
    pub methods: Vec<Method>,
    /// Passes through the training data of the test-log-likelihood curve.
    pub passes: usize,
    /// The runs at this A continue after the curve to collect the marginal draws.
    pub marginal_diffusion: f64,
    /// Draws collected after the curve for the marginals (the paper: 10⁶).
    pub marginal_samples: usize,
    /// Repeats of every configuration (the paper shows one run).
    pub runs: usize,
    /// Master seed: the projection and every run derive from it.
    pub seed: u64,
    /// The NUTS reference.
    pub reference: NutsSettings,
}

impl CcadlMnistSettings {
    /// The paper's settings on the MNIST files in `data_dir`.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            projection_dim: 100,
            batch: 500,
            steps: vec![0.2e-4, 0.5e-4, 1e-4],
            diffusions: vec![1.0, 10.0],
            methods: Method::PAPER.to_vec(),
            passes: 600,
            marginal_diffusion: 10.0,
            marginal_samples: 200_000,
            runs: 3,
            seed: 2015,
            reference: NutsSettings {
                chains: 4,
                warmup: 1000,
                draws: 2500,
                seed: 2015,
                dense_laplace_metric: true,
                ..NutsSettings::default()
            },
        }
    }

    /// Check every setting; the message names the bad one.
    pub fn validate(&self) -> Result<(), CcadlMnistError> {
        let bad = |why: String| Err(CcadlMnistError::Setting(why));
        if !(PAIR[1] + 1..=784).contains(&self.projection_dim) {
            return bad(format!(
                "the projection dimension must be in {}..=784 (the marginals of w2 and w5), got {}",
                PAIR[1] + 1,
                self.projection_dim
            ));
        }
        if self.batch < 2 {
            return bad("the batch must hold at least 2 points (CCAdL's covariance)".into());
        }
        if self.passes == 0 {
            return bad("passes must be at least 1".into());
        }
        if self.runs == 0 {
            return bad("runs must be at least 1".into());
        }
        if self.marginal_samples == 1 {
            return bad("marginal samples must be 0 (none) or at least 2".into());
        }
        if self.methods.is_empty() {
            return bad("no methods given".into());
        }
        for &h in &self.steps {
            if !(h.is_finite() && h > 0.0) {
                return bad(format!("step size h must be finite and > 0, got {h}"));
            }
        }
        for &a in &self.diffusions {
            if !(a.is_finite() && a > 0.0) {
                return bad(format!("diffusion A must be finite and > 0, got {a}"));
            }
        }
        if self.steps.is_empty() || self.diffusions.is_empty() {
            return bad("give at least one step size and one diffusion".into());
        }
        self.reference.validate()?;
        Ok(())
    }

    /// (method, h, A) in the order h, then A, then method.
    fn configurations(&self) -> Vec<(Method, f64, f64)> {
        let mut configs = Vec::new();
        for &h in &self.steps {
            for &a in &self.diffusions {
                for &m in &self.methods {
                    configs.push((m, h, a));
                }
            }
        }
        configs
    }
}

/// Errors of the experiment: each names the file or the setting at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CcadlMnistError {
    /// A setting out of range.
    #[error("{0}")]
    Setting(String),
    /// Loading the MNIST files failed.
    #[error(transparent)]
    Data(#[from] DataError),
    /// The files hold too few images of the two digits.
    #[error("{source_name}: {message}")]
    Digits {
        /// The file.
        source_name: String,
        /// What is wrong.
        message: String,
    },
    /// The model could not be built.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// A sampler could not be built.
    #[error(transparent)]
    Sampler(#[from] SamplerError),
    /// The minibatch estimator could not be built.
    #[error(transparent)]
    Estimator(#[from] EstimatorError),
    /// The NUTS reference failed.
    #[error("the NUTS reference: {0}")]
    Nuts(#[from] NutsError),
    /// A figure could not be drawn.
    #[error(transparent)]
    Plot(#[from] PlotError),
    /// An output file could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// The data: training and test models and their counts.
pub struct MnistSevensNines {
    /// Logistic regression on the projected training 7s and 9s, prior N(0, I).
    pub train: LogisticRegression,
    /// The same model on the test 7s and 9s (its likelihood scores the test set).
    pub test: LogisticRegression,
    /// Counts.
    pub summary: DataSummary,
}

/// What was loaded.
#[derive(Debug, Clone, Serialize)]
pub struct DataSummary {
    /// Training 7s.
    pub train_sevens: usize,
    /// Training 9s.
    pub train_nines: usize,
    /// Test images (7s and 9s).
    pub test_size: usize,
    /// Pixels per image.
    pub pixels: usize,
    /// Features after the projection.
    pub features: usize,
}

/// The Gaussian projection matrix (pixels × dim, row-major), entries N(0, 1/dim), from stream 0.
pub fn projection(pixels: usize, dim: usize, seed: u64) -> Vec<f64> {
    let mut rng = stream(seed, 0);
    let scale = 1.0 / (dim as f64).sqrt();
    (0..pixels * dim)
        .map(|_| scale * standard_normal(&mut rng))
        .collect()
}

/// The projected rows of `images` labelled 7 or 9, y = 1 for 7; with the counts of 7s and 9s.
fn project_digits(
    images: &Matrix<f32>,
    labels: &[u8],
    proj: &[f64],
    dim: usize,
    source: String,
) -> Result<(Dataset, usize, usize), DataError> {
    let rows: Vec<usize> = (0..labels.len())
        .filter(|&i| labels[i] == POSITIVE_DIGIT || labels[i] == NEGATIVE_DIGIT)
        .collect();
    let mut features = vec![0.0; rows.len() * dim];
    for (out, &i) in features.chunks_exact_mut(dim).zip(&rows) {
        for (&pixel, proj_row) in images.row(i).iter().zip(proj.chunks_exact(dim)) {
            if pixel != 0.0 {
                let pixel = f64::from(pixel);
                for (o, &p) in out.iter_mut().zip(proj_row) {
                    *o += pixel * p;
                }
            }
        }
    }
    let targets: Vec<f64> = rows
        .iter()
        .map(|&i| f64::from(u8::from(labels[i] == POSITIVE_DIGIT)))
        .collect();
    let sevens = targets.iter().filter(|&&y| y == 1.0).count();
    let nines = rows.len() - sevens;
    let dataset = Dataset {
        features: Features::F64(Matrix::from_vec(features, rows.len(), dim)?),
        targets: Some(targets),
        feature_names: (1..=dim).map(|j| format!("w{j}")).collect(),
        features_source: source,
        targets_source: None,
    };
    Ok((dataset, sevens, nines))
}

/// Load MNIST's 7s and 9s (training and test), project them and build the two models.
pub fn load(settings: &CcadlMnistSettings) -> Result<MnistSevensNines, CcadlMnistError> {
    let dir = &settings.data_dir;
    let split_name = |split: &str| format!("{} ({split} split)", dir.display());
    let (train_images, train_labels) = mnist_pair::<f32>(dir, "train")?;
    let (test_images, test_labels) = mnist_pair::<f32>(dir, "t10k")?;
    let pixels = train_images.cols();
    if test_images.cols() != pixels {
        return Err(CcadlMnistError::Digits {
            source_name: split_name("t10k"),
            message: format!(
                "test images have {} pixels but training images have {pixels}",
                test_images.cols()
            ),
        });
    }
    let dim = settings.projection_dim;
    let proj = projection(pixels, dim, settings.seed);
    let (train, train_sevens, train_nines) = project_digits(
        &train_images,
        &train_labels,
        &proj,
        dim,
        format!("{} (digits 7 and 9, projected)", split_name("train")),
    )?;
    if train_sevens < 2 || train_nines < 2 || train_sevens + train_nines < settings.batch {
        return Err(CcadlMnistError::Digits {
            source_name: split_name("train"),
            message: format!(
                "has {train_sevens} 7s and {train_nines} 9s: needs at least 2 of each and at \
                 least the batch size ({}) in all",
                settings.batch
            ),
        });
    }
    let (test, test_sevens, test_nines) = project_digits(
        &test_images,
        &test_labels,
        &proj,
        dim,
        format!("{} (digits 7 and 9, projected)", split_name("t10k")),
    )?;
    if test_sevens + test_nines == 0 {
        return Err(CcadlMnistError::Digits {
            source_name: split_name("t10k"),
            message: "has no 7s or 9s to test on".into(),
        });
    }
    let prior = || NormalPrior::new(1.0);
    Ok(MnistSevensNines {
        train: LogisticRegression::new(train, Bernoulli, prior()?, false)?,
        test: LogisticRegression::new(test, Bernoulli, prior()?, false)?,
        summary: DataSummary {
            train_sevens,
            train_nines,
            test_size: test_sevens + test_nines,
            pixels,
            features: dim,
        },
    })
}

/// The summed test log-likelihood Σ log p(y | x, θ) over the test set.
struct TestSet<'m>(HeldOut<'m>);

impl<'m> TestSet<'m> {
    fn new(model: &'m LogisticRegression) -> Self {
        Self(HeldOut::new(model))
    }

    fn log_lik(&mut self, theta: &[f64]) -> f64 {
        self.0.log_liks(theta).iter().sum()
    }
}

/// Running mean and covariance (Welford).
struct RunningMoments {
    count: usize,
    mean: Vec<f64>,
    /// Σ (θ − mean)(θ − mean)ᵀ, D × D row-major.
    m2: Vec<f64>,
    delta: Vec<f64>,
}

impl RunningMoments {
    fn new(d: usize) -> Self {
        Self {
            count: 0,
            mean: vec![0.0; d],
            m2: vec![0.0; d * d],
            delta: vec![0.0; d],
        }
    }

    fn push(&mut self, theta: &[f64]) {
        self.count += 1;
        let k = self.count as f64;
        for ((delta, mean), &x) in self.delta.iter_mut().zip(&mut self.mean).zip(theta) {
            *delta = x - *mean;
            *mean += *delta / k;
        }
        let d = theta.len();
        for (i, row) in self.m2.chunks_exact_mut(d).enumerate() {
            let di = self.delta[i];
            for ((m, &x), &mean) in row.iter_mut().zip(theta).zip(&self.mean) {
                *m += di * (x - mean);
            }
        }
    }

    fn covariance(&self, i: usize, j: usize) -> f64 {
        self.m2[i * self.mean.len() + j] / (self.count - 1) as f64
    }
}

/// Moments of the draws collected after the curve.
#[derive(Debug, Clone, Serialize)]
pub struct MarginalMoments {
    /// Draws.
    pub samples: usize,
    /// Mean of every coordinate.
    pub mean: Vec<f64>,
    /// Sd of every coordinate.
    pub sd: Vec<f64>,
    /// Covariance of the coordinates [`PAIR`] (2 × 2, row-major).
    pub pair_covariance: [f64; 4],
}

impl MarginalMoments {
    fn of(m: &RunningMoments) -> Self {
        let d = m.mean.len();
        let [a, b] = PAIR;
        Self {
            samples: m.count,
            mean: m.mean.clone(),
            sd: (0..d).map(|j| m.covariance(j, j).sqrt()).collect(),
            pair_covariance: [
                m.covariance(a, a),
                m.covariance(a, b),
                m.covariance(b, a),
                m.covariance(b, b),
            ],
        }
    }
}

/// How far a run's marginal moments are from the reference's.
#[derive(Debug, Clone, Serialize)]
pub struct MarginalErrors {
    /// Root mean square over the coordinates of (mean − reference mean) / reference sd.
    pub rms_mean_error: f64,
    /// Largest |mean − reference mean| / reference sd.
    pub max_mean_error: f64,
    /// Median over the coordinates of sd / reference sd.
    pub median_sd_ratio: f64,
    /// Smallest and largest sd / reference sd.
    pub sd_ratio_range: [f64; 2],
    /// (mean − reference mean) / reference sd of w2 and w5.
    pub pair_mean_error: [f64; 2],
    /// sd / reference sd of w2 and w5.
    pub pair_sd_ratio: [f64; 2],
}

impl MarginalErrors {
    fn between(m: &MarginalMoments, reference: &ReferenceSummary) -> Self {
        let z: Vec<f64> = m
            .mean
            .iter()
            .zip(&reference.mean)
            .zip(&reference.sd)
            .map(|((x, r), s)| (x - r) / s)
            .collect();
        let mut ratio: Vec<f64> = m.sd.iter().zip(&reference.sd).map(|(a, b)| a / b).collect();
        let rms = (z.iter().map(|z| z * z).sum::<f64>() / z.len() as f64).sqrt();
        let max = z.iter().fold(0.0_f64, |a, z| a.max(z.abs()));
        let pair_mean_error = PAIR.map(|j| z[j]);
        let pair_sd_ratio = PAIR.map(|j| ratio[j]);
        ratio.sort_unstable_by(f64::total_cmp);
        Self {
            rms_mean_error: rms,
            max_mean_error: max,
            median_sd_ratio: ratio[ratio.len() / 2],
            sd_ratio_range: [ratio[0], ratio[ratio.len() - 1]],
            pair_mean_error,
            pair_sd_ratio,
        }
    }
}

/// One run of one configuration.
#[derive(Debug, Clone, Serialize)]
pub struct CcadlMnistRun {
    /// Method.
    pub method: Method,
    /// h.
    pub h: f64,
    /// A.
    pub diffusion: f64,
    /// Repeat (0-based).
    pub run: usize,
    /// Test log-likelihood at the running posterior mean after each pass (index = pass; 0 = the
    /// start); NaN after a divergence.
    pub test_log_lik_at_mean: Vec<f64>,
    /// Test log-likelihood at the state θₜ after each pass.
    pub test_log_lik_at_state: Vec<f64>,
    /// Iteration at which the state became non-finite, if it did.
    pub diverged_at: Option<usize>,
    /// Mean thermostat ξ over the iterations run, the curve's transient included (A for SGHMC).
    pub mean_thermostat: f64,
    /// Mean thermostat ξ over the marginal draws only, after the curve (runs at the marginal
    /// diffusion only).
    pub mean_thermostat_after_curve: Option<f64>,
    /// Moments of the draws after the curve (runs at the marginal diffusion only).
    pub marginal: Option<MarginalMoments>,
    /// Their distance from the reference.
    pub marginal_errors: Option<MarginalErrors>,
    /// Wall-clock seconds.
    pub seconds: f64,
}

/// What the NUTS reference gives the comparison.
#[derive(Debug, Clone, Serialize)]
pub struct ReferenceSummary {
    /// Posterior mean.
    pub mean: Vec<f64>,
    /// Posterior sd.
    pub sd: Vec<f64>,
    /// Covariance of w2 and w5.
    pub pair_covariance: [f64; 4],
    /// The test log-likelihood at the posterior mean.
    pub test_log_lik_at_mean: f64,
    /// Draws in all.
    pub draws: usize,
    /// Largest split R-hat.
    pub max_rhat: f64,
    /// Smallest bulk ESS.
    pub min_ess_bulk: f64,
    /// Divergent transitions after warm-up.
    pub divergences: usize,
    /// Seconds of sampling.
    pub seconds: f64,
}

/// The whole experiment.
#[derive(Debug, Clone, Serialize)]
pub struct CcadlMnistReport {
    /// The settings.
    pub settings: CcadlMnistSettings,
    /// The data.
    pub data: DataSummary,
    /// Iterations per pass, N/n.
    pub iterations_per_pass: f64,
    /// The NUTS reference.
    pub reference: ReferenceSummary,
    /// Every run, in the order repeat, then h, then A, then method.
    pub runs: Vec<CcadlMnistRun>,
    /// Wall-clock seconds in all.
    pub seconds: f64,
}

/// The iteration after which pass p ends: ⌈p·N/n⌉.
fn pass_end(pass: usize, n_data: usize, batch: usize) -> usize {
    (pass * n_data).div_ceil(batch)
}

/// Records the curve, the thermostat and (after the curve) the marginal moments.
struct Trace<'a, 't, S> {
    test: TestSet<'t>,
    thermostat: &'a dyn Fn(&S) -> f64,
    /// Σ θₜ since the start, and its mean.
    sum: Vec<f64>,
    average: Vec<f64>,
    /// Iterations at which the passes end.
    pass_ends: &'a [usize],
    next_pass: usize,
    at_mean: Vec<f64>,
    at_state: Vec<f64>,
    thermostat_sum: f64,
    /// Σ ξ over the marginal draws.
    thermostat_after_curve_sum: f64,
    iterations: usize,
    moments: Option<RunningMoments>,
}

impl<S: Sampler> Trace<'_, '_, S> {
    fn record(&mut self, theta: &[f64]) {
        // At the start (no iteration yet) the average is θ₀ itself.
        if self.iterations == 0 {
            self.average.copy_from_slice(theta);
        } else {
            let n = self.iterations as f64;
            for (a, s) in self.average.iter_mut().zip(&self.sum) {
                *a = s / n;
            }
        }
        let at_mean = self.test.log_lik(&self.average);
        self.at_mean.push(at_mean);
        let at_state = self.test.log_lik(theta);
        self.at_state.push(at_state);
    }
}

impl<S: Sampler> ChainObserver<S> for Trace<'_, '_, S> {
    fn started(&mut self, sampler: &S) {
        self.record(sampler.position());
    }

    fn kept(&mut self, _sampler: &S) -> Result<(), SinkError> {
        Ok(())
    }

    fn iterated(&mut self, iteration: usize, sampler: &S) -> ControlFlow<()> {
        let theta = sampler.position();
        self.iterations = iteration;
        let xi = (self.thermostat)(sampler);
        self.thermostat_sum += xi;
        if self.next_pass < self.pass_ends.len() {
            for (s, &x) in self.sum.iter_mut().zip(theta) {
                *s += x;
            }
            if self.pass_ends[self.next_pass] == iteration {
                self.record(theta);
                self.next_pass += 1;
            }
        } else if let Some(m) = &mut self.moments {
            m.push(theta);
            self.thermostat_after_curve_sum += xi;
        }
        ControlFlow::Continue(())
    }
}

/// One run of a configuration.
struct RunJob<'a> {
    config: (Method, f64, f64),
    run: usize,
    data: &'a MnistSevensNines,
    settings: &'a CcadlMnistSettings,
    pass_ends: &'a [usize],
    rng: ChainRng,
}

impl WithSampler for RunJob<'_> {
    type Output = Result<CcadlMnistRun, CcadlMnistError>;

    fn run<S: Sampler>(self, mut sampler: S, thermostat: &dyn Fn(&S) -> f64) -> Self::Output {
        let started = Instant::now();
        let (method, h, a) = self.config;
        let model = &self.data.train;
        let d = model.dim();
        let mut estimator = Minibatch::new(model, BatchSize::Count(self.settings.batch))?;
        let curve_iterations = *self.pass_ends.last().expect("at least one pass");
        let collect = a == self.settings.marginal_diffusion && self.settings.marginal_samples > 0;
        let total = curve_iterations
            + if collect {
                self.settings.marginal_samples
            } else {
                0
            };
        let mut trace = Trace {
            test: TestSet::new(&self.data.test),
            thermostat,
            sum: vec![0.0; d],
            average: vec![0.0; d],
            pass_ends: self.pass_ends,
            next_pass: 0,
            at_mean: Vec::with_capacity(self.pass_ends.len() + 1),
            at_state: Vec::with_capacity(self.pass_ends.len() + 1),
            thermostat_sum: 0.0,
            thermostat_after_curve_sum: 0.0,
            iterations: 0,
            moments: collect.then(|| RunningMoments::new(d)),
        };
        let plan = ChainPlan {
            budget: Budget::Iterations(total),
            burn_in: 0,
            thin: 1,
        };
        let mut rng = self.rng;
        let outcome = drive_chain(
            &mut sampler,
            &mut estimator,
            &mut rng,
            &vec![0.0; d],
            &plan,
            &mut trace,
            &AtomicBool::new(false),
        )
        .expect("recording in memory cannot fail");
        let diverged_at = outcome.divergence.map(|div| div.iteration);
        let passes = self.pass_ends.len() + 1;
        trace.at_mean.resize(passes, f64::NAN);
        trace.at_state.resize(passes, f64::NAN);
        let marginal = match (&trace.moments, diverged_at) {
            (Some(m), None) => Some(MarginalMoments::of(m)),
            _ => None,
        };
        Ok(CcadlMnistRun {
            method,
            h,
            diffusion: a,
            run: self.run,
            test_log_lik_at_mean: trace.at_mean,
            test_log_lik_at_state: trace.at_state,
            diverged_at,
            mean_thermostat: trace.thermostat_sum / trace.iterations.max(1) as f64,
            mean_thermostat_after_curve: marginal
                .as_ref()
                .map(|m| trace.thermostat_after_curve_sum / m.samples as f64),
            marginal,
            marginal_errors: None,
            seconds: started.elapsed().as_secs_f64(),
        })
    }
}

/// The NUTS reference on the training data.
fn reference(
    data: &MnistSevensNines,
    settings: &NutsSettings,
) -> Result<ReferenceSummary, CcadlMnistError> {
    let r = run_nuts(&data.train, settings, &NoProgress)?;
    let d = data.train.dim();
    let [a, b] = PAIR;
    let covariance = &r.moments.covariance;
    let pair_covariance = if covariance.len() == d * d {
        [
            covariance[a * d + a],
            covariance[a * d + b],
            covariance[b * d + a],
            covariance[b * d + b],
        ]
    } else {
        [f64::NAN; 4]
    };
    let mut test = TestSet::new(&data.test);
    Ok(ReferenceSummary {
        test_log_lik_at_mean: test.log_lik(&r.moments.mean),
        mean: r.moments.mean.clone(),
        sd: r.moments.sd.clone(),
        pair_covariance,
        draws: r.draws.iter().map(|c| c.len() / d).sum(),
        max_rhat: r.max_rhat(),
        min_ess_bulk: r.min_ess_bulk(),
        divergences: r.divergences(),
        seconds: r.seconds,
    })
}

/// Run the experiment; `log` receives progress lines.
pub fn run(
    settings: &CcadlMnistSettings,
    log: &(dyn Fn(&str) + Sync),
) -> Result<CcadlMnistReport, CcadlMnistError> {
    let started = Instant::now();
    settings.validate()?;
    let data = load(settings)?;
    let s = &data.summary;
    let n_data = s.train_sevens + s.train_nines;
    log(&format!(
        "MNIST 7s vs 9s: {} training ({} 7s, {} 9s), {} test; {} pixels projected to {}",
        n_data, s.train_sevens, s.train_nines, s.test_size, s.pixels, s.features
    ));
    let r = &settings.reference;
    log(&format!(
        "NUTS reference: {} chains x ({} + {}) ...",
        r.chains, r.warmup, r.draws
    ));
    let reference = reference(&data, r)?;
    log(&format!(
        "NUTS reference: {:.1} s, max R-hat {:.4}, min bulk ESS {:.0}, {} divergences; test \
         log-likelihood at its mean {:.2}",
        reference.seconds,
        reference.max_rhat,
        reference.min_ess_bulk,
        reference.divergences,
        reference.test_log_lik_at_mean
    ));
    let pass_ends: Vec<usize> = (1..=settings.passes)
        .map(|p| pass_end(p, n_data, settings.batch))
        .collect();
    let configs = settings.configurations();
    let jobs: Vec<(usize, usize)> = (0..settings.runs)
        .flat_map(|r| (0..configs.len()).map(move |k| (r, k)))
        .collect();
    let mut runs = jobs
        .par_iter()
        .map(|&(r, k)| {
            let (method, h, a) = configs[k];
            let job = RunJob {
                config: configs[k],
                run: r,
                data: &data,
                settings,
                pass_ends: &pass_ends,
                rng: stream(settings.seed, 1 + (r * configs.len() + k) as u64),
            };
            let run = method.with_sampler(h, a, job)??;
            log(&format!(
                "run {} {} h = {h:e} A = {a}: test log-lik at the mean {:.2} after {} passes{} \
                 ({:.1} s)",
                r + 1,
                method.label(),
                run.test_log_lik_at_mean.last().copied().unwrap_or(f64::NAN),
                settings.passes,
                run.diverged_at
                    .map_or(String::new(), |i| format!(", diverged at iteration {i}")),
                run.seconds
            ));
            Ok(run)
        })
        .collect::<Result<Vec<_>, CcadlMnistError>>()?;
    for run in &mut runs {
        run.marginal_errors = run
            .marginal
            .as_ref()
            .map(|m| MarginalErrors::between(m, &reference));
    }
    Ok(CcadlMnistReport {
        settings: settings.clone(),
        data: data.summary.clone(),
        iterations_per_pass: n_data as f64 / settings.batch as f64,
        reference,
        runs,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Mean ± sd (n − 1) of the finite values, with a count of the non-finite ones.
fn mean_sd_cell(values: &[f64], digits: usize) -> String {
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    let lost = values.len() - finite.len();
    let lost = if lost > 0 {
        format!(" ({lost} of {} diverged)", values.len())
    } else {
        String::new()
    };
    match finite.len() {
        0 => format!("diverged{lost}"),
        1 => format!("{:.digits$}{lost}", finite[0]),
        n => {
            let m = finite.iter().sum::<f64>() / n as f64;
            let sd = (finite.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
            format!("{m:.digits$} ± {sd:.digits$}{lost}")
        }
    }
}

/// The passes shown in the curve table: 1, 10, 30, 100, 300, … up to and including the last.
fn table_passes(passes: usize) -> Vec<usize> {
    let mut shown: Vec<usize> = [1, 10, 30, 100, 300, 1000, 3000]
        .into_iter()
        .filter(|&p| p < passes)
        .collect();
    shown.push(passes);
    shown
}

impl CcadlMnistReport {
    /// The runs of one configuration.
    fn runs_of(&self, method: Method, h: f64, a: f64) -> impl Iterator<Item = &CcadlMnistRun> {
        self.runs
            .iter()
            .filter(move |r| r.method == method && r.h == h && r.diffusion == a)
    }

    /// The tables: the test log-likelihood at the posterior mean after chosen passes, and the
    /// marginal errors against the reference.
    pub fn markdown(&self) -> String {
        let s = &self.settings;
        let runs = s.runs;
        let shown = table_passes(s.passes);
        let mut out = format!(
            "Test log-likelihood (summed over the {} test images) at the running posterior mean \
             after P passes; mean ± sd over {runs} run{} per cell (seeds: streams of {}). The NUTS \
             posterior mean gives {:.2}.\n\n| h | A | method |",
            self.data.test_size,
            if runs == 1 { "" } else { "s" },
            s.seed,
            self.reference.test_log_lik_at_mean
        );
        for p in &shown {
            out += &format!(" P = {p} |");
        }
        out += " mean ξ, whole run |\n|---|---|---|";
        out += &"---|".repeat(shown.len() + 1);
        out += "\n";
        for &h in &s.steps {
            for &a in &s.diffusions {
                for &m in &s.methods {
                    out += &format!("| {h:e} | {a} | {} |", m.label());
                    let these: Vec<&CcadlMnistRun> = self.runs_of(m, h, a).collect();
                    for &p in &shown {
                        let values: Vec<f64> =
                            these.iter().map(|r| r.test_log_lik_at_mean[p]).collect();
                        out += &format!(" {} |", mean_sd_cell(&values, 1));
                    }
                    let xi: Vec<f64> = these
                        .iter()
                        .filter(|r| r.diverged_at.is_none())
                        .map(|r| r.mean_thermostat)
                        .collect();
                    out += &format!(" {} |\n", mean_sd_cell(&xi, 2));
                }
            }
        }
        if s.marginal_samples > 0 {
            let a = s.marginal_diffusion;
            out += &format!(
                "\nMarginals at A = {a}: {} draws per run after the {} passes above, against NUTS \
                 ({} draws); mean ± sd over {runs} run{} per cell. Mean error: (mean − NUTS mean) / \
                 NUTS sd; sd ratio: sd / NUTS sd.\n\n| h | method | RMS mean error, {} \
                 coordinates | largest \\|mean error\\| | median sd ratio | sd ratio range | w2 mean \
                 error | w5 mean error | w2 sd ratio | w5 sd ratio | mean ξ |\n\
                 |---|---|---|---|---|---|---|---|---|---|---|\n",
                s.marginal_samples,
                s.passes,
                self.reference.draws,
                if runs == 1 { "" } else { "s" },
                self.data.features,
            );
            for &h in &s.steps {
                for &m in &s.methods {
                    let errors: Vec<Option<&MarginalErrors>> = self
                        .runs_of(m, h, a)
                        .map(|r| r.marginal_errors.as_ref())
                        .collect();
                    let column = |f: &dyn Fn(&MarginalErrors) -> f64| -> Vec<f64> {
                        errors.iter().map(|e| e.map_or(f64::NAN, f)).collect()
                    };
                    let lo = column(&|e| e.sd_ratio_range[0]);
                    let hi = column(&|e| e.sd_ratio_range[1]);
                    let range = if lo.iter().all(|v| v.is_finite()) {
                        format!(
                            "{:.2}–{:.2}",
                            lo.iter().copied().fold(f64::INFINITY, f64::min),
                            hi.iter().copied().fold(0.0, f64::max)
                        )
                    } else {
                        "—".into()
                    };
                    let xi: Vec<f64> = self
                        .runs_of(m, h, a)
                        .map(|r| r.mean_thermostat_after_curve.unwrap_or(f64::NAN))
                        .collect();
                    out += &format!(
                        "| {h:e} | {} | {} | {} | {} | {range} | {} | {} | {} | {} | {} |\n",
                        m.label(),
                        mean_sd_cell(&column(&|e| e.rms_mean_error), 2),
                        mean_sd_cell(&column(&|e| e.max_mean_error), 2),
                        mean_sd_cell(&column(&|e| e.median_sd_ratio), 2),
                        mean_sd_cell(&column(&|e| e.pair_mean_error[0]), 2),
                        mean_sd_cell(&column(&|e| e.pair_mean_error[1]), 2),
                        mean_sd_cell(&column(&|e| e.pair_sd_ratio[0]), 2),
                        mean_sd_cell(&column(&|e| e.pair_sd_ratio[1]), 2),
                        mean_sd_cell(&xi, 2),
                    );
                }
            }
        }
        out
    }

    /// The paper's Figure 2, top row: one panel per h, one line per (method, A) with a band of
    /// ± 2 sd over the runs, and the NUTS mean's value as a flat line.
    pub fn curve_figure(&self) -> Result<Figure, PlotError> {
        let s = &self.settings;
        let passes: Vec<f64> = (0..=s.passes).map(|p| p as f64).collect();
        let mut panels = Vec::new();
        for &h in &s.steps {
            let mut series = Vec::new();
            for &m in &s.methods {
                for &a in &s.diffusions {
                    let runs: Vec<Vec<f64>> = self
                        .runs_of(m, h, a)
                        .map(|r| r.test_log_lik_at_mean.clone())
                        .collect();
                    series.push(Series::mean_and_sd(
                        format!("{}, A = {a}", m.label()),
                        passes.clone(),
                        &runs,
                    )?);
                }
            }
            series.push(Series::line(
                "NUTS posterior mean",
                vec![0.0, s.passes as f64],
                vec![self.reference.test_log_lik_at_mean; 2],
            ));
            panels.push(Panel {
                title: format!("h = {h:e}"),
                series,
            });
        }
        Ok(Figure::new(
            format!(
                "MNIST 7s vs 9s: test log-likelihood at the running posterior mean ({} runs, ± 2 sd)",
                s.runs
            ),
            "passes through the training data",
            "test log-likelihood",
            false,
            panels,
        ))
    }

    /// The paper's Figure 2, bottom row: one panel per h, the 95 % ellipse of (w2, w5) of each
    /// method's first run at the marginal A, and NUTS's.
    pub fn marginal_figure(&self) -> Result<Figure, PlotError> {
        let s = &self.settings;
        let mut panels = Vec::new();
        for &h in &s.steps {
            let mut series = vec![ellipse(
                "NUTS",
                PAIR.map(|j| self.reference.mean[j]),
                self.reference.pair_covariance,
            )];
            for &m in &s.methods {
                if let Some(moments) = self
                    .runs_of(m, h, s.marginal_diffusion)
                    .find(|r| r.run == 0)
                    .and_then(|r| r.marginal.as_ref())
                {
                    series.push(ellipse(
                        m.label(),
                        PAIR.map(|j| moments.mean[j]),
                        moments.pair_covariance,
                    ));
                }
            }
            panels.push(Panel {
                title: format!("h = {h:e}, A = {}", s.marginal_diffusion),
                series,
            });
        }
        Ok(Figure::new(
            "MNIST 7s vs 9s: 95 % ellipses of (w2, w5), first run (x: w2, y: w5)",
            "w2",
            "w5",
            false,
            panels,
        ))
    }
}

/// The 95 % ellipse of N(mean, covariance) with a cross at its centre, as one closed line.
fn ellipse(label: &str, mean: [f64; 2], covariance: [f64; 4]) -> Series {
    // Cholesky factor of the 2 × 2 covariance.
    let l11 = covariance[0].max(0.0).sqrt();
    let l21 = if l11 > 0.0 { covariance[2] / l11 } else { 0.0 };
    let l22 = (covariance[3] - l21 * l21).max(0.0).sqrt();
    let mut x = Vec::new();
    let mut y = Vec::new();
    for k in 0..=72 {
        let t = std::f64::consts::TAU * k as f64 / 72.0;
        let (u, v) = (ELLIPSE_RADIUS_95 * t.cos(), ELLIPSE_RADIUS_95 * t.sin());
        x.push(mean[0] + l11 * u);
        y.push(mean[1] + l21 * u + l22 * v);
    }
    // Back to the centre through the ellipse's first point, then a cross.
    let (dx, dy) = (0.15 * l11, 0.15 * l22.max(l21.abs()));
    for (a, b) in [
        (mean[0], mean[1]),
        (mean[0] - dx, mean[1]),
        (mean[0] + dx, mean[1]),
        (mean[0], mean[1]),
        (mean[0], mean[1] - dy),
        (mean[0], mean[1] + dy),
    ] {
        x.push(a);
        y.push(b);
    }
    Series {
        style: SeriesStyle::Highlighted,
        ..Series::line(label, x, y)
    }
}

/// Write `report.json`, `tables.md`, `curves.svg` and `marginals.svg` into `dir`.
pub fn write_outputs(report: &CcadlMnistReport, dir: &Path) -> Result<(), CcadlMnistError> {
    let write = |name: &str, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|source| CcadlMnistError::Write { path, source })
    };
    std::fs::create_dir_all(dir).map_err(|source| CcadlMnistError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    write(
        "report.json",
        serde_json::to_string_pretty(report).expect("the report serialises") + "\n",
    )?;
    write("tables.md", report.markdown())?;
    write_svg(&dir.join("curves.svg"), &report.curve_figure()?)?;
    if report.settings.marginal_samples > 0 {
        write_svg(&dir.join("marginals.svg"), &report.marginal_figure()?)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_end_at_the_ceiling_of_p_n_over_batch() {
        assert_eq!(pass_end(1, 12_214, 500), 25);
        assert_eq!(pass_end(2, 12_214, 500), 49);
        assert_eq!(pass_end(2, 1000, 500), 4);
    }

    #[test]
    fn running_moments_match_the_two_pass_formulas() {
        let xs = [[1.0, 2.0], [3.0, -1.0], [0.5, 0.0], [2.0, 4.0]];
        let mut m = RunningMoments::new(2);
        for x in &xs {
            m.push(x);
        }
        let mean = [6.5 / 4.0, 5.0 / 4.0];
        let cov = |i: usize, j: usize| {
            xs.iter()
                .map(|x| (x[i] - mean[i]) * (x[j] - mean[j]))
                .sum::<f64>()
                / 3.0
        };
        for (i, &mean_i) in mean.iter().enumerate() {
            assert!((m.mean[i] - mean_i).abs() < 1e-12);
            for j in 0..2 {
                assert!((m.covariance(i, j) - cov(i, j)).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn the_ellipse_spans_the_95_percent_radius() {
        let e = ellipse("x", [1.0, -2.0], [4.0, 0.0, 0.0, 1.0]);
        // First point: mean + (2·r, 0).
        assert!((e.x[0] - (1.0 + 2.0 * ELLIPSE_RADIUS_95)).abs() < 1e-12);
        assert!((e.mean[0] + 2.0).abs() < 1e-12);
        let top = e.mean.iter().copied().fold(f64::MIN, f64::max);
        assert!((top - (-2.0 + ELLIPSE_RADIUS_95)).abs() < 1e-3);
    }
}
