//! The `[evaluation]` table: everything a run needs to report accuracy metrics, checked and
//! loaded before sampling (the test split, held out of the model's data; the reference
//! moments), and the metrics themselves after it ([`sgmcmc::diagnostics::accuracy`]).
//!
//! Conventions:
//! - Draws: the kept draws (post burn-in, thinned) of every chain that did not diverge, each
//!   truncated to the shortest (as the summary), pooled over chains.
//! - `test_fraction` holds out round(fraction·N) rows of `[data]`: the last ones by default
//!   (the MAMBA convention: the first 800,000 of 10⁶ rows train), or a uniformly random subset
//!   drawn from `split_seed` (independent of the run seed, so every run seed sees the same
//!   split). The model is built from the other rows only; both parts are copied into memory.
//! - The test metrics use at most `predictive_draws` draws, evenly spaced over the pooled
//!   (iteration-major) order.

use super::{PipelineError, build_model, load_data};
use crate::config::{Config, DataConfig, EvaluationConfig, ModelConfig, SplitKind};
use serde::Serialize;
use sgmcmc::data::{Dataset, Features};
use sgmcmc::diagnostics::accuracy::{self, AccuracyError, PredictiveMetrics};
use sgmcmc::estimator::MinibatchScheme;
use sgmcmc::model::{Bernoulli, Family, Model, Poisson, Predictive};
use sgmcmc::reference::ReferenceMoments;
use std::path::PathBuf;

/// Stream of `split_seed` that draws the random test rows (far from chain streams and from
/// `rng::streams`).
const TEST_SPLIT_STREAM: u64 = (1 << 20) + 64;

/// The model of a run, with its predictive side when the run has a test split.
pub enum RunModel {
    /// Any model.
    Plain(Box<dyn Model>),
    /// A model with a predictive distribution.
    Predictive(Box<dyn Predictive>),
}

/// A run's model and its checked, loaded `[evaluation]`: what [`prepare`] returns.
pub struct Prepared {
    model: RunModel,
    /// The evaluation, if the config has an `[evaluation]` table.
    pub evaluation: Option<Evaluation>,
}

impl Prepared {
    /// The model the chains sample (built from the training rows only).
    pub fn model(&self) -> &dyn Model {
        match &self.model {
            RunModel::Plain(m) => m.as_ref(),
            RunModel::Predictive(m) => m.as_ref(),
        }
    }

    /// The model as [`Predictive`], when it was built as one (runs with a test split).
    pub fn predictive(&self) -> Option<&dyn Predictive> {
        match &self.model {
            RunModel::Plain(_) => None,
            RunModel::Predictive(m) => Some(m.as_ref()),
        }
    }
}

/// Reference moments and the file they came from.
pub struct LoadedReference {
    /// The file.
    pub path: PathBuf,
    /// Its moments (dimension checked against the model).
    pub moments: ReferenceMoments,
}

/// Held-out rows with responses in the model's coding.
pub struct TestSplit {
    /// Features of the held-out rows.
    pub features: Features,
    /// Responses, prepared by [`Predictive::prepare_held_out_targets`].
    pub targets: Vec<f64>,
    /// How the rows were chosen (for the summary).
    pub description: String,
    /// Rows the model was built from.
    pub training_rows: usize,
}

/// A checked, loaded `[evaluation]` table.
pub struct Evaluation {
    /// Reference moments, if given.
    pub reference: Option<LoadedReference>,
    /// The test split, if any.
    pub test: Option<TestSplit>,
    /// Confidence bins for ECE and MCE.
    pub calibration_bins: usize,
    /// Maximum number of draws in the test metrics.
    pub predictive_draws: usize,
}

fn other(message: String) -> PipelineError {
    PipelineError::RunFile(message)
}

/// Whether models of this kind have a predictive distribution for held-out rows.
pub fn has_predictive(cfg: &ModelConfig) -> bool {
    !matches!(
        cfg,
        ModelConfig::Gaussian { .. }
            | ModelConfig::BradleyTerry { .. }
            | ModelConfig::SparseRegression { .. }
            | ModelConfig::NormalMixture { .. }
            | ModelConfig::External {}
    )
}

