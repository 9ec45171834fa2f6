//! CCAdL (Shang, Zhu, Leimkuhler & Storkey 2015, Algorithm 1), reference §2.7: SGNHT-type
//! dynamics in the physical time step h with the gradient-noise covariance Σ̂ estimated online
//! and subtracted as extra friction, so the thermostat ξ settles at A whatever the noise.
//!
//! With the cached estimate ĝₜ and Σ̂ₜ = s·Îₜ at θₜ (Î from [`NoiseCovariance`], s = N²/n from
//! [`BatchTerms::noise_scale`]), one iteration with β = 1/T is
//!
//! 1. p ← p + h·ĝₜ − (h²/2)·β·Σ̂ₜ·p − h·ξ·p + √(2Ah/β)·R   (friction terms use the old p);
//! 2. ξ ← ξ + h·(pᵀp/D − 1/β)   (the new p);
//! 3. θₜ₊₁ = θₜ + h·p;
//! 4. compute ĝₜ₊₁ and the per-datum terms of the same minibatch; update Î.
//!
//! This is Algorithm 1 shifted by half an iteration (the paper's loop starts at the θ update),
//! with the §2.0 convention of emitting (θₜ₊₁, ĝₜ₊₁). At start: ξ₀ = A, p₀ ~ N(0, I/β), Î from
//! the batch at θ₀ (κ₁ = 1).
//!
//! [`CcadlScheme::SghmcComparator`] is the CCAdL paper's SGHMC (its Eq. 14, used for Table 1):
//! constant friction A and the noise reduced by the estimate,
//! p ← p + h·ĝ − h·A·p + √(2h/β)·(A·I − (βh/2)·Σ̂)^{1/2}·R (negative eigenvalues clipped at 0).

use super::noise_covariance::{CovarianceShape, NoiseCovariance, SymmetricFunction};
use super::{
    ChainState, Sampler, SamplerError, add_drift_and_noise, check_range, check_step,
    check_temperature, drift, kick, kinetic, resample_momentum, standard_normal,
};
use crate::checkpoint::{Persist, StateError, StateReader, StateWriter};
use crate::estimator::{BatchTerms, GradientEstimator};
use crate::rng::ChainRng;

/// Dimension above which the covariance defaults to its diagonal (reference §2.7).
pub const FULL_COVARIANCE_MAX_DIM: usize = 200;

/// Which update the sampler runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CcadlScheme {
    /// CCAdL: thermostat ξ plus the covariance-controlled friction (Algorithm 1).
    #[default]
    Ccadl,
    /// The CCAdL paper's SGHMC comparator (Eq. 14): constant friction A, noise reduced by Σ̂.
    SghmcComparator,
}

/// Library extensions of reference Appendix A; all off by default.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CcadlOptions {
    /// `ccadl_finite_population`: multiply N²Î/n by (N − n)/N, the without-replacement factor.
    pub finite_population: bool,
    /// `ccadl_kappa_constant(κ)`: Îₜ = (1 − κ)Îₜ₋₁ + κV, an exponential moving average, instead
    /// of the running mean (κₜ = 1/t).
    pub kappa_constant: Option<f64>,
    /// `ccadl_exponential_friction`: p ← exp(−h·Γ)·p with Γ = ξ·I + (h/2)·β·Σ̂ (or A·I for the
    /// SGHMC comparator) before the force and noise are added, instead of the explicit friction.
    pub exponential_friction: bool,
}

/// CCAdL hyperparameters other than h (reference §2.7).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CcadlSettings {
    /// A ≥ 0: the noise amplitude √(2A) and the thermostat's target and start (required; the
    /// paper uses 1 or 10).
    pub diffusion: f64,
    /// Temperature T = 1/β > 0; 1.
    pub temperature: f64,
    /// Full or diagonal covariance; `None`: full for D ≤ 200, diagonal above.
    pub shape: Option<CovarianceShape>,
    /// Which scheme; CCAdL by default.
    pub scheme: CcadlScheme,
    /// Extensions.
    pub options: CcadlOptions,
}

impl CcadlSettings {
    /// CCAdL with diffusion A and every other setting at its default.
    pub fn new(diffusion: f64) -> Self {
        Self {
            diffusion,
            temperature: 1.0,
            shape: None,
            scheme: CcadlScheme::Ccadl,
            options: CcadlOptions::default(),
        }
    }
}

/// Covariance-controlled adaptive Langevin thermostat.
#[derive(Debug)]
pub struct Ccadl {
    h: f64,
    settings: CcadlSettings,
    /// p.
    p: Vec<f64>,
    /// ξ.
    xi: f64,
    state: ChainState,
    /// What the cached estimate used.
    batch: BatchTerms,
    covariance: NoiseCovariance,
    /// Eigen-workspace for the full shape when a matrix function is needed.
    matrix_function: Option<SymmetricFunction>,
    /// D-length scratch vectors.
    work: Vec<f64>,
    noise: Vec<f64>,
}

