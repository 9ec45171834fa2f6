//! The reference-moments file: what `sgmcmc reference` writes and what a run's `summary.json`
//! metrics are computed against.

use serde::{Deserialize, Serialize};
use std::path::Path;

/// Posterior moments from a reference run, with that run's own convergence diagnostics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReferenceMoments {
    /// How the moments were obtained (e.g. "nuts-rs 0.17, 4 chains × 5000 draws").
    pub method: String,
    /// Parameter names, in the model's order (D).
    pub parameter_names: Vec<String>,
    /// Posterior mean (D).
    pub mean: Vec<f64>,
    /// Posterior standard deviation (D).
    pub sd: Vec<f64>,
    /// Posterior covariance, D × D row-major (symmetric).
    pub covariance: Vec<f64>,
    /// Bulk ESS of each coordinate of the reference run (D).
    pub ess_bulk: Vec<f64>,
    /// Rank-normalised split R-hat of each coordinate of the reference run (D).
    pub rhat: Vec<f64>,
    /// Chains and post-warm-up draws per chain of the reference run.
    pub chains: usize,
    /// Post-warm-up draws per chain.
    pub draws_per_chain: usize,
}

/// Errors reading or checking a reference file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReferenceError {
    /// The file cannot be read or written.
    #[error("reference file {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not a valid reference document.
    #[error("reference file {path} is not valid: {why}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong.
        why: String,
    },
}

impl ReferenceMoments {
    /// Number of parameters D.
    pub fn dim(&self) -> usize {
        self.mean.len()
    }

    /// Check the lengths agree (D, D, D², D, D) and the moments are finite with sd > 0.
    pub fn validate(&self) -> Result<(), String> {
        let d = self.mean.len();
        let lengths = [
            ("parameter_names", self.parameter_names.len(), d),
            ("sd", self.sd.len(), d),
            ("covariance", self.covariance.len(), d * d),
            ("ess_bulk", self.ess_bulk.len(), d),
            ("rhat", self.rhat.len(), d),
        ];
        for (name, got, want) in lengths {
            if got != want {
                return Err(format!("`{name}` has {got} values, expected {want}"));
            }
        }
        if d == 0 {
            return Err("no parameters".into());
        }
        if !self
            .mean
            .iter()
            .chain(&self.covariance)
            .all(|v| v.is_finite())
        {
            return Err("non-finite mean or covariance".into());
        }
        if !self.sd.iter().all(|s| s.is_finite() && *s > 0.0) {
            return Err("every sd must be finite and > 0".into());
        }
        Ok(())
    }

    /// Read and validate a reference file (JSON).
    pub fn load(path: &Path) -> Result<Self, ReferenceError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ReferenceError::Io {
            path: name.clone(),
            source,
        })?;
        let moments: Self = serde_json::from_str(&text).map_err(|e| ReferenceError::Invalid {
            path: name.clone(),
            why: e.to_string(),
        })?;
        moments
            .validate()
            .map_err(|why| ReferenceError::Invalid { path: name, why })?;
        Ok(moments)
    }

    /// Write the file (pretty JSON), atomically (temporary file, then rename).
    pub fn save(&self, path: &Path) -> Result<(), ReferenceError> {
        let name = path.display().to_string();
        let io = |source| ReferenceError::Io {
            path: name.clone(),
            source,
        };
        let text = serde_json::to_string_pretty(self).expect("reference moments serialise");
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, text + "\n").map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }
}
