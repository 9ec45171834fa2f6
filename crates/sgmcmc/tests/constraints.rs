//! Constrained parameters (issue 27): each constraint's log-Jacobian checked by sampling a
//! known distribution through it. NUTS samples the *prior* of a model on the unconstrained
//! scale (the likelihood switched off); mapped back, the draws must have the prior's known
//! mean and second moment, within 4 Monte Carlo standard errors (MCSE from the draws' own ESS).
//! A missing or wrong Jacobian moves the mass (e.g. without the term u of σ = eᵘ, a
//! half-normal σ is sampled as if its density were p(σ)/σ).

use sgmcmc::data::{Dataset, Features, Matrix};
use sgmcmc::diagnostics::ess_mean;
use sgmcmc::model::constraint::constrain_draws;
use sgmcmc::model::{
    DataIndex, Glm, Model, ModelError, NoiseModel, Normal, NormalMixture, NormalMixturePriors,
    ParameterPrior, Scratch,
};
use sgmcmc::reference::{NutsSettings, run_nuts};
use sgmcmc::runner::NoProgress;

/// The prior of a model as a posterior: every likelihood term is 0; its parameters and
/// constraints are the model's.
struct PriorOnly<'m>(&'m dyn Model);

impl Model for PriorOnly<'_> {
    fn name(&self) -> &'static str {
        "prior_only"
    }
    fn dim(&self) -> usize {
        self.0.dim()
    }
    fn num_data(&self) -> usize {
        1
    }
    fn parameter_names(&self) -> Vec<String> {
        self.0.parameter_names()
    }
    fn is_constrained(&self) -> bool {
        self.0.is_constrained()
    }
    fn constrain(&self, theta: &[f64], out: &mut [f64]) {
        self.0.constrain(theta, out);
    }
    fn unconstrain(&self, x: &[f64], out: &mut [f64]) -> Result<(), ModelError> {
        self.0.unconstrain(x, out)
    }
    fn log_prior(&self, theta: &[f64]) -> f64 {
        self.0.log_prior(theta)
    }
    fn add_grad_log_prior(&self, theta: &[f64], grad: &mut [f64]) {
        self.0.add_grad_log_prior(theta, grad);
    }
    fn log_lik_each(&self, _: &[f64], _: &[DataIndex], out: &mut [f64], _: &mut Scratch) {
        out.fill(0.0);
    }
    fn grad_log_lik_each(&self, _: &[f64], _: &[DataIndex], out: &mut [f64], _: &mut Scratch) {
        out.fill(0.0);
    }
}

/// Sample the prior of `model` with NUTS (4 chains × 4,000 draws) and check, for each
/// parameter j, the mean and the second moment of its constrained draws against
/// `want[j] = (E x, E x²)` within 4 MCSE; the reference moments' means are those draws'.
fn check_prior_moments(model: &dyn Model, want: &[(f64, f64)], seed: u64) {
    let settings = NutsSettings {
        chains: 4,
        warmup: 1000,
        draws: 4000,
        seed,
        ..NutsSettings::default()
    };
    let r = run_nuts(&PriorOnly(model), &settings, &NoProgress).unwrap();
    assert_eq!(r.divergences(), 0);
    let d = model.dim();
    let chains: Vec<Vec<f64>> = r.draws.iter().map(|c| constrain_draws(model, c)).collect();
    let names = model.parameter_names();
    for (j, &(mean, second)) in want.iter().enumerate() {
        for (power, target) in [(1, mean), (2, second)] {
            let f: Vec<Vec<f64>> = chains
                .iter()
                .map(|c| c.iter().skip(j).step_by(d).map(|x| x.powi(power)).collect())
                .collect();
            let all: Vec<f64> = f.concat();
            let n = all.len() as f64;
            let m = all.iter().sum::<f64>() / n;
            let var = all.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1.0);
            let slices: Vec<&[f64]> = f.iter().map(Vec::as_slice).collect();
            let mcse = (var / ess_mean(&slices)).sqrt();
            if power == 1 {
                // The reference moments are on the same constrained scale as the draws.
                let reference = r.moments.mean[j];
                assert!(
                    (reference - m).abs() <= 1e-9 * (1.0 + m.abs()),
                    "reference mean of {}: {reference} vs {m}",
                    names[j]
                );
            }
            assert!(
                (m - target).abs() <= 4.0 * mcse,
                "E[{}^{power}]: {m:.4} vs {target:.4} (4 MCSE = {:.4})",
                names[j],
                4.0 * mcse
            );
        }
    }
}

/// Ordered means (x₁ < x₂ of two N(0, 2²): E = ∓2/√π, E x² = 4), half-normal(2) sds through
/// exp (E σ = 2√(2/π), E σ² = 4) and a Beta(5, 5) weight through the logistic function
/// (E w = ½, E w² = 3/11): the three constraints of the mixture.
///
/// Break-once checks (each restored): the ordered log-Jacobian Σₖ≥₂ uₖ set to 0 fails
/// ("E[mu[2]^1]: -1.0186 vs 1.1284"); the exp map's log-Jacobian u set to 0 fails both tests
/// (the density of u = log σ is then improper and the MAP search that starts NUTS fails); the
/// logistic map's log-Jacobian set to 0 fails on a divergence (w pushed to 0 or 1).
#[test]
fn the_mixtures_constraints_carry_their_priors() {
    let model = NormalMixture::new(vec![0.0], NormalMixturePriors::default()).unwrap();
    let m = 2.0 / std::f64::consts::PI.sqrt();
    let s = 2.0 * (2.0 / std::f64::consts::PI).sqrt();
    let want = [(-m, 4.0), (m, 4.0), (s, 4.0), (s, 4.0), (0.5, 3.0 / 11.0)];
    check_prior_moments(&model, &want, 5);
}

