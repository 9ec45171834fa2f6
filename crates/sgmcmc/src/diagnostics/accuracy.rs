//! Accuracy of draws: against reference posterior moments, and on a held-out test split
//! (reference §5.4–5.6, §7.8; MAMBA paper §4.1 and §4.3, coreset-MCMC paper §5).
//!
//! Draws come as chains, each flat row-major (`draws × D`, the layout of
//! [`crate::io::MemorySink`]). Chains are truncated to the shortest one (as the summary
//! table does) and **pooled**: one estimate over all chains, not one per chain.
//!
//! - [`relative_sd_error`]: ξ = ‖σ̂ − σ_ref‖₂ / ‖σ_ref‖₂ (MAMBA §4.1), σ̂ the sd of all pooled
//!   draws (divisor n − 1, as the summary's `sd`).
//! - [`mean_squared_z_score`]: (1/D)·Σⱼ ((μ̂ⱼ − μ_ref,ⱼ)/σ_ref,ⱼ)² (coreset MCMC, reference §7.8),
//!   μ̂ the mean of the second half of the pooled draws.
//! - On a test split, at draws θ₁..θ_S: the posterior-predictive log-loss
//!   −(1/n)·Σᵢ log((1/S)·Σₛ p(yᵢ | xᵢ, θₛ)) ([`log_loss`]); the MAMBA code's
//!   (1/S)·Σₛ (1/n)·Σᵢ −log p(yᵢ | xᵢ, θₛ) (§5.5, `logloss_samples`; [`log_loss_mamba`]), which
//!   is never smaller (Jensen); for classifiers the accuracy and the calibration errors ECE and
//!   MCE of the posterior-mean class probabilities ([`calibration`], §5.6); for regression the
//!   RMSE of the posterior-mean prediction ([`rmse`]). [`predictive_metrics`] computes them all
//!   in one parallel pass over the test rows.

use crate::data::{Element, Features, Matrix};
use crate::model::{Predictive, PredictiveTask};
use crate::moments::ReferenceMoments;
use rayon::prelude::*;

/// Number of equal-width confidence bins on [0, 1] for ECE and MCE (reference §5.6).
pub const CALIBRATION_BINS: usize = 10;

/// Test rows per parallel task of [`predictive_metrics`]: large enough to amortise a task,
/// small enough to balance two cores on a few thousand rows.
const ROW_CHUNK: usize = 256;

/// Inputs the metrics cannot be computed from.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum AccuracyError {
    /// Too few draws (none, or one where a standard deviation is needed).
    #[error("{what} needs at least {need} draws, got {got}")]
    TooFewDraws {
        /// The metric.
        what: &'static str,
        /// Draws needed.
        need: usize,
        /// Draws given.
        got: usize,
    },
    /// No test rows.
    #[error("the test split has no rows")]
    NoRows,
    /// The draws and the reference (or the model) disagree on the number of parameters.
    #[error("the draws have {draws} parameters but the {other} has {expected}")]
    Dimension {
        /// Parameters per draw.
        draws: usize,
        /// What the draws are compared with.
        other: &'static str,
        /// Its number of parameters.
        expected: usize,
    },
    /// A flat buffer is not a whole number of rows.
    #[error("{what}: {len} values are not a whole number of rows of {width}")]
    Shape {
        /// The buffer.
        what: &'static str,
        /// Its length.
        len: usize,
        /// The row width.
        width: usize,
    },
    /// Two inputs that must have equal lengths do not.
    #[error("{what}: {got} values, expected {expected}")]
    Length {
        /// What is compared.
        what: &'static str,
        /// The length found.
        got: usize,
        /// The length expected.
        expected: usize,
    },
    /// A calibration with zero bins.
    #[error("calibration needs at least 1 bin")]
    NoBins,
    /// A confidence that is NaN or infinite.
    #[error("confidence {value} of prediction {index} is not finite")]
    NotFinite {
        /// 0-based prediction.
        index: usize,
        /// The value.
        value: f64,
    },
}

/// Chains truncated to the shortest, as (chains, draws per chain); checks the shapes.
fn equal_chains<'a>(
    chains: &[&'a [f64]],
    dim: usize,
) -> Result<(Vec<&'a [f64]>, usize), AccuracyError> {
    if dim == 0 {
        return Err(AccuracyError::Shape {
            what: "draws",
            len: 0,
            width: 0,
        });
    }
    for c in chains {
        if !c.len().is_multiple_of(dim) {
            return Err(AccuracyError::Shape {
                what: "chain draws",
                len: c.len(),
                width: dim,
            });
        }
    }
    let n = chains.iter().map(|c| c.len() / dim).min().unwrap_or(0);
    Ok((chains.iter().map(|c| &c[..n * dim]).collect(), n))
}

