//! Successive halving, MAMBA's Algorithm 1 in the normative form of reference §5.2.
//!
//! M arms, pruning rate η, K = ⌊log_η M⌋ rounds computed exactly in integers. Round i gives each
//! of the |Sᵢ| surviving arms the budget rᵢ = T / (|Sᵢ|·K), scores them (lower is better; NaN or
//! no result counts as +∞), sorts them by metric with ties in grid order, and keeps the first
//! ⌊|Sᵢ|/η⌋. The winner is the first arm of the last sort. With the per-arm budget R given
//! instead of T: r₀ = R / Σ_{i<K} ηⁱ and T = r₀·M·K (how the experiments set T). With M < η
//! (K = 0) one round runs every arm with the whole budget.
//!
//! The budget unit is the caller's: seconds of (thread CPU) time, or per-datum gradient
//! evaluations for reproducible runs (§5.3).

/// Errors in a halving plan.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum HalvingError {
    /// No arms.
    #[error("successive halving needs at least one arm")]
    NoArms,
    /// η < 2.
    #[error("pruning rate η = {0} is invalid: must be an integer ≥ 2")]
    BadEta(usize),
    /// A budget that is not finite and positive.
    #[error("budget {0} is invalid: must be finite and > 0")]
    BadBudget(f64),
}

/// The largest K with η^K ≤ m (exact integer arithmetic; 0 when m < η).
pub fn log_floor(m: usize, eta: usize) -> usize {
    let mut k = 0;
    let mut power: usize = 1;
    while let Some(next) = power.checked_mul(eta) {
        if next > m {
            break;
        }
        power = next;
        k += 1;
    }
    k
}

/// The schedule of Algorithm 1: how many rounds, and each round's per-arm budget.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HalvingPlan {
    arms: usize,
    eta: usize,
    /// K (0 for M < η).
    rounds: usize,
    /// T; for K = 0 the single round's per-arm budget.
    total_budget: f64,
}

impl HalvingPlan {
    /// The plan with total budget T.
    pub fn with_total_budget(arms: usize, eta: usize, total: f64) -> Result<Self, HalvingError> {
        Self::check(arms, eta, total)?;
        Ok(Self {
            arms,
            eta,
            rounds: log_floor(arms, eta),
            total_budget: total,
        })
    }

    /// The plan in which the winner's cumulative budget is R when M is a power of η (the
    /// paper's R, e.g. 1 s): r₀ = R / Σ_{i<K} ηⁱ, T = r₀·M·K. For K = 0, one round of R per arm.
    pub fn with_arm_budget(arms: usize, eta: usize, r: f64) -> Result<Self, HalvingError> {
        Self::check(arms, eta, r)?;
        let rounds = log_floor(arms, eta);
        let total = if rounds == 0 {
            r
        } else {
            let geometric: f64 = (0..rounds).map(|i| (eta as f64).powi(i as i32)).sum();
            r / geometric * (arms * rounds) as f64
        };
        Ok(Self {
            arms,
            eta,
            rounds,
            total_budget: total,
        })
    }

    /// The reference code's round count, int(log M / log η) in floating point (compatibility
    /// option `mamba_float_round_count`: 4 instead of 5 for M = 243, η = 3). T is unchanged.
    pub fn with_float_round_count(mut self) -> Self {
        self.rounds = ((self.arms as f64).ln() / (self.eta as f64).ln()) as usize;
        self
    }

    fn check(arms: usize, eta: usize, budget: f64) -> Result<(), HalvingError> {
        if arms == 0 {
            return Err(HalvingError::NoArms);
        }
        if eta < 2 {
            return Err(HalvingError::BadEta(eta));
        }
        if !(budget.is_finite() && budget > 0.0) {
            return Err(HalvingError::BadBudget(budget));
        }
        Ok(())
    }

    /// Number of arms M.
    pub fn arms(&self) -> usize {
        self.arms
    }

    /// Pruning rate η.
    pub fn eta(&self) -> usize {
        self.eta
    }

    /// K = ⌊log_η M⌋ (0 when M < η; one round still runs then).
    pub fn rounds(&self) -> usize {
        self.rounds
    }

    /// Total budget T.
    pub fn total_budget(&self) -> f64 {
        self.total_budget
    }

    /// Number of rounds that run: max(K, 1).
    pub fn rounds_run(&self) -> usize {
        self.rounds.max(1)
    }

