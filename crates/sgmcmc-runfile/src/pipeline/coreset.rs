//! `sgmcmc coreset CONFIG`: coreset run file → data → model → coreset, optimiser, kernels →
//! the Coreset MCMC loop (reference §7.3) → weights, metric and draws.

use super::{PipelineError, build_gaussian_model, build_model, build_sparse_regression, load_data};
use crate::config::coreset::{
    Construction, CoresetConfig, CoresetFile, CoresetInit, KernelConfig, OptimiserConfig,
    SchemeConfig,
};
use sgmcmc::coreset::{
    Adam, Coreset, CoresetCheckpoints, CoresetKernel, CoresetRun, CoresetSettings, DAdaptSgd, Dog,
    Dowg, ExactGaussianKernel, HotDog, HotStartSettings, Prodigy, SamplerKernel, SliceKernel,
    SliceSettings, SparseGibbsKernel, SubsampleScheme, WeightOptimiser, ZScoreTracker,
    run_coreset_mcmc,
};
use sgmcmc::data::load_bike_sharing_reference;
use sgmcmc::io::CheckpointDirectory;
use sgmcmc::model::Model;
use sgmcmc::reference::ReferenceMoments;
use sgmcmc::rng::{self, ChainRng, fill_standard_normal};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// What a coreset run produced, with the model's parameter names.
pub struct CoresetOutcome {
    /// The run (weights, metric, draws, hot start).
    pub run: CoresetRun,
    /// Parameter names of the model.
    pub parameter_names: Vec<String>,
    /// The optimiser's and the kernel's names.
    pub optimiser: &'static str,
    /// The kernel's name.
    pub kernel: &'static str,
    /// N.
    pub num_data: usize,
    /// Wall-clock seconds of the loop.
    pub seconds: f64,
}

fn other(msg: String) -> PipelineError {
    PipelineError::RunFile(msg)
}

/// Where a coreset run keeps its checkpoint (the whole joint state, `coreset.state`, beside
/// the run file it belongs to, `coreset-run.json`), and whether it continues from it.
pub struct CoresetCheckpointing<'a> {
    /// The run directory's checkpoint folder.
    pub directory: &'a CheckpointDirectory,
    /// Continue the run recorded there (`--resume`).
    pub resume: bool,
}

/// The joint state of a coreset run in its checkpoint folder.
const CORESET_STATE: &str = "coreset.state";
/// The run file of the coreset run in its checkpoint folder (a continued run must match it).
const CORESET_RUN: &str = "coreset-run.json";

/// Records the run (a new one) or checks it and reads its last checkpoint (a continued one;
/// `None` when it was killed before its first).
fn prepare_checkpoints(
    cfg: &CoresetFile,
    checkpointing: &CoresetCheckpointing<'_>,
) -> Result<Option<Vec<u8>>, PipelineError> {
    let dir = checkpointing.directory;
    let file_error = |name: &str, action: &'static str| {
        let path = dir.path().join(name);
        move |source| PipelineError::File {
            path,
            action,
            source,
        }
    };
    let recorded = serde_json::to_vec_pretty(cfg).expect("a coreset run file serialises");
    if !checkpointing.resume {
        dir.write_file(CORESET_RUN, &recorded)
            .map_err(file_error(CORESET_RUN, "cannot write"))?;
        return Ok(None);
    }
    let run = dir
        .read_file(CORESET_RUN)
        .map_err(file_error(CORESET_RUN, "cannot read"))?
        .ok_or_else(|| {
            other(format!(
                "{} holds no coreset run to continue (no {CORESET_RUN}); run without --resume",
                dir.path().display()
            ))
        })?;
    if run != recorded {
        return Err(other(format!(
            "the coreset run in {} was started with other settings; continue it with the same \
             run file, or start a new run (another directory, or --overwrite)",
            dir.path().display()
        )));
    }
    dir.read_file(CORESET_STATE)
        .map_err(file_error(CORESET_STATE, "cannot read"))
}

