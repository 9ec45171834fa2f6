//! Coreset MCMC core (reference §7.1–7.3, §7.7b, §7.8, §7.11–7.12): the weight-gradient
//! estimator against the closed-form KL gradient (must-show 1) and a loop implementation, the
//! exact Gaussian kernel, the streaming z-score, the coreset construction and the loop.
//!
//! Break-once checks (each made the named test fail, then was restored):
//! - dividing ĝ by K instead of K − 1: `estimator_is_unbiased_for_the_kl_gradient` (means off
//!   by a factor 2, z ≈ 40);
//! - the AR(1) kernel with √(1 − β)·s_w replaced by (1 − β)·s_w: `exact_kernel_is_invariant`
//!   (variance 0.33·s_w²);
//! - the metric window as all draws instead of the last half: `streaming_metric_matches_brute_force`.
//! - the z-score as (μⱼ − μ̂ⱼ)/σⱼ, sign flipped: `streaming_metric_matches_brute_force` (z[0] −995
//!   against +995).

use crate::common;

use sgmcmc::coreset::{
    Adam, Coreset, CoresetKernel, CoresetPosterior, CoresetSettings, ExactGaussianKernel, HotDog,
    HotStartSettings, SubsampleScheme, WeightGradient, ZScoreTracker, run_coreset_mcmc,
};
use sgmcmc::data::{Features, Matrix};
use sgmcmc::model::{DataIndex, GaussianModel};
use sgmcmc::rng::{ChainRng, fill_standard_normal, stream};

/// The Gaussian location model of reference §7.9 with Σ = I and prior N(0, I): data N × d.
fn location_model(seed: u64, n: usize, d: usize) -> (GaussianModel, Vec<f64>) {
    let x = common::normals(seed, 0, n * d);
    let identity: Vec<f64> = (0..d * d)
        .map(|k| if k / d == k % d { 1.0 } else { 0.0 })
        .collect();
    let features = Features::F64(Matrix::from_vec(x.clone(), n, d).unwrap());
    (GaussianModel::new(features, &identity, 1.0).unwrap(), x)
}

/// π_w = N(μ_w, I/(1 + W)) of the location model.
fn coreset_posterior(x: &[f64], d: usize, points: &[DataIndex], w: &[f64]) -> (Vec<f64>, f64) {
    let total: f64 = w.iter().sum();
    let mut mu = vec![0.0; d];
    for (&p, &wm) in points.iter().zip(w) {
        for j in 0..d {
            mu[j] += wm * x[p as usize * d + j];
        }
    }
    mu.iter_mut().for_each(|m| *m /= 1.0 + total);
    (mu, 1.0 / (1.0 + total))
}

/// ∂KL(π_w ‖ π)/∂w_m of reference §7.11.
fn kl_gradient(x: &[f64], n: usize, d: usize, points: &[DataIndex], w: &[f64]) -> Vec<f64> {
    let total: f64 = w.iter().sum();
    let (mu_w, _) = coreset_posterior(x, d, points, w);
    let mut mu = vec![0.0; d];
    for row in x.chunks_exact(d) {
        for j in 0..d {
            mu[j] += row[j] / (1.0 + n as f64);
        }
    }
    let (nn, dd) = (n as f64, d as f64);
    points
        .iter()
        .map(|&p| {
            let xm = &x[p as usize * d..(p as usize + 1) * d];
            let dot: f64 = (0..d).map(|j| (mu_w[j] - mu[j]) * (xm[j] - mu_w[j])).sum();
            0.5 * (-dd * (1.0 + nn) / (1.0 + total).powi(2)
                + dd / (1.0 + total)
                + 2.0 * (1.0 + nn) * dot / (1.0 + total))
        })
        .collect()
}

fn exact_draw(mu: &[f64], var: f64, rng: &mut ChainRng) -> Vec<f64> {
    let mut z = vec![0.0; mu.len()];
    fill_standard_normal(rng, &mut z);
    mu.iter().zip(&z).map(|(m, e)| m + var.sqrt() * e).collect()
}

