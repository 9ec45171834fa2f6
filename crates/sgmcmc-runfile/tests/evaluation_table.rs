//! The `[evaluation]` table end to end through the library: parsing and defaults, explicit
//! test files, disjoint random splits, and a run too short for the metrics.

use crate::common;

use common::evaluation::*;

use common::{dataset, linear_data};
use sgmcmc::data::Features;
use sgmcmc::runner::NoProgress;
use sgmcmc_runfile::config::Config;
use sgmcmc_runfile::pipeline::{self, EvaluationOutcome, EvaluationReport};
use std::sync::atomic::AtomicBool;

// ---------------------------------------------------------------------------------------------

/// A config with `[evaluation]` parses, keeps its keys through a serde round trip, and fills
/// its defaults (10 bins, 1000 predictive draws).
#[test]
fn the_evaluation_table_round_trips() {
    let text = "[data]\nsynthetic = { rows = 100, dim = 2 }\n[model]\nkind = \"logistic\"\n\
                [sampler]\nkind = \"sgld\"\nstep_size = 1e-3\n\
                [evaluation]\nreference = \"ref.json\"\ntest_fraction = 0.25\nsplit = \"random\"\n\
                split_seed = 7\n";
    let cfg = Config::from_toml(text, "run.toml").unwrap();
    let ev = cfg.evaluation.as_ref().unwrap();
    assert_eq!(ev.test_fraction, Some(0.25));
    assert_eq!(ev.split_seed, Some(7));
    assert_eq!(ev.calibration_bins, 10);
    assert_eq!(ev.predictive_draws, 1000);
    let back = Config::from_toml(&toml::to_string(&cfg).unwrap(), "back.toml").unwrap();
    assert_eq!(back, cfg);
    let text = "[data]\nsynthetic = { rows = 100, dim = 2 }\n[model]\nkind = \"logistic\"\n\
                [sampler]\nkind = \"sgld\"\nstep_size = 1e-3\n\
                [evaluation.test]\nfeatures = \"x.npy\"\ntargets = \"y.npy\"\n";
    let cfg = Config::from_toml(text, "run.toml").unwrap();
    let test = cfg.evaluation.as_ref().unwrap().test.as_ref().unwrap();
    assert!(test.features.is_some() && test.targets.is_some());
    let back = Config::from_toml(&toml::to_string(&cfg).unwrap(), "back.toml").unwrap();
    assert_eq!(back, cfg);
}

/// Explicit test files and the library path: `prepare` + `execute_prepared` on a conjugate
/// linear regression; the test RMSE and log-loss match the noise level (σ = 1): RMSE ≈ 1
/// and log-loss ≈ ½·ln 2π + ½ within their sampling error on 1000 test rows.
#[test]
fn explicit_test_files_through_the_library() {
    let dir = tempfile::tempdir().unwrap();
    let d = 2;
    let (x, y) = linear_data(41, 400, &[0.7, 0.2], 0.0, 1.0);
    let (xt, yt) = linear_data(42, 1000, &[0.7, 0.2], 0.0, 1.0);
    write_xy(dir.path(), "train", &x, &y, d);
    write_xy(dir.path(), "test", &xt, &yt, d);
    let (mean, cov) = conjugate_posterior(&x, &y, d, 10.0);
    reference(mean, cov, names(d))
        .save(&dir.path().join("reference.json"))
        .unwrap();
    let toml = format!(
        "[data]\nfeatures = \"train_x.npy\"\ntargets = \"train_y.npy\"\n\n{LINEAR_RUN}\n\
         [evaluation]\nreference = \"reference.json\"\n\n\
         [evaluation.test]\nfeatures = \"test_x.npy\"\ntargets = \"test_y.npy\"\n"
    );
    let path = dir.path().join("run.toml");
    std::fs::write(&path, toml).unwrap();
    let cfg = Config::from_file(&path).unwrap();
    let prepared = pipeline::prepare(&cfg).unwrap();
    assert_eq!(prepared.model().num_data(), 400);
    assert!(prepared.predictive().is_some());
    let outcome =
        pipeline::execute_prepared(&cfg, &prepared, None, &NoProgress, &AtomicBool::new(false))
            .unwrap();
    let Some(EvaluationOutcome::Done(report)) = &outcome.evaluation else {
        panic!("no evaluation: {:?}", outcome.evaluation)
    };
    let EvaluationReport {
        reference: Some(r),
        test: Some(t),
        ..
    } = report.as_ref()
    else {
        panic!("both parts expected: {report:?}")
    };
    assert!(r.mean_squared_z_score < 0.1, "{r:?}");
    assert_eq!(t.training_rows, 400);
    assert!(t.split.contains("test_x.npy"), "{}", t.split);
    let m = &t.metrics;
    assert_eq!((m.rows, m.draws), (1000, 1000));
    // RMSE² ≈ σ² + parameter error (≈ D/N = 0.005); sd of the mean of 1000 χ²₁ is √(2/1000).
    let rmse = m.rmse.unwrap();
    assert!(
        (rmse * rmse - 1.005).abs() < 4.0 * (2.0f64 / 1000.0).sqrt(),
        "{rmse}"
    );
    let nlpd = 0.5 * (2.0 * std::f64::consts::PI).ln() + 0.5 * rmse * rmse;
    close(
        m.log_loss,
        nlpd,
        0.01,
        "log-loss vs the Gaussian density at the RMSE",
    );
    assert!(m.log_loss <= m.log_loss_mamba);
    // summary.json carries it under `evaluation`.
    let summary = pipeline::summary_json(&outcome, &cfg, prepared.model());
    assert_eq!(summary["evaluation"]["test"]["rows"], 1000);
    assert!(summary["evaluation"]["reference"]["relative_sd_error"].is_f64());
    // Without [evaluation], no key.
    let mut plain = cfg.clone();
    plain.evaluation = None;
    let prepared = pipeline::prepare(&plain).unwrap();
    assert!(prepared.evaluation.is_none() && prepared.predictive().is_none());
}