impl Ccadl {
    /// CCAdL with physical time step h (reference §1.4) and `settings`.
    pub fn new(h: f64, settings: CcadlSettings) -> Result<Self, SamplerError> {
        check_step(h)?;
        check_temperature(settings.temperature)?;
        check_range(
            "diffusion A",
            settings.diffusion,
            0.0,
            f64::MAX,
            "must be finite and ≥ 0",
        )?;
        if let Some(kappa) = settings.options.kappa_constant {
            check_range("kappa", kappa, f64::MIN_POSITIVE, 1.0, "must be in (0, 1]")?;
        }
        Ok(Self {
            h,
            settings,
            p: Vec::new(),
            xi: settings.diffusion,
            state: ChainState::default(),
            batch: BatchTerms::EXACT,
            covariance: NoiseCovariance::new(CovarianceShape::Full, None),
            matrix_function: None,
            work: Vec::new(),
            noise: Vec::new(),
        })
    }

    /// Sizes the noise covariance (its shape resolved for dimension `d`, Î₀ = 0) and the
    /// workspace for a chain in dimension `d`.
    fn size_for(&mut self, d: usize) {
        let shape = self
            .settings
            .shape
            .unwrap_or(if d > FULL_COVARIANCE_MAX_DIM {
                CovarianceShape::Diagonal
            } else {
                CovarianceShape::Full
            });
        if self.covariance.shape() != shape || self.work.len() != d {
            self.covariance = NoiseCovariance::new(shape, self.settings.options.kappa_constant);
            let needs_function = shape == CovarianceShape::Full
                && (self.settings.options.exponential_friction
                    || self.settings.scheme == CcadlScheme::SghmcComparator);
            self.matrix_function = needs_function.then(|| SymmetricFunction::new(d));
            self.work = vec![0.0; d];
            self.noise = vec![0.0; d];
        }
        self.covariance.reset(d);
    }

    /// The settings in use.
    pub fn settings(&self) -> &CcadlSettings {
        &self.settings
    }

    /// The momentum p.
    pub fn momentum(&self) -> &[f64] {
        &self.p
    }

    /// The thermostat ξ (constant A for the SGHMC comparator).
    pub fn thermostat(&self) -> f64 {
        self.xi
    }

    /// The running estimate Î (its shape is resolved at start).
    pub fn noise_covariance(&self) -> &NoiseCovariance {
        &self.covariance
    }

    /// Recompute the cached estimate at θ with its per-datum terms and fold them into Î.
    fn refresh(&mut self, estimator: &mut dyn GradientEstimator, rng: &mut ChainRng) {
        let state = &mut self.state;
        self.covariance.begin();
        self.batch = estimator.estimate_with_terms(
            &state.theta,
            &mut state.grad,
            self.covariance.moments(),
            rng,
        );
        self.covariance.finish();
    }

    /// The friction step: p ← p − h·ξ·p − c·Î·p (explicit), or p ← exp(−h·Γ)·p with
    /// Γ = ξ·I + (c/h)·Î (exact), where c = (h²/2)·β·s for CCAdL and 0 for the comparator.
    fn friction(&mut self, xi: f64, c: f64) {
        let h = self.h;
        if self.settings.options.exponential_friction {
            let decay = (-h * xi).exp();
            match &mut self.matrix_function {
                Some(f) if c != 0.0 => {
                    if f.decompose(self.covariance.estimate(), c) {
                        f.apply(|l| decay * (-l).exp(), &self.p, &mut self.work);
                        self.p.copy_from_slice(&self.work);
                    } else {
                        self.p.fill(f64::NAN);
                    }
                }
                _ => {
                    for (j, p) in self.p.iter_mut().enumerate() {
                        *p *= decay * (-c * self.covariance.diagonal_entry(j)).exp();
                    }
                }
            }
        } else {
            if c != 0.0 {
                self.covariance.apply(&self.p, &mut self.work);
            } else {
                self.work.fill(0.0);
            }
            self.p
                .iter_mut()
                .zip(&self.work)
                .for_each(|(p, ip)| *p = (1.0 - h * xi) * *p - c * ip);
        }
    }