/// Reference §7.11: d = 3, N = 200, M = 10, weights in [5, 30]; the mean of ĝ over 4·10⁵
/// replicates (K = 2 exact draws, a fresh uniform subsample with S = M) equals the analytic
/// gradient within 4 Monte Carlo standard errors, coordinate by coordinate.
#[test]
fn estimator_is_unbiased_for_the_kl_gradient() {
    let (n, d, m) = (200, 3, 10);
    let (model, x) = location_model(3, n, d);
    let mut rng = stream(3, 5);
    let coreset = Coreset::uniform(n, m, &mut rng).unwrap();
    let weights: Vec<f64> = (0..m)
        .map(|_| common::uniform(&mut rng, 5.0, 30.0))
        .collect();
    let want = kl_gradient(&x, n, d, &coreset.points, &weights);
    let (mu_w, var) = coreset_posterior(&x, d, &coreset.points, &weights);
    let mut estimator = WeightGradient::new(n, m, SubsampleScheme::Uniform).unwrap();
    let replicates = 400_000;
    let (mut sum, mut sum_sq) = (vec![0.0; m], vec![0.0; m]);
    let mut g = vec![0.0; m];
    for _ in 0..replicates {
        let a = exact_draw(&mu_w, var, &mut rng);
        let b = exact_draw(&mu_w, var, &mut rng);
        let states = [a.as_slice(), b.as_slice()];
        estimator.estimate(
            &model,
            &coreset.points,
            &weights,
            states.into_iter(),
            &mut rng,
            &mut g,
        );
        for i in 0..m {
            sum[i] += g[i];
            sum_sq[i] += g[i] * g[i];
        }
    }
    let r = replicates as f64;
    for i in 0..m {
        let mean = sum[i] / r;
        let se = ((sum_sq[i] / r - mean * mean) / r).sqrt();
        let z = (mean - want[i]) / se;
        assert!(
            z.abs() < 4.0,
            "coordinate {i}: mean ĝ = {mean:.5}, analytic {:.5}, z = {z:.2}",
            want[i]
        );
    }
}

/// The matrix form equals a loop over Eq. 4 (reference §7.12 item 1), for K = 3 and the
/// cyclic scan (whose subsample the loop can reproduce).
#[test]
fn matrix_form_equals_the_loop_over_eq4() {
    let (n, d, m, s) = (50, 2, 6, 8);
    let (model, x) = location_model(4, n, d);
    let mut rng = stream(4, 1);
    let coreset = Coreset::uniform(n, m, &mut rng).unwrap();
    let weights: Vec<f64> = (0..m)
        .map(|_| common::uniform(&mut rng, 1.0, 20.0))
        .collect();
    let states: Vec<Vec<f64>> = (0..3).map(|c| common::normals(4, 10 + c, d)).collect();
    let mut estimator = WeightGradient::new(n, s, SubsampleScheme::CyclicScan).unwrap();
    let lik = |i: usize, theta: &[f64]| -> f64 {
        -0.5 * (0..d)
            .map(|j| (x[i * d + j] - theta[j]).powi(2))
            .sum::<f64>()
    };
    let mut g = vec![0.0; m];
    // Three calls: blocks 0..8, 8..16, 16..24 of the scan (N = 50).
    for call in 0..3 {
        estimator.estimate(
            &model,
            &coreset.points,
            &weights,
            states.iter().map(Vec::as_slice),
            &mut rng,
            &mut g,
        );
        let k = states.len() as f64;
        let subsample: Vec<usize> = (call * s..(call + 1) * s).collect();
        let centred = |f: &dyn Fn(&[f64]) -> f64| -> Vec<f64> {
            let v: Vec<f64> = states.iter().map(|t| f(t)).collect();
            let mean = v.iter().sum::<f64>() / k;
            v.iter().map(|a| a - mean).collect()
        };
        let full =
            centred(&|t| n as f64 / s as f64 * subsample.iter().map(|&i| lik(i, t)).sum::<f64>());
        let coreset_lik: Vec<Vec<f64>> = coreset
            .points
            .iter()
            .map(|&p| centred(&|t| lik(p as usize, t)))
            .collect();
        for mi in 0..m {
            let want: f64 = (0..states.len())
                .map(|c| {
                    let weighted: f64 = (0..m).map(|j| weights[j] * coreset_lik[j][c]).sum();
                    coreset_lik[mi][c] * (weighted - full[c])
                })
                .sum::<f64>()
                / (k - 1.0);
            assert!(
                (g[mi] - want).abs() <= 1e-12 * want.abs().max(1.0),
                "call {call}, m = {mi}: {} vs {want}",
                g[mi]
            );
        }
    }
}

