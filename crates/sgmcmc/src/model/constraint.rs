//! Constrained parameters sampled on an unconstrained scale (issue 27): the sampler moves
//! u ∈ ℝ and the model sees x = c(u); the density of u is p(c(u))·|c′(u)|, so the
//! log-Jacobian log|c′(u)| is added to the log density and its derivative to the gradient.
//! Draws are reported as x, on the scale the user thinks in.
//!
//! - a positive parameter (a scale σ): x = exp(u), log|c′(u)| = u;
//! - a probability: x = σ(u) = 1/(1 + e⁻ᵘ), log|c′(u)| = log σ(u) + log σ(−u);
//! - an ordered vector (a mixture's means): x₁ = u₁, xₖ = xₖ₋₁ + exp(uₖ), log|det J| = Σₖ≥₂ uₖ.

use super::ModelError;
use super::logistic::{sigmoid, softplus};
use super::prior::{ParameterPrior, Support};

/// How one parameter's unconstrained value maps to its constrained one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Constraint {
    /// x = u.
    Real,
    /// x = exp(u) > 0.
    Positive,
    /// x = σ(u) ∈ (0, 1).
    UnitInterval,
}

/// log σ(u) = −log(1 + e⁻ᵘ) = −softplus(−u), without overflow for large |u|.
fn log_sigmoid(u: f64) -> f64 {
    -softplus(-u)
}

impl Constraint {
    /// The constraint that maps ℝ onto `support`.
    pub fn of(support: Support) -> Self {
        match support {
            Support::Real => Constraint::Real,
            Support::Positive => Constraint::Positive,
            Support::UnitInterval => Constraint::UnitInterval,
        }
    }

    /// x = c(u).
    pub fn to_constrained(self, u: f64) -> f64 {
        match self {
            Constraint::Real => u,
            Constraint::Positive => u.exp(),
            Constraint::UnitInterval => sigmoid(u),
        }
    }

    /// u = c⁻¹(x); an error names a value outside the constraint's range.
    pub fn to_unconstrained(self, x: f64) -> Result<f64, ModelError> {
        let bad = |range: &str| {
            ModelError::Setting(format!(
                "the value {x} is not {range}, as the parameter must be"
            ))
        };
        match self {
            Constraint::Real if x.is_finite() => Ok(x),
            Constraint::Real => Err(bad("finite")),
            Constraint::Positive if x.is_finite() && x > 0.0 => Ok(x.ln()),
            Constraint::Positive => Err(bad("finite and > 0")),
            Constraint::UnitInterval if x > 0.0 && x < 1.0 => Ok(x.ln() - (-x).ln_1p()),
            Constraint::UnitInterval => Err(bad("strictly between 0 and 1")),
        }
    }

    /// log|c′(u)|.
    pub fn log_jacobian(self, u: f64) -> f64 {
        match self {
            Constraint::Real => 0.0,
            Constraint::Positive => u,
            Constraint::UnitInterval => log_sigmoid(u) + log_sigmoid(-u),
        }
    }

    /// c′(u) = dx/du.
    pub fn dx_du(self, u: f64) -> f64 {
        match self {
            Constraint::Real => 1.0,
            Constraint::Positive => u.exp(),
            Constraint::UnitInterval => sigmoid(u) * sigmoid(-u),
        }
    }

    /// d log|c′(u)| / du.
    pub fn grad_log_jacobian(self, u: f64) -> f64 {
        match self {
            Constraint::Real => 0.0,
            Constraint::Positive => 1.0,
            Constraint::UnitInterval => sigmoid(-u) - sigmoid(u),
        }
    }

    /// The log density of u when x = c(u) has prior `prior`, and its derivative in u:
    /// (log p(c(u)) + log|c′(u)|, p′/p · c′(u) + d log|c′|/du).
    pub fn log_density(self, prior: &ParameterPrior, u: f64) -> (f64, f64) {
        let x = self.to_constrained(u);
        (
            prior.log_density(x) + self.log_jacobian(u),
            prior.grad_log_density(x) * self.dx_du(u) + self.grad_log_jacobian(u),
        )
    }
}