fn check_reference(dim: usize, reference: &ReferenceMoments) -> Result<(), AccuracyError> {
    if reference.dim() != dim {
        return Err(AccuracyError::Dimension {
            draws: dim,
            other: "reference",
            expected: reference.dim(),
        });
    }
    Ok(())
}

/// Mean and sd (divisor n − 1) of every coordinate over all draws of all chains (two passes,
/// for accuracy when the mean is large relative to the sd).
pub fn pooled_mean_sd(
    chains: &[&[f64]],
    dim: usize,
) -> Result<(Vec<f64>, Vec<f64>), AccuracyError> {
    let (chains, n) = equal_chains(chains, dim)?;
    let total = n * chains.len();
    if total < 2 {
        return Err(AccuracyError::TooFewDraws {
            what: "a standard deviation",
            need: 2,
            got: total,
        });
    }
    let mut mean = vec![0.0; dim];
    for row in chains.iter().flat_map(|c| c.chunks_exact(dim)) {
        mean.iter_mut().zip(row).for_each(|(m, x)| *m += x);
    }
    mean.iter_mut().for_each(|m| *m /= total as f64);
    let mut ss = vec![0.0; dim];
    for row in chains.iter().flat_map(|c| c.chunks_exact(dim)) {
        for ((s, x), m) in ss.iter_mut().zip(row).zip(&mean) {
            *s += (x - m) * (x - m);
        }
    }
    let sd = ss.iter().map(|s| (s / (total - 1) as f64).sqrt()).collect();
    Ok((mean, sd))
}

/// ξ = ‖σ̂ − σ_ref‖₂ / ‖σ_ref‖₂ for given standard deviations (MAMBA paper §4.1).
pub fn relative_sd_error_of(sd: &[f64], reference_sd: &[f64]) -> Result<f64, AccuracyError> {
    if sd.len() != reference_sd.len() {
        return Err(AccuracyError::Dimension {
            draws: sd.len(),
            other: "reference",
            expected: reference_sd.len(),
        });
    }
    let num: f64 = sd
        .iter()
        .zip(reference_sd)
        .map(|(a, b)| (a - b) * (a - b))
        .sum();
    let den: f64 = reference_sd.iter().map(|b| b * b).sum();
    Ok((num / den).sqrt())
}

/// Relative sd error ξ of the pooled draws (D = `dim` values per draw) against the reference:
/// σ̂ⱼ is the sd (divisor n − 1) of coordinate j over all draws of all chains (each truncated
/// to the shortest).
pub fn relative_sd_error(
    chains: &[&[f64]],
    dim: usize,
    reference: &ReferenceMoments,
) -> Result<f64, AccuracyError> {
    check_reference(dim, reference)?;
    let (_, sd) = pooled_mean_sd(chains, dim)?;
    relative_sd_error_of(&sd, &reference.sd)
}

/// The average squared z-score (1/D)·Σⱼ ((μ̂ⱼ − μⱼ)/σⱼ)² for a given estimate μ̂ (reference
/// §7.8).
pub fn mean_squared_z_of(
    mean: &[f64],
    reference_mean: &[f64],
    reference_sd: &[f64],
) -> Result<f64, AccuracyError> {
    if mean.len() != reference_mean.len() || mean.len() != reference_sd.len() {
        return Err(AccuracyError::Dimension {
            draws: mean.len(),
            other: "reference",
            expected: reference_mean.len(),
        });
    }
    let sum: f64 = mean
        .iter()
        .zip(reference_mean)
        .zip(reference_sd)
        .map(|((m, r), s)| ((m - r) / s).powi(2))
        .sum();
    Ok(sum / mean.len() as f64)
}

/// The end-of-run average squared z-score and the number of draws its mean used.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ZScore {
    /// (1/D)·Σⱼ ((μ̂ⱼ − μ_ref,ⱼ)/σ_ref,ⱼ)².
    pub value: f64,
    /// Draws in the window that gives μ̂ (the second half of the pooled draws).
    pub window: usize,
}

