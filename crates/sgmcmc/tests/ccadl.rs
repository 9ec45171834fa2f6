//! CCAdL (reference §2.7): the degenerate case against SGNHT step for step, the exact thermostat
//! identity, the thermostat equilibrium on the Gaussian test model for every variant, and the
//! Normal-Gamma experiment (CCAdL paper §4.1), where the gradient noise depends on θ.
//! Statistical checks follow §1.6 (4 MCSE from the integrated autocorrelation time).
//!
//! Checked once by breaking `src/sampler/ccadl.rs`:
//! - covariance friction removed (CCAdL becomes SGNHT): the GTM equilibrium fails (ξ̄ = 1.42 vs
//!   0.946, 4 MCSE = 0.11) and the Normal-Gamma test fails (CCAdL no longer the lowest error);
//! - ‖p‖ in place of pᵀp in the thermostat: every test but the estimator check fails (identity
//!   4.02 vs 0.88; ξ̄ = −0.27 vs 0.946);
//! - noise √(AhT) in place of √(2AhT): the step-for-step, GTM (ξ̄ = 0.40 vs 0.946) and
//!   Normal-Gamma tests fail.

use crate::common;

use common::{check, dot, drive, gtm, mean};
use sgmcmc::estimator::{
    BatchSize, ControlVariates, FullBatch, GradientEstimator, Minibatch, Svrg,
};
use sgmcmc::model::{Bernoulli, LogisticRegression, Model, NormalPrior, TermMoments};
use sgmcmc::rng::{ChainRng, chain_stream};
use sgmcmc::sampler::{
    Ccadl, CcadlOptions, CcadlSettings, CovarianceShape, Sampler, SamplerError, Sgnht,
    SgnhtSettings,
};

fn settings(a: f64, shape: CovarianceShape, options: CcadlOptions) -> CcadlSettings {
    CcadlSettings {
        shape: Some(shape),
        options,
        ..CcadlSettings::new(a)
    }
}

/// §2.7 test 1: if every datum has the same gradient, V ≡ 0 and CCAdL is the CCAdL paper's
/// SGNHT, i.e. our SGNHT with η = h², a = h·A (§1.4), drawing the same random numbers in the same
/// order: the trajectories agree to rounding, for both shapes and at T ≠ 1.
#[test]
fn degenerate_noise_reproduces_sgnht_step_for_step() {
    let (model, _, m, _) = gtm(71, 100, 10, 10.0, &[0.5, -1.0, 2.0], &[0.0; 3]);
    for (shape, t) in [
        (CovarianceShape::Full, 1.0),
        (CovarianceShape::Diagonal, 1.5),
    ] {
        let (h, a) = (0.01, 1.0);
        let mut ccadl = Ccadl::new(
            h,
            CcadlSettings {
                temperature: t,
                ..settings(a, shape, CcadlOptions::default())
            },
        )
        .unwrap();
        let mut sgnht = Sgnht::new(
            h * h,
            SgnhtSettings {
                diffusion: h * a,
                temperature: t,
            },
        )
        .unwrap();
        let mut e1 = Minibatch::new(&model, BatchSize::Count(10)).unwrap();
        let mut e2 = Minibatch::new(&model, BatchSize::Count(10)).unwrap();
        let (mut r1, mut r2) = (chain_stream(5, 0), chain_stream(5, 0));
        let start = [0.3, 0.1, -0.2];
        ccadl.start(&start, &mut e1, &mut r1);
        sgnht.start(&start, &mut e2, &mut r2);
        let mut moved = 0.0f64;
        for step in 0..2000 {
            ccadl.step(&mut e1, &mut r1);
            sgnht.step(&mut e2, &mut r2);
            for (x, y) in ccadl.position().iter().zip(sgnht.position()) {
                assert!(
                    (x - y).abs() <= 1e-9 * (1.0 + y.abs()),
                    "step {step}: {x} vs {y}"
                );
                moved = moved.max((y - start[0]).abs());
            }
            assert!((ccadl.thermostat() - sgnht.thermostat() / h).abs() < 1e-8);
        }
        assert!(moved > 0.1, "the chains hardly moved");
        // The noise really was degenerate: Î ≈ 0, up to rounding (entries of 10⁻²²–1.8·10⁻²⁰
        // here, depending on which rows the minibatches hold; the same data with spread 1 give
        // a diagonal of 0.8–1.1: docs/experiments/data/sgld_rejection/ccadl_degenerate_noise.txt).
        let estimate = ccadl.noise_covariance().estimate();
        assert!(estimate.iter().all(|v| v.abs() < 1e-16), "{estimate:?}");
        let _ = m;
    }
}

