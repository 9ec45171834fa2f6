//! The bias check (`check::bias_check`, issue 22 must-show 2): on exact but autocorrelated
//! chains its p-values are uniform (the automatic thinning and flip probability keep the
//! level), and it flags chains whose spread or location is off by the amounts a biased
//! stochastic-gradient run produces. The same with surrogate scores on a large data set.
//!
//! Checked once by breaking src/check.rs, running this file and restoring:
//! - thinning without the autocorrelation time (only down to `max_draws`, every 8th draw of
//!   ρ = 0.95 chains): `p_values_are_uniform_…` fails, KS √m·D = 3.27, 5 % rejection rate 0.18;
//! - whitening by each parameter's sd instead of the draws' covariance (the first version):
//!   `flags_wrong_spread_…` fails, draws with sds 3× too wide flagged 0 of 20 times (the IMQ
//!   kernel is flat along the target's stiff rotated direction, so the test cannot see spread
//!   there);
//! - the Stein identities' MCSE from the short thinned series alone (no floor from the full
//!   chains' τ): `stein_identities_keep_power_…` fails, a false alarm on exact chains with
//!   ρ = 0.999 (the thinned series are still autocorrelated and their own τ estimate runs
//!   low); with the material tolerance at 0.1 instead of 0.2, the same break also gave 9 false
//!   alarms of 200 in `p_values_are_uniform_…`.

use crate::common;

use common::{from_eigen, normals, random_orthogonal};
use sgmcmc::check::{BiasCheckSettings, CheckScores, bias_check};
use sgmcmc::model::GaussianModel;

const D: usize = 3;

/// N(μ, Σ) with scales 0.1, 1 and 10 along a random rotation.
fn target() -> (GaussianModel, Vec<f64>, Vec<f64>) {
    let v = random_orthogonal(5, D);
    let sigma = from_eigen(&v, &[0.01, 1.0, 100.0], D);
    let root = from_eigen(&v, &[0.1, 1.0, 10.0], D);
    let mu = vec![2.0, -1.0, 0.5];
    (GaussianModel::target(&mu, &sigma).unwrap(), mu, root)
}

/// `chains` stationary AR(1) chains of `len` draws with coefficient ρ whose marginal is
/// N(μ + shift·Σ^{1/2}·1, scale²·Σ): exact draws at shift 0, scale 1.
fn ar1_chains(
    seed: u64,
    chains: usize,
    len: usize,
    rho: f64,
    shift: f64,
    scale: f64,
) -> Vec<Vec<f64>> {
    let (_, mu, root) = target();
    let innovation = (1.0 - rho * rho).sqrt();
    (0..chains)
        .map(|c| {
            let z = normals(seed, c as u64, len * D);
            let mut state: Vec<f64> = z[..D].to_vec();
            let mut out = Vec::with_capacity(len * D);
            for t in 0..len {
                if t > 0 {
                    for j in 0..D {
                        state[j] = rho * state[j] + innovation * z[t * D + j];
                    }
                }
                for i in 0..D {
                    let x: f64 = (0..D).map(|j| root[i * D + j] * (state[j] + shift)).sum();
                    out.push(mu[i] + scale * x);
                }
            }
            out
        })
        .collect()
}

fn ks_uniform(p: &[f64]) -> f64 {
    let mut x = p.to_vec();
    x.sort_by(f64::total_cmp);
    let m = x.len() as f64;
    x.iter()
        .enumerate()
        .map(|(i, &v)| (v - i as f64 / m).abs().max(((i + 1) as f64 / m - v).abs()))
        .fold(0.0, f64::max)
        * m.sqrt()
}

/// The KSD test's p-value and the whole check's verdict for `reps` replications.
fn checks(
    reps: usize,
    (len, rho): (usize, f64),
    shift: f64,
    scale: f64,
    settings: &BiasCheckSettings,
) -> (Vec<f64>, Vec<bool>) {
    let (model, _, _) = target();
    (0..reps)
        .map(|r| {
            let chains = ar1_chains(500 + r as u64, 4, len, rho, shift, scale);
            let refs: Vec<&[f64]> = chains.iter().map(Vec::as_slice).collect();
            let check = bias_check(&model, &refs, None, None, settings, r as u64).unwrap();
            (
                check.test.as_ref().map_or(f64::NAN, |t| t.p_value),
                check.passed,
            )
        })
        .unzip()
}

fn settings() -> BiasCheckSettings {
    BiasCheckSettings {
        bootstraps: 500,
        ..BiasCheckSettings::default()
    }
}

