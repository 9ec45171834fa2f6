//! Full-batch scores at thinned draws (reference §4.6, score source `FullBatch`).
//!
//! Rows 0, k, 2k, … of the draws are kept and the exact ∇log π is computed at all of them with
//! [`FullDataEvaluator::grad_log_posterior_draws`] (parallel, thread-count-independent passes
//! over the N data, each for a block of draws; the GLMs' passes are matrix products), so the
//! cost is N row gradients per kept draw but one read of the data per block. The time is measured and returned,
//! since it is outside a tuner's sampling budget but usually dominates the KSD itself.

use super::{SteinError, check_rows};
use crate::estimator::FullDataEvaluator;
use crate::model::Model;
use std::time::Instant;

/// Thinned draws and their exact scores.
#[derive(Debug, Clone, PartialEq)]
pub struct ThinnedScores {
    /// Kept draws, P' × D row-major (rows 0, k, 2k, … of the input).
    pub draws: Vec<f64>,
    /// ∇log π at each kept draw, P' × D row-major.
    pub scores: Vec<f64>,
    /// D.
    pub dim: usize,
    /// Seconds the scores took.
    pub seconds: f64,
}

impl ThinnedScores {
    /// Number of kept draws P'.
    pub fn len(&self) -> usize {
        self.draws.len() / self.dim
    }

    /// Whether no draw was kept.
    pub fn is_empty(&self) -> bool {
        self.draws.is_empty()
    }
}

/// Rows 0, k, 2k, … of `rows` (row-major, `dim` per row).
pub fn every_kth_row(rows: &[f64], dim: usize, k: usize) -> Vec<f64> {
    rows.chunks_exact(dim.max(1))
        .step_by(k.max(1))
        .flatten()
        .copied()
        .collect()
}

/// Full-batch scores of `model` at rows 0, `thin`, 2·`thin`, … of `draws` (P × D row-major).
pub fn full_batch_scores(
    model: &dyn Model,
    draws: &[f64],
    dim: usize,
    thin: usize,
) -> Result<ThinnedScores, SteinError> {
    let start = Instant::now();
    let p = check_rows("draws", draws, dim)?;
    if model.dim() != dim {
        return Err(SteinError::ModelDimension {
            model: model.dim(),
            draws: dim,
        });
    }
    if thin == 0 {
        return Err(SteinError::BadSetting("thinning must be at least 1".into()));
    }
    if p == 0 {
        return Err(SteinError::EmptySample);
    }
    let kept = every_kth_row(draws, dim, thin);
    let mut scores = vec![0.0; kept.len()];
    FullDataEvaluator::new(model).grad_log_posterior_draws(&kept, &mut scores);
    if let Some(k) = scores.iter().position(|g| !g.is_finite()) {
        return Err(SteinError::NonFinite {
            what: "scores",
            row: k / dim * thin,
            col: k % dim,
            value: scores[k],
        });
    }
    Ok(ThinnedScores {
        draws: kept,
        scores,
        dim,
        seconds: start.elapsed().as_secs_f64(),
    })
}
