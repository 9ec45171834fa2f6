//! [`SamplerSettings`]: every sampler of the catalogue as one serialisable value, and the one
//! place that builds it.

use super::{EstimatorKind, EstimatorSettings, SettingsError};
use crate::mh::{
    self, AcceptanceTest, AusterityTest, BarkerTest, CorrectionBank, ExactRule, ExactTest,
    MhKernel, WorkshopTest,
};
use crate::model::Model;
use crate::sampler::{
    Badodab, BadodabSettings, Baoab, BaoabSettings, Ccadl, CcadlOptions, CcadlSettings,
    ChainKernel, CovarianceShape, Psgld, PsgldSettings, Sampler, SamplerKernel, Sghmc,
    SghmcOptions, SghmcSettings, Sgld, Sgnht, SgnhtSettings, StepSize,
};

/// A sampler and its hyperparameters, as the `[sampler]` table of a run file writes them
/// (`kind` and its keys). [`SamplerSettings::build`] turns it into a fresh [`Sampler`]; the unit
/// conversions (h/2, dt/2) and the validation happen there and nowhere else.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)
)]
pub enum SamplerSettings {
    /// SGLD (reference §2.1). Give `step_size` (ε, catalogue convention) or `welling_teh_step`
    /// (h = 2ε).
    Sgld {
        /// ε: θ + ε·ĝ + √(2ε)·ξ.
        #[cfg_attr(
            feature = "serde",
            serde(default, skip_serializing_if = "Option::is_none")
        )]
        step_size: Option<f64>,
        /// h of Welling & Teh: θ + (h/2)·ĝ + √h·ξ.
        #[cfg_attr(
            feature = "serde",
            serde(default, skip_serializing_if = "Option::is_none")
        )]
        welling_teh_step: Option<f64>,
        /// Posterior temperature T (targets π^{1/T}).
        #[cfg_attr(feature = "serde", serde(default = "one"))]
        temperature: f64,
    },
    /// pSGLD (reference §2.2): SGLD with an RMSProp preconditioner G = 1/(√V + λ), in the same ε
    /// convention as SGLD (`catalogue_dt` = the catalogue's dt, i.e. ε = dt/2).
    Psgld {
        /// ε: θ + ε·G⊙ĝ + √(2εT·G)⊙ξ.
        #[cfg_attr(
            feature = "serde",
            serde(default, skip_serializing_if = "Option::is_none")
        )]
        step_size: Option<f64>,
        /// The catalogue/SGMCMCJax step dt (ε = dt/2).
        #[cfg_attr(
            feature = "serde",
            serde(default, skip_serializing_if = "Option::is_none")
        )]
        catalogue_dt: Option<f64>,
        /// RMSProp decay ρ of V ← ρV + (1 − ρ)ĝ⊙ĝ.
        #[cfg_attr(feature = "serde", serde(default = "default_decay"))]
        decay: f64,
        /// Stabiliser λ in G = 1/(√V + λ).
        #[cfg_attr(feature = "serde", serde(default = "default_stabiliser"))]
        stabiliser: f64,
        /// Posterior temperature T.
        #[cfg_attr(feature = "serde", serde(default = "one"))]
        temperature: f64,
    },
    /// SGHMC (reference §2.3): momentum resampled every iteration, then `inner_steps` steps each
    /// with a fresh gradient estimate.
    Sghmc {
        /// η, the learning rate of the v-parameterisation (η = h²).
        step_size: f64,
        /// L, inner steps per iteration (each costs one gradient estimate).
        inner_steps: usize,
        /// Friction α.
        #[cfg_attr(feature = "serde", serde(default = "default_friction"))]
        friction: f64,
        /// Gradient-noise estimate β̂ (0 ≤ β̂ < α).
        #[cfg_attr(feature = "serde", serde(default))]
        noise_estimate: f64,
        /// Posterior temperature T.
        #[cfg_attr(feature = "serde", serde(default = "one"))]
        temperature: f64,
        /// Compatibility: SGMCMCJax's order (gradient before the position update).
        #[cfg_attr(feature = "serde", serde(default))]
        gradient_before_position_update: bool,
        /// Compatibility: carry the momentum across iterations.
        #[cfg_attr(feature = "serde", serde(default))]
        no_momentum_resampling: bool,
        /// Compatibility: one minibatch for all L inner steps (BlackJAX).
        #[cfg_attr(feature = "serde", serde(default))]
        shared_minibatch: bool,
    },
    /// SGNHT (reference §2.4): Euler scheme, one global thermostat.
    Sgnht {
        /// η, as for SGHMC.
        step_size: f64,
        /// Diffusion a (also the initial thermostat value).
        #[cfg_attr(feature = "serde", serde(default = "default_friction"))]
        diffusion: f64,
        /// Posterior temperature T.
        #[cfg_attr(feature = "serde", serde(default = "one"))]
        temperature: f64,
    },
    /// BAOAB (reference §2.5): underdamped Langevin splitting.
    Baoab {
        /// h, the physical time step.
        step_size: f64,
        /// γ, the friction of the O step.
        friction: f64,
        /// Posterior temperature T.
        #[cfg_attr(feature = "serde", serde(default = "one"))]
        temperature: f64,
        /// Compatibility: start from v = 0 (SGMCMCJax).
        #[cfg_attr(feature = "serde", serde(default))]
        zero_initial_momentum: bool,
        /// Compatibility: O-step noise sd multiplied by τ = T (SGMCMCJax), not its variance.
        #[cfg_attr(feature = "serde", serde(default))]
        noise_std_scaled_by_tau: bool,
    },
    /// BADODAB (reference §2.6): splitting scheme for the SGNHT dynamics.
    Badodab {
        /// h, the physical time step.
        step_size: f64,
        /// Initial thermostat α₀ = a.
        #[cfg_attr(feature = "serde", serde(default = "default_friction"))]
        initial_thermostat: f64,
        /// Thermal mass μ.
        #[cfg_attr(feature = "serde", serde(default = "one"))]
        thermal_mass: f64,
        /// Noise amplitude σ.
        #[cfg_attr(feature = "serde", serde(default = "one"))]
        noise_amplitude: f64,
        /// Posterior temperature T.
        #[cfg_attr(feature = "serde", serde(default = "one"))]
        temperature: f64,
    },
    /// CCAdL (reference §2.7): SGNHT dynamics with the estimated gradient-noise covariance
    /// subtracted as friction. Needs minibatches of at least 2 points.
    Ccadl {
        /// h, the physical time step.
        step_size: f64,
        /// A: noise amplitude √(2A), thermostat target and start (the paper uses 1 or 10).
        diffusion: f64,
        /// Posterior temperature T = 1/β.
        #[cfg_attr(feature = "serde", serde(default = "one"))]
        temperature: f64,
        /// `"full"` or `"diagonal"`; default full for D ≤ 200, diagonal above.
        #[cfg_attr(
            feature = "serde",
            serde(default, skip_serializing_if = "Option::is_none")
        )]
        covariance: Option<CovarianceShape>,
        /// Extension: the (N − n)/N without-replacement factor on the noise covariance.
        #[cfg_attr(feature = "serde", serde(default))]
        finite_population: bool,
        /// Extension: a constant κ in (0, 1] (exponential moving average) instead of κₜ = 1/t.
        #[cfg_attr(
            feature = "serde",
            serde(default, skip_serializing_if = "Option::is_none")
        )]
        kappa: Option<f64>,
        /// Extension: the exact friction step p ← exp(−hΓ)·p.
        #[cfg_attr(feature = "serde", serde(default))]
        exponential_friction: bool,
    },
    /// Metropolis–Hastings on large data (reference §6): a `proposal`, then an accept/reject
    /// `test` on minibatches of the per-datum likelihood ratios. E.g.
    /// `kind = "mh"`, `proposal = { kind = "random_walk", sd = 0.05 }`, `test = "barker"`,
    /// `batch_size = 100`.
    Mh {
        /// q(θ' | θ): `random_walk` (sd), `langevin` (step_size) or `hamiltonian` (step_size,
        /// steps); gradient proposals use the `[gradient]` estimator with one minibatch per
        /// iteration.
        proposal: mh::Proposal,
        /// `barker` (the minibatch test with X_corr; default), `workshop` (the workshop's
        /// version with the bank of curves), `austerity`, `exact_barker` or `exact_metropolis`
        /// (full data).
        #[cfg_attr(feature = "serde", serde(default))]
        test: MhTestKind,
        /// Batch increment m of the minibatch tests (Barker: the fixed batch; Austerity: the
        /// sequential increment). Ignored by the exact tests.
        #[cfg_attr(feature = "serde", serde(default = "default_mh_batch"))]
        batch_size: usize,
        /// Likelihood temperature T (targets p₀(θ)·Πᵢp(xᵢ | θ)^{1/T}).
        #[cfg_attr(feature = "serde", serde(default = "one"))]
        temperature: f64,
        /// Barker: what to do when s² ≥ σ²: `grow` (default), `grow_doubling`, `skip` or
        /// `raise_temperature`.
        #[cfg_attr(feature = "serde", serde(default))]
        policy: mh::FailurePolicy,
        /// Barker: `finite_population` (default) or `population_no_fpc` (the references').
        #[cfg_attr(feature = "serde", serde(default))]
        variance: mh::VarianceEstimate,
        /// Barker: the correction table's σ with the ridge construction (N_g = 4000, λ = 10 on
        /// [−20, 20]); σ = 1 (default) uses the table built into the binary, other values are
        /// built at start-up.
        #[cfg_attr(feature = "serde", serde(default = "one"))]
        sigma: f64,
        /// Austerity's tolerance ε.
        #[cfg_attr(feature = "serde", serde(default = "default_austerity_tolerance"))]
        tolerance: f64,
        /// The workshop test: K, the minibatches whose Δ' give the standard deviation s.
        #[cfg_attr(feature = "serde", serde(default = "default_workshop_minibatches"))]
        minibatches: usize,
        /// The workshop test: skip the iteration when s ≥ this (the workshop: 1.2).
        #[cfg_attr(feature = "serde", serde(default = "default_workshop_threshold"))]
        std_threshold: f64,
        /// The workshop test: weight α of the moving average of s across iterations
        /// (1 = no smoothing, the default).
        #[cfg_attr(feature = "serde", serde(default = "one"))]
        std_smoothing: f64,
    },
}

