//! Proposals q(θ' | θ) for the MH tests, each returning its log density ratio
//! log q(θ | θ') − log q(θ' | θ) so that ψ is exact (reference §6.5 "Proposals").
//!
//! The gradient proposals use one minibatch S, drawn once per iteration, for every gradient
//! they evaluate (forward and reverse). For a fixed S the proposal is an ordinary proposal
//! with a computable density, and S is drawn independently of θ, so the MH kernel for each S
//! leaves the target invariant and so does their mixture: the test still targets the
//! posterior exactly, whatever the gradient noise.

use crate::estimator::GradientEstimator;
use crate::model::Model;
use crate::rng::ChainRng;
use crate::sampler::{add_scaled_noise, resample_momentum};

/// A proposal as written in `[sampler] proposal = { kind = ..., ... }`.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)
)]
pub enum Proposal {
    /// θ' = θ + sd·ξ (symmetric: the ratio is 0; no gradient).
    RandomWalk {
        /// Standard deviation per coordinate.
        sd: f64,
    },
    /// θ' = θ + ε·ĝ_S(θ) + √(2ε)·ξ (a Langevin / SGLD step, the catalogue convention ε), with
    /// ratio −‖θ − θ' − εĝ_S(θ')‖²/(4ε) + ‖θ' − θ − εĝ_S(θ)‖²/(4ε). With the full-data
    /// gradient this is MALA.
    Langevin {
        /// ε > 0.
        step_size: f64,
    },
    /// A stochastic-gradient Hamiltonian proposal: momentum p ~ N(0, I), `steps` leapfrog
    /// steps of size h with ĝ_S (volume-preserving and reversible for a fixed S), ratio
    /// −(‖p_L‖² − ‖p₀‖²)/2. This is SGHMC's proposal with friction 0, the form whose proposal
    /// density is tractable (friction and injected noise over L steps are not).
    Hamiltonian {
        /// h > 0.
        step_size: f64,
        /// L ≥ 1.
        steps: usize,
    },
}

impl Proposal {
    /// An error naming the problem, or `Ok`.
    pub fn validate(&self) -> Result<(), String> {
        let positive = |name: &str, x: f64| {
            if x.is_finite() && x > 0.0 {
                Ok(())
            } else {
                Err(format!("[sampler] proposal {name} must be > 0 (got {x})"))
            }
        };
        match *self {
            Proposal::RandomWalk { sd } => positive("sd", sd),
            Proposal::Langevin { step_size } => positive("step_size", step_size),
            Proposal::Hamiltonian { step_size, steps } => {
                positive("step_size", step_size)?;
                if steps == 0 {
                    return Err("[sampler] proposal steps must be at least 1".into());
                }
                Ok(())
            }
        }
    }

    /// Whether the proposal evaluates gradients (and so records a score).
    pub fn uses_gradient(&self) -> bool {
        !matches!(self, Proposal::RandomWalk { .. })
    }

    /// Gradient estimates one proposal costs.
    pub fn estimates(&self) -> usize {
        match *self {
            Proposal::RandomWalk { .. } => 0,
            Proposal::Langevin { .. } => 2,
            Proposal::Hamiltonian { steps, .. } => steps + 1,
        }
    }
}

/// Buffers of a proposal, reused every iteration.
#[derive(Debug, Clone, Default)]
pub struct ProposalState {
    /// ĝ_S at θ'.
    pub proposal_score: Vec<f64>,
    /// ĝ_S at θ (this iteration's S).
    current_score: Vec<f64>,
    momentum: Vec<f64>,
    prior_gradient: Vec<f64>,
}

crate::persist_fields!(ProposalState {
    proposal_score,
    current_score,
    momentum,
    prior_gradient
});

impl ProposalState {
    /// ĝ_S at θ from the last gradient proposal (the score recorded when it is rejected).
    pub fn current_score(&self) -> &[f64] {
        &self.current_score
    }

    /// Buffers for dimension `dim`.
    pub fn new(dim: usize) -> Self {
        Self {
            proposal_score: vec![0.0; dim],
            current_score: vec![0.0; dim],
            momentum: vec![0.0; dim],
            prior_gradient: vec![0.0; dim],
        }
    }