/// Key combinations and values that cannot work, before anything is loaded.
fn check_table(ev: &EvaluationConfig, model: &ModelConfig) -> Result<(), PipelineError> {
    if ev.reference.is_none() && ev.test_fraction.is_none() && ev.test.is_none() {
        return Err(other(
            "[evaluation] names nothing to evaluate: give `reference`, `test_fraction` or an \
             [evaluation.test] table"
                .into(),
        ));
    }
    if ev.test_fraction.is_some() && ev.test.is_some() {
        return Err(other(
            "[evaluation] give either `test_fraction` or an [evaluation.test] table, not both"
                .into(),
        ));
    }
    if let Some(f) = ev.test_fraction
        && !(f > 0.0 && f < 1.0)
    {
        return Err(other(format!(
            "[evaluation] test_fraction must be in (0, 1), got {f}"
        )));
    }
    if ev.test_fraction.is_none() && (ev.split.is_some() || ev.split_seed.is_some()) {
        return Err(other(
            "[evaluation] `split` and `split_seed` apply to `test_fraction` only".into(),
        ));
    }
    if ev.split_seed.is_some() && ev.split != Some(SplitKind::Random) {
        return Err(other(
            "[evaluation] `split_seed` applies to split = \"random\" only".into(),
        ));
    }
    if ev.calibration_bins == 0 {
        return Err(other(
            "[evaluation] calibration_bins must be at least 1".into(),
        ));
    }
    if ev.predictive_draws == 0 {
        return Err(other(
            "[evaluation] predictive_draws must be at least 1".into(),
        ));
    }
    if let Some(t) = &ev.test {
        if t.synthetic.is_some() {
            return Err(other(
                "[evaluation.test] cannot be `synthetic`; hold out rows of [data] with \
                 `test_fraction` instead"
                    .into(),
            ));
        }
        let given = [
            t.features.is_some(),
            t.table.is_some(),
            t.libsvm.is_some(),
            t.movielens.is_some(),
            t.mnist.is_some(),
        ];
        if given.iter().filter(|&&g| g).count() != 1 {
            return Err(other(
                "[evaluation.test] needs exactly one of `features` (with `targets`), `table` \
                 (with `target`), `libsvm`, `movielens` or `mnist`"
                    .into(),
            ));
        }
    }
    if (ev.test_fraction.is_some() || ev.test.is_some()) && !has_predictive(model) {
        return Err(other(format!(
            "[evaluation] a test split needs a model with a predictive distribution \
             p(y | x, theta) (logistic, linear, poisson or bnn); model `{}` has none",
            model_kind(model)
        )));
    }
    Ok(())
}

fn model_kind(model: &ModelConfig) -> &'static str {
    match model {
        ModelConfig::Logistic { .. } => "logistic",
        ModelConfig::Linear { .. } => "linear",
        ModelConfig::Gaussian { .. } => "gaussian",
        ModelConfig::Poisson { .. } => "poisson",
        ModelConfig::BradleyTerry { .. } => "bradley_terry",
        ModelConfig::SparseRegression { .. } => "sparse_regression",
        ModelConfig::Pmf { .. } => "pmf",
        ModelConfig::Bnn { .. } => "bnn",
        ModelConfig::NormalMixture { .. } => "normal_mixture",
        ModelConfig::External {} => "external",
    }
}

/// The 0-based rows, ascending, that `test_fraction` holds out of `n`: round(fraction·n) of
/// them, the last ones or a uniformly random subset drawn from `seed`. Errors if either part
/// would be empty.
pub fn test_rows(
    n: usize,
    fraction: f64,
    kind: SplitKind,
    seed: u64,
) -> Result<Vec<usize>, PipelineError> {
    let k = (fraction * n as f64).round() as usize;
    if k == 0 || k >= n {
        return Err(other(format!(
            "[evaluation] test_fraction = {fraction} of {n} rows holds out {k}; both the test \
             split and the training rows need at least one row"
        )));
    }
    Ok(match kind {
        SplitKind::Last => (n - k..n).collect(),
        SplitKind::Random => {
            let mut rng = sgmcmc::rng::stream(seed, TEST_SPLIT_STREAM);
            let mut rows = rand::seq::index::sample(&mut rng, n, k).into_vec();
            rows.sort_unstable();
            rows
        }
    })
}

