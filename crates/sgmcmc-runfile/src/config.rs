//! The run file: a TOML document that names the data, model, sampler, gradient estimator and
//! run settings. Every table rejects unknown keys, so a misspelt key is an error naming it.
//! `examples/*.toml` and the README document every key.

use serde::{Deserialize, Serialize};
use sgmcmc::estimator::BatchSize;
use sgmcmc::model::ParameterPrior;
use sgmcmc::settings::{EstimatorSettings, SamplerSettings, ScheduleSettings};
use sgmcmc::tuning::{TuneGrid, TuneScores};
use std::path::{Path, PathBuf};

pub mod coreset;

/// A whole run file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where the data come from.
    pub data: DataConfig,
    /// The model and its prior.
    pub model: ModelConfig,
    /// The sampler, its hyperparameters and an optional step-size schedule. Without it, `run`
    /// takes the default path (MAP, Laplace preconditioner, control variates where they pay,
    /// MAMBA's choice of step and batch size; `pipeline::default_path`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampler: Option<SamplerTable>,
    /// The gradient estimator ([`Config::gradient`]: minibatch gradients when absent, except on
    /// the default path, which chooses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gradient: Option<EstimatorSettings>,
    /// Seed, chains, budget, burn-in, thinning, initialisation.
    #[serde(default)]
    pub run: RunConfig,
    /// Accuracy metrics after the run: against reference moments and/or on a test split.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluation: Option<EvaluationConfig>,
    /// What `sgmcmc tune` searches over, and how (MAMBA and its baselines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tune: Option<TuneConfig>,
}

/// Data sources: exactly one of `features` (+ `targets`), `table` (+ `target`), `libsvm`,
/// `synthetic`, `bike_sharing`, `nba_games`, `movielens` or `mnist`. Relative paths are relative
/// to the run file's directory.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataConfig {
    /// Feature matrix: `.npy` (f64 or f32, memory-mapped) or `.csv` with a header.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub features: Option<PathBuf>,
    /// Response vector for `features`: `.npy`, or `.csv` (one column, or the `target` column).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub targets: Option<PathBuf>,
    /// One CSV table holding features and the `target` column.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table: Option<PathBuf>,
    /// Name of the response column in `table` (or in a CSV `targets` file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// A LIBSVM text file (`.gz` allowed); labels are the targets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub libsvm: Option<PathBuf>,
    /// Number of LIBSVM feature columns (default: the largest index seen).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n_features: Option<usize>,
    /// A built-in synthetic data set instead of files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub synthetic: Option<SyntheticConfig>,
    /// The coreset MCMC paper's bike-sharing table (reference §7.9): the file
    /// `poisson_reg.csv` or its directory. No header; columns 1–8 are features `x1`..`x8`,
    /// column 9 (the constant 1.0) is kept as a ninth feature `intercept`, column 10 is the
    /// count. Use it with `kind = "poisson"`, `link = "softplus"` and WITHOUT `intercept = true`
    /// (the column is the intercept); θ = (x1..x8, intercept).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bike_sharing: Option<PathBuf>,
    /// The NBA games for `kind = "bradley_terry"`: `games.csv.gz` (or its directory), read by
    /// the column names HOME_TEAM_ID, VISITOR_TEAM_ID, HOME_TEAM_WINS; θ = one strength per
    /// team, `team[ID]` in increasing id order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nba_games: Option<PathBuf>,
    /// A MovieLens ratings file (e.g. `u1.base`; tab-separated `user item rating timestamp`,
    /// 1-based ids) for `kind = "pmf"`: features = 0-based (user, item), target = the rating.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub movielens: Option<PathBuf>,
    /// MNIST in gzipped IDX (for `kind = "bnn"`): the directory (its `train` split) or the
    /// directory joined with a split prefix (`.../mnist/train`, `.../mnist/t10k`). Pixels /255
    /// as f64 features, the digit as the target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mnist: Option<PathBuf>,
    /// The rows are already in a uniformly random order (e.g. written by `sgmcmc shuffle`):
    /// block minibatches (`[gradient] scheme = "block"`) read them as they are instead of
    /// shuffling an in-memory copy, so a memory-mapped file larger than memory works.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rows_shuffled: bool,
}

/// Built-in synthetic logistic-regression data, all from `seed`: the demo's (x ~ N(0, I),
/// θ* ~ N(0, I), y ~ Bernoulli(σ(xᵀθ*))), or with `generator = "mamba"` the MAMBA paper's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyntheticConfig {
    /// Number of rows N.
    pub rows: usize,
    /// Number of features d.
    pub dim: usize,
    /// Seed of the data (independent of the run seed).
    #[serde(default = "default_data_seed")]
    pub seed: u64,
    /// `"standard"` (default, the demo's) or `"mamba"`: θ* ~ N(0, 10·I), x ~ N(0, Σ_X) with
    /// Σ_X[j, k] = b^|j−k| and one b ~ U(−0.4, 0.4) (MAMBA paper, App. C.1).
    #[serde(default, skip_serializing_if = "is_default")]
    pub generator: SyntheticGenerator,
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// Which synthetic generator.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SyntheticGenerator {
    /// The demo's: independent standard normal features and coefficients.
    #[default]
    Standard,
    /// The MAMBA paper's correlated features and N(0, 10·I) coefficients.
    Mamba,
    /// No labels: xᵢ ~ N(0, I_d), for the Gaussian location model (coreset papers).
    GaussianLocation,
    /// The coreset papers' sparse regression data: x ~ N(0, I₁₀), y = xᵀβ* + N(0, 25²) with
    /// β* = (0,0,0,0,0,5,5,5,5,5) (`dim` must be 10).
    SparseRegression,
}

