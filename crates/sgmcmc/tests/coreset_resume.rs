//! Coreset MCMC checkpoints (issue 25): the chains are coupled through the weights, so a
//! checkpoint holds the whole joint state; a run resumed from any of its checkpoints ends with
//! exactly the weights, metric and draws of the uninterrupted run, for every kernel (exact
//! Gaussian, slice, a stochastic-gradient sampler, sparse-regression Gibbs), every weight
//! optimiser (Hot DoG, ADAM, DoG, DoWG, prodigy, D-Adaptation SGD) and both subsample schemes;
//! a run stopped by its stop flag checkpoints where it stopped; a checkpoint of another
//! kernel or optimiser, or a truncated one, is refused.
//!
//! Break-once checks (each made `every_kernel_and_optimiser_resumes_bit_for_bit` fail, then was
//! restored): Hot DoG's `v` left out of its checkpoint ("hot_dog with the exact kernel,
//! resumed from checkpoint 2 of 8: the weights differ"); the Gibbs sweep's `order` left out
//! ("dog with the gibbs kernel, resumed from checkpoint 0 of 8: the weights differ").

use crate::common;

use sgmcmc::coreset::{
    Adam, Coreset, CoresetCheckpoints, CoresetKernel, CoresetRun, CoresetSettings, DAdaptSgd, Dog,
    Dowg, ExactGaussianKernel, HotDog, HotStartSettings, Prodigy, SamplerKernel, SliceKernel,
    SliceSettings, SparseGibbsKernel, SubsampleScheme, WeightOptimiser, ZScoreTracker,
    run_coreset_mcmc,
};
use sgmcmc::data::{Features, Matrix};
use sgmcmc::model::{GaussianModel, Model, SparseRegression};
use sgmcmc::rng::stream;
use sgmcmc::settings::SamplerSettings;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

const CHAINS: usize = 3;

/// The Gaussian location model (Σ = I, prior N(0, I)) on N × d standard normal data.
fn location_model(n: usize, d: usize) -> GaussianModel {
    let x = common::normals(4, 0, n * d);
    let identity: Vec<f64> = (0..d * d)
        .map(|k| if k / d == k % d { 1.0 } else { 0.0 })
        .collect();
    let features = Features::F64(Matrix::from_vec(x, n, d).unwrap());
    GaussianModel::new(features, &identity, 1.0).unwrap()
}

fn optimiser(name: &str, w0: &[f64]) -> Box<dyn WeightOptimiser> {
    match name {
        "hot_dog" => Box::new(HotDog::new(w0, HotDog::DEFAULT_R).unwrap()),
        "adam" => Box::new(Adam::new(w0.len(), 0.5).unwrap()),
        "dog" => Box::new(Dog::new(w0, 1e-3).unwrap()),
        "dowg" => Box::new(Dowg::new(w0, 1e-3).unwrap()),
        "prodigy" => Box::new(Prodigy::new(w0, Prodigy::DEFAULT_D0).unwrap()),
        "d_adapt" => {
            Box::new(DAdaptSgd::new(w0, DAdaptSgd::DEFAULT_GAMMA, DAdaptSgd::DEFAULT_D0).unwrap())
        }
        other => panic!("no optimiser {other}"),
    }
}

