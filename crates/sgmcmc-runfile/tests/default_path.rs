//! The default path (a run file without a `[sampler]` table) end to end through the library,
//! on a linear regression whose posterior is known in closed form and badly conditioned
//! (feature scales 0.01 … 10, two features correlated 0.99: posterior sds 0.0016 … 0.22):
//! it resolves to a preconditioned BAOAB run that starts from Laplace draws, and its draws
//! match the closed form; a hand-set SGLD run on the same file is flagged by the bias check.
//! With the shared data, the bike-sharing configuration of issue 22 (plain SGLD, ε = 10⁻⁴,
//! minibatch gradients: sds 8–15× Stan's while R-hat looks fine) is flagged too.

use crate::common;

use common::evaluation::{conjugate_posterior, write_xy};
use common::normals;
use sgmcmc::runner::NoProgress;
use sgmcmc_runfile::config::{Config, InitConfig, InitKeyword, PreconditionerChoice};
use sgmcmc_runfile::pipeline::{self, BiasCheckOutcome, Known, default_path};
use std::path::Path;
use std::sync::atomic::AtomicBool;

const D: usize = 4;

/// N = 20,000 rows with x₁ ~ 0.01·z₁, x₂ ~ 0.1·z₂, x₃ = 0.99·x₄-ish at unit scale, x₄ ~ 10·z₄
/// (as a standardised x₃ correlated with x₄), y = xᵀw + N(0, 1).
fn data(dir: &Path) -> (Vec<f64>, Vec<f64>) {
    let n = 20_000;
    let z = normals(71, 0, n * D);
    let e = normals(71, 1, n);
    let w = [3.0, -1.0, 0.5, 0.05];
    let mut x = vec![0.0; n * D];
    let mut y = vec![0.0; n];
    for i in 0..n {
        let r = &z[i * D..(i + 1) * D];
        let row = [
            0.01 * r[0],
            0.1 * r[1],
            0.99 * r[3] + (1.0f64 - 0.99 * 0.99).sqrt() * r[2],
            10.0 * r[3],
        ];
        x[i * D..(i + 1) * D].copy_from_slice(&row);
        y[i] = row.iter().zip(&w).map(|(a, b)| a * b).sum::<f64>() + e[i];
    }
    write_xy(dir, "train", &x, &y, D);
    (x, y)
}

const MODEL_RUN: &str = "[data]\nfeatures = \"train_x.npy\"\ntargets = \"train_y.npy\"\n\n\
    [model]\nkind = \"linear\"\nprior_variance = 10.0\nnoise_variance = 1.0\n\n\
    [run]\nseed = 11\nchains = 4\niterations = 5000\nburn_in = 500\n";

#[test]
fn default_path_matches_the_closed_form_on_an_ill_conditioned_posterior() {
    let dir = tempfile::tempdir().unwrap();
    let (x, y) = data(dir.path());
    let (mean, cov) = conjugate_posterior(&x, &y, D, 10.0);
    let sd: Vec<f64> = (0..D).map(|j| cov[j * D + j].sqrt()).collect();
    let path = dir.path().join("run.toml");
    std::fs::write(&path, MODEL_RUN).unwrap();
    let cfg = Config::from_file(&path).unwrap();
    assert!(default_path::takes_default_path(&cfg));
    let prepared = pipeline::prepare(&cfg).unwrap();
    let resolved = default_path::resolve(&cfg, prepared.model()).unwrap();
    for line in &resolved.report.choices {
        eprintln!("{line}");
    }
    let r = &resolved.config;
    assert_eq!(r.run.preconditioner, PreconditionerChoice::Dense);
    assert_eq!(r.run.init, InitConfig::Keyword(InitKeyword::Laplace));
    assert!(matches!(
        r.sampler.as_ref().unwrap().method,
        sgmcmc::settings::SamplerSettings::Baoab { .. }
    ));
    assert!(r.tune.is_none() && r.gradient.is_some());
    // The resolved file is a complete run file: it reads back to itself.
    let text = r.to_toml().unwrap();
    assert_eq!(&Config::from_toml(&text, "resolved.toml").unwrap(), r);

    let (outcome, _) = pipeline::execute_prepared_with_sink(
        r,
        &prepared,
        None,
        None,
        Known {
            map: Some(&resolved.map),
            laplace: resolved.laplace.as_ref(),
        },
        &NoProgress,
        &AtomicBool::new(false),
    )
    .unwrap();
    for (j, p) in outcome.parameters.iter().enumerate() {
        let z = (p.stats.mean - mean[j]) / p.stats.mcse_mean;
        eprintln!(
            "{}: mean {:.5} vs {:.5} (z = {z:.2}), sd {:.5} vs {:.5} (ratio {:.3}), R-hat {:.4}",
            p.name,
            p.stats.mean,
            mean[j],
            p.stats.sd,
            sd[j],
            p.stats.sd / sd[j],
            p.stats.rhat
        );
        assert!(p.stats.rhat <= 1.01, "{}: R-hat {}", p.name, p.stats.rhat);
        assert!(z.abs() < 4.0, "{}: mean off by {z} MCSE", p.name);
        // sd's Monte Carlo error at ESS > 2,000 is < 2 %; the discretisation and gradient
        // noise of the chosen step add at most 2 % (the noise rule's tolerance).
        assert!(
            (p.stats.sd / sd[j] - 1.0).abs() < 0.06,
            "{}: sd ratio {}",
            p.name,
            p.stats.sd / sd[j]
        );
    }
    match outcome.bias_check {
        Some(BiasCheckOutcome::Done(check)) => {
            eprintln!("{}", check.describe());
            assert!(check.passed);
            assert!(check.whitened_by_preconditioner);
        }
        other => panic!("no bias check: {other:?}"),
    }
}