    /// rᵢ = T / (|Sᵢ|·K) for a round with `survivors` arms (T itself when K = 0).
    pub fn round_budget(&self, survivors: usize) -> f64 {
        if self.rounds == 0 {
            self.total_budget
        } else {
            self.total_budget / (survivors * self.rounds) as f64
        }
    }

    /// |Sᵢ| for i = 0..rounds_run(): M, ⌊M/η⌋, ⌊⌊M/η⌋/η⌋, …
    pub fn survivors_per_round(&self) -> Vec<usize> {
        let mut sizes = Vec::with_capacity(self.rounds_run());
        let mut s = self.arms;
        for _ in 0..self.rounds_run() {
            sizes.push(s);
            s /= self.eta;
        }
        sizes
    }
}

/// One round of a halving run.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RoundRecord {
    /// Round index i (from 0).
    pub round: usize,
    /// rᵢ, the budget each arm of the round got.
    pub budget_per_arm: f64,
    /// (arm index, metric) for every arm of the round, in the sorted order (best first; NaN
    /// already mapped to +∞).
    pub ranking: Vec<(usize, f64)>,
    /// The arms kept for the next round (the first ⌊|Sᵢ|/η⌋ of the ranking; after the last
    /// round, its ranking's survivors as the formula gives them).
    pub kept: Vec<usize>,
}

/// The result of a halving run.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct HalvingOutcome {
    /// The first arm of the last ranking.
    pub winner: usize,
    /// Its metric in the last round.
    pub winner_metric: f64,
    /// Every round.
    pub rounds: Vec<RoundRecord>,
}

/// Run Algorithm 1: `run_round(round, arms, budget)` runs each of `arms` (grid indices, in the
/// round's order) for `budget` and returns their metrics in the same order (lower is better).
/// It may run them in parallel; it must warm-restart each arm from where that arm last stopped.
/// A NaN metric ranks as +∞.
pub fn successive_halving(
    plan: &HalvingPlan,
    run_round: impl FnMut(usize, &[usize], f64) -> Vec<f64>,
) -> HalvingOutcome {
    successive_halving_observed(plan, run_round, |_| {})
}

/// [`successive_halving`], also handing each round's ranking and survivors to `observe` as soon
/// as the round is ranked (e.g. to print it, or to free what pruned arms hold).
pub fn successive_halving_observed(
    plan: &HalvingPlan,
    run_round: impl FnMut(usize, &[usize], f64) -> Vec<f64>,
    observe: impl FnMut(&RoundRecord),
) -> HalvingOutcome {
    successive_halving_resumed(plan, Vec::new(), run_round, observe)
}

/// [`successive_halving_observed`] continued after the rounds `done` (those of an interrupted
/// run, in order from round 0): the next round runs the arms the last of them kept. With every
/// round done, nothing runs and the outcome is `done`'s.
pub fn successive_halving_resumed(
    plan: &HalvingPlan,
    done: Vec<RoundRecord>,
    mut run_round: impl FnMut(usize, &[usize], f64) -> Vec<f64>,
    mut observe: impl FnMut(&RoundRecord),
) -> HalvingOutcome {
    let mut survivors: Vec<usize> = match done.last() {
        Some(last) => last.kept.clone(),
        None => (0..plan.arms).collect(),
    };
    let first = if survivors.is_empty() {
        plan.rounds_run()
    } else {
        done.len()
    };
    let mut rounds = done;
    rounds.reserve(plan.rounds_run().saturating_sub(first));
    for round in first..plan.rounds_run() {
        let budget = plan.round_budget(survivors.len());
        let metrics = run_round(round, &survivors, budget);
        assert_eq!(
            metrics.len(),
            survivors.len(),
            "run_round must return one metric per arm"
        );
        let mut ranking: Vec<(usize, f64)> = survivors
            .iter()
            .zip(metrics)
            .map(|(&arm, m)| (arm, if m.is_nan() { f64::INFINITY } else { m }))
            .collect();
        // Ascending metric; ties in grid order.
        ranking.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
        let keep = survivors.len() / plan.eta;
        let kept: Vec<usize> = ranking.iter().take(keep).map(|r| r.0).collect();
        let record = RoundRecord {
            round,
            budget_per_arm: budget,
            ranking,
            kept: kept.clone(),
        };
        observe(&record);
        rounds.push(record);
        if kept.is_empty() {
            break;
        }
        survivors = kept;
    }
    let last = rounds.last().expect("at least one round runs");
    let (winner, winner_metric) = last.ranking[0];
    HalvingOutcome {
        winner,
        winner_metric,
        rounds,
    }
}