fn default_data_seed() -> u64 {
    20_211_118
}

/// The model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ModelConfig {
    /// A model the caller supplies instead of the run file (the Python package's user models,
    /// a Rust program's own `Model`): `pipeline::prepare_model` takes it; `build_model` cannot.
    External {},
    /// Logistic regression, labels 0/1 (or −1/+1).
    Logistic {
        /// Prior variance σ² of θ ~ N(0, σ²I) (the normal prior).
        #[serde(default = "default_prior_variance")]
        prior_variance: f64,
        /// Add an intercept parameter.
        #[serde(default)]
        intercept: bool,
        /// Prior of the coefficients: `"normal"` (default, variance `prior_variance`) or
        /// `"cauchy"` (θᵢ ~ Cauchy(0, `prior_scale`) i.i.d., the coreset MCMC paper's, §7.9).
        #[serde(default, skip_serializing_if = "is_default")]
        prior: PriorKind,
        /// Scale s of the Cauchy prior (default 1); only with `prior = "cauchy"`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prior_scale: Option<f64>,
        /// Priors per group (`coefficients`, `intercept`), replacing `prior`.
        #[serde(default, skip_serializing_if = "RegressionPriors::is_empty")]
        priors: RegressionPriors,
    },
    /// Poisson regression on counts, y ~ Poisson(λ(xᵀw + b)), θ ~ N(0, σ²I).
    Poisson {
        /// Prior variance σ² of the coefficients (the coreset paper uses 1).
        #[serde(default = "default_prior_variance")]
        prior_variance: f64,
        /// Add an intercept parameter.
        #[serde(default)]
        intercept: bool,
        /// `"log"` (λ = eᶻ, default) or `"softplus"` (λ = log(1 + eᶻ), the coreset paper's).
        #[serde(default)]
        link: sgmcmc::model::PoissonLink,
        /// Priors per group (`coefficients`, `intercept`), replacing `prior_variance`.
        #[serde(default, skip_serializing_if = "RegressionPriors::is_empty")]
        priors: RegressionPriors,
    },
    /// Bradley–Terry paired comparisons (reference §7.9): data with two columns of team ids
    /// (home, visitor) and y = 1 if the home team won, e.g. `[data] nba_games`.
    BradleyTerry {
        /// Scale s in σ((θ_h − θ_v)/s).
        #[serde(default = "default_bradley_terry_scale")]
        scale: f64,
        /// Prior variance σ² of θ ~ N(0, σ²I).
        #[serde(default = "one")]
        prior_variance: f64,
    },
    /// Spike-and-slab linear regression (George & McCulloch 1993; coreset papers §7.9):
    /// θ = (β, σ²), ℓ = −½[log σ² + (y − xᵀβ)²/σ²], σ² ~ InvGamma(ν/2, νλ/2), βᵢ ~
    /// q·N(0, (cτ)²) + (1 − q)·N(0, τ²) (the indicators summed out; the Gibbs kernel keeps them).
    SparseRegression {
        /// ν.
        #[serde(default = "default_sparse_nu")]
        nu: f64,
        /// λ.
        #[serde(default = "one")]
        lambda: f64,
        /// Prior slab probability q.
        #[serde(default = "default_sparse_q")]
        q: f64,
        /// Spike sd τ.
        #[serde(default = "default_sparse_q")]
        tau: f64,
        /// Slab sd factor c (slab sd cτ).
        #[serde(default = "default_sparse_c")]
        c: f64,
    },
    /// Bayesian probabilistic matrix factorisation (reference §5.6) over (user, item, rating)
    /// data, e.g. `[data] movielens`; θ = (U, V, μ_U, μ_V, log λ_U, log λ_V).
    Pmf {
        /// Latent dimension d.
        #[serde(default = "default_pmf_latent_dim")]
        latent_dim: usize,
        /// Likelihood precision α.
        #[serde(default = "default_pmf_precision")]
        precision: f64,
        /// Gamma shape a₀ of the precisions λ.
        #[serde(default = "default_pmf_hyper_shape")]
        hyper_shape: f64,
        /// Gamma rate b₀ of the precisions λ.
        #[serde(default = "default_pmf_hyper_rate")]
        hyper_rate: f64,
        /// Rows of U (default: `u.info` beside a `movielens` file, else 1 + the largest user
        /// index in the training data).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        users: Option<usize>,
        /// Rows of V (default as for `users`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        items: Option<usize>,
    },
    /// Linear regression with Gaussian noise.
    Linear {
        /// Prior variance σ² of the coefficients (the N(0, σ²I) prior, when `priors` gives
        /// none for them).
        #[serde(default = "default_prior_variance")]
        prior_variance: f64,
        /// Add an intercept parameter.
        #[serde(default)]
        intercept: bool,
        /// Known noise variance, or `"learn"` to sample log σ² as a parameter (default 1;
        /// not with a `priors.sigma`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        noise_variance: Option<NoiseVariance>,
        /// Prior variance of log σ² when the noise is learned.
        #[serde(default = "default_prior_variance")]
        log_noise_prior_variance: f64,
        /// A prior per parameter group (`[model.priors]`): `coefficients`, `intercept` and
        /// `sigma`, the noise sd, then learned on σ > 0 and reported as σ.
        #[serde(default, skip_serializing_if = "RegressionPriors::is_empty")]
        priors: RegressionPriors,
    },
    /// A two-component normal mixture of one column of data with ordered means, an sd per
    /// component and a weight (posteriordb's `low_dim_gauss_mix`); reported as mu[1], mu[2],
    /// sigma[1], sigma[2], theta.
    NormalMixture {
        /// The priors of the means, the sds and the weight (`[model.priors]`; default
        /// N(0, 2²), half-normal(2) and Beta(5, 5)).
        #[serde(default)]
        priors: sgmcmc::model::NormalMixturePriors,
    },
    /// Bayesian neural network I-H-K with a softmax hidden layer (reference §5.6):
    /// β = softmax(softmax(xᵀB + b)·A + a), N(0, σ²) on every weight; labels 0..K−1.
    Bnn {
        /// Hidden width H.
        #[serde(default = "default_bnn_hidden")]
        hidden: usize,
        /// Prior variance σ² of every weight.
        #[serde(default = "one")]
        prior_variance: f64,
    },
    /// Gaussian location model xᵢ ~ N(θ, Σ) (no targets).
    Gaussian {
        /// Σ, row-major D×D (default: the identity).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        covariance: Option<Vec<f64>>,
        /// Prior variance τ₀² (`inf` for a flat prior).
        #[serde(default = "default_prior_variance")]
        prior_variance: f64,
    },
}