    /// The comparator's noise √(2hT)·(A·I − (h/(2T))·Σ̂)^{1/2}·R into `self.noise`.
    fn reduced_noise(&mut self, scale: f64, rng: &mut ChainRng) {
        let (h, t, a) = (self.h, self.settings.temperature, self.settings.diffusion);
        let sd = (2.0 * h * t).sqrt();
        let c = h / (2.0 * t) * scale;
        match &mut self.matrix_function {
            Some(f) => {
                for r in self.work.iter_mut() {
                    *r = standard_normal(rng);
                }
                if f.decompose(self.covariance.estimate(), c) {
                    f.apply(
                        |l| sd * (a - l).max(0.0).sqrt(),
                        &self.work,
                        &mut self.noise,
                    );
                } else {
                    self.noise.fill(f64::NAN);
                }
            }
            None => {
                for (j, n) in self.noise.iter_mut().enumerate() {
                    let e = self.covariance.diagonal_entry(j);
                    *n = sd * (a - c * e).max(0.0).sqrt() * standard_normal(rng);
                }
            }
        }
    }
}

/// The state between iterations: momentum, thermostat, θ with its cached estimate, the terms
/// that estimate used and the running noise covariance Î (the rest is workspace, sized for θ
/// when restored).
impl Persist for Ccadl {
    fn save(&self, w: &mut StateWriter) {
        w.nested(5);
        w.field("p", &self.p);
        w.field("xi", &self.xi);
        w.field("state", &self.state);
        w.field("batch", &self.batch);
        w.field("covariance", &self.covariance);
    }
    fn load(&mut self, r: &mut StateReader<'_>) -> Result<(), StateError> {
        r.nested(5)?;
        r.field("p", &mut self.p)?;
        r.field("xi", &mut self.xi)?;
        r.field("state", &mut self.state)?;
        r.field("batch", &mut self.batch)?;
        let d = self.state.theta.len();
        if self.p.len() != d || self.state.grad.len() != d {
            return Err(StateError::Invalid(format!(
                "CCAdL's momentum has {} values and its score {}, its position {d}",
                self.p.len(),
                self.state.grad.len()
            )));
        }
        self.size_for(d);
        r.field("covariance", &mut self.covariance)
    }
}

impl Sampler for Ccadl {
    crate::checkpoint::state_through_persist!();

    /// ξ for CCAdL; none for the SGHMC comparator, whose friction is constant.
    fn thermostat_value(&self) -> Option<f64> {
        match self.settings.scheme {
            CcadlScheme::Ccadl => Some(Ccadl::thermostat(self)),
            CcadlScheme::SghmcComparator => None,
        }
    }

    fn name(&self) -> &'static str {
        match self.settings.scheme {
            CcadlScheme::Ccadl => "ccadl",
            CcadlScheme::SghmcComparator => "sghmc-ccadl-eq14",
        }
    }

    fn start(&mut self, theta0: &[f64], estimator: &mut dyn GradientEstimator, rng: &mut ChainRng) {
        let d = theta0.len();
        self.size_for(d);
        self.p.resize(d, 0.0);
        self.xi = self.settings.diffusion;
        self.state.theta.clear();
        self.state.theta.extend_from_slice(theta0);
        self.state.grad.resize(d, 0.0);
        self.refresh(estimator, rng);
        resample_momentum(&mut self.p, self.settings.temperature.sqrt(), rng);
    }

    fn step(&mut self, estimator: &mut dyn GradientEstimator, rng: &mut ChainRng) {
        let (h, t, a) = (self.h, self.settings.temperature, self.settings.diffusion);
        let scale = self
            .batch
            .noise_scale(self.settings.options.finite_population);
        match self.settings.scheme {
            CcadlScheme::Ccadl => {
                // 1. p ← p − hξp − (h²/2)βΣ̂p + h·ĝ + √(2Ah/β)·R.
                self.friction(self.xi, 0.5 * h * h / t * scale);
                add_drift_and_noise(
                    &mut self.p,
                    &self.state.grad,
                    h,
                    (2.0 * a * h * t).sqrt(),
                    rng,
                );
                // 2. ξ ← ξ + h(pᵀp/D − 1/β).
                self.xi += h * (kinetic(&self.p) / self.p.len() as f64 - t);
            }
            CcadlScheme::SghmcComparator => {
                self.friction(a, 0.0);
                self.reduced_noise(scale, rng);
                kick(&mut self.p, &self.state.grad, h);
                self.p
                    .iter_mut()
                    .zip(&self.noise)
                    .for_each(|(p, n)| *p += n);
            }
        }
        // 3. θ ← θ + h·p.
        drift(&mut self.state.theta, &self.p, h);
        // 4. ĝ, terms and Î at the new θ.
        self.refresh(estimator, rng);
    }

    fn step_size(&self) -> f64 {
        self.h
    }

    /// h ← `step` (every h-dependent factor is computed per iteration); p, ξ and Î are kept.
    fn set_step_size(&mut self, step: f64) -> Result<(), SamplerError> {
        self.h = check_step(step)?;
        Ok(())
    }

    fn position(&self) -> &[f64] {
        &self.state.theta
    }

    fn score(&self) -> &[f64] {
        &self.state.grad
    }
}
