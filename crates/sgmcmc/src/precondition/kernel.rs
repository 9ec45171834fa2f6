//! [`PreconditionedKernel`]: a chain run in φ and reported in θ = c + Lφ.

use super::Preconditioner;
use crate::rng::ChainRng;
use crate::sampler::{ChainKernel, SamplerStatistics};

/// A kernel built on a [`super::PreconditionedModel`], started from and reporting θ: the start
/// maps θ₀ to φ₀ = L⁻¹(θ₀ − c), each step maps the new φ back (O(D²) dense, O(D) diagonal).
pub struct PreconditionedKernel<'a> {
    inner: Box<dyn ChainKernel + Send + 'a>,
    map: &'a Preconditioner,
    theta: Vec<f64>,
    phi0: Vec<f64>,
}

impl<'a> PreconditionedKernel<'a> {
    /// `inner`, a kernel on the φ-coordinates of `map`.
    pub fn new(inner: Box<dyn ChainKernel + Send + 'a>, map: &'a Preconditioner) -> Self {
        let d = map.dim();
        Self {
            inner,
            map,
            theta: vec![0.0; d],
            phi0: vec![0.0; d],
        }
    }
}

impl ChainKernel for PreconditionedKernel<'_> {
    fn start(&mut self, init: &[f64], rng: &mut ChainRng) {
        self.map.to_phi(init, &mut self.phi0);
        self.inner.start(&self.phi0, rng);
        self.map.to_theta(self.inner.position(), &mut self.theta);
    }

    fn step(&mut self, rng: &mut ChainRng) {
        self.inner.step(rng);
        self.map.to_theta(self.inner.position(), &mut self.theta);
    }

    fn position(&self) -> &[f64] {
        &self.theta
    }

    fn is_finite(&self) -> bool {
        self.inner.is_finite()
    }

    fn gradient_evaluations(&self) -> u64 {
        self.inner.gradient_evaluations()
    }

    fn statistics(&self) -> Option<SamplerStatistics> {
        self.inner.statistics()
    }

    fn draw_statistics(&self) -> crate::sampler::DrawStatistics {
        self.inner.draw_statistics()
    }

    /// The inner kernel's state; θ follows from its φ.
    fn save_state(&self, w: &mut crate::checkpoint::StateWriter) {
        self.inner.save_state(w);
    }

    fn load_state(
        &mut self,
        r: &mut crate::checkpoint::StateReader<'_>,
    ) -> Result<(), crate::checkpoint::StateError> {
        self.inner.load_state(r)?;
        self.map.to_theta(self.inner.position(), &mut self.theta);
        Ok(())
    }
}