fn default_bnn_hidden() -> usize {
    sgmcmc::model::BNN_DEFAULT_HIDDEN
}

fn default_sparse_nu() -> f64 {
    0.1
}
fn default_sparse_q() -> f64 {
    0.1
}
fn default_sparse_c() -> f64 {
    10.0
}

fn default_pmf_latent_dim() -> usize {
    sgmcmc::model::PmfSettings::default().latent_dim
}
fn default_pmf_precision() -> f64 {
    sgmcmc::model::PmfSettings::default().precision
}
fn default_pmf_hyper_shape() -> f64 {
    sgmcmc::model::PmfSettings::default().hyper_shape
}
fn default_pmf_hyper_rate() -> f64 {
    sgmcmc::model::PmfSettings::default().hyper_rate
}

fn default_prior_variance() -> f64 {
    10.0
}

fn default_bradley_terry_scale() -> f64 {
    sgmcmc::model::BradleyTerry::DEFAULT_SCALE
}

/// The prior family of logistic-regression coefficients.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PriorKind {
    /// θ ~ N(0, σ²I) with σ² = `prior_variance`.
    #[default]
    Normal,
    /// θᵢ ~ Cauchy(0, s) with s = `prior_scale`.
    Cauchy,
}

/// The priors of a regression's parameter groups (`[model.priors]`), each a
/// [`ParameterPrior`] table such as `{ kind = "normal", location = 0, scale = 10 }`,
/// `{ kind = "flat" }` or `{ kind = "half_cauchy", scale = 2.5 }`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegressionPriors {
    /// Each coefficient's prior (on the real line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coefficients: Option<ParameterPrior>,
    /// The intercept's prior (default: the coefficients').
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intercept: Option<ParameterPrior>,
    /// The noise sd σ's prior (on σ > 0); σ is then a parameter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sigma: Option<ParameterPrior>,
}

impl RegressionPriors {
    /// No group has a prior of its own.
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }
}

/// Noise variance of the linear model: a number, or `"learn"`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NoiseVariance {
    /// Known σ².
    Fixed(f64),
    /// Sample log σ² as a parameter.
    Learn,
}

impl Default for NoiseVariance {
    fn default() -> Self {
        NoiseVariance::Fixed(1.0)
    }
}

impl Serialize for NoiseVariance {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            NoiseVariance::Fixed(v) => s.serialize_f64(*v),
            NoiseVariance::Learn => s.serialize_str("learn"),
        }
    }
}

impl<'de> Deserialize<'de> for NoiseVariance {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = NoiseVariance;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a positive number or \"learn\"")
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
                Ok(NoiseVariance::Fixed(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(NoiseVariance::Fixed(v as f64))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                match v {
                    "learn" => Ok(NoiseVariance::Learn),
                    _ => Err(E::custom(format!(
                        "noise_variance: expected a positive number or \"learn\", got {v:?}"
                    ))),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// The `[sampler]` table: the method (`kind` and its keys) and an optional step-size
/// `schedule`. Unknown keys are still rejected: every key other than `schedule` goes to the
/// method, whose variants deny unknown fields (serde cannot combine `deny_unknown_fields` with
/// `flatten` on this struct itself).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SamplerTable {
    /// The sampler and its hyperparameters.
    #[serde(flatten)]
    pub method: SamplerSettings,
    /// Step-size schedule (reference §1.4); none: the constant step of the method.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<ScheduleSettings>,
}

/// The `[evaluation]` table: accuracy metrics computed after the run from the kept draws
/// (post burn-in, every chain that did not diverge) and written to `summary.json` under
/// `evaluation`. Give a `reference` file, a test split, or both. The test split is either
/// `test_fraction` of the `[data]` rows, held out of training, or explicit files in
/// `[evaluation.test]` (the keys of `[data]`, except `synthetic`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvaluationConfig {
    /// Reference moments (JSON as `sgmcmc reference` writes): relative sd error ξ and the
    /// average squared z-score.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<PathBuf>,
    /// Fraction of the `[data]` rows held out as the test split, in (0, 1); those rows are not
    /// given to the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_fraction: Option<f64>,
    /// Which rows `test_fraction` holds out: `"last"` (default; the MAMBA convention) or
    /// `"random"` (a uniformly random subset drawn from `split_seed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<SplitKind>,
    /// Seed of the random split (independent of the run seed); default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_seed: Option<u64>,
    /// Explicit test data, in the format of `[data]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test: Option<DataConfig>,
    /// Equal-width confidence bins on [0, 1] for ECE and MCE.
    #[serde(default = "default_calibration_bins")]
    pub calibration_bins: usize,
    /// At most this many draws (evenly spaced over the pooled draws) enter the test-split
    /// metrics, whose cost is draws × test rows × features.
    #[serde(default = "default_predictive_draws")]
    pub predictive_draws: usize,
}

/// Which rows `test_fraction` holds out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SplitKind {
    /// The last round(fraction·N) rows (training keeps the first ones).
    Last,
    /// A uniformly random subset of that size, from `split_seed`.
    Random,
}

