//! Optimisers of the coreset weights w ≥ 0 (reference §7.4, §7.6). Every step is projected onto
//! w ≥ 0, and the step counter c (τ) starts at 1 at the first step.
//!
//! - Hot DoG and ADAM (this file);
//! - [`dog`]: DoG and DoWG (Eq. 5 of the tuning-free coreset paper);
//! - [`adaptation`]: prodigy ADAM with cosine annealing and D-Adaptation SGD.
//!
//! Every optimiser checks its settings at construction and each gradient before it touches the
//! weights, so a rejected step leaves the weights and the state unchanged; `step` never allocates.

pub mod adaptation;
pub mod dog;

pub use adaptation::{DAdaptSgd, Prodigy};
pub use dog::{Dog, Dowg};

use crate::checkpoint::{StateError, StateReader, StateWriter};

/// One optimiser of the coreset weights: `step` moves `weights` against the gradient estimate ĝ
/// of the objective (the KL divergence, reference §7.2) and projects onto w ≥ 0.
pub trait WeightOptimiser {
    /// Short name for tables.
    fn name(&self) -> &'static str;
    /// One step: w ← max(0, w − step(ĝ)). Fails, leaving `weights` untouched, if `weights` or
    /// `gradient` does not have the optimiser's length or the gradient is not finite.
    fn step(&mut self, weights: &mut [f64], gradient: &[f64]) -> Result<(), OptimiserError>;

    /// Appends what carries over between steps (moments, distances, counters; not the
    /// settings) to a checkpoint ([`crate::checkpoint`]). Default: not supported.
    fn save_state(&self, w: &mut StateWriter) {
        w.unsupported(self.name());
    }

    /// Restores what [`WeightOptimiser::save_state`] wrote. Default: not supported.
    fn load_state(&mut self, _r: &mut StateReader<'_>) -> Result<(), StateError> {
        Err(StateError::Unsupported(self.name().into()))
    }
}

/// Errors of the optimisers' settings and inputs.
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
    /// No weights to optimise.
    #[error("the initial weights w₀ are empty: a coreset needs at least one weight")]
    NoWeights,
    /// An initial weight that is negative or not finite.
    #[error("initial weight w₀[{index}] = {value} must be finite and ≥ 0")]
    InitialWeight {
        /// Its coordinate.
        index: usize,
        /// Its value.
        value: f64,
    },
    /// Weights or gradient of the wrong length.
    #[error("{what} has length {got}, but the optimiser has {expected} weights")]
    WrongLength {
        /// "weights" or "gradient".
        what: &'static str,
        /// The optimiser's number of weights.
        expected: usize,
        /// The length passed.
        got: usize,
    },
    /// A gradient coordinate that is NaN or infinite.
    #[error("gradient[{index}] = {value} is not finite")]
    NonFiniteGradient {
        /// Its coordinate.
        index: usize,
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

/// Checks the initial weights w₀ (non-empty, finite, ≥ 0) and copies them.
fn initial_weights(initial: &[f64]) -> Result<Vec<f64>, OptimiserError> {
    if initial.is_empty() {
        return Err(OptimiserError::NoWeights);
    }
    match initial.iter().position(|&w| !(w.is_finite() && w >= 0.0)) {
        Some(index) => Err(OptimiserError::InitialWeight {
            index,
            value: initial[index],
        }),
        None => Ok(initial.to_vec()),
    }
}

/// Checks one step's inputs against the optimiser's `dim` weights and returns ‖ĝ‖₂² (which every
/// DoG-like step needs, so the check costs no extra pass).
fn check_step(dim: usize, weights: &[f64], gradient: &[f64]) -> Result<f64, OptimiserError> {
    for (what, got) in [("weights", weights.len()), ("gradient", gradient.len())] {
        if got != dim {
            return Err(OptimiserError::WrongLength {
                what,
                expected: dim,
                got,
            });
        }
    }
    let mut squared_norm = 0.0;
    for (index, &value) in gradient.iter().enumerate() {
        if !value.is_finite() {
            return Err(OptimiserError::NonFiniteGradient { index, value });
        }
        squared_norm += value * value;
    }
    Ok(squared_norm)
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

crate::persist_fields!(HotDog { m, v, d, count });

impl HotDog {
    /// The paper's default initial step r = 1e-3.
    pub const DEFAULT_R: f64 = 1e-3;

    /// Hot DoG started at the weights `initial` (w₀, the distances' origin) with first step `r`.
    pub fn new(initial: &[f64], r: f64) -> Result<Self, OptimiserError> {
        let n = initial.len();
        Ok(Self {
            initial: initial_weights(initial)?,
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
    crate::checkpoint::state_through_persist!();

    fn name(&self) -> &'static str {
        "Hot DoG"
    }

    fn step(&mut self, weights: &mut [f64], gradient: &[f64]) -> Result<(), OptimiserError> {
        check_step(self.initial.len(), weights, gradient)?;
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
        Ok(())
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

crate::persist_fields!(Adam { m, v, count });

impl Adam {
    /// ADAM on `dim` weights with base learning rate α₀.
    pub fn new(dim: usize, learning_rate: f64) -> Result<Self, OptimiserError> {
        if dim == 0 {
            return Err(OptimiserError::NoWeights);
        }
        Ok(Self {
            learning_rate: positive("ADAM's learning rate", learning_rate)?,
            m: vec![0.0; dim],
            v: vec![0.0; dim],
            count: 0,
        })
    }
}

impl WeightOptimiser for Adam {
    crate::checkpoint::state_through_persist!();

    fn name(&self) -> &'static str {
        "ADAM"
    }

    fn step(&mut self, weights: &mut [f64], gradient: &[f64]) -> Result<(), OptimiserError> {
        check_step(self.m.len(), weights, gradient)?;
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
        Ok(())
    }
}
