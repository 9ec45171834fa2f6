//! The `[evaluation]` table through `sgmcmc run` (moved with the binary from the core's
//! tests/evaluation.rs): metrics in summary.json, held-out rows never reach the model, and the
//! error cases as one-line errors.

use crate::common;

use common::evaluation::*;

use common::{assert_fails_with, dataset, linear_data, logistic_data, normals, sgmcmc};
use sgmcmc::diagnostics::accuracy::{self};
use sgmcmc::model::{Bernoulli, LogisticRegression, NormalPrior, Predictive};
use sgmcmc::reference::ReferenceMoments;
use std::path::Path;

fn run_ok(dir: &Path) -> serde_json::Value {
    let out = sgmcmc(&["run", "run.toml", "--out", "out"], dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("evaluation over"), "{stdout}");
    let text = std::fs::read_to_string(dir.join("out/summary.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The CLI on a logistic regression with a random test split: summary.json carries every
/// classifier metric, the model saw only the training rows, and the bins add up.
#[test]
fn a_run_with_a_test_split_reports_the_metrics_in_summary_json() {
    let dir = tempfile::tempdir().unwrap();
    let (x, y) = logistic_data(11, 1000, &[1.5, -1.0], 0.3);
    write_xy(dir.path(), "all", &x, &y, 2);
    let toml = "[data]\nfeatures = \"all_x.npy\"\ntargets = \"all_y.npy\"\n\n\
                [model]\nkind = \"logistic\"\nintercept = true\n\n\
                [sampler]\nkind = \"sgld\"\nstep_size = 1e-4\n\n[gradient]\nbatch_size = 100\n\n\
                [run]\nchains = 2\niterations = 2000\nburn_in = 200\n\n\
                [evaluation]\ntest_fraction = 0.2\nsplit = \"random\"\nsplit_seed = 5\n\
                predictive_draws = 500\n";
    std::fs::write(dir.path().join("run.toml"), toml).unwrap();
    let s = run_ok(dir.path());
    assert_eq!(s["settings"]["model"]["num_data"], 800);
    let ev = &s["evaluation"];
    assert_eq!(ev["chains"], 2);
    assert_eq!(ev["draws_per_chain"], 2000);
    assert!(ev.get("reference").is_none());
    let t = &ev["test"];
    assert_eq!(t["task"], "classification");
    assert_eq!(t["classes"], 2);
    assert_eq!(t["rows"], 200);
    assert_eq!(t["training_rows"], 800);
    assert_eq!(t["draws"], 500);
    assert_eq!(t["calibration_bins"], 10);
    assert!(t["split"].as_str().unwrap().contains("split_seed = 5"));
    let f = |k: &str| t[k].as_f64().unwrap_or_else(|| panic!("{k}: {t}"));
    // Jensen: the posterior-predictive log-loss never exceeds the MAMBA mean.
    assert!(f("log_loss") <= f("log_loss_mamba"));
    // With |w| ~ 1.5 most rows are predictable: well above chance, below the perfect score.
    assert!(
        f("accuracy") > 0.6 && f("accuracy") < 1.0,
        "{}",
        f("accuracy")
    );
    assert!(f("log_loss") < 2f64.ln(), "better than a coin");
    assert!((0.0..=1.0).contains(&f("ece")) && f("mce") >= f("ece"));
    let bins = t["calibration"].as_array().unwrap();
    assert_eq!(bins.len(), 10);
    let counted: u64 = bins.iter().map(|b| b["count"].as_u64().unwrap()).sum();
    assert_eq!(counted, 200);
    // Confidences of a binary classifier are top-class probabilities ≥ 0.5.
    assert!(bins[..5].iter().all(|b| b["count"] == 0));
    // The config (with its evaluation table) is recorded.
    assert_eq!(s["settings"]["config"]["evaluation"]["split_seed"], 5);
}

/// A linear regression whose last 20 % of rows follow a very different slope (y = 20·x₁):
/// with `test_fraction` those rows are held out, so the chains target the conjugate posterior
/// of the first 80 % — computed here in closed form and given as the reference — and the
/// z-score is small. Had the model seen the held-out rows, w₁ would move by many posterior sds.
/// Also checks ξ against the summary table's sds (same pooled draws, same divisor).
#[test]
fn held_out_rows_never_reach_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let d = 2;
    let (n, n_train) = (500, 400);
    let (x, mut y) = linear_data(31, n, &[1.0, -0.5], 0.0, 1.0);
    let poison = normals(32, 0, n - n_train);
    for i in n_train..n {
        y[i] = 20.0 * x[i * d] + poison[i - n_train];
    }
    write_xy(dir.path(), "all", &x, &y, d);
    let (mean, cov) = conjugate_posterior(&x[..n_train * d], &y[..n_train], d, 10.0);
    let (mean_all, _) = conjugate_posterior(&x, &y, d, 10.0);
    let moved = (mean_all[0] - mean[0]) / cov[0].sqrt();
    assert!(moved > 30.0, "the poison must move w₁ far: {moved} sds");
    reference(mean, cov, names(d))
        .save(&dir.path().join("reference.json"))
        .unwrap();
    let toml = format!(
        "[data]\nfeatures = \"all_x.npy\"\ntargets = \"all_y.npy\"\n\n{LINEAR_RUN}\n\
         [evaluation]\nreference = \"reference.json\"\ntest_fraction = 0.2\n"
    );
    std::fs::write(dir.path().join("run.toml"), toml).unwrap();
    let s = run_ok(dir.path());
    assert_eq!(s["settings"]["model"]["num_data"], n_train);
    let r = &s["evaluation"]["reference"];
    let z = r["mean_squared_z_score"].as_f64().unwrap();
    let xi = r["relative_sd_error"].as_f64().unwrap();
    eprintln!("held-out run: z = {z:.4}, xi = {xi:.4}");
    // SGLD with εP ≈ 0.08 (P ≈ 400): sds inflated by ≈ 2 %, ESS in the hundreds; a z-score
    // of 0.1 is a third of a posterior sd, and the poisoned posterior would give ≈ moved²/2.
    assert!(z < 0.1, "z = {z}");
    assert!(xi < 0.15, "xi = {xi}");
    assert_eq!(r["parameter_names_match"], true);
    assert_eq!(r["z_score_draws"], 4 * 5000 / 2);
    // ξ again from the summary table's sds.
    let reference_sd: Vec<f64> = ReferenceMoments::load(&dir.path().join("reference.json"))
        .unwrap()
        .sd;
    let sd: Vec<f64> = s["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["sd"].as_f64().unwrap())
        .collect();
    let xi_table = accuracy::relative_sd_error_of(&sd, &reference_sd).unwrap();
    close(xi, xi_table, 1e-10, "xi vs the summary table");
    // The test rows are the poisoned ones: the fit predicts them badly.
    let t = &s["evaluation"]["test"];
    assert_eq!(t["task"], "regression");
    assert!(t["rmse"].as_f64().unwrap() > 5.0, "{t}");
}

#[test]
fn bad_evaluation_tables_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (x, y) = logistic_data(51, 100, &[1.0, -1.0], 0.0);
    write_xy(dir.path(), "all", &x, &y, 2);
    write_xy(dir.path(), "wide", &normals(52, 0, 30), &y[..10], 3);
    reference(
        vec![0.0; 3],
        vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
        names(3),
    )
    .save(&dir.path().join("ref3.json"))
    .unwrap();
    let base = "[data]\nfeatures = \"all_x.npy\"\ntargets = \"all_y.npy\"\n\n\
                [sampler]\nkind = \"sgld\"\nstep_size = 1e-4\n\n[run]\niterations = 10\n\n";
    let logistic = "[model]\nkind = \"logistic\"\n\n";
    let case = |model: &str, evaluation: &str, needles: &[&str]| {
        let toml = format!("{base}{model}{evaluation}");
        std::fs::write(dir.path().join("run.toml"), toml).unwrap();
        assert_fails_with(dir.path(), needles);
        assert!(
            !dir.path().join("out").exists(),
            "no output before the checks pass"
        );
    };
    case(
        logistic,
        "[evaluation]\ntest_fraction = 0.2\ntest_frac = 0.1\n",
        &["test_frac"],
    );
    case(
        logistic,
        "[evaluation.test]\nfeatures = \"all_x.npy\"\nlabels = \"all_y.npy\"\n",
        &["labels"],
    );
    case(
        logistic,
        "[evaluation]\nreference = \"ref3.json\"\n",
        &["ref3.json", "3 parameters", "`logistic` has 2", "beta[0]"],
    );
    case(
        logistic,
        "[evaluation]\nreference = \"missing.json\"\n",
        &["missing.json"],
    );
    case(
        logistic,
        "[evaluation.test]\nfeatures = \"nope_x.npy\"\ntargets = \"all_y.npy\"\n",
        &["nope_x.npy"],
    );
    case(
        logistic,
        "[evaluation.test]\nfeatures = \"wide_x.npy\"\ntargets = \"wide_y.npy\"\n",
        &["3 feature columns", "have 2"],
    );
    case(
        "[model]\nkind = \"gaussian\"\n\n",
        "[evaluation]\ntest_fraction = 0.2\n",
        &["gaussian", "predictive"],
    );
    case(
        logistic,
        "[evaluation]\ntest_fraction = 0.2\n[evaluation.test]\nfeatures = \"all_x.npy\"\n\
         targets = \"all_y.npy\"\n",
        &["not both"],
    );
    case(
        logistic,
        "[evaluation]\ntest_fraction = 1.5\n",
        &["(0, 1)", "1.5"],
    );
    case(
        logistic,
        "[evaluation]\ncalibration_bins = 10\n",
        &["nothing to evaluate"],
    );
    case(
        logistic,
        "[evaluation]\ntest_fraction = 0.2\nsplit_seed = 3\n",
        &["split_seed", "random"],
    );
    case(
        logistic,
        "[evaluation]\ntest_fraction = 0.2\ncalibration_bins = 0\n",
        &["calibration_bins"],
    );
    case(
        logistic,
        "[evaluation]\ntest_fraction = 0.2\nsplit = \"middle\"\n",
        &["middle"],
    );
}

/// Labels outside the support are named by their row in the file even when they fall in the
/// held-out part.
#[test]
fn a_bad_label_in_the_held_out_rows_names_its_file_row() {
    let dir = tempfile::tempdir().unwrap();
    let (x, mut y) = logistic_data(61, 50, &[1.0], 0.0);
    y[47] = 3.0;
    write_xy(dir.path(), "all", &x, &y, 1);
    let toml = "[data]\nfeatures = \"all_x.npy\"\ntargets = \"all_y.npy\"\n\n\
                [model]\nkind = \"logistic\"\n\n[sampler]\nkind = \"sgld\"\nstep_size = 1e-4\n\n\
                [evaluation]\ntest_fraction = 0.2\n";
    std::fs::write(dir.path().join("run.toml"), toml).unwrap();
    assert_fails_with(dir.path(), &["all_y.npy", "row 48"]);
    // And a model error never panics through the library either.
    let model = LogisticRegression::new(
        dataset(vec![1.0], 1, Some(vec![1.0]), false),
        Bernoulli,
        NormalPrior::new(1.0).unwrap(),
        false,
    )
    .unwrap();
    assert!(model.prepare_held_out_targets(&[0.5], "t").is_err());
}
