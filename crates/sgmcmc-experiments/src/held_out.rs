//! Per-point log-likelihoods of a held-out (test) set at a parameter θ, with the buffers kept
//! between calls: the MNIST experiments score their test images with it.

use sgmcmc::model::{DataIndex, Model, Scratch};

/// A test set: the model on the test data, and the buffers of its per-point log-likelihoods.
pub(crate) struct HeldOut<'m> {
    model: &'m dyn Model,
    rows: Vec<DataIndex>,
    log_lik: Vec<f64>,
    scratch: Scratch,
}

impl<'m> HeldOut<'m> {
    /// Every point of `model`'s data.
    pub(crate) fn new(model: &'m dyn Model) -> Self {
        let n = model.num_data();
        Self {
            model,
            rows: (0..n as DataIndex).collect(),
            log_lik: vec![0.0; n],
            scratch: Scratch::new(),
        }
    }

    /// log p(yᵢ | xᵢ, θ) for every test point i.
    pub(crate) fn log_liks(&mut self, theta: &[f64]) -> &[f64] {
        self.model
            .log_lik_each(theta, &self.rows, &mut self.log_lik, &mut self.scratch);
        &self.log_lik
    }
}
