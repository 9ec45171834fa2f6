//! Checkpoints and resume (issue 25): a chain resumed from any of its checkpoints makes
//! exactly the draws, bit for bit, that the uninterrupted chain makes after that point, for
//! every stochastic-gradient sampler (with a step schedule too), every gradient estimator and
//! both minibatch schemes, and for minibatch Metropolis–Hastings with each test; a checkpoint
//! of another chain or seed is refused; a kernel that cannot be checkpointed runs without
//! checkpoints and says why.

use crate::common;

use common::{dataset, logistic_data};
use sgmcmc::io::{MemorySink, SinkError};
use sgmcmc::model::{Bernoulli, LogisticRegression, Model, NormalPrior};
use sgmcmc::rng::ChainRng;
use sgmcmc::runner::{
    Budget, Chain, ChainStart, CheckpointStore, Checkpoints, NoProgress, RunError, RunReport,
    RunSettings, checkpoint_header, run_resumable,
};
use sgmcmc::sampler::{ChainKernel, Scheduled, StepSchedule};
use sgmcmc::settings::{EstimatorSettings, SamplerSettings};
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

fn model() -> LogisticRegression {
    let (x, y) = logistic_data(11, 400, &[0.8, -0.5, 0.3], 0.1);
    LogisticRegression::new(
        dataset(x, 3, Some(y), false),
        Bernoulli,
        NormalPrior::new(10.0).unwrap(),
        true,
    )
    .unwrap()
}

/// Every checkpoint of every chain, in the order taken.
#[derive(Default)]
struct Recorded(Mutex<Vec<(usize, Vec<u8>)>>);

impl CheckpointStore for Recorded {
    fn save(&self, chain: usize, checkpoint: &[u8]) -> Result<(), SinkError> {
        self.0.lock().unwrap().push((chain, checkpoint.to_vec()));
        Ok(())
    }
}

const SETTINGS: RunSettings = RunSettings {
    seed: 17,
    chains: 2,
    budget: Budget::Iterations(1500),
    burn_in: 100,
    thin: 3,
};