/// Split a data set into (training, test) by the ascending 0-based `test` rows; the training
/// part keeps every other row, in order. Both are copies.
pub fn split_dataset(data: &Dataset, test: &[usize]) -> (Dataset, Dataset) {
    let mut is_test = vec![false; data.rows()];
    test.iter().for_each(|&i| is_test[i] = true);
    let train: Vec<usize> = (0..data.rows()).filter(|&i| !is_test[i]).collect();
    (
        data.select_rows(&train, "training rows"),
        data.select_rows(test, "test rows"),
    )
}

/// Load `[evaluation.test]`: a LIBSVM file gets the training column count unless
/// `n_features` is given.
fn load_test_files(cfg: &DataConfig, columns: usize) -> Result<Dataset, PipelineError> {
    let mut cfg = cfg.clone();
    if cfg.libsvm.is_some() && cfg.n_features.is_none() {
        cfg.n_features = Some(columns);
    }
    load_data(&cfg)
}

/// Check the config's `[evaluation]` table, load the data (holding out the test rows), build
/// the model from the training rows, load the test split and the reference, and check them
/// against the model. Without `[evaluation]`: the data and the model, as [`load_data`] and
/// [`build_model`].
pub fn prepare(cfg: &Config) -> Result<Prepared, PipelineError> {
    prepare_with(cfg, || load_data(&cfg.data))
}

/// A run of a model the caller built (`kind = "external"`, e.g. a Python user's model): no data
/// to load; `[evaluation]` needs a built-in model's predictive distribution and is refused.
pub fn prepare_model(cfg: &Config, model: Box<dyn Model>) -> Result<Prepared, PipelineError> {
    if cfg.evaluation.is_some() {
        return Err(other(
            "[evaluation] needs a built-in model; a caller-supplied model has none".into(),
        ));
    }
    Ok(Prepared {
        model: RunModel::Plain(model),
        evaluation: None,
    })
}

/// [`prepare`] on data already in memory (e.g. arrays handed over by the Python package)
/// instead of the `[data]` table's source; the data are validated as [`load_data`] does.
pub fn prepare_data(cfg: &Config, data: Dataset) -> Result<Prepared, PipelineError> {
    sgmcmc::data::validate(&data)?;
    prepare_with(cfg, move || Ok(data))
}

/// The training rows as the estimators read them: in a random order (from the run's seed)
/// when `[gradient] scheme = "block"`, so that each contiguous block is a random sample; as
/// given otherwise, or when `[data] rows_shuffled` says they already are. The shuffled rows
/// are an in-memory copy: a memory-mapped file too large for it is an error that names
/// `sgmcmc shuffle` (the out-of-core copy).
fn training_order(cfg: &Config, data: Dataset) -> Result<Dataset, PipelineError> {
    if cfg.gradient().scheme != MinibatchScheme::Block || cfg.data.rows_shuffled {
        return Ok(data);
    }
    if data.features.is_out_of_core() {
        let bytes = data.features.bytes();
        let available = sgmcmc::data::available_memory().unwrap_or(0);
        return Err(other(format!(
            "{}: block minibatches need the rows in a random order, and an in-memory shuffled \
             copy of these {:.1} GB would not fit (available memory {:.1} GB); write a shuffled \
             copy with `sgmcmc shuffle` and set [data] rows_shuffled = true",
            data.features_source,
            bytes as f64 / 1e9,
            available as f64 / 1e9
        )));
    }
    Ok(data.shuffled(cfg.run.seed))
}