/// §2.7 test 3: summing the thermostat update gives mean_t(pₜᵀpₜ/D) = 1/β + (ξ_end − ξ₀)/(h·n)
/// for any discretisation, estimator and noise; only rounding separates the sides.
#[test]
fn thermostat_identity_is_exact() {
    let (model, _, m, _) = gtm(72, 200, 20, 10.0, &[0.5; 4], &[1.5; 4]);
    for (h, t, shape) in [
        (1e-3, 1.0, CovarianceShape::Full),
        (2e-3, 0.5, CovarianceShape::Diagonal),
    ] {
        let s = CcadlSettings {
            temperature: t,
            ..settings(1.0, shape, CcadlOptions::default())
        };
        let mut c = Ccadl::new(h, s).unwrap();
        let mut est = Minibatch::new(&model, BatchSize::Count(20)).unwrap();
        let mut rng = chain_stream(7, 0);
        c.start(&m, &mut est, &mut rng);
        let xi0 = c.thermostat();
        let n = 20_000;
        let mut sum = 0.0;
        for _ in 0..n {
            c.step(&mut est, &mut rng);
            sum += dot(c.momentum(), c.momentum()) / 4.0;
        }
        let lhs = sum / n as f64;
        let rhs = t + (c.thermostat() - xi0) / (h * n as f64);
        eprintln!("CCAdL identity (h={h}, T={t}): {lhs:.15e} vs {rhs:.15e}");
        assert!((lhs - rhs).abs() <= 1e-9 * t, "{lhs} vs {rhs}");
    }
}

/// SGNHT (in CCAdL's units) or CCAdL, so one driver runs all variants.
enum Thermostatted {
    /// SGNHT with η = h², a = h·A; v = h·p and α = h·ξ.
    Sgnht(Sgnht, f64),
    Ccadl(Box<Ccadl>),
}

impl Thermostatted {
    fn sgnht(h: f64, a: f64) -> Self {
        let s = SgnhtSettings {
            diffusion: h * a,
            temperature: 1.0,
        };
        Self::Sgnht(Sgnht::new(h * h, s).unwrap(), h)
    }

    fn ccadl(h: f64, a: f64, shape: CovarianceShape, options: CcadlOptions) -> Self {
        Self::Ccadl(Box::new(
            Ccadl::new(h, settings(a, shape, options)).unwrap(),
        ))
    }

    fn inner(&self) -> &dyn Sampler {
        match self {
            Self::Sgnht(s, _) => s,
            Self::Ccadl(c) => c.as_ref(),
        }
    }

    fn inner_mut(&mut self) -> &mut dyn Sampler {
        match self {
            Self::Sgnht(s, _) => s,
            Self::Ccadl(c) => c.as_mut(),
        }
    }

    /// ξ.
    fn xi(&self) -> f64 {
        match self {
            Self::Sgnht(s, h) => s.thermostat() / h,
            Self::Ccadl(c) => c.thermostat(),
        }
    }

    /// pᵀp/D.
    fn kinetic_per_dim(&self) -> f64 {
        (match self {
            Self::Sgnht(s, h) => dot(s.momentum(), s.momentum()) / (h * h),
            Self::Ccadl(c) => dot(c.momentum(), c.momentum()),
        }) / self.inner().position().len() as f64
    }
}

impl Sampler for Thermostatted {
    fn name(&self) -> &'static str {
        self.inner().name()
    }
    fn start(&mut self, theta0: &[f64], e: &mut dyn GradientEstimator, rng: &mut ChainRng) {
        self.inner_mut().start(theta0, e, rng)
    }
    fn step(&mut self, e: &mut dyn GradientEstimator, rng: &mut ChainRng) {
        self.inner_mut().step(e, rng)
    }
    fn step_size(&self) -> f64 {
        self.inner().step_size()
    }
    fn set_step_size(&mut self, step: f64) -> Result<(), SamplerError> {
        self.inner_mut().set_step_size(step)
    }
    fn position(&self) -> &[f64] {
        self.inner().position()
    }
    fn score(&self) -> &[f64] {
        self.inner().score()
    }
}

