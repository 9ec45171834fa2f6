//! Learning-rate-free optimisers that estimate the distance to the solution from correlations
//! between gradients and the step direction (reference §7.6): prodigy ADAM with cosine annealing
//! (Mishchenko & Defazio 2024) and D-Adaptation SGD (Defazio & Mishchenko 2023), in the forms of
//! the coreset paper's reference code (`prodigyADAM.jl`, `dadaptSGD.jl`).

use super::{
    BETA1, BETA2, EPSILON, OptimiserError, WeightOptimiser, check_step, initial_weights, positive,
};

/// Prodigy ADAM with cosine annealing (reference §7.6): with α_τ = ½(1 + cos(π·((τ − 1) mod
/// 100)/100)), d = d₀ and m, v, s, r_p = 0 at the start, each step
///
/// ```text
/// m   ← β₁m + (1 − β₁)·d·ĝ
/// v   ← β₂v + (1 − β₂)·d²·ĝ²
/// r_p ← √β₂·r_p + (1 − √β₂)·α·d²·ĝᵀ(w₀ − w)
/// s   ← √β₂·s + (1 − √β₂)·α·d²·ĝ
/// d_old = d;  d ← max(d, r_p/‖s‖₁)
/// w   ← max(0, w − α·d_old·m ⊘ (√v + d_old·ε))
/// ```
///
/// with β₁ = 0.9, β₂ = 0.999, ε = 1e-8, no bias correction, and w the weights before the step.
/// While ‖s‖₁ = 0 (every gradient so far zero) d is left unchanged, and the step is 0 (m = 0);
/// the counter τ and the schedule advance at every call.
#[derive(Debug, Clone)]
pub struct Prodigy {
    initial: Vec<f64>,
    d: f64,
    m: Vec<f64>,
    v: Vec<f64>,
    s: Vec<f64>,
    r_p: f64,
    count: u64,
}

crate::persist_fields!(Prodigy {
    d,
    m,
    v,
    s,
    r_p,
    count
});

impl Prodigy {
    /// The paper's initial lower bound d₀ = 1e-6.
    pub const DEFAULT_D0: f64 = 1e-6;
    /// Period of the cosine annealing of the step, restarting at α = 1.
    pub const PERIOD: u64 = 100;

    /// Prodigy started at the weights `initial` (w₀) with initial distance estimate `d0`.
    pub fn new(initial: &[f64], d0: f64) -> Result<Self, OptimiserError> {
        let initial = initial_weights(initial)?;
        let n = initial.len();
        Ok(Self {
            initial,
            d: positive("prodigy's d₀", d0)?,
            m: vec![0.0; n],
            v: vec![0.0; n],
            s: vec![0.0; n],
            r_p: 0.0,
            count: 0,
        })
    }

    /// The current distance estimate d (d₀ before the first step).
    pub fn d(&self) -> f64 {
        self.d
    }

    /// The annealing factor α_τ = ½(1 + cos(π·((τ − 1) mod 100)/100)) of step τ ≥ 1.
    fn annealing(tau: u64) -> f64 {
        let phase = (tau.saturating_sub(1) % Self::PERIOD) as f64 / Self::PERIOD as f64;
        0.5 * (1.0 + (std::f64::consts::PI * phase).cos())
    }
}

impl WeightOptimiser for Prodigy {
    crate::checkpoint::state_through_persist!();