/// The weight optimiser `cfg` for `coreset`'s weights.
pub fn build_optimiser(
    cfg: &OptimiserConfig,
    coreset: &Coreset,
) -> Result<Box<dyn WeightOptimiser>, PipelineError> {
    let err = PipelineError::CoresetOptimiser;
    let w0 = coreset.weights.as_slice();
    Ok(match cfg {
        OptimiserConfig::HotDog {
            r,
            reference_d_correction,
        } => {
            let h = HotDog::new(&coreset.weights, *r).map_err(err)?;
            Box::new(if *reference_d_correction {
                h.with_reference_d_correction()
            } else {
                h
            })
        }
        OptimiserConfig::Adam { learning_rate } => {
            Box::new(Adam::new(coreset.len(), *learning_rate).map_err(err)?)
        }
        OptimiserConfig::Dog { r } => Box::new(Dog::new(w0, *r).map_err(err)?),
        OptimiserConfig::Dowg { r, keep_r0_in_max } => {
            let d = Dowg::new(w0, *r).map_err(err)?;
            Box::new(if *keep_r0_in_max {
                d.with_r0_in_max()
            } else {
                d
            })
        }
        OptimiserConfig::Prodigy { d0 } => Box::new(Prodigy::new(w0, *d0).map_err(err)?),
        OptimiserConfig::DadaptSgd { gamma, d0 } => {
            Box::new(DAdaptSgd::new(w0, *gamma, *d0).map_err(err)?)
        }
    })
}

fn initial_state(
    init: CoresetInit,
    model: &dyn Model,
    rng: &mut ChainRng,
) -> Result<Vec<f64>, PipelineError> {
    let mut theta = vec![0.0; model.dim()];
    match init {
        CoresetInit::Zeros => {}
        CoresetInit::StandardNormal => fill_standard_normal(rng, &mut theta),
        CoresetInit::Prior => model.sample_prior(rng, &mut theta)?,
    }
    Ok(theta)
}

/// Build everything the file describes and run it; `stop` ends the loop at the next iteration.
pub fn run_coreset_file(
    cfg: &CoresetFile,
    stop: &AtomicBool,
    checkpointing: Option<CoresetCheckpointing<'_>>,
) -> Result<CoresetOutcome, PipelineError> {
    check_evaluation(cfg)?;
    run_coreset(
        cfg,
        CoresetModel::Data(load_data(&cfg.data)?),
        stop,
        checkpointing,
    )
}

/// Refuses, before the chains are built, a run whose chains (each with its state and a column
/// of the M x K weight-gradient matrix) and kept draws would not fit the available memory.
fn check_coreset_memory(c: &CoresetConfig, dim: usize) -> Result<(), PipelineError> {
    let Some(available) = sgmcmc::data::available_memory() else {
        return Ok(());
    };
    let per_chain = super::chain_overhead_bytes(dim) as u128 + 8 * 4 * c.size as u128;
    let needed = per_chain * c.chains as u128 + 8 * c.draws as u128 * dim as u128;
    if needed > available as u128 {
        return Err(other(format!(
            "[coreset] {} chains over a coreset of {} points with {} draws of {dim} parameters \
             need about {:.1} GB of memory, but {:.1} GB are available: use fewer chains or draws",
            c.chains,
            c.size,
            c.draws,
            needed as f64 / 1e9,
            available as f64 / 1e9
        )));
    }
    Ok(())
}

fn check_evaluation(cfg: &CoresetFile) -> Result<(), PipelineError> {
    let seconds = cfg.coreset.checkpoint_seconds;
    if !(seconds.is_finite() && seconds > 0.0) {
        return Err(other(format!(
            "[coreset] checkpoint_seconds must be a positive number of seconds, got {seconds}"
        )));
    }
    if cfg.coreset.chains < 2 {
        return Err(other(format!(
            "[coreset] a coreset run needs at least 2 chains (the weight gradient, Eq. 4, is a \
             covariance across chains), got chains = {}",
            cfg.coreset.chains
        )));
    }
    if let Some(ev) = &cfg.evaluation
        && (ev.test_fraction.is_some() || ev.test.is_some() || ev.split.is_some())
    {
        return Err(other(
            "[evaluation] of a coreset run takes only `reference` (no test split)".into(),
        ));
    }
    Ok(())
}