/// One run of `kernel` with `optimiser` (built afresh from the seed, as a resumed process
/// builds it), with `checkpoints` if given.
fn run(
    kernel: &str,
    optimiser_name: &str,
    scheme: SubsampleScheme,
    stop: Option<&AtomicBool>,
    checkpoints: Option<CoresetCheckpoints<'_>>,
) -> Result<CoresetRun, String> {
    let seed = 9;
    let gaussian = location_model(300, 2);
    let sparse = Arc::new(SparseRegression::synthetic(300, 5).unwrap());
    let model: &dyn Model = if kernel == "gibbs" {
        sparse.as_ref()
    } else {
        &gaussian
    };
    let mut init = stream(seed, CHAINS as u64 + 1);
    let coreset = Coreset::uniform(model.num_data(), 30, &mut init).unwrap();
    let mut kernels: Vec<Box<dyn CoresetKernel>> = (0..CHAINS)
        .map(|c| -> Box<dyn CoresetKernel> {
            let theta0 = vec![0.1 * c as f64; model.dim()];
            match kernel {
                "exact" => {
                    let (rows, prior_variance) =
                        gaussian.identity_location_rows(&coreset.points).unwrap();
                    Box::new(ExactGaussianKernel::new(rows, prior_variance, 0.8, theta0).unwrap())
                }
                "slice" => Box::new(SliceKernel::new(SliceSettings::default(), theta0).unwrap()),
                "sghmc" => Box::new(
                    SamplerKernel::new(SamplerSettings::sghmc(1e-3, 2).build().unwrap(), theta0)
                        .unwrap(),
                ),
                "gibbs" => {
                    Box::new(SparseGibbsKernel::new(Arc::clone(&sparse), &mut init).unwrap())
                }
                other => panic!("no kernel {other}"),
            }
        })
        .collect();
    let mut optimiser = optimiser(optimiser_name, &coreset.weights);
    let settings = CoresetSettings {
        train_iterations: 400,
        draws: 150,
        subsample: 40,
        scheme,
        newton_correction: false,
        hot_start: HotStartSettings {
            check_every: 5,
            ..HotStartSettings::default()
        },
        record_every: 50,
    };
    let mut tracker = ZScoreTracker::new(vec![0.0; model.dim()], &vec![1.0; model.dim()]).unwrap();
    run_coreset_mcmc(
        model,
        coreset,
        &mut kernels,
        optimiser.as_mut(),
        &settings,
        seed,
        Some(&mut tracker),
        stop,
        checkpoints,
    )
    .map_err(|e| e.to_string())
}

fn bits(values: &[f64]) -> Vec<u64> {
    values.iter().map(|v| v.to_bits()).collect()
}

/// Whether two runs are the same, bit for bit (the first difference named).
fn same(a: &CoresetRun, b: &CoresetRun) -> Result<(), &'static str> {
    if bits(&a.coreset.weights) != bits(&b.coreset.weights) {
        return Err("the weights differ");
    }
    if a.draws
        .iter()
        .map(|d| bits(d))
        .ne(b.draws.iter().map(|d| bits(d)))
    {
        return Err("the draws differ");
    }
    let metric = |r: &CoresetRun| -> Vec<(usize, u64)> {
        r.metric.iter().map(|&(i, m)| (i, m.to_bits())).collect()
    };
    if metric(a) != metric(b) {
        return Err("the metric differs");
    }
    if (
        a.hot_start_iteration,
        a.hot_start_passed,
        a.optimiser_steps,
        a.iterations,
    ) != (
        b.hot_start_iteration,
        b.hot_start_passed,
        b.optimiser_steps,
        b.iterations,
    ) {
        return Err("the hot start or the counts differ");
    }
    Ok(())
}

/// Every checkpoint of a run that takes one at every clock reading (interval 0).
fn all_checkpoints(
    kernel: &str,
    optimiser: &str,
    scheme: SubsampleScheme,
) -> (CoresetRun, Vec<Vec<u8>>) {
    let mut saved = Vec::new();
    let mut save = |bytes: &[u8]| -> Result<(), String> {
        saved.push(bytes.to_vec());
        Ok(())
    };
    let whole = run(
        kernel,
        optimiser,
        scheme,
        None,
        Some(CoresetCheckpoints {
            save: &mut save,
            interval: Duration::ZERO,
            resume: None,
        }),
    )
    .unwrap();
    (whole, saved)
}

fn resumed_from(
    kernel: &str,
    optimiser: &str,
    scheme: SubsampleScheme,
    bytes: Vec<u8>,
) -> Result<CoresetRun, String> {
    let mut ignore = |_: &[u8]| -> Result<(), String> { Ok(()) };
    run(
        kernel,
        optimiser,
        scheme,
        None,
        Some(CoresetCheckpoints {
            save: &mut ignore,
            interval: Duration::from_secs(3600),
            resume: Some(bytes),
        }),
    )
}

