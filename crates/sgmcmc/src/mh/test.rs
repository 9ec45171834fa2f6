//! Accept/reject tests for Metropolis–Hastings on large data (reference §6): the minibatch
//! Barker test with the X_corr correction (Seita et al.), the Austerity sequential t-test
//! (Korattikara et al. 2014), and the exact full-data Barker and Metropolis tests.
//!
//! Every test decides between the current state θ and a proposal θ' given
//! ψ = log p₀(θ') − log p₀(θ) + log q(θ | θ') − log q(θ' | θ) (the prior and proposal part of the
//! log acceptance ratio) and the per-datum ratios dᵢ of [`LikelihoodRatios`]; the likelihood is
//! tempered by 1/T.

use super::correction::{CorrectionBank, CorrectionTable};
use super::ratio::{LikelihoodRatios, RunningMoments};
use crate::rng::ChainRng;
use crate::sampler::{SamplerError, check_temperature, standard_normal};
use rand::RngExt;
use statrs::distribution::{ContinuousCDF, StudentsT};

/// What the minibatch Barker test does when the variance estimate s² is not below σ²
/// (reference §6.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum FailurePolicy {
    /// Add m more points and test again (UAI version; the default). With all N points used the
    /// finite-population variance is 0, so the test always ends.
    #[default]
    Grow,
    /// Double the batch and test again.
    GrowDoubling,
    /// Keep θ (a symmetric extra rejection, counted; the workshop version).
    Skip,
    /// Raise the likelihood temperature T just enough that s² < σ² (s scales as 1/T), keep it
    /// for the rest of the run, and test. The chain then targets a hotter posterior; the final
    /// temperature is reported.
    RaiseTemperature,
}

/// The estimate s² of Var(Δ*) (reference §6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum VarianceEstimate {
    /// s² = (1 − b/N)·S²_Λ/b with S² the sample variance (n − 1): the unbiased variance of a
    /// mean drawn without replacement; 0 at b = N, where the test is Barker's exactly.
    #[default]
    FinitePopulation,
    /// Compatibility (`mh_variance_population_no_fpc`): the references' population variance of
    /// the Λᵢ over b, without the finite-population factor.
    PopulationNoFpc,
}

/// How a decision was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The test ran to a decision.
    Decided,
    /// The Barker test skipped the iteration (θ kept) under [`FailurePolicy::Skip`].
    Skipped,
    /// Every point was used and s² was still ≥ σ² (only with
    /// [`VarianceEstimate::PopulationNoFpc`]): decided by the sign of Δ*, as the reference does.
    ExhaustedBySign,
}

/// One accept/reject decision.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    /// Move to θ'.
    pub accept: bool,
    /// Data points the decision used.
    pub points: usize,
    /// How it was reached.
    pub outcome: Outcome,
    /// Times the batch grew before the decision.
    pub growths: usize,
}

/// The minibatch Barker test with the deconvolved correction (Seita et al.; reference §6.1,
/// §6.5): Δ* = mean_{i∈B} Λᵢ + ψ with Λᵢ = (N/T)·dᵢ over a batch of m points; when s² < σ²,
/// accept iff Δ* + X_nc + X_corr > 0 with X_nc ~ N(0, σ² − s²) and X_corr ~ C_σ, so that the
/// Gaussian part plus the minibatch error has variance σ² and the sum is approximately
/// Δ + a standard logistic variable: Barker's acceptance 1/(1 + e^(−Δ)). No log u term and no
/// deterministic shortcut.
#[derive(Debug, Clone)]
pub struct BarkerTest {
    table: &'static CorrectionTable,
    batch: usize,
    policy: FailurePolicy,
    variance: VarianceEstimate,
    temperature: f64,
    temperature_raises: usize,
    without_correction: bool,
}

// What changes as the chain runs: the temperature raised by `policy = "raise_temperature"`.
crate::persist_fields!(BarkerTest {
    temperature,
    temperature_raises
});

