//! `sgmcmc coreset CONFIG` end to end (the Gaussian location model with the exact kernel, the
//! sparse regression with the Gibbs kernel, SGLD on full coreset gradients) and its errors, and
//! the Fig. 1 experiment's must-show 3 at a reduced length.

use crate::common;

use sgmcmc_experiments::coreset_fig1::{self, CoresetFig1Settings, OptimiserKind, Problem};
use std::path::Path;

fn write(dir: &Path, text: &str) {
    std::fs::write(dir.join("coreset.toml"), text).unwrap();
}

fn run(dir: &Path) -> (bool, String, String) {
    let out = common::sgmcmc(
        &["coreset", "coreset.toml", "--out", "out", "--overwrite"],
        dir,
    );
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const GAUSSIAN: &str = r#"
[data]
synthetic = { rows = 2000, dim = 5, generator = "gaussian_location", seed = 3 }

[model]
kind = "gaussian"
prior_variance = 1.0

[coreset]
seed = 2
size = 100
iterations = 3000
draws = 2000
kernel = { kind = "exact_gaussian" }
"#;

/// The exact-kernel run: the hot-start test passes, the weights are trained, and the draws'
/// means match the full posterior N(Σx/(1 + N), I/(1 + N)) within a few posterior sds (the
/// trained coreset posterior is close to it).
#[test]
fn gaussian_coreset_run_writes_weights_and_draws() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), GAUSSIAN);
    let (ok, stdout, stderr) = run(dir.path());
    assert!(ok, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("hot-start test passed at iteration"),
        "{stdout}"
    );
    let report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("out/coreset.json")).unwrap(),
    )
    .unwrap();
    let weights: Vec<f64> = serde_json::from_value(report["weights"].clone()).unwrap();
    assert_eq!(weights.len(), 100);
    assert!(weights.iter().all(|w| *w >= 0.0));
    assert!(
        weights.iter().any(|w| (*w - 20.0).abs() > 1e-6),
        "weights moved from N/M"
    );
    assert!(report["optimiser_steps"].as_u64().unwrap() > 2000);
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("out/summary.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(summary["draws_per_chain"], 1000);
    // The full posterior of the same data.
    let data = sgmcmc::data::synthetic::gaussian_location(2000, 5, 3);
    let sgmcmc::data::Features::F64(x) = &data.features else {
        unreachable!()
    };
    let sd = (1.0f64 / 2001.0).sqrt();
    for (j, row) in summary["parameters"].as_array().unwrap().iter().enumerate() {
        let want = x.iter_rows().map(|r| r[j]).sum::<f64>() / 2001.0;
        let got = row["mean"].as_f64().unwrap();
        assert!(
            (got - want).abs() < 4.0 * sd,
            "θ[{j}]: {got} vs {want} (sd {sd})"
        );
    }
    assert!(dir.path().join("out/draws.zarr").exists());
}

/// The Gibbs kernel on the sparse regression and SGLD on full coreset gradients both run from
/// the run file; the Gibbs run's σ² is near the generating 25² = 625.
#[test]
fn gibbs_and_sampler_kernels_run_from_the_file() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        r#"
[data]
synthetic = { rows = 5000, dim = 10, generator = "sparse_regression", seed = 7 }
[model]
kind = "sparse_regression"
[coreset]
size = 200
iterations = 1000
draws = 1000
kernel = { kind = "gibbs" }
"#,
    );
    let (ok, stdout, stderr) = run(dir.path());
    assert!(ok, "{stdout}\n{stderr}");
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("out/summary.json")).unwrap(),
    )
    .unwrap();
    let rows = summary["parameters"].as_array().unwrap();
    let sigma2 = rows.last().unwrap()["mean"].as_f64().unwrap();
    assert!((sigma2 / 625.0 - 1.0).abs() < 0.15, "σ² = {sigma2}");

    write(
        dir.path(),
        &GAUSSIAN.replace(
            "kernel = { kind = \"exact_gaussian\" }",
            "kernel = { kind = \"sampler\" }\ninit = \"zeros\"\n\n[sampler]\nkind = \"sgld\"\nstep_size = 1e-4",
        ),
    );
    let (ok, stdout, stderr) = run(dir.path());
    assert!(ok, "{stdout}\n{stderr}");
    assert!(stdout.contains("with the sgld kernel"), "{stdout}");
}