/// The model of a coreset run: the `[model]` table over data, or one the caller built (the
/// Python package's user models; `[model] kind = "external"`).
pub enum CoresetModel {
    /// Data for the `[model]` table (loaded from `[data]`, or handed over).
    Data(sgmcmc::data::Dataset),
    /// A model the caller built (slice and sampler kernels only).
    External(Box<dyn Model>),
}

/// [`run_coreset_file`] on `source` instead of the `[data]` table.
pub fn run_coreset(
    cfg: &CoresetFile,
    source: CoresetModel,
    stop: &AtomicBool,
    checkpointing: Option<CoresetCheckpointing<'_>>,
) -> Result<CoresetOutcome, PipelineError> {
    check_evaluation(cfg)?;
    let c = &cfg.coreset;
    // The exact and Gibbs kernels need their models themselves; every other kernel any model.
    let (mut gaussian, mut sparse, mut boxed) = (None, None, None);
    let labels = match source {
        CoresetModel::Data(data) => {
            let labels = data.targets.clone();
            match c.kernel {
                KernelConfig::ExactGaussian { .. } => {
                    gaussian = Some(build_gaussian_model(&cfg.model, data)?);
                }
                KernelConfig::Gibbs => {
                    sparse = Some(Arc::new(build_sparse_regression(&cfg.model, data)?));
                }
                _ => boxed = Some(build_model(&cfg.model, data)?),
            }
            labels
        }
        CoresetModel::External(model) => {
            if matches!(
                c.kernel,
                KernelConfig::ExactGaussian { .. } | KernelConfig::Gibbs
            ) {
                return Err(other(
                    "[coreset] the exact Gaussian and Gibbs kernels need their built-in models; \
                     a caller's model takes kernel = \"slice\" or \"sampler\""
                        .into(),
                ));
            }
            boxed = Some(model);
            None
        }
    };
    let model: &dyn Model = match (&gaussian, &sparse, &boxed) {
        (Some(g), _, _) => g,
        (_, Some(s), _) => s.as_ref(),
        (_, _, Some(b)) => b.as_ref(),
        _ => unreachable!("one model is built above"),
    };
    check_coreset_memory(c, model.dim())?;
    let n = model.num_data();
    let mut init_rng = rng::stream(c.seed, c.chains as u64 + 1);
    let coreset = match c.construction {
        Construction::Uniform => Coreset::uniform(n, c.size, &mut init_rng),
        Construction::Stratified => {
            let labels = labels.as_deref().ok_or_else(|| {
                other("[coreset] construction = \"stratified\" needs labels (targets)".into())
            })?;
            Coreset::stratified(labels, c.size, &mut init_rng)
        }
    }?;
    let mut optimiser = build_optimiser(&c.optimiser, &coreset)?;
    let kernel_err = PipelineError::CoresetKernel;
    let mut kernels: Vec<Box<dyn CoresetKernel>> = Vec::with_capacity(c.chains);
    for _ in 0..c.chains {
        let kernel: Box<dyn CoresetKernel> = match &c.kernel {
            KernelConfig::ExactGaussian { beta } => {
                let g = gaussian.as_ref().expect("built above");
                let (rows, prior_variance) = g.identity_location_rows(&coreset.points)?;
                let mut k =
                    ExactGaussianKernel::new(rows, prior_variance, *beta, vec![0.0; g.dim()])
                        .map_err(kernel_err)?;
                k.draw_exact(&coreset.weights, &mut init_rng)
                    .map_err(kernel_err)?;
                Box::new(k)
            }
            KernelConfig::Slice {
                width,
                max_doublings,
                passes,
                max_shrinks,
            } => {
                let settings = SliceSettings {
                    width: *width,
                    max_doublings: *max_doublings,
                    passes: *passes,
                    max_shrinks: *max_shrinks,
                };
                let theta0 = initial_state(c.init, model, &mut init_rng)?;
                Box::new(SliceKernel::new(settings, theta0).map_err(kernel_err)?)
            }
            KernelConfig::Gibbs => {
                let model = sparse.as_ref().expect("built above");
                Box::new(
                    SparseGibbsKernel::new(Arc::clone(model), &mut init_rng).map_err(kernel_err)?,
                )
            }
            KernelConfig::Sampler => {
                let table = cfg.sampler.as_ref().ok_or_else(|| {
                    other(
                        "[coreset] kernel = { kind = \"sampler\" } needs a [sampler] table".into(),
                    )
                })?;
                let sampler = table.method.build().map_err(super::sampler_table)?;
                let theta0 = initial_state(c.init, model, &mut init_rng)?;
                Box::new(SamplerKernel::new(sampler, theta0).map_err(kernel_err)?)
            }
        };
        kernels.push(kernel);
    }
    let mut tracker = match cfg.evaluation.as_ref().and_then(|e| e.reference.as_ref()) {
        Some(path) => {
            // A directory: the bike-sharing data's shipped Stan moments (reordered to the
            // model's parameters); a file: reference.json as `sgmcmc reference` writes it.
            let moments = if path.is_dir() {
                load_bike_sharing_reference(path)
                    .map_err(|e| PipelineError::Reference(Box::new(e)))?
            } else {
                ReferenceMoments::load(path).map_err(|e| PipelineError::Reference(Box::new(e)))?
            };
            Some(
                ZScoreTracker::new(moments.mean, &moments.sd)
                    .map_err(|e| PipelineError::Reference(Box::new(e)))?,
            )
        }
        None => None,
    };
    let h = &c.hot_start;
    let settings = CoresetSettings {
        train_iterations: c.iterations,
        draws: c.draws,
        subsample: c.subsample.unwrap_or(c.size),
        scheme: match c.subsample_scheme {
            SchemeConfig::Uniform => SubsampleScheme::Uniform,
            SchemeConfig::CyclicScan => SubsampleScheme::CyclicScan,
        },
        newton_correction: c.newton_correction,
        hot_start: HotStartSettings {
            enabled: h.enabled,
            threshold: h.threshold,
            check_every: h.check_every,
            max_warmup: h.max_warmup,
            trace_includes_prior: h.trace_includes_prior,
            never_train_without_hot_start: h.never_train_without_hot_start,
            record_trace: false,
        },
        record_every: c.record_every,
    };
    let optimiser_name = optimiser.name();
    let kernel_name = kernels[0].name();
    let resume = checkpointing
        .as_ref()
        .map(|ck| prepare_checkpoints(cfg, ck))
        .transpose()?
        .flatten();
    let mut save = |bytes: &[u8]| -> Result<(), String> {
        let ck = checkpointing
            .as_ref()
            .expect("saves only with checkpointing");
        ck.directory
            .write_file(CORESET_STATE, bytes)
            .map_err(|e| format!("{}: {e}", ck.directory.path().join(CORESET_STATE).display()))
    };
    let checkpoints = checkpointing.as_ref().map(|_| CoresetCheckpoints {
        save: &mut save,
        interval: std::time::Duration::from_secs_f64(c.checkpoint_seconds),
        resume,
    });
    let started = std::time::Instant::now();
    let run = run_coreset_mcmc(
        model,
        coreset,
        &mut kernels,
        optimiser.as_mut(),
        &settings,
        c.seed,
        tracker.as_mut(),
        Some(stop),
        checkpoints,
    )?;
    Ok(CoresetOutcome {
        run,
        parameter_names: model.parameter_names(),
        optimiser: optimiser_name,
        kernel: kernel_name,
        num_data: n,
        seconds: started.elapsed().as_secs_f64(),
    })
}