/// §2.7 test 4 on the GTM (D = 5, N = 1000, n = 100, data N(0, (1/3)²), τ₀² = 10, h = 10⁻³,
/// A = 1, 4·10⁵ steps with the first 20 % discarded; per-coordinate noise V_e ≈ 1000):
/// - SGNHT's thermostat absorbs the noise: ξ̄ = A + h·V_e/2;
/// - CCAdL with the (N − n)/N factor removes it: ξ̄ = A;
/// - CCAdL without it over-corrects by N/(N − n): ξ̄ = A − (h/2)·(N/(N − n) − 1)·V_e;
/// - every variant holds the kinetic temperature, mean pᵀp/D = 1 (the injected minibatch noise
///   has the known covariance V_e·I), has Var ξ ≈ 1/D, and samples the posterior: Var θ·P = 1.
///
/// The ξ̄ closed forms are continuous-time limits; the discretisation moves them by O(h·P) ≈
/// 1e-3 relative, allowed for on top of 4 MCSE.
#[test]
fn thermostat_equilibrium_on_gtm() {
    let (d, n_data, n, h, a) = (5usize, 1000usize, 100usize, 1e-3, 1.0);
    let (model, p, m, v_e) = gtm(73, n_data, n, 10.0, &vec![0.0; d], &vec![1.0 / 3.0; d]);
    let v_e = mean(&v_e);
    let over = n_data as f64 / (n_data - n) as f64;
    let none = CcadlOptions::default();
    let fp = CcadlOptions {
        finite_population: true,
        ..none
    };
    let fp_exp = CcadlOptions {
        exponential_friction: true,
        ..fp
    };
    let variants: [(&str, &(dyn Fn() -> Thermostatted + Sync), f64); 4] = [
        ("SGNHT", &|| Thermostatted::sgnht(h, a), a + h * v_e / 2.0),
        (
            "CCAdL (full)",
            &|| Thermostatted::ccadl(h, a, CovarianceShape::Full, none),
            a - h / 2.0 * (over - 1.0) * v_e,
        ),
        (
            "CCAdL (full, finite population)",
            &|| Thermostatted::ccadl(h, a, CovarianceShape::Full, fp),
            a,
        ),
        (
            "CCAdL (diagonal, finite population, exponential friction)",
            &|| Thermostatted::ccadl(h, a, CovarianceShape::Diagonal, fp_exp),
            a,
        ),
    ];
    let steps = 400_000;
    let burn = steps / 5;
    let mut xibars = Vec::new();
    for (k, (name, make, want_xi)) in variants.iter().enumerate() {
        // Record ξ, pᵀp/D and Σⱼ(θⱼ − mⱼ)²·P/D.
        let runs = drive(
            2,
            730 + k as u64,
            |_| (make(), Minibatch::new(&model, BatchSize::Count(n)).unwrap()),
            &m,
            burn,
            steps - burn,
            |s: &Thermostatted, out| {
                out.push(s.xi());
                out.push(s.kinetic_per_dim());
                let sq: f64 = s
                    .position()
                    .iter()
                    .zip(&m)
                    .map(|(t, m)| (t - m).powi(2))
                    .sum();
                out.push(sq * p / d as f64);
            },
        );
        let series = |j: usize| -> Vec<Vec<f64>> {
            runs.iter()
                .map(|r| r.chunks_exact(3).map(|x| x[j]).collect())
                .collect()
        };
        let (xibar, _) = check(&format!("{name} ξ̄"), &series(0), *want_xi, 2e-3 * want_xi);
        check(&format!("{name} mean pᵀp/D"), &series(1), 1.0, 0.0);
        check(&format!("{name} Var θ·P"), &series(2), 1.0, 0.0);
        let devs: Vec<Vec<f64>> = series(0)
            .iter()
            .map(|x| x.iter().map(|v| (v - xibar).powi(2)).collect())
            .collect();
        // Var ξ = 1/(βμ) = 1/D in continuous time; the reference's runs gave 0.19–0.24.
        check(&format!("{name} Var ξ"), &devs, 1.0 / d as f64, 0.0);
        xibars.push(xibar);
    }
    // The robust ordering of the reference: SGNHT > CCAdL with the factor > CCAdL without.
    assert!(xibars[0] > xibars[2] && xibars[2] > xibars[1], "{xibars:?}");
}

