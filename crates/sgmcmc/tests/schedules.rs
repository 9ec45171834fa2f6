//! Step-size schedules (reference §1.4) through [`Scheduled`], and the `step_size` /
//! `set_step_size` contract every sampler implements: a scheduled chain is the hand-written
//! chain with the scheduled steps, and switching a sampler's step is the same as building it
//! with that step, bit for bit.

use crate::common;

use common::gtm;
use sgmcmc::estimator::{BatchSize, FullBatch, GradientEstimator, Minibatch};
use sgmcmc::model::GaussianModel;
use sgmcmc::rng::chain_stream;
use sgmcmc::sampler::{
    Badodab, BadodabSettings, Baoab, BaoabSettings, Ccadl, CcadlOptions, CcadlScheme,
    CcadlSettings, Psgld, PsgldSettings, Sampler, SamplerError, Scheduled, Sghmc, SghmcOptions,
    SghmcSettings, Sgld, Sgnht, SgnhtSettings, StepSchedule, StepSize, standard_normal,
};

/// Every sampler, at step `step` (its own units), with non-default temperatures and options so
/// that every derived constant depends on more than the step.
fn all_samplers(step: f64) -> Vec<Box<dyn Sampler>> {
    vec![
        Box::new(Sgld::new(StepSize::Langevin(step), 1.3).unwrap()),
        Box::new(
            Psgld::new(
                StepSize::Langevin(step),
                PsgldSettings {
                    temperature: 0.7,
                    ..PsgldSettings::default()
                },
            )
            .unwrap(),
        ),
        Box::new(
            Sghmc::new(
                step,
                3,
                SghmcSettings {
                    friction: 0.2,
                    noise_estimate: 0.05,
                    temperature: 1.5,
                    options: SghmcOptions {
                        no_momentum_resampling: true,
                        ..SghmcOptions::default()
                    },
                },
            )
            .unwrap(),
        ),
        Box::new(
            Sgnht::new(
                step,
                SgnhtSettings {
                    diffusion: 0.05,
                    temperature: 1.2,
                },
            )
            .unwrap(),
        ),
        Box::new(
            Baoab::new(
                step,
                2.0,
                BaoabSettings {
                    temperature: 1.4,
                    ..BaoabSettings::default()
                },
            )
            .unwrap(),
        ),
        Box::new(
            Baoab::new(
                step,
                2.0,
                BaoabSettings {
                    temperature: 1.4,
                    noise_std_scaled_by_tau: true,
                    ..BaoabSettings::default()
                },
            )
            .unwrap(),
        ),
        Box::new(
            Badodab::new(
                step,
                BadodabSettings {
                    temperature: 0.9,
                    ..BadodabSettings::default()
                },
            )
            .unwrap(),
        ),
        Box::new(
            Ccadl::new(
                step,
                CcadlSettings {
                    temperature: 1.1,
                    ..CcadlSettings::new(2.0)
                },
            )
            .unwrap(),
        ),
        Box::new(
            Ccadl::new(
                step,
                CcadlSettings {
                    scheme: CcadlScheme::SghmcComparator,
                    options: CcadlOptions {
                        exponential_friction: true,
                        ..CcadlOptions::default()
                    },
                    ..CcadlSettings::new(2.0)
                },
            )
            .unwrap(),
        ),
    ]
}

