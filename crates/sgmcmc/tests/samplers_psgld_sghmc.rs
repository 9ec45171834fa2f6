//! pSGLD (reference §2.2, Li et al. 2016) and SGHMC (§2.3, Chen, Fox & Guestrin 2014) are the
//! discretised chains they claim to be: on Gaussian targets their stationary laws have closed
//! forms (frozen preconditioner; 2×2 Lyapunov recipe), and long runs must match them within
//! 4 MCSE (§1.6). Every MCSE comes from the integrated autocorrelation time of the series
//! whose mean is compared (`pooled_mean_mcse` → `diagnostics::mcse_mean`, Sokal window).

use crate::common;

use common::{col, drive_with, gtm, pooled_mean_mcse, sq_dev};
use sgmcmc::estimator::{BatchSize, BatchTerms, FullBatch, GradientEstimator, Minibatch};
use sgmcmc::io::MemorySink;
use sgmcmc::model::{GaussianModel, TermMoments};
use sgmcmc::rng::{ChainRng, chain_stream, fill_standard_normal};
use sgmcmc::runner::{Budget, Chain, NoProgress, RunError, RunSettings, run};
use sgmcmc::sampler::{
    Psgld, PsgldSettings, Sampler, Sghmc, SghmcOptions, SghmcSettings, Sgld, StepSize,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// Assert |m̂ − want| ≤ 4 MCSE (§1.6) and return the z-score.
fn check_4mcse(what: &str, series: &[Vec<f64>], want: f64) -> f64 {
    let (m, se) = pooled_mean_mcse(series);
    let z = (m - want) / se;
    eprintln!("{what}: {m:.6} ± {se:.6} (MCSE) vs closed form {want:.6}, z = {z:.2}");
    assert!(
        z.abs() <= 4.0,
        "{what}: {m} vs closed form {want} (4 MCSE = {})",
        4.0 * se
    );
    z
}

fn record_theta<S: Sampler>(s: &S, out: &mut Vec<f64>) {
    out.extend_from_slice(s.position());
}

/// Records θ and then v (width 2·D).
fn record_theta_v(s: &Sghmc, out: &mut Vec<f64>) {
    out.extend_from_slice(s.position());
    out.extend_from_slice(s.momentum());
}

/// An estimator that counts its calls.
struct Counting<E> {
    inner: E,
    calls: Arc<AtomicUsize>,
}

impl<E: GradientEstimator> GradientEstimator for Counting<E> {
    fn estimate(&mut self, theta: &[f64], out: &mut [f64], rng: &mut ChainRng) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.inner.estimate(theta, out, rng);
    }
    fn cost_per_estimate(&self) -> usize {
        self.inner.cost_per_estimate()
    }
    fn estimate_with_terms(
        &mut self,
        theta: &[f64],
        out: &mut [f64],
        moments: &mut TermMoments,
        rng: &mut ChainRng,
    ) -> BatchTerms {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.inner.estimate_with_terms(theta, out, moments, rng)
    }
}

// ---------------------------------------------------------------------------------------------
// pSGLD (§2.2)
// ---------------------------------------------------------------------------------------------

/// SGLD stationary variance on the GTM with step s (§2.1): (2T + s·V_e)/(P(2 − sP)).
fn sgld_var(s: f64, p: f64, v_e: f64) -> f64 {
    (2.0 + s * v_e) / (p * (2.0 - s * p))
}