/// Bad run files fail with one line naming the problem.
#[test]
fn coreset_config_errors_name_the_problem() {
    let cases: [(&str, &str, &str); 6] = [
        (
            "size = 100",
            "size = 5000",
            "coreset size 5000 exceeds the 2000",
        ),
        ("size = 100", "size = 100\nchians = 2", "chians"),
        ("size = 100", "size = 100\nchains = 1", "at least 2 chains"),
        (
            "size = 100",
            "size = 100\nsubsample = 0",
            "subsample size S = 0",
        ),
        (
            "kernel = { kind = \"exact_gaussian\" }",
            "kernel = { kind = \"sampler\" }",
            "needs a [sampler] table",
        ),
        (
            "kernel = { kind = \"exact_gaussian\" }",
            "kernel = { kind = \"gibbs\" }",
            "sparse_regression",
        ),
    ];
    for (from, to, needle) in cases {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &GAUSSIAN.replace(from, to));
        let (ok, stdout, stderr) = run(dir.path());
        assert!(!ok, "{to}: should fail\n{stdout}");
        assert!(stderr.contains(needle), "{to}: {stderr}");
    }
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &GAUSSIAN.replace(
            "size = 100",
            "size = 100\noptimiser = { kind = \"adam\", learning_rate = -1 }",
        ),
    );
    let (ok, _, stderr) = run(dir.path());
    assert!(!ok && stderr.contains("[coreset.optimiser]"), "{stderr}");
    write(
        dir.path(),
        &format!("{GAUSSIAN}\n[evaluation]\ntest_fraction = 0.2\n"),
    );
    let (ok, _, stderr) = run(dir.path());
    assert!(!ok && stderr.contains("takes only `reference`"), "{stderr}");
}

/// Must-show 3 at a tenth of the paper's length (20,000 iterations, one trial): on the Gaussian
/// location model with M = 1000, Hot DoG's final z-score is within 3× of the best ADAM
/// learning rate and far (> 100×) better than the worst. The full-length table is in
/// docs/experiments/coreset_fig1.md. Break-once: ĝ with the wrong sign made Hot DoG end at
/// 9.7e3 against the best ADAM's 10.9 (ADAM's rates also flip) and failed.
#[test]
fn hot_dog_matches_the_best_adam_on_the_gaussian_location_model() {
    let problems = vec![Problem::gaussian_location(10_000, 20, 2024).unwrap()];
    let settings = CoresetFig1Settings {
        sizes: vec![1000],
        iterations: 20_000,
        trials: 1,
        ..CoresetFig1Settings::default()
    };
    let report = coreset_fig1::run(&problems, &settings, &|_| {}).unwrap();
    let hot = report
        .cells
        .iter()
        .find(|c| c.optimiser.is_hot_dog())
        .unwrap()
        .median;
    let adam: Vec<f64> = report
        .cells
        .iter()
        .filter(|c| matches!(c.optimiser.kind, OptimiserKind::Adam { .. }))
        .map(|c| c.median)
        .collect();
    let best = adam.iter().copied().fold(f64::INFINITY, f64::min);
    let worst = adam.iter().copied().fold(0.0, f64::max);
    assert!(hot <= 3.0 * best, "Hot DoG {hot} vs best ADAM {best}");
    assert!(hot * 100.0 < worst, "Hot DoG {hot} vs worst ADAM {worst}");
    let table = coreset_fig1::markdown(&report);
    assert!(table.contains(" M = 1000 | / Hot DoG |"), "{table}");
    assert!(
        table.contains("| Hot DoG / best ADAM (its α₀) |"),
        "{table}"
    );
}