/// The same file with SGLD at a step the stiffest direction barely tolerates and plain
/// minibatch gradients: the draws are far off, and the bias check says so.
#[test]
fn bias_check_flags_a_hand_set_sgld_run() {
    let dir = tempfile::tempdir().unwrap();
    data(dir.path());
    let text = format!(
        "{MODEL_RUN}\n[sampler]\nkind = \"sgld\"\nstep_size = 2e-7\n[gradient]\nbatch_size = 100\n"
    )
    .replace("[run]", "[run]\ninit = \"map\"");
    let path = dir.path().join("run.toml");
    std::fs::write(&path, text).unwrap();
    assert_flagged(&Config::from_file(&path).unwrap());
}

/// Run `cfg` (which has a `[sampler]` table) and assert that the bias check flags its draws.
fn assert_flagged(cfg: &Config) {
    let prepared = pipeline::prepare(cfg).unwrap();
    let outcome =
        pipeline::execute_prepared(cfg, &prepared, None, &NoProgress, &AtomicBool::new(false))
            .unwrap();
    let max_rhat = outcome
        .parameters
        .iter()
        .map(|p| p.stats.rhat)
        .fold(0.0, f64::max);
    match outcome.bias_check {
        Some(BiasCheckOutcome::Done(check)) => {
            eprintln!("max R-hat {max_rhat:.3}; {}", check.describe());
            assert!(!check.passed, "not flagged: {}", check.describe());
        }
        other => panic!("no bias check: {other:?}"),
    }
}

/// Issue 22's bike-sharing run: SGLD, ε = 10⁻⁴, the default minibatch (1 %), 4 chains from
/// the MAP. Skipped without `../shared`.
#[test]
fn bias_check_flags_the_biased_bike_sharing_run() {
    let data =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/bike-sharing-poisson");
    if !data.is_dir() {
        eprintln!("skipped: {} is absent", data.display());
        return;
    }
    let text = format!(
        "[data]\nbike_sharing = \"{}\"\n[model]\nkind = \"poisson\"\nlink = \"softplus\"\n\
         prior_variance = 1.0\n[sampler]\nkind = \"sgld\"\nstep_size = 1e-4\n\
         [run]\nseed = 1\nchains = 4\niterations = 5000\nburn_in = 500\ninit = \"map\"\n",
        data.display()
    );
    assert_flagged(&Config::from_toml(&text, "bike.toml").unwrap());
}

/// With `budget_seconds` (per chain), MAMBA's budget is 20 % of the run's CPU seconds
/// (chains × budget), and the resolved file keeps the wall-clock budget.
#[test]
fn default_path_with_a_wall_clock_budget() {
    let dir = tempfile::tempdir().unwrap();
    data(dir.path());
    let text = MODEL_RUN
        .replace("iterations = 5000\n", "budget_seconds = 0.5\n")
        .replace("burn_in = 500\n", "");
    let path = dir.path().join("run.toml");
    std::fs::write(&path, text).unwrap();
    let cfg = Config::from_file(&path).unwrap();
    let prepared = pipeline::prepare(&cfg).unwrap();
    let resolved = default_path::resolve(&cfg, prepared.model()).unwrap();
    assert_eq!(resolved.report.budget_unit, "seconds");
    assert!((resolved.report.tune_budget - 0.2 * 0.5 * 4.0).abs() < 1e-12);
    assert_eq!(resolved.config.run.budget_seconds, Some(0.5));
    assert!(resolved.config.run.iterations.is_none());
}
