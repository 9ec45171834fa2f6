//! The MAP by Adam (reference §3.2, `[run] map_optimizer = "adam"`): it reaches the closed-form
//! mode of the Gaussian test model, lands within a small fraction of a posterior sd on
//! minibatches, is reproducible from the seed, and bad settings or a diverging run are clear
//! errors. The run file's `map_optimizer` keys are tested in `sgmcmc-runfile`.

use crate::common;

use common::{features, normals};
use sgmcmc::estimator::BatchSize;
use sgmcmc::model::GaussianModel;
use sgmcmc::optim::{AdamMapOptions, find_map_adam};
use sgmcmc::rng::stream;

const N: usize = 2_000;
const PRIOR_VARIANCE: f64 = 4.0;

/// The GTM of §2.0 (identity likelihood covariance), D = 3, and its data.
fn gtm() -> (GaussianModel, Vec<f64>) {
    let x: Vec<f64> = normals(23, 0, N * 3)
        .iter()
        .map(|v| 0.5 + 2.0 * v)
        .collect();
    let eye = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0];
    (
        GaussianModel::new(features(x.clone(), 3), &eye, PRIOR_VARIANCE).unwrap(),
        x,
    )
}

/// The GTM's mode: Σᵢxᵢ / (N + 1/σ₀²) per coordinate; its posterior sd is (N + 1/σ₀²)^(−1/2).
fn closed_form_map(x: &[f64]) -> Vec<f64> {
    let precision = N as f64 + 1.0 / PRIOR_VARIANCE;
    (0..3)
        .map(|j| x.iter().skip(j).step_by(3).sum::<f64>() / precision)
        .collect()
}

fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

#[test]
fn full_batch_adam_reaches_the_closed_form_map() {
    let (model, x) = gtm();
    let options = AdamMapOptions {
        learning_rate: 1e-2,
        batch: BatchSize::Count(N),
        iterations: 5_000,
    };
    let r = find_map_adam(&model, &[0.0; 3], &options, &mut stream(1, 0)).unwrap();
    let exact = closed_form_map(&x);
    let err = max_diff(&r.theta, &exact);
    assert!(err < 1e-4, "Adam {:?} vs closed form {exact:?}", r.theta);
    assert_eq!(r.iterations, 5_000);
    assert!(!r.converged);
    // Exact gradients: the reported gradient is the full-data one at the result.
    assert!(r.gradient_norm < 1.0, "{}", r.gradient_norm);
    assert_eq!(r.evaluations, 5_001);
}

#[test]
fn minibatch_adam_lands_inside_the_posterior_bulk() {
    let (model, x) = gtm();
    let sd = (N as f64 + 1.0 / PRIOR_VARIANCE).powf(-0.5);
    let exact = closed_form_map(&x);
    // With a constant learning rate and noisy gradients Adam does not settle at the mode: it
    // stops at a random point inside the posterior bulk. Measured over 40 seeds (2026-11-26),
    // the largest coordinate error with the library's defaults (α = 1e-2 on 1 % batches) has
    // median 2.7-2.9 sd, 90 % quantile 4.6 sd, maximum 6.2-6.5 sd; the authors' NN setting
    // (α = 1e-3 on 10 %) lands closer. So: over 8 seeds, the median error below 5 sd and every
    // error below 8 sd. A good start for a sampler, not a precise mode; a wrong sign or scale
    // would leave it tens of sds out.
    for options in [
        AdamMapOptions::default(),
        AdamMapOptions {
            learning_rate: 1e-3,
            batch: BatchSize::Fraction(0.1),
            iterations: 5_000,
        },
    ] {
        let mut errors: Vec<f64> = (0..8)
            .map(|seed| {
                let r = find_map_adam(&model, &[0.0; 3], &options, &mut stream(seed, 0)).unwrap();
                assert_eq!(
                    r.evaluations,
                    (5_000 * options.batch.resolve(N).unwrap()).div_ceil(N) + 1
                );
                max_diff(&r.theta, &exact) / sd
            })
            .collect();
        errors.sort_by(f64::total_cmp);
        eprintln!("{options:?}: errors in sd {errors:.2?}");
        assert!(
            errors[4] < 5.0,
            "{options:?}: median error {:.2} sd",
            errors[4]
        );
        assert!(
            errors[7] < 8.0,
            "{options:?}: largest error {:.2} sd",
            errors[7]
        );
    }
}

#[test]
fn a_diverging_adam_is_an_error_not_a_panic() {
    let (model, _) = gtm();
    let options = AdamMapOptions {
        learning_rate: 1e308,
        batch: BatchSize::Count(N),
        iterations: 10,
    };
    let err = find_map_adam(&model, &[0.0; 3], &options, &mut stream(1, 0))
        .unwrap_err()
        .to_string();
    assert!(err.contains("Adam diverged at step"), "{err}");
    let err = find_map_adam(
        &model,
        &[0.0; 2],
        &AdamMapOptions::default(),
        &mut stream(1, 0),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("start has 2 values"), "{err}");
}