/// The bike-sharing Poisson regression from the run file with the shipped Stan moments as the
/// reference (skipped with a message when ../shared/data is absent): Hot DoG with the slice
/// kernel brings the average squared z-score far below the untrained coreset's at M = 500 and
/// 4,000 iterations (20,000-iteration runs: untrained 5.4e3, Hot DoG 85).
#[test]
fn poisson_coreset_against_the_stan_reference() {
    let data =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/bike-sharing-poisson");
    if !data.join("poisson_reg.csv").exists() {
        eprintln!("skipped: {} not found", data.display());
        return;
    }
    let config = |iterations: usize| {
        format!(
            "[data]\nbike_sharing = \"{0}\"\n[model]\nkind = \"poisson\"\nlink = \"softplus\"\n\
             prior_variance = 1.0\n[coreset]\nseed = 3\nsize = 500\niterations = {iterations}\n\
             draws = {1}\nkernel = {{ kind = \"slice\" }}\n[evaluation]\nreference = \"{0}\"\n",
            data.display(),
            2 * (4000 - iterations).max(1),
        )
    };
    let metric = |iterations: usize| -> f64 {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &config(iterations));
        let (ok, stdout, stderr) = run(dir.path());
        assert!(ok, "{stdout}\n{stderr}");
        let report: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join("out/coreset.json")).unwrap(),
        )
        .unwrap();
        report["metric"].as_array().unwrap().last().unwrap()[1]
            .as_f64()
            .unwrap()
    };
    // Trained for 4,000 iterations against 4,000 iterations of the untrained coreset.
    let (trained, untrained) = (metric(4000), metric(0));
    assert!(
        trained < 0.2 * untrained,
        "trained {trained} vs untrained {untrained}"
    );
}

/// The sparse regression on 2,000 rows with a short Gibbs reference: a problem for CLI tests.
const SMALL_SPARSE_REGRESSION: &[&str] = &[
    "--no-gaussian",
    "--sparse-regression",
    "--sparse-rows",
    "2000",
    "--gibbs-chains",
    "2",
    "--gibbs-sweeps",
    "300",
];

/// `sgmcmc experiment coreset-fig1` with a study and the sparse regression: every flag reaches
/// the report (settings, the Gibbs reference's chains and sweeps, the optimisers), and an
/// unknown study or a negative r is a clear error. Broken once: `d0` dropped from the CLI's
/// settings (the default 1e-6 used): the test failed on d0 (1e-6 against 1e-5).
#[test]
fn coreset_study_flags_reach_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        ["experiment", "coreset-fig1", "--study", "hot-start"].as_slice(),
        SMALL_SPARSE_REGRESSION,
        &[
            "--sizes",
            "50",
            "--iterations",
            "200",
            "--trials",
            "2",
            "--r-values",
            "0.01",
            "--learning-rates",
            "1",
            "--hot-dog-r",
            "0.01",
            "--d0",
            "0.00001",
            "--seed",
            "4",
            "--out",
            "out",
        ],
    ]
    .concat();
    let out = common::sgmcmc(&args, dir.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("out/report.json")).unwrap())
            .unwrap();
    let s = &report["settings"];
    assert_eq!(s["study"], "HotStart");
    assert_eq!(s["sizes"], serde_json::json!([50]));
    assert_eq!(s["iterations"], 200);
    assert_eq!(s["trials"], 2);
    assert_eq!(s["r_values"], serde_json::json!([0.01]));
    assert_eq!(s["learning_rates"], serde_json::json!([1.0]));
    assert_eq!(s["hot_dog_r"], 0.01);
    assert_eq!(s["d0"], 1e-5);
    assert_eq!(s["seed"], 4);
    let problem = &report["problems"][0];
    assert!(
        problem["name"].as_str().unwrap().contains("N = 2000"),
        "{problem}"
    );
    assert!(
        problem["reference"]
            .as_str()
            .unwrap()
            .contains("2 chains × 300 sweeps"),
        "{problem}"
    );
    // Hot DoG at r = 0.01 with and without the test, ADAM at α₀ = 1.
    let cells = report["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 3);
    assert!(
        cells
            .iter()
            .all(|c| c["final_metric"].as_array().unwrap().len() == 2)
    );
    let unknown = common::sgmcmc(
        &["experiment", "coreset-fig1", "--study", "fig7"],
        dir.path(),
    );
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        !unknown.status.success() && stderr.contains("fig1, hot-start, methods or burn-in"),
        "{stderr}"
    );
    common::assert_command_fails_with(
        &[
            "experiment",
            "coreset-fig1",
            "--study",
            "methods",
            "--r-values=-1",
        ],
        dir.path(),
        &["every r value must be finite and > 0"],
    );
}

