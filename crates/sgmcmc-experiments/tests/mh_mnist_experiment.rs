//! `experiments::mh_mnist` on a small synthetic MNIST written here as gzipped IDX files (the
//! tests never read the real data): two separable classes labelled 1 and 7 in 28 × 28 images,
//! plus 0s that must be filtered out.
//!
//! Break-once checks done while writing these tests (each failed as stated, then restored):
//! - test metrics computed at θ₀ instead of the current θ (`run_chain` evaluating `theta0`):
//!   `synthetic_run_records_curves_costs_and_accuracy` failed with "Barker: final test
//!   accuracy 0.51";
//! - the 0s kept as 7s (the filter in `ones_and_sevens` also accepting label 0): the same test
//!   failed on the counts ((200, 310, 340, …) against (200, 200, 300, …)), and
//!   `missing_digits_are_errors` failed (a split of 0s was accepted);
//! - points counted as 50 per iteration (`points: stats.iterations * 50` in `run_chain`): the
//!   same test failed (last record 20000 points, the chain's count 20150);
//! - `record_iterations` replacing its last multiple of `record_every` by `iterations` instead
//!   of appending it: `curves_end_at_the_last_iteration` failed ([0, 20, 45]);
//! - the `--temperature` check removed from `MhMnistSettings::validate`: `bad_settings_are_errors`
//!   failed (T = 0 was reported only through Austerity's temperature);
//! - the test subset drawn from a clock-dependent seed: `same_seed_same_report` failed (test
//!   accuracy 0.51 against 0.455 at θ₀).
//! - `--austerity-temperature` dropped in the CLI's match arm (`src/experiment.rs`):
//!   `cli_writes_report_and_tables` failed (Austerity's temperature 20, want 1).
//! - `chain_stream` ignoring the chain (every chain of a method on one stream):
//!   `several_chains_per_method` failed ("Barker: chains differ").

use crate::common;

use common::{labels, synthetic_mnist, write_split};
use std::fs;
use std::path::Path;

use sgmcmc_experiments::mh_mnist::{
    self, Method, MhMnistError, MhMnistReport, MhMnistSettings, record_iterations,
};

const N_TRAIN: u64 = 400;

/// Settings scaled to the synthetic set: N/T = 20 (MNIST's is 13,007/3,000 ≈ 4.3; a stronger
/// likelihood here makes the chain separate the classes within a few hundred iterations, and
/// s² then sometimes exceeds σ² = 1 at m = 50, so the Barker test's growth is exercised).
fn settings(dir: &Path) -> MhMnistSettings {
    MhMnistSettings {
        iterations: 400,
        record_every: 25,
        test_size: 200,
        temperature: 20.0,
        proposal_sd: 0.1,
        sensitivity_batches: vec![5, 20],
        sensitivity_checkpoints: vec![100, 200],
        sensitivity_repeats: 2,
        ..MhMnistSettings::new(dir)
    }
}

fn run(s: &MhMnistSettings) -> Result<MhMnistReport, MhMnistError> {
    mh_mnist::run(s, &mut |_| {})
}

/// Every test used a whole number of increments of m, or all N points.
fn check_histogram(method: Method, report: &MhMnistReport, m: usize) {
    let run = &report.methods.iter().find(|r| r.method == method).unwrap();
    for (&points, &count) in &run.statistics.points_histogram {
        assert!(
            points % m == 0 || points as u64 == N_TRAIN,
            "{method:?}: {count} tests used {points} points, not a multiple of m = {m} nor N"
        );
    }
}

