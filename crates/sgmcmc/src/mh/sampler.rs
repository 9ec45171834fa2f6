//! Metropolis–Hastings as a [`Sampler`]: a proposal, then one of the accept/reject tests of
//! [`super::test`], with counts of every outcome for the run summary.

use super::proposal::{Proposal, ProposalState};
use super::ratio::LikelihoodRatios;
use super::test::{AusterityTest, BarkerTest, Decision, ExactTest, Outcome, WorkshopTest};
use crate::estimator::GradientEstimator;
use crate::model::Model;
use crate::rng::ChainRng;
use crate::sampler::{MhStatistics, Sampler, SamplerError, SamplerStatistics};

/// The accept/reject test of an MH chain.
#[derive(Debug, Clone)]
pub enum AcceptanceTest {
    /// The minibatch Barker test with X_corr.
    Barker(BarkerTest),
    /// Austerity's sequential t-test.
    Austerity(AusterityTest),
    /// The workshop's test: K minibatches for s, skip when s ≥ 1.2, a bank curve for X_c.
    Workshop(WorkshopTest),
    /// A full-data test (Barker or Metropolis).
    Exact(ExactTest),
}

/// Metropolis–Hastings on large data: propose θ' ~ q(· | θ), compute
/// ψ = log p₀(θ') − log p₀(θ) + log q(θ | θ') − log q(θ' | θ), and let the test decide from ψ
/// and the per-datum likelihood ratios (reference §6).
pub struct MhSampler<'m> {
    model: &'m dyn Model,
    proposal_kind: Proposal,
    proposal_state: ProposalState,
    test: AcceptanceTest,
    ratios: LikelihoodRatios<'m>,
    theta: Vec<f64>,
    proposal: Vec<f64>,
    log_prior: f64,
    score: Vec<f64>,
    stats: MhStatistics,
}

impl<'m> MhSampler<'m> {
    /// An MH chain on `model` with proposal `proposal` and test `test`.
    pub fn new(
        model: &'m dyn Model,
        proposal: Proposal,
        test: AcceptanceTest,
    ) -> Result<Self, SamplerError> {
        proposal.validate().map_err(SamplerError::Invalid)?;
        let dim = model.dim();
        Ok(Self {
            model,
            proposal_kind: proposal,
            proposal_state: ProposalState::new(dim),
            test,
            ratios: LikelihoodRatios::new(model),
            theta: vec![0.0; dim],
            proposal: vec![0.0; dim],
            log_prior: 0.0,
            score: if proposal.uses_gradient() {
                vec![0.0; dim]
            } else {
                Vec::new()
            },
            stats: MhStatistics::default(),
        })
    }

    /// The counts so far.
    pub fn statistics(&self) -> &MhStatistics {
        &self.stats
    }

    fn temperature(&self) -> f64 {
        match &self.test {
            AcceptanceTest::Barker(t) => t.temperature(),
            AcceptanceTest::Austerity(t) => t.temperature(),
            AcceptanceTest::Workshop(t) => t.temperature(),
            AcceptanceTest::Exact(t) => t.temperature(),
        }
    }
}

impl Sampler for MhSampler<'_> {
    fn name(&self) -> &'static str {
        "mh"
    }

    fn start(&mut self, theta0: &[f64], estimator: &mut dyn GradientEstimator, rng: &mut ChainRng) {
        self.theta.copy_from_slice(theta0);
        self.log_prior = self.model.log_prior(theta0);
        if self.proposal_kind.uses_gradient() {
            estimator.estimate(theta0, &mut self.score, rng);
            let t = self.temperature();
            if t != 1.0 {
                let mut prior = vec![0.0; theta0.len()];
                self.model.add_grad_log_prior(theta0, &mut prior);
                for (g, p) in self.score.iter_mut().zip(&prior) {
                    *g = p + (*g - p) / t;
                }
            }
        }
        self.stats = MhStatistics {
            final_temperature: self.temperature(),
            ..MhStatistics::default()
        };
    }

    fn step(&mut self, estimator: &mut dyn GradientEstimator, rng: &mut ChainRng) {
        self.stats.iterations += 1;
        let temperature = self.temperature();
        let log_q_ratio = self.proposal_state.propose(
            &self.proposal_kind,
            &self.theta,
            &mut self.proposal,
            self.model,
            temperature,
            estimator,
            rng,
        );
        let log_prior = self.model.log_prior(&self.proposal);
        let psi = log_prior - self.log_prior + log_q_ratio;
        let uses_gradient = self.proposal_kind.uses_gradient();
        if !psi.is_finite() {
            self.stats.rejected_by_prior += 1;
            self.stats.rejected += 1;
            if uses_gradient {
                self.score
                    .copy_from_slice(self.proposal_state.current_score());
            }
            return;
        }
        let (theta, proposal, ratios) = (&self.theta, &self.proposal, &mut self.ratios);
        let decision = match &mut self.test {
            AcceptanceTest::Barker(t) => t.decide(ratios, theta, proposal, psi, rng),
            AcceptanceTest::Austerity(t) => t.decide(ratios, theta, proposal, psi, rng),
            AcceptanceTest::Workshop(t) => t.decide(ratios, theta, proposal, psi, rng),
            AcceptanceTest::Exact(t) => t.decide(ratios, theta, proposal, psi, rng),
        };
        record(&mut self.stats, &decision);
        self.stats.final_temperature = self.temperature();
        if decision.accept {
            std::mem::swap(&mut self.theta, &mut self.proposal);
            self.log_prior = log_prior;
            if uses_gradient {
                self.score
                    .copy_from_slice(&self.proposal_state.proposal_score);
            }
        } else if uses_gradient {
            self.score
                .copy_from_slice(self.proposal_state.current_score());
        }
    }

    fn position(&self) -> &[f64] {
        &self.theta
    }

    /// The gradient estimate at θ from this iteration's minibatch (gradient proposals); empty
    /// for the random walk, which computes none.
    fn score(&self) -> &[f64] {
        &self.score
    }

    fn estimates_per_step(&self) -> usize {
        self.proposal_kind.estimates()
    }

    /// The proposal's step (sd for the random walk).
    fn step_size(&self) -> f64 {
        match self.proposal_kind {
            Proposal::RandomWalk { sd } => sd,
            Proposal::Langevin { step_size } | Proposal::Hamiltonian { step_size, .. } => step_size,
        }
    }

    fn set_step_size(&mut self, step: f64) -> Result<(), SamplerError> {
        let mut kind = self.proposal_kind;
        match &mut kind {
            Proposal::RandomWalk { sd } => *sd = step,
            Proposal::Langevin { step_size } | Proposal::Hamiltonian { step_size, .. } => {
                *step_size = step
            }
        }
        kind.validate().map_err(SamplerError::Invalid)?;
        self.proposal_kind = kind;
        Ok(())
    }

    fn statistics(&self) -> Option<SamplerStatistics> {
        Some(SamplerStatistics::Mh(self.stats.clone()))
    }
}

/// Count one decision of the test.
fn record(stats: &mut MhStatistics, d: &Decision) {
    match d.outcome {
        Outcome::Skipped => stats.skipped += 1,
        Outcome::ExhaustedBySign => stats.exhausted_by_sign += 1,
        Outcome::Decided => {}
    }
    if d.outcome != Outcome::Skipped {
        if d.accept {
            stats.accepted += 1;
        } else {
            stats.rejected += 1;
        }
    }
    if d.growths > 0 {
        stats.grown += 1;
    }
    stats.points += d.points as u64;
    *stats.points_histogram.entry(d.points).or_insert(0) += 1;
}