/// (a) §2.2 test 2: λ = 1e6 makes G = 1/(√V + λ) ≈ 1e-6 constant (√V ≈ |ĝ| ≲ 100 here, a
/// relative change < 1e-4, far below the MCSE), so pSGLD is SGLD with step ε·G. GTM with
/// minibatches (N = 100, n = 10), ε·G·P = 0.5: the variance includes the V_e term.
#[test]
fn psgld_huge_stabiliser_is_sgld_with_step_eps_g() {
    let (model, p, m, v_e) = gtm(41, 100, 10, 4.0, &[1.0], &[2.0]);
    let lambda = 1e6;
    let eps = 0.5 / p * lambda;
    let settings = PsgldSettings {
        stabiliser: lambda,
        ..PsgldSettings::default()
    };
    let runs = drive_with(
        4,
        11,
        |_| {
            (
                Psgld::new(StepSize::Langevin(eps), settings).unwrap(),
                Minibatch::new(&model, BatchSize::Count(10)).unwrap(),
            )
        },
        &m,
        200, // AR(1) coefficient 1 − εGP = 0.5
        100_000,
        1, // thin
        |s| {
            let mut g = [0.0];
            s.preconditioner(&mut g);
            g[0]
        },
        record_theta,
    );
    for (g, _) in &runs {
        assert!((g * lambda - 1.0).abs() < 1e-3, "G·λ = {}", g * lambda);
    }
    let chains: Vec<Vec<f64>> = runs.into_iter().map(|r| r.1).collect();
    let want = sgld_var(eps / lambda, p, v_e[0]);
    check_4mcse("pSGLD λ=1e6 mean", &chains, m[0]);
    let z = check_4mcse("pSGLD λ=1e6 variance", &sq_dev(&chains, 1, 0, m[0]), want);
    // Power: exact-gradient variance (V_e dropped) is many MCSE away.
    let (vh, se) = pooled_mean_mcse(&sq_dev(&chains, 1, 0, m[0]));
    assert!(
        (vh - sgld_var(eps / lambda, p, 0.0)).abs() > 8.0 * se,
        "z = {z}"
    );
}

/// (b) §2.2 test 1: after a warm-up of 2 000 adaptive iterations V is frozen (ρ = 1 from then
/// on, `freeze_after`), and each coordinate c is SGLD with step ε·G_c:
/// Var θ_c = (2 + ε·G_c·V_e,c)/(P(2 − ε·G_c·P)), with the G_c each chain actually froze.
/// Two coordinates with different data spread, so G and V_e differ per coordinate.
#[test]
fn psgld_frozen_preconditioner_is_per_coordinate_sgld() {
    let (model, p, m, v_e) = gtm(43, 100, 10, 4.0, &[1.0, -1.0], &[2.0, 0.5]);
    let eps = 0.2;
    let warm = 2_000;
    let settings = PsgldSettings {
        freeze_after: Some(warm),
        ..PsgldSettings::default()
    };
    let runs = drive_with(
        4,
        12,
        |_| {
            (
                Psgld::new(StepSize::Langevin(eps), settings).unwrap(),
                Minibatch::new(&model, BatchSize::Count(10)).unwrap(),
            )
        },
        &m,
        warm,
        100_000,
        1, // thin
        |s| {
            let mut g = vec![0.0; 2];
            s.preconditioner(&mut g);
            g
        },
        record_theta,
    );
    // Each chain has its own frozen G: compare each chain with its own closed form, then pool
    // the standardised errors (sum of 4·2 independent z-scores ~ N(0, 8)).
    let mut z_sum = 0.0;
    for (c, (g, draws)) in runs.iter().enumerate() {
        for j in 0..2 {
            let step = eps * g[j];
            assert!(step * p > 0.05 && step * p < 1.9, "ε·G·P = {}", step * p);
            let want = sgld_var(step, p, v_e[j]);
            let z = check_4mcse(
                &format!(
                    "pSGLD frozen chain {c} coord {j} (εG_cP = {:.3}) variance",
                    step * p
                ),
                &sq_dev(std::slice::from_ref(draws), 2, j, m[j]),
                want,
            );
            z_sum += z;
            check_4mcse(
                &format!("pSGLD frozen chain {c} coord {j} mean"),
                &col(std::slice::from_ref(draws), 2, j),
                m[j],
            );
        }
    }
    assert!(
        z_sum.abs() / 8f64.sqrt() <= 4.0,
        "pooled z = {}",
        z_sum / 8f64.sqrt()
    );
}