impl BarkerTest {
    /// The test with batch increment `batch` (m ≥ 2), the correction `table` (its σ), the
    /// likelihood temperature `temperature` and the failure `policy`.
    pub fn new(
        table: &'static CorrectionTable,
        batch: usize,
        temperature: f64,
        policy: FailurePolicy,
        variance: VarianceEstimate,
    ) -> Result<Self, SamplerError> {
        Ok(Self {
            table,
            batch: check_batch(batch)?,
            policy,
            variance,
            temperature: check_temperature(temperature)?,
            temperature_raises: 0,
            without_correction: false,
        })
    }

    /// Ablation: X_corr replaced by 0, so the decision is Δ* + N(0, σ² − s²) > 0, a probit
    /// rather than Barker's logistic acceptance, which breaks detailed balance (for small
    /// moves the chain then targets roughly π^1.6). For demonstrating what the correction does.
    pub fn without_correction(mut self) -> Self {
        self.without_correction = true;
        self
    }

    /// The likelihood temperature now (raised only under [`FailurePolicy::RaiseTemperature`]).
    pub fn temperature(&self) -> f64 {
        self.temperature
    }

    /// Times the temperature was raised.
    pub fn temperature_raises(&self) -> usize {
        self.temperature_raises
    }

    /// s² for the moments of the Λᵢ over b of N points.
    fn variance_of_mean(&self, moments: &RunningMoments, n_data: usize) -> f64 {
        let b = moments.count() as f64;
        match self.variance {
            VarianceEstimate::FinitePopulation => {
                if moments.count() == n_data {
                    0.0
                } else {
                    (1.0 - b / n_data as f64) * moments.sample_variance() / b
                }
            }
            VarianceEstimate::PopulationNoFpc => moments.population_variance() / b,
        }
    }

    /// Decide between `current` and `proposal` given ψ.
    pub fn decide(
        &mut self,
        ratios: &mut LikelihoodRatios<'_>,
        current: &[f64],
        proposal: &[f64],
        psi: f64,
        rng: &mut ChainRng,
    ) -> Decision {
        let n_data = ratios.num_data();
        let sigma2 = self.table.sigma() * self.table.sigma();
        // Λᵢ are accumulated at T = 1 (N·dᵢ) and rescaled by 1/T, so a raised temperature
        // needs no second pass.
        let mut moments = RunningMoments::default();
        ratios.begin();
        let mut increment = self.batch;
        let mut growths = 0;
        loop {
            for &d in ratios.draw(current, proposal, increment, rng) {
                moments.push(n_data as f64 * d);
            }
            let b = ratios.used();
            let scale = 1.0 / self.temperature;
            let delta = scale * moments.mean() + psi;
            let s2 = scale * scale * self.variance_of_mean(&moments, n_data);
            if s2 < sigma2 {
                return Decision {
                    accept: self.barker_with_correction(delta, sigma2 - s2, rng),
                    points: b,
                    outcome: Outcome::Decided,
                    growths,
                };
            }
            if !delta.is_finite() {
                // A proposal where the likelihood is 0 (Λ = −∞) or undefined: reject.
                return Decision {
                    accept: delta == f64::INFINITY,
                    points: b,
                    outcome: Outcome::Decided,
                    growths,
                };
            }
            match self.policy {
                FailurePolicy::Skip => {
                    return Decision {
                        accept: false,
                        points: b,
                        outcome: Outcome::Skipped,
                        growths,
                    };
                }
                FailurePolicy::RaiseTemperature => {
                    // s ∝ 1/T: T' = T·s/σ·1.05 gives s'² = σ²/1.1025 < σ².
                    self.temperature *= (s2 / sigma2).sqrt() * 1.05;
                    self.temperature_raises += 1;
                    let scale = 1.0 / self.temperature;
                    let delta = scale * moments.mean() + psi;
                    let s2 = scale * scale * self.variance_of_mean(&moments, n_data);
                    return Decision {
                        accept: self.barker_with_correction(delta, (sigma2 - s2).max(0.0), rng),
                        points: b,
                        outcome: Outcome::Decided,
                        growths,
                    };
                }
                FailurePolicy::Grow | FailurePolicy::GrowDoubling if b == n_data => {
                    return Decision {
                        accept: delta > 0.0,
                        points: b,
                        outcome: Outcome::ExhaustedBySign,
                        growths,
                    };
                }
                FailurePolicy::Grow => increment = self.batch,
                FailurePolicy::GrowDoubling => increment = b,
            }
            growths += 1;
        }
    }