/// The accept/reject test of `kind = "mh"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum MhTestKind {
    /// The minibatch Barker test with the X_corr correction (Seita et al.).
    #[default]
    Barker,
    /// Austerity's sequential t-test (Korattikara et al. 2014).
    Austerity,
    /// The workshop version (reference §6.6): K minibatches estimate s, skip when s ≥ 1.2,
    /// else X_c from the bank curve whose σ is closest to s on a fresh minibatch.
    Workshop,
    /// Full-data Barker acceptance 1/(1 + e^(−Δ)).
    ExactBarker,
    /// Full-data Metropolis acceptance min(1, e^Δ).
    ExactMetropolis,
}

#[cfg(feature = "serde")]
fn default_mh_batch() -> usize {
    100
}

#[cfg(feature = "serde")]
fn default_austerity_tolerance() -> f64 {
    0.05
}

#[cfg(feature = "serde")]
fn default_workshop_minibatches() -> usize {
    10
}

#[cfg(feature = "serde")]
fn default_workshop_threshold() -> f64 {
    1.2
}

fn default_decay() -> f64 {
    0.99
}

fn default_stabiliser() -> f64 {
    1e-5
}

fn default_friction() -> f64 {
    0.01
}

fn one() -> f64 {
    1.0
}

/// One value of a sampler key, as a grid of values or a program gives it: an integer, a
/// number, a switch or a word (e.g. `covariance = "diagonal"`).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(untagged))]
pub enum GridValue {
    /// An integer (also accepted where a number is expected).
    Integer(i64),
    /// A number.
    Float(f64),
    /// A switch.
    Bool(bool),
    /// A word.
    Text(String),
}

