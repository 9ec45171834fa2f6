//! Coreset weight optimisers and the hot-start test (reference §7.4–7.6, §7.12 must-show 2).
//!
//! Break-once: the paper's d correction 1 − β₁^(c−1) replaced by the reference's 1 − β₁ᶜ in
//! the default form made w₂ = 4.99865… (the reference column) and failed the paper-form trace.

use sgmcmc::coreset::{Adam, HotDog, WeightOptimiser, hot_start_passes, hot_start_statistic};
use sgmcmc::rng::stream;
use sgmcmc::sampler::standard_normal;

const GRADIENTS: [[f64; 3]; 3] = [[1.0, -2.0, 3.0], [0.5, 0.5, -1.0], [-1.0, 1.0, 2.0]];

fn trace(mut optimiser: impl WeightOptimiser) -> Vec<[f64; 3]> {
    let mut w = [5.0, 5.0, 0.0005];
    GRADIENTS
        .iter()
        .map(|g| {
            optimiser.step(&mut w, g);
            w
        })
        .collect()
}

fn assert_trace(got: &[[f64; 3]], want: &[[f64; 3]], what: &str) {
    for (step, (g, w)) in got.iter().zip(want).enumerate() {
        for k in 0..3 {
            assert!(
                (g[k] - w[k]).abs() < 1e-9,
                "{what}: w_{}[{k}] = {:.10}, expected {:.10}",
                step + 1,
                g[k],
                w[k]
            );
        }
    }
}

/// The golden trace of reference §7.4 (computed by hand from Algorithm 2): r = 1e-3,
/// w₀ = (5, 5, 0.0005), three gradients, projection at 0, in the paper's form and the
/// reference code's d correction.
#[test]
fn hot_dog_first_steps_match_the_hand_trace() {
    let w0 = [5.0, 5.0, 0.0005];
    let paper = trace(HotDog::new(&w0, 1e-3).unwrap());
    assert_trace(
        &paper,
        &[
            [4.999, 5.001, 0.0],
            [4.9983408495, 5.0013319641, 0.0],
            [4.9982546995, 5.0013641346, 0.0],
        ],
        "paper form",
    );
    let reference = trace(
        HotDog::new(&w0, 1e-3)
            .unwrap()
            .with_reference_d_correction(),
    );
    assert_trace(
        &reference,
        &[
            [4.999, 5.001, 0.0],
            [4.9986530787, 5.0011747180, 0.0],
            [4.9986000475, 5.0011956839, 0.0],
        ],
        "reference form",
    );
    assert!(HotDog::new(&w0, 0.0).is_err());
    assert!(HotDog::new(&w0, f64::NAN).is_err());
}

/// ADAM with γ_τ = α₀/√τ: the first step moves each coordinate by α₀ against the gradient's
/// sign (m̂/√v̂ = sign ĝ), the second by α₀/√2 times m̂₂/√v̂₂, and the projection holds w ≥ 0.
#[test]
fn adam_steps_and_projects() {
    let mut adam = Adam::new(3, 0.1).unwrap();
    let mut w = [5.0, 5.0, 0.05];
    adam.step(&mut w, &GRADIENTS[0]);
    assert!(
        (w[0] - 4.9).abs() < 1e-8 && (w[1] - 5.1).abs() < 1e-8 && w[2] == 0.0,
        "{w:?}"
    );
    let w1 = w[0];
    adam.step(&mut w, &GRADIENTS[1]);
    let m = 0.9 * 0.1 * 1.0 + 0.1 * 0.5;
    let v = 0.999 * 0.001 * 1.0 + 0.001 * 0.25;
    let step = 0.1 / 2f64.sqrt() * (m / 0.19) / ((v / (1.0 - 0.999f64.powi(2))).sqrt() + 1e-8);
    assert!(
        (w[0] - (w1 - step)).abs() < 1e-12,
        "{} vs {}",
        w[0],
        w1 - step
    );
    assert!(Adam::new(3, -1.0).is_err());
}

fn noisy(len: usize, slope: f64, seed: u64) -> Vec<f64> {
    let mut rng = stream(seed, 0);
    (0..len)
        .map(|i| -1.0e5 + slope * i as f64 + standard_normal(&mut rng))
        .collect()
}

/// Algorithm 3: stationary traces (white noise about −10⁵) pass, trending ones fail, short
/// traces cannot be judged, and a constant trace passes (u = 0).
#[test]
fn hot_start_passes_stationary_and_fails_trending_traces() {
    for seed in 0..20 {
        let (a, b) = (noisy(300, 0.0, 2 * seed), noisy(300, 0.0, 2 * seed + 1));
        assert!(
            hot_start_passes(&[&a, &b], 0.5),
            "stationary, seed {seed}: u = {:?}, {:?}",
            hot_start_statistic(&a),
            hot_start_statistic(&b)
        );
        let (c, d) = (noisy(300, 0.1, 2 * seed), noisy(300, 0.1, 2 * seed + 1));
        assert!(
            !hot_start_passes(&[&c, &d], 0.5),
            "trending, seed {seed}: u = {:?}",
            hot_start_statistic(&c)
        );
    }
    // The means of the last two thirds differ by slope·s = 0.1·100 = 10 residual sds.
    let u = hot_start_statistic(&noisy(300, 0.1, 7)).unwrap();
    assert!((7.0..13.0).contains(&u), "u = {u}");
    assert_eq!(hot_start_statistic(&[1.0; 8]), Some(0.0));
    assert_eq!(hot_start_statistic(&[1.0, 2.0, 3.0, 4.0, 5.0]), None);
    assert!(!hot_start_passes(&[&[1.0; 5]], 0.5));
}