/// The cyclic scan wraps at N as the reference does: with N = 10, S = 4 the blocks are
/// 0..4, 4..8, {8, 9, 0, 1}, 2..6, 6..10. The Gaussian ℓᵢ(θ) = −½(xᵢ − θ)² with xᵢ = i,
/// centred over the chains θ = ±1, is i·θ, so ĝ reveals the subsample's sum.
#[test]
fn cyclic_scan_wraps_like_the_reference() {
    let (n, s) = (10, 4);
    let x: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let features = Features::F64(Matrix::from_vec(x, n, 1).unwrap());
    let model = GaussianModel::new(features, &[1.0], 1.0).unwrap();
    let weights = [0.0];
    let mut rng = stream(1, 1);
    let mut g = [0.0];
    let points: Vec<DataIndex> = vec![1];
    let mut estimator = WeightGradient::new(n, s, SubsampleScheme::CyclicScan).unwrap();
    let mut seen = Vec::new();
    for _ in 0..5 {
        let a = [1.0];
        let b = [-1.0];
        estimator.estimate(
            &model,
            &points,
            &weights,
            [&a[..], &b[..]].into_iter(),
            &mut rng,
            &mut g,
        );
        // G = (x₁θₖ centred) = (1, −1); c = (N/S)·Σ sθₖ = ±2.5·Σs; ĝ = Σₖ Gₖ(0 − cₖ)/1 = −5·Σs.
        seen.push((-g[0] / 5.0).round() as i64);
    }
    let blocks: [&[i64]; 5] = [
        &[0, 1, 2, 3],
        &[4, 5, 6, 7],
        &[8, 9, 0, 1],
        &[2, 3, 4, 5],
        &[6, 7, 8, 9],
    ];
    let want: Vec<i64> = blocks.iter().map(|b| b.iter().sum()).collect();
    assert_eq!(seen, want);
}

/// The exact kernel (reference §7.12 item 5): stationary law N(μ_w, s_w²I) and lag-1
/// autocorrelation √0.8 ± 0.01.
#[test]
fn exact_kernel_is_invariant() {
    let (n, d, m) = (1000, 3, 20);
    let (model, x) = location_model(6, n, d);
    let mut rng = stream(6, 1);
    let coreset = Coreset::uniform(n, m, &mut rng).unwrap();
    let weights: Vec<f64> = (0..m)
        .map(|_| common::uniform(&mut rng, 10.0, 90.0))
        .collect();
    let (mu, var) = coreset_posterior(&x, d, &coreset.points, &weights);
    let (rows, prior_variance) = model.identity_location_rows(&coreset.points).unwrap();
    let start = exact_draw(&mu, var, &mut rng);
    let mut kernel = ExactGaussianKernel::new(
        rows,
        prior_variance,
        ExactGaussianKernel::DEFAULT_BETA,
        start,
    )
    .unwrap();
    let target = CoresetPosterior {
        model: &model,
        points: &coreset.points,
        weights: &weights,
    };
    let steps = 200_000;
    let mut trace = vec![Vec::with_capacity(steps); d];
    for _ in 0..steps {
        kernel.step(&target, &mut rng).unwrap();
        for (t, &v) in trace.iter_mut().zip(kernel.position()) {
            t.push(v);
        }
    }
    for j in 0..d {
        let t = &trace[j];
        let mean = t.iter().sum::<f64>() / steps as f64;
        let v = t.iter().map(|a| (a - mean).powi(2)).sum::<f64>() / steps as f64;
        let rho = t
            .windows(2)
            .map(|p| (p[0] - mean) * (p[1] - mean))
            .sum::<f64>()
            / (steps as f64 * v);
        // MCSE of the mean for an AR(1) with ρ = √0.8: sd·√((1 + ρ)/(1 − ρ)/n).
        let r = 0.8f64.sqrt();
        let mcse = (var * (1.0 + r) / (1.0 - r) / steps as f64).sqrt();
        assert!(
            (mean - mu[j]).abs() < 4.0 * mcse,
            "mean[{j}] {mean} vs {}",
            mu[j]
        );
        assert!((v / var - 1.0).abs() < 0.03, "variance[{j}] {v} vs {var}");
        assert!((rho - r).abs() < 0.01, "lag-1 autocorrelation[{j}] {rho}");
    }
}