/// `sgmcmc experiment coreset-fig1 --resume`: a run with more trials into the same --out reuses
/// the trials the first one finished (kept in OUT/trials) and gives exactly the report of a
/// fresh run, final weights and z-scores included; a changed setting reuses nothing.
/// Break-once: the stored trial without its final weights failed the weights' comparison, and
/// without its z-scores the z-scores' comparison.
#[test]
fn coreset_experiment_resumes_from_its_finished_trials() {
    let dir = tempfile::tempdir().unwrap();
    let run = |out: &str, trials: &str, iterations: &str, resume: bool| -> serde_json::Value {
        let mut args = [
            ["experiment", "coreset-fig1"].as_slice(),
            SMALL_SPARSE_REGRESSION,
        ]
        .concat();
        args.extend([
            "--sizes",
            "50",
            "--learning-rates",
            "1",
            "--iterations",
            iterations,
            "--trials",
            trials,
            "--out",
            out,
        ]);
        if resume {
            args.push("--resume");
        }
        let output = common::sgmcmc(&args, dir.path());
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_str(
            &std::fs::read_to_string(dir.path().join(out).join("report.json")).unwrap(),
        )
        .unwrap()
    };
    let finals = |report: &serde_json::Value| -> Vec<serde_json::Value> {
        let cells = report["cells"].as_array().unwrap();
        // Hot DoG, ADAM at α₀ = 1 and the untrained coreset.
        assert_eq!(cells.len(), 3);
        cells.iter().map(|c| c["final_metric"].clone()).collect()
    };
    let first = run("out", "2", "200", false);
    assert_eq!(first["reused_trials"], 0);
    let stored = std::fs::read_dir(dir.path().join("out/trials"))
        .unwrap()
        .count();
    assert_eq!(stored, 6, "one file per finished trial");
    let resumed = run("out", "3", "200", true);
    assert_eq!(resumed["reused_trials"], 6);
    let fresh = run("fresh", "3", "200", false);
    assert_eq!(fresh["reused_trials"], 0);
    assert_eq!(finals(&resumed), finals(&fresh));
    // The stored trials keep their final weights and z-scores.
    let field = |report: &serde_json::Value, name: &str| -> Vec<serde_json::Value> {
        let cells = report["cells"].as_array().unwrap();
        cells.iter().map(|c| c[name].clone()).collect()
    };
    let weights = |report: &serde_json::Value| field(report, "final_weights");
    assert_eq!(weights(&resumed), weights(&fresh));
    assert!(weights(&fresh).iter().all(|w| w[2]["total"].is_number()));
    let z = |report: &serde_json::Value| field(report, "final_z");
    assert_eq!(z(&resumed), z(&fresh));
    assert!(z(&fresh).iter().all(|z| z[2][0].is_number()));
    for (two, three) in finals(&first).iter().zip(finals(&resumed)) {
        assert_eq!(two.as_array().unwrap()[..], three.as_array().unwrap()[..2]);
    }
    let tables = std::fs::read_to_string(dir.path().join("out/tables.md")).unwrap();
    assert!(
        tables.contains("6 trials were finished by an earlier run")
            && tables.contains("Final z-scores per trial"),
        "{tables}"
    );
    // Other iterations: nothing is reused.
    let longer = run("out", "2", "300", true);
    assert_eq!(longer["reused_trials"], 0);
}
