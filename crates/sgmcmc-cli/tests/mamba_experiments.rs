//! The MAMBA paper's experiments as commands: `sgmcmc experiment mamba-logreg` on its synthetic
//! data, and `mamba-pmf` and `mamba-bnn` on the shared MovieLens and MNIST data (skipped when
//! the shared data directory is absent), end to end at tiny budgets; and `[run] map_iterations`.

use serde_json::Value;
use sgmcmc::estimator::BatchSize;
use sgmcmc::tuning::{GridValues, TuneScores};
use sgmcmc_runfile::config::{Config, GridSelection, MapOptimizer};
use std::path::{Path, PathBuf};
use std::process::Command;

fn shared(name: &str) -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(name);
    if dir.is_dir() {
        Some(dir)
    } else {
        println!("skipped: {} is absent", dir.display());
        None
    }
}

fn sgmcmc(args: &[&str], dir: &Path) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sgmcmc"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The three methods of one sampler, each with its choice and runs.
fn methods(report: &Value) -> &Vec<Value> {
    report["samplers"][0]["methods"].as_array().unwrap()
}

/// `log10 step / batch % [/ L]` → (log10 step, batch %).
fn choice(m: &Value) -> (f64, f64) {
    let c = m["choice"].as_str().unwrap();
    let parts: Vec<f64> = c.split(" / ").map(|p| p.parse().unwrap()).collect();
    (parts[0], parts[1])
}

/// Checks shared by both experiments: the three methods in order, the heuristic's 1/N at
/// 10 %, grid search at 10 % on the grid, one curve point per checkpoint whose last is the
/// run's primary metric (bit for bit), and the tables, SVG and run files written.
fn check_common(out: &Path, report: &Value, n: f64, primary: &str, svg: &str, points: usize) {
    let ms = methods(report);
    let names: Vec<&str> = ms.iter().map(|m| m["method"].as_str().unwrap()).collect();
    assert_eq!(names, ["MAMBA-KSD", "grid search", "heuristic"]);
    check_heuristic(&ms[2], n);
    let (g_step, g_batch) = choice(&ms[1]);
    assert_eq!(g_batch, 10.0);
    assert!((2.0 * g_step).fract() == 0.0 && (-7.5..=-2.0).contains(&g_step));
    for m in ms {
        check_curves(m, primary, points);
        let runs = m["runs"].as_array().unwrap();
        assert!(runs.iter().all(|r| r["iterations"].as_u64().unwrap() > 0));
    }
    let tables = std::fs::read_to_string(out.join("tables.md")).unwrap();
    assert!(tables.contains("| SG"), "{tables}");
    let svg = std::fs::read_to_string(out.join(svg)).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("MAMBA-KSD"));
}

/// The heuristic's choice: step 1/N at a 10 % batch.
fn check_heuristic(m: &Value, n: f64) {
    let (step, batch) = choice(m);
    assert!((step - (1.0 / n).log10()).abs() < 1e-5, "{step}");
    assert_eq!(batch, 10.0);
}

/// One curve point per checkpoint for each final run, the last equal to the run's primary
/// metric (bit for bit).
fn check_curves(m: &Value, primary: &str, points: usize) {
    let curve = &m["curve"];
    assert_eq!(curve["seconds"].as_array().unwrap().len(), points);
    let runs = m["runs"].as_array().unwrap();
    assert_eq!(curve["runs"].as_array().unwrap().len(), runs.len());
    for (run, points_of_run) in runs.iter().zip(curve["runs"].as_array().unwrap()) {
        let last = points_of_run.as_array().unwrap().last().unwrap();
        assert_eq!(last.as_f64(), run[primary].as_f64(), "{m}");
    }
}

