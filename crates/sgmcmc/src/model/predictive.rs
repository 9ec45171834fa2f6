//! Predictions for held-out rows: p(y | x, θ) and the predictive summary (class probabilities or
//! the mean) of a model at one parameter value, for the test-split metrics of
//! [`crate::diagnostics::accuracy`] (reference §5.4–5.6: test log-loss, accuracy, ECE/MCE, RMSE).
//!
//! A separate trait, not part of [`Model`]: only models with a response have a predictive
//! distribution (the GLMs do, the Gaussian location model does not).

use super::{Bernoulli, Family, Glm, Model, ModelError, Normal};

/// What a model predicts for a held-out row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(tag = "task", rename_all = "snake_case"))]
pub enum PredictiveTask {
    /// y is a class index in 0..classes; the summary is p(y = c | x, θ) for every class c.
    Classification {
        /// Number of classes K.
        classes: usize,
    },
    /// y is real; the summary is the predictive mean E[y | x, θ].
    Regression,
}

impl PredictiveTask {
    /// Length of the summary [`Predictive::predict`] writes: K for classifiers, 1 for regression.
    pub fn outputs(self) -> usize {
        match self {
            PredictiveTask::Classification { classes } => classes,
            PredictiveTask::Regression => 1,
        }
    }
}

/// A model whose likelihood is a predictive distribution for new rows (x, y).
///
/// A trait of its own so that [`Model`] stays as it is; `Predictive: Model`, so a
/// `&dyn Predictive` is also a `&dyn Model`.
pub trait Predictive: Model {
    /// Classification (with K) or regression.
    fn task(&self) -> PredictiveTask;

    /// Number of feature columns a held-out row must have.
    fn input_columns(&self) -> usize;

    /// Check held-out responses against the model's support and convert them to the coding
    /// [`Predictive::predict`] takes (the class index for classifiers, e.g. −1/+1 labels become
    /// 0/1); errors name `source` and the 1-based row.
    fn prepare_held_out_targets(&self, ys: &[f64], source: &str) -> Result<Vec<f64>, ModelError>;

    /// Check held-out feature rows the model cannot take as they are (e.g. PMF's user and item
    /// indices beyond its counts); errors name `source` and the 1-based row. Default: none.
    fn check_held_out_features(
        &self,
        _features: &crate::data::Features,
        _source: &str,
    ) -> Result<(), ModelError> {
        Ok(())
    }

    /// log p(y | x, θ) for one held-out row `x` (length [`Predictive::input_columns`]) and a
    /// response `y` prepared by [`Predictive::prepare_held_out_targets`]; writes the predictive
    /// summary at θ into `out` (length [`PredictiveTask::outputs`]).
    fn predict(&self, theta: &[f64], x: &[f64], y: f64, out: &mut [f64]) -> f64;

    /// [`Predictive::predict`] for a block of rows at one θ: `x` holds the rows (row-major,
    /// [`Predictive::input_columns`] each), `ys` their prepared responses; writes log p(yᵣ | xᵣ, θ)
    /// into `log_lik[r]` and row r's summary into `out[r·K..(r + 1)·K]` (K =
    /// [`PredictiveTask::outputs`]). The default calls `predict` row by row; a model with a
    /// batched forward pass (the BNN's GEMMs) overrides it.
    fn predict_rows(
        &self,
        theta: &[f64],
        x: &[f64],
        ys: &[f64],
        log_lik: &mut [f64],
        out: &mut [f64],
    ) {
        let cols = self.input_columns();
        let k = self.task().outputs();
        for (((row, &y), ll), summary) in x
            .chunks_exact(cols)
            .zip(ys)
            .zip(log_lik.iter_mut())
            .zip(out.chunks_exact_mut(k))
        {
            *ll = self.predict(theta, row, y, summary);
        }
    }
}

/// A GLM response family with a predictive summary, which makes [`Glm`] [`Predictive`].
pub trait PredictiveFamily: Family {
    /// Classification or regression.
    fn task(&self) -> PredictiveTask;

    /// A prepared response as a number (class index or value).
    fn target_to_f64(y: Self::Target) -> f64;

    /// The inverse of [`PredictiveFamily::target_to_f64`] for a prepared response.
    fn target_from_f64(y: f64) -> Self::Target;

    /// log p(y | z, extra) (as [`Family::log_lik`]), and the predictive summary given the
    /// linear predictor z written into `out`, in one evaluation.
    fn predict_at(&self, y: Self::Target, z: f64, extra: &[f64], out: &mut [f64]) -> f64;
}

impl PredictiveFamily for Bernoulli {
    fn task(&self) -> PredictiveTask {
        PredictiveTask::Classification { classes: 2 }
    }

    fn target_to_f64(y: u8) -> f64 {
        f64::from(y)
    }

    fn target_from_f64(y: f64) -> u8 {
        u8::from(y == 1.0)
    }

    /// (p(y = 0), p(y = 1)) = (σ(−z), σ(z)) and log p(y | z) = y·z − softplus(z), from one
    /// exponential e = exp(−|z|): σ(|z|) = 1/(1 + e), σ(−|z|) = e/(1 + e),
    /// softplus(z) = max(z, 0) + ln(1 + e). The small probability is never 1 − (the large one).
    /// ln(1 + e) is `ln` of the rounded sum, not `ln_1p`: its absolute error stays below
    /// 2.3·10⁻¹⁶ (what a log-loss needs), and glibc's log1p took 38 % of the test-metrics pass
    /// where ln takes 23 %.
    fn predict_at(&self, y: u8, z: f64, _extra: &[f64], out: &mut [f64]) -> f64 {
        let e = (-z.abs()).exp();
        let big = 1.0 / (1.0 + e);
        let small = e * big;
        let (p0, p1) = if z >= 0.0 { (small, big) } else { (big, small) };
        out[0] = p0;
        out[1] = p1;
        f64::from(y) * z - (z.max(0.0) + (1.0 + e).ln())
    }
}