impl std::fmt::Display for GridValue {
    /// As a run file writes it: `10`, `0.5`, `1.0`, `true`, `"diagonal"`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GridValue::Integer(i) => write!(f, "{i}"),
            GridValue::Float(x) if x.is_finite() && x.fract() == 0.0 && x.abs() < 1e16 => {
                write!(f, "{x:.1}")
            }
            GridValue::Float(x) => write!(f, "{x}"),
            GridValue::Bool(b) => write!(f, "{b}"),
            GridValue::Text(t) => write!(f, "{t:?}"),
        }
    }
}

#[cfg(feature = "serde")]
impl From<&GridValue> for serde_json::Value {
    fn from(v: &GridValue) -> Self {
        match v {
            GridValue::Integer(i) => serde_json::Value::from(*i),
            GridValue::Float(x) => serde_json::Value::from(*x),
            GridValue::Bool(b) => serde_json::Value::from(*b),
            GridValue::Text(t) => serde_json::Value::from(t.as_str()),
        }
    }
}

/// Each sampler with its step (and, where the run file requires them, its other keys) and
/// every other hyperparameter at the run file's default.
impl SamplerSettings {
    /// SGLD with step ε (θ + ε·ĝ + √(2ε)·ξ), T = 1.
    pub fn sgld(step_size: f64) -> Self {
        SamplerSettings::Sgld {
            step_size: Some(step_size),
            welling_teh_step: None,
            temperature: one(),
        }
    }

