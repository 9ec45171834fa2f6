//! The KSD goodness-of-fit test with a wild bootstrap (Chwialkowski, Strathmann & Gretton 2016,
//! "A kernel test of goodness of fit"; Liu, Lee & Jordan 2016 for independent draws): are the
//! draws distributed as the target p whose scores they carry?
//!
//! With the Stein kernel matrix H_ab = k_p(x_a, x_b) of n draws, the statistic is
//! n·V_n = (1/n)·Σ_a Σ_b H_ab (n·KSD²_V). Under p it converges to a weighted sum of χ²
//! variables; its null distribution is drawn by the wild bootstrap
//! n·B_n = (1/n)·Σ_a Σ_b W_a W_b H_ab with W_a = ±1: a Markov chain that keeps its sign with
//! probability 1 − q and flips it with probability q (q = ½: independent Rademacher signs, for
//! independent or well-thinned draws; a small q for autocorrelated draws, Chwialkowski et al.
//! §3). The p-value is (1 + #{B ≥ statistic}) / (1 + bootstraps). Cost: n² Stein-kernel values
//! (O(n²·d)) and n² per bootstrap; memory n².

use super::ksd::stein_kernel;
use super::{Kernel, SteinError, check_sample};
use crate::rng::{self, ChainRng};
use rand::RngExt;

/// Settings of the test.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct KsdTestSettings {
    /// Bootstrap replicates of the null distribution.
    pub bootstraps: usize,
    /// q: the probability that the bootstrap signs flip between consecutive draws (½:
    /// independent signs, for independent or well-thinned draws).
    pub flip_probability: f64,
    /// Seed of the bootstrap signs.
    pub seed: u64,
}

impl Default for KsdTestSettings {
    /// 1,000 bootstraps, independent signs, seed 0.
    fn default() -> Self {
        Self {
            bootstraps: 1000,
            flip_probability: 0.5,
            seed: 0,
        }
    }
}

/// The test's outcome.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct KsdTest {
    /// n·KSD²_V.
    pub statistic: f64,
    /// (1 + #{bootstrap ≥ statistic}) / (1 + bootstraps): small when the draws do not fit p.
    pub p_value: f64,
    /// Draws tested.
    pub draws: usize,
    /// Bootstrap replicates.
    pub bootstraps: usize,
    /// The sign-flip probability q used.
    pub flip_probability: f64,
}

/// The KSD goodness-of-fit test of `draws` (row-major, `dim` columns) with their `scores`
/// ∇log p under `kernel` (see the module docs). At least 2 draws; `bootstraps` ≥ 1 and q in
/// (0, 1].
pub fn ksd_test(
    draws: &[f64],
    scores: &[f64],
    dim: usize,
    kernel: &Kernel,
    settings: &KsdTestSettings,
) -> Result<KsdTest, SteinError> {
    let n = check_sample(draws, scores, dim)?;
    if n < 2 {
        return Err(SteinError::BadSetting(format!(
            "the KSD test needs at least 2 draws, got {n}"
        )));
    }
    if settings.bootstraps == 0 {
        return Err(SteinError::BadSetting(
            "the KSD test needs at least 1 bootstrap".into(),
        ));
    }
    let q = settings.flip_probability;
    if !(q > 0.0 && q <= 1.0) {
        return Err(SteinError::BadSetting(format!(
            "the bootstrap's flip probability must be in (0, 1], got {q}"
        )));
    }
    let h = stein_matrix(draws, scores, dim, kernel);
    let statistic = h.iter().sum::<f64>() / n as f64;
    let mut rng = rng::stream(settings.seed, 0);
    let mut signs = vec![0.0; n];
    let mut exceed = 0usize;
    for _ in 0..settings.bootstraps {
        draw_signs(&mut signs, q, &mut rng);
        let b: f64 = h
            .chunks_exact(n)
            .zip(&signs)
            .map(|(row, &wa)| wa * row.iter().zip(&signs).map(|(x, wb)| x * wb).sum::<f64>())
            .sum::<f64>()
            / n as f64;
        if b >= statistic {
            exceed += 1;
        }
    }
    Ok(KsdTest {
        statistic,
        p_value: (1 + exceed) as f64 / (1 + settings.bootstraps) as f64,
        draws: n,
        bootstraps: settings.bootstraps,
        flip_probability: q,
    })
}

/// H_ab = k_p(x_a, x_b), n × n row-major (symmetric: each pair computed once).
fn stein_matrix(draws: &[f64], scores: &[f64], dim: usize, kernel: &Kernel) -> Vec<f64> {
    let n = draws.len() / dim;
    fn row(m: &[f64], a: usize, dim: usize) -> &[f64] {
        &m[a * dim..(a + 1) * dim]
    }
    let mut h = vec![0.0; n * n];
    for a in 0..n {
        for b in a..n {
            let v = stein_kernel(
                kernel,
                row(draws, a, dim),
                row(draws, b, dim),
                row(scores, a, dim),
                row(scores, b, dim),
            );
            h[a * n + b] = v;
            h[b * n + a] = v;
        }
    }
    h
}

/// The wild bootstrap's signs: W₁ = ±1 with probability ½, then each keeps the last sign with
/// probability 1 − q and flips it with probability q.
fn draw_signs(signs: &mut [f64], q: f64, rng: &mut ChainRng) {
    let mut w = if rng.random::<f64>() < 0.5 { -1.0 } else { 1.0 };
    for s in signs.iter_mut() {
        *s = w;
        if rng.random::<f64>() < q {
            w = -w;
        }
    }
}
