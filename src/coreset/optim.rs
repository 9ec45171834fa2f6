//! Optimisers of the coreset weights w ≥ 0 (reference §7.4, §7.6). Every step is projected onto
//! w ≥ 0, and the step counter c (τ) starts at 1 at the first step.

/// One optimiser of the coreset weights: `step` moves `weights` against the gradient estimate ĝ
/// of the objective (the KL divergence, reference §7.2) and projects onto w ≥ 0.
pub trait WeightOptimiser {
    /// Short name for tables.
    fn name(&self) -> &'static str;
    /// One step: w ← max(0, w − step(ĝ)).
    fn step(&mut self, weights: &mut [f64], gradient: &[f64]);
}

/// Errors of the optimisers' settings.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OptimiserError {
    /// A step parameter that is not positive and finite.
    #[error("{name} must be positive and finite, got {value}")]
    NotPositive {
        /// The parameter.
        name: &'static str,
        /// Its value.
        value: f64,
    },
}

fn positive(name: &'static str, value: f64) -> Result<f64, OptimiserError> {
    if value > 0.0 && value.is_finite() {
        Ok(value)
    } else {
        Err(OptimiserError::NotPositive { name, value })
    }
}

const BETA1: f64 = 0.9;
const BETA2: f64 = 0.999;
const EPSILON: f64 = 1e-8;

/// Hot DoG (Chen, Huggins & Campbell 2024, Algorithm 2; reference §7.4): per coordinate,
///
/// ```text
/// v ← β₂v + (1 − β₂)ĝ²              v̂ = v/(1 − β₂ᶜ)
/// m ← β₁m + (1 − β₁)ĝ               m̂ = m/(1 − β₁ᶜ)
/// d ← β₁d + (1 − β₁)·max{|w − w₀|, d}
/// d̂ = r at c = 1, else d/(1 − β₁^(c−1))
/// w ← max(0, w − d̂ ⊙ m̂ / (√(c·v̂) + ε))
/// ```
///
/// with β₁ = 0.9, β₂ = 0.999, ε = 1e-8 and r = 1e-3 by default: ADAM's moments with DoG's
/// distance-over-gradients step, √(c·v̂) standing in for DoG's √(Σĝ²). The d recursion reads w
/// before this step's move.
#[derive(Debug, Clone)]
pub struct HotDog {
    initial: Vec<f64>,
    r: f64,
    m: Vec<f64>,
    v: Vec<f64>,
    d: Vec<f64>,
    count: i32,
    reference_d_correction: bool,
}

impl HotDog {
    /// The paper's default initial step r = 1e-3.
    pub const DEFAULT_R: f64 = 1e-3;

    /// Hot DoG started at the weights `initial` (w₀, the distances' origin) with first step `r`.
    pub fn new(initial: &[f64], r: f64) -> Result<Self, OptimiserError> {
        let n = initial.len();
        Ok(Self {
            initial: initial.to_vec(),
            r: positive("Hot DoG's r", r)?,
            m: vec![0.0; n],
            v: vec![0.0; n],
            d: vec![0.0; n],
            count: 0,
            reference_d_correction: false,
        })
    }

    /// Compatibility (`hotdog_d_bias_correction_c`): the reference code's d̂ = d/(1 − β₁ᶜ)
    /// instead of the paper's 1 − β₁^(c−1).
    pub fn with_reference_d_correction(mut self) -> Self {
        self.reference_d_correction = true;
        self
    }
}

impl WeightOptimiser for HotDog {
    fn name(&self) -> &'static str {
        "Hot DoG"
    }

    fn step(&mut self, weights: &mut [f64], gradient: &[f64]) {
        debug_assert_eq!(weights.len(), self.initial.len());
        debug_assert_eq!(gradient.len(), self.initial.len());
        self.count += 1;
        let c = self.count;
        let v_correction = 1.0 - BETA2.powi(c);
        let m_correction = 1.0 - BETA1.powi(c);
        let d_correction = if self.reference_d_correction {
            1.0 - BETA1.powi(c)
        } else {
            1.0 - BETA1.powi(c - 1)
        };
        for k in 0..weights.len() {
            let g = gradient[k];
            self.v[k] = BETA2 * self.v[k] + (1.0 - BETA2) * g * g;
            self.m[k] = BETA1 * self.m[k] + (1.0 - BETA1) * g;
            let distance = (weights[k] - self.initial[k]).abs();
            self.d[k] = BETA1 * self.d[k] + (1.0 - BETA1) * distance.max(self.d[k]);
            let v_hat = self.v[k] / v_correction;
            let m_hat = self.m[k] / m_correction;
            let d_hat = if c == 1 {
                self.r
            } else {
                self.d[k] / d_correction
            };
            let step = d_hat * m_hat / ((c as f64 * v_hat).sqrt() + EPSILON);
            weights[k] = (weights[k] - step).max(0.0);
        }
    }
}

/// ADAM (Kingma & Ba 2014; reference §7.6) with the reference's learning rate γ_τ = α₀/√τ:
/// w ← max(0, w − γ_τ·m̂/(√v̂ + ε)), β₁ = 0.9, β₂ = 0.999, ε = 1e-8, bias-corrected moments.
#[derive(Debug, Clone)]
pub struct Adam {
    learning_rate: f64,
    m: Vec<f64>,
    v: Vec<f64>,
    count: i32,
}

impl Adam {
    /// ADAM on `dim` weights with base learning rate α₀.
    pub fn new(dim: usize, learning_rate: f64) -> Result<Self, OptimiserError> {
        Ok(Self {
            learning_rate: positive("ADAM's learning rate", learning_rate)?,
            m: vec![0.0; dim],
            v: vec![0.0; dim],
            count: 0,
        })
    }
}

impl WeightOptimiser for Adam {
    fn name(&self) -> &'static str {
        "ADAM"
    }

    fn step(&mut self, weights: &mut [f64], gradient: &[f64]) {
        self.count += 1;
        let c = self.count;
        let rate = self.learning_rate / (c as f64).sqrt();
        let (m_correction, v_correction) = (1.0 - BETA1.powi(c), 1.0 - BETA2.powi(c));
        for k in 0..weights.len() {
            let g = gradient[k];
            self.m[k] = BETA1 * self.m[k] + (1.0 - BETA1) * g;
            self.v[k] = BETA2 * self.v[k] + (1.0 - BETA2) * g * g;
            let step =
                rate * (self.m[k] / m_correction) / ((self.v[k] / v_correction).sqrt() + EPSILON);
            weights[k] = (weights[k] - step).max(0.0);
        }
    }
}
