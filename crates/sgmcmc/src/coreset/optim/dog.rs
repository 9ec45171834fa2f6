//! DoG and DoWG: projected SGD with a scalar, distance-over-gradients step (Chen, Huggins &
//! Campbell 2024, Eq. 5; reference §7.6), w ← max(0, w − γ_τ·ĝ_τ) with
//!
//! ```text
//! DoG:   γ_τ = r_τ / √(Σ_{i≤τ} ‖ĝ_i‖²)
//! DoWG:  γ_τ = r_τ² / √(Σ_{i≤τ} r_i²·‖ĝ_i‖²)
//! r_1 = r,  r_τ = max_{i≤τ} ‖w_i − w₀‖₂ for τ ≥ 2
//! ```
//!
//! where w_i is the weight vector before the i-th step. As in the paper and the reference, r does
//! not stay in the running maximum after the first step (the original DoG keeps max(r_ε, ·));
//! [`Dowg::with_r0_in_max`] restores the reference DoWG's r̄ = max(r, ‖w − w₀‖, …).
//!
//! Zero gradients: a step whose denominator would be 0 (every gradient so far zero, ‖ĝ‖₂ = 0, or
//! for DoWG r_τ²·‖ĝ‖² underflowing to 0) does not move the weights and is not counted, so the
//! first step that moves is the one that uses r; it never produces NaN. A later zero gradient
//! is a counted step of length 0. The distances are taken at every call, including skipped
//! ones (the weights do not move then, so this changes nothing).
//!
//! Edge case of Eq. 5 (documented, not corrected): if the projection takes the whole first step
//! back (e.g. w₀ = 0 and ĝ_1 ≥ 0), r_τ = 0 afterwards and the paper form never moves again.

use super::{OptimiserError, WeightOptimiser, check_step, initial_weights, positive};

/// ‖w − w₀‖₂.
fn distance(weights: &[f64], initial: &[f64]) -> f64 {
    weights
        .iter()
        .zip(initial)
        .map(|(w, w0)| (w - w0) * (w - w0))
        .sum::<f64>()
        .sqrt()
}

/// w ← max(0, w − γ·ĝ).
fn projected_step(weights: &mut [f64], gradient: &[f64], gamma: f64) {
    for (w, g) in weights.iter_mut().zip(gradient) {
        *w = (*w - gamma * g).max(0.0);
    }
}

/// DoG (Ivgi, Hinder & Carmon 2023) as the coreset paper's Eq. 5 reads it:
/// γ_τ = r_τ/√(Σ_{i≤τ}‖ĝ_i‖²), r_1 = r, then r_τ = max_{i≤τ}‖w_i − w₀‖₂ at the pre-update
/// weights (r not kept in the maximum), w ← max(0, w − γ_τ·ĝ_τ).
#[derive(Debug, Clone)]
pub struct Dog {
    initial: Vec<f64>,
    r: f64,
    max_distance: f64,
    squared_gradients: f64,
    count: u64,
}

crate::persist_fields!(Dog {
    max_distance,
    squared_gradients,
    count
});

impl Dog {
    /// DoG started at the weights `initial` (w₀, the distances' origin) with first step `r`.
    pub fn new(initial: &[f64], r: f64) -> Result<Self, OptimiserError> {
        Ok(Self {
            initial: initial_weights(initial)?,
            r: positive("DoG's r", r)?,
            max_distance: 0.0,
            squared_gradients: 0.0,
            count: 0,
        })
    }
}

impl WeightOptimiser for Dog {
    crate::checkpoint::state_through_persist!();

    fn name(&self) -> &'static str {
        "DoG"
    }

    fn step(&mut self, weights: &mut [f64], gradient: &[f64]) -> Result<(), OptimiserError> {
        let squared_norm = check_step(self.initial.len(), weights, gradient)?;
        self.max_distance = self.max_distance.max(distance(weights, &self.initial));
        let denominator = self.squared_gradients + squared_norm;
        if denominator == 0.0 {
            return Ok(());
        }
        self.count += 1;
        self.squared_gradients = denominator;
        let r = if self.count == 1 {
            self.r
        } else {
            self.max_distance
        };
        projected_step(weights, gradient, r / denominator.sqrt());
        Ok(())
    }
}

/// DoWG (Khaled, Mishchenko & Jin 2023) as the coreset paper's Eq. 5 reads it:
/// γ_τ = r_τ²/√(Σ_{i≤τ} r_i²·‖ĝ_i‖²) with DoG's r_τ (r_1 = r, then the running maximum of
/// ‖w_i − w₀‖₂ without r), w ← max(0, w − γ_τ·ĝ_τ).
#[derive(Debug, Clone)]
pub struct Dowg {
    initial: Vec<f64>,
    r: f64,
    max_distance: f64,
    weighted_gradients: f64,
    count: u64,
    r0_in_max: bool,
}

crate::persist_fields!(Dowg {
    max_distance,
    weighted_gradients,
    count
});

impl Dowg {
    /// DoWG started at the weights `initial` (w₀, the distances' origin) with first step `r`.
    pub fn new(initial: &[f64], r: f64) -> Result<Self, OptimiserError> {
        Ok(Self {
            initial: initial_weights(initial)?,
            r: positive("DoWG's r", r)?,
            max_distance: 0.0,
            weighted_gradients: 0.0,
            count: 0,
            r0_in_max: false,
        })
    }

    /// Compatibility (`dowg_keep_r0_in_max`): the reference code's r_τ = max(r, max_{i≤τ}‖w_i −
    /// w₀‖₂) at every step, so r_τ never falls below r.
    pub fn with_r0_in_max(mut self) -> Self {
        self.r0_in_max = true;
        self
    }
}

impl WeightOptimiser for Dowg {
    crate::checkpoint::state_through_persist!();

    fn name(&self) -> &'static str {
        "DoWG"
    }

    fn step(&mut self, weights: &mut [f64], gradient: &[f64]) -> Result<(), OptimiserError> {
        let squared_norm = check_step(self.initial.len(), weights, gradient)?;
        self.max_distance = self.max_distance.max(distance(weights, &self.initial));
        let r = if self.r0_in_max {
            self.max_distance.max(self.r)
        } else if self.count == 0 {
            self.r
        } else {
            self.max_distance
        };
        let r2 = r * r;
        // r_τ = 0 (the weights have not left w₀) adds nothing, even if ‖ĝ‖² overflowed.
        let term = if r2 > 0.0 { r2 * squared_norm } else { 0.0 };
        let denominator = self.weighted_gradients + term;
        if denominator == 0.0 {
            return Ok(());
        }
        self.count += 1;
        self.weighted_gradients = denominator;
        projected_step(weights, gradient, r2 / denominator.sqrt());
        Ok(())
    }
}