/// The full run: data counts, curve shapes, data points per iteration for each test, final
/// accuracy on the separable set, the sensitivity table, and the written files.
#[test]
fn synthetic_run_records_curves_costs_and_accuracy() {
    let dir = tempfile::tempdir().unwrap();
    synthetic_mnist(dir.path());
    let s = settings(dir.path());
    let report = run(&s).unwrap();

    let d = &report.data;
    assert_eq!(
        (
            d.train_ones,
            d.train_sevens,
            d.test_available,
            d.test_size,
            d.features
        ),
        (200, 200, 300, 200, 784),
        "the 0s are not among the 1s and 7s"
    );

    let at = record_iterations(400, 25);
    assert_eq!(at.len(), 17);
    assert_eq!(report.methods.len(), 4);
    for run in &report.methods {
        let iters: Vec<usize> = run.curve.iter().map(|p| p.iteration).collect();
        assert_eq!(iters, at, "{:?}: recorded iterations", run.method);
        assert_eq!(run.statistics.iterations, 400);
        let p0 = &run.curve[0];
        assert_eq!(p0.points, 0);
        // At θ₀ = 1 every image is predicted "1": the accuracy is the fraction of 1s among
        // 200 of 150 + 150 drawn without replacement (mean 0.5, sd 0.02); 0.15 is > 7 sd.
        assert!(
            (p0.test_accuracy - 0.5).abs() < 0.15,
            "{:?}: accuracy at θ₀ {}",
            run.method,
            p0.test_accuracy
        );
        for w in run.curve.windows(2) {
            let (a, b) = (&w[0], &w[1]);
            let steps = (b.iteration - a.iteration) as u64;
            let used = b.points - a.points;
            match run.method {
                // The exact test reads all N points every iteration.
                Method::Exact => assert_eq!(used, steps * N_TRAIN, "exact test"),
                // Algorithm 1 reads K = 10 minibatches of m = 50 for s, and one more unless
                // it skips.
                Method::Workshop => assert!(
                    used >= steps * 500 && used <= steps * 550,
                    "workshop test: {used} points in {steps} iterations"
                ),
                // The minibatch tests read at least m and at most N points per iteration.
                _ => assert!(
                    used >= steps * 50 && used <= steps * N_TRAIN,
                    "{:?}: {used} points in {steps} iterations",
                    run.method
                ),
            }
            assert!((0.0..=1.0).contains(&b.acceptance_rate));
        }
        let last = run.last();
        assert_eq!(last.points, run.statistics.points);
        assert!(
            last.acceptance_rate > 0.05,
            "{:?}: acceptance {}",
            run.method,
            last.acceptance_rate
        );
        // Separable classes with a margin: a chain that has moved the 7s' block weights
        // below zero classifies (nearly) every test image; chance is 0.5.
        if run.method == Method::Workshop {
            // At N/T = 20 the workshop test skips most iterations (s ≥ 1.2).
            continue;
        }
        assert!(
            last.test_accuracy > 0.9,
            "{:?}: final test accuracy {}",
            run.method,
            last.test_accuracy
        );
        assert!(last.test_log_lik > p0.test_log_lik, "{:?}", run.method);
    }
    check_histogram(Method::Barker, &report, 50);
    check_histogram(Method::Austerity, &report, 50);
    let barker = &report.methods[0];
    assert_eq!(barker.method, Method::Barker);
    assert!(
        barker.statistics.grown > 0,
        "at N/T = 20 some tests need more than m = 50 points"
    );

    let sens = &report.sensitivity;
    assert_eq!(sens.checkpoints, vec![100, 200]);
    assert_eq!(sens.rows.len(), 2);
    for (row, m) in sens.rows.iter().zip([5, 20]) {
        assert_eq!(row.batch, m);
        assert_eq!(row.accuracy_runs.len(), 2);
        for (j, mean) in row.accuracy_mean.iter().enumerate() {
            let runs: Vec<f64> = row.accuracy_runs.iter().map(|r| r[j]).collect();
            assert!((mean - (runs[0] + runs[1]) / 2.0).abs() < 1e-12);
            let sd = (runs[0] - runs[1]).abs() / 2f64.sqrt();
            assert!((row.accuracy_sd[j] - sd).abs() < 1e-12);
        }
        assert!(row.mean_points >= m as f64 && row.mean_points <= N_TRAIN as f64);
    }
    // m = 5 fails the variance condition more often than m = 20 and grows more.
    assert!(sens.rows[0].grown_fraction > sens.rows[1].grown_fraction);

    let out = dir.path().join("out");
    mh_mnist::write_outputs(&report, &out).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(json["methods"].as_array().unwrap().len(), 4);
    assert_eq!(json["methods"][2]["method"], "exact");
    assert_eq!(json["methods"][3]["method"], "workshop");
    let tables = fs::read_to_string(out.join("tables.md")).unwrap();
    for heading in [
        "### Methods",
        "### At equal data cost",
        "### Minibatch Barker",
    ] {
        assert!(tables.contains(heading), "tables.md lacks {heading}");
    }
}

/// Same seed, same report (timings aside); another seed, other chains.
#[test]
fn same_seed_same_report() {
    let dir = tempfile::tempdir().unwrap();
    synthetic_mnist(dir.path());
    let s = MhMnistSettings {
        iterations: 60,
        sensitivity_repeats: 0,
        ..settings(dir.path())
    };
    let strip = |r: &MhMnistReport| {
        r.methods
            .iter()
            .map(|m| (m.curve.clone(), m.statistics.clone()))
            .collect::<Vec<_>>()
    };
    let a = run(&s).unwrap();
    let b = run(&s).unwrap();
    assert_eq!(strip(&a), strip(&b));
    assert!(a.sensitivity.rows.is_empty());
    let c = run(&MhMnistSettings { seed: 2, ..s }).unwrap();
    assert_ne!(strip(&a), strip(&c));
}

