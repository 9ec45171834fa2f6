//! SGLD is exactly the discretised chain it claims to be (reference §2.1 "How to test it"):
//! on Gaussian targets its stationary law has a closed form — including the O(ε)
//! discretisation bias and the minibatch noise — and long runs must match it within 4 MCSE.

use crate::common;

use common::{
    Section21, features, from_eigen, lyapunov_doubling, normals, pooled_mean_mcse,
    random_orthogonal, section_2_1,
};
use sgmcmc::estimator::{BatchSize, FullBatch, GradientEstimator, Minibatch};
use sgmcmc::io::MemorySink;
use sgmcmc::model::{GaussianModel, Model};
use sgmcmc::rng::fill_standard_normal;
use sgmcmc::runner::{Budget, Chain, NoProgress, RunError, RunReport, RunSettings, run};
use sgmcmc::sampler::{Sgld, StepSize};

/// Run SGLD chains on `model` with `estimator(model)` per chain, started at `init` plus a
/// standard normal perturbation drawn from each chain's own stream; returns the report and
/// every chain's draws (flat, draws × D).
#[allow(clippy::needless_lifetimes)] // 'm ties the estimators to the model
fn run_sgld<'m>(
    model: &'m dyn Model,
    step: StepSize,
    temperature: f64,
    make_estimator: impl Fn() -> Box<dyn GradientEstimator + 'm> + Sync,
    init: &[f64],
    settings: &RunSettings,
) -> (RunReport, Vec<Vec<f64>>) {
    let d = model.dim();
    let sink = MemorySink::new(settings.chains, d);
    let report = run(
        settings,
        |_c, rng| {
            let mut theta0 = vec![0.0; d];
            fill_standard_normal(rng, &mut theta0);
            theta0.iter_mut().zip(init).for_each(|(t, m)| *t += m);
            Ok::<_, RunError>(Chain::sampler(
                Box::new(Sgld::new(step, temperature).unwrap()),
                make_estimator(),
                theta0,
            ))
        },
        &sink,
        &NoProgress,
    )
    .expect("run succeeds");
    assert!(report.diverged_chains().is_empty(), "a chain diverged");
    (report, sink.into_chains())
}

/// Per-chain series of (θⱼ − μⱼ)(θₖ − μₖ).
fn product_series(chains: &[Vec<f64>], d: usize, mu: &[f64], j: usize, k: usize) -> Vec<Vec<f64>> {
    chains
        .iter()
        .map(|c| {
            c.chunks_exact(d)
                .map(|r| (r[j] - mu[j]) * (r[k] - mu[k]))
                .collect()
        })
        .collect()
}

fn coordinate_series(chains: &[Vec<f64>], d: usize, j: usize) -> Vec<Vec<f64>> {
    chains.iter().map(|c| common::column(c, d, j)).collect()
}