#[test]
fn every_kernel_and_optimiser_resumes_bit_for_bit() {
    let cases = [
        ("exact", "hot_dog", SubsampleScheme::Uniform),
        ("slice", "hot_dog", SubsampleScheme::Uniform),
        ("sghmc", "adam", SubsampleScheme::CyclicScan),
        ("gibbs", "dog", SubsampleScheme::Uniform),
        ("exact", "dowg", SubsampleScheme::CyclicScan),
        ("slice", "prodigy", SubsampleScheme::Uniform),
        ("exact", "d_adapt", SubsampleScheme::Uniform),
    ];
    for (kernel, optimiser, scheme) in cases {
        let plain = run(kernel, optimiser, scheme, None, None).unwrap();
        let (whole, saved) = all_checkpoints(kernel, optimiser, scheme);
        // Checkpointing changes nothing, and the run checkpointed all along (one per 64
        // sweeps, and at its end).
        same(&plain, &whole)
            .unwrap_or_else(|e| panic!("{optimiser} with the {kernel} kernel, checkpointed: {e}"));
        assert!(saved.len() >= 8, "{} checkpoints", saved.len());
        // It trained, and kept ⌈150/3⌉ = 50 draws per chain.
        let dim = whole.draws[0].len() / 50;
        assert!(
            whole.optimiser_steps > 0 && dim > 0 && whole.draws.iter().all(|d| d.len() == 50 * dim),
            "{kernel}: {} optimiser steps, {} draw values",
            whole.optimiser_steps,
            whole.draws[0].len()
        );
        // From checkpoints in warm-up, training and sampling, and from the last (nothing left).
        let n = saved.len();
        for at in [0, n / 3, n / 2, n - 2, n - 1] {
            let resumed = resumed_from(kernel, optimiser, scheme, saved[at].clone()).unwrap();
            same(&whole, &resumed).unwrap_or_else(|e| {
                panic!(
                    "{optimiser} with the {kernel} kernel, resumed from checkpoint {at} of {n}: {e}"
                )
            });
        }
    }
}

/// A run stopped by its flag checkpoints where it stopped, and resuming from there finishes the
/// uninterrupted run; a checkpoint of another run is refused before any sweep.
#[test]
fn a_stopped_run_resumes_and_another_runs_checkpoint_is_refused() {
    let scheme = SubsampleScheme::Uniform;
    let whole = run("slice", "hot_dog", scheme, None, None).unwrap();
    let stop = AtomicBool::new(true);
    let mut last = None;
    let mut save = |bytes: &[u8]| -> Result<(), String> {
        last = Some(bytes.to_vec());
        Ok(())
    };
    let stopped = run(
        "slice",
        "hot_dog",
        scheme,
        Some(&stop),
        Some(CoresetCheckpoints {
            save: &mut save,
            interval: Duration::from_secs(3600),
            resume: None,
        }),
    )
    .unwrap();
    assert!(
        stopped
            .stopped
            .as_deref()
            .unwrap()
            .contains("stopped by request")
    );
    let bytes = last.expect("a stopped run checkpoints");
    let resumed = resumed_from("slice", "hot_dog", scheme, bytes.clone()).unwrap();
    same(&whole, &resumed).unwrap();

    // Another kernel's state, another optimiser's, a truncated checkpoint.
    for (kernel, optimiser, bytes, needle) in [
        ("exact", "hot_dog", bytes.clone(), "checkpoint"),
        ("slice", "adam", bytes.clone(), "checkpoint"),
        (
            "slice",
            "hot_dog",
            bytes[..bytes.len() / 2].to_vec(),
            "truncated",
        ),
    ] {
        let e = resumed_from(kernel, optimiser, scheme, bytes).unwrap_err();
        assert!(
            e.contains("coreset checkpoint") && e.contains(needle),
            "{e}"
        );
    }
}
