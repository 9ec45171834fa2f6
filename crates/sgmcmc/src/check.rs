//! The bias check: do a run's draws fit the posterior? (issue 22)
//!
//! R-hat and ESS measure mixing; a stochastic-gradient chain can mix well around the wrong
//! distribution. The check tests the draws against the posterior itself with the kernel Stein
//! discrepancy goodness-of-fit test ([`crate::stein::ksd_test`]: n·KSD²_V against its wild
//! bootstrap null, Chwialkowski, Strathmann & Gretton 2016), which needs only scores:
//!
//! 1. **Thinning.** Each chain is thinned by ⌈2τ⌉, τ the largest integrated autocorrelation
//!    time of any parameter in any chain (Sokal's window), and further so that at most
//!    `max_draws` draws are tested (the test costs n² Stein-kernel entries). The thinned draws
//!    are then nearly independent; the bootstrap's signs still flip with a small probability
//!    q (0.1) between consecutive draws, which keeps the level when τ was underestimated.
//! 2. **Coordinates.** The test runs in whitened coordinates φ = L⁻¹(θ − c): the run's
//!    preconditioner when it had one, else the draws' own mean and covariance (its
//!    Cholesky factor; the sds alone above D = 1,000). Whitening matters: the kernel must vary
//!    on the posterior's scale in every direction, or the test is blind to errors of spread
//!    along the directions where it is flat (a per-parameter scaling left a rotated,
//!    ill-conditioned target's 3× too wide draws undetected). The test is
//!    invariant in meaning (a bijection maps the posterior to the posterior of φ), and the IMQ
//!    kernel with c = 1 then sees every direction on the posterior's own scale.
//! 3. **Scores.** Exact full-data scores while N·draws ≤ `exact_score_budget`; beyond, the
//!    control-variate surrogate about the centre on a fixed subsample of `surrogate_size`
//!    points ([`ScoreFunction::control_variates`]), the exact score of a posterior that agrees
//!    with π at the centre.
//!
//! 4. **Stein identities.** Under the posterior, E[∂ⱼlog π(φ)] = 0 and
//!    E[∂ⱼlog π(φ)·(φⱼ − E φⱼ)] = −1 for every coordinate (integration by parts). Their sample
//!    versions over the draws (thinned only to `max_draws`, with Monte Carlo errors from each
//!    chain's autocorrelation) measure, per parameter, the location error in posterior sds
//!    and the relative error of the variance: a chain whose spread is 10 % too wide gives
//!    −1.21 instead of −1. They keep their power when the chains mix too slowly for the KSD
//!    test to have more than a few nearly independent draws, which is exactly when an SG
//!    chain is most biased.
//!
//! The verdict: the draws fail when the KSD test gives p < `level` (0.01), or when an identity
//! is off both significantly (|z| above the Bonferroni bound of `level` over the 2D
//! identities) and materially (by more than `tolerance`, 0.2: 0.2 sd in location, 20 % in
//! variance, about 10 % in sd, the accuracy issue 22 asks of a good run). With 0.1, runs whose
//! sds were within 4 % of NUTS in every parameter were flagged at z ≈ 3.5 along one whitened
//! direction (the demo's data, BAOAB at h = 1: E[s·φ] = −0.87), below that accuracy.

use crate::diagnostics::{integrated_autocorr_time, mcse_mean};
use crate::estimator::FullDataEvaluator;
use crate::model::Model;
use crate::precondition::{
    DENSE_MAX_DIM, PreconditionedModel, Preconditioner, PreconditionerError,
};
use crate::rng::{self, ChainRng};
use crate::stein::{ImqKernel, Kernel, KsdTest, KsdTestSettings, SteinError, ksd_test};
use crate::tuning::ScoreFunction;
use statrs::distribution::{ContinuousCDF, Normal};
use std::time::Instant;