/// The split itself: training and test rows are disjoint, cover the data, and keep the order.
#[test]
fn split_parts_are_disjoint_and_cover_the_rows() {
    let x: Vec<f64> = (0..20).map(f64::from).collect();
    let y: Vec<f64> = (0..10).map(f64::from).collect();
    let data = dataset(x, 2, Some(y), false);
    let rows = pipeline::test_rows(10, 0.3, sgmcmc_runfile::config::SplitKind::Random, 1).unwrap();
    assert_eq!(rows.len(), 3);
    let (train, test) = pipeline::split_dataset(&data, &rows);
    let mut seen: Vec<f64> = train.targets.clone().unwrap();
    seen.extend(test.targets.clone().unwrap());
    seen.sort_by(f64::total_cmp);
    assert_eq!(seen, (0..10).map(f64::from).collect::<Vec<_>>());
    assert_eq!(
        test.targets.unwrap(),
        rows.iter().map(|&i| i as f64).collect::<Vec<_>>()
    );
    let Features::F64(m) = &train.features else {
        unreachable!()
    };
    let t = train.targets.unwrap();
    assert!(t.windows(2).all(|w| w[0] < w[1]), "order kept");
    for (k, &yi) in t.iter().enumerate() {
        assert_eq!(
            m.row(k),
            &[2.0 * yi, 2.0 * yi + 1.0],
            "row {k} travels with its target"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Error cases: one line naming the problem, before any output is written.
// ---------------------------------------------------------------------------------------------

/// A run too short for the metrics still succeeds and says why there are none: one draw has no
/// standard deviation.
#[test]
fn a_run_too_short_for_the_metrics_reports_why() {
    let text = "[data]\nsynthetic = { rows = 200, dim = 2 }\n[model]\nkind = \"logistic\"\n\
                [sampler]\nkind = \"sgld\"\nstep_size = 1e-4\n\
                [run]\nchains = 1\niterations = 1\ninit = \"zeros\"\n\
                [evaluation]\nreference = \"ref.json\"\ntest_fraction = 0.5\n";
    let dir = tempfile::tempdir().unwrap();
    reference(vec![0.0; 2], vec![1.0, 0.0, 0.0, 1.0], names(2))
        .save(&dir.path().join("ref.json"))
        .unwrap();
    let path = dir.path().join("run.toml");
    std::fs::write(&path, text).unwrap();
    let cfg = Config::from_file(&path).unwrap();
    let prepared = pipeline::prepare(&cfg).unwrap();
    let outcome =
        pipeline::execute_prepared(&cfg, &prepared, None, &NoProgress, &AtomicBool::new(false))
            .unwrap();
    let summary = pipeline::summary_json(&outcome, &cfg, prepared.model());
    let error = summary["evaluation"]["error"].as_str().unwrap();
    assert!(error.contains("at least 2 draws, got 1"), "{error}");
    assert!(outcome.evaluation.unwrap().describe()[0].contains("not computed"));
}