/// Draws (row-major, `draws × D`) of `model`'s unconstrained θ mapped to its constrained scale
/// ([`super::Model::constrain`]): what draws, summaries and reference moments report.
pub fn constrain_draws(model: &(impl super::Model + ?Sized), draws: &[f64]) -> Vec<f64> {
    if !model.is_constrained() {
        return draws.to_vec();
    }
    let d = model.dim();
    let mut out = vec![0.0; draws.len()];
    for (u, x) in draws.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
        model.constrain(u, x);
    }
    out
}

/// Draws on `model`'s constrained scale (as stores, summaries and other libraries give them)
/// mapped back to its unconstrained θ ([`super::Model::unconstrain`]), where scores and Stein
/// discrepancies are computed: the target is a smooth density on all of ℝᴰ there, as the
/// Stein identity E[A f] = 0 needs (on σ > 0 a density that does not vanish at the boundary,
/// such as a half-Cauchy prior's, breaks it). A draw off the support is an error naming it.
pub fn unconstrain_draws(
    model: &(impl super::Model + ?Sized),
    draws: &[f64],
) -> Result<Vec<f64>, super::ModelError> {
    if !model.is_constrained() {
        return Ok(draws.to_vec());
    }
    let d = model.dim();
    let mut out = vec![0.0; draws.len()];
    for (x, u) in draws.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
        model.unconstrain(x, u)?;
    }
    Ok(out)
}

/// An ordered vector x₁ < x₂ < … from u ∈ ℝᴷ: x₁ = u₁, xₖ = xₖ₋₁ + exp(uₖ).
pub fn ordered_to_constrained(u: &[f64], x: &mut [f64]) {
    let mut last = 0.0;
    for (k, (xk, uk)) in x.iter_mut().zip(u).enumerate() {
        last = if k == 0 { *uk } else { last + uk.exp() };
        *xk = last;
    }
}

/// The u of a strictly increasing `x` (an error names the first pair out of order).
pub fn ordered_to_unconstrained(x: &[f64], u: &mut [f64]) -> Result<(), ModelError> {
    for k in 0..x.len() {
        u[k] = if k == 0 {
            x[0]
        } else if x[k] > x[k - 1] {
            (x[k] - x[k - 1]).ln()
        } else {
            return Err(ModelError::Setting(format!(
                "an ordered parameter needs increasing values: element {k} ({}) is not above \
                 element {} ({})",
                x[k],
                k - 1,
                x[k - 1]
            )));
        };
    }
    Ok(())
}

/// log|det ∂x/∂u| = Σₖ≥₂ uₖ.
pub fn ordered_log_jacobian(u: &[f64]) -> f64 {
    u.iter().skip(1).sum()
}

