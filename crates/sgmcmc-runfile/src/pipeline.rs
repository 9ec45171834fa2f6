//! From a [`Config`] to draws: load and validate the data, build the model, the per-chain
//! samplers and estimators, choose starting points, run, and summarise. The CLI's `run` and
//! `demo` commands are thin wrappers around [`execute`].

use crate::config::{
    Config, DataConfig, InitConfig, InitKeyword, MapSearch, ModelConfig, NoiseVariance, PriorKind,
    RegressionPriors, SamplerTable, SyntheticGenerator,
};
use serde::Serialize;
use sgmcmc::check::{BiasCheck, BiasCheckSettings, bias_check};
use sgmcmc::data::{self, DataError, Dataset, Features, Matrix};
use sgmcmc::estimator::EstimatorError;
use sgmcmc::io::{
    Constrained, DrawSink, MemorySink, ParameterRow, RunDirectory, SinkError, Tee, ZarrSink,
    summarize_model_draws,
};
use sgmcmc::model::constraint::constrain_draws;
use sgmcmc::model::sparse_regression::SYNTHETIC_BETA;
use sgmcmc::model::{
    Bernoulli, BradleyTerry, CauchyPrior, CoefficientPrior, Family, GaussianModel, Glm, Model,
    ModelError, NoiseModel, Normal, NormalMixture, NormalPrior, ParameterPrior, Pmf, PmfSettings,
    Poisson, Predictive, SparseRegression, SparseRegressionSettings,
};
use sgmcmc::optim::lbfgs::LbfgsOptions;
use sgmcmc::optim::{MapError, MapResult, find_map, find_map_adam};
use sgmcmc::precondition::{
    DENSE_MAX_DIM, PreconditionedKernel, PreconditionedModel, Preconditioner, PreconditionerShape,
};
use sgmcmc::reference::{LaplaceApproximation, diagonal_curvature, laplace_at};
use sgmcmc::runner::{
    self, Budget, Chain, ChainKernel, ChainStart, Progress, RunError, RunReport, RunSettings,
    SamplerKernel, checkpoint_header,
};
use sgmcmc::sampler::{DrawStatistics, Sampler, SamplerError, Scheduled, StepSchedule};
use sgmcmc::settings::{SamplerSettings, SettingsError};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

mod coreset;
pub mod default_path;
mod evaluation;
pub mod resume;
mod tune;

pub use coreset::{
    CoresetCheckpointing, CoresetModel, CoresetOutcome, build_optimiser, run_coreset,
    run_coreset_file,
};
pub use default_path::DefaultPathReport;
pub use evaluation::{
    Evaluation, EvaluationOutcome, EvaluationReport, LoadedReference, Prepared, ReferenceReport,
    RunModel, TestReport, TestSplit, has_predictive, prepare, prepare_data, prepare_model,
    split_dataset, test_rows, thin_pooled,
};
pub use resume::{
    RunOutput, record_reference, record_run, record_tuning, recorded_reference, recorded_run,
    recorded_tuning,
};
pub use tune::{
    TUNE_PROGRESS, TuneMethod, TuneSession, Tuned, tune_budget, tune_metric, winner_config,
};