    fn barker_with_correction(&self, delta: f64, extra_variance: f64, rng: &mut ChainRng) -> bool {
        if self.without_correction {
            return delta + extra_variance.sqrt() * standard_normal(rng) > 0.0;
        }
        corrected_barker_decision(delta, extra_variance, self.table, rng)
    }
}

/// The decision of the Barker test once s² < σ²: accept iff Δ* + X_nc + X_corr > 0 with
/// X_nc ~ N(0, `extra_variance` = σ² − s²) and X_corr ~ `table` (reference §6.1).
pub fn corrected_barker_decision(
    delta_star: f64,
    extra_variance: f64,
    table: &CorrectionTable,
    rng: &mut ChainRng,
) -> bool {
    let x_nc = extra_variance.sqrt() * standard_normal(rng);
    let x_corr = table.sample(rng);
    delta_star + x_nc + x_corr > 0.0
}

/// Austerity MCMC (Korattikara, Chen & Welling 2014; reference §6.7): a sequential t-test of
/// l̄ > μ₀ with lᵢ = dᵢ/T and μ₀ = (log u − ψ)/N, growing the batch by m until the test's
/// p-value δ = 1 − F_{t, n−1}(|l̄ − μ₀|/s) falls below ε, with
/// s = (s_l/√n)·√(1 − (n − 1)/(N − 1)) (finite-population correction); all N points decide
/// exactly.
#[derive(Debug, Clone)]
pub struct AusterityTest {
    batch: usize,
    tolerance: f64,
    temperature: f64,
}

impl AusterityTest {
    /// Batch increment m ≥ 2, tolerance ε ∈ (0, 1), likelihood temperature T.
    pub fn new(batch: usize, tolerance: f64, temperature: f64) -> Result<Self, SamplerError> {
        if !(tolerance > 0.0 && tolerance < 1.0) {
            return Err(SamplerError::Invalid(format!(
                "[sampler] tolerance (Austerity's ε) must be in (0, 1), got {tolerance}"
            )));
        }
        Ok(Self {
            batch: check_batch(batch)?,
            tolerance,
            temperature: check_temperature(temperature)?,
        })
    }

    /// The likelihood temperature T.
    pub fn temperature(&self) -> f64 {
        self.temperature
    }

    /// Decide with the uniform `log_u` given (the exact MH decision for the same u is
    /// log u < Δ).
    pub fn decide_with_u(
        &self,
        ratios: &mut LikelihoodRatios<'_>,
        current: &[f64],
        proposal: &[f64],
        psi: f64,
        log_u: f64,
        rng: &mut ChainRng,
    ) -> Decision {
        let n_data = ratios.num_data();
        let mu0 = (log_u - psi) / n_data as f64;
        let mut moments = RunningMoments::default();
        ratios.begin();
        let mut growths = 0;
        loop {
            for &d in ratios.draw(current, proposal, self.batch, rng) {
                moments.push(d / self.temperature);
            }
            let n = ratios.used();
            let mean = moments.mean();
            let decided = |growths| Decision {
                accept: mean > mu0,
                points: n,
                outcome: Outcome::Decided,
                growths,
            };
            if n == n_data || !mean.is_finite() {
                return decided(growths);
            }
            if n >= 2 {
                let fpc = (1.0 - (n - 1) as f64 / (n_data - 1) as f64).max(0.0);
                let s = (moments.sample_variance() / n as f64).sqrt() * fpc.sqrt();
                if s == 0.0 {
                    return decided(growths);
                }
                let t = (mean - mu0).abs() / s;
                let student = StudentsT::new(0.0, 1.0, (n - 1) as f64)
                    .expect("n ≥ 2 gives ≥ 1 degree of freedom");
                if 1.0 - student.cdf(t) < self.tolerance {
                    return decided(growths);
                }
            }
            growths += 1;
        }
    }