/// Reference §7.12 item 7: the streaming window mean equals the brute-force mean of the last
/// ⌊t/2⌋ draws at every iteration, to 1e-12 relative, for K = 2 and K = 4; so do the metric and
/// each coordinate's z-score.
#[test]
fn streaming_metric_matches_brute_force() {
    for k in [2usize, 4] {
        let d = 3;
        let mean = vec![0.5, -1.0, 2.0];
        let sd = vec![0.1, 0.2, 0.3];
        let mut tracker = ZScoreTracker::new(mean.clone(), &sd).unwrap();
        let draws = common::normals(7, k as u64, 600 * k * d);
        let mut got = vec![0.0; d];
        for i in 0..600 {
            for c in 0..k {
                let at = (i * k + c) * d;
                // Offset the draws so that cancellation would show.
                let theta: Vec<f64> = draws[at..at + d].iter().map(|v| v + 100.0).collect();
                tracker.push(&theta);
            }
            let t = (i + 1) * k;
            let first = t - t / 2;
            let mut want = vec![0.0; d];
            for draw in first..t {
                for j in 0..d {
                    want[j] += draws[draw * d + j] + 100.0;
                }
            }
            want.iter_mut().for_each(|w| *w /= (t / 2) as f64);
            tracker.window_mean(&mut got);
            for j in 0..d {
                assert!(
                    (got[j] - want[j]).abs() <= 1e-12 * want[j].abs(),
                    "K = {k}, iteration {i}, coordinate {j}: {} vs {}",
                    got[j],
                    want[j]
                );
            }
            let metric: f64 = (0..d)
                .map(|j| ((mean[j] - want[j]) / sd[j]).powi(2))
                .sum::<f64>()
                / d as f64;
            assert!((tracker.metric() - metric).abs() <= 1e-9 * metric);
            // The z-scores carry their sign: μ̂ⱼ above μⱼ is positive.
            let z = tracker.z_scores();
            for j in 0..d {
                let want_z = (want[j] - mean[j]) / sd[j];
                assert!(
                    (z[j] - want_z).abs() <= 1e-9 * want_z.abs(),
                    "z[{j}] {} vs {want_z}",
                    z[j]
                );
            }
        }
    }
}

#[test]
fn construction_uniform_and_stratified() {
    let mut rng = stream(8, 0);
    let c = Coreset::uniform(100, 30, &mut rng).unwrap();
    assert_eq!(c.len(), 30);
    let mut p = c.points.clone();
    p.dedup();
    assert_eq!(p.len(), 30, "points are distinct");
    assert!(c.weights.iter().all(|w| (*w - 100.0 / 30.0).abs() < 1e-12));
    // 8 positives among 100: M = 10 takes 5 positives and 5 negatives; M = 20 all 8 positives.
    let labels: Vec<f64> = (0..100).map(|i| f64::from(i % 14 == 0)).collect();
    for (m, want_pos) in [(10, 5), (20, 8), (11, 6)] {
        let c = Coreset::stratified(&labels, m, &mut rng).unwrap();
        let pos = c
            .points
            .iter()
            .filter(|&&i| labels[i as usize] > 0.5)
            .count();
        assert_eq!((c.len(), pos), (m, want_pos), "M = {m}");
    }
    let e = Coreset::uniform(10, 11, &mut rng).unwrap_err().to_string();
    assert!(e.contains("coreset size 11 exceeds the 10"), "{e}");
    let e = Coreset::uniform(10, 0, &mut rng).unwrap_err().to_string();
    assert!(e.contains("at least 1"), "{e}");
    let e = WeightGradient::new(10, 11, SubsampleScheme::Uniform)
        .unwrap_err()
        .to_string();
    assert!(e.contains("subsample size S = 11"), "{e}");
}