/// Average squared coordinate-wise z-score of the draws against the reference (coreset-MCMC
/// paper §5, reference §7.8), the end-of-run value: μ̂ is the mean of the second half of the
/// pooled draws. Pooled order is iteration-major (iteration t of chain c is draw t·C + c, as
/// §7.8 appends the C chains' draws per iteration); the window is the last ⌊C·n/2⌋ of the C·n
/// draws. For exact independent draws E\[value\] = 1/window.
pub fn mean_squared_z_score(
    chains: &[&[f64]],
    dim: usize,
    reference: &ReferenceMoments,
) -> Result<ZScore, AccuracyError> {
    check_reference(dim, reference)?;
    let (chains, n) = equal_chains(chains, dim)?;
    let c = chains.len();
    let total = n * c;
    let window = total / 2;
    if window == 0 {
        return Err(AccuracyError::TooFewDraws {
            what: "the z-score (mean of the second half)",
            need: 2,
            got: total,
        });
    }
    let mut mean = vec![0.0; dim];
    for p in total - window..total {
        let row = &chains[p % c][(p / c) * dim..(p / c + 1) * dim];
        mean.iter_mut().zip(row).for_each(|(m, x)| *m += x);
    }
    mean.iter_mut().for_each(|m| *m /= window as f64);
    Ok(ZScore {
        value: mean_squared_z_of(&mean, &reference.mean, &reference.sd)?,
        window,
    })
}

/// S and n of a draw-major S × n matrix of log-likelihoods.
fn log_lik_shape(log_lik: &[f64], rows: usize) -> Result<usize, AccuracyError> {
    if rows == 0 {
        return Err(AccuracyError::NoRows);
    }
    if !log_lik.len().is_multiple_of(rows) {
        return Err(AccuracyError::Shape {
            what: "log-likelihoods",
            len: log_lik.len(),
            width: rows,
        });
    }
    let s = log_lik.len() / rows;
    if s == 0 {
        return Err(AccuracyError::TooFewDraws {
            what: "the test log-loss",
            need: 1,
            got: 0,
        });
    }
    Ok(s)
}

/// log((1/S)·Σₛ exp(aₛ)), shifted by the maximum so that no term overflows or all underflow.
fn log_mean_exp(values: impl Iterator<Item = f64> + Clone) -> f64 {
    let m = values.clone().fold(f64::NEG_INFINITY, f64::max);
    if m == f64::NEG_INFINITY {
        return m;
    }
    let (sum, count) = values.fold((0.0, 0usize), |(s, k), a| (s + (a - m).exp(), k + 1));
    m + (sum / count as f64).ln()
}

/// Posterior-predictive log-loss −(1/n)·Σᵢ log((1/S)·Σₛ p(yᵢ | xᵢ, θₛ)), from the draw-major
/// S × n matrix `log_lik[s·n + i] = log p(yᵢ | xᵢ, θₛ)`.
pub fn log_loss(log_lik: &[f64], rows: usize) -> Result<f64, AccuracyError> {
    let s = log_lik_shape(log_lik, rows)?;
    let total: f64 = (0..rows)
        .map(|i| log_mean_exp((0..s).map(|k| log_lik[k * rows + i])))
        .sum();
    Ok(-total / rows as f64)
}

/// The MAMBA code's test log-loss (reference §5.5): the mean over draws of the average negative
/// log-likelihood over the test rows, (1/S)·Σₛ (1/n)·Σᵢ −log p(yᵢ | xᵢ, θₛ); same layout as
/// [`log_loss`], and never smaller than it.
pub fn log_loss_mamba(log_lik: &[f64], rows: usize) -> Result<f64, AccuracyError> {
    log_lik_shape(log_lik, rows)?;
    Ok(-log_lik.iter().sum::<f64>() / log_lik.len() as f64)
}

/// One confidence bin of a [`Calibration`].
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct CalibrationBin {
    /// Lower edge (excluded, except 0 in the first bin).
    pub lower: f64,
    /// Upper edge (included).
    pub upper: f64,
    /// Predictions in the bin.
    pub count: usize,
    /// Fraction of them that are correct (NaN, `null` in JSON, when empty).
    pub accuracy: f64,
    /// Their mean confidence (NaN when empty).
    pub confidence: f64,
}

/// Expected and maximum calibration error (Guo et al. 2017; MAMBA paper §4.3; reference §5.6).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Calibration {
    /// ECE = Σ_b (|B_b|/n)·|acc(B_b) − conf(B_b)|, a fraction in [0, 1] (the paper prints %).
    pub ece: f64,
    /// MCE = max over non-empty bins of |acc(B_b) − conf(B_b)|, a fraction in [0, 1].
    pub mce: f64,
    /// The bins in order.
    pub bins: Vec<CalibrationBin>,
}