/// `mamba-logreg --fssd` (the paper's §4.1: Tables 1, 4, 5 and Figure 1) end to end on 5,000
/// synthetic rows at tiny budgets: the four methods (MAMBA-FSSD included), both MAMBAs'
/// choices on the paper's grid, the heuristic at 1/N, three final runs per choice (seeds 1–3)
/// whose mean and sd are the table's, one curve per run whose last point is its
/// KSD, the curve table of mean ± 2 sd and the Figure 1 SVG.
/// Break-once: every final run given the first run's seed (`mamba::run_samplers`): the test
/// failed on the seeds ([1, 1, 1] against [1, 2, 3]).
#[test]
fn mamba_logreg_runs_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, text) = sgmcmc(
        &[
            "experiment",
            "mamba-logreg",
            "--rows",
            "5000",
            "--samplers",
            "SGLD-CV",
            "--budget-seconds",
            "0.05",
            "--final-seconds",
            "0.3",
            "--final-runs",
            "3",
            "--grid-estimates",
            "100",
            "--score-subsample",
            "500",
            "--curve-points",
            "3",
            "--fssd",
            "--out",
            "out",
            "--reference",
            "out/reference.json",
        ],
        dir.path(),
    );
    assert!(ok, "{text}");
    let out = dir.path().join("out");
    let report = read_json(&out.join("report.json"));
    assert_eq!(report["samplers"][0]["sampler"], "SGLD-CV");
    let ms = methods(&report);
    let names: Vec<&str> = ms.iter().map(|m| m["method"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["MAMBA-KSD", "MAMBA-FSSD", "grid search", "heuristic"]
    );
    // The heuristic at N = 4,000 training rows.
    check_heuristic(&ms[3], 4000.0);
    // Grid search: the paper's grid (log10 step −1 … −7.5 by 0.5) at a 10 % batch.
    let (g_step, g_batch) = choice(&ms[2]);
    assert_eq!(g_batch, 10.0);
    assert!((2.0 * g_step).fract() == 0.0 && (-7.5..=-1.0).contains(&g_step));
    // Both MAMBAs choose from the paper's grid: log10 step −1 … −7.5, batch 100/10/1/0.1 %.
    for m in &ms[..2] {
        let (step, batch) = choice(m);
        assert!(
            (2.0 * step).fract() == 0.0 && (-7.5..=-1.0).contains(&step),
            "{m}"
        );
        assert!([100.0, 10.0, 1.0, 0.1].contains(&batch), "{m}");
    }
    for m in ms {
        let runs = m["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 3, "{m}");
        let seeds: Vec<u64> = runs.iter().map(|r| r["seed"].as_u64().unwrap()).collect();
        assert_eq!(seeds, [1, 2, 3]);
        let ksd: Vec<f64> = runs.iter().map(|r| r["ksd"].as_f64().unwrap()).collect();
        assert!(ksd.iter().all(|k| k.is_finite() && *k > 0.0), "{m}");
        let mean = ksd.iter().sum::<f64>() / 3.0;
        let sd = (ksd.iter().map(|k| (k - mean).powi(2)).sum::<f64>() / 2.0).sqrt();
        assert!(
            (m["mean"]["ksd"].as_f64().unwrap() - mean).abs() <= 1e-12 * mean,
            "{m}"
        );
        assert!(
            (m["primary_sd"].as_f64().unwrap() - sd).abs() <= 1e-9 * mean,
            "{m}"
        );
        check_curves(m, "ksd", 3);
    }
    let tables = std::fs::read_to_string(out.join("tables.md")).unwrap();
    assert!(
        tables.contains("mean ± 2 sd over the final runs"),
        "{tables}"
    );
    assert!(tables.contains("| SGLD-CV | MAMBA-KSD |"), "{tables}");
    let svg = std::fs::read_to_string(out.join("ksd_curves.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("MAMBA-KSD") && svg.contains("3 runs"));
    assert!(out.join("configs").is_dir() && out.join("reference.json").is_file());
}

/// A stand-in PMF reference (mean 0, sd 1 for each of the 52,580 coordinates) at `path`.
fn write_stand_in_pmf_reference(path: &Path) {
    let d = 52_580;
    let reference = serde_json::json!({
        "method": "stand-in (test)",
        "parameter_names": (0..d).map(|i| format!("p{i}")).collect::<Vec<_>>(),
        "mean": vec![0.0; d],
        "sd": vec![1.0; d],
        "ess_bulk": vec![Value::Null; d],
        "rhat": vec![Value::Null; d],
        "chains": 1,
        "draws_per_chain": 1,
    });
    std::fs::write(path, reference.to_string()).unwrap();
}

/// Run `sgmcmc experiment mamba-pmf` on the shared MovieLens data in a temporary directory, with
/// a stand-in reference, SGLD alone, R = 0.1 s and one final run, plus `extra` flags: the
/// directory (output in `out/`), whether it succeeded, and its output. `None` when the shared
/// data are absent.
fn run_tiny_pmf(extra: &[&str]) -> Option<(tempfile::TempDir, bool, String)> {
    let data = shared("movielens-100k")?;
    let dir = tempfile::tempdir().unwrap();
    write_stand_in_pmf_reference(&dir.path().join("ref.json"));
    let mut args = vec![
        "experiment",
        "mamba-pmf",
        data.to_str().unwrap(),
        "--out",
        "out",
        "--reference",
        "ref.json",
        "--samplers",
        "SGLD",
        "--budget-seconds",
        "0.1",
        "--final-runs",
        "1",
    ];
    args.extend_from_slice(extra);
    let (ok, text) = sgmcmc(&args, dir.path());
    Some((dir, ok, text))
}

/// PMF on MovieLens at tiny budgets, with a stand-in reference (mean 0, sd 1 per coordinate):
/// the RMSE of the posterior-mean rating near the data's ≈ 1, a finite KSD and ξ, and the
/// run files asking for `select_by = "rmse"` and capped MAMBA scores.
#[test]
fn mamba_pmf_runs_end_to_end_on_movielens() {
    let Some((dir, ok, text)) = run_tiny_pmf(&[
        "--final-seconds",
        "1",
        "--grid-iterations",
        "20",
        "--curve-points",
        "3",
        "--ksd-draws",
        "50",
        "--tune-scores",
        "full",
    ]) else {
        return;
    };
    assert!(ok, "{text}");
    let out = dir.path().join("out");
    let report = read_json(&out.join("report.json"));
    check_common(&out, &report, 80_000.0, "ksd", "ksd_curves.svg", 3);
    for m in methods(&report) {
        let run = &m["runs"][0];
        let rmse = run["rmse"].as_f64().unwrap();
        assert!(rmse > 0.85 && rmse < 1.4, "{m}");
        let ksd = run["ksd"].as_f64().unwrap();
        assert!(ksd.is_finite() && ksd > 0.0, "{m}");
        assert!(run["ksd_scored_draws"].as_u64().unwrap() <= 51);
        // Every 10th iterate kept, the first 10 % of them dropped.
        let kept = run["iterations"].as_u64().unwrap() / 10;
        let draws = run["draws"].as_u64().unwrap();
        // ξ needs an sd, so two draws: a run slowed down by a loaded machine may keep one.
        if draws >= 2 {
            assert!(run["xi"].as_f64().unwrap().is_finite(), "{run}");
        } else {
            assert!(run["xi"].is_null(), "{run}");
        }
        assert!(draws <= kept && draws + kept / 10 + 1 >= kept, "{run}");
    }
    let cfg = Config::from_file(&out.join("configs/sgld.toml")).unwrap();
    let tune = cfg.tune.as_ref().unwrap();
    assert_eq!(tune.grid_search.select_by, Some(GridSelection::Rmse));
    assert_eq!(tune.max_scored_draws, Some(1000));
    // `--tune-scores full` reaches the run file MAMBA ran from, and the tables say so.
    assert_eq!(tune.scores, TuneScores::Full);
    let tables = std::fs::read_to_string(out.join("tables.md")).unwrap();
    assert!(tables.contains("the exact full-data score"), "{tables}");
}

/// `--mamba-only` runs MAMBA-KSD alone (no grid search, no heuristic), and its tables say so.
#[test]
fn mamba_pmf_mamba_only_skips_the_baselines() {
    let Some((dir, ok, text)) = run_tiny_pmf(&[
        "--final-seconds",
        "0.5",
        "--curve-points",
        "2",
        "--ksd-draws",
        "20",
        "--mamba-only",
    ]) else {
        return;
    };
    assert!(ok, "{text}");
    let out = dir.path().join("out");
    let report = read_json(&out.join("report.json"));
    let names: Vec<&str> = methods(&report)
        .iter()
        .map(|m| m["method"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["MAMBA-KSD"]);
    assert!(!text.contains("grid search (by"), "{text}");
    let tables = std::fs::read_to_string(out.join("tables.md")).unwrap();
    assert!(tables.contains("`--mamba-only`"), "{tables}");
    assert!(!tables.contains("below both baselines"), "{tables}");
}

/// The neural network on MNIST at tiny budgets (the MAP by 30 Adam steps, as the authors found
/// theirs): SGNHT tuned on the paper's re-run grid (log10 step −5 … −7.5), ECE and MCE
/// fractions in [0, 1], the accuracy of a barely trained network above chance, and the
/// finished samplers saved after each one.
#[test]
fn mamba_bnn_runs_end_to_end_on_mnist() {
    let Some(data) = shared("mnist") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (ok, text) = sgmcmc(
        &[
            "experiment",
            "mamba-bnn",
            data.to_str().unwrap(),
            "--out",
            "out",
            "--samplers",
            "SGNHT,SGLD",
            "--map-optimizer",
            "adam",
            "--map-iterations",
            "30",
            "--map-batch",
            "1%",
            "--grid-estimates",
            "10",
            "--budget-seconds",
            "0.2",
            "--final-seconds",
            "2",
            "--curve-points",
            "2",
            "--final-thin",
            "5",
        ],
        dir.path(),
    );
    assert!(ok, "{text}");
    let out = dir.path().join("out");
    let report = read_json(&out.join("report.json"));
    check_common(&out, &report, 60_000.0, "ece", "ece_curves.svg", 2);
    let ms = methods(&report);
    // MAMBA and grid search chose from the re-run grid.
    for m in &ms[..2] {
        let (step, _) = choice(m);
        assert!((-7.5..=-5.0).contains(&step), "{m}");
    }
    for m in ms {
        let run = &m["runs"][0];
        for key in ["ece", "mce"] {
            let v = run[key].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&v), "{key} {run}");
        }
        assert!(run["mce"].as_f64() >= run["ece"].as_f64());
        let accuracy = run["accuracy"].as_f64().unwrap();
        assert!(accuracy > 0.2 && accuracy <= 1.0, "{run}");
    }
    // The written run file reads back with the re-run grid and the MAP search given.
    let cfg = Config::from_file(&out.join("configs/sgnht.toml")).unwrap();
    let tune = cfg.tune.as_ref().unwrap();
    assert_eq!(
        tune.grid.log10_step_size,
        Some(GridValues::Range {
            from: -5.0,
            to: -7.5,
            by: 0.5
        })
    );
    assert_eq!(tune.grid_search.select_by, Some(GridSelection::Accuracy));
    assert_eq!(tune.scores, TuneScores::ControlVariates);
    assert_eq!(cfg.run.map_optimizer, MapOptimizer::Adam);
    assert_eq!(cfg.run.map_iterations, Some(30));
    assert_eq!(cfg.run.map_learning_rate, Some(1e-3));
    assert_eq!(cfg.run.map_batch_size, Some(BatchSize::percent(1.0)));
    // Each finished sampler was saved before the next one started.
    let first = text.find("saved the 1 finished sampler(s)").expect(&text);
    let second = text.find("saved the 2 finished sampler(s)").expect(&text);
    assert!(first < text.find("SGLD: MAMBA-KSD").unwrap() && second > first);
    let samplers: Vec<&str> = report["samplers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sampler"].as_str().unwrap())
        .collect();
    assert_eq!(samplers, ["SGNHT", "SGLD"]);

    // Adam's settings without Adam are an error that says what to add.
    let (ok, text) = sgmcmc(
        &[
            "experiment",
            "mamba-bnn",
            data.to_str().unwrap(),
            "--map-batch",
            "1%",
        ],
        dir.path(),
    );
    assert!(!ok && text.contains("add --map-optimizer adam"), "{text}");
}

/// `[run] map_iterations` bounds the L-BFGS search of the MAP; 0 is an error naming the key.
/// `[run] summary = false` leaves out the per-parameter summary (the harness's final runs).
#[test]
fn map_iterations_bounds_the_map_search_and_summary_can_be_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let text = |n: usize| {
        format!(
            "[data]\nsynthetic = {{ rows = 2000, dim = 4, seed = 3 }}\n\n[model]\n\
             kind = \"logistic\"\n\n[sampler]\nkind = \"sgld\"\nstep_size = 1e-4\n\n\
             [run]\nchains = 1\niterations = 10\nmap_iterations = {n}\n"
        )
    };
    std::fs::write(dir.path().join("one.toml"), text(1)).unwrap();
    let (ok, out) = sgmcmc(&["run", "one.toml", "--out", "one"], dir.path());
    assert!(ok, "{out}");
    let summary = read_json(&dir.path().join("one/summary.json"));
    assert_eq!(summary["map"]["iterations"], 1, "{}", summary["map"]);
    assert_eq!(summary["map"]["converged"], false);
    assert_eq!(summary["parameters"].as_array().unwrap().len(), 4);

    std::fs::write(dir.path().join("bare.toml"), text(1) + "summary = false\n").unwrap();
    let (ok, out) = sgmcmc(&["run", "bare.toml", "--out", "bare"], dir.path());
    assert!(ok, "{out}");
    let summary = read_json(&dir.path().join("bare/summary.json"));
    assert_eq!(summary["parameters"].as_array().unwrap().len(), 0);
    assert_eq!(summary["draws"], 10);

    std::fs::write(dir.path().join("zero.toml"), text(0)).unwrap();
    let (ok, out) = sgmcmc(&["run", "zero.toml", "--out", "zero"], dir.path());
    assert!(!ok);
    assert!(out.contains("map_iterations"), "{out}");
}