impl Default for EvaluationConfig {
    /// No reference, no test split; the default bins and predictive draws.
    fn default() -> Self {
        Self {
            reference: None,
            test_fraction: None,
            split: None,
            split_seed: None,
            test: None,
            calibration_bins: default_calibration_bins(),
            predictive_draws: default_predictive_draws(),
        }
    }
}

fn default_calibration_bins() -> usize {
    sgmcmc::diagnostics::accuracy::CALIBRATION_BINS
}

/// The `[tune]` table of `sgmcmc tune` (reference §5): the grid of arms and MAMBA's settings
/// (give exactly one budget), plus the settings of the baselines in `[tune.grid_search]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TuneConfig {
    /// R: the thread-CPU seconds the winning arm runs for over all rounds when M is a power of
    /// η (the paper's budget, e.g. 1 or 10); T = r₀·M·K with r₀ = R / Σ_{i<K} ηⁱ.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_seconds: Option<f64>,
    /// T: the total thread-CPU seconds over all arms and rounds, instead of R.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_seconds: Option<f64>,
    /// R in per-datum gradient evaluations (reproducible from the seed), instead of seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_gradient_evaluations: Option<f64>,
    /// T in per-datum gradient evaluations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_gradient_evaluations: Option<f64>,
    /// Pruning rate η ≥ 2: each round keeps ⌊|Sᵢ|/η⌋ arms.
    #[serde(default = "default_eta")]
    pub eta: usize,
    /// `"ksd"` (default), `"fssd"` (FSSD-opt, J = 10, Gaussian kernel) or `"fssd_imq"`
    /// (FSSD-opt with the paper's IMQ kernel).
    #[serde(default)]
    pub metric: TuneMetric,
    /// Keep every `thin`-th iterate of a round for the metric (and the winner's draws).
    #[serde(default = "default_tune_thin")]
    pub thin: usize,
    /// Score at most this many of an arm's kept draws per round (evenly spaced) for the
    /// metric; unset: all. For models with D in the tens of thousands, where the KSD costs
    /// ≈ 4P²D FLOPs for P draws.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_scored_draws: Option<usize>,
    /// Scores at the kept draws: `"control_variates"` (default; a fixed random subsample of
    /// `score_subsample` points about the MAP, the same for every arm) or `"full"` (exact).
    #[serde(default)]
    pub scores: TuneScores,
    /// Subsample size m of the control-variate scores (cost m per-datum gradients per draw).
    #[serde(default = "default_score_subsample")]
    pub score_subsample: usize,
    /// Threads the arms of a round run on (default: every core). Each arm is charged the CPU
    /// time of its own thread, so the thread count does not change which arm wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    /// Compatibility (`mamba_float_round_count`): K = int(log M / log η) in floating point.
    #[serde(default)]
    pub float_round_count: bool,
    /// The arms: the Cartesian product of these values.
    pub grid: TuneGrid,
    /// The grid-search baseline (`sgmcmc tune --method grid-search`) and the batch size of the
    /// 1/N heuristic.
    #[serde(default)]
    pub grid_search: GridSearchConfig,
}

impl TuneConfig {
    /// A `[tune]` table over `grid` with every other key at its default (no budget yet).
    pub fn new(grid: TuneGrid) -> Self {
        Self {
            budget_seconds: None,
            total_seconds: None,
            budget_gradient_evaluations: None,
            total_gradient_evaluations: None,
            eta: default_eta(),
            metric: TuneMetric::default(),
            thin: default_tune_thin(),
            max_scored_draws: None,
            scores: TuneScores::default(),
            score_subsample: default_score_subsample(),
            threads: None,
            float_round_count: false,
            grid,
            grid_search: GridSearchConfig::default(),
        }
    }
}

fn default_eta() -> usize {
    3
}

fn default_tune_thin() -> usize {
    10
}

fn default_score_subsample() -> usize {
    1000
}

/// The tuning metric (lower is better).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TuneMetric {
    /// KSD, IMQ kernel c = 1, β = −1/2, V-statistic, square root (reference §4.2).
    #[default]
    Ksd,
    /// FSSD-opt with J = 10 locations (reference §4.5) and a Gaussian kernel whose width
    /// starts at the median heuristic of each arm's draws and is optimised with the
    /// locations (kgof's FSSD-opt). A width that follows the draws is what lets FSSD rank an
    /// arm whose draws spread far beyond the posterior last (`docs/experiments/mamba_fssd.md`).
    Fssd,
    /// FSSD-opt with the MAMBA paper's IMQ kernel, c = 1: on posteriors far narrower than 1
    /// it ranks the largest steps first (kept to reproduce that; see `fssd`).
    FssdImq,
}

/// `[tune.grid_search]`: the baselines of reference §5.5.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GridSearchConfig {
    /// Iterations per grid point.
    #[serde(default = "default_grid_iterations")]
    pub iterations: u64,
    /// Instead of `iterations`: gradient estimates per grid point, so that SGHMC with L inner
    /// steps runs ⌈estimates/L⌉ iterations and every point gets the same number of estimates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimates: Option<u64>,
    /// The batch size of every grid point and of the 1/N heuristic (the grid's own batch sizes
    /// are not searched).
    #[serde(default = "default_grid_batch")]
    pub batch_size: BatchSize,
    /// Standard deviation of the Gaussian noise added to the MAP to start each grid point.
    #[serde(default = "default_start_noise")]
    pub start_noise: f64,
    /// `"log_loss"` (the test log-loss), `"rmse"` (regression), `"accuracy"` or `"ece"`
    /// (classifiers), all on the test split of `[evaluation]`; or `"ksd"`. Default: log-loss
    /// when there is a test split, else KSD.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub select_by: Option<GridSelection>,
}