/// (a) Exact gradients on a correlated 5-D Gaussian N(μ, Σ), cond(Σ) = 10, with a step so large
/// (ε·λ_max(Σ⁻¹) = 0.5) that the chain's stationary covariance S differs from Σ by far more than
/// the Monte Carlo error. The chain is θ' = θ − εΣ⁻¹(θ − μ) + √(2ε)ξ: stationary mean μ exactly,
/// and S = A S Aᵀ + 2εI with A = I − εΣ⁻¹, i.e. eigenvalue λ of Σ⁻¹ ↦ 2/(λ(2 − ελ)).
#[test]
fn sgld_full_batch_matches_discretised_stationary_law() {
    const D: usize = 5;
    let v = random_orthogonal(31, D);
    let sigma_eigen = [1.0, 1.7, 3.0, 5.5, 10.0];
    let lambda: Vec<f64> = sigma_eigen.iter().map(|s| 1.0 / s).collect();
    let sigma = from_eigen(&v, &sigma_eigen, D);
    let precision = from_eigen(&v, &lambda, D);
    let mu = [1.0, -2.0, 0.5, 3.0, -1.0];
    let eps = 0.5; // ε·λ_max = 0.5, ε·λ_min = 0.05

    // Closed form two ways: the eigenbasis formula and the doubling recipe of §2.0.
    let s_closed = from_eigen(
        &v,
        &lambda
            .iter()
            .map(|l| 2.0 / (l * (2.0 - eps * l)))
            .collect::<Vec<_>>(),
        D,
    );
    let a: Vec<f64> = (0..D * D)
        .map(|k| f64::from(u8::from(k / D == k % D)) - eps * precision[k])
        .collect();
    let q: Vec<f64> = (0..D * D)
        .map(|k| if k / D == k % D { 2.0 * eps } else { 0.0 })
        .collect();
    let s = lyapunov_doubling(&a, &q, D);
    for (x, y) in s.iter().zip(&s_closed) {
        // Both are exact up to rounding (spectral radius of A is 0.95: 2^60 steps ≫ enough).
        assert!((x - y).abs() < 1e-10, "doubling {x} vs closed form {y}");
    }
    // The target really is correlated.
    assert!(
        (0..D).any(|i| (0..i)
            .any(|j| sigma[i * D + j].abs() > 0.3 * (sigma[i * D + i] * sigma[j * D + j]).sqrt())),
        "Σ has no sizeable correlation"
    );

    let model = GaussianModel::target(&mu, &sigma).unwrap();
    let settings = RunSettings {
        seed: 2024,
        chains: 4,
        budget: Budget::Iterations(1_500_000),
        burn_in: 1_000, // slowest mode contracts by 0.95 per step: 0.95^1000 ≈ 1e-22
        thin: 10,
    };
    let (report, chains) = run_sgld(
        &model,
        StepSize::Langevin(eps),
        1.0,
        || Box::new(FullBatch::new(&model)),
        &mu,
        &settings,
    );
    assert!(report.chains.iter().all(|c| c.draws == 150_000));

    // Mean: exactly μ; tolerance 4 MCSE (§1.6), MCSE from per-chain τ_int (mcse_mean).
    for (j, &mu_j) in mu.iter().enumerate() {
        let (m, se) = pooled_mean_mcse(&coordinate_series(&chains, D, j));
        assert!(
            (m - mu_j).abs() <= 4.0 * se,
            "mean[{j}] = {m} vs μ = {mu_j} (4 MCSE = {})",
            4.0 * se
        );
    }

    // Every covariance entry: mean of the product series (θⱼ − μⱼ)(θₖ − μₖ) against S, 4 MCSE
    // with the MCSE from the product series' own integrated autocorrelation time (§1.6).
    let mut z_vs_sigma = Vec::new();
    for j in 0..D {
        for k in 0..=j {
            let (m, se) = pooled_mean_mcse(&product_series(&chains, D, &mu, j, k));
            let want = s[j * D + k];
            assert!(
                (m - want).abs() <= 4.0 * se,
                "cov[{j}][{k}] = {m} vs S = {want} (Σ = {}; 4 MCSE = {})",
                sigma[j * D + k],
                4.0 * se
            );
            z_vs_sigma.push((m - sigma[j * D + k]) / se);
        }
    }
    // Power: the same check against Σ itself (the continuous-time law) must fail clearly —
    // the discretisation bias S − Σ (≈ 0.25..0.33 on the diagonal) is many MCSE.
    eprintln!("z-scores of the covariance entries against Σ: {z_vs_sigma:.1?}");
    let max_z = z_vs_sigma.iter().fold(0.0f64, |m, z| m.max(z.abs()));
    let failing = z_vs_sigma.iter().filter(|z| z.abs() > 4.0).count();
    assert!(
        max_z > 8.0 && failing >= D,
        "the run cannot distinguish S from Σ: z-scores vs Σ {z_vs_sigma:?}"
    );

    // Sharper power check in the eigenbasis: the variance along the stiffest direction is
    // 2/(λ(2 − ελ)) = 4/3 of Σ's there.
    let top = 0; // sigma_eigen[0] = 1 ↔ λ_max = 1
    let proj: Vec<Vec<f64>> = chains
        .iter()
        .map(|c| {
            c.chunks_exact(D)
                .map(|r| {
                    let p: f64 = (0..D).map(|i| v[top * D + i] * (r[i] - mu[i])).sum();
                    p * p
                })
                .collect()
        })
        .collect();
    let (m, se) = pooled_mean_mcse(&proj);
    eprintln!("stiff-direction variance {m:.4} ± {se:.4}");
    let want = 2.0 / (lambda[top] * (2.0 - eps * lambda[top]));
    assert!(
        (m - want).abs() <= 4.0 * se,
        "stiff-direction variance {m} vs {want} (MCSE {se})"
    );
    assert!(
        (m - sigma_eigen[top]).abs() > 20.0 * se,
        "stiff-direction variance {m} indistinguishable from Σ's {}",
        sigma_eigen[top]
    );
}