/// The 0-based bin of a confidence among `bins` equal-width bins on [0, 1]: bin b holds
/// (b/B, (b+1)/B] (right-closed, Guo et al.'s convention), and 0 goes to the first bin. The
/// edges are the doubles b/B, so 0.3 lies in (0.2, 0.3], not above it. Values outside [0, 1]
/// go to the end bins.
pub fn calibration_bin(confidence: f64, bins: usize) -> usize {
    let b = bins as f64;
    // k is the 1-based candidate ⌈conf·B⌉, corrected by one against the exact edges k/B.
    let mut k = (confidence * b).ceil().clamp(1.0, b) as usize;
    if k > 1 && confidence <= (k - 1) as f64 / b {
        k -= 1;
    } else if k < bins && confidence > k as f64 / b {
        k += 1;
    }
    k - 1
}

/// ECE and MCE of predictions with confidences (top-class probabilities) and whether each was
/// correct, over `bins` equal-width bins on [0, 1] (see [`calibration_bin`]).
pub fn calibration(
    confidence: &[f64],
    correct: &[bool],
    bins: usize,
) -> Result<Calibration, AccuracyError> {
    if bins == 0 {
        return Err(AccuracyError::NoBins);
    }
    if confidence.len() != correct.len() {
        return Err(AccuracyError::Length {
            what: "correct flags",
            got: correct.len(),
            expected: confidence.len(),
        });
    }
    if confidence.is_empty() {
        return Err(AccuracyError::NoRows);
    }
    // (count, correct, Σ confidence) per bin.
    let mut acc = vec![(0usize, 0usize, 0.0f64); bins];
    for (index, (&c, &ok)) in confidence.iter().zip(correct).enumerate() {
        if !c.is_finite() {
            return Err(AccuracyError::NotFinite { index, value: c });
        }
        let a = &mut acc[calibration_bin(c, bins)];
        a.0 += 1;
        a.1 += usize::from(ok);
        a.2 += c;
    }
    let n = confidence.len() as f64;
    let (mut ece, mut mce) = (0.0, 0.0f64);
    let bins = acc
        .iter()
        .enumerate()
        .map(|(b, &(count, right, conf_sum))| {
            let (accuracy, confidence) = if count == 0 {
                (f64::NAN, f64::NAN)
            } else {
                let k = count as f64;
                let (a, c) = (right as f64 / k, conf_sum / k);
                ece += k / n * (a - c).abs();
                mce = mce.max((a - c).abs());
                (a, c)
            };
            CalibrationBin {
                lower: b as f64 / acc.len() as f64,
                upper: (b + 1) as f64 / acc.len() as f64,
                count,
                accuracy,
                confidence,
            }
        })
        .collect();
    Ok(Calibration { ece, mce, bins })
}

/// Root mean squared error of predictions.
pub fn rmse(predicted: &[f64], targets: &[f64]) -> Result<f64, AccuracyError> {
    if predicted.len() != targets.len() {
        return Err(AccuracyError::Length {
            what: "predictions",
            got: predicted.len(),
            expected: targets.len(),
        });
    }
    if targets.is_empty() {
        return Err(AccuracyError::NoRows);
    }
    let ss: f64 = predicted
        .iter()
        .zip(targets)
        .map(|(p, y)| (p - y) * (p - y))
        .sum();
    Ok((ss / targets.len() as f64).sqrt())
}

/// The test-split metrics of [`predictive_metrics`].
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct PredictiveMetrics {
    /// Classification (with the number of classes) or regression.
    #[cfg_attr(feature = "serde", serde(flatten))]
    pub task: PredictiveTask,
    /// Test rows n.
    pub rows: usize,
    /// Draws S the predictive averages over.
    pub draws: usize,
    /// Posterior-predictive log-loss −(1/n)·Σᵢ log((1/S)·Σₛ p(yᵢ | xᵢ, θₛ)) (for regression:
    /// the negative log predictive density).
    pub log_loss: f64,
    /// The MAMBA code's (1/S)·Σₛ (1/n)·Σᵢ −log p(yᵢ | xᵢ, θₛ) (reference §5.5).
    pub log_loss_mamba: f64,
    /// Classifiers: fraction of rows whose top posterior-mean class is the label.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub accuracy: Option<f64>,
    /// Classifiers: ECE, a fraction (see [`Calibration`]).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub ece: Option<f64>,
    /// Classifiers: MCE, a fraction.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub mce: Option<f64>,
    /// Classifiers: the number of equal-width confidence bins on [0, 1].
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub calibration_bins: Option<usize>,
    /// Classifiers: what the confidence is.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub calibration_confidence: Option<&'static str>,
    /// Classifiers: the bins (a reliability diagram).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub calibration: Option<Vec<CalibrationBin>>,
    /// Regression: RMSE of the posterior-mean prediction (1/S)·Σₛ E[y | xᵢ, θₛ].
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub rmse: Option<f64>,
}