/// 200 replications of 4 exact AR(1) chains (ρ = 0.95, τ ≈ 39) of 2,000 draws each: the KSD
/// test's p-values pass a KS test of uniformity at 1 % (√m·D < 1.63) and its 5 % rejection
/// rate is within 3 binomial sd (0.046) of 0.05; the whole check (KSD at 1 % and the Stein
/// identities) raises at most 6 false alarms (its level is ≤ 1 %; 6 is the binomial 99.5 %
/// point at 1 % of 200).
#[test]
fn p_values_are_uniform_on_exact_autocorrelated_chains() {
    let (p, passed) = checks(200, (2_000, 0.95), 0.0, 1.0, &settings());
    let ks = ks_uniform(&p);
    let rate = p.iter().filter(|&&v| v <= 0.05).count() as f64 / p.len() as f64;
    let alarms = passed.iter().filter(|ok| !**ok).count();
    eprintln!(
        "exact AR(1) chains: KS √m·D = {ks:.3}, rejection rate at 5 % = {rate:.3}, \
         false alarms of the whole check {alarms} of 200"
    );
    assert!(ks < 1.63, "KS √m·D = {ks}");
    assert!((rate - 0.05).abs() < 0.046, "rejection rate {rate}");
    assert!(alarms <= 6, "{alarms} false alarms");
}

/// Chains that mix very slowly (ρ = 0.999, τ ≈ 2,000: 4 × 20,000 draws leave the KSD test
/// fewer than 2 nearly independent draws per chain): exact ones raise no alarm in 20
/// replications, and ones with sds 2× too wide are flagged in all 20, by the Stein identities.
#[test]
fn stein_identities_keep_power_on_slowly_mixing_chains() {
    for (scale, want_flagged) in [(1.0, false), (2.0, true)] {
        let (p, passed) = checks(20, (20_000, 0.999), 0.0, scale, &settings());
        let hits = passed.iter().filter(|ok| **ok != want_flagged).count();
        eprintln!("ρ = 0.999, sd x {scale}: {hits} of 20 as expected; KSD p = {p:.3?}");
        assert_eq!(hits, 20, "sd x {scale}: {hits} of 20 as expected");
    }
}

/// Spread 3× or 20 % too wide (as an SG chain at too large a step) and location 0.3 sd off, on
/// a rotated target with scales 0.1 … 10: flagged in at least 18 of 20 replications each.
#[test]
fn flags_wrong_spread_and_location() {
    for (what, shift, scale) in [
        ("sd x 3", 0.0, 3.0),
        ("sd x 1.2", 0.0, 1.2),
        ("mean + 0.3 sd", 0.3, 1.0),
    ] {
        let (p, passed) = checks(
            20,
            (10_000, 0.9),
            shift,
            scale,
            &BiasCheckSettings::default(),
        );
        let flagged = passed.iter().filter(|ok| !**ok).count();
        eprintln!("{what}: flagged {flagged} of 20, KSD p = {p:.3?}");
        assert!(flagged >= 18, "{what}: flagged only {flagged} of 20");
    }
}

/// With N = 200,000 data points and a small exact-score budget, the scores come from the
/// control-variate surrogate: exact posterior draws still pass (p ≥ 0.01 in at least 18 of
/// 20 replications) and sds 1.2× too wide are still flagged in 18 of 20.
#[test]
fn surrogate_scores_keep_level_and_power() {
    use sgmcmc::data::{Features, Matrix};
    let n = 200_000;
    // x_i ~ N(0, I) in D = 3, likelihood N(θ, I), flat prior: posterior N(x̄, I/N).
    let x = normals(77, 0, n * D);
    let data = Features::F64(Matrix::from_vec(x.clone(), n, D).unwrap());
    let eye: Vec<f64> = (0..D * D)
        .map(|k| if k / D == k % D { 1.0 } else { 0.0 })
        .collect();
    let model = GaussianModel::new(data, &eye, f64::INFINITY).unwrap();
    let mean: Vec<f64> = (0..D)
        .map(|j| x.iter().skip(j).step_by(D).sum::<f64>() / n as f64)
        .collect();
    let sd = 1.0 / (n as f64).sqrt();
    let settings = BiasCheckSettings {
        bootstraps: 500,
        exact_score_budget: 1e6,
        surrogate_size: 5_000,
        ..BiasCheckSettings::default()
    };
    for (scale, want_flagged) in [(1.0, false), (1.2, true)] {
        let mut hits = 0;
        for r in 0..20u64 {
            let chains: Vec<Vec<f64>> = (0..4)
                .map(|c| {
                    normals(900 + r, c, 500 * D)
                        .chunks_exact(D)
                        .flat_map(|z| {
                            (0..D)
                                .map(|j| mean[j] + scale * sd * z[j])
                                .collect::<Vec<_>>()
                        })
                        .collect()
                })
                .collect();
            let refs: Vec<&[f64]> = chains.iter().map(Vec::as_slice).collect();
            let check = bias_check(&model, &refs, None, Some(&mean), &settings, r).unwrap();
            assert_eq!(check.scores, CheckScores::Surrogate { points: 5_000 });
            if check.passed != want_flagged {
                hits += 1;
            }
        }
        eprintln!("surrogate scores, sd x {scale}: {hits} of 20 as expected");
        assert!(hits >= 18, "sd x {scale}: {hits} of 20 as expected");
    }
}