/// (c) G ≡ 1 is SGLD with the same ε (§2.2 "library convention"): ρ = 1 keeps V at 0 and λ = 1
/// gives G = 1 exactly, so pSGLD must reproduce SGLD bit for bit from the same seed. Plus one
/// default-settings step checked against the §2.2 formula by hand.
#[test]
fn psgld_with_unit_preconditioner_is_bitwise_sgld_and_one_step_by_hand() {
    let (model, _, _, _) = gtm(45, 200, 20, 1.0, &[0.5, -0.5], &[1.0, 1.0]);
    let settings = RunSettings {
        seed: 99,
        chains: 2,
        budget: Budget::Iterations(2_000),
        burn_in: 10,
        thin: 1,
    };
    let eps = 1.5e-3;
    let draws = |psgld: bool| {
        let sink = MemorySink::new(2, 2);
        run(
            &settings,
            |_c, _rng| {
                let sampler: Box<dyn Sampler> = if psgld {
                    let s = PsgldSettings {
                        decay: 1.0,
                        stabiliser: 1.0,
                        ..PsgldSettings::default()
                    };
                    Box::new(Psgld::new(StepSize::Langevin(eps), s).unwrap())
                } else {
                    Box::new(Sgld::new(StepSize::Langevin(eps), 1.0).unwrap())
                };
                Ok::<_, RunError>(Chain::sampler(
                    sampler,
                    Box::new(Minibatch::new(&model, BatchSize::Count(20)).unwrap()),
                    vec![0.3, -0.2],
                ))
            },
            &sink,
            &NoProgress,
        )
        .unwrap();
        sink.into_chains()
            .into_iter()
            .map(|c| c.iter().map(|v| v.to_bits()).collect::<Vec<_>>())
            .collect::<Vec<_>>()
    };
    let (a, b) = (draws(true), draws(false));
    assert_eq!(a[0].len(), 4_000);
    assert_eq!(a, b, "pSGLD with G ≡ 1 differs from SGLD");

    // One step with the defaults (ρ = 0.99, λ = 1e-5), by hand.
    let mut s = Psgld::new(StepSize::Langevin(eps), PsgldSettings::default()).unwrap();
    let mut est = FullBatch::new(&model);
    let mut rng = chain_stream(5, 0);
    let theta0 = [0.3, -0.2];
    s.start(&theta0, &mut est, &mut rng);
    let mut g0 = [0.0; 2];
    est.estimate(&theta0, &mut g0, &mut rng);
    assert_eq!(s.score(), &g0);
    let mut xi = [0.0; 2];
    fill_standard_normal(&mut rng.clone(), &mut xi);
    s.step(&mut est, &mut rng);
    for j in 0..2 {
        let v = 0.01 * g0[j] * g0[j];
        let g = 1.0 / (v.sqrt() + 1e-5);
        let want = theta0[j] + eps * g * g0[j] + (2.0 * eps * g).sqrt() * xi[j];
        assert!((s.second_moment()[j] - v).abs() <= 1e-15 * v);
        assert!(
            (s.position()[j] - want).abs() <= 1e-12 * want.abs().max(1.0),
            "θ₁[{j}] = {} vs {want}",
            s.position()[j]
        );
    }
    let mut g1 = [0.0; 2];
    est.estimate(s.position(), &mut g1, &mut rng);
    assert_eq!(s.score(), &g1, "the cached score is ĝ(θ₁)");
    // The catalogue constructor halves dt.
    let c = Psgld::from_catalogue_dt(0.02, PsgldSettings::default()).unwrap();
    assert_eq!(c.epsilon(), 0.01);
}