impl Default for GridSearchConfig {
    fn default() -> Self {
        Self {
            iterations: default_grid_iterations(),
            estimates: None,
            batch_size: default_grid_batch(),
            start_noise: default_start_noise(),
            select_by: None,
        }
    }
}

fn default_grid_iterations() -> u64 {
    5000
}

fn default_grid_batch() -> BatchSize {
    BatchSize::Fraction(0.1)
}

fn default_start_noise() -> f64 {
    0.2
}

/// How grid search picks its winner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GridSelection {
    /// The MAMBA code's test log-loss: mean over draws of the mean test NLL.
    LogLoss,
    /// The KSD (with the `[tune]` scores).
    Ksd,
    /// Regression: the test RMSE of the posterior-mean prediction (PMF, reference §5.5).
    Rmse,
    /// Classifiers: the test error 1 − accuracy of the posterior-mean class probabilities.
    Accuracy,
    /// Classifiers: the test ECE (`[evaluation] calibration_bins` equal-width bins).
    Ece,
}

impl GridSelection {
    /// Whether the selection reads the test split.
    pub fn needs_test_split(self) -> bool {
        !matches!(self, GridSelection::Ksd)
    }

    /// The config spelling.
    pub fn name(self) -> &'static str {
        match self {
            GridSelection::LogLoss => "log_loss",
            GridSelection::Ksd => "ksd",
            GridSelection::Rmse => "rmse",
            GridSelection::Accuracy => "accuracy",
            GridSelection::Ece => "ece",
        }
    }
}

/// Default of `[evaluation] predictive_draws`.
pub const DEFAULT_PREDICTIVE_DRAWS: usize = 1000;

fn default_predictive_draws() -> usize {
    DEFAULT_PREDICTIVE_DRAWS
}

/// Seed, chains, budget, burn-in, thinning and initialisation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    /// The seed every random stream derives from.
    #[serde(default)]
    pub seed: u64,
    /// Number of chains (run in parallel).
    #[serde(default = "default_chains")]
    pub chains: usize,
    /// Iterations per chain after burn-in (default 10,000 unless `budget_seconds` is set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations: Option<usize>,
    /// Wall-clock budget per chain in seconds, instead of `iterations`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_seconds: Option<f64>,
    /// Iterations discarded at the start of each chain.
    #[serde(default)]
    pub burn_in: usize,
    /// Keep every `thin`-th iteration.
    #[serde(default = "one_usize")]
    pub thin: usize,
    /// Starting point: `"map"`, `"prior"`, `"zeros"`, or `{ file = "theta0.npy" }` (one row
    /// shared by all chains, or one row per chain).
    #[serde(default)]
    pub init: InitConfig,
    /// The MAP search (the start of `init = "map"` and the centre of control variates):
    /// `"lbfgs"` on the full data (default) or `"adam"` on minibatches (reference §3.2, the
    /// MAMBA experiments' way).
    #[serde(default)]
    pub map_optimizer: MapOptimizer,
    /// Iterations of the MAP search (default: 2,000 for L-BFGS, 5,000 for Adam). An L-BFGS
    /// iteration costs about one full-data gradient, which for a large model (the 79,510-weight
    /// BNN on 60,000 images: ≈ 0.5 s) makes the default minutes long; an Adam step costs one
    /// minibatch gradient.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map_iterations: Option<usize>,
    /// Adam's constant learning rate (default 1e-2); only with `map_optimizer = "adam"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map_learning_rate: Option<f64>,
    /// Adam's minibatch size (default 1 %); only with `map_optimizer = "adam"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map_batch_size: Option<BatchSize>,
    /// The per-parameter summary (mean, sd, quantiles, ESS, R-hat) after the run; `false`
    /// skips it (for D = 52,580 and 4,000 draws it takes ≈ 15 s).
    #[serde(default = "default_true")]
    pub summary: bool,
    /// A constant preconditioner (`sgmcmc::precondition`): the sampler runs in φ with
    /// θ = θ̂ + Lφ, LLᵀ the Laplace covariance at the MAP. `"auto"` (default): `"dense"` or
    /// `"diagonal"` by D on the default path (no `[sampler]` table), none with a `[sampler]`
    /// table, whose steps keep their meaning. With a preconditioner, steps are in the units
    /// of φ, where the posterior has roughly unit scale in every direction.
    #[serde(default, skip_serializing_if = "PreconditionerChoice::is_auto")]
    pub preconditioner: PreconditionerChoice,
    /// The bias check after the run (`sgmcmc::check`: a KSD goodness-of-fit test of the
    /// draws against the posterior); on by default, skipped above D = 5,000.
    #[serde(default = "default_true")]
    pub bias_check: bool,
    /// The longest time, in seconds, between two checkpoints of a chain that writes to an
    /// output directory (each chunk of draws written is one too): a killed run loses at most
    /// this much sampling, and `--resume` continues it.
    #[serde(default = "default_checkpoint_seconds")]
    pub checkpoint_seconds: f64,
}

/// Default of `[run] checkpoint_seconds`.
pub const DEFAULT_CHECKPOINT_SECONDS: f64 = 5.0;

fn default_checkpoint_seconds() -> f64 {
    DEFAULT_CHECKPOINT_SECONDS
}

/// `[run] preconditioner`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PreconditionerChoice {
    /// Dense or diagonal by D on the default path; none with a `[sampler]` table.
    #[default]
    Auto,
    /// None: the sampler runs in θ.
    None,
    /// The Cholesky factor of the Laplace covariance.
    Dense,
    /// The Laplace sds.
    Diagonal,
}

