//! `experiments::ccadl_mnist` on a small synthetic MNIST written here as gzipped IDX files (the
//! tests never read the real data): 7s and 9s with a bright block each in its own place, plus 1s
//! that must be filtered out.
//!
//! Break-once checks done while writing these tests (each failed as stated, then restored):
//! - the running mean never updated (`Trace::iterated` not adding θₜ to the sum):
//!   `the_curve_climbs_and_the_marginals_match_nuts` failed (the test log-likelihood at the
//!   mean stayed at its start value, −103.97);
//! - the 1s kept as 9s (the filter accepting label 1): `sevens_and_nines_are_loaded_and_projected`
//!   failed on the counts (150, 190, 180, …).
//!
//! Not caught: the marginal moments collected from the start instead of after the curve. Here the
//! curve is 2,100 iterations against 40,000 draws, too little burn-in to move the RMS error past
//! its tolerance.

use crate::common;

use common::{synthetic_digits, write_split};
use sgmcmc::model::Model;
use sgmcmc_experiments::ccadl_mnist::{self, CcadlMnistError, CcadlMnistSettings};
use sgmcmc_experiments::normal_gamma::Method;
use std::path::Path;

/// Training: 150 7s, 130 9s, 60 1s; test: 80 7s, 70 9s, 30 1s.
fn write_digits(dir: &Path) {
    write_split(
        dir,
        "train",
        &synthetic_digits(&[(7, 150), (9, 130), (1, 60)]),
        21,
    );
    write_split(
        dir,
        "t10k",
        &synthetic_digits(&[(7, 80), (9, 70), (1, 30)]),
        22,
    );
}

/// Settings scaled to N = 280: D = 8, n = 40, one step and diffusion, one method unless set.
fn settings(dir: &Path) -> CcadlMnistSettings {
    let mut s = CcadlMnistSettings::new(dir);
    s.projection_dim = 8;
    s.batch = 40;
    s.steps = vec![0.02];
    s.diffusions = vec![10.0];
    s.methods = vec![Method::Ccadl];
    s.passes = 300;
    s.marginal_samples = 40_000;
    s.runs = 1;
    s.reference.chains = 2;
    s.reference.warmup = 500;
    s.reference.draws = 2000;
    s
}

#[test]
fn sevens_and_nines_are_loaded_and_projected() {
    let dir = tempfile::tempdir().unwrap();
    write_digits(dir.path());
    let s = settings(dir.path());
    let data = ccadl_mnist::load(&s).unwrap();
    let d = &data.summary;
    assert_eq!(
        (
            d.train_sevens,
            d.train_nines,
            d.test_size,
            d.pixels,
            d.features
        ),
        (150, 130, 150, 784, 8)
    );
    assert_eq!(data.train.num_data(), 280);
    assert_eq!(data.train.dim(), 8);
    // The projection is fixed by the seed: the same seed gives the same matrix, another seed
    // another one, and its entries have variance 1/dim.
    let p = ccadl_mnist::projection(784, 8, s.seed);
    assert_eq!(p, ccadl_mnist::projection(784, 8, s.seed));
    assert_ne!(p, ccadl_mnist::projection(784, 8, s.seed + 1));
    let var = p.iter().map(|x| x * x).sum::<f64>() / p.len() as f64;
    // 6,272 entries: the sample variance's relative sd is √(2/6272) = 1.8 %; 4 sd.
    assert!(
        (var * 8.0 - 1.0).abs() < 0.072,
        "variance × dim = {}",
        var * 8.0
    );
}