/// What one test row contributes.
#[derive(Debug, Clone, Copy, Default)]
struct RowResult {
    /// log((1/S)·Σₛ p(y | x, θₛ)).
    log_predictive: f64,
    /// (1/S)·Σₛ log p(y | x, θₛ).
    mean_log_lik: f64,
    /// Classifiers: the top class's posterior-mean probability; regression: the posterior-mean
    /// prediction.
    value: f64,
    /// Classifiers: whether the top class is the label.
    correct: bool,
}

/// Per-row results over the rows of `x`, in parallel over fixed chunks of rows (each row's
/// result depends on that row only, so the output does not depend on the thread count). Each
/// chunk is predicted one draw at a time through [`Predictive::predict_rows`], so a model with a
/// batched forward pass evaluates a whole chunk per call.
fn row_results<T: Element>(
    model: &dyn Predictive,
    draws: &[f64],
    x: &Matrix<T>,
    targets: &[f64],
    out: &mut [RowResult],
) {
    let dim = model.dim();
    let s = draws.len() / dim;
    let task = model.task();
    let k = task.outputs();
    let cols = x.cols();
    out.par_chunks_mut(ROW_CHUNK)
        .enumerate()
        .for_each(|(chunk, results)| {
            // Workspaces per chunk; nothing is allocated per row or per draw.
            let first = chunk * ROW_CHUNK;
            let rows = results.len();
            let mut block = vec![0.0; rows * cols];
            for (r, dst) in block.chunks_exact_mut(cols).enumerate() {
                dst.iter_mut()
                    .zip(x.row(first + r))
                    .for_each(|(a, b)| *a = b.to_f64());
            }
            let ys = &targets[first..first + rows];
            // Draw-major: log_lik[draw·rows + r].
            let mut log_lik = vec![0.0; s * rows];
            let mut summary = vec![0.0; rows * k];
            let mut mean = vec![0.0; rows * k];
            for (theta, ll) in draws.chunks_exact(dim).zip(log_lik.chunks_exact_mut(rows)) {
                model.predict_rows(theta, &block, ys, ll, &mut summary);
                mean.iter_mut().zip(&summary).for_each(|(m, v)| *m += v);
            }
            mean.iter_mut().for_each(|m| *m /= s as f64);
            for (r, (result, mean)) in results.iter_mut().zip(mean.chunks_exact(k)).enumerate() {
                let y = ys[r];
                let (value, correct, p_y) = match task {
                    PredictiveTask::Classification { .. } => {
                        // The first class with the largest probability.
                        let (top, &p) = mean
                            .iter()
                            .enumerate()
                            .fold((0, &mean[0]), |best, c| if c.1 > best.1 { c } else { best });
                        (p, top as f64 == y, mean[y as usize])
                    }
                    PredictiveTask::Regression => (mean[0], false, 0.0),
                };
                let row_log_lik = log_lik.iter().skip(r).step_by(rows);
                // For classifiers (1/S)·Σₛ p(y | x, θₛ) is the mean probability of class y,
                // already summed: its log saves an exp per draw. Log-sum-exp of the
                // log-likelihoods for regression, or when that mean is subnormal.
                let log_predictive = if p_y >= f64::MIN_POSITIVE {
                    p_y.ln()
                } else {
                    log_mean_exp(row_log_lik.clone().copied())
                };
                *result = RowResult {
                    log_predictive,
                    mean_log_lik: row_log_lik.sum::<f64>() / s as f64,
                    value,
                    correct,
                };
            }
        });
}