/// Several chains per method: the first chain of Barker, Austerity and the exact test is the
/// one-chain run's (its streams are kept), the others differ, and the equal-cost table gives
/// mean ± sd over the chains.
#[test]
fn several_chains_per_method() {
    let dir = tempfile::tempdir().unwrap();
    synthetic_mnist(dir.path());
    let one = MhMnistSettings {
        iterations: 60,
        sensitivity_repeats: 0,
        ..settings(dir.path())
    };
    let a = run(&one).unwrap();
    let b = run(&MhMnistSettings { chains: 3, ..one }).unwrap();
    assert_eq!(b.methods.len(), 12);
    for method in Method::ALL {
        let chains: Vec<_> = b.methods.iter().filter(|r| r.method == method).collect();
        assert_eq!(
            chains.iter().map(|r| r.chain).collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
        let single = a.methods.iter().find(|r| r.method == method).unwrap();
        if method != Method::Workshop {
            assert_eq!(chains[0].curve, single.curve, "{method:?}: the first chain");
        }
        if method != Method::Exact || chains[1].curve.last().unwrap().acceptance_rate > 0.0 {
            assert_ne!(
                chains[1].curve, chains[2].curve,
                "{method:?}: chains differ"
            );
        }
    }
    let tables = mh_mnist::markdown(&b);
    assert!(tables.contains(" ± "), "{tables}");
    assert!(tables.contains("3 chain(s) per method"));
}

/// With 45 iterations and records every 20, the curves hold iterations 0, 20, 40 and 45.
#[test]
fn curves_end_at_the_last_iteration() {
    assert_eq!(record_iterations(45, 20), vec![0, 20, 40, 45]);
    assert_eq!(record_iterations(40, 20), vec![0, 20, 40]);
    let dir = tempfile::tempdir().unwrap();
    synthetic_mnist(dir.path());
    let s = MhMnistSettings {
        iterations: 45,
        record_every: 20,
        sensitivity_repeats: 0,
        ..settings(dir.path())
    };
    let report = run(&s).unwrap();
    for m in &report.methods {
        let iters: Vec<usize> = m.curve.iter().map(|p| p.iteration).collect();
        assert_eq!(iters, vec![0, 20, 40, 45]);
    }
}

fn error_text(s: &MhMnistSettings) -> String {
    match run(s) {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

/// A missing file is named.
#[test]
fn bad_data_dir_names_the_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-dir");
    let msg = error_text(&settings(&missing));
    assert!(msg.contains("train-images-idx3-ubyte.gz"), "{msg}");
    // Training files present, test files absent.
    write_split(dir.path(), "train", &labels(5, 5, 0), 1);
    let msg = error_text(&settings(dir.path()));
    assert!(msg.contains("t10k-images-idx3-ubyte.gz"), "{msg}");
}

/// Splits without both digits, or with too few test images, are errors naming the split.
#[test]
fn missing_digits_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    write_split(dir.path(), "train", &labels(0, 0, 30), 1);
    write_split(dir.path(), "t10k", &labels(10, 10, 0), 2);
    let msg = error_text(&settings(dir.path()));
    assert!(
        msg.contains("train split") && msg.contains("0 1s and 0 7s"),
        "{msg}"
    );

    write_split(dir.path(), "train", &labels(10, 0, 3), 1);
    let msg = error_text(&settings(dir.path()));
    assert!(msg.contains("10 1s and 0 7s"), "{msg}");

    write_split(dir.path(), "train", &labels(10, 10, 0), 1);
    let msg = error_text(&settings(dir.path()));
    assert!(
        msg.contains("t10k split") && msg.contains("has 20 images") && msg.contains("200"),
        "{msg}"
    );
}

/// Settings out of range are errors naming the setting, found before any data is read.
#[test]
fn bad_settings_are_errors() {
    let base = settings(Path::new("/nonexistent"));
    let cases: Vec<(MhMnistSettings, &str)> = vec![
        (
            MhMnistSettings {
                temperature: 0.0,
                ..base.clone()
            },
            "--temperature",
        ),
        (
            MhMnistSettings {
                temperature: -3.0,
                ..base.clone()
            },
            "--temperature",
        ),
        (
            MhMnistSettings {
                temperature: f64::NAN,
                ..base.clone()
            },
            "--temperature",
        ),
        (
            MhMnistSettings {
                austerity_temperature: Some(0.0),
                ..base.clone()
            },
            "--austerity-temperature",
        ),
        (
            MhMnistSettings {
                proposal_sd: 0.0,
                ..base.clone()
            },
            "--proposal-sd",
        ),
        (
            MhMnistSettings {
                iterations: 0,
                ..base.clone()
            },
            "--iterations",
        ),
        (
            MhMnistSettings {
                record_every: 0,
                ..base.clone()
            },
            "--record-every",
        ),
        (
            MhMnistSettings {
                test_size: 0,
                ..base.clone()
            },
            "--test-size",
        ),
        (
            MhMnistSettings {
                batch: 1,
                ..base.clone()
            },
            "at least 2",
        ),
        (
            MhMnistSettings {
                sensitivity_batches: vec![10, 1],
                ..base.clone()
            },
            "at least 2",
        ),
        (
            MhMnistSettings {
                austerity_tolerance: 1.0,
                ..base.clone()
            },
            "--austerity-tolerance",
        ),
        (
            MhMnistSettings {
                sensitivity_repeats: 500,
                ..base.clone()
            },
            "random streams",
        ),
        (
            MhMnistSettings {
                chains: 0,
                ..base.clone()
            },
            "--chains",
        ),
        (
            MhMnistSettings {
                workshop_minibatches: 1,
                ..base.clone()
            },
            "--workshop-minibatches",
        ),
    ];
    for (s, want) in cases {
        let msg = error_text(&s);
        assert!(msg.contains(want), "expected {want:?} in {msg:?}");
    }
}