    /// Decide, drawing u ~ U(0, 1).
    pub fn decide(
        &self,
        ratios: &mut LikelihoodRatios<'_>,
        current: &[f64],
        proposal: &[f64],
        psi: f64,
        rng: &mut ChainRng,
    ) -> Decision {
        let log_u = uniform_open(rng).ln();
        self.decide_with_u(ratios, current, proposal, psi, log_u, rng)
    }
}

/// The workshop's minibatch test (Seita et al., workshop Algorithm 1; reference §6.6,
/// compatibility option `mh_workshop`): K independent minibatches of m points give K values of
/// Δ' = (N/T)·mean(dᵢ) + ψ and their sample standard deviation s; if s ≥ the threshold (1.2)
/// the iteration is skipped (θ kept, counted), otherwise a fresh minibatch gives Δ'_real and the
/// test accepts iff Δ'_real + X_c > 0 with X_c drawn from the bank curve whose σ is closest to
/// s. No X_nc is added: the curve's σ stands in for the measured s. Cost (K + 1)·m ratios per
/// iteration. Optionally s is smoothed across iterations by an exponential moving average, as
/// the workshop's mixture experiment did ("to smooth the std(Δ') values, we use moving average
/// updates"); the skip then depends on the chain's history, not only on (θ, θ').
#[derive(Debug, Clone)]
pub struct WorkshopTest {
    bank: &'static CorrectionBank,
    batch: usize,
    minibatches: usize,
    threshold: f64,
    temperature: f64,
    smoothing: f64,
    smoothed: Option<f64>,
}

/// The smoothed s of the earlier decisions.
impl crate::checkpoint::Persist for WorkshopTest {
    fn save(&self, w: &mut crate::checkpoint::StateWriter) {
        w.nested(2);
        w.field("smoothed_set", &self.smoothed.is_some());
        w.field("smoothed", &self.smoothed.unwrap_or(0.0));
    }
    fn load(
        &mut self,
        r: &mut crate::checkpoint::StateReader<'_>,
    ) -> Result<(), crate::checkpoint::StateError> {
        r.nested(2)?;
        let (mut set, mut value) = (false, 0.0);
        r.field("smoothed_set", &mut set)?;
        r.field("smoothed", &mut value)?;
        self.smoothed = set.then_some(value);
        Ok(())
    }
}

impl WorkshopTest {
    /// The workshop test with `minibatches` = K ≥ 2 minibatches of `batch` = m ≥ 2 points for
    /// s, the skip `threshold` on s (the workshop: 1.2, within the bank's σ range) and the
    /// likelihood temperature T.
    pub fn new(
        bank: &'static CorrectionBank,
        batch: usize,
        minibatches: usize,
        threshold: f64,
        temperature: f64,
    ) -> Result<Self, SamplerError> {
        if minibatches < 2 {
            return Err(SamplerError::Invalid(format!(
                "[sampler] minibatches (K of the workshop test) must be at least 2 to estimate \
                 a standard deviation, got {minibatches}"
            )));
        }
        if !(threshold > 0.0 && threshold.is_finite()) {
            return Err(SamplerError::Invalid(format!(
                "[sampler] std_threshold must be positive and finite, got {threshold}"
            )));
        }
        Ok(Self {
            bank,
            batch: check_batch(batch)?,
            minibatches,
            threshold,
            temperature: check_temperature(temperature)?,
            smoothing: 0.0,
            smoothed: None,
        })
    }

    /// Smooth s across iterations: s̄ ← (1 − α)·s̄ + α·s with weight α ∈ (0, 1] (α = 1: no
    /// smoothing, the default).
    pub fn with_smoothing(mut self, alpha: f64) -> Result<Self, SamplerError> {
        if !(alpha > 0.0 && alpha <= 1.0) {
            return Err(SamplerError::Invalid(format!(
                "[sampler] std_smoothing (the moving-average weight of s) must be in (0, 1], got \
                 {alpha}"
            )));
        }
        self.smoothing = if alpha == 1.0 { 0.0 } else { alpha };
        Ok(self)
    }

    /// The likelihood temperature T.
    pub fn temperature(&self) -> f64 {
        self.temperature
    }

