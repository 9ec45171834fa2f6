//! Reference posterior moments (mean, sd, covariance, with their ESS and R-hat) and their file:
//! what `sgmcmc reference` writes, what a data set's published reference is loaded into, and
//! what a run's `summary.json` metrics are computed against. A plain value at the bottom of the
//! layers, so data loaders and diagnostics can use it without the reference samplers.

#[cfg(feature = "serde")]
use std::path::Path;

/// Largest D for which a reference stores the full covariance (D² values: 32 MB at 2,000).
pub const COVARIANCE_MAX_DIM: usize = 2_000;

/// Posterior moments from a reference run, with that run's own convergence diagnostics, on
/// the scale the parameter names refer to (σ, not log σ, for a model with constrained
/// parameters: [`crate::model::Model::constrain`]), as a run's draws are reported.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ReferenceMoments {
    /// How the moments were obtained (e.g. "nuts-rs 0.17, 4 chains × 5000 draws").
    pub method: String,
    /// Parameter names, in the model's order (D).
    pub parameter_names: Vec<String>,
    /// Posterior mean (D).
    pub mean: Vec<f64>,
    /// Posterior standard deviation (D).
    pub sd: Vec<f64>,
    /// Posterior covariance, D × D row-major (symmetric); empty when D >
    /// [`COVARIANCE_MAX_DIM`] (52,580 PMF parameters would need 22 GB), in which case the file
    /// omits it.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Vec::is_empty")
    )]
    pub covariance: Vec<f64>,
    /// Bulk ESS of each coordinate of the reference run (D).
    #[cfg_attr(feature = "serde", serde(deserialize_with = "floats_or_null"))]
    pub ess_bulk: Vec<f64>,
    /// Rank-normalised split R-hat of each coordinate of the reference run (D).
    #[cfg_attr(feature = "serde", serde(deserialize_with = "floats_or_null"))]
    pub rhat: Vec<f64>,
    /// Chains and post-warm-up draws per chain of the reference run.
    pub chains: usize,
    /// Post-warm-up draws per chain.
    pub draws_per_chain: usize,
}

#[cfg(feature = "serde")]
/// A list of numbers where `null` stands for NaN: JSON has no NaN, and serde_json writes a
/// non-finite f64 (an undefined ESS or R-hat) as `null`.
fn floats_or_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    let values: Vec<Option<f64>> = serde::Deserialize::deserialize(d)?;
    Ok(values.into_iter().map(|v| v.unwrap_or(f64::NAN)).collect())
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

    /// Check the lengths agree (D, D, D² or none, D, D) and the moments are finite with sd > 0.
    /// Non-finite ESS and R-hat values (a stuck coordinate) are allowed: they are diagnostics.
    pub fn validate(&self) -> Result<(), String> {
        let d = self.mean.len();
        let covariance_len = if self.covariance.is_empty() { 0 } else { d * d };
        let lengths = [
            ("parameter_names", self.parameter_names.len(), d),
            ("sd", self.sd.len(), d),
            ("covariance", self.covariance.len(), covariance_len),
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

    #[cfg(feature = "serde")]
    /// Read and validate a reference file (JSON).
    pub fn load(path: &Path) -> Result<Self, ReferenceError> {
        let name = path.display().to_string();
        let text =
            crate::io::read_regular_to_string(path).map_err(|source| ReferenceError::Io {
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

    #[cfg(feature = "serde")]
    /// Write the file (pretty JSON), atomically ([`crate::io::write_atomic`]; never over a
    /// device or anything else that is not a regular file).
    pub fn save(&self, path: &Path) -> Result<(), ReferenceError> {
        let name = path.display().to_string();
        let io = |source| ReferenceError::Io {
            path: name.clone(),
            source,
        };
        let text = serde_json::to_string_pretty(self).expect("reference moments serialise");
        crate::io::write_atomic(path, (text + "\n").as_bytes()).map_err(io)
    }
}