    /// pSGLD with step ε, ρ = 0.99, λ = 1e-5, T = 1.
    pub fn psgld(step_size: f64) -> Self {
        SamplerSettings::Psgld {
            step_size: Some(step_size),
            catalogue_dt: None,
            decay: default_decay(),
            stabiliser: default_stabiliser(),
            temperature: one(),
        }
    }

    /// SGHMC with η and L inner steps, α = 0.01, β̂ = 0, T = 1.
    pub fn sghmc(step_size: f64, inner_steps: usize) -> Self {
        SamplerSettings::Sghmc {
            step_size,
            inner_steps,
            friction: default_friction(),
            noise_estimate: 0.0,
            temperature: one(),
            gradient_before_position_update: false,
            no_momentum_resampling: false,
            shared_minibatch: false,
        }
    }

    /// SGNHT with η, a = 0.01, T = 1.
    pub fn sgnht(step_size: f64) -> Self {
        SamplerSettings::Sgnht {
            step_size,
            diffusion: default_friction(),
            temperature: one(),
        }
    }

    /// BAOAB with h and friction γ, T = 1.
    pub fn baoab(step_size: f64, friction: f64) -> Self {
        SamplerSettings::Baoab {
            step_size,
            friction,
            temperature: one(),
            zero_initial_momentum: false,
            noise_std_scaled_by_tau: false,
        }
    }

    /// BADODAB with h, α₀ = 0.01, μ = 1, σ = 1, T = 1.
    pub fn badodab(step_size: f64) -> Self {
        SamplerSettings::Badodab {
            step_size,
            initial_thermostat: default_friction(),
            thermal_mass: one(),
            noise_amplitude: one(),
            temperature: one(),
        }
    }

    /// CCAdL with h and diffusion A, the default covariance shape, T = 1.
    pub fn ccadl(step_size: f64, diffusion: f64) -> Self {
        SamplerSettings::Ccadl {
            step_size,
            diffusion,
            temperature: one(),
            covariance: None,
            finite_population: false,
            kappa: None,
            exponential_friction: false,
        }
    }
}

impl SamplerSettings {
    /// A copy with the constant step set to `step` in the sampler's own units (ε for
    /// SGLD/pSGLD, η for SGHMC/SGNHT, h for BAOAB/BADODAB/CCAdL); for SGLD and pSGLD the
    /// other convention's key (`welling_teh_step`, `catalogue_dt`) is cleared. The value is
    /// checked when the sampler is built.
    pub fn with_step_size(&self, step: f64) -> Result<Self, SettingsError> {
        let mut out = self.clone();
        match &mut out {
            SamplerSettings::Sgld {
                step_size,
                welling_teh_step,
                ..
            } => {
                *step_size = Some(step);
                *welling_teh_step = None;
            }
            SamplerSettings::Psgld {
                step_size,
                catalogue_dt,
                ..
            } => {
                *step_size = Some(step);
                *catalogue_dt = None;
            }
            SamplerSettings::Sghmc { step_size, .. }
            | SamplerSettings::Sgnht { step_size, .. }
            | SamplerSettings::Baoab { step_size, .. }
            | SamplerSettings::Badodab { step_size, .. }
            | SamplerSettings::Ccadl { step_size, .. } => *step_size = step,
            SamplerSettings::Mh { .. } => return Err(SettingsError::NoStep),
        }
        Ok(out)
    }