impl PreconditionerChoice {
    fn is_auto(&self) -> bool {
        *self == PreconditionerChoice::Auto
    }

    /// The shape asked for; `auto` is `auto_shape` (the default path's choice by D, or none
    /// with a `[sampler]` table).
    pub fn shape(
        self,
        auto_shape: Option<sgmcmc::precondition::PreconditionerShape>,
    ) -> Option<sgmcmc::precondition::PreconditionerShape> {
        use sgmcmc::precondition::PreconditionerShape;
        match self {
            PreconditionerChoice::Auto => auto_shape,
            PreconditionerChoice::None => None,
            PreconditionerChoice::Dense => Some(PreconditionerShape::Dense),
            PreconditionerChoice::Diagonal => Some(PreconditionerShape::Diagonal),
        }
    }
}

fn default_true() -> bool {
    true
}

impl Default for RunConfig {
    fn default() -> Self {
        Self {
            seed: 0,
            chains: default_chains(),
            iterations: None,
            budget_seconds: None,
            burn_in: 0,
            thin: 1,
            init: InitConfig::default(),
            map_optimizer: MapOptimizer::default(),
            map_iterations: None,
            map_learning_rate: None,
            map_batch_size: None,
            summary: true,
            preconditioner: PreconditionerChoice::Auto,
            bias_check: true,
            checkpoint_seconds: DEFAULT_CHECKPOINT_SECONDS,
        }
    }
}

/// Default of `[run] map_iterations` with L-BFGS.
pub const DEFAULT_MAP_ITERATIONS: usize = 2_000;

/// The optimiser of the MAP search (`[run] map_optimizer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MapOptimizer {
    /// L-BFGS with a strong Wolfe line search on the full-data log posterior.
    #[default]
    Lbfgs,
    /// Adam on minibatch gradients (reference §3.2).
    Adam,
}

/// How a run finds its MAP, resolved from `[run]` (see [`RunConfig::map_search`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MapSearch {
    /// L-BFGS for at most this many iterations.
    Lbfgs {
        /// Iteration cap.
        iterations: usize,
    },
    /// Adam with these settings.
    Adam(sgmcmc::optim::AdamMapOptions),
}

impl RunConfig {
    /// The MAP search these keys ask for, with defaults filled in; an error names a key that
    /// is out of range or that does not belong to the chosen optimiser.
    pub fn map_search(&self) -> Result<MapSearch, String> {
        if self.map_iterations == Some(0) {
            return Err("[run] map_iterations must be at least 1".into());
        }
        match self.map_optimizer {
            MapOptimizer::Lbfgs => {
                for (key, given) in [
                    ("map_learning_rate", self.map_learning_rate.is_some()),
                    ("map_batch_size", self.map_batch_size.is_some()),
                ] {
                    if given {
                        return Err(format!(
                            "[run] {key} is an Adam setting, but map_optimizer is \"lbfgs\" \
                             (set map_optimizer = \"adam\" or remove {key})"
                        ));
                    }
                }
                Ok(MapSearch::Lbfgs {
                    iterations: self.map_iterations.unwrap_or(DEFAULT_MAP_ITERATIONS),
                })
            }
            MapOptimizer::Adam => {
                let defaults = sgmcmc::optim::AdamMapOptions::default();
                let learning_rate = self.map_learning_rate.unwrap_or(defaults.learning_rate);
                if !(learning_rate.is_finite() && learning_rate > 0.0) {
                    return Err(format!(
                        "[run] map_learning_rate must be finite and > 0, got {learning_rate}"
                    ));
                }
                Ok(MapSearch::Adam(sgmcmc::optim::AdamMapOptions {
                    learning_rate,
                    batch: self.map_batch_size.unwrap_or(defaults.batch),
                    iterations: self.map_iterations.unwrap_or(defaults.iterations),
                }))
            }
        }
    }
}

fn default_chains() -> usize {
    4
}

fn one_usize() -> usize {
    1
}

/// Default number of iterations when neither `iterations` nor `budget_seconds` is given.
pub const DEFAULT_ITERATIONS: usize = 10_000;

/// Where chains start: `"map"` (default), `"laplace"`, `"prior"`, `"zeros"`, or
/// `{ file = "theta0.npy" }`.
#[derive(Debug, Clone, PartialEq)]
pub enum InitConfig {
    /// A keyword.
    Keyword(InitKeyword),
    /// A file with D values (`.npy`, or text with numbers separated by commas or spaces), one
    /// row shared by all chains or one row per chain.
    File {
        /// Path of the file.
        file: PathBuf,
    },
}

impl Default for InitConfig {
    fn default() -> Self {
        InitConfig::Keyword(InitKeyword::Map)
    }
}

impl Serialize for InitConfig {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            InitConfig::Keyword(k) => k.serialize(s),
            InitConfig::File { file } => {
                use serde::ser::SerializeMap;
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("file", file)?;
                m.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for InitConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = InitConfig;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("\"map\", \"laplace\", \"prior\", \"zeros\" or { file = \"...\" }")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                match v {
                    "map" => Ok(InitConfig::Keyword(InitKeyword::Map)),
                    "laplace" => Ok(InitConfig::Keyword(InitKeyword::Laplace)),
                    "prior" => Ok(InitConfig::Keyword(InitKeyword::Prior)),
                    "zeros" => Ok(InitConfig::Keyword(InitKeyword::Zeros)),
                    _ => Err(E::custom(format!(
                        "init: unknown value {v:?}; expected \"map\", \"laplace\", \"prior\", \"zeros\" or {{ file = \"...\" }}"
                    ))),
                }
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut file = None;
                while let Some(key) = map.next_key::<String>()? {
                    if key == "file" {
                        file = Some(map.next_value::<PathBuf>()?);
                    } else {
                        return Err(serde::de::Error::custom(format!(
                            "init: unknown key `{key}`, expected `file`"
                        )));
                    }
                }
                file.map(|file| InitConfig::File { file })
                    .ok_or_else(|| serde::de::Error::custom("init: missing `file`"))
            }
        }
        d.deserialize_any(V)
    }
}