fn prepare_with(
    cfg: &Config,
    load: impl FnOnce() -> Result<Dataset, PipelineError>,
) -> Result<Prepared, PipelineError> {
    let Some(ev) = &cfg.evaluation else {
        let data = training_order(cfg, load()?)?;
        return Ok(Prepared {
            model: RunModel::Plain(build_model(&cfg.model, data)?),
            evaluation: None,
        });
    };
    check_table(ev, &cfg.model)?;
    // The reference first: a missing file fails before a long data load. A directory is the
    // bike-sharing data's, whose Stan moments are CSV files.
    let reference = match &ev.reference {
        Some(path) if path.is_dir() => Some(LoadedReference {
            path: path.clone(),
            moments: sgmcmc::data::load_bike_sharing_reference(path)?,
        }),
        Some(path) => Some(LoadedReference {
            path: path.clone(),
            moments: ReferenceMoments::load(path)
                .map_err(|e| PipelineError::Reference(Box::new(e)))?,
        }),
        None => None,
    };
    let data = load()?;
    let (train, test_data, description) = if let Some(fraction) = ev.test_fraction {
        // Labels are checked on the whole column first, so errors name the row of the file.
        if let Some(ys) = &data.targets {
            let source = data
                .targets_source
                .as_ref()
                .unwrap_or(&data.features_source);
            match &cfg.model {
                ModelConfig::Logistic { .. } => {
                    Bernoulli.prepare_targets(ys, source)?;
                }
                ModelConfig::Poisson { link, .. } => {
                    Poisson::new(*link).prepare_targets(ys, source)?;
                }
                _ => {}
            }
        }
        let kind = ev.split.unwrap_or(SplitKind::Last);
        let rows = test_rows(data.rows(), fraction, kind, ev.split_seed.unwrap_or(0))?;
        let (train, test) = split_dataset(&data, &rows);
        let how = match kind {
            SplitKind::Last => format!(
                "the last {} of {} rows of [data] (test_fraction = {fraction})",
                rows.len(),
                data.rows()
            ),
            SplitKind::Random => format!(
                "{} random rows of {} of [data] (test_fraction = {fraction}, split_seed = {})",
                rows.len(),
                data.rows(),
                ev.split_seed.unwrap_or(0)
            ),
        };
        (train, Some(test), how)
    } else if let Some(t) = &ev.test {
        let test = load_test_files(t, data.cols())?;
        let how = format!("[evaluation.test]: {}", test.features_source);
        (data, Some(test), how)
    } else {
        (data, None, String::new())
    };

    let train = training_order(cfg, train)?;
    let (model, test) = match test_data {
        None => (RunModel::Plain(build_model(&cfg.model, train)?), None),
        Some(test) => {
            let training_rows = train.rows();
            let model = super::build_predictive_model(&cfg.model, train)?;
            if test.cols() != model.input_columns() {
                return Err(other(format!(
                    "[evaluation] the test split ({}) has {} feature columns, the model's \
                     training data have {}",
                    test.features_source,
                    test.cols(),
                    model.input_columns()
                )));
            }
            let source = test
                .targets_source
                .clone()
                .unwrap_or_else(|| test.features_source.clone());
            let ys = test.targets.as_ref().ok_or_else(|| {
                other(format!(
                    "[evaluation] the test split ({}) has no response column; give `targets` \
                     (or `table` with `target`)",
                    test.features_source
                ))
            })?;
            let targets = model.prepare_held_out_targets(ys, &source)?;
            model.check_held_out_features(&test.features, &test.features_source)?;
            let split = TestSplit {
                features: test.features,
                targets,
                description,
                training_rows,
            };
            (RunModel::Predictive(model), Some(split))
        }
    };
    let prepared = Prepared {
        model,
        evaluation: None,
    };
    if let Some(r) = &reference {
        let m = prepared.model();
        if r.moments.dim() != m.dim() {
            return Err(other(format!(
                "[evaluation] reference {} has {} parameters, but the model `{}` has {} ({})",
                r.path.display(),
                r.moments.dim(),
                m.name(),
                m.dim(),
                m.parameter_names().join(", ")
            )));
        }
    }
    Ok(Prepared {
        evaluation: Some(Evaluation {
            reference,
            test,
            calibration_bins: ev.calibration_bins,
            predictive_draws: ev.predictive_draws,
        }),
        ..prepared
    })
}