    /// A copy with the key `key` (as the `[sampler]` table names it) set to `value`, checked
    /// exactly as a run file is: a key this kind does not have, or a value of the wrong type,
    /// is an error naming it. Generic over every key through the settings' own serde form (one
    /// source of truth for the keys); `kind` cannot be changed.
    pub fn with_key(&self, key: &str, value: &GridValue) -> Result<Self, SettingsError> {
        if key == "kind" {
            return Err(SettingsError::Key("`kind` cannot be changed".into()));
        }
        #[cfg(not(feature = "serde"))]
        {
            let _ = value;
            Err(SettingsError::Key(format!(
                "setting `{key}` by name needs the feature `serde` (the settings' serde form \
                 names the keys)"
            )))
        }
        #[cfg(feature = "serde")]
        self.with_key_by_serde(key, value)
    }

    /// [`SamplerSettings::with_key`] through the settings' own serde form.
    #[cfg(feature = "serde")]
    fn with_key_by_serde(&self, key: &str, value: &GridValue) -> Result<Self, SettingsError> {
        let mut map = match serde_json::to_value(self) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => unreachable!("sampler settings serialise to a map"),
        };
        map.insert(key.to_string(), value.into());
        serde_json::from_value(serde_json::Value::Object(map))
            .map_err(|e| SettingsError::Key(e.to_string()))
    }

    /// Whether this is minibatch Metropolis–Hastings (`kind = "mh"`), a chain kernel of its
    /// own that reads the model ([`SamplerSettings::build_mh`]).
    pub fn is_mh(&self) -> bool {
        matches!(self, SamplerSettings::Mh { .. })
    }

    /// A fresh stochastic-gradient sampler (every kind but `mh`, a kernel of its own:
    /// [`SamplerSettings::build_mh`]).
    pub fn build(&self) -> Result<Box<dyn Sampler>, SettingsError> {
        let one_of = |a: Option<f64>, b: Option<f64>, names: &'static str| match (a, b) {
            (Some(_), None) | (None, Some(_)) => Ok((a, b)),
            _ => Err(SettingsError::OneStepKey(names)),
        };
        Ok(match self {
            SamplerSettings::Sgld {
                step_size,
                welling_teh_step,
                temperature,
            } => {
                let step = match one_of(
                    *step_size,
                    *welling_teh_step,
                    "`step_size` and `welling_teh_step`",
                )? {
                    (Some(e), _) => StepSize::Langevin(e),
                    (_, h) => StepSize::WellingTeh(h.expect("one is set")),
                };
                Box::new(Sgld::new(step, *temperature)?)
            }
            SamplerSettings::Psgld {
                step_size,
                catalogue_dt,
                decay,
                stabiliser,
                temperature,
            } => {
                let settings = PsgldSettings {
                    decay: *decay,
                    stabiliser: *stabiliser,
                    temperature: *temperature,
                    ..PsgldSettings::default()
                };
                match one_of(*step_size, *catalogue_dt, "`step_size` and `catalogue_dt`")? {
                    (Some(e), _) => Box::new(Psgld::new(StepSize::Langevin(e), settings)?),
                    (_, dt) => {
                        Box::new(Psgld::from_catalogue_dt(dt.expect("one is set"), settings)?)
                    }
                }
            }
            SamplerSettings::Sghmc {
                step_size,
                inner_steps,
                friction,
                noise_estimate,
                temperature,
                gradient_before_position_update,
                no_momentum_resampling,
                shared_minibatch,
            } => {
                let settings = SghmcSettings {
                    friction: *friction,
                    noise_estimate: *noise_estimate,
                    temperature: *temperature,
                    options: SghmcOptions {
                        gradient_before_position_update: *gradient_before_position_update,
                        no_momentum_resampling: *no_momentum_resampling,
                        shared_minibatch: *shared_minibatch,
                    },
                };
                Box::new(Sghmc::new(*step_size, *inner_steps, settings)?)
            }
            SamplerSettings::Sgnht {
                step_size,
                diffusion,
                temperature,
            } => {
                let settings = SgnhtSettings {
                    diffusion: *diffusion,
                    temperature: *temperature,
                };
                Box::new(Sgnht::new(*step_size, settings)?)
            }
            SamplerSettings::Baoab {
                step_size,
                friction,
                temperature,
                zero_initial_momentum,
                noise_std_scaled_by_tau,
            } => {
                let settings = BaoabSettings {
                    temperature: *temperature,
                    zero_initial_momentum: *zero_initial_momentum,
                    noise_std_scaled_by_tau: *noise_std_scaled_by_tau,
                };
                Box::new(Baoab::new(*step_size, *friction, settings)?)
            }
            SamplerSettings::Badodab {
                step_size,
                initial_thermostat,
                thermal_mass,
                noise_amplitude,
                temperature,
            } => {
                let settings = BadodabSettings {
                    initial_thermostat: *initial_thermostat,
                    thermal_mass: *thermal_mass,
                    noise_amplitude: *noise_amplitude,
                    temperature: *temperature,
                };
                Box::new(Badodab::new(*step_size, settings)?)
            }
            SamplerSettings::Ccadl {
                step_size,
                diffusion,
                temperature,
                covariance,
                finite_population,
                kappa,
                exponential_friction,
            } => {
                let settings = CcadlSettings {
                    temperature: *temperature,
                    shape: *covariance,
                    options: CcadlOptions {
                        finite_population: *finite_population,
                        kappa_constant: *kappa,
                        exponential_friction: *exponential_friction,
                    },
                    ..CcadlSettings::new(*diffusion)
                };
                Box::new(Ccadl::new(*step_size, settings)?)
            }
            SamplerSettings::Mh { .. } => return Err(SettingsError::MhNeedsModel),
        })
    }

    /// Whether the kernel computes score estimates: every stochastic-gradient sampler, and
    /// minibatch MH with a gradient proposal (not the random walk).
    pub fn uses_gradient(&self) -> bool {
        match self {
            SamplerSettings::Mh { proposal, .. } => proposal.uses_gradient(),
            _ => true,
        }
    }

    /// A fresh chain kernel of any kind on `model`: minibatch MH
    /// ([`SamplerSettings::build_mh`]), or the sampler driven by its own estimator from
    /// `gradient` (built about `centre` for control variates and SVRG). The estimator is built
    /// only if the kernel uses one ([`SamplerSettings::uses_gradient`]).
    pub fn build_chain<'m>(
        &self,
        model: &'m dyn Model,
        gradient: &EstimatorSettings,
        centre: Option<&[f64]>,
    ) -> Result<Box<dyn ChainKernel + Send + 'm>, SettingsError> {
        let estimator = if self.uses_gradient() {
            Some(gradient.build(model, centre)?)
        } else {
            None
        };
        match estimator {
            Some(estimator) if !self.is_mh() => {
                let sampler: Box<dyn Sampler + 'm> = self.build()?;
                Ok(Box::new(SamplerKernel::new(sampler, estimator)))
            }
            estimator => Ok(Box::new(
                self.build_mh(model, estimator)?
                    .with_scheme(gradient.scheme),
            )),
        }
    }

    /// Minibatch Metropolis–Hastings (`kind = "mh"`) on `model` as its own chain kernel: the
    /// test reads the model's per-datum likelihood ratios; a gradient proposal takes its score
    /// estimates from `estimator`, which the random walk must not be given
    /// ([`SamplerSettings::uses_gradient`]). An error for the other kinds.
    pub fn build_mh<'m>(
        &self,
        model: &'m dyn Model,
        estimator: Option<Box<dyn crate::estimator::GradientEstimator + 'm>>,
    ) -> Result<MhKernel<'m>, SettingsError> {
        let (proposal, test) = self.mh_parts(model)?;
        Ok(MhKernel::new(model, proposal, test, estimator)?)
    }

    /// Check that this sampler can be built for `model` without building its estimator:
    /// [`SamplerSettings::build`], or for `mh` its proposal and test on the model's data.
    pub fn check_for(&self, model: &dyn Model) -> Result<(), SettingsError> {
        if self.is_mh() {
            let (proposal, _) = self.mh_parts(model)?;
            proposal
                .validate()
                .map_err(|e| SettingsError::Sampler(crate::sampler::SamplerError::Invalid(e)))
        } else {
            self.build().map(drop)
        }
    }

    /// MH's proposal and accept/reject test on `model`.
    fn mh_parts(&self, model: &dyn Model) -> Result<(mh::Proposal, AcceptanceTest), SettingsError> {
        let SamplerSettings::Mh {
            proposal,
            test,
            batch_size,
            temperature,
            policy,
            variance,
            sigma,
            tolerance,
            minibatches,
            std_threshold,
            std_smoothing,
        } = self
        else {
            return Err(SettingsError::NotMh);
        };
        let n = model.num_data();
        if matches!(
            test,
            MhTestKind::Barker | MhTestKind::Austerity | MhTestKind::Workshop
        ) && *batch_size > n
        {
            return Err(SettingsError::MhBatchTooLarge {
                batch: *batch_size,
                n,
            });
        }
        let test = match test {
            MhTestKind::Barker => AcceptanceTest::Barker(BarkerTest::new(
                mh::correction_table(*sigma)?,
                *batch_size,
                *temperature,
                *policy,
                *variance,
            )?),
            MhTestKind::Workshop => AcceptanceTest::Workshop(
                WorkshopTest::new(
                    CorrectionBank::workshop()?,
                    *batch_size,
                    *minibatches,
                    *std_threshold,
                    *temperature,
                )?
                .with_smoothing(*std_smoothing)?,
            ),
            MhTestKind::Austerity => AcceptanceTest::Austerity(AusterityTest::new(
                *batch_size,
                *tolerance,
                *temperature,
            )?),
            MhTestKind::ExactBarker => {
                AcceptanceTest::Exact(ExactTest::new(ExactRule::Barker, *temperature)?)
            }
            MhTestKind::ExactMetropolis => {
                AcceptanceTest::Exact(ExactTest::new(ExactRule::Metropolis, *temperature)?)
            }
        };
        Ok((*proposal, test))
    }

    /// Check that this sampler can run with the gradient estimator `gradient` on `model`:
    /// CCAdL estimates a covariance from each minibatch, so it needs at least 2 points per
    /// batch; MH with a gradient proposal needs one fixed gradient per iteration (not SVRG).
    pub fn check_with_estimator(
        &self,
        gradient: &EstimatorSettings,
        model: &dyn Model,
    ) -> Result<(), SettingsError> {
        if let SamplerSettings::Mh { proposal, .. } = self
            && proposal.uses_gradient()
            && gradient.estimator == EstimatorKind::Svrg
        {
            return Err(SettingsError::MhGradientWithSvrg);
        }
        if let SamplerSettings::Ccadl { .. } = self {
            let n = match gradient.estimator {
                EstimatorKind::Full => model.num_data(),
                _ => gradient.batch_size.resolve(model.num_data())?,
            };
            if n < 2 && n < model.num_data() {
                return Err(SettingsError::CcadlBatch(n));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What a run file with just the required keys gives.
    fn from_table(value: serde_json::Value) -> SamplerSettings {
        serde_json::from_value(value).expect("a valid [sampler] table")
    }

    /// The constructors give exactly the run file's defaults (a changed default in one place
    /// only fails here).
    #[test]
    fn constructors_match_the_run_files_defaults() {
        let cases = [
            (
                SamplerSettings::sgld(1e-4),
                json!({"kind": "sgld", "step_size": 1e-4}),
            ),
            (
                SamplerSettings::psgld(1e-3),
                json!({"kind": "psgld", "step_size": 1e-3}),
            ),
            (
                SamplerSettings::sghmc(1e-5, 5),
                json!({"kind": "sghmc", "step_size": 1e-5, "inner_steps": 5}),
            ),
            (
                SamplerSettings::sgnht(1e-5),
                json!({"kind": "sgnht", "step_size": 1e-5}),
            ),
            (
                SamplerSettings::baoab(0.01, 1.0),
                json!({"kind": "baoab", "step_size": 0.01, "friction": 1.0}),
            ),
            (
                SamplerSettings::badodab(0.01),
                json!({"kind": "badodab", "step_size": 0.01}),
            ),
            (
                SamplerSettings::ccadl(0.01, 1.0),
                json!({"kind": "ccadl", "step_size": 0.01, "diffusion": 1.0}),
            ),
        ];
        for (built, table) in cases {
            assert_eq!(built, from_table(table.clone()), "{table}");
            built.build().expect("builds");
        }
    }

    /// Minibatch MH is a chain kernel of its own: the random walk gets no estimator (and
    /// refuses one), a gradient proposal needs one, and the other kinds are not MH.
    #[test]
    fn mh_kernels_hold_an_estimator_only_for_gradient_proposals() {
        use crate::data::{Features, Matrix};
        use crate::model::GaussianModel;
        let x = Matrix::from_vec((0..40).map(|i| (i % 7) as f64 / 7.0).collect(), 40, 1).unwrap();
        let model = GaussianModel::new(Features::F64(x), &[1.0], 10.0).unwrap();
        let random_walk = from_table(
            json!({"kind": "mh", "proposal": {"kind": "random_walk", "sd": 0.1}, "test": "barker", "batch_size": 10}),
        );
        let langevin = from_table(
            json!({"kind": "mh", "proposal": {"kind": "langevin", "step_size": 1e-3}, "test": "exact_metropolis"}),
        );
        assert!(!random_walk.uses_gradient() && langevin.uses_gradient());
        assert!(SamplerSettings::sgld(1e-3).uses_gradient());
        let gradient = EstimatorSettings::default();
        // Built through the one entry point; each runs and reports MH counts.
        for settings in [&random_walk, &langevin] {
            let mut kernel = settings.build_chain(&model, &gradient, None).unwrap();
            let mut rng = crate::rng::stream(1, 0);
            kernel.start(&[0.5], &mut rng);
            kernel.step(&mut rng);
            assert!(
                matches!(kernel.statistics(), Some(crate::sampler::SamplerStatistics::Mh(s)) if s.iterations == 1)
            );
        }
        let estimator = || Some(gradient.build(&model, None).unwrap());
        let e = random_walk
            .build_mh(&model, estimator())
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("random-walk") && e.contains("no estimator"),
            "{e}"
        );
        let e = langevin.build_mh(&model, None).err().unwrap().to_string();
        assert!(e.contains("needs a gradient estimator"), "{e}");
        let e = SamplerSettings::sgld(1e-3)
            .build_mh(&model, None)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("kind = \"mh\""), "{e}");
        assert!(random_walk.check_for(&model).is_ok());
    }

    /// `with_step_size` sets the step in the sampler's own units and clears the other
    /// convention; `with_key` checks keys and types as the run file does.
    #[test]
    fn steps_and_keys_are_set_as_the_run_file_would() {
        let sgld = from_table(json!({"kind": "sgld", "welling_teh_step": 2e-4}));
        assert_eq!(
            sgld.with_step_size(1e-4).unwrap(),
            SamplerSettings::sgld(1e-4)
        );
        assert!(matches!(
            SamplerSettings::Mh {
                proposal: mh::Proposal::RandomWalk { sd: 0.1 },
                test: MhTestKind::Barker,
                batch_size: 10,
                temperature: 1.0,
                policy: Default::default(),
                variance: Default::default(),
                sigma: 1.0,
                tolerance: 0.05,
                minibatches: 10,
                std_threshold: 1.2,
                std_smoothing: 1.0,
            }
            .with_step_size(1e-3),
            Err(SettingsError::NoStep)
        ));
        let sghmc = SamplerSettings::sghmc(1e-5, 5);
        assert_eq!(
            sghmc
                .with_key("inner_steps", &GridValue::Integer(10))
                .unwrap(),
            SamplerSettings::sghmc(1e-5, 10)
        );
        let friction = sghmc.with_key("friction", &GridValue::Integer(1)).unwrap();
        assert!(matches!(friction, SamplerSettings::Sghmc { friction, .. } if friction == 1.0));
        let e = SamplerSettings::sgld(1e-4)
            .with_key("inner_steps", &GridValue::Integer(10))
            .unwrap_err()
            .to_string();
        assert!(e.contains("inner_steps"), "{e}");
        let e = sghmc
            .with_key("inner_steps", &GridValue::Float(2.5))
            .unwrap_err()
            .to_string();
        assert!(e.contains("2.5"), "{e}");
        assert!(
            sghmc
                .with_key("kind", &GridValue::Text("sgld".into()))
                .is_err()
        );
        assert_eq!(GridValue::Float(1.0).to_string(), "1.0");
        assert_eq!(GridValue::Text("full".into()).to_string(), "\"full\"");
    }
}