/// `steps` iterations from `theta0` on chain stream 0 of `seed`, with minibatch estimates;
/// every position, flattened.
fn trajectory(
    s: &mut dyn Sampler,
    model: &GaussianModel,
    theta0: &[f64],
    seed: u64,
    steps: usize,
) -> Vec<f64> {
    let mut est = Minibatch::new(model, BatchSize::Count(10)).unwrap();
    let mut rng = chain_stream(seed, 0);
    s.start(theta0, &mut est, &mut rng);
    let mut out = Vec::new();
    for _ in 0..steps {
        s.step(&mut est, &mut rng);
        out.extend_from_slice(s.position());
    }
    out
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// A polynomial schedule on SGLD (N(0, I₂), exact gradients) against the hand-written loop
/// θₜ = θₜ₋₁ + εₜ·∇log π(θₜ₋₁) + √(2εₜT)·ξₜ, εₜ = a·(b + t)^(−γ), on the same stream: bit for
/// bit. The same run with the constant step ε₁ differs from step 2 on, so a schedule that is
/// ignored fails.
#[test]
fn scheduled_sgld_is_the_hand_written_loop_with_polynomial_steps() {
    let model = GaussianModel::target(&[0.5, -1.0], &[1.0, 0.0, 0.0, 1.0]).unwrap();
    let (a, b, gamma, t_temp) = (0.2, 3.0, 0.55, 1.0);
    let theta0 = [2.0, 1.0];
    let steps = 40;
    let schedule = StepSchedule::polynomial(a, b, gamma).unwrap();
    let eps1 = a * (b + 1.0f64).powf(-gamma);
    let mut s = Scheduled::new(
        Sgld::new(StepSize::Langevin(eps1), t_temp).unwrap(),
        schedule,
    )
    .unwrap();
    let mut est = FullBatch::new(&model);
    let mut rng = chain_stream(17, 0);
    s.start(&theta0, &mut est, &mut rng);
    assert_eq!(s.step_size(), eps1);

    let mut hand_rng = chain_stream(17, 0);
    let mut theta = theta0.to_vec();
    let mut g = vec![0.0; 2];
    FullBatch::new(&model).estimate(&theta, &mut g, &mut hand_rng);
    let mut constant = Sgld::new(StepSize::Langevin(eps1), t_temp).unwrap();
    let mut const_rng = chain_stream(17, 0);
    constant.start(&theta0, &mut FullBatch::new(&model), &mut const_rng);
    for t in 1..=steps {
        s.step(&mut est, &mut rng);
        constant.step(&mut FullBatch::new(&model), &mut const_rng);
        let eps = a * (b + t as f64).powf(-gamma);
        let sd = (2.0 * eps * t_temp).sqrt();
        for (x, gi) in theta.iter_mut().zip(&g) {
            *x += eps * gi + sd * standard_normal(&mut hand_rng);
        }
        FullBatch::new(&model).estimate(&theta, &mut g, &mut hand_rng);
        assert_eq!(s.iteration(), t);
        assert_eq!(s.step_size(), eps, "t = {t}");
        assert_eq!(bits(s.position()), bits(&theta), "t = {t}");
        assert_eq!(bits(s.score()), bits(&g), "t = {t}");
        if t >= 2 {
            assert!(
                (constant.position()[0] - theta[0]).abs() > 1e-9,
                "t = {t}: the constant-step chain should have left the scheduled one"
            );
        }
    }
}

/// `set_step_size(s)` on a sampler built with another step gives the chain of a sampler built
/// with s, bit for bit, for every sampler (all derived constants recomputed), and `step_size`
/// reports s. Bad steps are errors that change nothing.
#[test]
fn set_step_size_is_construction_with_that_step() {
    let (model, _, m, _) = gtm(91, 100, 10, 10.0, &[0.5, -1.0], &[1.5, 1.0]);
    let (s1, s2) = (2e-4, 5e-4);
    for (mut built, mut switched) in all_samplers(s2).into_iter().zip(all_samplers(s1)) {
        let name = built.name();
        assert_eq!(switched.step_size(), s1, "{name}");
        switched.set_step_size(s2).unwrap();
        assert_eq!(switched.step_size(), s2, "{name}");
        assert_eq!(built.step_size(), s2, "{name}");
        let a = trajectory(built.as_mut(), &model, &m, 5, 50);
        let b = trajectory(switched.as_mut(), &model, &m, 5, 50);
        assert_eq!(bits(&a), bits(&b), "{name}");
        for bad in [0.0, -1e-3, f64::NAN, f64::INFINITY] {
            assert!(
                matches!(
                    switched.set_step_size(bad),
                    Err(SamplerError::BadStepSize(_))
                ),
                "{name}: {bad}"
            );
            assert_eq!(switched.step_size(), s2, "{name}");
        }
    }
    // SGLD and pSGLD report ε whichever convention built them.
    let wt = Sgld::new(StepSize::WellingTeh(2e-3), 1.0).unwrap();
    assert_eq!(wt.step_size(), 1e-3);
    let dt = Psgld::from_catalogue_dt(2e-3, PsgldSettings::default()).unwrap();
    assert_eq!(dt.step_size(), 1e-3);
}

/// A constant schedule is the plain sampler, bit for bit (including what the samplers draw
/// from their step at start, e.g. SGNHT's v₀); a cyclical one sets εₜ before every iteration
/// t, restarts at ε₀ every m iterations, and `start` resets t.
#[test]
fn scheduled_samplers_apply_the_schedule_every_iteration() {
    let (model, _, m, _) = gtm(92, 100, 10, 10.0, &[0.5, -1.0], &[1.5, 1.0]);
    let step = 3e-4;
    for (mut plain, inner) in all_samplers(step).into_iter().zip(all_samplers(step)) {
        let name = plain.name();
        let mut constant = Scheduled::new(inner, StepSchedule::constant(step).unwrap()).unwrap();
        let a = trajectory(plain.as_mut(), &model, &m, 6, 30);
        let b = trajectory(&mut constant, &model, &m, 6, 30);
        assert_eq!(bits(&a), bits(&b), "{name}");
    }
    for inner in all_samplers(step) {
        let name = inner.name();
        let schedule = StepSchedule::cyclical(step, 3, 30).unwrap();
        let m_len = schedule.cycle_length().unwrap();
        assert_eq!(m_len, 10);
        let mut s = Scheduled::new(inner, schedule).unwrap();
        assert_eq!(s.name(), name);
        let mut est = Minibatch::new(&model, BatchSize::Count(10)).unwrap();
        let mut rng = chain_stream(7, 0);
        for _restart in 0..2 {
            s.start(&m, &mut est, &mut rng);
            assert_eq!((s.iteration(), s.step_size()), (0, step), "{name}");
            for t in 1..=35 {
                s.step(&mut est, &mut rng);
                assert_eq!(s.step_size(), schedule.at(t), "{name}, t = {t}");
                assert_eq!(
                    s.step_size() == step,
                    (t - 1) % m_len == 0,
                    "{name}, t = {t}"
                );
                assert!(s.position().iter().all(|v| v.is_finite()), "{name}");
            }
        }
    }
}