    /// Decide between `current` and `proposal` given ψ.
    pub fn decide(
        &mut self,
        ratios: &mut LikelihoodRatios<'_>,
        current: &[f64],
        proposal: &[f64],
        psi: f64,
        rng: &mut ChainRng,
    ) -> Decision {
        let scale = ratios.num_data() as f64 / self.temperature;
        let delta_of_fresh_batch = |ratios: &mut LikelihoodRatios<'_>, rng: &mut ChainRng| {
            ratios.begin();
            let d = ratios.draw(current, proposal, self.batch, rng);
            scale * d.iter().sum::<f64>() / d.len() as f64 + psi
        };
        let mut spread = RunningMoments::default();
        for _ in 0..self.minibatches {
            spread.push(delta_of_fresh_batch(ratios, rng));
        }
        let m = self.batch.min(ratios.num_data());
        let mut s = spread.sample_variance().sqrt();
        if self.smoothing > 0.0 && s.is_finite() {
            s = match self.smoothed {
                Some(previous) => (1.0 - self.smoothing) * previous + self.smoothing * s,
                None => s,
            };
            self.smoothed = Some(s);
        }
        if s.is_nan() || s >= self.threshold {
            // NaN (a non-finite Δ') is skipped too: the test cannot judge it.
            return Decision {
                accept: false,
                points: self.minibatches * m,
                outcome: Outcome::Skipped,
                growths: 0,
            };
        }
        let delta = delta_of_fresh_batch(ratios, rng);
        let x_corr = self.bank.closest(s).sample(rng);
        Decision {
            accept: delta + x_corr > 0.0,
            points: (self.minibatches + 1) * m,
            outcome: Outcome::Decided,
            growths: 0,
        }
    }
}

/// The acceptance rule of an exact (full-data) test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum ExactRule {
    /// Barker: accept with probability 1/(1 + e^(−Δ)), i.e. iff Δ + X_log > 0.
    Barker,
    /// Metropolis: accept with probability min(1, e^Δ), i.e. iff log u < Δ.
    Metropolis,
}

/// The full-data test: Δ = Σᵢ dᵢ/T + ψ over all N points (reference §6.1).
#[derive(Debug, Clone)]
pub struct ExactTest {
    rule: ExactRule,
    temperature: f64,
}

impl ExactTest {
    /// The exact test with `rule` at likelihood temperature T.
    pub fn new(rule: ExactRule, temperature: f64) -> Result<Self, SamplerError> {
        Ok(Self {
            rule,
            temperature: check_temperature(temperature)?,
        })
    }

    /// The likelihood temperature T.
    pub fn temperature(&self) -> f64 {
        self.temperature
    }

    /// Decide.
    pub fn decide(
        &self,
        ratios: &mut LikelihoodRatios<'_>,
        current: &[f64],
        proposal: &[f64],
        psi: f64,
        rng: &mut ChainRng,
    ) -> Decision {
        let n_data = ratios.num_data();
        ratios.begin();
        let sum: f64 = ratios.draw(current, proposal, n_data, rng).iter().sum();
        let delta = sum / self.temperature + psi;
        let u = uniform_open(rng);
        let accept = match self.rule {
            ExactRule::Barker => delta + (u / (1.0 - u)).ln() > 0.0,
            ExactRule::Metropolis => u.ln() < delta,
        };
        Decision {
            accept: accept && !delta.is_nan(),
            points: n_data,
            outcome: Outcome::Decided,
            growths: 0,
        }
    }
}

/// The batch increment m: at least 2, so that a variance can be estimated.
fn check_batch(batch: usize) -> Result<usize, SamplerError> {
    if batch < 2 {
        return Err(SamplerError::Invalid(format!(
            "[sampler] batch_size of the MH test must be at least 2, got {batch}"
        )));
    }
    Ok(batch)
}

/// u ~ U(0, 1) excluding 0 (so log u and the logistic transform are finite).
fn uniform_open(rng: &mut ChainRng) -> f64 {
    loop {
        let u: f64 = rng.random();
        if u > 0.0 {
            return u;
        }
    }
}