/// `mamba-bnn --map-only`: the MAP of 30 Adam steps and its test metrics as one draw, written
/// to map_control.json, with no tuning or final runs. The same MAP search as the full run's.
#[test]
fn mamba_bnn_map_only_reports_the_maps_test_metrics() {
    let Some(data) = shared("mnist") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "experiment",
        "mamba-bnn",
        data.to_str().unwrap(),
        "--out",
        "out",
        "--map-optimizer",
        "adam",
        "--map-iterations",
        "30",
        "--map-batch",
        "1%",
    ];
    let (ok, text) = sgmcmc(&[&args[..], &["--map-only"]].concat(), dir.path());
    assert!(ok, "{text}");
    let out = dir.path().join("out");
    assert!(!out.join("report.json").exists(), "no tuning ran");
    let control = read_json(&out.join("map_control.json"));
    assert_eq!(control["map_iterations"], 30);
    let (ece, mce, accuracy) = (
        control["ece"].as_f64().unwrap(),
        control["mce"].as_f64().unwrap(),
        control["accuracy"].as_f64().unwrap(),
    );
    assert!(
        (0.0..=1.0).contains(&ece) && mce >= ece && mce <= 1.0,
        "{control}"
    );
    // 30 Adam steps on 1 % batches already classify above chance (0.1; measured 0.41).
    assert!(accuracy > 0.2, "{control}");
    assert!(text.contains("the MAP alone: test ECE"), "{text}");
}

/// `--map-iterations` of the KSD-estimator study is the network's MAP search: given for another
/// problem, it is an error that names it, before any data is read.
#[test]
fn ksd_estimators_map_iterations_is_for_the_network_only() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, text) = sgmcmc(
        &[
            "experiment",
            "mamba-ksd-estimators",
            "--problem",
            "logreg",
            "--map-iterations",
            "5",
            "--out",
            "out",
        ],
        dir.path(),
    );
    assert!(!ok, "{text}");
    assert!(
        text.contains("--map-iterations applies to --problem bnn only"),
        "{text}"
    );
    assert!(!dir.path().join("out").exists());
}
