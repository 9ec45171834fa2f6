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
//! The verdict: the draws pass unless p < `level` (0.01).

use crate::diagnostics::integrated_autocorr_time;
use crate::estimator::FullDataEvaluator;
use crate::model::Model;
use crate::precondition::{
    DENSE_MAX_DIM, PreconditionedModel, Preconditioner, PreconditionerError,
};
use crate::rng::{self, ChainRng};
use crate::stein::{ImqKernel, Kernel, KsdTest, KsdTestSettings, SteinError, ksd_test};
use crate::tuning::ScoreFunction;
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

/// What the bias check found.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct BiasCheck {
    /// The KSD goodness-of-fit test on the thinned, whitened draws.
    pub test: KsdTest,
    /// Whether the draws pass (p ≥ level).
    pub passed: bool,
    /// The level.
    pub level: f64,
    /// The largest integrated autocorrelation time of any parameter in any chain.
    pub autocorrelation_time: f64,
    /// Every `thin`-th draw of each chain was tested.
    pub thin: usize,
    /// Where the scores came from.
    pub scores: CheckScores,
    /// Whether the run's preconditioner whitened the draws (else their own mean and sd did).
    pub whitened_by_preconditioner: bool,
    /// Seconds the check took (scores included).
    pub seconds: f64,
}

impl BiasCheck {
    /// One line in plain words, with what to try when the draws fail.
    pub fn describe(&self) -> String {
        let what = format!(
            "bias check: KSD test p = {:.3} on {} draws (every {}th of each chain; scores {})",
            self.test.p_value,
            self.test.draws,
            self.thin,
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
                "{what}: the draws do NOT fit the posterior (p < {}). Their spread or location is \
                 off even if R-hat looks fine; try control variates (gradient = \"control_variates\"), \
                 a smaller step, `sgmcmc tune`, or the default path (leave out [sampler])",
                self.level
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
    // 1. Thinning by ⌈2τ⌉, then to at most max_draws in all.
    let mut column = vec![0.0; len];
    let mut tau = 1.0f64;
    for chain in chains {
        for j in 0..d {
            column
                .iter_mut()
                .zip(chain.chunks_exact(d))
                .for_each(|(c, row)| *c = row[j]);
            let t = integrated_autocorr_time(&column);
            if t.is_finite() {
                tau = tau.max(t);
            }
        }
    }
    let total = chains.len() * len;
    let thin = ((2.0 * tau).ceil() as usize)
        .max(total.div_ceil(settings.max_draws.max(2)))
        .max(1);
    let mut draws: Vec<f64> = Vec::new();
    for chain in chains {
        // Rows thin − 1, 2·thin − 1, …: the last row of each stretch.
        for row in chain.chunks_exact(d).skip(thin - 1).step_by(thin) {
            draws.extend_from_slice(row);
        }
    }
    let n = draws.len() / d;
    if n < 2 {
        return Err(CheckError::TooFewDraws(len));
    }
    // 2. Whitening.
    let own;
    let map = match preconditioner {
        Some(p) => p,
        None => {
            let (mean, covariance) = mean_covariance(chains, d, len);
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
                let (mean, _) = mean_covariance(chains, d, 0);
                map.to_phi(&mean, &mut centre_phi);
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
    let kernel = Kernel::Imq(ImqKernel::default());
    let test = ksd_test(
        &phi,
        &scores,
        d,
        &kernel,
        &KsdTestSettings {
            bootstraps: settings.bootstraps,
            flip_probability: settings.flip_probability,
            seed,
        },
    )?;
    Ok(BiasCheck {
        passed: test.p_value >= settings.level,
        test,
        level: settings.level,
        autocorrelation_time: tau,
        thin,
        scores: kind,
        whitened_by_preconditioner: preconditioner.is_some(),
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// Pooled mean and, unless `len` is 0, covariance (divisor n − 1) of the draws.
fn mean_covariance(chains: &[&[f64]], d: usize, len: usize) -> (Vec<f64>, Vec<f64>) {
    let rows = || chains.iter().flat_map(|c| c.chunks_exact(d));
    let n = rows().count() as f64;
    let mut mean = vec![0.0; d];
    for row in rows() {
        mean.iter_mut().zip(row).for_each(|(m, x)| *m += x / n);
    }
    let mut cov = vec![0.0; if len == 0 { 0 } else { d * d }];
    if len > 0 {
        for row in rows() {
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
    }
    (mean, cov)
}