/// Initialisation keywords.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InitKeyword {
    /// The MAP (found by L-BFGS on the full data); every chain starts there.
    Map,
    /// An independent draw per chain from the Laplace approximation N(θ̂, Σ̂) at the MAP (the
    /// default path's start: the chains begin spread like the posterior, so R-hat can see
    /// chains that do not meet).
    Laplace,
    /// An independent prior draw per chain.
    Prior,
    /// θ = 0.
    Zeros,
}

/// A config that cannot be read or is invalid; one line naming the file, line and problem.
#[derive(Debug, thiserror::Error)]
#[error("{path}{location}: {message}")]
pub struct ConfigError {
    /// The run file.
    pub path: String,
    /// `:line:column` when known.
    pub location: String,
    /// What is wrong.
    pub message: String,
}

/// Parse a TOML document into `T`; errors carry `path:line:col`.
fn parse_toml<T: serde::de::DeserializeOwned>(text: &str, path: &str) -> Result<T, ConfigError> {
    toml::from_str(text).map_err(|e| {
        let location = e
            .span()
            .map(|s| {
                let before = &text[..s.start.min(text.len())];
                let line = before.matches('\n').count() + 1;
                let col = before.len() - before.rfind('\n').map_or(0, |p| p + 1) + 1;
                format!(":{line}:{col}")
            })
            .unwrap_or_default();
        ConfigError {
            path: path.into(),
            location,
            message: e.message().replace('\n', " "),
        }
    })
}

/// The text of a run file, or an error naming it.
fn read_text(path: &Path) -> Result<String, ConfigError> {
    sgmcmc::io::read_regular_to_string(path).map_err(|e| ConfigError {
        path: path.display().to_string(),
        location: String::new(),
        message: format!("cannot read: {e}"),
    })
}

/// Resolve the `[data]` table's relative paths against `base`.
fn resolve_data_paths(data: &mut DataConfig, base: &Path) {
    for p in [
        &mut data.features,
        &mut data.targets,
        &mut data.table,
        &mut data.libsvm,
        &mut data.bike_sharing,
        &mut data.nba_games,
        &mut data.movielens,
        &mut data.mnist,
    ]
    .into_iter()
    .flatten()
    {
        if p.is_relative() {
            *p = base.join(&*p);
        }
    }
}

impl Config {
    /// The `[gradient]` table, or the defaults (minibatch) when the file has none.
    pub fn gradient(&self) -> &EstimatorSettings {
        static DEFAULT: std::sync::LazyLock<EstimatorSettings> =
            std::sync::LazyLock::new(EstimatorSettings::default);
        self.gradient.as_ref().unwrap_or(&DEFAULT)
    }

    /// Parse a run file from text; `path` names it in errors.
    pub fn from_toml(text: &str, path: &str) -> Result<Self, ConfigError> {
        parse_toml(text, path)
    }

    /// The run file as TOML text (what `from_toml` reads back to an equal value).
    pub fn to_toml(&self) -> Result<String, ConfigError> {
        toml::to_string(self).map_err(|e| ConfigError {
            path: String::new(),
            location: String::new(),
            message: format!("cannot write the run file: {e}"),
        })
    }

    /// Read and parse a run file; relative data paths are resolved against its directory.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = read_text(path)?;
        let mut cfg = Self::from_toml(&text, &path.display().to_string())?;
        let base = path.parent().unwrap_or(Path::new("."));
        cfg.resolve_paths(base);
        Ok(cfg)
    }

    fn resolve_paths(&mut self, base: &Path) {
        resolve_data_paths(&mut self.data, base);
        if let InitConfig::File { file } = &mut self.run.init
            && file.is_relative()
        {
            *file = base.join(&*file);
        }
        if let Some(ev) = &mut self.evaluation {
            if let Some(p) = &mut ev.reference
                && p.is_relative()
            {
                *p = base.join(&*p);
            }
            if let Some(test) = &mut ev.test {
                resolve_data_paths(test, base);
            }
        }
    }
}