fn settings(train: usize) -> CoresetSettings {
    CoresetSettings {
        train_iterations: train,
        draws: 0,
        subsample: 100,
        scheme: SubsampleScheme::Uniform,
        newton_correction: false,
        hot_start: HotStartSettings::default(),
        record_every: 100,
    }
}

#[allow(clippy::too_many_arguments)]
fn location_run(
    model: &GaussianModel,
    x: &[f64],
    n: usize,
    d: usize,
    m: usize,
    optimiser: &mut dyn sgmcmc::coreset::WeightOptimiser,
    settings: &CoresetSettings,
    seed: u64,
) -> sgmcmc::coreset::CoresetRun {
    let mut rng = stream(seed, 99);
    let coreset = Coreset::uniform(n, m, &mut rng).unwrap();
    let (mu_w, var) = coreset_posterior(x, d, &coreset.points, &coreset.weights);
    let mut kernels: Vec<Box<dyn CoresetKernel>> = (0..2)
        .map(|_| {
            let (rows, pv) = model.identity_location_rows(&coreset.points).unwrap();
            Box::new(
                ExactGaussianKernel::new(rows, pv, 0.8, exact_draw(&mu_w, var, &mut rng)).unwrap(),
            ) as Box<dyn CoresetKernel>
        })
        .collect();
    let full_var = 1.0 / (1.0 + n as f64);
    let full_mean: Vec<f64> = (0..d)
        .map(|j| x.chunks_exact(d).map(|r| r[j]).sum::<f64>() * full_var)
        .collect();
    let mut tracker = ZScoreTracker::new(full_mean, &vec![full_var.sqrt(); d]).unwrap();
    run_coreset_mcmc(
        model,
        coreset,
        &mut kernels,
        optimiser,
        settings,
        seed,
        Some(&mut tracker),
        None,
        None,
    )
    .unwrap()
}

/// End to end on the Gaussian location model (N = 2,000, d = 5, M = 100): training with Hot DoG
/// lowers the final z-score metric well below the untrained coreset's (w = N/M throughout), the
/// hot-start test passes before the cap, and the weights stay ≥ 0.
#[test]
fn training_beats_the_untrained_coreset() {
    let (n, d, m) = (2000, 5, 100);
    let (model, x) = location_model(9, n, d);
    let train = 20_000;
    // Untrained: no optimisation iterations, the same number of draws.
    let untrained = CoresetSettings {
        draws: 2 * train,
        ..settings(0)
    };
    let mut unused = Adam::new(m, 1.0).unwrap();
    let base = location_run(&model, &x, n, d, m, &mut unused, &untrained, 1);
    let mut rng = stream(1, 99);
    let w0 = Coreset::uniform(n, m, &mut rng).unwrap().weights;
    let mut hot_dog = HotDog::new(&w0, HotDog::DEFAULT_R).unwrap();
    let trained = location_run(&model, &x, n, d, m, &mut hot_dog, &settings(train), 1);
    let last = |r: &sgmcmc::coreset::CoresetRun| r.metric.last().unwrap().1;
    assert!(
        trained.hot_start_passed,
        "hot start at {:?}",
        trained.hot_start_iteration
    );
    assert!(trained.hot_start_iteration.unwrap() < 10_000);
    assert!(trained.coreset.weights.iter().all(|w| *w >= 0.0));
    assert!(
        last(&trained) < 0.2 * last(&base),
        "trained {} vs untrained {}",
        last(&trained),
        last(&base)
    );
    assert_eq!(trained.iterations, train + 1);
}