impl PredictiveFamily for Normal {
    fn task(&self) -> PredictiveTask {
        PredictiveTask::Regression
    }

    fn target_to_f64(y: f64) -> f64 {
        y
    }

    fn target_from_f64(y: f64) -> f64 {
        y
    }

    /// E[y | z] = z and the normal log-density.
    fn predict_at(&self, y: f64, z: f64, extra: &[f64], out: &mut [f64]) -> f64 {
        out[0] = z;
        self.log_lik(y, z, extra)
    }
}

impl<F: PredictiveFamily> Predictive for Glm<F> {
    fn task(&self) -> PredictiveTask {
        self.family().task()
    }

    fn input_columns(&self) -> usize {
        self.num_features()
    }

    fn prepare_held_out_targets(&self, ys: &[f64], source: &str) -> Result<Vec<f64>, ModelError> {
        Ok(self
            .family()
            .prepare_targets(ys, source)?
            .into_iter()
            .map(F::target_to_f64)
            .collect())
    }

    /// z = xᵀw + b, then log p(y | z, extra) and the family's summary.
    fn predict(&self, theta: &[f64], x: &[f64], y: f64, out: &mut [f64]) -> f64 {
        let (w, b, extra) = self.split(theta);
        let z = x.iter().zip(w).map(|(a, c)| a * c).sum::<f64>() + b;
        self.family()
            .predict_at(F::target_from_f64(y), z, extra, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{Dataset, Features, Matrix};
    use crate::model::{NoiseModel, NormalPrior};

    fn data(y: Vec<f64>) -> Dataset {
        let n = y.len();
        Dataset {
            features: Features::F64(Matrix::from_vec(vec![1.0; 2 * n], n, 2).unwrap()),
            targets: Some(y),
            feature_names: Vec::new(),
            features_source: "x".into(),
            targets_source: None,
        }
    }

    #[test]
    fn logistic_predictive_is_the_bernoulli_of_the_linear_predictor() {
        let m = Glm::new(
            data(vec![0.0, 1.0]),
            Bernoulli,
            NormalPrior::new(1.0).unwrap(),
            true,
        )
        .unwrap();
        assert_eq!(m.task(), PredictiveTask::Classification { classes: 2 });
        // θ = (0.5, −1, intercept 0.25) at x = (2, 1): z = 0.25.
        let theta = [0.5, -1.0, 0.25];
        let mut out = [0.0; 2];
        let lp = m.predict(&theta, &[2.0, 1.0], 1.0, &mut out);
        let p = 1.0 / (1.0 + (-0.25f64).exp());
        assert!((out[1] - p).abs() < 1e-15 && (out[0] - (1.0 - p)).abs() < 1e-15);
        assert!((lp - p.ln()).abs() < 1e-14);
        let lp0 = m.predict(&theta, &[2.0, 1.0], 0.0, &mut out);
        assert!((lp0 - (1.0 - p).ln()).abs() < 1e-14);
        // The fused evaluation agrees with the family's log-likelihood and σ at every z,
        // including far tails where 1 − σ(z) would round to 0.
        for z in [-800.0, -40.0, -3.0, -1e-3, 0.0, 1e-3, 2.5, 40.0, 800.0] {
            for y in [0u8, 1] {
                let lp = Bernoulli.predict_at(y, z, &[], &mut out);
                let want = Bernoulli.log_lik(y, z, &[]);
                assert!((lp - want).abs() <= 1e-15 * want.abs().max(1.0), "{z} {y}");
            }
            let s1 = crate::model::logistic::sigmoid(z);
            let s0 = crate::model::logistic::sigmoid(-z);
            assert!((out[1] - s1).abs() <= 4e-16 * s1, "{z}: {} vs {s1}", out[1]);
            assert!((out[0] - s0).abs() <= 4e-16 * s0, "{z}: {} vs {s0}", out[0]);
        }
        // −1/+1 labels map to class indices; other labels are errors naming the row.
        assert_eq!(
            m.prepare_held_out_targets(&[-1.0, 1.0], "t").unwrap(),
            vec![0.0, 1.0]
        );
        let e = m.prepare_held_out_targets(&[0.0, 2.0], "t").unwrap_err();
        assert!(e.to_string().contains("row 2"), "{e}");
    }

    #[test]
    fn linear_predictive_is_normal_around_the_linear_predictor() {
        let prior = NormalPrior::new(1.0).unwrap();
        let noise = NoiseModel::Learned {
            prior_variance: 1.0,
        };
        let m = Glm::new(
            data(vec![0.3, 1.0]),
            Normal::new(noise).unwrap(),
            prior,
            false,
        )
        .unwrap();
        assert_eq!(m.task(), PredictiveTask::Regression);
        // θ = (1, 2, log σ² = ln 4) at x = (0.5, 0.25): z = 1, y = 2, σ = 2.
        let theta = [1.0, 2.0, 4f64.ln()];
        let mut out = [0.0];
        let lp = m.predict(&theta, &[0.5, 0.25], 2.0, &mut out);
        assert_eq!(out[0], 1.0);
        let want = -0.5 * (2.0 * std::f64::consts::PI * 4.0).ln() - 1.0 / 8.0;
        assert!((lp - want).abs() < 1e-14, "{lp} vs {want}");
    }
}
