//! [`EstimatorSettings`]: a gradient estimator as a serialisable value, and the one place that
//! builds it.

use super::SettingsError;
use crate::estimator::{
    BatchSize, ControlVariates, EstimatorError, FullBatch, GradientEstimator, Minibatch,
    MinibatchScheme, Svrg,
};
use crate::model::Model;

/// A gradient estimator, as the `[gradient]` table of a run file writes it.
/// [`EstimatorSettings::build`] turns it into a fresh [`GradientEstimator`] over a model.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct EstimatorSettings {
    /// `"minibatch"` (default), `"control_variates"`, `"svrg"` or `"full"`.
    #[cfg_attr(feature = "serde", serde(default))]
    pub estimator: EstimatorKind,
    /// A count (integer) or a fraction of N (a number in (0, 1]); default 1 % of N.
    #[cfg_attr(feature = "serde", serde(default = "default_batch"))]
    pub batch_size: BatchSize,
    /// SVRG only: refresh the centre every this many estimates (default ⌈N/n⌉, one epoch).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub update_rate: Option<usize>,
    /// Compatibility (`minibatch_with_replacement`, SGMCMCJax): draw minibatches with
    /// replacement (minibatch, control variates, SVRG); default false.
    #[cfg_attr(feature = "serde", serde(default))]
    pub with_replacement: bool,
    /// How minibatches are drawn: `"uniform"` (default; random rows) or `"block"` (a contiguous
    /// block from a random offset, read at bandwidth; the run file's pipeline permutes the rows
    /// once first). Also the minibatch MH test's batches.
    #[cfg_attr(feature = "serde", serde(default))]
    pub scheme: MinibatchScheme,
}

impl Default for EstimatorSettings {
    fn default() -> Self {
        Self {
            estimator: EstimatorKind::default(),
            batch_size: default_batch(),
            update_rate: None,
            with_replacement: false,
            scheme: MinibatchScheme::Uniform,
        }
    }
}

fn default_batch() -> BatchSize {
    BatchSize::Fraction(0.01)
}

/// Which gradient estimator.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum EstimatorKind {
    /// Standard minibatch estimator with N/n scaling.
    #[default]
    Minibatch,
    /// Control variates centred at the MAP (Baker et al. 2019): the SGLD-CV family.
    ControlVariates,
    /// Control variates with a centre refreshed every `update_rate` estimates (Dubey et al. 2016).
    Svrg,
    /// Exact full-data gradient.
    Full,
}

impl EstimatorSettings {
    /// Check the settings against `model` without building anything expensive.
    pub fn check(&self, model: &dyn Model) -> Result<(), SettingsError> {
        self.batch_size.resolve(model.num_data())?;
        if self.with_replacement && self.estimator == EstimatorKind::Full {
            return Err(SettingsError::ReplacementWithFull);
        }
        if self.with_replacement && self.scheme == MinibatchScheme::Block {
            return Err(SettingsError::ReplacementWithBlocks);
        }
        match (self.estimator, self.update_rate) {
            (EstimatorKind::Svrg, Some(0)) => Err(EstimatorError::BadUpdateRate(0).into()),
            (EstimatorKind::Svrg, _) | (_, None) => Ok(()),
            (_, Some(_)) => Err(SettingsError::UpdateRateWithoutSvrg),
        }
    }

    /// Whether the estimator needs a centre (the MAP): control variates.
    pub fn needs_centre(&self) -> bool {
        self.estimator == EstimatorKind::ControlVariates
    }

    /// A fresh estimator over `model`; `centre` is the control variates' centre (the MAP).
    pub fn build<'m>(
        &self,
        model: &'m dyn Model,
        centre: Option<&[f64]>,
    ) -> Result<Box<dyn GradientEstimator + 'm>, SettingsError> {
        let batch = self.batch_size;
        let (replace, scheme) = (self.with_replacement, self.scheme);
        Ok(match self.estimator {
            EstimatorKind::Minibatch => Box::new(
                Minibatch::new(model, batch)?
                    .with_replacement(replace)
                    .with_scheme(scheme),
            ),
            EstimatorKind::ControlVariates => {
                let centre = centre.ok_or(SettingsError::MissingCentre)?;
                Box::new(
                    ControlVariates::new(model, batch, centre)?
                        .with_replacement(replace)
                        .with_scheme(scheme),
                )
            }
            EstimatorKind::Svrg => Box::new(
                Svrg::new(model, batch, self.update_rate)?
                    .with_replacement(replace)
                    .with_scheme(scheme),
            ),
            EstimatorKind::Full => Box::new(FullBatch::new(model)),
        })
    }
}