/// (d) §2.2 test 3: with adaptation on, the GTM moments agree within 5 % for ε·P ≤ 0.01.
/// GTM with minibatches (N = 100, n = 10, data spread 2), ε = 0.01/P. Here E[ĝ²] is dominated
/// by the θ-independent minibatch noise (V_e ≈ 3.6·10³ ≫ P ≈ 100), so G ≈ 1/61 is nearly
/// constant and the SGLD-with-step-εG bias (ε·G·V_e/2 ≈ 0.3 %) is small. The effective step
/// ε·G·P ≈ 1.6·10⁻⁴ mixes slowly (τ_int of θ ≈ 10⁴), so the 5 % allowance (of σ for the
/// mean, of σ² for the variance) is checked together with its Monte Carlo error: pass if
/// |m̂ − m| ≤ 5 % + 4 MCSE. (With exact gradients, where V tracks g² = P²(θ − m)² itself, the
/// bound does not hold: N(0, 1), ε = 0.01 gave Var θ ≈ 1.34 — the Γ = 0 bias of a
/// state-dependent G, §2.2.)
#[test]
fn psgld_adaptive_moments_within_five_percent() {
    let (model, p, m, _) = gtm(49, 100, 10, 4.0, &[1.0], &[2.0]);
    let eps = 0.01 / p;
    let runs = drive_with(
        4,
        13,
        |_| {
            (
                Psgld::new(StepSize::Langevin(eps), PsgldSettings::default()).unwrap(),
                Minibatch::new(&model, BatchSize::Count(10)).unwrap(),
            )
        },
        &m,
        20_000,
        2_000_000,
        1, // thin
        |_| (),
        record_theta,
    );
    let chains: Vec<Vec<f64>> = runs.into_iter().map(|r| r.1).collect();
    let sd = (1.0 / p).sqrt();
    let (mh, se) = pooled_mean_mcse(&chains);
    eprintln!(
        "pSGLD adaptive mean {mh:.5} ± {se:.5} vs m = {:.5} (σ = {sd:.4})",
        m[0]
    );
    assert!((mh - m[0]).abs() <= 0.05 * sd + 4.0 * se);
    let (vh, se) = pooled_mean_mcse(&sq_dev(&chains, 1, 0, m[0]));
    eprintln!(
        "pSGLD adaptive variance {vh:.6} ± {se:.6} vs 1/P = {:.6}",
        1.0 / p
    );
    assert!((vh - 1.0 / p).abs() <= 0.05 / p + 4.0 * se);
}