/// Anything that stops a run, as one line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PipelineError {
    /// Bad configuration.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// Bad or unreadable data.
    #[error(transparent)]
    Data(#[from] DataError),
    /// The data do not fit the model, or a bad model setting.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// Bad estimator setting (e.g. batch larger than N).
    #[error(transparent)]
    Estimator(#[from] EstimatorError),
    /// Bad sampler setting (e.g. step size ≤ 0).
    #[error(transparent)]
    Sampler(#[from] SamplerError),
    /// The MAP could not be found.
    #[error(transparent)]
    Map(#[from] MapError),
    /// The run failed.
    #[error(transparent)]
    Run(#[from] RunError),
    /// Output could not be written.
    #[error(transparent)]
    Sink(#[from] SinkError),
    /// Tuning failed.
    #[error(transparent)]
    Tune(#[from] sgmcmc::tuning::TuneError),
    /// A `[sampler]` or `[gradient]` table that cannot be built.
    #[error("[{table}] {source}")]
    Settings {
        /// The run-file table.
        table: &'static str,
        /// What is wrong.
        source: SettingsError,
    },
    /// Coreset construction or the coreset run (`[coreset]`).
    #[error("[coreset] {0}")]
    Coreset(#[from] sgmcmc::coreset::CoresetError),
    /// `[coreset.optimiser]` cannot be built.
    #[error("[coreset.optimiser] {0}")]
    CoresetOptimiser(#[from] sgmcmc::coreset::OptimiserError),
    /// `[coreset.kernel]` cannot be built.
    #[error("[coreset.kernel] {0}")]
    CoresetKernel(#[from] sgmcmc::coreset::KernelError),
    /// The reference moments of `[evaluation] reference` cannot be read or used.
    #[error("[evaluation] {0}")]
    Reference(Box<dyn std::error::Error + Send + Sync>),
    /// A file that cannot be read or written.
    #[error("{}: {action}: {source}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// "cannot read" or "cannot write".
        action: &'static str,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The Laplace approximation (of a preconditioner or `init = "laplace"`) failed.
    #[error(transparent)]
    Laplace(#[from] sgmcmc::reference::LaplaceError),
    /// The preconditioner could not be built.
    #[error(transparent)]
    Preconditioner(#[from] sgmcmc::precondition::PreconditionerError),
    /// The run file's tables do not fit together or the data; the message names the table
    /// and key.
    #[error("{0}")]
    RunFile(String),
}

/// Load the data named by the `[data]` table and validate it (non-empty, equal row counts,
/// finite values).
pub fn load_data(cfg: &DataConfig) -> Result<Dataset, PipelineError> {
    let given = [
        cfg.features.is_some(),
        cfg.table.is_some(),
        cfg.libsvm.is_some(),
        cfg.synthetic.is_some(),
        cfg.bike_sharing.is_some(),
        cfg.nba_games.is_some(),
        cfg.movielens.is_some(),
        cfg.mnist.is_some(),
    ];
    if given.iter().filter(|&&g| g).count() != 1 {
        return Err(PipelineError::RunFile(
            "[data] needs exactly one of `features` (with optional `targets`), `table`, `libsvm`, `synthetic`, `bike_sharing`, `nba_games`, `movielens` or `mnist`".into(),
        ));
    }
    let ds = if let Some(path) = &cfg.mnist {
        load_mnist(path)?
    } else if let Some(path) = &cfg.bike_sharing {
        data::load_bike_sharing(path)?
    } else if let Some(path) = &cfg.nba_games {
        data::load_nba_games(path)?
    } else if let Some(path) = &cfg.movielens {
        data::load_movielens(path)?
    } else if let Some(s) = &cfg.synthetic {
        if s.rows == 0 || s.dim == 0 {
            return Err(PipelineError::RunFile(
                "[data.synthetic] rows and dim must be at least 1".into(),
            ));
        }
        match s.generator {
            SyntheticGenerator::Standard => {
                data::synthetic::logistic_regression(s.rows, s.dim, s.seed).0
            }
            SyntheticGenerator::Mamba => {
                data::synthetic::correlated_logistic_regression(s.rows, s.dim, s.seed).0
            }
            SyntheticGenerator::GaussianLocation => {
                data::synthetic::gaussian_location(s.rows, s.dim, s.seed)
            }
            SyntheticGenerator::SparseRegression => {
                if s.dim != SYNTHETIC_BETA.len() {
                    return Err(PipelineError::RunFile(format!(
                        "[data.synthetic] generator = \"sparse_regression\" has dim {}, got {}",
                        SYNTHETIC_BETA.len(),
                        s.dim
                    )));
                }
                let m = SparseRegression::synthetic(s.rows, s.seed)?;
                Dataset {
                    features: Features::F64(Matrix::from_vec(
                        m.features().to_vec(),
                        s.rows,
                        s.dim,
                    )?),
                    targets: Some(m.responses().to_vec()),
                    feature_names: Vec::new(),
                    features_source: format!(
                        "synthetic sparse regression data ({} rows, seed {})",
                        s.rows, s.seed
                    ),
                    targets_source: None,
                }
            }
        }
    } else if let Some(path) = &cfg.libsvm {
        data::load_libsvm(path, cfg.n_features)?
    } else if let Some(path) = &cfg.table {
        if cfg.target.is_none() && cfg.targets.is_some() {
            return Err(PipelineError::RunFile(
                "[data] `table` takes `target` (a column name), not `targets`".into(),
            ));
        }
        data::load_csv(path, cfg.target.as_deref())?
    } else {
        let path = cfg.features.as_ref().expect("checked above");
        let mut ds = load_features_file(path)?;
        if let Some(tpath) = &cfg.targets {
            let targets = load_targets_file(tpath, cfg.target.as_deref())?;
            data::check_same_rows(
                &ds.features,
                &ds.features_source,
                &targets,
                &tpath.display().to_string(),
            )?;
            ds.targets = Some(targets);
            ds.targets_source = Some(tpath.display().to_string());
        }
        ds
    };
    data::validate(&ds)?;
    Ok(ds)
}

/// `[data] mnist`: a directory (its `train` split) or a directory joined with a split prefix
/// (`.../train`, `.../t10k`), as f64 pixels /255 and the digit as target.
fn load_mnist(path: &Path) -> Result<Dataset, PipelineError> {
    let (dir, split) = if path.is_dir() {
        (path, "train")
    } else {
        match (path.parent(), path.file_name().and_then(|n| n.to_str())) {
            (Some(dir), Some(split)) if dir.is_dir() => (dir, split),
            _ => {
                return Err(PipelineError::RunFile(format!(
                    "[data] mnist = {}: neither an MNIST directory nor a directory joined with \
                     a split prefix (e.g. .../mnist/train or .../mnist/t10k)",
                    path.display()
                )));
            }
        }
    };
    let (images, labels) = data::idx::mnist_pair::<f64>(dir, split)?;
    Ok(Dataset {
        features: Features::F64(images),
        targets: Some(labels.into_iter().map(f64::from).collect()),
        feature_names: Vec::new(),
        features_source: dir
            .join(format!("{split}-images-idx3-ubyte"))
            .display()
            .to_string(),
        targets_source: Some(
            dir.join(format!("{split}-labels-idx1-ubyte"))
                .display()
                .to_string(),
        ),
    })
}

fn is_npy(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("npy"))
}

fn load_features_file(path: &Path) -> Result<Dataset, PipelineError> {
    if is_npy(path) {
        let features = data::load_npy_features(path)?;
        Ok(Dataset {
            feature_names: Vec::new(),
            features,
            targets: None,
            features_source: path.display().to_string(),
            targets_source: None,
        })
    } else {
        Ok(data::load_csv(path, None)?)
    }
}

fn load_targets_file(path: &Path, column: Option<&str>) -> Result<Vec<f64>, PipelineError> {
    if is_npy(path) {
        return Ok(data::load_npy_vector(path)?);
    }
    let ds = data::load_csv(path, column)?;
    match (ds.targets, &ds.features) {
        (Some(t), _) => Ok(t),
        (None, f) if f.cols() == 1 => {
            let data::Features::F64(m) = f else {
                unreachable!("CSV features are f64")
            };
            Ok(m.as_slice().to_vec())
        }
        (None, f) => Err(PipelineError::RunFile(format!(
            "{}: {} columns; name the response column with `target`",
            path.display(),
            f.cols()
        ))),
    }
}

/// A prior on a regression's coefficients or intercept, checked, its errors naming the group.
fn coefficient_prior(
    prior: ParameterPrior,
    group: &str,
) -> Result<CoefficientPrior, PipelineError> {
    let prior = CoefficientPrior::from(prior);
    prior
        .validate()
        .map_err(|e| PipelineError::RunFile(format!("[model] `priors.{group}`: {e}")))?;
    Ok(prior)
}

/// A GLM of `family` over `data` with the `[model.priors]` of its coefficients and intercept
/// (`default` for the coefficients where none is given; the intercept's own or else the
/// coefficients'). `priors.sigma` belongs to the linear model only, which takes it out first.
fn regression<F: Family + 'static>(
    data: Dataset,
    family: F,
    default: CoefficientPrior,
    intercept: bool,
    priors: &RegressionPriors,
    kind: &str,
) -> Result<Box<dyn Predictive>, PipelineError>
where
    Glm<F>: Predictive,
{
    if priors.sigma.is_some() {
        return Err(PipelineError::RunFile(format!(
            "[model] `priors.sigma` is the noise sd of kind = \"linear\"; kind = \"{kind}\" has \
             none (its groups: coefficients, intercept)"
        )));
    }
    let coefficients = match priors.coefficients {
        Some(p) => coefficient_prior(p, "coefficients")?,
        None => default,
    };
    let model = Glm::new(data, family, coefficients, intercept)?;
    Ok(match priors.intercept {
        Some(_) if !intercept => {
            return Err(PipelineError::RunFile(
                "[model] `priors.intercept` needs `intercept = true`".into(),
            ));
        }
        Some(p) => Box::new(model.with_intercept_prior(coefficient_prior(p, "intercept")?)?),
        None => Box::new(model),
    })
}

/// Build the model of the `[model]` table over `data`.
pub fn build_model(cfg: &ModelConfig, data: Dataset) -> Result<Box<dyn Model>, PipelineError> {
    Ok(match cfg {
        ModelConfig::Gaussian { .. } => Box::new(build_gaussian_model(cfg, data)?),
        ModelConfig::SparseRegression { .. } => Box::new(build_sparse_regression(cfg, data)?),
        ModelConfig::BradleyTerry {
            scale,
            prior_variance,
        } => Box::new(BradleyTerry::new(
            data,
            *scale,
            NormalPrior::new(*prior_variance)?,
        )?),
        ModelConfig::NormalMixture { priors } => {
            if data.targets.is_some() {
                return Err(PipelineError::RunFile(
                    "[model] kind = \"normal_mixture\" takes one column of data and no target"
                        .into(),
                ));
            }
            Box::new(NormalMixture::from_features(&data.features, *priors)?)
        }
        ModelConfig::External {} => return Err(external_model()),
        _ => build_predictive_model(cfg, data)?,
    })
}

fn external_model() -> PipelineError {
    PipelineError::RunFile(
        "[model] kind = \"external\" is a model the caller supplies (the Python package, the Rust \
         API: pipeline::prepare_model); a run file cannot build it"
            .into(),
    )
}

/// The Gaussian location model of a `kind = "gaussian"` table (Σ = I unless given); an error
/// for other kinds.
pub fn build_gaussian_model(
    cfg: &ModelConfig,
    data: Dataset,
) -> Result<GaussianModel, PipelineError> {
    let ModelConfig::Gaussian {
        covariance,
        prior_variance,
    } = cfg
    else {
        return Err(PipelineError::RunFile(
            "this needs the Gaussian location model ([model] kind = \"gaussian\")".into(),
        ));
    };
    let d = data.features.cols();
    let identity: Vec<f64> = (0..d * d)
        .map(|k| if k / d == k % d { 1.0 } else { 0.0 })
        .collect();
    let cov = covariance.as_deref().unwrap_or(&identity);
    Ok(GaussianModel::new(data.features, cov, *prior_variance)?)
}

/// Build the model of the `[model]` table over `data` as a [`Predictive`] model (the GLMs);
/// an error for kinds without a predictive distribution.
pub fn build_predictive_model(
    cfg: &ModelConfig,
    data: Dataset,
) -> Result<Box<dyn Predictive>, PipelineError> {
    Ok(match cfg {
        ModelConfig::Logistic {
            prior_variance,
            intercept,
            prior,
            prior_scale,
            priors,
        } => {
            let default: CoefficientPrior = match (prior, prior_scale) {
                (PriorKind::Normal, None) => NormalPrior::new(*prior_variance)?.into(),
                (PriorKind::Normal, Some(_)) => {
                    return Err(PipelineError::RunFile(
                        "[model] `prior_scale` applies to prior = \"cauchy\" only; the normal \
                         prior takes `prior_variance`"
                            .into(),
                    ));
                }
                (PriorKind::Cauchy, _) if priors.coefficients.is_some() => {
                    return Err(PipelineError::RunFile(
                        "[model] `prior = \"cauchy\"` and `priors.coefficients` both give the \
                         coefficients' prior; give one"
                            .into(),
                    ));
                }
                (PriorKind::Cauchy, scale) => CauchyPrior::new(scale.unwrap_or(1.0))?.into(),
            };
            regression(data, Bernoulli, default, *intercept, priors, "logistic")?
        }
        ModelConfig::Poisson {
            prior_variance,
            intercept,
            link,
            priors,
        } => regression(
            data,
            Poisson::new(*link),
            NormalPrior::new(*prior_variance)?.into(),
            *intercept,
            priors,
            "poisson",
        )?,
        ModelConfig::Linear {
            prior_variance,
            intercept,
            noise_variance,
            log_noise_prior_variance,
            priors,
        } => {
            let noise = match (noise_variance, priors.sigma) {
                (Some(_), Some(_)) => {
                    return Err(PipelineError::RunFile(
                        "[model] `noise_variance` and `priors.sigma` both say how the noise is \
                         treated; give one (a prior on sigma learns sigma)"
                            .into(),
                    ));
                }
                (_, Some(prior)) => NoiseModel::Sigma { prior },
                (None, None) => NoiseModel::Fixed { variance: 1.0 },
                (Some(NoiseVariance::Fixed(v)), None) => NoiseModel::Fixed { variance: *v },
                (Some(NoiseVariance::Learn), None) => NoiseModel::Learned {
                    prior_variance: *log_noise_prior_variance,
                },
            };
            let priors = RegressionPriors {
                sigma: None,
                ..priors.clone()
            };
            regression(
                data,
                Normal::new(noise)?,
                NormalPrior::new(*prior_variance)?.into(),
                *intercept,
                &priors,
                "linear",
            )?
        }
        ModelConfig::NormalMixture { .. } => {
            return Err(PipelineError::Model(ModelError::Unsupported {
                model: "normal_mixture",
                what: "a predictive distribution for held-out rows",
            }));
        }
        ModelConfig::Pmf { .. } => Box::new(build_pmf(cfg, data)?),
        ModelConfig::Bnn {
            hidden,
            prior_variance,
        } => Box::new(sgmcmc::model::Bnn::new(data, *hidden, *prior_variance)?),
        ModelConfig::Gaussian { .. } => {
            return Err(PipelineError::Model(ModelError::Unsupported {
                model: "gaussian",
                what: "a predictive distribution for held-out rows",
            }));
        }
        ModelConfig::BradleyTerry { .. } => {
            return Err(PipelineError::Model(ModelError::Unsupported {
                model: "bradley_terry",
                what: "a predictive distribution for held-out rows",
            }));
        }
        ModelConfig::SparseRegression { .. } => {
            return Err(PipelineError::Model(ModelError::Unsupported {
                model: "sparse_regression",
                what: "a predictive distribution for held-out rows",
            }));
        }
        ModelConfig::External {} => return Err(external_model()),
    })
}

/// The PMF model of a `kind = "pmf"` table over `data`. Missing `users`/`items` come from
/// `u.info` beside the ratings file when the data are a MovieLens file (feature names `user`,
/// `item`, source = the file), else from the largest indices in `data`.
pub fn build_pmf(cfg: &ModelConfig, data: Dataset) -> Result<Pmf, PipelineError> {
    let &ModelConfig::Pmf {
        latent_dim,
        precision,
        hyper_shape,
        hyper_rate,
        mut users,
        mut items,
    } = cfg
    else {
        return Err(PipelineError::RunFile(
            "this needs the PMF model ([model] kind = \"pmf\")".into(),
        ));
    };
    if (users.is_none() || items.is_none()) && data.feature_names == data::MOVIELENS_FEATURES {
        let file = Path::new(&data.features_source);
        if let Some((u, i)) = data::movielens_counts(file)? {
            users = users.or(Some(u));
            items = items.or(Some(i));
        }
    }
    let settings = PmfSettings {
        latent_dim,
        precision,
        hyper_shape,
        hyper_rate,
        users,
        items,
    };
    Ok(Pmf::new(data, settings)?)
}

/// The spike-and-slab regression of a `kind = "sparse_regression"` table over `data` (f64
/// features, targets required); an error for other kinds.
pub fn build_sparse_regression(
    cfg: &ModelConfig,
    data: Dataset,
) -> Result<SparseRegression, PipelineError> {
    let ModelConfig::SparseRegression {
        nu,
        lambda,
        q,
        tau,
        c,
    } = cfg
    else {
        return Err(PipelineError::RunFile(
            "this needs [model] kind = \"sparse_regression\"".into(),
        ));
    };
    let p = data.features.cols();
    let x: Vec<f64> = match &data.features {
        Features::F64(m) => m.as_slice().to_vec(),
        Features::F32(m) => m.as_slice().iter().map(|&v| f64::from(v)).collect(),
        Features::Sparse(m) => m.to_dense().as_slice().to_vec(),
    };
    let y = data.targets.ok_or_else(|| {
        PipelineError::RunFile("sparse_regression needs targets (the responses y)".into())
    })?;
    let settings = SparseRegressionSettings {
        nu: *nu,
        lambda: *lambda,
        q: *q,
        tau: *tau,
        c: *c,
    };
    Ok(SparseRegression::new(x, y, p, settings)?)
}

/// A `[sampler]` table's error.
pub fn sampler_table(source: SettingsError) -> PipelineError {
    PipelineError::Settings {
        table: "sampler",
        source,
    }
}

/// A `[gradient]` table's error.
pub fn gradient_table(source: SettingsError) -> PipelineError {
    PipelineError::Settings {
        table: "gradient",
        source,
    }
}

/// A fresh sampler for one chain as the `[sampler]` table describes: the method, wrapped in
/// [`Scheduled`] when the table has a `schedule` (resolved by [`resolve_schedule`] against the
/// run `settings`).
pub fn build_sampler(
    cfg: &SamplerTable,
    settings: &RunSettings,
) -> Result<Box<dyn Sampler>, PipelineError> {
    let sampler = cfg.method.build().map_err(sampler_table)?;
    match resolve_schedule(cfg, sampler.step_size(), settings)? {
        None => Ok(sampler),
        Some(schedule) => Ok(Box::new(Scheduled::new(sampler, schedule)?)),
    }
}

/// The kernel of one chain as the `[sampler]` and `[gradient]` tables describe: the sampler
/// ([`build_sampler`], with its schedule) driven by its own estimator about `centre`, or
/// minibatch MH (no schedule; an estimator only for a gradient proposal).
pub fn build_chain_kernel<'m>(
    cfg: &Config,
    settings: &RunSettings,
    model: &'m dyn Model,
    centre: Option<&[f64]>,
) -> Result<Box<dyn ChainKernel + Send + 'm>, PipelineError> {
    let table = sampler_of(cfg)?;
    let method = &table.method;
    if method.is_mh() && table.schedule.is_some() {
        return Err(sampler_table(SettingsError::MhSchedule));
    }
    let sampler = if method.is_mh() {
        None
    } else {
        Some(build_sampler(table, settings)?)
    };
    let estimator = if method.uses_gradient() {
        Some(
            cfg.gradient()
                .build(model, centre)
                .map_err(gradient_table)?,
        )
    } else {
        None
    };
    Ok(match (sampler, estimator) {
        (Some(sampler), Some(estimator)) => Box::new(SamplerKernel::new(sampler, estimator)),
        (_, estimator) => Box::new(
            method
                .build_mh(model, estimator)
                .map_err(sampler_table)?
                .with_scheme(cfg.gradient().scheme),
        ),
    })
}

/// The `schedule` of the `[sampler]` table resolved against the method's `step` (in its own
/// units) and the run ([`sgmcmc::settings::ScheduleSettings::resolve`]: a cyclical schedule
/// without `iterations` covers K = burn-in + iterations), or `None` without one.
pub fn resolve_schedule(
    cfg: &SamplerTable,
    step: f64,
    settings: &RunSettings,
) -> Result<Option<StepSchedule>, PipelineError> {
    let total = settings.budget.total_iterations(settings.burn_in);
    cfg.schedule
        .map(|s| s.resolve(step, total))
        .transpose()
        .map_err(sampler_table)
}

/// The `[sampler]` table of a run file that has one (`sgmcmc run` resolves a file without one
/// through the default path first).
pub fn sampler_of(cfg: &Config) -> Result<&SamplerTable, PipelineError> {
    cfg.sampler.as_ref().ok_or_else(|| {
        PipelineError::RunFile(
            "the run file has no [sampler] table (`sgmcmc run` takes the default path without \
             one; this step needs the table)"
                .into(),
        )
    })
}

/// Validate the run, sampler, estimator and MAP settings of `cfg` against `model` before
/// anything runs (a sampler is built once and dropped); the run-level settings.
pub fn check_run(cfg: &Config, model: &dyn Model) -> Result<RunSettings, PipelineError> {
    let settings = run_settings(cfg)?;
    cfg.run.map_search().map_err(PipelineError::RunFile)?;
    let table = sampler_of(cfg)?;
    if table.method.is_mh() {
        if table.schedule.is_some() {
            return Err(sampler_table(SettingsError::MhSchedule));
        }
        table.method.check_for(model).map_err(sampler_table)?;
    } else {
        build_sampler(table, &settings)?;
    }
    cfg.gradient().check(model).map_err(gradient_table)?;
    table
        .method
        .check_with_estimator(cfg.gradient(), model)
        .map_err(sampler_table)?;
    check_run_memory(&settings, model.dim())?;
    Ok(settings)
}

/// Bytes a chain holds apart from its kept draws: a write buffer of the draw store (one chunk,
/// about 1 MiB) and a few dozen vectors of the parameters' length (position, gradient, sampler
/// and estimator state).
pub(crate) fn chain_overhead_bytes(dim: usize) -> usize {
    (1 << 20) + 32 * 8 * dim
}

/// Refuses, before anything is allocated, a run whose chains and kept draws (held in memory for
/// the summary, as well as streamed to the store) would not fit the memory available
/// (`data::available_memory`, which reads the cgroup's limit too).
fn check_run_memory(settings: &RunSettings, dim: usize) -> Result<(), PipelineError> {
    let Some(available) = data::available_memory() else {
        return Ok(());
    };
    let kept = match settings.budget {
        Budget::Iterations(n) => n / settings.thin.max(1),
        _ => 0,
    };
    let per_chain = (kept as u128) * (dim as u128) * 8 + chain_overhead_bytes(dim) as u128;
    let needed = per_chain * settings.chains as u128;
    if needed > available as u128 {
        let gb = |b: u128| b as f64 / 1e9;
        return Err(PipelineError::RunFile(format!(
            "[run] {} chains x {kept} kept draws x {dim} parameters need about {:.1} GB of memory \
             (the kept draws are held for the summary, plus about {:.1} MB of buffers and state \
             per chain), but {:.1} GB are available: use fewer chains, fewer iterations or a \
             larger thin",
            settings.chains,
            gb(needed),
            chain_overhead_bytes(dim) as f64 / 1e6,
            gb(available as u128)
        )));
    }
    Ok(())
}

/// Run-level settings from the `[run]` table.
pub fn run_settings(cfg: &Config) -> Result<RunSettings, PipelineError> {
    let r = &cfg.run;
    let budget = match (r.iterations, r.budget_seconds) {
        (Some(_), Some(_)) => {
            return Err(PipelineError::RunFile(
                "[run] give `iterations` or `budget_seconds`, not both".into(),
            ));
        }
        (Some(0), None) => {
            return Err(PipelineError::RunFile(
                "[run] iterations must be at least 1 (a run of 0 iterations keeps no draws)".into(),
            ));
        }
        (Some(n), None) => Budget::Iterations(n),
        (None, Some(s)) if s.is_finite() && s > 0.0 => {
            Budget::WallClock(Duration::from_secs_f64(s))
        }
        (None, Some(s)) => {
            return Err(PipelineError::RunFile(format!(
                "[run] budget_seconds must be > 0, got {s}"
            )));
        }
        (None, None) => Budget::Iterations(crate::config::DEFAULT_ITERATIONS),
    };
    if r.chains == 0 {
        return Err(PipelineError::RunFile(
            "[run] chains must be at least 1".into(),
        ));
    }
    if r.thin == 0 {
        return Err(PipelineError::RunFile(
            "[run] thin must be at least 1".into(),
        ));
    }
    if !(r.checkpoint_seconds.is_finite() && r.checkpoint_seconds > 0.0) {
        return Err(PipelineError::RunFile(format!(
            "[run] checkpoint_seconds must be > 0, got {}",
            r.checkpoint_seconds
        )));
    }
    if let Budget::Iterations(n) = budget
        && n < r.thin
    {
        return Err(PipelineError::RunFile(format!(
            "[run] thin = {} is larger than iterations = {n}: no draw would be kept",
            r.thin
        )));
    }
    Ok(RunSettings {
        seed: r.seed,
        chains: r.chains,
        budget,
        burn_in: r.burn_in,
        thin: r.thin,
    })
}

/// Starting points from a file: one row of D values shared by every chain, or one row per
/// chain (`.npy` of shape D, 1×D or C×D; text with one row per line, values separated by
/// commas or spaces).
fn read_init_file(path: &Path, dim: usize, chains: usize) -> Result<Vec<Vec<f64>>, PipelineError> {
    let shown = path.display();
    let rows: Vec<Vec<f64>> = if is_npy(path) {
        match data::load_npy_features(path)? {
            data::Features::F64(m) if m.cols() == dim || m.rows() * m.cols() == dim => {
                m.as_slice().chunks(dim).map(<[f64]>::to_vec).collect()
            }
            data::Features::F32(m) if m.cols() == dim || m.rows() * m.cols() == dim => m
                .as_slice()
                .chunks(dim)
                .map(|r| r.iter().map(|&v| f64::from(v)).collect())
                .collect(),
            f => {
                return Err(PipelineError::RunFile(format!(
                    "{shown}: init array is {} x {}, the model has {dim} parameters",
                    f.rows(),
                    f.cols()
                )));
            }
        }
    } else {
        let text =
            sgmcmc::io::read_regular_to_string(path).map_err(|source| PipelineError::File {
                path: path.to_path_buf(),
                action: "cannot read the init file",
                source,
            })?;
        let mut rows = Vec::new();
        for (line_no, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let row = line
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|t| !t.is_empty())
                .map(|t| {
                    t.parse::<f64>().map_err(|_| {
                        PipelineError::RunFile(format!(
                            "{shown}: line {}: cannot parse {t:?} as a number",
                            line_no + 1
                        ))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            if row.len() != dim {
                return Err(PipelineError::RunFile(format!(
                    "{shown}: line {}: init row has {} values, the model has {dim} parameters",
                    line_no + 1,
                    row.len()
                )));
            }
            rows.push(row);
        }
        rows
    };
    if rows.len() != 1 && rows.len() != chains {
        return Err(PipelineError::RunFile(format!(
            "{shown}: {} init rows; give 1 (shared) or one per chain ({chains})",
            rows.len()
        )));
    }
    for (r, row) in rows.iter().enumerate() {
        if let Some(k) = row.iter().position(|v| !v.is_finite()) {
            return Err(PipelineError::RunFile(format!(
                "{shown}: row {}, value {}: not finite",
                r + 1,
                k + 1
            )));
        }
    }
    Ok(rows)
}

/// What [`execute`] produced.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// Per-parameter summary over the chains that did not diverge.
    pub parameters: Vec<ParameterRow>,
    /// One chain's iterations per second (mean over chains).
    pub iterations_per_second: f64,
    /// Draws kept over all chains.
    pub draws: usize,
    /// Number of chains.
    pub chains: usize,
    /// Wall-clock seconds of the sampling run (MAP excluded).
    pub seconds: f64,
    /// Chains that diverged.
    pub diverged_chains: Vec<usize>,
    /// Whether a stop request (Ctrl-C) ended the run early; the draws so far are kept.
    pub interrupted: bool,
    /// Chains whose draws the summary uses (those that did not diverge; each truncated to the
    /// shortest of them).
    pub summarised_chains: Vec<usize>,
    /// The MAP, when `init = "map"`.
    pub map: Option<MapResult>,
    /// Seconds spent finding the MAP.
    pub map_seconds: f64,
    /// The runner's per-chain report (iterations, draws, divergences).
    pub run: RunReport,
    /// Accuracy metrics when the config has an `[evaluation]` table ([`execute_prepared`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evaluation: Option<EvaluationOutcome>,
    /// The preconditioner the chains ran with (none: θ itself).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preconditioner: Option<PreconditionerShape>,
    /// √diag of the Laplace covariance at the MAP, when the run formed it (a preconditioner or
    /// `init = "laplace"`): the spread the draws are compared with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub laplace_sd: Option<Vec<f64>>,
    /// The bias check of the draws (`[run] bias_check`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bias_check: Option<BiasCheckOutcome>,
    /// What the default path chose, when the run file had no `[sampler]` table.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_path: Option<DefaultPathReport>,
    /// When the run continued an earlier one (`--resume`): the draws each chain had then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resumed_draws: Option<Vec<usize>>,
}

/// The bias check's result, or why there is none.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum BiasCheckOutcome {
    /// The check ran.
    Done(Box<BiasCheck>),
    /// It was not run (too large a model, too few draws kept); the reason.
    Skipped {
        /// Why.
        reason: String,
    },
}

impl BiasCheckOutcome {
    /// One line for the terminal.
    pub fn describe(&self) -> String {
        match self {
            BiasCheckOutcome::Done(c) => c.describe(),
            BiasCheckOutcome::Skipped { reason } => format!("bias check: skipped ({reason})"),
        }
    }
}

/// The Laplace approximation is formed beside a run that has a MAP but did not need it while
/// its 2D full passes cost at most this many per-datum gradient coordinates (2·D²·N).
pub const LAPLACE_BESIDE_MAX_COST: f64 = 1e10;

/// Models above this many parameters skip the bias check (its cost grows as D × draws² and
/// its scores as D × N per draw).
pub const BIAS_CHECK_MAX_DIM: usize = 5_000;

/// The MAP and Laplace approximation of a run's model, found earlier (e.g. by the default
/// path, or shared by the samplers of an experiment); what is missing is computed when needed.
#[derive(Debug, Clone, Copy, Default)]
pub struct Known<'a> {
    /// The MAP.
    pub map: Option<&'a MapResult>,
    /// The Laplace approximation at that MAP.
    pub laplace: Option<&'a LaplaceApproximation>,
}

/// Run a config on a built model: start points, chains in parallel, draws to memory (and to a
/// Zarr store at `zarr_path` if given), then the summary. Setting `stop` ends every chain at its
/// next iteration; what was drawn is still stored and summarised.
pub fn execute(
    cfg: &Config,
    model: &dyn Model,
    zarr_path: Option<&Path>,
    progress: &dyn Progress,
    stop: &AtomicBool,
) -> Result<Outcome, PipelineError> {
    let output = zarr_path.map(|p| RunOutput::draws_only(p.to_path_buf()));
    execute_keeping_draws(
        cfg,
        model,
        output.as_ref(),
        None,
        Known::default(),
        progress,
        stop,
    )
    .map(|(outcome, _)| outcome)
}

/// [`execute`] on a [`prepare`]d run, then its `[evaluation]` (if any) over the summarised
/// chains' kept draws, stored in [`Outcome::evaluation`].
pub fn execute_prepared(
    cfg: &Config,
    prepared: &Prepared,
    zarr_path: Option<&Path>,
    progress: &dyn Progress,
    stop: &AtomicBool,
) -> Result<Outcome, PipelineError> {
    execute_prepared_keeping_draws(cfg, prepared, zarr_path, progress, stop).map(|(o, _)| o)
}

/// [`execute_prepared`], also returning every chain's kept draws (flat `draws × D`).
pub fn execute_prepared_keeping_draws(
    cfg: &Config,
    prepared: &Prepared,
    zarr_path: Option<&Path>,
    progress: &dyn Progress,
    stop: &AtomicBool,
) -> Result<(Outcome, Vec<Vec<f64>>), PipelineError> {
    execute_prepared_with_sink(
        cfg,
        prepared,
        zarr_path,
        None,
        Known::default(),
        progress,
        stop,
    )
}

/// [`execute_prepared_keeping_draws`], the draws also sent to `extra` (e.g. an
/// [`io::TimingSink`](sgmcmc::io::TimingSink) recording when each was produced). The prepared
/// `[evaluation]` runs only when `cfg` itself keeps its `[evaluation]` table. What is `known`
/// (found earlier for the same model) replaces the L-BFGS search and the Laplace approximation
/// where the run needs them.
pub fn execute_prepared_with_sink(
    cfg: &Config,
    prepared: &Prepared,
    zarr_path: Option<&Path>,
    extra: Option<&dyn DrawSink>,
    known: Known<'_>,
    progress: &dyn Progress,
    stop: &AtomicBool,
) -> Result<(Outcome, Vec<Vec<f64>>), PipelineError> {
    let output = zarr_path.map(|p| RunOutput::draws_only(p.to_path_buf()));
    execute_prepared_into(cfg, prepared, output.as_ref(), extra, known, progress, stop)
}

/// [`execute_prepared_with_sink`] into `output` (draws, and checkpoints if it has a folder for
/// them; continuing an earlier run if it says so).
fn execute_prepared_into(
    cfg: &Config,
    prepared: &Prepared,
    output: Option<&RunOutput>,
    extra: Option<&dyn DrawSink>,
    known: Known<'_>,
    progress: &dyn Progress,
    stop: &AtomicBool,
) -> Result<(Outcome, Vec<Vec<f64>>), PipelineError> {
    let model = prepared.model();
    let (mut outcome, chains) =
        execute_keeping_draws(cfg, model, output, extra, known, progress, stop)?;
    if let (Some(ev), Some(_)) = (&prepared.evaluation, &cfg.evaluation) {
        let kept: Vec<&[f64]> = outcome
            .summarised_chains
            .iter()
            .map(|&c| chains[c].as_slice())
            .collect();
        let names = model.parameter_names();
        // The reference moments are on the constrained scale the names refer to.
        let constrained: Option<Vec<Vec<f64>>> = model
            .is_constrained()
            .then(|| kept.iter().map(|c| constrain_draws(model, c)).collect());
        let reported: Vec<&[f64]> = match &constrained {
            Some(c) => c.iter().map(Vec::as_slice).collect(),
            None => kept.clone(),
        };
        let evaluated = ev.evaluate(prepared.predictive(), &names, &kept, &reported);
        outcome.evaluation = Some(match evaluated {
            Ok(report) => EvaluationOutcome::Done(Box::new(report)),
            Err(e) => EvaluationOutcome::Failed {
                error: e.to_string(),
            },
        });
    }
    Ok((outcome, chains))
}

/// Run a file [`default_path::resolve_if_needed`] returned on its [`prepare`]d model (its
/// `[evaluation]` included), into `output` if given: the MAP and Laplace approximation the
/// default path found are reused, and its report goes into [`Outcome::default_path`].
pub fn execute_resolved(
    cfg: &Config,
    prepared: &Prepared,
    resolved: Option<default_path::Resolved>,
    output: Option<&RunOutput>,
    progress: &dyn Progress,
    stop: &AtomicBool,
) -> Result<(Outcome, Vec<Vec<f64>>), PipelineError> {
    check_run(cfg, prepared.model())?;
    let known = Known {
        map: resolved.as_ref().map(|r| &r.map),
        laplace: resolved.as_ref().and_then(|r| r.laplace.as_ref()),
    };
    let (mut outcome, chains) =
        execute_prepared_into(cfg, prepared, output, None, known, progress, stop)?;
    if let Some(r) = resolved {
        outcome.map_seconds += r.report.map_seconds + r.report.laplace_seconds;
        outcome.default_path = Some(r.report);
    }
    Ok((outcome, chains))
}

/// The MAP a run starts from, from the model's `map_start`: L-BFGS (at most
/// `[run] map_iterations`) or, with `map_optimizer = "adam"`, Adam on minibatches drawn from
/// the run seed's shared-initialisation stream.
pub fn find_run_map(cfg: &Config, model: &dyn Model) -> Result<MapResult, PipelineError> {
    let start = model.map_start();
    match cfg.run.map_search().map_err(PipelineError::RunFile)? {
        MapSearch::Lbfgs { iterations } => {
            let options = LbfgsOptions {
                max_iterations: iterations,
                ..LbfgsOptions::default()
            };
            Ok(find_map(model, &start, &options)?)
        }
        MapSearch::Adam(options) => {
            let mut rng = sgmcmc::rng::stream(cfg.run.seed, sgmcmc::rng::streams::SHARED_INIT);
            Ok(find_map_adam(model, &start, &options, &mut rng)?)
        }
    }
}

/// The preconditioner of `shape` at the mode: from the Laplace approximation (the `known`
/// one, or formed: 2D full passes) up to D = [`DENSE_MAX_DIM`] or when dense is asked;
/// beyond, diagonal from [`diagonal_curvature`] (one pass over the per-datum gradients), with
/// no Laplace approximation.
pub fn preconditioner_at(
    model: &dyn Model,
    mode: &[f64],
    shape: PreconditionerShape,
    known: Option<&LaplaceApproximation>,
) -> Result<(Preconditioner, Option<LaplaceApproximation>), PipelineError> {
    let d = model.dim();
    if shape == PreconditionerShape::Dense || d <= DENSE_MAX_DIM {
        let laplace = match known {
            Some(l) if l.mean.len() == d => l.clone(),
            _ => laplace_at(model, mode)?,
        };
        Ok((
            Preconditioner::from_laplace(&laplace, shape)?,
            Some(laplace),
        ))
    } else {
        let scales = diagonal_curvature(model, mode)?;
        Ok((Preconditioner::diagonal(mode, &scales)?, None))
    }
}

/// [`execute`], also returning every chain's kept draws (flat `draws × D`).
fn execute_keeping_draws(
    cfg: &Config,
    model: &dyn Model,
    output: Option<&RunOutput>,
    extra: Option<&dyn DrawSink>,
    known: Known<'_>,
    progress: &dyn Progress,
    stop: &AtomicBool,
) -> Result<(Outcome, Vec<Vec<f64>>), PipelineError> {
    let settings = check_run(cfg, model)?;
    let dim = model.dim();

    let map_start = std::time::Instant::now();
    // `auto` is none here: the default path writes its choice into the file it resolves.
    let shape = cfg.run.preconditioner.shape(None);
    let laplace_init = matches!(cfg.run.init, InitConfig::Keyword(InitKeyword::Laplace));
    let needs_map = matches!(cfg.run.init, InitConfig::Keyword(InitKeyword::Map))
        || cfg.gradient().needs_centre()
        || shape.is_some()
        || laplace_init;
    let map = match (needs_map, known.map) {
        (false, _) => None,
        (true, Some(m)) if m.theta.len() == dim => Some(m.clone()),
        (true, _) => Some(find_run_map(cfg, model)?),
    };
    // The run's preconditioner (with the Laplace approximation it came from, up to
    // D = DENSE_MAX_DIM), and the map of the Laplace draws that start the chains.
    let (preconditioner, mut laplace) = match (shape, &map) {
        (Some(shape), Some(m)) => {
            let (p, l) = preconditioner_at(model, &m.theta, shape, known.laplace)?;
            (Some(p), l)
        }
        _ => (None, None),
    };
    let laplace_map = match (&preconditioner, &map, laplace_init) {
        (Some(p), _, true) => Some(p.clone()),
        (None, Some(m), true) => {
            let (p, l) = preconditioner_at(
                model,
                &m.theta,
                Preconditioner::default_shape(dim),
                known.laplace,
            )?;
            laplace = l;
            Some(p)
        }
        _ => None,
    };
    // `inits` holds one shared start, one start per chain, or nothing (drawn per chain).
    let inits = match &cfg.run.init {
        InitConfig::Keyword(InitKeyword::Map) => {
            vec![map.as_ref().expect("computed above").theta.clone()]
        }
        InitConfig::Keyword(InitKeyword::Zeros) => vec![vec![0.0; dim]],
        InitConfig::Keyword(InitKeyword::Prior | InitKeyword::Laplace) => Vec::new(),
        InitConfig::File { file } => {
            // Given on the constrained scale (σ, not log σ), as the draws are reported.
            let mut rows = read_init_file(file, dim, settings.chains)?;
            for row in rows.iter_mut() {
                let x = row.clone();
                model.unconstrain(&x, row).map_err(|e| {
                    PipelineError::RunFile(format!("[run] init file {}: {e}", file.display()))
                })?;
            }
            rows
        }
    };
    let map_seconds = map_start.elapsed().as_secs_f64();

    let memory = MemorySink::new(settings.chains, dim);
    let mut continued = match output {
        Some(out) if out.resume || out.only.is_some() => {
            Some(continued_chains(out, settings.chains)?)
        }
        _ => None,
    };
    let (zarr, earlier) = match (output, &continued) {
        (Some(out), Some(continued)) => {
            let (sink, draws) =
                ZarrSink::reopen_chains(&out.zarr, "theta", &continued.kept, out.only.as_deref())?;
            (Some(sink), Some(draws))
        }
        (Some(out), None) => {
            let expected = match settings.budget {
                Budget::Iterations(n) => Some(n / settings.thin.max(1)),
                _ => None,
            };
            (Some(fresh_store(out, &settings, model, expected)?), None)
        }
        (None, _) => (None, None),
    };
    // The store holds the draws on the constrained scale (σ, ordered means); memory keeps θ
    // for the bias check and the evaluation.
    let (tee, tee_extra, constrained);
    let mut sink: &dyn DrawSink = match &zarr {
        Some(z) if model.is_constrained() => {
            constrained = Constrained::new(model, z);
            tee = Tee::new(&constrained, &memory);
            &tee
        }
        Some(z) => {
            tee = Tee::new(z, &memory);
            &tee
        }
        None => &memory,
    };
    if let Some(extra) = extra {
        tee_extra = Tee::new(sink, extra);
        sink = &tee_extra;
    }

    // With a preconditioner the kernels run on the model in φ (θ = c + Lφ) and report θ;
    // control variates are centred at the MAP's φ.
    let phi_model = preconditioner
        .as_ref()
        .map(|p| PreconditionedModel::new(model, p))
        .transpose()?;
    let centre: Option<Vec<f64>> = map.as_ref().map(|m| match &preconditioner {
        Some(p) => {
            let mut phi = vec![0.0; dim];
            p.to_phi(&m.theta, &mut phi);
            phi
        }
        None => m.theta.clone(),
    });
    let make_chain = |c: usize, rng: &mut sgmcmc::rng::ChainRng| -> Result<Chain<'_>, RunError> {
        let setup = |e: PipelineError| RunError::ChainSetup {
            chain: c,
            source: Box::new(e),
        };
        let init = match (inits.len(), &laplace_map) {
            (0, Some(l)) => {
                let mut z = vec![0.0; dim];
                sgmcmc::rng::fill_standard_normal(rng, &mut z);
                let mut theta = vec![0.0; dim];
                l.to_theta(&z, &mut theta);
                theta
            }
            (0, None) => {
                let mut theta = vec![0.0; dim];
                model
                    .sample_prior(rng, &mut theta)
                    .map_err(|e| setup(e.into()))?;
                theta
            }
            (1, _) => inits[0].clone(),
            _ => inits[c].clone(),
        };
        let kernel = match (&phi_model, &preconditioner) {
            (Some(phi_model), Some(p)) => {
                let inner = build_chain_kernel(cfg, &settings, phi_model, centre.as_deref())
                    .map_err(setup)?;
                Box::new(PreconditionedKernel::new(inner, p)) as Box<dyn ChainKernel + Send>
            }
            _ => build_chain_kernel(cfg, &settings, model, centre.as_deref()).map_err(setup)?,
        };
        Ok(Chain { kernel, init })
    };
    let checkpoints =
        output
            .and_then(|o| o.checkpoints.as_ref())
            .map(|store| runner::Checkpoints {
                store,
                interval: Duration::from_secs_f64(cfg.run.checkpoint_seconds),
            });
    let starts = continued.as_ref().map_or(&[][..], |c| c.starts.as_slice());
    let report = runner::run_resumable(
        &settings,
        make_chain,
        sink,
        progress,
        stop,
        checkpoints.as_ref(),
        starts,
    )?;
    // A continued chain's statistics: those of its earlier draws (as the earlier run wrote
    // them; none after a kill), then this run's.
    let mut report = report;
    if let Some(continued) = continued.as_mut() {
        for chain in report.chains.iter_mut() {
            let earlier = std::mem::take(&mut continued.statistics[chain.chain]);
            let later = std::mem::replace(&mut chain.draw_statistics, earlier);
            chain.draw_statistics.extend(later);
        }
    }
    let diverged = report.diverged_chains();
    // Only some of the run's chains (`--chains`): their draws, statistics and checkpoints are
    // in the run's directory; the store is finished and summarised once every chain is in.
    let some_chains = output.is_some_and(|o| o.only.is_some());
    if let Some(store) = output
        .filter(|_| some_chains)
        .and_then(|o| o.checkpoints.as_ref())
    {
        // A diverged chain is done (`--finish` continues it from its last finite checkpoint,
        // and it diverges there again, as in one process): say so beside its checkpoint.
        for c in &diverged {
            store
                .write_file(&diverged_marker(*c), b"diverged\n")
                .map_err(|source| PipelineError::File {
                    path: store.path().join(diverged_marker(*c)),
                    action: "cannot write",
                    source,
                })?;
        }
    }
    let summarised: Vec<usize> = (0..settings.chains)
        .filter(|c| !diverged.contains(c) && !some_chains)
        .collect();
    let mut all = memory.into_chains();
    if let Some(earlier) = earlier {
        for (chain, mut draws) in all.iter_mut().zip(earlier) {
            // The store's draws are on the constrained scale: back to θ.
            if model.is_constrained() {
                let mut theta = vec![0.0; dim];
                for x in draws.chunks_exact_mut(dim) {
                    model
                        .unconstrain(x, &mut theta)
                        .map_err(PipelineError::Model)?;
                    x.copy_from_slice(&theta);
                }
            }
            draws.append(chain);
            *chain = draws;
        }
    }
    let kept: Vec<&[f64]> = summarised.iter().map(|&c| all[c].as_slice()).collect();
    if let Some(z) = zarr.filter(|_| !some_chains) {
        // ArviZ's posterior: the summarised chains cut to the shortest (every chain as run
        // stays beside it), as the summary below sees them; for a constrained model the same
        // draws in θ as `unconstrained_posterior`.
        if model.is_constrained() {
            let length = kept.iter().map(|c| c.len() / dim).min().unwrap_or(0);
            z.write_unconstrained(&summarised, &kept, length)?;
        }
        let statistics: Vec<&[_]> = report
            .chains
            .iter()
            .map(|c| c.draw_statistics.as_slice())
            .collect();
        z.finalize_summarised(&summarised, &statistics)?;
    }
    let parameters = if cfg.run.summary && !some_chains {
        summarize_model_draws(model, &kept)
    } else {
        Vec::new()
    };
    // The Laplace approximation beside the draws (the summary's and the figure's laplace_sd):
    // formed above when the run needed it, else at the MAP when its 2D full passes are cheap.
    let laplace = laplace.filter(|_| !some_chains).or_else(|| {
        let m = map.as_ref().filter(|_| !some_chains)?;
        let cost = 2.0 * (dim * dim) as f64 * model.num_data() as f64;
        (cost <= LAPLACE_BESIDE_MAX_COST)
            .then(|| laplace_at(model, &m.theta).ok())
            .flatten()
    });
    let bias_check = (cfg.run.bias_check && !some_chains).then(|| {
        run_bias_check(
            model,
            &kept,
            preconditioner.as_ref(),
            map.as_ref().map(|m| m.theta.as_slice()),
            settings.seed,
        )
    });
    let outcome = Outcome {
        parameters,
        iterations_per_second: report.iterations_per_second(),
        draws: report.draws(),
        chains: settings.chains,
        seconds: report.seconds,
        diverged_chains: diverged,
        interrupted: report.interrupted(),
        summarised_chains: summarised,
        map,
        map_seconds,
        run: report,
        evaluation: None,
        preconditioner: preconditioner.as_ref().map(Preconditioner::shape),
        // On the scale the draws are reported on (delta method through the constraints).
        laplace_sd: laplace.map(|l| l.reported_sd(model)),
        bias_check,
        default_path: None,
        resumed_draws: continued.map(|c| c.kept),
    };
    Ok((outcome, all))
}

/// Draws per chain of a run whose chains run as separate processes or tasks, which needs an
/// iteration budget (every chain's draws known in advance).
fn split_draws(settings: &RunSettings) -> Result<usize, PipelineError> {
    match settings.budget {
        Budget::Iterations(n) => Ok(n / settings.thin.max(1)),
        _ => Err(PipelineError::RunFile(
            "a run whose chains run as separate tasks needs an iteration budget (`[run] \
             iterations`), so that every chain's draws are known in advance"
                .into(),
        )),
    }
}

/// Creates the store of a run whose chains will run as separate processes or tasks
/// (`sgmcmc run --prepare`): every chain's array at its final length, so that no process
/// enlarges it; no draws, no checkpoints. Returns the draws per chain.
pub fn prepare_store(
    cfg: &Config,
    model: &dyn Model,
    output: &RunOutput,
) -> Result<usize, PipelineError> {
    let settings = check_run(cfg, model)?;
    let draws = split_draws(&settings)?;
    fresh_store(output, &settings, model, Some(draws))?.reserve(draws)?;
    Ok(draws)
}

/// A new run's store in `output` (`expected` draws per chain, if known), its earlier
/// checkpoints cleared first.
fn fresh_store(
    output: &RunOutput,
    settings: &RunSettings,
    model: &dyn Model,
    expected: Option<usize>,
) -> Result<ZarrSink, PipelineError> {
    if let Some(cp) = &output.checkpoints {
        cp.clear_chains().map_err(|source| PipelineError::File {
            path: cp.path().to_path_buf(),
            action: "cannot clear earlier checkpoints",
            source,
        })?;
    }
    Ok(ZarrSink::create(
        &output.zarr,
        settings.chains,
        model.dim(),
        "theta",
        &model.parameter_names(),
        expected,
    )?)
}

/// The file beside chain `c`'s checkpoint that says the chain diverged in a `--chains` task
/// (its name starts with `chain-`, so a new run clears it with the checkpoints).
fn diverged_marker(c: usize) -> String {
    format!("chain-{c}.diverged")
}

/// The chains of the run in `output` that do not have all their draws yet (by their
/// checkpoints; a chain without one has none) and did not diverge.
pub fn unfinished_chains(cfg: &Config, output: &RunOutput) -> Result<Vec<usize>, PipelineError> {
    let settings = run_settings(cfg)?;
    let draws = split_draws(&settings)?;
    let store = output.checkpoints.as_ref().ok_or_else(|| {
        PipelineError::RunFile("a run without checkpoints cannot be finished".into())
    })?;
    let saved = store
        .load(settings.chains)
        .map_err(|source| PipelineError::File {
            path: store.path().to_path_buf(),
            action: "cannot read the checkpoints",
            source,
        })?;
    let mut unfinished = Vec::new();
    for (c, bytes) in saved.into_iter().enumerate() {
        let done = match bytes {
            Some(bytes) => {
                checkpoint_header(&bytes)
                    .map_err(|source| RunError::Resume { chain: c, source })?
                    .progress
                    .draws
            }
            None => 0,
        };
        let diverged = store
            .read_file(&diverged_marker(c))
            .map_err(|source| PipelineError::File {
                path: store.path().join(diverged_marker(c)),
                action: "cannot read",
                source,
            })?
            .is_some();
        if done < draws && !diverged {
            unfinished.push(c);
        }
    }
    Ok(unfinished)
}

/// The output of a task that runs chains `chains` of the prepared run in `dir` (opened with
/// [`RunDirectory::open_chains`]), each from its checkpoint if it has one, and the run file as
/// recorded by `--prepare`, checked against `given` and `model`. A chain the run does not have
/// is refused.
pub fn chains_task_output(
    dir: &RunDirectory,
    given: &Config,
    model: &dyn Model,
    chains: &[usize],
) -> Result<(Config, RunOutput), PipelineError> {
    let (cfg, _) = recorded_run(dir, given, model)?;
    if let Some(&c) = chains.iter().find(|&&c| c >= cfg.run.chains) {
        return Err(PipelineError::RunFile(format!(
            "the run in {} has chains 0-{}, not chain {c}",
            dir.path().display(),
            cfg.run.chains.saturating_sub(1)
        )));
    }
    let mut output = RunOutput::in_directory(dir, true);
    output.only = Some(chains.to_vec());
    Ok((cfg, output))
}

/// The chains of a run being continued: how each starts, the draws each keeps from before,
/// and those draws' statistics.
struct Continued {
    starts: Vec<ChainStart>,
    kept: Vec<usize>,
    statistics: Vec<Vec<DrawStatistics>>,
}

/// Reads the checkpoints of `output` and the statistics of the draws they cover.
fn continued_chains(output: &RunOutput, chains: usize) -> Result<Continued, PipelineError> {
    let store = output.checkpoints.as_ref().ok_or_else(|| {
        PipelineError::RunFile("a run without checkpoints cannot be continued".into())
    })?;
    let saved = store.load(chains).map_err(|source| PipelineError::File {
        path: store.path().to_path_buf(),
        action: "cannot read the checkpoints",
        source,
    })?;
    let mut starts = Vec::with_capacity(chains);
    let mut kept = Vec::with_capacity(chains);
    for (c, bytes) in saved.into_iter().enumerate() {
        if output.only.as_ref().is_some_and(|only| !only.contains(&c)) {
            kept.push(0);
            starts.push(ChainStart::Elsewhere);
            continue;
        }
        match bytes {
            Some(bytes) => {
                let header = checkpoint_header(&bytes)
                    .map_err(|source| RunError::Resume { chain: c, source })?;
                kept.push(header.progress.draws);
                starts.push(ChainStart::Resume(bytes));
            }
            None => {
                kept.push(0);
                starts.push(ChainStart::Fresh);
            }
        }
    }
    // The statistics of the kept draws, as the chains' checkpoints kept them.
    let statistics = kept
        .iter()
        .enumerate()
        .map(|(c, &n)| store.load_statistics(c, n))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| PipelineError::File {
            path: store.path().to_path_buf(),
            action: "cannot read the chains' statistics",
            source,
        })?;
    Ok(Continued {
        starts,
        kept,
        statistics,
    })
}

/// The bias check of the kept draws (each chain cut to the shortest), or why it was skipped.
fn run_bias_check(
    model: &dyn Model,
    kept: &[&[f64]],
    preconditioner: Option<&Preconditioner>,
    centre: Option<&[f64]>,
    seed: u64,
) -> BiasCheckOutcome {
    let dim = model.dim();
    if dim > BIAS_CHECK_MAX_DIM {
        return BiasCheckOutcome::Skipped {
            reason: format!("D = {dim} > {BIAS_CHECK_MAX_DIM}"),
        };
    }
    if kept.is_empty() {
        return BiasCheckOutcome::Skipped {
            reason: "no chain finished without diverging".into(),
        };
    }
    let shortest = kept.iter().map(|c| c.len()).min().unwrap_or(0);
    let chains: Vec<&[f64]> = kept.iter().map(|c| &c[..shortest]).collect();
    match bias_check(
        model,
        &chains,
        preconditioner,
        centre,
        &BiasCheckSettings::default(),
        seed,
    ) {
        Ok(check) => BiasCheckOutcome::Done(Box::new(check)),
        Err(e) => BiasCheckOutcome::Skipped {
            reason: e.to_string(),
        },
    }
}

/// The `summary.json` document: the outcome plus the fully resolved settings.
pub fn summary_json(outcome: &Outcome, cfg: &Config, model: &dyn Model) -> serde_json::Value {
    let mut v = serde_json::to_value(outcome).expect("outcome serialises");
    let resolved = serde_json::json!({
        "config": cfg,
        "model": { "kind": model.name(), "dim": model.dim(), "num_data": model.num_data() },
        "batch_size": match cfg.gradient().estimator {
            sgmcmc::settings::EstimatorKind::Full => model.num_data(),
            _ => cfg.gradient().batch_size.resolve(model.num_data()).unwrap_or(0),
        },
        "budget": run_settings(cfg).ok().map(|s| s.budget),
        "sampler": resolved_sampler(cfg),
    });
    v["settings"] = resolved;
    v
}

/// The sampler's parameters in the library's conventions (e.g. SGLD's ε whichever form was
/// given), with the schedule resolved (`schedule`: every parameter filled in, e.g. the cyclical
/// ε₀, K and cycle length m).
fn resolved_sampler(cfg: &Config) -> serde_json::Value {
    let Some(table) = &cfg.sampler else {
        return serde_json::Value::Null;
    };
    let mut v = resolved_method(&table.method);
    let schedule = table.method.build().ok().and_then(|s| {
        let settings = run_settings(cfg).ok()?;
        resolve_schedule(table, s.step_size(), &settings).ok()?
    });
    if let Some(schedule) = schedule {
        let mut sv = serde_json::to_value(schedule).expect("schedule serialises");
        if let Some(m) = schedule.cycle_length() {
            sv["cycle_length"] = serde_json::json!(m);
        }
        v["schedule"] = sv;
    }
    v
}

/// The method's parameters in the library's conventions.
fn resolved_method(cfg: &SamplerSettings) -> serde_json::Value {
    match cfg {
        SamplerSettings::Sgld {
            step_size,
            welling_teh_step,
            temperature,
        } => {
            let epsilon = step_size.or(welling_teh_step.map(|h| h / 2.0));
            serde_json::json!({ "kind": "sgld", "epsilon": epsilon, "welling_teh_h": epsilon.map(|e| 2.0 * e), "temperature": temperature })
        }
        SamplerSettings::Psgld {
            step_size,
            catalogue_dt,
            ..
        } => {
            let mut v = serde_json::to_value(cfg).expect("config serialises");
            v["epsilon"] = serde_json::json!(step_size.or(catalogue_dt.map(|dt| dt / 2.0)));
            v
        }
        _ => serde_json::to_value(cfg).expect("config serialises"),
    }
}

/// Write `summary.json` into `dir`, atomically.
pub fn write_summary(dir: &Path, summary: &serde_json::Value) -> Result<PathBuf, PipelineError> {
    let path = dir.join("summary.json");
    let text = serde_json::to_string_pretty(summary).expect("summary serialises");
    sgmcmc::io::write_atomic(&path, text.as_bytes()).map_err(|source| PipelineError::File {
        path: path.clone(),
        action: "cannot write",
        source,
    })?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(sampler: &str) -> SamplerTable {
        let text = format!(
            "[data]\nsynthetic = {{ rows = 10, dim = 2 }}\n[model]\nkind = \"logistic\"\n\
             [sampler]\n{sampler}\n"
        );
        Config::from_toml(&text, "run.toml")
            .unwrap()
            .sampler
            .unwrap()
    }

    fn settings(budget: Budget, burn_in: usize) -> RunSettings {
        RunSettings {
            seed: 0,
            chains: 1,
            budget,
            burn_in,
            thin: 1,
        }
    }

    fn err(sampler: &str, budget: Budget) -> String {
        match build_sampler(&table(sampler), &settings(budget, 0)) {
            Ok(_) => panic!("{sampler}: expected an error"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn schedules_resolve_against_the_sampler_and_the_run() {
        let run = settings(Budget::Iterations(900), 100);
        // SGLD given as Welling–Teh h: the schedule is in ε = h/2.
        let t = table(
            "kind = \"sgld\"\nwelling_teh_step = 2e-3\nschedule = { kind = \"cyclical\", cycles = 4 }",
        );
        let s = resolve_schedule(&t, 1e-3, &run).unwrap().unwrap();
        assert_eq!(s, StepSchedule::cyclical(1e-3, 4, 1000).unwrap());
        assert_eq!(s.cycle_length(), Some(250));
        let sampler = build_sampler(&t, &run).unwrap();
        assert_eq!(sampler.step_size(), 1e-3);
        // An explicit K also works with a wall-clock budget.
        let t = table(
            "kind = \"sgld\"\nstep_size = 1e-3\nschedule = { kind = \"cyclical\", cycles = 4, iterations = 40 }",
        );
        let wall = settings(Budget::WallClock(Duration::from_secs(1)), 0);
        let s = resolve_schedule(&t, 1e-3, &wall).unwrap().unwrap();
        assert_eq!(s.cycle_length(), Some(10));
        // Polynomial without `a`: the first step is the sampler's step.
        let t = table(
            "kind = \"sgnht\"\nstep_size = 1e-5\nschedule = { kind = \"polynomial\", b = 10 }",
        );
        let s = resolve_schedule(&t, 1e-5, &run).unwrap().unwrap();
        assert!((s.at(1) - 1e-5).abs() < 1e-20, "{}", s.at(1));
        assert!(s.at(2) < s.at(1));
        // Constant and none.
        let t = table("kind = \"sgld\"\nstep_size = 1e-3\nschedule = { kind = \"constant\" }");
        let s = resolve_schedule(&t, 1e-3, &run).unwrap().unwrap();
        assert_eq!(s, StepSchedule::Constant { step: 1e-3 });
        let t = table("kind = \"sgld\"\nstep_size = 1e-3");
        assert_eq!(resolve_schedule(&t, 1e-3, &run).unwrap(), None);
    }

    #[test]
    fn bad_schedule_values_are_clear_errors() {
        let iters = Budget::Iterations(100);
        let base = "kind = \"sgld\"\nstep_size = 1e-3\n";
        let e = err(
            &format!("{base}schedule = {{ kind = \"polynomial\", a = -1e-4 }}"),
            iters,
        );
        assert!(
            e.contains("[sampler] schedule") && e.contains("a = -0.0001"),
            "{e}"
        );
        let e = err(
            &format!("{base}schedule = {{ kind = \"polynomial\", a = 1e-4, gamma = 1.5 }}"),
            iters,
        );
        assert!(e.contains("γ = 1.5") && e.contains("(0, 1]"), "{e}");
        let e = err(
            &format!("{base}schedule = {{ kind = \"polynomial\", b = -3 }}"),
            iters,
        );
        assert!(e.contains("b = -3"), "{e}");
        let e = err(
            &format!("{base}schedule = {{ kind = \"cyclical\", cycles = 0 }}"),
            iters,
        );
        assert!(e.contains("cycles M = 0"), "{e}");
        let e = err(
            &format!("{base}schedule = {{ kind = \"cyclical\", cycles = 101 }}"),
            iters,
        );
        assert!(
            e.contains("cycles M = 101") && e.contains("iterations K"),
            "{e}"
        );
        let e = err(
            &format!("{base}schedule = {{ kind = \"cyclical\", cycles = 4 }}"),
            Budget::WallClock(Duration::from_secs(5)),
        );
        assert!(
            e.contains("budget_seconds") && e.contains("`iterations`"),
            "{e}"
        );
    }
}