/// How the bias check runs.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct BiasCheckSettings {
    /// At most this many draws are tested (pooled over chains); 1,000.
    pub max_draws: usize,
    /// Bootstrap replicates; 1,000.
    pub bootstraps: usize,
    /// The bootstrap signs' flip probability q; 0.1.
    pub flip_probability: f64,
    /// The draws fail the check when p < level; 0.01.
    pub level: f64,
    /// Exact scores while N × draws tested ≤ this many per-datum gradients; 2·10⁸.
    pub exact_score_budget: f64,
    /// Points of the control-variate surrogate beyond that budget; 10,000.
    pub surrogate_size: usize,
    /// How far a Stein identity may be off before it counts (0.2).
    pub tolerance: f64,
}

impl Default for BiasCheckSettings {
    fn default() -> Self {
        Self {
            max_draws: 1_000,
            bootstraps: 1_000,
            flip_probability: 0.1,
            level: 0.01,
            exact_score_budget: 2e8,
            surrogate_size: 10_000,
            tolerance: 0.2,
        }
    }
}

/// Where the scores of the check came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case", tag = "kind"))]
pub enum CheckScores {
    /// The exact full-data score.
    Exact,
    /// The control-variate surrogate on a fixed subsample of this many points.
    Surrogate {
        /// Points in the subsample.
        points: usize,
    },
}

/// The worst coordinate of one Stein identity.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct IdentityError {
    /// The parameter (index in the model's order) whose identity is furthest off in z.
    pub parameter: usize,
    /// Its name.
    pub name: String,
    /// Its error (sample mean minus the identity's value).
    pub error: f64,
    /// The error over its Monte Carlo standard error.
    pub z: f64,
    /// The largest |error| over all parameters.
    pub max_abs_error: f64,
}

/// The Stein identities E[sⱼ] = 0 and E[sⱼ·(φⱼ − E φⱼ)] = −1 on the whitened draws.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct IdentityCheck {
    /// E[sⱼ] = 0: location.
    pub location: IdentityError,
    /// E[sⱼ·(φⱼ − E φⱼ)] = −1: spread.
    pub spread: IdentityError,
    /// |z| above which an error is significant (Bonferroni over the 2D identities).
    pub z_bound: f64,
    /// Draws used (per chain × chains).
    pub draws: usize,
    /// Parameters whose identity is off significantly and materially.
    pub failed: Vec<usize>,
}

/// What the bias check found.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct BiasCheck {
    /// The KSD goodness-of-fit test on the thinned, whitened draws (`None` when thinning by
    /// 2τ left fewer than 2 draws).
    pub test: Option<KsdTest>,
    /// The Stein identities per parameter.
    pub identities: IdentityCheck,
    /// Whether the draws pass (p ≥ level).
    pub passed: bool,
    /// The level.
    pub level: f64,
    /// The largest integrated autocorrelation time of any parameter in any chain.
    pub autocorrelation_time: f64,
    /// Every `thin`-th draw of each chain entered the KSD test.
    pub thin: usize,
    /// Where the scores came from.
    pub scores: CheckScores,
    /// Whether the run's preconditioner whitened the draws (else their own mean and sd did).
    pub whitened_by_preconditioner: bool,
    /// Seconds the check took (scores included).
    pub seconds: f64,
}

/// "every draw", "every 2nd draw", "every 32nd draw", "every 11th draw", ...
fn every(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    if n <= 1 {
        "every draw".into()
    } else {
        format!("every {n}{suffix} draw")
    }
}

impl BiasCheck {
    /// One line in plain words, with what to try when the draws fail.
    pub fn describe(&self) -> String {
        let ksd = match &self.test {
            Some(t) => format!(
                "KSD test p = {:.3} on {} draws ({} of each chain)",
                t.p_value,
                t.draws,
                every(self.thin)
            ),
            None => "KSD test not run (the chains mix too slowly for 2 nearly independent draws)"
                .to_string(),
        };
        let id = &self.identities;
        let what = format!(
            "bias check: {ksd}; Stein identities on {} draws (whitened, want E[s·φ] = −1 and \
             E[s] = 0): worst E[s·φ] = {:.3} ({}, z = {:.1}), worst E[s] = {:.3} ({}, z = {:.1}); \
             scores {}",
            id.draws,
            id.spread.error - 1.0,
            id.spread.name,
            id.spread.z,
            id.location.error,
            id.location.name,
            id.location.z,
            match self.scores {
                CheckScores::Exact => "exact".to_string(),
                CheckScores::Surrogate { points } =>
                    format!("from a control-variate surrogate on {points} points"),
            }
        );
        if self.passed {
            format!("{what}: no evidence that the draws miss the posterior")
        } else {
            format!(
                "{what}: the draws do NOT fit the posterior, even if R-hat looks fine; try control \
                 variates (estimator = \"control_variates\"), a smaller step, `sgmcmc tune`, or the \
                 default path (leave out [sampler])"
            )
        }
    }
}