/// A linear regression whose coefficients, intercept and σ each have their own prior:
/// Student-t(7, 1, 2) coefficients (E = 1, E x² = 1 + 4·7/5), a N(3, ½²) intercept and an
/// exponential(2) σ through exp (E σ = ½, E σ² = ½).
#[test]
fn a_regressions_groups_each_carry_their_prior() {
    let x = Matrix::from_vec(vec![0.5, -1.0, 2.0, 0.1], 2, 2).unwrap();
    let data = Dataset {
        features: Features::F64(x),
        targets: Some(vec![1.0, 2.0]),
        feature_names: Vec::new(),
        features_source: "test".into(),
        targets_source: None,
    };
    let noise = NoiseModel::Sigma {
        prior: ParameterPrior::Exponential { rate: 2.0 },
    };
    let coefficients = ParameterPrior::StudentT {
        df: 7.0,
        location: 1.0,
        scale: 2.0,
    };
    let model = Glm::new(data, Normal::new(noise).unwrap(), coefficients, true)
        .unwrap()
        .with_intercept_prior(ParameterPrior::Normal {
            location: 3.0,
            scale: 0.5,
        })
        .unwrap();
    assert_eq!(
        model.parameter_names(),
        ["beta[0]", "beta[1]", "intercept", "sigma"]
    );
    let t = (1.0, 1.0 + 4.0 * 7.0 / 5.0);
    let want = [t, t, (3.0, 9.25), (0.5, 0.5)];
    check_prior_moments(&model, &want, 6);
}

/// A coefficient prior off the real line, or a σ prior off σ > 0, is refused by the model
/// itself (not only by the run file).
#[test]
fn priors_on_the_wrong_support_are_refused() {
    let data = || Dataset {
        features: Features::F64(Matrix::from_vec(vec![0.5, -1.0], 2, 1).unwrap()),
        targets: Some(vec![1.0, 2.0]),
        feature_names: Vec::new(),
        features_source: "test".into(),
        targets_source: None,
    };
    let fixed = || Normal::new(NoiseModel::Fixed { variance: 1.0 }).unwrap();
    let half = ParameterPrior::HalfNormal { scale: 1.0 };
    let e = Glm::new(data(), fixed(), half, false).err().unwrap();
    assert!(e.to_string().contains("not on the real line"), "{e}");
    let e = Glm::new(data(), fixed(), ParameterPrior::Flat, true)
        .unwrap()
        .with_intercept_prior(ParameterPrior::Exponential { rate: 1.0 })
        .err()
        .unwrap();
    assert!(e.to_string().contains("not on the real line"), "{e}");
    let sigma = NoiseModel::Sigma {
        prior: ParameterPrior::Normal {
            location: 0.0,
            scale: 1.0,
        },
    };
    assert!(Normal::new(sigma).is_err());
}

/// The Laplace sds on the reported scale (delta method through the constraints) against their
/// closed forms for the mixture: x₁ = θ₁, x₂ = θ₁ + e^θ₂ (var Σ₁₁ + 2e^θ₂Σ₁₂ + e^{2θ₂}Σ₂₂),
/// σ = e^θ (sd e^θ·sd θ), w = logistic(θ) (sd w(1 − w)·sd θ).
#[test]
fn laplace_sds_are_carried_through_the_constraints() {
    use sgmcmc::reference::LaplaceApproximation;
    let model = NormalMixture::new(vec![0.0], NormalMixturePriors::default()).unwrap();
    let mean = vec![0.3, 0.2, -0.5, 0.1, 0.4];
    // Σ = AAᵀ + I/10 for a fixed A: symmetric positive definite with correlations.
    let a = [
        [0.5, 0.1, 0.0, 0.2, -0.1],
        [0.3, 0.4, 0.1, 0.0, 0.0],
        [0.0, -0.2, 0.3, 0.1, 0.0],
        [0.1, 0.0, 0.2, 0.6, 0.1],
        [0.0, 0.1, 0.0, -0.3, 0.2],
    ];
    let mut covariance = vec![0.0; 25];
    for i in 0..5 {
        for j in 0..5 {
            covariance[i * 5 + j] =
                (0..5).map(|k| a[i][k] * a[j][k]).sum::<f64>() + if i == j { 0.1 } else { 0.0 };
        }
    }
    let sd: Vec<f64> = (0..5).map(|i| covariance[i * 5 + i].sqrt()).collect();
    let laplace = LaplaceApproximation {
        mean: mean.clone(),
        covariance: covariance.clone(),
        sd: sd.clone(),
    };
    let got = laplace.reported_sd(&model);
    let e = mean[1].exp();
    let w = 1.0 / (1.0 + (-mean[4]).exp());
    let want = [
        sd[0],
        (covariance[0] + 2.0 * e * covariance[1] + e * e * covariance[6]).sqrt(),
        mean[2].exp() * sd[2],
        mean[3].exp() * sd[3],
        w * (1.0 - w) * sd[4],
    ];
    for (j, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= 1e-6 * w, "parameter {j}: {g} vs {w}");
    }
}