/// Every test-split metric of `model` at the draws θ₁..θ_S (`draws`, S × D row-major) on the
/// held-out rows `features` with responses `targets` (prepared by
/// [`Predictive::prepare_held_out_targets`]); `bins` confidence bins for ECE/MCE. Work
/// O(S·n·d), spread over the cores by rows; the result does not depend on the thread count.
pub fn predictive_metrics(
    model: &dyn Predictive,
    draws: &[f64],
    features: &Features,
    targets: &[f64],
    bins: usize,
) -> Result<PredictiveMetrics, AccuracyError> {
    let dim = model.dim();
    if !draws.len().is_multiple_of(dim) {
        return Err(AccuracyError::Shape {
            what: "draws",
            len: draws.len(),
            width: dim,
        });
    }
    let s = draws.len() / dim;
    if s == 0 {
        return Err(AccuracyError::TooFewDraws {
            what: "the test metrics",
            need: 1,
            got: 0,
        });
    }
    let n = features.rows();
    if n == 0 {
        return Err(AccuracyError::NoRows);
    }
    if targets.len() != n {
        return Err(AccuracyError::Length {
            what: "test responses",
            got: targets.len(),
            expected: n,
        });
    }
    if features.cols() != model.input_columns() {
        return Err(AccuracyError::Length {
            what: "test feature columns",
            got: features.cols(),
            expected: model.input_columns(),
        });
    }
    let task = model.task();
    if bins == 0 && matches!(task, PredictiveTask::Classification { .. }) {
        return Err(AccuracyError::NoBins);
    }
    let mut rows = vec![RowResult::default(); n];
    match features {
        Features::F64(x) => row_results(model, draws, x, targets, &mut rows),
        Features::F32(x) => row_results(model, draws, x, targets, &mut rows),
        // Held-out rows are few: written out once, they take the dense path.
        Features::Sparse(x) => row_results(model, draws, &x.to_dense(), targets, &mut rows),
    }
    // Sums in row order: the same bits for any thread count.
    let log_loss = -rows.iter().map(|r| r.log_predictive).sum::<f64>() / n as f64;
    let log_loss_mamba = -rows.iter().map(|r| r.mean_log_lik).sum::<f64>() / n as f64;
    let mut metrics = PredictiveMetrics {
        task,
        rows: n,
        draws: s,
        log_loss,
        log_loss_mamba,
        accuracy: None,
        ece: None,
        mce: None,
        calibration_bins: None,
        calibration_confidence: None,
        calibration: None,
        rmse: None,
    };
    let values: Vec<f64> = rows.iter().map(|r| r.value).collect();
    match task {
        PredictiveTask::Classification { .. } => {
            let correct: Vec<bool> = rows.iter().map(|r| r.correct).collect();
            let cal = calibration(&values, &correct, bins)?;
            metrics.accuracy = Some(correct.iter().filter(|&&c| c).count() as f64 / n as f64);
            metrics.ece = Some(cal.ece);
            metrics.mce = Some(cal.mce);
            metrics.calibration_bins = Some(bins);
            metrics.calibration_confidence =
                Some("top-class probability of the posterior-mean predictive");
            metrics.calibration = Some(cal.bins);
        }
        PredictiveTask::Regression => metrics.rmse = Some(rmse(&values, targets)?),
    }
    Ok(metrics)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_are_right_closed_at_the_exact_edges() {
        assert_eq!(calibration_bin(0.0, 10), 0);
        assert_eq!(calibration_bin(0.05, 10), 0);
        assert_eq!(calibration_bin(0.1, 10), 0);
        assert_eq!(calibration_bin(0.3, 10), 2);
        assert_eq!(calibration_bin(0.7, 10), 6);
        assert_eq!(calibration_bin(0.30000000000000004, 10), 3);
        assert_eq!(calibration_bin(0.95, 10), 9);
        assert_eq!(calibration_bin(1.0, 10), 9);
        assert_eq!(calibration_bin(1.0 + 1e-15, 10), 9);
        for k in 1..=10 {
            assert_eq!(calibration_bin(k as f64 / 10.0, 10), k - 1, "edge {k}/10");
        }
    }

    #[test]
    fn log_mean_exp_survives_underflow() {
        let v = [-1000.0, -1000.0 + 2f64.ln()];
        let got = log_mean_exp(v.iter().copied());
        assert!((got - (-1000.0 + 1.5f64.ln())).abs() < 1e-12, "{got}");
        assert_eq!(
            log_mean_exp([f64::NEG_INFINITY; 2].iter().copied()),
            f64::NEG_INFINITY
        );
    }
}