#[test]
fn psgld_rejects_bad_settings() {
    let ok = PsgldSettings::default();
    assert!(Psgld::new(StepSize::Langevin(0.0), ok).is_err());
    for bad in [
        PsgldSettings { decay: 1.5, ..ok },
        PsgldSettings { decay: -0.1, ..ok },
        PsgldSettings {
            decay: f64::NAN,
            ..ok
        },
        PsgldSettings {
            stabiliser: 0.0,
            ..ok
        },
        PsgldSettings {
            stabiliser: f64::INFINITY,
            ..ok
        },
        PsgldSettings {
            temperature: 0.0,
            ..ok
        },
    ] {
        assert!(Psgld::new(StepSize::Langevin(0.1), bad).is_err(), "{bad:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// SGHMC (§2.3)
// ---------------------------------------------------------------------------------------------

/// §2.3 test 1 (L = ∞): c = ηP, q = 2(α − β̂)ηT + η²V_e; Var v = q/(α(2 − α − c/2)),
/// Var θ = Var v·(2 − α)/(2c).
fn sghmc_no_resampling(p: f64, eta: f64, alpha: f64, beta: f64, v_e: f64) -> (f64, f64) {
    let c = eta * p;
    let q = 2.0 * (alpha - beta) * eta + eta * eta * v_e;
    let var_v = q / (alpha * (2.0 - alpha - c / 2.0));
    (var_v * (2.0 - alpha) / (2.0 * c), var_v)
}

fn mul2(a: [f64; 4], b: [f64; 4]) -> [f64; 4] {
    [
        a[0] * b[0] + a[1] * b[2],
        a[0] * b[1] + a[1] * b[3],
        a[2] * b[0] + a[3] * b[2],
        a[2] * b[1] + a[3] * b[3],
    ]
}

/// §2.3 test 2: A = M^L, Q_L = Σ_{j<L} M^j diag(0, q) (M^j)ᵀ with M = [[1, 1], [−c, 1 − α − c]];
/// Var θ = (A₁₂²·ηT + (Q_L)₁₁)/(1 − A₁₁²).
fn sghmc_resampling_var(p: f64, eta: f64, alpha: f64, v_e: f64, l: usize) -> f64 {
    let c = eta * p;
    let q = 2.0 * alpha * eta + eta * eta * v_e;
    let m = [1.0, 1.0, -c, 1.0 - alpha - c];
    let mut mj = [1.0, 0.0, 0.0, 1.0];
    let mut ql11 = 0.0;
    for _ in 0..l {
        ql11 += mj[1] * mj[1] * q; // (M^j diag(0, q) M^jᵀ)₁₁ = (M^j)₁₂²·q
        mj = mul2(m, mj);
    }
    (mj[1] * mj[1] * eta + ql11) / (1.0 - mj[0] * mj[0])
}

fn sghmc(eta: f64, l: usize, alpha: f64, beta: f64, options: SghmcOptions) -> Sghmc {
    Sghmc::new(
        eta,
        l,
        SghmcSettings {
            friction: alpha,
            noise_estimate: beta,
            options,
            ..SghmcSettings::default()
        },
    )
    .unwrap()
}

const NO_RESAMPLING: SghmcOptions = SghmcOptions {
    gradient_before_position_update: false,
    no_momentum_resampling: true,
    shared_minibatch: false,
};

/// (a) §2.3 test 1 with exact gradients on N(0, 1): P = 1, η = 0.01, α = 0.1, L = 1, no
/// resampling: Var θ = 1.0026385, Var v/η = 1.0554090; and with β̂ = 0.05 the injected noise
/// halves (q = 2(α − β̂)η), so both variances halve.
#[test]
fn sghmc_no_resampling_matches_closed_form() {
    let model = GaussianModel::target(&[0.0], &[1.0]).unwrap();
    let (eta, alpha) = (0.01, 0.1);
    let (vt, vv) = sghmc_no_resampling(1.0, eta, alpha, 0.0, 0.0);
    assert!((vt - 1.0026385).abs() < 1e-7 && (vv / eta - 1.0554090).abs() < 1e-7);
    for beta in [0.0, 0.05] {
        let runs = drive_with(
            2,
            21,
            |_| {
                (
                    sghmc(eta, 1, alpha, beta, NO_RESAMPLING),
                    FullBatch::new(&model),
                )
            },
            &[0.0],
            2_000, // the slowest mode decays like (1 − α/2)^t ≈ e^{−0.05t}
            400_000,
            1, // thin
            |_| (),
            record_theta_v,
        );
        let chains: Vec<Vec<f64>> = runs.into_iter().map(|r| r.1).collect();
        let (vt, vv) = sghmc_no_resampling(1.0, eta, alpha, beta, 0.0);
        check_4mcse(&format!("SGHMC β̂={beta} mean θ"), &col(&chains, 2, 0), 0.0);
        check_4mcse(
            &format!("SGHMC β̂={beta} Var θ"),
            &sq_dev(&chains, 2, 0, 0.0),
            vt,
        );
        let v_over_eta: Vec<Vec<f64>> = sq_dev(&chains, 2, 1, 0.0)
            .into_iter()
            .map(|x| x.into_iter().map(|v| v / eta).collect())
            .collect();
        check_4mcse(&format!("SGHMC β̂={beta} Var v/η"), &v_over_eta, vv / eta);
    }
}

/// (b) §2.3 test 2: resampling every L = 5 inner steps, GTM with minibatches (N = 100,
/// n = 10; fresh minibatch at every inner step, so q includes η²·V_e), c = ηP = 0.1, α = 0.2
/// (A₁₁ = 0.30: the outer AR(1) chain is positively correlated).
#[test]
fn sghmc_with_resampling_matches_lyapunov_recipe() {
    let (model, p, m, v_e) = gtm(47, 100, 10, 4.0, &[1.0], &[2.0]);
    let (eta, alpha, l) = (0.1 / p, 0.2, 5);
    let want = sghmc_resampling_var(p, eta, alpha, v_e[0], l);
    let runs = drive_with(
        4,
        22,
        |_| {
            (
                sghmc(eta, l, alpha, 0.0, SghmcOptions::default()),
                Minibatch::new(&model, BatchSize::Count(10)).unwrap(),
            )
        },
        &m,
        200,
        50_000,
        1, // thin
        |_| (),
        record_theta,
    );
    let chains: Vec<Vec<f64>> = runs.into_iter().map(|r| r.1).collect();
    let (no_resample, _) = sghmc_no_resampling(p, eta, alpha, 0.0, v_e[0]);
    eprintln!(
        "(L = ∞ would give {no_resample:.6}; exact posterior 1/P = {:.6})",
        1.0 / p
    );
    check_4mcse("SGHMC L=5 mean θ", &chains, m[0]);
    let z = check_4mcse("SGHMC L=5 Var θ", &sq_dev(&chains, 1, 0, m[0]), want);
    // Power: the variance with exact gradients (no V_e) is clearly rejected.
    let (vh, se) = pooled_mean_mcse(&sq_dev(&chains, 1, 0, m[0]));
    let exact = sghmc_resampling_var(p, eta, alpha, 0.0, l);
    assert!(
        (vh - exact).abs() > 8.0 * se,
        "z = {z}, exact-gradient {exact}"
    );
}

/// (c) §2.3 test 3: P = 1, α = 0.01, η = 0.02 (exact gradients, no resampling, L = 1). The
/// default order is stable with Var θ = 1.99/1.98; the SGMCMCJax order has determinant
/// 1 − α + ηP = 1.01, diverges, and the runner must report the divergence.
#[test]
fn sghmc_stability_regression() {
    let model = GaussianModel::target(&[0.0], &[1.0]).unwrap();
    let (eta, alpha) = (0.02, 0.01);
    let (vt, _) = sghmc_no_resampling(1.0, eta, alpha, 0.0, 0.0);
    assert!((vt - 1.99 / 1.98).abs() < 1e-12);

    let runs = drive_with(
        2,
        23,
        |_| {
            (
                sghmc(eta, 1, alpha, 0.0, NO_RESAMPLING),
                FullBatch::new(&model),
            )
        },
        &[0.0],
        5_000, // energy decays like (1 − α)^t
        1_000_000,
        1, // thin
        |_| (),
        record_theta,
    );
    let chains: Vec<Vec<f64>> = runs.into_iter().map(|r| r.1).collect();
    check_4mcse("SGHMC η=0.02 α=0.01 Var θ", &sq_dev(&chains, 1, 0, 0.0), vt);

    let settings = RunSettings {
        seed: 24,
        chains: 2,
        budget: Budget::Iterations(1_000_000),
        burn_in: 0,
        thin: 1,
    };
    for compat in [false, true] {
        let sink = MemorySink::new(2, 1);
        let report = run(
            &settings,
            |_c, _rng| {
                let options = SghmcOptions {
                    gradient_before_position_update: compat,
                    ..NO_RESAMPLING
                };
                Ok::<_, RunError>(Chain::sampler(
                    Box::new(sghmc(eta, 1, alpha, 0.0, options)),
                    Box::new(FullBatch::new(&model)),
                    vec![0.5],
                ))
            },
            &sink,
            &NoProgress,
        )
        .unwrap();
        if compat {
            assert_eq!(report.diverged_chains(), vec![0, 1]);
            for c in &report.chains {
                let d = c.divergence.as_ref().unwrap();
                // |eigenvalue| = √1.01: ~1.4·10⁵ iterations from O(1) to overflow.
                assert!(d.iteration > 50_000 && d.iteration < 400_000, "{d:?}");
                assert!(d.last_finite_state.iter().all(|v| v.is_finite()));
                assert_eq!(c.draws, d.iteration - 1);
            }
        } else {
            assert!(report.diverged_chains().is_empty());
        }
    }
}

/// (d) Every inner step draws a fresh estimate: L calls per outer iteration plus one at start,
/// in both orders; the emitted score is ĝ at the emitted position.
#[test]
fn sghmc_calls_the_estimator_at_every_inner_step() {
    let model = GaussianModel::target(&[0.0, 1.0], &[1.0, 0.0, 0.0, 2.0]).unwrap();
    for options in [
        SghmcOptions::default(),
        SghmcOptions {
            gradient_before_position_update: true,
            ..SghmcOptions::default()
        },
        NO_RESAMPLING,
    ] {
        let calls = Arc::new(AtomicUsize::new(0));
        let mut est = Counting {
            inner: FullBatch::new(&model),
            calls: calls.clone(),
        };
        let l = 3;
        let mut s = sghmc(0.05, l, 0.1, 0.0, options);
        assert_eq!(s.estimates_per_step(), l);
        let mut rng = chain_stream(3, 0);
        s.start(&[0.1, 0.2], &mut est, &mut rng);
        assert_eq!(calls.load(Ordering::Relaxed), 1);
        for k in 1..=7 {
            s.step(&mut est, &mut rng);
            assert_eq!(calls.load(Ordering::Relaxed), 1 + k * l, "{options:?}");
        }
        let mut g = [0.0; 2];
        FullBatch::new(&model).estimate(s.position(), &mut g, &mut rng);
        assert_eq!(s.score(), &g);
    }
}

/// Minibatch estimates on the GTM with their noise ĝ(θ) − ∇log π(θ) recorded per call (the
/// exact score from a `FullBatch`, which draws nothing); `reuse_batch` is forwarded.
struct NoiseRecorder<'m> {
    inner: Minibatch<'m>,
    exact: FullBatch<'m>,
    buf: Vec<f64>,
    noise: Vec<Vec<f64>>,
}

impl GradientEstimator for NoiseRecorder<'_> {
    fn estimate(&mut self, theta: &[f64], out: &mut [f64], rng: &mut ChainRng) {
        self.inner.estimate(theta, out, rng);
        self.buf.resize(theta.len(), 0.0);
        self.exact.estimate(theta, &mut self.buf, rng);
        self.noise
            .push(out.iter().zip(&self.buf).map(|(g, e)| g - e).collect());
    }
    fn cost_per_estimate(&self) -> usize {
        self.inner.cost_per_estimate()
    }
    fn reuse_batch(&mut self, on: bool) {
        self.inner.reuse_batch(on);
    }
    fn estimate_with_terms(
        &mut self,
        theta: &[f64],
        out: &mut [f64],
        _moments: &mut TermMoments,
        rng: &mut ChainRng,
    ) -> BatchTerms {
        unimplemented!(
            "SGHMC does not ask for per-datum terms {:?}",
            (theta, out, rng)
        )
    }
}

/// (e) `sghmc_shared_minibatch` (BlackJAX, Appendix A): an outer iteration draws exactly one
/// minibatch. Two checks, in both gradient orders:
/// 1. random-number accounting: one iteration consumes exactly the momentum refresh (D
///    normals), L·D momentum-noise normals and **one** draw of n of N indices, in the scheme's
///    order — replayed on a clone of the stream, the states agree (without the option: L draws);
/// 2. on the GTM the minibatch noise (N/n)Σ_{i∈S} xᵢ − Σᵢ xᵢ does not depend on θ, so it is the
///    same at all L inner steps of an iteration (to rounding) and changes between iterations;
///    without the option it changes at every inner step.
#[test]
fn sghmc_shared_minibatch_draws_one_minibatch_per_iteration() {
    use sgmcmc::estimator::Subsampler;
    use sgmcmc::sampler::standard_normal;
    let (n_data, n, l) = (200usize, 20usize, 4usize);
    let (model, _, m, _) = gtm(81, n_data, n, 10.0, &[0.5, -1.0], &[1.5, 1.0]);
    let d = m.len();
    for before_update in [false, true] {
        for shared in [true, false] {
            let options = SghmcOptions {
                gradient_before_position_update: before_update,
                shared_minibatch: shared,
                ..SghmcOptions::default()
            };
            let mut s = sghmc(1e-4, l, 0.1, 0.0, options);
            let mut est = NoiseRecorder {
                inner: Minibatch::new(&model, BatchSize::Count(n)).unwrap(),
                exact: FullBatch::new(&model),
                buf: Vec::new(),
                noise: Vec::new(),
            };
            let mut rng = chain_stream(9, 0);
            s.start(&m, &mut est, &mut rng);
            for _ in 0..5 {
                // 1. Replay the iteration's random numbers on a clone of the stream.
                let mut replay = rng.clone();
                let mut sub = Subsampler::new(n_data);
                let normals = |r: &mut ChainRng| {
                    for _ in 0..d {
                        standard_normal(r);
                    }
                };
                normals(&mut replay); // v ~ N(0, ηT·I)
                for k in 0..l {
                    let draw = !shared || k == 0;
                    if before_update {
                        normals(&mut replay);
                    }
                    if draw {
                        sub.draw(n, &mut replay);
                    }
                    if !before_update {
                        normals(&mut replay);
                    }
                }
                est.noise.clear();
                s.step(&mut est, &mut rng);
                assert_eq!(
                    rng,
                    replay,
                    "shared = {shared}, before_update = {before_update}: the iteration did not \
                     draw {} minibatch(es)",
                    if shared { 1 } else { l }
                );
                // 2. The noise of the L estimates.
                assert_eq!(est.noise.len(), l);
                let scale = est.noise[0].iter().map(|v| v.abs()).fold(0.0, f64::max);
                assert!(scale > 1.0, "no minibatch noise: {scale}");
                let same = |a: &[f64], b: &[f64]| {
                    a.iter().zip(b).all(|(x, y)| (x - y).abs() <= 1e-9 * scale)
                };
                for k in 1..l {
                    assert_eq!(
                        same(&est.noise[0], &est.noise[k]),
                        shared,
                        "shared = {shared}, before_update = {before_update}, inner step {k}: \
                         noise {:?} vs {:?}",
                        est.noise[k],
                        est.noise[0]
                    );
                }
            }
        }
    }
}

#[test]
fn sghmc_rejects_bad_settings() {
    let ok = SghmcSettings::default();
    assert!(Sghmc::new(0.01, 5, ok).is_ok());
    assert!(Sghmc::new(0.0, 5, ok).is_err());
    assert!(Sghmc::new(f64::NAN, 5, ok).is_err());
    assert!(Sghmc::new(0.01, 0, ok).is_err());
    for bad in [
        SghmcSettings {
            noise_estimate: 0.01,
            ..ok
        },
        SghmcSettings {
            noise_estimate: -0.001,
            ..ok
        },
        SghmcSettings {
            friction: 0.0,
            ..ok
        },
        SghmcSettings {
            friction: f64::INFINITY,
            ..ok
        },
        SghmcSettings {
            temperature: -1.0,
            ..ok
        },
    ] {
        assert!(Sghmc::new(0.01, 5, bad).is_err(), "{bad:?}");
    }
}