/// Metrics against the reference moments.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReferenceReport {
    /// The reference file.
    pub file: String,
    /// How the reference was obtained (its `method`).
    pub method: String,
    /// Whether its parameter names are the model's.
    pub parameter_names_match: bool,
    /// ξ = ‖σ̂ − σ_ref‖₂ / ‖σ_ref‖₂ over all pooled draws.
    pub relative_sd_error: f64,
    /// (1/D)·Σⱼ ((μ̂ⱼ − μ_ref,ⱼ)/σ_ref,ⱼ)², μ̂ over the second half of the pooled draws.
    pub mean_squared_z_score: f64,
    /// Draws in that second half.
    pub z_score_draws: usize,
}

/// Metrics on the test split.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TestReport {
    /// How the test rows were chosen.
    pub split: String,
    /// Rows the model was built from.
    pub training_rows: usize,
    /// The metrics.
    #[serde(flatten)]
    pub metrics: PredictiveMetrics,
}

/// The `evaluation` entry of `summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvaluationReport {
    /// Chains whose draws were evaluated.
    pub chains: usize,
    /// Draws per chain (each truncated to the shortest).
    pub draws_per_chain: usize,
    /// Against the reference, if one was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference: Option<ReferenceReport>,
    /// On the test split, if there was one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test: Option<TestReport>,
    /// Wall-clock seconds the metrics took.
    pub seconds: f64,
}

/// The evaluation of a finished run: the report, or why there is none (e.g. no draws).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum EvaluationOutcome {
    /// The metrics.
    Done(Box<EvaluationReport>),
    /// Why they could not be computed.
    Failed {
        /// The reason.
        error: String,
    },
}

impl EvaluationOutcome {
    /// Lines for the terminal.
    pub fn describe(&self) -> Vec<String> {
        let r = match self {
            EvaluationOutcome::Failed { error } => {
                return vec![format!("evaluation: not computed: {error}")];
            }
            EvaluationOutcome::Done(r) => r,
        };
        let mut lines = vec![format!(
            "evaluation over {} chains x {} draws ({:.2} s):",
            r.chains, r.draws_per_chain, r.seconds
        )];
        if let Some(f) = &r.reference {
            lines.push(format!(
                "  against {}: relative sd error xi = {:.4}, mean squared z-score = {:.3e} \
                 (second half, {} draws){}",
                f.file,
                f.relative_sd_error,
                f.mean_squared_z_score,
                f.z_score_draws,
                if f.parameter_names_match {
                    ""
                } else {
                    "; NOTE: its parameter names differ from the model's"
                }
            ));
        }
        if let Some(t) = &r.test {
            let m = &t.metrics;
            lines.push(format!(
                "  test split, {} rows ({}), {} draws:",
                m.rows, t.split, m.draws
            ));
            let mut line = format!(
                "    log-loss {:.5} (posterior predictive), {:.5} (MAMBA: mean over draws)",
                m.log_loss, m.log_loss_mamba
            );
            if let (Some(acc), Some(ece), Some(mce), Some(bins)) =
                (m.accuracy, m.ece, m.mce, m.calibration_bins)
            {
                line += &format!(
                    "; accuracy {acc:.4}; ECE {ece:.4}, MCE {mce:.4} ({bins} equal-width bins)"
                );
            }
            if let Some(rmse) = m.rmse {
                line += &format!("; RMSE {rmse:.5}");
            }
            lines.push(line);
        }
        lines
    }
}

impl TestSplit {
    /// The predictive metrics of `predictive` on these rows from the kept `chains` (each flat
    /// `n × dim`), at most `max_draws` of them evenly spaced over the pooled draws
    /// ([`thin_pooled`]), with `bins` confidence bins.
    pub fn metrics(
        &self,
        predictive: &dyn Predictive,
        chains: &[&[f64]],
        n: usize,
        max_draws: usize,
        bins: usize,
    ) -> Result<accuracy::PredictiveMetrics, accuracy::AccuracyError> {
        let draws = thin_pooled(chains, predictive.dim(), n, max_draws);
        accuracy::predictive_metrics(predictive, &draws, &self.features, &self.targets, bins)
    }
}

