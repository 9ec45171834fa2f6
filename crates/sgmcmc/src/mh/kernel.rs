//! Metropolis–Hastings as its own chain kernel ([`ChainKernel`], run by the runner's loop like
//! any sampler): a proposal, then one of the accept/reject tests of [`super::test`], with
//! counts of every outcome for the run summary. Only gradient proposals hold a gradient
//! estimator.

use super::proposal::{Proposal, ProposalState};
use super::ratio::LikelihoodRatios;
use super::test::{AusterityTest, BarkerTest, Decision, ExactTest, Outcome, WorkshopTest};
use crate::checkpoint::{Persist, StateError, StateReader, StateWriter};
use crate::estimator::GradientEstimator;
use crate::model::Model;
use crate::rng::ChainRng;
use crate::sampler::{ChainKernel, MhStatistics, SamplerError, SamplerStatistics, all_finite};

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
pub struct MhKernel<'m> {
    model: &'m dyn Model,
    /// The score estimates of a gradient proposal (none for the random walk).
    estimator: Option<Box<dyn GradientEstimator + 'm>>,
    proposal_kind: Proposal,
    proposal_state: ProposalState,
    test: AcceptanceTest,
    ratios: LikelihoodRatios<'m>,
    theta: Vec<f64>,
    proposal: Vec<f64>,
    log_prior: f64,
    score: Vec<f64>,
    stats: MhStatistics,
    /// `stats.accepted` before the last step (so the draw knows whether it was accepted).
    accepted_before: u64,
    /// Per-datum gradient evaluations since the start (without the estimator's extras).
    counted: u64,
}

impl<'m> MhKernel<'m> {
    /// An MH chain on `model` with proposal `proposal` and test `test`; `estimator` gives the
    /// score estimates of a gradient proposal (Langevin, Hamiltonian) and must be `None` for the
    /// random walk, which computes none.
    pub fn new(
        model: &'m dyn Model,
        proposal: Proposal,
        test: AcceptanceTest,
        estimator: Option<Box<dyn GradientEstimator + 'm>>,
    ) -> Result<Self, SamplerError> {
        proposal.validate().map_err(SamplerError::Invalid)?;
        match (proposal.uses_gradient(), estimator.is_some()) {
            (true, false) => {
                return Err(SamplerError::Invalid(
                    "a gradient proposal needs a gradient estimator".into(),
                ));
            }
            (false, true) => {
                return Err(SamplerError::Invalid(
                    "the random-walk proposal computes no gradient; give it no estimator".into(),
                ));
            }
            _ => {}
        }
        let dim = model.dim();
        Ok(Self {
            model,
            estimator,
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
            accepted_before: 0,
            counted: 0,
        })
    }

    /// Draw the test's minibatches by `scheme` (uniform, the default, or contiguous blocks).
    pub fn with_scheme(mut self, scheme: crate::estimator::MinibatchScheme) -> Self {
        self.ratios.set_scheme(scheme);
        self
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

/// The test's changing state: the Barker test's temperature, the workshop test's smoothed s
/// (the others have none).
impl Persist for AcceptanceTest {
    fn save(&self, w: &mut StateWriter) {
        match self {
            AcceptanceTest::Barker(t) => w.field("barker", t),
            AcceptanceTest::Workshop(t) => w.field("workshop", t),
            AcceptanceTest::Austerity(_) => w.field_with("austerity", |w| w.nested(0)),
            AcceptanceTest::Exact(_) => w.field_with("exact", |w| w.nested(0)),
        }
    }
    fn load(&mut self, r: &mut StateReader<'_>) -> Result<(), StateError> {
        match self {
            AcceptanceTest::Barker(t) => r.field("barker", t),
            AcceptanceTest::Workshop(t) => r.field("workshop", t),
            AcceptanceTest::Austerity(_) => r.field_with("austerity", |r| r.nested(0)),
            AcceptanceTest::Exact(_) => r.field_with("exact", |r| r.nested(0)),
        }
    }
}

impl ChainKernel for MhKernel<'_> {
    /// θ, its log prior and score, the proposal's buffers, the test's state, the subsampler,
    /// the counts and the gradient estimator's state.
    fn save_state(&self, w: &mut StateWriter) {
        w.nested(10);
        w.field("theta", &self.theta);
        w.field("log_prior", &self.log_prior);
        w.field("score", &self.score);
        w.field("proposal", &self.proposal_state);
        w.field("test", &self.test);
        w.field("ratios", &self.ratios);
        w.field("stats", &self.stats);
        w.field("accepted_before", &self.accepted_before);
        w.field("counted", &self.counted);
        w.field_with("estimator", |w| match &self.estimator {
            Some(e) => e.save_state(w),
            None => w.nested(0),
        });
    }
    fn load_state(&mut self, r: &mut StateReader<'_>) -> Result<(), StateError> {
        r.nested(10)?;
        r.field("theta", &mut self.theta)?;
        r.field("log_prior", &mut self.log_prior)?;
        r.field("score", &mut self.score)?;
        r.field("proposal", &mut self.proposal_state)?;
        r.field("test", &mut self.test)?;
        r.field("ratios", &mut self.ratios)?;
        r.field("stats", &mut self.stats)?;
        r.field("accepted_before", &mut self.accepted_before)?;
        r.field("counted", &mut self.counted)?;
        r.field_with("estimator", |r| match &mut self.estimator {
            Some(e) => e.load_state(r),
            None => r.nested(0),
        })?;
        let d = self.model.dim();
        if self.theta.len() != d {
            return Err(StateError::Invalid(format!(
                "the MH chain's position has {} values, the model {d} parameters",
                self.theta.len()
            )));
        }
        Ok(())
    }

    fn start(&mut self, theta0: &[f64], rng: &mut ChainRng) {
        self.theta.copy_from_slice(theta0);
        self.log_prior = self.model.log_prior(theta0);
        self.counted = 0;
        if let Some(estimator) = self.estimator.as_mut() {
            estimator.restart(theta0);
            estimator.estimate(theta0, &mut self.score, rng);
            self.counted = estimator.cost_per_estimate() as u64;
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
        self.accepted_before = 0;
    }

    fn step(&mut self, rng: &mut ChainRng) {
        self.accepted_before = self.stats.accepted;
        self.stats.iterations += 1;
        let temperature = self.temperature();
        let estimator = self.estimator.as_deref_mut();
        if let Some(e) = &estimator {
            self.counted += self.proposal_kind.estimates() as u64 * e.cost_per_estimate() as u64;
        }
        let log_q_ratio = self.proposal_state.propose(
            &self.proposal_kind,
            &self.theta,
            &mut self.proposal,
            self.model,
            temperature,
            estimator.map(|e| e as &mut dyn GradientEstimator),
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

    /// θ and, for gradient proposals, the score estimate at θ.
    fn is_finite(&self) -> bool {
        all_finite(&self.theta) && all_finite(&self.score)
    }

    fn gradient_evaluations(&self) -> u64 {
        self.counted
            + self
                .estimator
                .as_ref()
                .map_or(0, |e| e.extra_evaluations_since_restart())
    }

    fn statistics(&self) -> Option<SamplerStatistics> {
        Some(SamplerStatistics::Mh(self.stats.clone()))
    }

    fn draw_statistics(&self) -> crate::sampler::DrawStatistics {
        crate::sampler::DrawStatistics {
            accepted: Some(self.stats.accepted > self.accepted_before),
            ..Default::default()
        }
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