    /// Draw θ' (into `proposal`) from q(· | `current`); returns log q(θ|θ') − log q(θ'|θ).
    /// Gradients follow the tempered target: ∇log p₀ + (ĝ − ∇log p₀)/T. The random walk uses
    /// no `estimator`; the gradient proposals need one (the MH kernel's constructor checks).
    #[allow(clippy::too_many_arguments)]
    pub fn propose(
        &mut self,
        kind: &Proposal,
        current: &[f64],
        proposal: &mut [f64],
        model: &dyn Model,
        temperature: f64,
        estimator: Option<&mut dyn GradientEstimator>,
        rng: &mut ChainRng,
    ) -> f64 {
        proposal.copy_from_slice(current);
        if let Proposal::RandomWalk { sd } = *kind {
            add_scaled_noise(proposal, sd, rng);
            return 0.0;
        }
        let estimator =
            estimator.expect("the MH kernel is built with an estimator for gradient proposals");
        let mut prior_gradient = std::mem::take(&mut self.prior_gradient);
        let mut tempered = Tempered {
            estimator,
            model,
            temperature,
            prior_gradient: &mut prior_gradient,
        };
        let ratio = match *kind {
            Proposal::RandomWalk { .. } => unreachable!("returned above"),
            Proposal::Langevin { step_size: eps } => {
                tempered.estimator.reuse_batch(true);
                tempered.estimate(current, &mut self.current_score, rng);
                let sd = (2.0 * eps).sqrt();
                for (p, g) in proposal.iter_mut().zip(&self.current_score) {
                    *p += eps * g;
                }
                add_scaled_noise(proposal, sd, rng);
                tempered.estimate(proposal, &mut self.proposal_score, rng);
                tempered.estimator.reuse_batch(false);
                let (mut forward, mut reverse) = (0.0, 0.0);
                for k in 0..current.len() {
                    let f = proposal[k] - current[k] - eps * self.current_score[k];
                    let r = current[k] - proposal[k] - eps * self.proposal_score[k];
                    forward += f * f;
                    reverse += r * r;
                }
                (forward - reverse) / (4.0 * eps)
            }
            Proposal::Hamiltonian {
                step_size: h,
                steps,
            } => {
                tempered.estimator.reuse_batch(true);
                resample_momentum(&mut self.momentum, 1.0, rng);
                let start_kinetic = half_square(&self.momentum);
                tempered.estimate(current, &mut self.current_score, rng);
                self.proposal_score.copy_from_slice(&self.current_score);
                for _ in 0..steps {
                    for (p, g) in self.momentum.iter_mut().zip(&self.proposal_score) {
                        *p += 0.5 * h * g;
                    }
                    for (x, p) in proposal.iter_mut().zip(&self.momentum) {
                        *x += h * p;
                    }
                    tempered.estimate(proposal, &mut self.proposal_score, rng);
                    for (p, g) in self.momentum.iter_mut().zip(&self.proposal_score) {
                        *p += 0.5 * h * g;
                    }
                }
                tempered.estimator.reuse_batch(false);
                start_kinetic - half_square(&self.momentum)
            }
        };
        self.prior_gradient = prior_gradient;
        ratio
    }
}

/// Score estimates of the tempered target, ∇log p₀ + (ĝ − ∇log p₀)/T.
struct Tempered<'a, 'e> {
    estimator: &'a mut (dyn GradientEstimator + 'e),
    model: &'a dyn Model,
    temperature: f64,
    prior_gradient: &'a mut Vec<f64>,
}

impl Tempered<'_, '_> {
    fn estimate(&mut self, theta: &[f64], out: &mut [f64], rng: &mut ChainRng) {
        self.estimator.estimate(theta, out, rng);
        if self.temperature != 1.0 {
            self.prior_gradient.iter_mut().for_each(|g| *g = 0.0);
            self.model.add_grad_log_prior(theta, self.prior_gradient);
            for (g, p) in out.iter_mut().zip(self.prior_gradient.iter()) {
                *g = p + (*g - p) / self.temperature;
            }
        }
    }
}

fn half_square(v: &[f64]) -> f64 {
    0.5 * v.iter().map(|x| x * x).sum::<f64>()
}