impl Evaluation {
    /// Every metric of the table over the kept `chains` (each flat `draws × dim`), with
    /// `predictive` the run's model when there is a test split. `reported` holds the same
    /// draws on the scale the parameter names refer to (σ, not log σ: the scale of the
    /// reference moments; `chains` itself for a model without constraints); the predictive
    /// metrics use θ.
    pub fn evaluate(
        &self,
        predictive: Option<&dyn Predictive>,
        names: &[String],
        chains: &[&[f64]],
        reported: &[&[f64]],
    ) -> Result<EvaluationReport, AccuracyError> {
        let start = std::time::Instant::now();
        let dim = names.len();
        let n = chains
            .iter()
            .map(|c| c.len() / dim.max(1))
            .min()
            .unwrap_or(0);
        let chains: Vec<&[f64]> = chains.iter().map(|c| &c[..n * dim]).collect();
        let reported: Vec<&[f64]> = reported.iter().map(|c| &c[..n * dim]).collect();
        let reference = match &self.reference {
            None => None,
            Some(r) => {
                let xi = accuracy::relative_sd_error(&reported, dim, &r.moments)?;
                let z = accuracy::mean_squared_z_score(&reported, dim, &r.moments)?;
                Some(ReferenceReport {
                    file: r.path.display().to_string(),
                    method: r.moments.method.clone(),
                    parameter_names_match: r.moments.parameter_names == names,
                    relative_sd_error: xi,
                    mean_squared_z_score: z.value,
                    z_score_draws: z.window,
                })
            }
        };
        let test = match (&self.test, predictive) {
            (Some(t), Some(model)) => {
                let metrics = t.metrics(
                    model,
                    &chains,
                    n,
                    self.predictive_draws,
                    self.calibration_bins,
                )?;
                Some(TestReport {
                    split: t.description.clone(),
                    training_rows: t.training_rows,
                    metrics,
                })
            }
            _ => None,
        };
        Ok(EvaluationReport {
            chains: chains.len(),
            draws_per_chain: n,
            reference,
            test,
            seconds: start.elapsed().as_secs_f64(),
        })
    }
}

/// At most `max` draws evenly spaced over the pooled iteration-major order (draw t of chain c
/// at position t·C + c), as one flat S × dim buffer: positions ⌊k·T/S⌋, k = 0..S.
pub fn thin_pooled(chains: &[&[f64]], dim: usize, n: usize, max: usize) -> Vec<f64> {
    let c = chains.len();
    let total = n * c;
    let s = total.min(max);
    let mut out = Vec::with_capacity(s * dim);
    for k in 0..s {
        let p = k * total / s;
        let (t, chain) = (p / c, p % c);
        out.extend_from_slice(&chains[chain][t * dim..(t + 1) * dim]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinning_spreads_over_chains_and_iterations() {
        // 2 chains × 3 draws of dim 1: pooled order 0a 0b 1a 1b 2a 2b.
        let a = [0.0, 1.0, 2.0];
        let b = [10.0, 11.0, 12.0];
        assert_eq!(
            thin_pooled(&[&a, &b], 1, 3, 100),
            vec![0.0, 10.0, 1.0, 11.0, 2.0, 12.0]
        );
        assert_eq!(thin_pooled(&[&a, &b], 1, 3, 3), vec![0.0, 1.0, 2.0]);
        // Positions 0 and 3: chain 0 at t = 0, chain 1 at t = 1.
        assert_eq!(thin_pooled(&[&a, &b], 1, 3, 2), vec![0.0, 11.0]);
    }

    #[test]
    fn test_rows_are_the_last_or_a_seeded_subset() {
        assert_eq!(test_rows(10, 0.2, SplitKind::Last, 0).unwrap(), vec![8, 9]);
        let r = test_rows(1000, 0.25, SplitKind::Random, 3).unwrap();
        assert_eq!(r.len(), 250);
        assert!(r.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(r, test_rows(1000, 0.25, SplitKind::Random, 3).unwrap());
        assert_ne!(r, test_rows(1000, 0.25, SplitKind::Random, 4).unwrap());
        // Not the last rows: a random subset spreads over the whole range.
        assert!(r[0] < 100 && r[249] > 900, "{:?}", (r[0], r[249]));
        let e = test_rows(10, 0.01, SplitKind::Last, 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("holds out 0"), "{e}");
    }
}