/// The estimator seam CCAdL relies on: `estimate_with_terms` returns the same estimate as
/// `estimate` from the same stream (same minibatch), passes every term, and its terms rebuild
/// the random part: ĝ − ĝ(terms zeroed) = w·Σₖ tₖ. Checked for the standard, control-variate
/// and SVRG estimators on a logistic regression, where per-datum gradients differ.
#[test]
fn estimate_with_terms_matches_estimate_for_every_estimator() {
    let (x, y) = common::logistic_data(74, 1500, &[1.0, -2.0, 0.5], 0.3);
    let data = common::dataset(x, 3, Some(y), false);
    let model =
        LogisticRegression::new(data, Bernoulli, NormalPrior::new(1.0).unwrap(), true).unwrap();
    let theta0 = [0.9, -1.8, 0.4, 0.2];
    let centre = [1.0, -2.0, 0.5, 0.3];
    type Pair<'m> = (
        &'static str,
        Box<dyn GradientEstimator + 'm>,
        Box<dyn GradientEstimator + 'm>,
    );
    let estimators: Vec<Pair> = vec![
        (
            "minibatch",
            Box::new(Minibatch::new(&model, BatchSize::Count(600)).unwrap()),
            Box::new(Minibatch::new(&model, BatchSize::Count(600)).unwrap()),
        ),
        (
            "control variates",
            Box::new(ControlVariates::new(&model, BatchSize::Count(600), &centre).unwrap()),
            Box::new(ControlVariates::new(&model, BatchSize::Count(600), &centre).unwrap()),
        ),
        (
            "svrg",
            Box::new(Svrg::new(&model, BatchSize::Count(600), Some(3)).unwrap()),
            Box::new(Svrg::new(&model, BatchSize::Count(600), Some(3)).unwrap()),
        ),
    ];
    for (name, mut plain, mut with_terms) in estimators {
        plain.restart(&centre);
        with_terms.restart(&centre);
        let (mut r1, mut r2) = (chain_stream(9, 0), chain_stream(9, 0));
        let mut terms = TermMoments::new(CovarianceShape::Full, 4);
        for call in 0..6 {
            // θ moves between calls, so SVRG's centre (set at refresh calls) differs from θ.
            let theta = theta0.map(|t| t + 0.05 * call as f64);
            let (mut g1, mut g2) = ([0.0; 4], [0.0; 4]);
            plain.estimate(&theta, &mut g1, &mut r1);
            terms.begin();
            let batch = with_terms.estimate_with_terms(&theta, &mut g2, &mut terms, &mut r2);
            assert_eq!(terms.count(), batch.rows, "{name}: every term is passed");
            for (a, b) in g1.iter().zip(&g2) {
                assert!(
                    (a - b).abs() <= 1e-9 * (1.0 + a.abs()),
                    "{name} call {call}: {g1:?} vs {g2:?}"
                );
            }
            if name == "svrg" && call % 3 == 0 {
                assert_eq!(batch.rows, 0, "an SVRG refresh is exact");
                continue;
            }
            assert_eq!((batch.rows, batch.population), (600, 1500), "{name}");
            assert!((batch.weight - 2.5).abs() < 1e-15);
            // The terms have spread (so CCAdL sees noise) and sum to the random part: for the
            // standard estimator, ĝ = ∇log p(θ) + w·Σ tₖ.
            let mut m2 = [0.0; 16];
            terms.add_centred_second_moments(1.0, &mut m2);
            assert!(m2[0] > 0.0, "{name}: terms are all equal");
            if name == "minibatch" {
                let mut sum = [0.0; 4];
                terms.sum_of_terms(&mut sum);
                let mut rebuilt = [0.0; 4];
                model.add_grad_log_prior(&theta, &mut rebuilt);
                rebuilt
                    .iter_mut()
                    .zip(sum)
                    .for_each(|(r, t)| *r += batch.weight * t);
                for (a, b) in rebuilt.iter().zip(&g2) {
                    assert!(
                        (a - b).abs() <= 1e-9 * (1.0 + a.abs()),
                        "{rebuilt:?} vs {g2:?}"
                    );
                }
            }
        }
    }
}

/// With exact (full-batch) gradients there are no terms, Î = 0, and CCAdL is SGNHT with η = h²,
/// a = h·A step for step, here on a rotated non-isotropic 5-D Gaussian: so the exact-gradient
/// closed-form test of SGNHT (`samplers_exact_gaussian`) covers CCAdL too.
#[test]
fn exact_gradients_make_ccadl_sgnht() {
    let mu = [1.0, -2.0, 0.5, 3.0, -1.0];
    let v = common::random_orthogonal(31, 5);
    let sigma = common::from_eigen(&v, &[1.0, 1.7, 3.0, 5.5, 10.0], 5);
    let model = sgmcmc::model::GaussianModel::target(&mu, &sigma).unwrap();
    let (h, a) = (0.05, 1.0);
    let mut ccadl = Ccadl::new(h, CcadlSettings::new(a)).unwrap();
    let sgnht_settings = SgnhtSettings {
        diffusion: h * a,
        temperature: 1.0,
    };
    let mut sgnht = Sgnht::new(h * h, sgnht_settings).unwrap();
    let (mut e1, mut e2) = (FullBatch::new(&model), FullBatch::new(&model));
    let (mut r1, mut r2) = (chain_stream(6, 0), chain_stream(6, 0));
    ccadl.start(&mu, &mut e1, &mut r1);
    sgnht.start(&mu, &mut e2, &mut r2);
    for step in 0..10_000 {
        ccadl.step(&mut e1, &mut r1);
        sgnht.step(&mut e2, &mut r2);
        for (x, y) in ccadl.position().iter().zip(sgnht.position()) {
            assert!(
                (x - y).abs() <= 1e-8 * (1.0 + y.abs()),
                "step {step}: {x} vs {y}"
            );
        }
    }
    assert!(
        ccadl
            .noise_covariance()
            .estimate()
            .iter()
            .all(|&v| v == 0.0)
    );
}