/// CCAdL on the synthetic set: the test log-likelihood at the running mean climbs from its
/// start to near the NUTS posterior mean's, and the moments of the draws after the curve match
/// NUTS's within a tolerance set from the Monte Carlo error.
#[test]
fn the_curve_climbs_and_the_marginals_match_nuts() {
    let dir = tempfile::tempdir().unwrap();
    write_digits(dir.path());
    let report = ccadl_mnist::run(&settings(dir.path()), &|_| {}).unwrap();
    assert_eq!(report.runs.len(), 1);
    let run = &report.runs[0];
    assert!(run.diverged_at.is_none());
    let curve = &run.test_log_lik_at_mean;
    assert_eq!(curve.len(), 301);
    let reference = report.reference.test_log_lik_at_mean;
    let (start, end) = (curve[0], curve[300]);
    assert!(
        end > start + 0.8 * (reference - start),
        "test log-likelihood at the mean: start {start:.2}, after 300 passes {end:.2}, NUTS mean \
         {reference:.2}"
    );
    let errors = run
        .marginal_errors
        .as_ref()
        .expect("A = 10 collects marginals");
    // 40,000 draws with autocorrelation times of a few hundred steps leave each standardised
    // mean error a Monte Carlo sd of about 0.1; the RMS over 8 coordinates stays below 0.35
    // unless the draws are biased (seed 2015: 0.156; median sd ratio 0.985).
    assert!(
        errors.rms_mean_error < 0.35,
        "RMS mean error {:.3} (in NUTS sds)",
        errors.rms_mean_error
    );
    assert!(
        (0.75..1.25).contains(&errors.median_sd_ratio),
        "median sd ratio {:.3}",
        errors.median_sd_ratio
    );
    // The tables and figures are written.
    let out = dir.path().join("out");
    ccadl_mnist::write_outputs(&report, &out).unwrap();
    for file in ["report.json", "tables.md", "curves.svg", "marginals.svg"] {
        assert!(out.join(file).is_file(), "{file} missing");
    }
    let tables = std::fs::read_to_string(out.join("tables.md")).unwrap();
    assert!(tables.contains("| 2e-2 | 10 | CCAdL |"), "{tables}");
}

/// Every method runs; the same seed gives the same curves whatever the thread count.
#[test]
fn every_method_runs_and_the_seed_fixes_the_curves() {
    let dir = tempfile::tempdir().unwrap();
    write_digits(dir.path());
    let mut s = settings(dir.path());
    s.methods = Method::PAPER.to_vec();
    s.diffusions = vec![1.0, 10.0];
    s.passes = 5;
    s.marginal_samples = 200;
    s.runs = 2;
    s.reference.warmup = 100;
    s.reference.draws = 100;
    let report = ccadl_mnist::run(&s, &|_| {}).unwrap();
    assert_eq!(report.runs.len(), 2 * 2 * 3);
    let one_thread = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap()
        .install(|| ccadl_mnist::run(&s, &|_| {}).unwrap());
    for (a, b) in report.runs.iter().zip(&one_thread.runs) {
        assert_eq!(
            a.test_log_lik_at_mean, b.test_log_lik_at_mean,
            "{:?} h = {} A = {} run {}",
            a.method, a.h, a.diffusion, a.run
        );
        // Only the runs at the marginal A collect moments.
        assert_eq!(a.marginal.is_some(), a.diffusion == 10.0);
    }
    // Repeats differ.
    assert_ne!(
        report.runs[0].test_log_lik_at_mean,
        report.runs[6].test_log_lik_at_mean
    );
}

#[test]
fn bad_settings_and_missing_files_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = ccadl_mnist::run(&settings(dir.path()), &|_| {}).unwrap_err();
    assert!(
        missing.to_string().contains("train-images-idx3-ubyte"),
        "{missing}"
    );
    write_digits(dir.path());
    let check = |change: &dyn Fn(&mut CcadlMnistSettings), needle: &str| {
        let mut s = settings(dir.path());
        change(&mut s);
        let err = ccadl_mnist::run(&s, &|_| {}).unwrap_err();
        assert!(
            matches!(err, CcadlMnistError::Setting(_) | CcadlMnistError::Nuts(_)),
            "{err:?}"
        );
        assert!(err.to_string().contains(needle), "{err} lacks {needle}");
    };
    check(&|s| s.passes = 0, "passes");
    check(&|s| s.runs = 0, "runs");
    check(&|s| s.batch = 1, "batch");
    check(&|s| s.steps = vec![-1.0], "step size");
    check(&|s| s.diffusions = vec![f64::NAN], "diffusion");
    check(&|s| s.projection_dim = 4, "w2 and w5");
    check(&|s| s.marginal_samples = 1, "marginal samples");
    check(&|s| s.reference.draws = 2, "draws");
}