    fn name(&self) -> &'static str {
        "prodigy ADAM"
    }

    fn step(&mut self, weights: &mut [f64], gradient: &[f64]) -> Result<(), OptimiserError> {
        check_step(self.initial.len(), weights, gradient)?;
        self.count += 1;
        let alpha = Self::annealing(self.count);
        let d = self.d;
        let root_beta2 = BETA2.sqrt();
        let s_scale = (1.0 - root_beta2) * alpha * d * d;
        let (mut correlation, mut s_norm) = (0.0, 0.0);
        for k in 0..weights.len() {
            let g = gradient[k];
            self.m[k] = BETA1 * self.m[k] + (1.0 - BETA1) * d * g;
            self.v[k] = BETA2 * self.v[k] + (1.0 - BETA2) * d * d * g * g;
            correlation += g * (self.initial[k] - weights[k]);
            self.s[k] = root_beta2 * self.s[k] + s_scale * g;
            s_norm += self.s[k].abs();
        }
        self.r_p = root_beta2 * self.r_p + s_scale * correlation;
        if s_norm > 0.0 {
            self.d = self.d.max(self.r_p / s_norm);
        }
        for ((w, m), v) in weights.iter_mut().zip(&self.m).zip(&self.v) {
            *w = (*w - alpha * d * m / (v.sqrt() + d * EPSILON)).max(0.0);
        }
        Ok(())
    }
}

/// D-Adaptation SGD (reference §7.6, `dadaptSGD.jl`): G = ‖ĝ₁‖₂ fixed at the first step,
/// s = 0, Q = 0, d = d₀ at the start, and per step
///
/// ```text
/// λ = d·γ/G
/// q = λ·ĝᵀs              (s before this step's update)
/// s ← s + λ·ĝ
/// d ← max(d, 2·Q/‖s‖₂)   (Q before adding q)
/// Q ← Q + q
/// w ← max(0, w − λ·ĝ)
/// ```
///
/// with defaults γ = 1, d₀ = 1e-6. A zero gradient cannot fix G: steps before the first nonzero
/// gradient do not move and leave the state unchanged, and G is the norm of the first nonzero
/// one. d is left unchanged while ‖s‖₂ = 0.
#[derive(Debug, Clone)]
pub struct DAdaptSgd {
    gamma: f64,
    d: f64,
    first_norm: f64,
    s: Vec<f64>,
    q_sum: f64,
}

crate::persist_fields!(DAdaptSgd {
    d,
    first_norm,
    s,
    q_sum
});

impl DAdaptSgd {
    /// The default learning-rate factor γ = 1.
    pub const DEFAULT_GAMMA: f64 = 1.0;
    /// The default initial lower bound d₀ = 1e-6.
    pub const DEFAULT_D0: f64 = 1e-6;

    /// D-Adaptation SGD on the weights `initial` (w₀: fixes the number of weights) with
    /// learning-rate factor `gamma` and initial distance estimate `d0`.
    pub fn new(initial: &[f64], gamma: f64, d0: f64) -> Result<Self, OptimiserError> {
        let n = initial_weights(initial)?.len();
        Ok(Self {
            gamma: positive("D-Adaptation's γ", gamma)?,
            d: positive("D-Adaptation's d₀", d0)?,
            first_norm: 0.0,
            s: vec![0.0; n],
            q_sum: 0.0,
        })
    }

    /// The current distance estimate d (d₀ before the first step).
    pub fn d(&self) -> f64 {
        self.d
    }
}

impl WeightOptimiser for DAdaptSgd {
    crate::checkpoint::state_through_persist!();

    fn name(&self) -> &'static str {
        "D-Adaptation SGD"
    }

    fn step(&mut self, weights: &mut [f64], gradient: &[f64]) -> Result<(), OptimiserError> {
        let squared_norm = check_step(self.s.len(), weights, gradient)?;
        if self.first_norm == 0.0 {
            if squared_norm == 0.0 {
                return Ok(());
            }
            self.first_norm = squared_norm.sqrt();
        }
        let lambda = self.d * self.gamma / self.first_norm;
        let (mut q, mut s_squared) = (0.0, 0.0);
        for k in 0..weights.len() {
            let g = gradient[k];
            q += g * self.s[k];
            self.s[k] += lambda * g;
            s_squared += self.s[k] * self.s[k];
            weights[k] = (weights[k] - lambda * g).max(0.0);
        }
        if s_squared > 0.0 {
            self.d = self.d.max(2.0 * self.q_sum / s_squared.sqrt());
        }
        self.q_sum += lambda * q;
        Ok(())
    }
}