fn one() -> f64 {
    1.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(sampler: &str, gradient: &str) -> Result<Config, ConfigError> {
        let text = format!(
            "[data]\nsynthetic = {{ rows = 10, dim = 2 }}\n\n[model]\nkind = \"logistic\"\n\n\
             [sampler]\n{sampler}\n\n[gradient]\n{gradient}\n"
        );
        Config::from_toml(&text, "run.toml")
    }

    #[test]
    fn schedules_parse_with_their_defaults() {
        let cfg = parse(
            "kind = \"sgld\"\nstep_size = 1e-3\n\
             schedule = { kind = \"polynomial\", a = 1e-4, b = 10, gamma = 0.6 }",
            "",
        )
        .unwrap();
        assert_eq!(
            cfg.sampler.as_ref().unwrap().schedule,
            Some(ScheduleSettings::Polynomial {
                a: Some(1e-4),
                b: 10.0,
                gamma: 0.6
            })
        );
        assert!(matches!(
            cfg.sampler.as_ref().unwrap().method,
            SamplerSettings::Sgld { .. }
        ));
        let cfg = parse(
            "kind = \"sghmc\"\nstep_size = 1e-5\ninner_steps = 3\n\
             schedule = { kind = \"polynomial\" }",
            "",
        )
        .unwrap();
        assert_eq!(
            cfg.sampler.as_ref().unwrap().schedule,
            Some(ScheduleSettings::Polynomial {
                a: None,
                b: 0.0,
                gamma: 0.55
            })
        );
        // The sub-table form, and a cyclical schedule with and without K.
        let cfg = parse(
            "kind = \"baoab\"\nstep_size = 0.1\nfriction = 1.0\n\n\
             [sampler.schedule]\nkind = \"cyclical\"\ncycles = 4",
            "",
        )
        .unwrap();
        assert_eq!(
            cfg.sampler.as_ref().unwrap().schedule,
            Some(ScheduleSettings::Cyclical {
                cycles: 4,
                iterations: None
            })
        );
        let cfg = parse(
            "kind = \"sgld\"\nstep_size = 1e-3\n\
             schedule = { kind = \"cyclical\", cycles = 2, iterations = 500 }",
            "",
        )
        .unwrap();
        assert_eq!(
            cfg.sampler.as_ref().unwrap().schedule,
            Some(ScheduleSettings::Cyclical {
                cycles: 2,
                iterations: Some(500)
            })
        );
        let cfg = parse(
            "kind = \"sgld\"\nstep_size = 1e-3\nschedule = { kind = \"constant\" }",
            "",
        )
        .unwrap();
        assert_eq!(
            cfg.sampler.as_ref().unwrap().schedule,
            Some(ScheduleSettings::Constant)
        );
        // No schedule, and the round trip through serde keeps the table's shape.
        let cfg = parse("kind = \"sgld\"\nstep_size = 1e-3", "").unwrap();
        assert_eq!(cfg.sampler.as_ref().unwrap().schedule, None);
        let back: Config = toml::from_str(&toml::to_string(&cfg).unwrap()).unwrap();
        assert_eq!(back, cfg);
    }

    #[test]
    fn bad_schedules_and_misspelt_keys_are_named() {
        let err = |sampler: &str| parse(sampler, "").unwrap_err().to_string();
        let e = err(
            "kind = \"sgld\"\nstep_size = 1e-3\nschedule = { kind = \"polynomial\", gama = 0.5 }",
        );
        assert!(e.contains("run.toml:") && e.contains("gama"), "{e}");
        let e = err("kind = \"sgld\"\nstep_size = 1e-3\nschedule = { kind = \"linear\" }");
        assert!(e.contains("linear") && e.contains("cyclical"), "{e}");
        let e = err("kind = \"sgld\"\nstep_size = 1e-3\nschedule = { kind = \"cyclical\" }");
        assert!(e.contains("cycles"), "{e}");
        let e = err(
            "kind = \"sgld\"\nstep_size = 1e-3\nschedule = { kind = \"cyclical\", cycles = -2 }",
        );
        assert!(e.contains("-2") || e.contains("cycles"), "{e}");
        // Unknown keys of the method are still rejected next to a schedule.
        let e = err("kind = \"sgld\"\nstpe_size = 1e-3\nschedule = { kind = \"constant\" }");
        assert!(e.contains("stpe_size"), "{e}");
        let e = err("kind = \"sgld\"\nstep_size = 1e-3\nshedule = { kind = \"constant\" }");
        assert!(e.contains("shedule"), "{e}");
    }

    /// `scheme` reads "uniform" (the default) or "block", names a bad value, and refuses
    /// `with_replacement` beside blocks.
    #[test]
    fn minibatch_scheme_parses() {
        use sgmcmc::estimator::MinibatchScheme;
        let sgld = "kind = \"sgld\"\nstep_size = 1e-3";
        let cfg = parse(sgld, "scheme = \"block\"").unwrap();
        assert_eq!(cfg.gradient().scheme, MinibatchScheme::Block);
        let cfg = parse(sgld, "").unwrap();
        assert_eq!(cfg.gradient().scheme, MinibatchScheme::Uniform);
        let e = parse(sgld, "scheme = \"blocks\"").unwrap_err().to_string();
        assert!(e.contains("blocks") && e.contains("block"), "{e}");
        let both = parse(sgld, "scheme = \"block\"\nwith_replacement = true").unwrap();
        let model = sgmcmc::model::GaussianModel::new(
            sgmcmc::data::Features::F64(
                sgmcmc::data::Matrix::from_vec(vec![0.0, 1.0], 2, 1).unwrap(),
            ),
            &[1.0],
            1.0,
        )
        .unwrap();
        let e = both.gradient().check(&model).unwrap_err().to_string();
        assert!(e.contains("with_replacement") && e.contains("block"), "{e}");
    }

    #[test]
    fn compatibility_switches_parse() {
        let cfg = parse(
            "kind = \"sghmc\"\nstep_size = 1e-5\ninner_steps = 3\nshared_minibatch = true",
            "with_replacement = true",
        )
        .unwrap();
        assert!(cfg.gradient().with_replacement);
        assert!(matches!(
            cfg.sampler.as_ref().unwrap().method,
            SamplerSettings::Sghmc {
                shared_minibatch: true,
                ..
            }
        ));
        let cfg = parse(
            "kind = \"baoab\"\nstep_size = 0.1\nfriction = 1.0\nnoise_std_scaled_by_tau = true",
            "",
        )
        .unwrap();
        assert!(matches!(
            cfg.sampler.as_ref().unwrap().method,
            SamplerSettings::Baoab {
                noise_std_scaled_by_tau: true,
                ..
            }
        ));
        assert!(!cfg.gradient().with_replacement);
        // Each switch belongs to its own sampler.
        let e = parse(
            "kind = \"sgld\"\nstep_size = 1e-3\nshared_minibatch = true",
            "",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("shared_minibatch"), "{e}");
    }
}
