//! Coreset weight optimisers and the hot-start test (reference §7.4–7.6, §7.12 must-show 2).
//!
//! Break-once: the paper's d correction 1 − β₁^(c−1) replaced by the reference's 1 − β₁ᶜ in
//! the default form made w₂ = 4.99865… (the reference column) and failed the paper-form trace.

use sgmcmc::coreset::{
    Adam, DAdaptSgd, Dog, Dowg, HotDog, OptimiserError, Prodigy, WeightOptimiser, hot_start_passes,
    hot_start_statistic,
};
use sgmcmc::rng::stream;
use sgmcmc::sampler::standard_normal;

const GRADIENTS: [[f64; 3]; 3] = [[1.0, -2.0, 3.0], [0.5, 0.5, -1.0], [-1.0, 1.0, 2.0]];

fn trace(mut optimiser: impl WeightOptimiser) -> Vec<[f64; 3]> {
    let mut w = [5.0, 5.0, 0.0005];
    GRADIENTS
        .iter()
        .map(|g| {
            optimiser.step(&mut w, g).unwrap();
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
    adam.step(&mut w, &GRADIENTS[0]).unwrap();
    assert!(
        (w[0] - 4.9).abs() < 1e-8 && (w[1] - 5.1).abs() < 1e-8 && w[2] == 0.0,
        "{w:?}"
    );
    let w1 = w[0];
    adam.step(&mut w, &GRADIENTS[1]).unwrap();
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

// The baselines of reference §7.6: DoG, DoWG, prodigy ADAM and D-Adaptation SGD.

/// Start of the hand traces below. w₀[2] = 0 with positive gradients in that coordinate, so the
/// projection at 0 acts at every step.
const W0: [f64; 3] = [2.0, 2.0, 0.0];
/// ‖ĝ₁‖ = 5, ‖ĝ₂‖ = ‖ĝ₃‖ = 3.
const HAND: [[f64; 3]; 3] = [[0.0, 3.0, 4.0], [1.0, 2.0, 2.0], [2.0, -1.0, 2.0]];

/// The weights after each step from w₀ = `W0`.
fn run(optimiser: &mut impl WeightOptimiser, gradients: &[[f64; 3]]) -> Vec<[f64; 3]> {
    let mut w = W0;
    gradients
        .iter()
        .map(|g| {
            optimiser.step(&mut w, g).unwrap();
            w
        })
        .collect()
}

/// ‖w − w₀‖₂.
fn distance_from_start(w: [f64; 3]) -> f64 {
    w.iter()
        .zip(W0)
        .map(|(a, b)| (a - b) * (a - b))
        .sum::<f64>()
        .sqrt()
}

/// DoG, γ_τ = r_τ/√(Σ‖ĝ_i‖²), by hand. The projection shortens the first move to 0.6 < r, so
/// r₂ = 0.6 shows that r left the running maximum.
///
/// Break-once: keeping r in the maximum (max_distance started at r) gave r₂ = 1 and failed at
/// w₂[0] = 1.8285 against the expected 1.8971.
#[test]
fn dog_first_steps_match_the_hand_trace() {
    let got = run(&mut Dog::new(&W0, 1.0).unwrap(), &HAND);
    // τ = 1: r₁ = r = 1, γ₁ = 1/√25 = 0.2, w₁ = (2, 2 − 0.6, max(0, −0.8)).
    let w1 = [2.0, 1.4, 0.0];
    assert!((distance_from_start(w1) - 0.6).abs() < 1e-15);
    // τ = 2: r₂ = ‖w₁ − w₀‖ = 0.6, γ₂ = 0.6/√(25 + 9).
    let gamma2 = 0.6 / 34f64.sqrt();
    let w2 = [2.0 - gamma2, 1.4 - 2.0 * gamma2, 0.0];
    // τ = 3: ‖w₂ − w₀‖² = γ₂² + (0.6 + 2γ₂)², r₃ = max(0.6, ‖w₂ − w₀‖), γ₃ = r₃/√(34 + 9).
    let r3 = (gamma2 * gamma2 + (0.6 + 2.0 * gamma2).powi(2))
        .sqrt()
        .max(0.6);
    let gamma3 = r3 / 43f64.sqrt();
    let w3 = [w2[0] - 2.0 * gamma3, w2[1] + gamma3, 0.0];
    assert_trace(&got, &[w1, w2, w3], "DoG");
}

/// DoWG, γ_τ = r_τ²/√(Σ r_i²‖ĝ_i‖²), by hand in the paper's form (r₂ = 0.6 after the projected
/// first step) and with `with_r0_in_max` (r_τ = max(r, ·) = 1 throughout here), which takes the
/// larger second and third steps, as the reference's r̄ = max(r̄, ‖w − w₀‖) from r̄ = r does.
///
/// Break-once: ignoring the compatibility flag (r_τ from the paper form in both) failed the
/// compatibility trace at w₂[0] = 1.9323 against the expected 1.8285.
#[test]
fn dowg_first_steps_match_the_hand_trace_in_both_forms() {
    let paper = run(&mut Dowg::new(&W0, 1.0).unwrap(), &HAND);
    // τ = 1: γ₁ = 1²/√(1²·25) = 0.2, w₁ = (2, 1.4, 0) as for DoG.
    let w1 = [2.0, 1.4, 0.0];
    // τ = 2: r₂ = 0.6, Σ = 25 + 0.36·9, γ₂ = 0.36/√Σ.
    let sum2: f64 = 25.0 + 0.36 * 9.0;
    let gamma2 = 0.36 / sum2.sqrt();
    let w2 = [2.0 - gamma2, 1.4 - 2.0 * gamma2, 0.0];
    // τ = 3: r₃ = max(0.6, ‖w₂ − w₀‖), Σ += r₃²·9, γ₃ = r₃²/√Σ.
    let r3 = (gamma2 * gamma2 + (0.6 + 2.0 * gamma2).powi(2))
        .sqrt()
        .max(0.6);
    let gamma3 = r3 * r3 / (sum2 + r3 * r3 * 9.0).sqrt();
    let w3 = [w2[0] - 2.0 * gamma3, w2[1] + gamma3, 0.0];
    assert_trace(&paper, &[w1, w2, w3], "DoWG, paper form");

    let compat = run(&mut Dowg::new(&W0, 1.0).unwrap().with_r0_in_max(), &HAND);
    // τ = 2: r₂ = max(1, 0.6) = 1, γ₂ = 1/√(25 + 9).
    let gamma2 = 1.0 / 34f64.sqrt();
    let w2 = [2.0 - gamma2, 1.4 - 2.0 * gamma2, 0.0];
    // τ = 3: ‖w₂ − w₀‖ < 1, so r₃ = 1 and γ₃ = 1/√43.
    let d2 = (gamma2 * gamma2 + (0.6 + 2.0 * gamma2).powi(2)).sqrt();
    assert!(d2 < 1.0, "‖w₂ − w₀‖ = {d2}");
    let gamma3 = 1.0 / 43f64.sqrt();
    let w3 = [w2[0] - 2.0 * gamma3, w2[1] + gamma3, 0.0];
    assert_trace(&compat, &[w1, w2, w3], "DoWG, r in the maximum");
    assert!(
        paper[1][0] - compat[1][0] > 0.05,
        "r₀ in the max takes a larger second step"
    );
}

/// Prodigy ADAM by hand (d₀ = 0.1 so the steps are visible; gradients aligned so d grows at the
/// second step): the recursion of reference §7.6 with α₁ = 1, α₂ = ½(1 + cos(π/100)),
/// α₃ = ½(1 + cos(2π/100)), no bias correction, and the step taken with d before its update.
///
/// Break-once: stepping with the updated d instead of d_old failed at w₂[0] (1.1079 against
/// 1.2589); dropping the α factor from r_p and s failed at w₃[0] (0.63965 against 0.63970).
#[test]
fn prodigy_first_steps_match_the_hand_trace() {
    let gradients = [[1.0, 1.0, 1.0], [1.0, 2.0, 1.0], [2.0, 1.0, 1.0]];
    let d0 = 0.1;
    let mut prodigy = Prodigy::new(&W0, d0).unwrap();
    let mut w = W0;
    let mut trace = Vec::new();
    let mut ds = Vec::new();
    for g in &gradients {
        prodigy.step(&mut w, g).unwrap();
        trace.push(w);
        ds.push(prodigy.d());
    }
    let (b1, b2, eps) = (0.9, 0.999f64, 1e-8);
    let c = 1.0 - b2.sqrt();
    let pi = std::f64::consts::PI;
    // τ = 1, α = 1, ĝ₁ = 1: m = (1 − β₁)·d₀ = 0.1·d₀ and v = (1 − β₂)·d₀² in every coordinate,
    // r_p = 0 (w = w₀), so d stays d₀; every coordinate moves 0.1·d₀²/(√0.001·d₀ + d₀·ε).
    let step1 = d0 * 0.1 * d0 / (0.001f64.sqrt() * d0 + d0 * eps);
    let w1 = [2.0 - step1, 2.0 - step1, 0.0];
    // τ = 2, ĝ₂ = (1, 2, 1): m = d₀·(0.09 + 0.1ĝ), v = d₀²·(0.999·0.001 + 0.001ĝ²);
    // r_p = c·α₂·d₀²·ĝ₂ᵀ(w₀ − w₁) = c·α₂·d₀²·3·step1; ‖s‖₁ = c·d₀²·(√β₂·3 + α₂·4).
    let a2 = 0.5 * (1.0 + (pi / 100.0).cos());
    let m2 = [0.19 * d0, 0.29 * d0, 0.19 * d0];
    let v2 = [
        (0.000999 + 0.001) * d0 * d0,
        (0.000999 + 0.004) * d0 * d0,
        (0.000999 + 0.001) * d0 * d0,
    ];
    let rp2 = c * a2 * d0 * d0 * 3.0 * step1;
    let s2 = [
        c * d0 * d0 * (b2.sqrt() + a2),
        c * d0 * d0 * (b2.sqrt() + 2.0 * a2),
        c * d0 * d0 * (b2.sqrt() + a2),
    ];
    let d2 = d0.max(rp2 / (s2[0] + s2[1] + s2[2]));
    assert!(d2 > 1.3 * d0, "the example must make d grow: d₂ = {d2}");
    let w2 = [
        w1[0] - a2 * d0 * m2[0] / (v2[0].sqrt() + d0 * eps),
        w1[1] - a2 * d0 * m2[1] / (v2[1].sqrt() + d0 * eps),
        0.0,
    ];
    // τ = 3, ĝ₃ = (2, 1, 1), now with d = d₂.
    let a3 = 0.5 * (1.0 + (2.0 * pi / 100.0).cos());
    let g3 = gradients[2];
    let m3: [f64; 3] = std::array::from_fn(|k| b1 * m2[k] + (1.0 - b1) * d2 * g3[k]);
    let v3: [f64; 3] = std::array::from_fn(|k| b2 * v2[k] + (1.0 - b2) * d2 * d2 * g3[k] * g3[k]);
    let rp3 = b2.sqrt() * rp2 + c * a3 * d2 * d2 * (2.0 * (2.0 - w2[0]) + (2.0 - w2[1]));
    let s3_norm = b2.sqrt() * (s2[0] + s2[1] + s2[2]) + c * a3 * d2 * d2 * 4.0;
    let d3 = d2.max(rp3 / s3_norm);
    let w3 = [
        w2[0] - a3 * d2 * m3[0] / (v3[0].sqrt() + d2 * eps),
        w2[1] - a3 * d2 * m3[1] / (v3[1].sqrt() + d2 * eps),
        0.0,
    ];
    assert_trace(&trace, &[w1, w2, w3], "prodigy");
    for (got, want) in ds.iter().zip([d0, d2, d3]) {
        assert!(
            (got - want).abs() < 1e-12 * want,
            "d = {got}, expected {want}"
        );
    }
}

/// The cosine annealing α_τ = ½(1 + cos(π·((τ − 1) mod 100)/100)) restarts with period 100.
/// Zero gradients move nothing but advance τ, so a first nonzero gradient ĝ = 1 at step τ moves
/// w by α_τ·d₀·m/(√v + d₀ε) with m = 0.1·d₀, v = 0.001·d₀², i.e. α_τ·0.1·d₀/(√0.001 + ε).
///
/// Break-once: the phase (τ − 1) mod 100 replaced by (τ − 1) mod 200 failed at τ = 101
/// (moved 0, i.e. α = ½(1 + cos π) = 0, instead of α = 1).
#[test]
fn prodigy_restarts_its_schedule_every_100_steps() {
    let d0 = Prodigy::DEFAULT_D0;
    let pi = std::f64::consts::PI;
    let unit_move = 0.1 * d0 / (0.001f64.sqrt() + 1e-8);
    let alphas = [
        (1, 1.0),
        (2, 0.5 * (1.0 + (pi / 100.0).cos())),
        (51, 0.5),
        (100, 0.5 * (1.0 + (0.99 * pi).cos())),
        (101, 1.0),
        (150, 0.5 * (1.0 + (0.49 * pi).cos())),
        (201, 1.0),
    ];
    for (tau, alpha) in alphas {
        // w₀ = 1e-3 keeps the rounding of w₀ − w (1e-19) far below the smallest move (8e-10).
        let mut prodigy = Prodigy::new(&[1e-3], d0).unwrap();
        let mut w = [1e-3];
        for _ in 1..tau {
            prodigy.step(&mut w, &[0.0]).unwrap();
        }
        assert_eq!(w, [1e-3]);
        prodigy.step(&mut w, &[1.0]).unwrap();
        let moved = 1e-3 - w[0];
        let want = alpha * unit_move;
        assert!(
            (moved - want).abs() < 1e-8 * want,
            "τ = {tau}: moved {moved:e}, expected α = {alpha} times {unit_move:e}"
        );
    }
}

/// D-Adaptation SGD by hand (γ = 2, d₀ = 1 so the steps are visible): λ = d·γ/G with
/// G = ‖ĝ₁‖ = 5, q = λ·ĝᵀs before s moves, d ← max(d, 2Q/‖s‖) before Q ← Q + q.
///
/// Break-once: adding q to Q before the d update (the PyTorch order) raised d after the second
/// step and failed at w₃[0] (0.4621 against 0.8).
#[test]
fn d_adapt_sgd_first_steps_match_the_hand_trace() {
    let mut opt = DAdaptSgd::new(&W0, 2.0, 1.0).unwrap();
    let mut gradients = HAND.to_vec();
    gradients.push([-1.0, 0.0, 0.0]);
    let mut w = W0;
    let mut trace = Vec::new();
    let mut ds = Vec::new();
    for g in &gradients {
        opt.step(&mut w, g).unwrap();
        trace.push(w);
        ds.push(opt.d());
    }
    // τ = 1: λ = 1·2/5 = 0.4, q = 0, s = (0, 1.2, 1.6), d = max(1, 2·0/2) = 1, Q = 0;
    // w₁ = (2, 2 − 1.2, max(0, −1.6)).
    let w1 = [2.0, 0.8, 0.0];
    // τ = 2: λ = 0.4, q = 0.4·(2·1.2 + 2·1.6) = 2.24, s = (0.4, 2.0, 2.4), d = max(1, 0) = 1,
    // Q = 2.24; w₂ = (2 − 0.4, 0.8 − 0.8, max(0, −0.8)).
    let w2 = [1.6, 0.0, 0.0];
    // τ = 3: λ = 0.4, q = 0.4·(2·0.4 − 2.0 + 2·2.4) = 1.44, s = (1.2, 1.6, 3.2),
    // d = max(1, 2·2.24/√(1.44 + 2.56 + 10.24)), Q = 3.68; w₃ = (1.6 − 0.8, 0 + 0.4, max(0, −0.8)).
    let d3 = (2.0 * 2.24 / 14.24f64.sqrt()).max(1.0);
    assert!(d3 > 1.1, "the example must make d grow: {d3}");
    let w3 = [0.8, 0.4, 0.0];
    // τ = 4, ĝ = (−1, 0, 0): λ = d₃·2/5.
    let w4 = [0.8 + d3 * 2.0 / 5.0, 0.4, 0.0];
    assert_trace(&trace, &[w1, w2, w3, w4], "D-Adaptation SGD");
    for (got, want) in ds.iter().zip([1.0, 1.0, d3]) {
        assert!((got - want).abs() < 1e-12, "d = {got}, expected {want}");
    }
}

fn baselines(w0: &[f64]) -> Vec<Box<dyn WeightOptimiser>> {
    vec![
        Box::new(Dog::new(w0, 1e-3).unwrap()),
        Box::new(Dowg::new(w0, 1e-3).unwrap()),
        Box::new(Dowg::new(w0, 1e-3).unwrap().with_r0_in_max()),
        Box::new(Prodigy::new(w0, Prodigy::DEFAULT_D0).unwrap()),
        Box::new(DAdaptSgd::new(w0, DAdaptSgd::DEFAULT_GAMMA, DAdaptSgd::DEFAULT_D0).unwrap()),
    ]
}

/// Bad settings and bad gradients are errors that name the problem, and a rejected step leaves
/// the weights as they were.
#[test]
fn baselines_reject_bad_settings_and_gradients() {
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(matches!(
            Dog::new(&W0, bad),
            Err(OptimiserError::NotPositive { .. })
        ));
        assert!(matches!(
            Dowg::new(&W0, bad),
            Err(OptimiserError::NotPositive { .. })
        ));
        assert!(matches!(
            Prodigy::new(&W0, bad),
            Err(OptimiserError::NotPositive { .. })
        ));
        for (gamma, d0) in [(bad, 1e-6), (1.0, bad)] {
            assert!(matches!(
                DAdaptSgd::new(&W0, gamma, d0),
                Err(OptimiserError::NotPositive { .. })
            ));
        }
    }
    let message = Dog::new(&W0, -1.0).unwrap_err().to_string();
    assert!(
        message.contains("DoG's r") && message.contains("-1"),
        "{message}"
    );
    for w0 in [
        [1.0, -0.5, 1.0],
        [1.0, f64::NAN, 1.0],
        [1.0, f64::INFINITY, 1.0],
    ] {
        let expected = OptimiserError::InitialWeight {
            index: 1,
            value: w0[1],
        };
        let is_expected = |e: OptimiserError| match (e, &expected) {
            (
                OptimiserError::InitialWeight { index, value },
                OptimiserError::InitialWeight { value: want, .. },
            ) => index == 1 && (value == *want || value.is_nan() && want.is_nan()),
            _ => false,
        };
        assert!(is_expected(Dog::new(&w0, 1.0).unwrap_err()));
        assert!(is_expected(Dowg::new(&w0, 1.0).unwrap_err()));
        assert!(is_expected(Prodigy::new(&w0, 1.0).unwrap_err()));
        assert!(is_expected(DAdaptSgd::new(&w0, 1.0, 1.0).unwrap_err()));
        assert!(is_expected(HotDog::new(&w0, 1.0).unwrap_err()));
    }
    assert_eq!(Dog::new(&[], 1.0).unwrap_err(), OptimiserError::NoWeights);
    assert_eq!(Dowg::new(&[], 1.0).unwrap_err(), OptimiserError::NoWeights);
    assert_eq!(
        Prodigy::new(&[], 1.0).unwrap_err(),
        OptimiserError::NoWeights
    );
    assert_eq!(
        DAdaptSgd::new(&[], 1.0, 1.0).unwrap_err(),
        OptimiserError::NoWeights
    );
    assert_eq!(Adam::new(0, 1.0).unwrap_err(), OptimiserError::NoWeights);

    let mut all = baselines(&W0);
    all.push(Box::new(HotDog::new(&W0, 1e-3).unwrap()));
    all.push(Box::new(Adam::new(3, 0.1).unwrap()));
    for optimiser in &mut all {
        let name = optimiser.name();
        let mut w = W0;
        assert_eq!(
            optimiser.step(&mut w, &[1.0, 2.0]),
            Err(OptimiserError::WrongLength {
                what: "gradient",
                expected: 3,
                got: 2
            }),
            "{name}"
        );
        assert_eq!(
            optimiser.step(&mut [1.0; 4], &[1.0, 2.0, 3.0]),
            Err(OptimiserError::WrongLength {
                what: "weights",
                expected: 3,
                got: 4
            }),
            "{name}"
        );
        let err = optimiser.step(&mut w, &[1.0, f64::NAN, 3.0]).unwrap_err();
        assert!(
            matches!(err, OptimiserError::NonFiniteGradient { index: 1, value } if value.is_nan()),
            "{name}: {err}"
        );
        assert!(err.to_string().contains("gradient[1]"), "{name}: {err}");
        assert_eq!(
            optimiser.step(&mut w, &[f64::NEG_INFINITY, 0.0, 0.0]),
            Err(OptimiserError::NonFiniteGradient {
                index: 0,
                value: f64::NEG_INFINITY
            }),
            "{name}"
        );
        assert_eq!(w, W0, "{name}: a rejected step moved the weights");
    }
    // The rejected steps left the state untouched: DoG's first accepted step still uses r.
    let mut dog = Dog::new(&W0, 1.0).unwrap();
    let mut w = W0;
    let _ = dog.step(&mut w, &[f64::NAN, 0.0, 0.0]);
    dog.step(&mut w, &HAND[0]).unwrap();
    assert_trace(&[w], &[[2.0, 1.4, 0.0]], "DoG after a rejected step");
}

/// A zero first gradient (‖ĝ‖ = 0) moves nothing and produces no NaN; DoG, DoWG and D-Adaptation
/// do not count it, so the trace that follows is the hand trace; prodigy counts it (its
/// schedule advances) and stays finite.
///
/// Break-once: counting DoG's zero step (count += 1 before the early return) made r unused, the
/// next step had r₂ = ‖w − w₀‖ = 0 and the weights never moved: failed at w₁[1] (2 against 1.4).
#[test]
fn a_zero_first_gradient_moves_nothing() {
    for mut optimiser in baselines(&W0) {
        let name = optimiser.name();
        let mut w = W0;
        optimiser.step(&mut w, &[0.0; 3]).unwrap();
        optimiser.step(&mut w, &[0.0; 3]).unwrap();
        assert_eq!(w, W0, "{name}");
        for g in &HAND {
            optimiser.step(&mut w, g).unwrap();
            assert!(
                w.iter().all(|x| x.is_finite() && *x >= 0.0),
                "{name}: {w:?}"
            );
        }
    }
    let mut zero_first = vec![[0.0; 3]];
    zero_first.extend(HAND);
    let dog = run(&mut Dog::new(&W0, 1.0).unwrap(), &zero_first);
    assert_trace(
        &dog[1..],
        &run(&mut Dog::new(&W0, 1.0).unwrap(), &HAND),
        "DoG",
    );
    let dowg = run(&mut Dowg::new(&W0, 1.0).unwrap(), &zero_first);
    assert_trace(
        &dowg[1..],
        &run(&mut Dowg::new(&W0, 1.0).unwrap(), &HAND),
        "DoWG",
    );
    let dadapt = run(&mut DAdaptSgd::new(&W0, 2.0, 1.0).unwrap(), &zero_first);
    let want = run(&mut DAdaptSgd::new(&W0, 2.0, 1.0).unwrap(), &HAND);
    assert_trace(&dadapt[1..], &want, "D-Adaptation SGD");
    // The hand value of DoG's first counted step: γ₁ = r/‖ĝ₁‖ = 0.2.
    assert_trace(&dog[1..2], &[[2.0, 1.4, 0.0]], "DoG, first counted step");
}

/// Behaviour on a convex quadratic f(w) = ½‖w − w*‖² with exact gradients w − w* and w* ≥ 0 on
/// the boundary in one coordinate: every baseline, at its paper default (r = 1e-3, d₀ = 1e-6,
/// γ = 1), ends within 1e-2·‖w₀ − w*‖ of w* after 5,000 steps, each weight stays ≥ 0, and the
/// error shrinks from its start by the same factor 100.
///
/// Break-once: a sign error in D-Adaptation's step (w + λĝ) made it diverge until the gradient
/// overflowed, and the test failed (the next step rejected ĝ[0] = inf as NonFiniteGradient).
#[test]
fn baselines_converge_on_a_convex_quadratic() {
    let target = [0.0, 0.5, 2.0, 5.0, 8.0, 12.0];
    let w0 = [5.0; 6];
    let initial_error = distance(&w0, &target);
    let mut gradient = [0.0; 6];
    for mut optimiser in baselines(&w0) {
        let name = optimiser.name();
        let mut w = w0;
        for _ in 0..5000 {
            for k in 0..6 {
                gradient[k] = w[k] - target[k];
            }
            optimiser.step(&mut w, &gradient).unwrap();
            assert!(w.iter().all(|x| *x >= 0.0), "{name}: {w:?}");
        }
        let error = distance(&w, &target);
        assert!(
            error < 1e-2 * initial_error,
            "{name}: ‖w − w*‖ = {error} after 5000 steps, start {initial_error}"
        );
    }
}

fn distance(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y) * (x - y))
        .sum::<f64>()
        .sqrt()
}