/// Runs `sampler` with `gradient` (about the centre `centre`; SGLD under a polynomial step
/// schedule if `scheduled`), chain c starting as `starts[c]`, checkpointing into `store` every
/// few iterations if given.
fn run_with(
    model: &dyn Model,
    (sampler, scheduled): (&SamplerSettings, bool),
    gradient: &EstimatorSettings,
    centre: &[f64],
    starts: &[ChainStart],
    store: Option<(&Recorded, Duration)>,
) -> (Result<RunReport, RunError>, Vec<Vec<f64>>) {
    let sink = MemorySink::new(SETTINGS.chains, model.dim());
    let checkpoints = store.map(|(store, interval)| Checkpoints { store, interval });
    let report = run_resumable(
        &SETTINGS,
        |_, rng: &mut ChainRng| {
            let mut init = vec![0.0; model.dim()];
            sgmcmc::rng::fill_standard_normal(rng, &mut init);
            if scheduled {
                let schedule = StepSchedule::Polynomial {
                    a: 1e-3,
                    b: 10.0,
                    gamma: 0.55,
                };
                let inner = Scheduled::new(sampler.build()?, schedule).unwrap();
                return Ok(Chain::sampler(
                    Box::new(inner),
                    gradient.build(model, Some(centre))?,
                    init,
                ));
            }
            Ok(Chain {
                kernel: sampler.build_chain(model, gradient, Some(centre))?,
                init,
            })
        },
        &sink,
        &NoProgress,
        &AtomicBool::new(false),
        checkpoints.as_ref(),
        starts,
    );
    (report, sink.into_chains())
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Runs `sampler` with `gradient` whole, then with checkpoints (the same draws), then resumed
/// from chain 1's 3rd, middle and second-to-last checkpoints: the rest of the whole run's
/// draws, bit for bit.
fn assert_resumes_bit_for_bit(
    model: &dyn Model,
    sampler: (&SamplerSettings, bool),
    gradient: &EstimatorSettings,
    centre: &[f64],
    label: &str,
) {
    let (report, full) = run_with(model, sampler, gradient, centre, &[], None);
    report.unwrap();
    let store = Recorded::default();
    let (report, again) = run_with(
        model,
        sampler,
        gradient,
        centre,
        &[],
        Some((&store, Duration::ZERO)),
    );
    let report = report.unwrap();
    assert_eq!(
        bits(&full[0]),
        bits(&again[0]),
        "{label}: checkpoints change draws"
    );
    assert!(
        report.chains.iter().all(|c| c.checkpoints > 20),
        "{label}: {:?}",
        report.chains[0].checkpoint_note
    );
    let saved = store.0.into_inner().unwrap();
    let of_chain_1: Vec<&Vec<u8>> = saved
        .iter()
        .filter(|(c, _)| *c == 1)
        .map(|(_, b)| b)
        .collect();
    for k in [2, of_chain_1.len() / 2, of_chain_1.len() - 2] {
        let bytes = of_chain_1[k];
        let header = checkpoint_header(bytes).unwrap();
        let starts = [ChainStart::Fresh, ChainStart::Resume(bytes.clone())];
        let (report, resumed) = run_with(model, sampler, gradient, centre, &starts, None);
        let report = report.unwrap();
        let d = model.dim();
        let done = header.progress.draws * d;
        assert_eq!(
            bits(&resumed[1]),
            bits(&full[1][done..]),
            "{label}: resumed from draw {} (iteration {})",
            header.progress.draws,
            header.progress.iterations
        );
        assert_eq!(bits(&resumed[0]), bits(&full[0]));
        assert_eq!(report.chains[1].draws, full[1].len() / d);
    }
}

/// For each case: the uninterrupted run's draws; then, from several of its checkpoints (a
/// kill -9 leaves the last one), runs resumed from there whose draws are the rest of the
/// uninterrupted run's, bit for bit. Break-once: the subsampler's index buffer not restored
/// from its checkpoint made the uniform cases' resumed draws differ here.
#[test]
fn a_resumed_chain_continues_bit_for_bit() {
    let model = model();
    let centre = vec![0.1; model.dim()];
    let samplers = [
        "kind = \"sgld\"\nstep_size = 1e-3",
        "scheduled",
        "kind = \"psgld\"\nstep_size = 1e-4",
        "kind = \"sghmc\"\nstep_size = 1e-4\ninner_steps = 2",
        "kind = \"sgnht\"\nstep_size = 1e-4",
        "kind = \"baoab\"\nstep_size = 1e-2\nfriction = 1.0",
        "kind = \"badodab\"\nstep_size = 1e-2",
        "kind = \"ccadl\"\nstep_size = 1e-2\ndiffusion = 1.0",
    ];
    let gradients = [
        "estimator = \"minibatch\"\nbatch_size = 40",
        "estimator = \"minibatch\"\nbatch_size = 40\nscheme = \"block\"",
        "estimator = \"minibatch\"\nbatch_size = 40\nwith_replacement = true",
        "estimator = \"control_variates\"\nbatch_size = 40",
        "estimator = \"svrg\"\nbatch_size = 40\nupdate_rate = 7",
        "estimator = \"full\"",
    ];
    let mut cases = 0;
    for (i, s) in samplers.iter().enumerate() {
        for (j, g) in gradients.iter().enumerate() {
            // Every sampler with both minibatch schemes; every estimator with SGLD and BAOAB.
            if j > 0 && !(i == 0 || i == 5) && j != 1 {
                continue;
            }
            let scheduled = *s == "scheduled";
            let text = if scheduled { samplers[0] } else { s };
            let sampler: SamplerSettings = toml::from_str(text).unwrap();
            let sampler = (&sampler, scheduled);
            let gradient: EstimatorSettings = toml::from_str(g).unwrap();
            assert_resumes_bit_for_bit(&model, sampler, &gradient, &centre, &format!("{s} / {g}"));
            cases += 1;
        }
    }
    assert_eq!(cases, 8 + 8 + 2 * 4);
}

/// Minibatch Metropolis–Hastings chains resume bit for bit too: each test (Barker with the
/// temperature raised on failure, the workshop test with smoothing, Austerity, the exact
/// test), with the random-walk and a Langevin proposal, uniform and block minibatches.
/// Break-once: without the subsampler's state in the checkpoint the Barker cases' resumed
/// draws differed.
#[test]
fn a_resumed_mh_chain_continues_bit_for_bit() {
    let model = model();
    let centre = vec![0.1; model.dim()];
    let walk = "proposal = { kind = \"random_walk\", sd = 0.05 }\nbatch_size = 40";
    let cases = [
        format!("{walk}\ntest = \"barker\"\npolicy = \"raise_temperature\""),
        format!("{walk}\ntest = \"workshop\"\nminibatches = 3\nstd_smoothing = 0.5"),
        format!("{walk}\ntest = \"austerity\""),
        format!("{walk}\ntest = \"exact_metropolis\""),
        "proposal = { kind = \"langevin\", step_size = 1e-3 }\nbatch_size = 40".to_string(),
    ];
    for (i, case) in cases.iter().enumerate() {
        let sampler: SamplerSettings = toml::from_str(&format!("kind = \"mh\"\n{case}")).unwrap();
        for g in ["batch_size = 40", "batch_size = 40\nscheme = \"block\""] {
            if i == 3 && g.contains("block") {
                continue;
            }
            let gradient: EstimatorSettings = toml::from_str(g).unwrap();
            assert_resumes_bit_for_bit(
                &model,
                (&sampler, false),
                &gradient,
                &centre,
                &format!("{case} / {g}"),
            );
        }
    }
}

/// A checkpoint is the chain's own: another chain's or another seed's is refused, and so are
/// damaged bytes; a kernel that cannot be checkpointed (one of the user's without
/// `save_state`) runs without checkpoints, saying why.
#[test]
fn a_foreign_or_damaged_checkpoint_is_refused() {
    let model = model();
    let centre = vec![0.0; model.dim()];
    let sgld: SamplerSettings = toml::from_str("kind = \"sgld\"\nstep_size = 1e-3").unwrap();
    let sampler = (&sgld, false);
    let gradient: EstimatorSettings = toml::from_str("batch_size = 40").unwrap();
    let store = Recorded::default();
    run_with(
        &model,
        sampler,
        &gradient,
        &centre,
        &[],
        Some((&store, Duration::ZERO)),
    )
    .0
    .unwrap();
    let saved = store.0.into_inner().unwrap();
    let of_chain_0 = saved.iter().find(|(c, _)| *c == 0).unwrap().1.clone();
    let starts = [ChainStart::Fresh, ChainStart::Resume(of_chain_0.clone())];
    let e = run_with(&model, sampler, &gradient, &centre, &starts, None)
        .0
        .unwrap_err();
    assert!(
        e.to_string().contains(
            "resuming chain 1: checkpoint: of chain 0 of a run with seed 17, not chain 1"
        ),
        "{e}"
    );
    let starts = [ChainStart::Resume(
        of_chain_0[..of_chain_0.len() - 5].to_vec(),
    )];
    let e = run_with(&model, sampler, &gradient, &centre, &starts, None)
        .0
        .unwrap_err();
    assert!(e.to_string().contains("truncated"), "{e}");
    // Another sampler's checkpoint: the kernel's fields do not match.
    let baoab: SamplerSettings =
        toml::from_str("kind = \"baoab\"\nstep_size = 1e-2\nfriction = 1.0").unwrap();
    let starts = [ChainStart::Resume(of_chain_0)];
    let e = run_with(&model, (&baoab, false), &gradient, &centre, &starts, None)
        .0
        .unwrap_err();
    assert!(
        e.to_string().contains("resuming chain 0: checkpoint:"),
        "{e}"
    );

    // A kernel of the user's without save_state (the trait's default) runs without
    // checkpoints, saying why.
    let store = Recorded::default();
    let sink = MemorySink::new(1, 2);
    let report = run_resumable(
        &RunSettings {
            chains: 1,
            ..SETTINGS
        },
        |_, _: &mut ChainRng| {
            Ok(Chain {
                kernel: Box::new(Walk(vec![0.0; 2])),
                init: vec![0.0; 2],
            })
        },
        &sink,
        &NoProgress,
        &AtomicBool::new(false),
        Some(&Checkpoints {
            store: &store,
            interval: Duration::ZERO,
        }),
        &[],
    )
    .unwrap();
    assert!(store.0.into_inner().unwrap().is_empty());
    let note = report.chains[0].checkpoint_note.as_deref().unwrap();
    assert!(note.contains("cannot be checkpointed"), "{note}");
}

/// A random walk: a kernel with only the required methods.
struct Walk(Vec<f64>);

impl ChainKernel for Walk {
    fn start(&mut self, init: &[f64], _: &mut ChainRng) {
        self.0.copy_from_slice(init);
    }
    fn step(&mut self, rng: &mut ChainRng) {
        let mut noise = vec![0.0; self.0.len()];
        sgmcmc::rng::fill_standard_normal(rng, &mut noise);
        self.0
            .iter_mut()
            .zip(noise)
            .for_each(|(x, e)| *x += 0.1 * e);
    }
    fn position(&self) -> &[f64] {
        &self.0
    }
}

/// Into memory (a writer that holds nothing back) checkpoints follow the interval alone: with
/// an hour's interval, each chain saves only its last (break-once: a checkpoint at every kept
/// draw, as a writer with nothing pending once triggered, gave 501 per chain).
#[test]
fn a_memory_run_checkpoints_by_the_interval_alone() {
    let model = model();
    let sgld: SamplerSettings = toml::from_str("kind = \"sgld\"\nstep_size = 1e-3").unwrap();
    let gradient: EstimatorSettings = toml::from_str("batch_size = 40").unwrap();
    let store = Recorded::default();
    let report = run_with(
        &model,
        (&sgld, false),
        &gradient,
        &[0.0; 4],
        &[],
        Some((&store, Duration::from_secs(3600))),
    )
    .0
    .unwrap();
    assert!(
        report.chains.iter().all(|c| c.checkpoints == 1),
        "{:?}",
        report
            .chains
            .iter()
            .map(|c| c.checkpoints)
            .collect::<Vec<_>>()
    );
    let last = checkpoint_header(&store.0.into_inner().unwrap()[0].1).unwrap();
    assert_eq!(last.progress.iterations, 1600);
    assert_eq!(last.progress.draws, 500);
}

/// Chains run elsewhere (issue 26: a chain range per process or array task) are skipped: the
/// chains a run makes here are those of the whole run, bit for bit, on any number of threads,
/// and the report holds only them, in chain order. Break-once check: seeding each prepared
/// chain's stream by its position among the chains run here instead of its number made chain
/// 1's draws differ ("chain 1 run alone differs"); restored.
#[test]
fn chains_run_elsewhere_are_skipped_and_the_others_are_unchanged() {
    let model = model();
    let sampler = SamplerSettings::sgld(1e-3);
    let gradient: EstimatorSettings = toml::from_str("batch_size = 40").unwrap();
    let centre = vec![0.0; model.dim()];
    let (report, full) = run_with(&model, (&sampler, false), &gradient, &centre, &[], None);
    assert_eq!(report.unwrap().chains.len(), 2);
    for (starts, ran) in [
        ([ChainStart::Elsewhere, ChainStart::Fresh], 1),
        ([ChainStart::Fresh, ChainStart::Elsewhere], 0),
    ] {
        let one_thread = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let (report, alone) = one_thread
            .install(|| run_with(&model, (&sampler, false), &gradient, &centre, &starts, None));
        let report = report.unwrap();
        assert_eq!(
            report.chains.iter().map(|c| c.chain).collect::<Vec<_>>(),
            [ran]
        );
        assert!(
            bits(&alone[ran]) == bits(&full[ran]),
            "chain {ran} run alone differs"
        );
        assert!(
            alone[1 - ran].is_empty(),
            "the chain run elsewhere wrote draws"
        );
    }
}