/// (b) Reference §2.1 minibatch check: D = 1, N = 100, n = 10, τ₀² = 4, xᵢ ~ N(1, 2²), ε = 0.5/P.
/// Stationary variance (2 + ε·V_e)/(P(2 − εP)) with V_e = (N²/n)(N − n)/(N − 1)·s_x²: exercises
/// the N/n scaling and the without-replacement factor.
#[test]
fn sgld_minibatch_matches_closed_form_with_gradient_noise() {
    let Section21 {
        model,
        n_data,
        n,
        p,
        m,
        s2,
        v_e,
        eps,
    } = section_2_1();
    let (nd, nb) = (n_data as f64, n as f64);
    let var_want = (2.0 + eps * v_e) / (p * (2.0 - eps * p));
    let var_with_replacement = (2.0 + eps * nd * nd / nb * s2) / (p * (2.0 - eps * p));
    let var_exact_gradients = 2.0 / (p * (2.0 - eps * p));
    // Cross-check against the model's own posterior.
    assert!((model.posterior_mean()[0] - m).abs() < 1e-12);
    assert!((model.posterior_covariance()[0] - 1.0 / p).abs() < 1e-15);

    let settings = RunSettings {
        seed: 7,
        chains: 4,
        budget: Budget::Iterations(100_000),
        burn_in: 200, // AR(1) coefficient 1 − εP = 0.5: the start is forgotten after ~60 steps
        thin: 1,
    };
    let (_, chains) = run_sgld(
        &model,
        StepSize::Langevin(eps),
        1.0,
        || Box::new(Minibatch::new(&model, BatchSize::Count(n)).unwrap()),
        &[m],
        &settings,
    );

    // Mean m exactly (the noise is zero-mean and independent of θ); 4 MCSE (§1.6).
    let (mh, se) = pooled_mean_mcse(&chains);
    assert!(
        (mh - m).abs() <= 4.0 * se,
        "mean {mh} vs m {m} (4 MCSE = {})",
        4.0 * se
    );

    // Variance: mean of (θ − m)², 4 MCSE from that series' τ_int (§1.6).
    let sq: Vec<Vec<f64>> = chains
        .iter()
        .map(|c| c.iter().map(|t| (t - m).powi(2)).collect())
        .collect();
    let (vh, se) = pooled_mean_mcse(&sq);
    eprintln!(
        "variance {vh:.5} ± {se:.5}; closed form {var_want:.5}, with replacement \
         {var_with_replacement:.5}, exact gradients {var_exact_gradients:.5}"
    );
    assert!(
        (vh - var_want).abs() <= 4.0 * se,
        "variance {vh} vs closed form {var_want} (4 MCSE = {})",
        4.0 * se
    );
    // Power: without the (N − n)/(N − 1) factor, or without the gradient noise, it must fail.
    assert!(
        (vh - var_with_replacement).abs() > 8.0 * se,
        "cannot distinguish from the with-replacement variance {var_with_replacement}"
    );
    assert!((vh - var_exact_gradients).abs() > 8.0 * se);
}

/// Temperature T scales the injected noise variance by T: on N(0, 1) with exact gradients
/// the stationary variance is 2T/(2 − ε).
#[test]
fn sgld_temperature_scales_the_stationary_variance() {
    let model = GaussianModel::target(&[0.0], &[1.0]).unwrap();
    let eps = 0.5;
    for t in [0.5, 2.0] {
        let settings = RunSettings {
            seed: 8,
            chains: 2,
            budget: Budget::Iterations(100_000),
            burn_in: 100,
            thin: 1,
        };
        let (_, chains) = run_sgld(
            &model,
            StepSize::Langevin(eps),
            t,
            || Box::new(FullBatch::new(&model)),
            &[0.0],
            &settings,
        );
        let sq: Vec<Vec<f64>> = chains
            .iter()
            .map(|c| c.iter().map(|v| v * v).collect())
            .collect();
        let (vh, se) = pooled_mean_mcse(&sq);
        let want = 2.0 * t / (2.0 - eps);
        // 4 MCSE (§1.6).
        assert!(
            (vh - want).abs() <= 4.0 * se,
            "T = {t}: variance {vh} vs {want} (MCSE {se})"
        );
    }
}

/// (c) Reference §2.1 convention check: Welling–Teh step h is the same scheme as ε = h/2,
/// bit for bit from the same seed.
#[test]
fn welling_teh_step_is_bitwise_langevin_half_step() {
    let x: Vec<f64> = normals(51, 0, 200 * 2).iter().map(|v| 0.5 + v).collect();
    let model = GaussianModel::new(features(x, 2), &[1.0, 0.3, 0.3, 2.0], 1.0).unwrap();
    let settings = RunSettings {
        seed: 99,
        chains: 2,
        budget: Budget::Iterations(2_000),
        burn_in: 10,
        thin: 1,
    };
    let h = 3e-3;
    let draws = |step| {
        run_sgld(
            &model,
            step,
            1.0,
            || Box::new(Minibatch::new(&model, BatchSize::Count(20)).unwrap()),
            &[0.0, 0.0],
            &settings,
        )
        .1
    };
    let wt = draws(StepSize::WellingTeh(h));
    let lv = draws(StepSize::Langevin(h / 2.0));
    let bits = |c: &Vec<Vec<f64>>| -> Vec<Vec<u64>> {
        c.iter()
            .map(|x| x.iter().map(|v| v.to_bits()).collect())
            .collect()
    };
    assert_eq!(wt[0].len(), 4_000);
    assert_eq!(bits(&wt), bits(&lv));
    // …and a different step really changes the trajectory.
    let other = draws(StepSize::Langevin(h));
    assert_ne!(bits(&wt), bits(&other));
    assert_eq!(
        Sgld::new(StepSize::WellingTeh(h), 1.0).unwrap().epsilon(),
        h / 2.0
    );
}

#[test]
fn sgld_rejects_bad_settings() {
    for step in [
        StepSize::Langevin(0.0),
        StepSize::Langevin(-1.0),
        StepSize::Langevin(f64::NAN),
        StepSize::WellingTeh(f64::INFINITY),
    ] {
        assert!(Sgld::new(step, 1.0).is_err(), "{step:?} accepted");
    }
    for t in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(
            Sgld::new(StepSize::Langevin(0.1), t).is_err(),
            "temperature {t} accepted"
        );
    }
}