/// `grad_u += ∂/∂u [f(x(u)) + log|det ∂x/∂u|]` given `grad_x` = ∇ₓf at x(u): the chain rule
/// ∂f/∂u₁ = Σₖ ∂f/∂xₖ and ∂f/∂uⱼ = exp(uⱼ)·Σₖ≥ⱼ ∂f/∂xₖ for j ≥ 2, plus 1 for each uⱼ, j ≥ 2.
pub fn ordered_add_grad(u: &[f64], grad_x: &[f64], grad_u: &mut [f64]) {
    let mut tail = 0.0;
    for j in (0..u.len()).rev() {
        tail += grad_x[j];
        grad_u[j] += if j == 0 {
            tail
        } else {
            u[j].exp() * tail + 1.0
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proper_priors() -> Vec<ParameterPrior> {
        vec![
            ParameterPrior::Normal {
                location: 1.0,
                scale: 2.0,
            },
            ParameterPrior::StudentT {
                df: 3.0,
                location: -0.5,
                scale: 1.5,
            },
            ParameterPrior::Cauchy {
                location: 0.2,
                scale: 2.5,
            },
            ParameterPrior::HalfNormal { scale: 1.7 },
            ParameterPrior::HalfCauchy { scale: 2.5 },
            ParameterPrior::Exponential { rate: 0.8 },
            ParameterPrior::Beta {
                alpha: 2.5,
                beta: 0.7,
            },
        ]
    }

    /// Each prior's log density against statrs's (an independent implementation) at points of
    /// its support; the half priors against twice the full distribution's density.
    /// Broken once: dropping `LN_2` from the half-normal fails here.
    #[test]
    fn log_densities_match_statrs() {
        use statrs::distribution::{Beta, Cauchy, Continuous, Exp, Normal, StudentsT};
        for &x in &[0.05, 0.3, 0.9, 2.0, 7.5] {
            let cases: Vec<(ParameterPrior, f64)> = vec![
                (proper_priors()[0], Normal::new(1.0, 2.0).unwrap().ln_pdf(x)),
                (
                    proper_priors()[1],
                    StudentsT::new(-0.5, 1.5, 3.0).unwrap().ln_pdf(x),
                ),
                (proper_priors()[2], Cauchy::new(0.2, 2.5).unwrap().ln_pdf(x)),
                (
                    proper_priors()[3],
                    2f64.ln() + Normal::new(0.0, 1.7).unwrap().ln_pdf(x),
                ),
                (
                    proper_priors()[4],
                    2f64.ln() + Cauchy::new(0.0, 2.5).unwrap().ln_pdf(x),
                ),
                (proper_priors()[5], Exp::new(0.8).unwrap().ln_pdf(x)),
            ];
            for (prior, want) in cases {
                let got = prior.log_density(x);
                assert!(
                    (got - want).abs() < 1e-12,
                    "{prior:?} at {x}: {got} vs {want}"
                );
            }
            if x < 1.0 {
                let want = Beta::new(2.5, 0.7).unwrap().ln_pdf(x);
                let got = proper_priors()[6].log_density(x);
                assert!((got - want).abs() < 1e-12, "beta at {x}: {got} vs {want}");
            }
        }
        assert_eq!(
            ParameterPrior::HalfNormal { scale: 1.0 }.log_density(-0.1),
            f64::NEG_INFINITY
        );
        assert_eq!(ParameterPrior::Flat.log_density(-3.0), 0.0);
    }

    /// Each prior's derivative, and each constraint's derivative on the unconstrained scale,
    /// against central differences. Broken once: the Student-t's `df + 1` as `df` fails here.
    #[test]
    fn gradients_match_finite_differences() {
        let h = 1e-6;
        for prior in proper_priors() {
            let constraint = Constraint::of(prior.support());
            for &u in &[-2.3, -0.4, 0.0, 0.7, 1.9] {
                // On the real line, the prior's own derivative; elsewhere it enters the
                // derivative in u below (through dx/du).
                if prior.support() == Support::Real {
                    let fd = (prior.log_density(u + h) - prior.log_density(u - h)) / (2.0 * h);
                    let g = prior.grad_log_density(u);
                    assert!(
                        (g - fd).abs() < 1e-6 * fd.abs().max(1.0),
                        "{prior:?} at {u}"
                    );
                }
                let (_, gu) = constraint.log_density(&prior, u);
                let fdu = (constraint.log_density(&prior, u + h).0
                    - constraint.log_density(&prior, u - h).0)
                    / (2.0 * h);
                assert!(
                    (gu - fdu).abs() < 1e-6 * fdu.abs().max(1.0),
                    "{prior:?} at u = {u}"
                );
            }
        }
    }

    /// The density of u integrates to 1 on the unconstrained scale for every proper prior on
    /// x > 0 or (0, 1): the Jacobian is right (a missing or wrong log|c′| changes the total).
    /// Broken once: the logit's log-Jacobian without its `log σ(−u)` term fails here.
    #[test]
    fn jacobians_keep_the_mass_at_one() {
        for prior in proper_priors()
            .into_iter()
            .filter(|p| p.support() != Support::Real)
        {
            let constraint = Constraint::of(prior.support());
            let (lo, hi, n) = (-60.0, 60.0, 240_000);
            let du = (hi - lo) / n as f64;
            let mass: f64 = (0..=n)
                .map(|i| {
                    let u = lo + i as f64 * du;
                    let w = if i == 0 || i == n { 0.5 } else { 1.0 };
                    w * constraint.log_density(&prior, u).0.exp() * du
                })
                .sum();
            assert!((mass - 1.0).abs() < 1e-4, "{prior:?}: mass {mass}");
        }
    }

    #[test]
    fn constraints_round_trip_and_refuse_values_outside() {
        for (c, x) in [
            (Constraint::Real, -3.5),
            (Constraint::Positive, 0.02),
            (Constraint::UnitInterval, 0.97),
        ] {
            let u = c.to_unconstrained(x).unwrap();
            assert!((c.to_constrained(u) - x).abs() < 1e-14);
        }
        let e = Constraint::Positive.to_unconstrained(0.0).unwrap_err();
        assert!(e.to_string().contains("> 0"), "{e}");
        assert!(Constraint::UnitInterval.to_unconstrained(1.0).is_err());
        assert!(Constraint::Real.to_unconstrained(f64::NAN).is_err());
    }

    /// The ordered transform: round trip, the chain rule against central differences of
    /// f(x(u)) + log|det J| with f(x) = Σ aₖxₖ − ½‖x‖², and the mass of a 2-D standard normal
    /// restricted to x₁ < x₂ (1/2) by quadrature over u. Broken once: `ordered_log_jacobian`
    /// summing every uₖ (u₁ included) fails the mass check.
    #[test]
    fn ordered_vectors() {
        let x = [-1.0, 0.5, 0.6, 3.0];
        let mut u = [0.0; 4];
        ordered_to_unconstrained(&x, &mut u).unwrap();
        let mut back = [0.0; 4];
        ordered_to_constrained(&u, &mut back);
        for k in 0..4 {
            assert!((back[k] - x[k]).abs() < 1e-14);
        }
        let e = ordered_to_unconstrained(&[0.0, 1.0, 1.0], &mut [0.0; 3]).unwrap_err();
        assert!(e.to_string().contains("element 2"), "{e}");

        let a = [0.3, -1.0, 2.0, 0.5];
        let f = |u: &[f64]| {
            let mut x = [0.0; 4];
            ordered_to_constrained(u, &mut x);
            (0..4).map(|k| a[k] * x[k] - 0.5 * x[k] * x[k]).sum::<f64>() + ordered_log_jacobian(u)
        };
        let mut xu = [0.0; 4];
        ordered_to_constrained(&u, &mut xu);
        let grad_x: Vec<f64> = (0..4).map(|k| a[k] - xu[k]).collect();
        let mut grad_u = [0.0; 4];
        ordered_add_grad(&u, &grad_x, &mut grad_u);
        for j in 0..4 {
            let h = 1e-6;
            let (mut p, mut m) = (u, u);
            p[j] += h;
            m[j] -= h;
            let fd = (f(&p) - f(&m)) / (2.0 * h);
            assert!(
                (grad_u[j] - fd).abs() < 1e-6 * fd.abs().max(1.0),
                "{j}: {} vs {fd}",
                grad_u[j]
            );
        }

        let (lo, hi, n) = (-12.0, 12.0, 1_200);
        let du = (hi - lo) / n as f64;
        let mut mass = 0.0;
        for i in 0..=n {
            for j in 0..=n {
                let u = [lo + i as f64 * du, lo + j as f64 * du];
                let mut x = [0.0; 2];
                ordered_to_constrained(&u, &mut x);
                let log_p = -0.5 * (x[0] * x[0] + x[1] * x[1]) - (2.0 * std::f64::consts::PI).ln()
                    + ordered_log_jacobian(&u);
                let w = if i == 0 || i == n { 0.5 } else { 1.0 }
                    * if j == 0 || j == n { 0.5 } else { 1.0 };
                mass += w * log_p.exp() * du * du;
            }
        }
        assert!((mass - 0.5).abs() < 1e-4, "mass {mass}");
    }
}