/// Why the check could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckError {
    /// Too few draws to thin and test.
    #[error("bias check: {0} draws per chain are too few to test (at least 20 are needed)")]
    TooFewDraws(usize),
    /// The chains have different lengths or non-finite draws.
    #[error("bias check: {0}")]
    Draws(String),
    /// A parameter does not move (its sd is 0), so the draws cannot be whitened.
    #[error("bias check: parameter {0} has the same value in every draw")]
    Constant(usize),
    /// The whitening map.
    #[error(transparent)]
    Preconditioner(#[from] PreconditionerError),
    /// The KSD test.
    #[error(transparent)]
    Stein(#[from] SteinError),
}

/// The bias check of `chains` (each flat `draws × D`, equal lengths) against `model`'s posterior,
/// whitened by `preconditioner` when given; `centre` (e.g. the MAP) anchors the surrogate scores
/// (the draws' mean when `None`). `seed` seeds the surrogate's subsample and the bootstrap.
pub fn bias_check(
    model: &dyn Model,
    chains: &[&[f64]],
    preconditioner: Option<&Preconditioner>,
    centre: Option<&[f64]>,
    settings: &BiasCheckSettings,
    seed: u64,
) -> Result<BiasCheck, CheckError> {
    let start = Instant::now();
    let d = model.dim();
    let len = chains.first().map_or(0, |c| c.len() / d.max(1));
    if chains.iter().any(|c| c.len() != len * d) {
        return Err(CheckError::Draws("the chains differ in length".into()));
    }
    if len < 20 {
        return Err(CheckError::TooFewDraws(len));
    }
    if chains.iter().any(|c| c.iter().any(|v| !v.is_finite())) {
        return Err(CheckError::Draws("a draw is not finite".into()));
    }
    // τⱼ, for the KSD test's thinning and the identities' error floor.
    let mut column = vec![0.0; len];
    // τⱼ: the largest integrated autocorrelation time of parameter j over the chains.
    let mut tau_j = vec![1.0f64; d];
    for chain in chains {
        for (j, t_j) in tau_j.iter_mut().enumerate() {
            column
                .iter_mut()
                .zip(chain.chunks_exact(d))
                .for_each(|(c, row)| *c = row[j]);
            let t = integrated_autocorr_time(&column);
            if t.is_finite() {
                *t_j = t_j.max(t);
            }
        }
    }
    let tau = tau_j.iter().copied().fold(1.0, f64::max);
    // 1. The draws of the identities (thinned to at most max_draws) and, among them, those of
    //    the KSD test (thinned by ⌈2τ⌉ as well).
    let total = chains.len() * len;
    let thin_all = total.div_ceil(settings.max_draws.max(2)).max(1);
    let per_chain = len / thin_all;
    if per_chain < 4 {
        return Err(CheckError::TooFewDraws(len));
    }
    let step = ((2.0 * tau).ceil() as usize).div_ceil(thin_all).max(1);
    let thin = step * thin_all;
    let mut draws: Vec<f64> = Vec::with_capacity(chains.len() * per_chain * d);
    for chain in chains {
        // Rows thin − 1, 2·thin − 1, …: the last row of each stretch.
        for row in chain.chunks_exact(d).skip(thin_all - 1).step_by(thin_all) {
            draws.extend_from_slice(row);
        }
    }
    // 2. Whitening.
    let own;
    let map = match preconditioner {
        Some(p) => p,
        None => {
            let mean = pooled_mean(chains, d);
            let covariance = pooled_covariance(chains, d, &mean);
            if let Some(j) = (0..d).position(|j| covariance[j * d + j] <= 0.0) {
                return Err(CheckError::Constant(j));
            }
            own = if d <= DENSE_MAX_DIM {
                Preconditioner::dense(&mean, &covariance)?
            } else {
                let sd: Vec<f64> = (0..d).map(|j| covariance[j * d + j].sqrt()).collect();
                Preconditioner::diagonal(&mean, &sd)?
            };
            &own
        }
    };
    let whitened =
        PreconditionedModel::new(model, map).map_err(|e| CheckError::Draws(e.to_string()))?;
    let mut phi = vec![0.0; draws.len()];
    for (t, p) in draws.chunks_exact(d).zip(phi.chunks_exact_mut(d)) {
        map.to_phi(t, p);
    }
    let n = draws.len() / d;
    // 3. Scores in φ.
    let exact = model.num_data() as f64 * n as f64 <= settings.exact_score_budget;
    let (scores, kind) = if exact || settings.surrogate_size >= model.num_data() {
        (
            ScoreFunction::exact(&whitened).scores(&phi),
            CheckScores::Exact,
        )
    } else {
        let mut centre_phi = vec![0.0; d];
        match centre {
            Some(c) => map.to_phi(c, &mut centre_phi),
            None => {
                map.to_phi(&pooled_mean(chains, d), &mut centre_phi);
            }
        }
        let mut centre_score = vec![0.0; d];
        FullDataEvaluator::new(&whitened).grad_log_posterior(&centre_phi, &mut centre_score);
        let mut rng: ChainRng = rng::stream(seed, rng::streams::BIAS_CHECK);
        let f = ScoreFunction::control_variates(
            &whitened,
            &centre_phi,
            &centre_score,
            settings.surrogate_size,
            &mut rng,
        );
        (
            f.scores(&phi),
            CheckScores::Surrogate {
                points: settings.surrogate_size,
            },
        )
    };
    // 4. The Stein identities.
    // The thinned series' τ implied by each parameter's full-chain τ through an AR(1) (lag-one
    // correlation r = (τ − 1)/(τ + 1), so rᵗʰⁱⁿ after thinning): a floor under the short
    // thinned series' own estimate, which runs low when they are still autocorrelated.
    let tau_thinned: Vec<f64> = tau_j
        .iter()
        .map(|t| {
            let r = ((t - 1.0) / (t + 1.0)).powi(thin_all as i32);
            (1.0 + r) / (1.0 - r)
        })
        .collect();
    let mut identities = stein_identities(
        &phi,
        &scores,
        d,
        (chains.len(), per_chain),
        &tau_thinned,
        settings,
    );
    let names = model.parameter_names();
    for e in [&mut identities.location, &mut identities.spread] {
        e.name = names.get(e.parameter).cloned().unwrap_or_default();
    }
    // 5. The KSD test on every `step`-th of the identities' draws of each chain.
    let (mut ksd_phi, mut ksd_scores) = (Vec::new(), Vec::new());
    for c in 0..chains.len() {
        for k in (step - 1..per_chain).step_by(step) {
            let row = (c * per_chain + k) * d;
            ksd_phi.extend_from_slice(&phi[row..row + d]);
            ksd_scores.extend_from_slice(&scores[row..row + d]);
        }
    }
    let test = if ksd_phi.len() >= 2 * d {
        Some(ksd_test(
            &ksd_phi,
            &ksd_scores,
            d,
            &Kernel::Imq(ImqKernel::default()),
            &KsdTestSettings {
                bootstraps: settings.bootstraps,
                flip_probability: settings.flip_probability,
                seed,
            },
        )?)
    } else {
        None
    };
    let ksd_passed = test.as_ref().is_none_or(|t| t.p_value >= settings.level);
    Ok(BiasCheck {
        passed: ksd_passed && identities.failed.is_empty(),
        test,
        identities,
        level: settings.level,
        autocorrelation_time: tau,
        thin,
        scores: kind,
        whitened_by_preconditioner: preconditioner.is_some(),
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// The identities E[sⱼ] = 0 and E[sⱼ·(φⱼ − φ̄ⱼ)] = −1 over `chains` chains of `per_chain`
/// consecutive rows of `phi` and `scores`; each error's Monte Carlo standard error combines
/// the chains' own as independent errors, each the larger of `mcse_mean` (Sokal-windowed τ)
/// and sd·√(τ_floor/n) with parameter j's `tau_floor`.
fn stein_identities(
    phi: &[f64],
    scores: &[f64],
    d: usize,
    (chains, per_chain): (usize, usize),
    tau_floor: &[f64],
    settings: &BiasCheckSettings,
) -> IdentityCheck {
    let n = (chains * per_chain) as f64;
    let z_bound = Normal::new(0.0, 1.0)
        .expect("the standard normal")
        .inverse_cdf(1.0 - settings.level / (4.0 * d as f64));
    let mut location = Vec::with_capacity(d);
    let mut spread = Vec::with_capacity(d);
    let mut series = vec![0.0; per_chain];
    let pooled = |f: &dyn Fn(usize) -> f64, series: &mut Vec<f64>, tau: f64| {
        let (mut mean, mut var) = (0.0, 0.0);
        for c in 0..chains {
            for (k, x) in series.iter_mut().enumerate() {
                *x = f(c * per_chain + k);
            }
            let m = series.iter().sum::<f64>() / per_chain as f64;
            mean += m / chains as f64;
            let sd2 =
                series.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (per_chain as f64 - 1.0);
            let se = mcse_mean(series).max((sd2 * tau / per_chain as f64).sqrt());
            var += if se.is_finite() {
                se * se
            } else {
                f64::INFINITY
            };
        }
        (mean, var.sqrt() / chains as f64)
    };
    for j in 0..d {
        let phi_bar = (0..chains * per_chain).map(|r| phi[r * d + j]).sum::<f64>() / n;
        location.push(pooled(&|r| scores[r * d + j], &mut series, tau_floor[j]));
        let (m, se) = pooled(
            &|r| scores[r * d + j] * (phi[r * d + j] - phi_bar),
            &mut series,
            tau_floor[j],
        );
        spread.push((m + 1.0, se));
    }
    let worst = |errors: &[(f64, f64)]| {
        let (parameter, &(error, se)) = errors
            .iter()
            .enumerate()
            .max_by(|a, b| (a.1.0 / a.1.1).abs().total_cmp(&(b.1.0 / b.1.1).abs()))
            .expect("at least one parameter");
        IdentityError {
            parameter,
            name: String::new(),
            error,
            z: error / se,
            max_abs_error: errors.iter().fold(0.0, |m, (e, _)| m.max(e.abs())),
        }
    };
    let failed = (0..d)
        .filter(|&j| {
            [location[j], spread[j]]
                .iter()
                .any(|(e, se)| !(e.abs() <= settings.tolerance || (e / se).abs() <= z_bound))
        })
        .collect();
    IdentityCheck {
        location: worst(&location),
        spread: worst(&spread),
        z_bound,
        draws: chains * per_chain,
        failed,
    }
}

/// Pooled mean of the draws.
fn pooled_mean(chains: &[&[f64]], d: usize) -> Vec<f64> {
    let n = chains.iter().map(|c| c.len() / d).sum::<usize>() as f64;
    let mut mean = vec![0.0; d];
    for row in chains.iter().flat_map(|c| c.chunks_exact(d)) {
        mean.iter_mut().zip(row).for_each(|(m, x)| *m += x / n);
    }
    mean
}

/// Pooled covariance (divisor n − 1) of the draws about `mean`, row-major D × D.
fn pooled_covariance(chains: &[&[f64]], d: usize, mean: &[f64]) -> Vec<f64> {
    let n = chains.iter().map(|c| c.len() / d).sum::<usize>() as f64;
    let mut cov = vec![0.0; d * d];
    for row in chains.iter().flat_map(|c| c.chunks_exact(d)) {
        for i in 0..d {
            let di = (row[i] - mean[i]) / (n - 1.0);
            for j in 0..=i {
                cov[i * d + j] += di * (row[j] - mean[j]);
            }
        }
    }
    for i in 0..d {
        for j in 0..i {
            cov[j * d + i] = cov[i * d + j];
        }
    }
    cov
}
