//! The binary on bad input: every case gives a one-line error naming the problem and a non-zero
//! exit, never a panic; a diverging chain is reported while the run still writes its outputs.

use crate::common;

use common::{assert_fails_with, sgmcmc};
use ndarray::{Array1, Array2};
use ndarray_npy::write_npy;
use std::path::Path;
use std::process::Command;

/// The `out/summary.json` a run wrote in `dir`.
fn read_summary(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("out/summary.json")).expect("summary.json written");
    serde_json::from_str(&text).expect("summary.json is JSON")
}

/// A temporary directory with a small logistic data set (x.npy, y.npy, table.csv) and a run file
/// whose `[sampler]`/`[gradient]`/`[run]` tables come from `body`.
fn setup(data_table: &str, model: &str, body: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let n = 200;
    let x = Array2::from_shape_fn((n, 3), |(i, j)| ((i * 7 + j * 3) % 11) as f64 / 5.0 - 1.0);
    let y = Array1::from_shape_fn(n, |i| (i % 3 == 0) as u8 as f64);
    write_npy(dir.path().join("x.npy"), &x).unwrap();
    write_npy(dir.path().join("y.npy"), &y).unwrap();
    let mut csv = String::from("a,b,c,label\n");
    for i in 0..n {
        csv += &format!("{},{},{},{}\n", x[[i, 0]], x[[i, 1]], x[[i, 2]], y[i]);
    }
    std::fs::write(dir.path().join("table.csv"), csv).unwrap();
    let toml = format!("[data]\n{data_table}\n\n[model]\n{model}\n\n{body}\n");
    std::fs::write(dir.path().join("run.toml"), toml).unwrap();
    dir
}

const NPY_DATA: &str = "features = \"x.npy\"\ntargets = \"y.npy\"";
const LOGISTIC: &str = "kind = \"logistic\"";
const GOOD: &str = "[sampler]\nkind = \"sgld\"\nstep_size = 1e-4\n\n[gradient]\nbatch_size = 20\n\n[run]\niterations = 200\nchains = 2";

#[test]
fn a_good_run_writes_draws_and_summary() {
    let dir = setup(NPY_DATA, LOGISTIC, GOOD);
    let out = sgmcmc(&["run", "run.toml", "--out", "out"], dir.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = read_summary(dir.path());
    let params = summary["parameters"].as_array().unwrap();
    assert_eq!(params.len(), 3);
    for key in [
        "name", "mean", "sd", "q05", "q95", "ess_bulk", "ess_tail", "rhat",
    ] {
        assert!(
            params[0].get(key).is_some(),
            "summary parameter lacks {key}"
        );
    }
    for key in [
        "iterations_per_second",
        "draws",
        "chains",
        "seconds",
        "diverged_chains",
        "settings",
    ] {
        assert!(summary.get(key).is_some(), "summary lacks {key}");
    }
    assert_eq!(summary["draws"], 400);
    assert_eq!(summary["settings"]["batch_size"], 20);
    assert!(
        dir.path()
            .join("out/draws.zarr/posterior/theta/zarr.json")
            .exists()
    );
}

/// A run file without `[sampler]`: `run` takes the default path, prints its choices, and
/// writes them, the resolved run file and the bias check into summary.json.
#[test]
fn a_run_file_without_sampler_takes_the_default_path() {
    let dir = setup(
        NPY_DATA,
        LOGISTIC,
        "[run]
iterations = 2000
burn_in = 200
chains = 2",
    );
    let out = sgmcmc(&["run", "run.toml", "--out", "out"], dir.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("default path"), "{stdout}");
    assert!(stdout.contains("bias check:"), "{stdout}");
    let summary = read_summary(dir.path());
    let choices = summary["default_path"]["choices"].as_array().unwrap();
    assert_eq!(choices.len(), 4, "{choices:?}");
    assert_eq!(summary["preconditioner"], "dense");
    assert_eq!(summary["bias_check"]["status"], "done");
    let config = &summary["settings"]["config"];
    assert_eq!(config["sampler"]["kind"], "baoab");
    assert_eq!(config["run"]["init"], "laplace");
    assert_eq!(config["run"]["preconditioner"], "dense");
    // 200 rows <= 5,000: exact gradients.
    assert_eq!(config["gradient"]["estimator"], "full");
}

#[test]
fn misspelt_config_key_is_named() {
    let body = GOOD.replace("step_size", "stpe_size");
    let dir = setup(NPY_DATA, LOGISTIC, &body);
    assert_fails_with(dir.path(), &["run.toml", "stpe_size"]);
}

#[test]
fn unknown_table_key_is_named_with_its_line() {
    let body = format!("{GOOD}\nburnin = 5");
    let dir = setup(NPY_DATA, LOGISTIC, &body);
    assert_fails_with(dir.path(), &["run.toml:", "burnin"]);
}

#[test]
fn nan_in_data_names_file_row_and_column() {
    let dir = setup(NPY_DATA, LOGISTIC, GOOD);
    let mut x = Array2::<f64>::zeros((200, 3));
    x[[16, 2]] = f64::NAN;
    write_npy(dir.path().join("x.npy"), &x).unwrap();
    assert_fails_with(dir.path(), &["x.npy", "row 17", "column 3", "NaN"]);
}

#[test]
fn row_count_mismatch_is_reported() {
    let dir = setup(NPY_DATA, LOGISTIC, GOOD);
    write_npy(dir.path().join("y.npy"), &Array1::<f64>::zeros(199)).unwrap();
    assert_fails_with(dir.path(), &["200", "199"]);
}

#[test]
fn init_file_of_wrong_dimension_is_reported() {
    let body = GOOD.replace("chains = 2", "chains = 2\ninit = { file = \"init.txt\" }");
    let dir = setup(NPY_DATA, LOGISTIC, &body);
    std::fs::write(dir.path().join("init.txt"), "0.1 0.2\n").unwrap();
    assert_fails_with(dir.path(), &["init.txt", "2 values", "3 parameters"]);
}

#[test]
fn non_positive_step_size_is_rejected() {
    for bad in ["0.0", "-1e-3"] {
        let dir = setup(NPY_DATA, LOGISTIC, &GOOD.replace("1e-4", bad));
        assert_fails_with(dir.path(), &["step size"]);
    }
}

#[test]
fn batch_larger_than_data_is_rejected() {
    let dir = setup(
        NPY_DATA,
        LOGISTIC,
        &GOOD.replace("batch_size = 20", "batch_size = 201"),
    );
    assert_fails_with(dir.path(), &["batch size 201", "N = 200"]);
}

#[test]
fn truncated_npy_is_reported() {
    let dir = setup(NPY_DATA, LOGISTIC, GOOD);
    let path = dir.path().join("x.npy");
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 8]).unwrap();
    assert_fails_with(dir.path(), &["x.npy", "truncated"]);
}

#[test]
fn label_outside_support_names_the_row() {
    let dir = setup(NPY_DATA, LOGISTIC, GOOD);
    let mut y = Array1::<f64>::zeros(200);
    y[41] = 2.0;
    write_npy(dir.path().join("y.npy"), &y).unwrap();
    assert_fails_with(dir.path(), &["y.npy", "row 42", "label 2"]);
}

#[test]
fn missing_csv_target_column_is_reported() {
    let dir = setup("table = \"table.csv\"\ntarget = \"lable\"", LOGISTIC, GOOD);
    assert_fails_with(dir.path(), &["table.csv", "lable"]);
}

#[test]
fn missing_data_file_is_reported() {
    let dir = setup(
        "features = \"nope.npy\"\ntargets = \"y.npy\"",
        LOGISTIC,
        GOOD,
    );
    assert_fails_with(dir.path(), &["nope.npy"]);
}

#[test]
fn gaussian_covariance_of_wrong_size_is_reported() {
    let dir = setup(
        NPY_DATA,
        "kind = \"gaussian\"\ncovariance = [1.0, 0.0, 0.0, 1.0]",
        GOOD,
    );
    assert_fails_with(dir.path(), &["covariance", "3"]);
}

#[test]
fn missing_config_file_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let out = sgmcmc(&["run", "absent.toml"], dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("absent.toml") && !stderr.contains("panicked"),
        "{stderr}"
    );
}

/// One chain starts where the posterior is extremely stiff (log σ² = −700, so the step times the
/// local curvature is ~ε·N·e⁷⁰⁰): it overflows and is reported; the others finish, and their
/// draws and the summary are written.
#[test]
fn a_diverging_chain_is_reported_and_the_rest_are_kept() {
    let body = "[sampler]\nkind = \"sgld\"\nstep_size = 1e-5\n\n[gradient]\nbatch_size = 20\n\n\
                [run]\niterations = 300\nchains = 3\ninit = { file = \"init.txt\" }";
    let dir = setup(
        "table = \"table.csv\"\ntarget = \"label\"",
        "kind = \"linear\"\nnoise_variance = \"learn\"",
        body,
    );
    std::fs::write(
        dir.path().join("init.txt"),
        "0 0 0 0\n0 0 0 -700\n0 0 0 0\n",
    )
    .unwrap();
    let out = sgmcmc(&["run", "run.toml", "--out", "out"], dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("chain 1: DIVERGED"), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("WARNING: chain 1 diverged"), "{stdout}");
    let summary = read_summary(dir.path());
    assert_eq!(summary["diverged_chains"], serde_json::json!([1]));
    assert_eq!(summary["summarised_chains"], serde_json::json!([0, 2]));
    assert_eq!(summary["draws"], 600);
    let last = &summary["run"]["chains"][1]["divergence"]["last_finite_state"];
    assert_eq!(last[3], -700.0);
    assert!(
        summary["parameters"][0]["mean"]
            .as_f64()
            .unwrap()
            .is_finite()
    );
}

/// Every chain diverging: the outputs are still written (the divergences with their last
/// finite states), and the run exits non-zero with a one-line reason.
#[test]
fn every_chain_diverging_exits_non_zero() {
    let body = "[sampler]\nkind = \"sgld\"\nstep_size = 1e-5\n\n[gradient]\nbatch_size = 20\n\n\
                [run]\niterations = 300\nchains = 2\ninit = { file = \"init.txt\" }";
    let dir = setup(
        "table = \"table.csv\"\ntarget = \"label\"",
        "kind = \"linear\"\nnoise_variance = \"learn\"",
        body,
    );
    std::fs::write(dir.path().join("init.txt"), "0 0 0 -700\n").unwrap();
    let out = sgmcmc(&["run", "run.toml", "--out", "out"], dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("every chain diverged"), "{stderr}");
    let summary = read_summary(dir.path());
    assert_eq!(summary["diverged_chains"], serde_json::json!([0, 1]));
}

#[test]
fn demo_prints_its_config_which_parses() {
    let dir = tempfile::tempdir().unwrap();
    let out = sgmcmc(&["demo", "--print-config"], dir.path());
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    sgmcmc_runfile::config::Config::from_toml(&text, "demo")
        .expect("the demo config is a valid run file");
}

#[test]
fn every_example_run_file_parses() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let name = path.file_name().unwrap().to_string_lossy();
            if name.starts_with("coreset_") {
                // Coreset run files (`sgmcmc coreset`).
                sgmcmc_runfile::config::coreset::CoresetFile::from_file(&path)
                    .unwrap_or_else(|e| panic!("{e}"));
            } else {
                sgmcmc_runfile::config::Config::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
            }
            seen += 1;
        }
    }
    assert!(seen >= 3, "expected the example run files, found {seen}");
}

#[test]
fn f32_npy_features_run() {
    let dir = setup(NPY_DATA, LOGISTIC, GOOD);
    let x = Array2::from_shape_fn((200, 3), |(i, j)| ((i * 7 + j * 3) % 11) as f32 / 5.0 - 1.0);
    write_npy(dir.path().join("x.npy"), &x).unwrap();
    let out = sgmcmc(&["run", "run.toml", "--out", "out"], dir.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = read_summary(dir.path());
    assert_eq!(summary["draws"], 400);
}

/// Same seed, same draws, whatever the thread count: the whole CLI path (MAP by parallel
/// full-data passes over 40,000 rows = 3 chunks, 4 chains, Zarr output) with 1 and 2 threads
/// writes byte-identical draw chunks.
#[test]
fn draws_are_byte_identical_with_one_and_two_threads() {
    let dir = tempfile::tempdir().unwrap();
    let n = 40_000;
    let x = Array2::from_shape_fn((n, 4), |(i, j)| {
        (((i * 31 + j * 17) % 97) as f64 / 48.0 - 1.0) * 0.5
    });
    let y = Array1::from_shape_fn(n, |i| f64::from(((i * 13) % 7) < 3));
    write_npy(dir.path().join("x.npy"), &x).unwrap();
    write_npy(dir.path().join("y.npy"), &y).unwrap();
    let toml = "[data]\nfeatures = \"x.npy\"\ntargets = \"y.npy\"\n\n[model]\nkind = \"logistic\"\n\n\
                [sampler]\nkind = \"sgld\"\nstep_size = 1e-6\n\n[gradient]\nbatch_size = 500\n\n\
                [run]\nseed = 11\nchains = 4\niterations = 3000\nthin = 3\ninit = \"map\"\n";
    std::fs::write(dir.path().join("run.toml"), toml).unwrap();
    let mut chunks = Vec::new();
    for threads in ["1", "2"] {
        let out_dir = format!("out{threads}");
        let out = Command::new(env!("CARGO_BIN_EXE_sgmcmc"))
            .args(["run", "run.toml", "--out", &out_dir])
            .env("RAYON_NUM_THREADS", threads)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let root = dir
            .path()
            .join(&out_dir)
            .join("draws.zarr/posterior/theta/c");
        let mut files = Vec::new();
        let mut stack = vec![root.clone()];
        while let Some(p) = stack.pop() {
            for e in std::fs::read_dir(&p).unwrap() {
                let path = e.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    files.push((
                        path.strip_prefix(&root).unwrap().to_path_buf(),
                        std::fs::read(&path).unwrap(),
                    ));
                }
            }
        }
        files.sort();
        assert!(!files.is_empty());
        chunks.push(files);
    }
    assert_eq!(chunks[0], chunks[1], "draws differ between 1 and 2 threads");
}

/// Ctrl-C (SIGINT) and SIGTERM (what `kill`, batch schedulers and container runtimes send)
/// stop the chains at their next iteration; the draws so far and the summary are written, and
/// the exit status says the run was interrupted.
#[cfg(unix)]
#[test]
fn interrupt_saves_draws_and_summary() {
    for signal in ["-INT", "-TERM"] {
        interrupt_with(signal);
    }
}

#[cfg(unix)]
fn interrupt_with(signal: &str) {
    let body = GOOD.replace("iterations = 200", "budget_seconds = 300");
    let dir = setup(NPY_DATA, LOGISTIC, &body);
    let child = Command::new(env!("CARGO_BIN_EXE_sgmcmc"))
        .args(["run", "run.toml", "--out", "out"])
        .current_dir(dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until sampling has produced draws (the store's first chunk or some time), then interrupt.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let status = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "an interrupted run must not exit 0");
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let summary = read_summary(dir.path());
    assert_eq!(summary["interrupted"], true);
    assert!(summary["draws"].as_u64().unwrap() > 0);
    assert!(
        summary["parameters"][0]["mean"]
            .as_f64()
            .unwrap()
            .is_finite()
    );
}

#[test]
fn control_variate_and_svrg_estimators_run_from_the_config() {
    for gradient in [
        "estimator = \"control_variates\"\nbatch_size = 20",
        "estimator = \"svrg\"\nbatch_size = 20\nupdate_rate = 5",
    ] {
        let body = GOOD
            .replace("batch_size = 20", gradient)
            .replace("chains = 2", "chains = 2\ninit = \"zeros\"");
        let dir = setup(NPY_DATA, LOGISTIC, &body);
        let out = sgmcmc(&["run", "run.toml", "--out", "out"], dir.path());
        assert!(
            out.status.success(),
            "{gradient}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let summary = read_summary(dir.path());
        assert_eq!(summary["draws"], 400);
        // Control variates need the MAP as their centre even when the chains start elsewhere.
        assert_eq!(
            summary["map"].is_object(),
            gradient.contains("control_variates"),
            "{gradient}"
        );
    }
}

#[test]
fn update_rate_without_svrg_is_rejected() {
    let body = GOOD.replace("batch_size = 20", "batch_size = 20\nupdate_rate = 5");
    let dir = setup(NPY_DATA, LOGISTIC, &body);
    assert_fails_with(dir.path(), &["update_rate", "svrg"]);
}

#[test]
fn every_sampler_runs_from_the_config() {
    for sampler in [
        "[sampler]\nkind = \"psgld\"\nstep_size = 1e-4",
        "[sampler]\nkind = \"psgld\"\ncatalogue_dt = 2e-4\ndecay = 0.9",
        "[sampler]\nkind = \"sghmc\"\nstep_size = 1e-5\ninner_steps = 3",
        "[sampler]\nkind = \"sgnht\"\nstep_size = 1e-5",
        "[sampler]\nkind = \"baoab\"\nstep_size = 1e-3\nfriction = 1.0",
        "[sampler]\nkind = \"badodab\"\nstep_size = 1e-3\nthermal_mass = 3.0",
        "[sampler]\nkind = \"ccadl\"\nstep_size = 1e-3\ndiffusion = 1.0",
        "[sampler]\nkind = \"ccadl\"\nstep_size = 1e-3\ndiffusion = 10.0\ncovariance = \"diagonal\"\nfinite_population = true\nkappa = 0.1\nexponential_friction = true",
    ] {
        let body = GOOD.replace("[sampler]\nkind = \"sgld\"\nstep_size = 1e-4", sampler);
        let dir = setup(NPY_DATA, LOGISTIC, &body);
        let out = sgmcmc(&["run", "run.toml", "--out", "out"], dir.path());
        assert!(
            out.status.success(),
            "{sampler}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let summary = read_summary(dir.path());
        assert_eq!(summary["draws"], 400, "{sampler}");
    }
    // SGHMC without L, and a friction not above the noise estimate, are clear errors.
    let dir = setup(
        NPY_DATA,
        LOGISTIC,
        &GOOD.replace("kind = \"sgld\"", "kind = \"sghmc\""),
    );
    assert_fails_with(dir.path(), &["inner_steps"]);
    let body = GOOD.replace(
        "kind = \"sgld\"\nstep_size = 1e-4",
        "kind = \"sghmc\"\nstep_size = 1e-5\ninner_steps = 2\nnoise_estimate = 0.5",
    );
    let dir = setup(NPY_DATA, LOGISTIC, &body);
    assert_fails_with(dir.path(), &["noise"]);
    // CCAdL needs A, and at least 2 points per minibatch; κ must be in (0, 1].
    let ccadl = |extra: &str| {
        GOOD.replace(
            "kind = \"sgld\"\nstep_size = 1e-4",
            &format!("kind = \"ccadl\"\nstep_size = 1e-3{extra}"),
        )
    };
    let dir = setup(NPY_DATA, LOGISTIC, &ccadl(""));
    assert_fails_with(dir.path(), &["diffusion"]);
    let dir = setup(
        NPY_DATA,
        LOGISTIC,
        &ccadl("\ndiffusion = 1.0").replace("batch_size = 20", "batch_size = 1"),
    );
    assert_fails_with(dir.path(), &["ccadl", "batch_size >= 2"]);
    let dir = setup(NPY_DATA, LOGISTIC, &ccadl("\ndiffusion = 1.0\nkappa = 1.5"));
    assert_fails_with(dir.path(), &["kappa", "(0, 1]"]);
}

/// A `[sampler]` schedule runs and is recorded, resolved, in summary.json (cyclical: ε₀ = the
/// sampler's step, K = burn-in + iterations, m = ⌈K/M⌉; polynomial without `a`: a chosen so
/// the first step is the sampler's step), together with the compatibility switches; bad
/// schedules are one-line errors naming the problem.
#[test]
fn a_scheduled_run_records_its_schedule() {
    let cyclical = "[sampler]\nkind = \"sghmc\"\nstep_size = 1e-5\ninner_steps = 3\n\
                    shared_minibatch = true\nschedule = { kind = \"cyclical\", cycles = 4 }\n\n\
                    [gradient]\nbatch_size = 20\nwith_replacement = true\n\n\
                    [run]\niterations = 200\nburn_in = 40\nchains = 2";
    let dir = setup(NPY_DATA, LOGISTIC, cyclical);
    let out = sgmcmc(&["run", "run.toml", "--out", "out"], dir.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = read_summary(dir.path());
    assert_eq!(summary["draws"], 400);
    assert_eq!(
        summary["settings"]["sampler"]["schedule"],
        serde_json::json!({
            "kind": "cyclical", "initial": 1e-5, "cycles": 4, "iterations": 240, "cycle_length": 60
        })
    );
    let config = &summary["settings"]["config"];
    assert_eq!(config["sampler"]["schedule"]["cycles"], 4);
    assert_eq!(config["sampler"]["shared_minibatch"], true);
    assert_eq!(config["gradient"]["with_replacement"], true);

    let polynomial = GOOD.replace(
        "step_size = 1e-4",
        "welling_teh_step = 2e-4\nschedule = { kind = \"polynomial\", b = 10 }",
    );
    let dir = setup(NPY_DATA, LOGISTIC, &polynomial);
    let out = sgmcmc(&["run", "run.toml", "--out", "out"], dir.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = &read_summary(dir.path())["settings"]["sampler"]["schedule"];
    assert_eq!(s["kind"], "polynomial");
    assert_eq!(
        (s["b"].as_f64(), s["gamma"].as_f64()),
        (Some(10.0), Some(0.55))
    );
    // a·(b + 1)^(−γ) = ε = h/2 = 1e-4.
    let first = s["a"].as_f64().unwrap() * 11f64.powf(-0.55);
    assert!((first - 1e-4).abs() < 1e-18, "{s}");

    let bad_gamma = GOOD.replace(
        "step_size = 1e-4",
        "step_size = 1e-4\nschedule = { kind = \"polynomial\", gamma = 1.5 }",
    );
    let dir = setup(NPY_DATA, LOGISTIC, &bad_gamma);
    assert_fails_with(dir.path(), &["[sampler] schedule", "γ = 1.5", "(0, 1]"]);
    let wall_clock = GOOD
        .replace(
            "step_size = 1e-4",
            "step_size = 1e-4\nschedule = { kind = \"cyclical\", cycles = 2 }",
        )
        .replace("iterations = 200", "budget_seconds = 1");
    let dir = setup(NPY_DATA, LOGISTIC, &wall_clock);
    assert_fails_with(dir.path(), &["cyclical", "budget_seconds", "`iterations`"]);
    let misspelt = GOOD.replace(
        "step_size = 1e-4",
        "step_size = 1e-4\nschedule = { kind = \"cyclical\", cycle = 2 }",
    );
    let dir = setup(NPY_DATA, LOGISTIC, &misspelt);
    assert_fails_with(dir.path(), &["run.toml:", "cycle"]);
    let full = GOOD.replace(
        "batch_size = 20",
        "estimator = \"full\"\nwith_replacement = true",
    );
    let dir = setup(NPY_DATA, LOGISTIC, &full);
    assert_fails_with(dir.path(), &["with_replacement", "full"]);
}

#[test]
fn bench_matrix_has_one_row_per_sampler_and_estimator() {
    let dir = tempfile::tempdir().unwrap();
    let out = sgmcmc(
        &[
            "bench",
            "--matrix",
            "--rows",
            "2000",
            "--seconds",
            "0.01",
            "--repeats",
            "1",
            "--json",
            "matrix.json",
        ],
        dir.path(),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(dir.path().join("matrix.json")).expect("JSON written");
    let report: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let names = |key: &str| -> Vec<String> {
        report[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    };
    let (samplers, estimators) = (names("samplers"), names("estimators"));
    for s in ["SGLD", "pSGLD", "SGHMC", "SGNHT", "BAOAB", "BADODAB"] {
        assert!(samplers.iter().any(|x| x == s), "{s} missing: {samplers:?}");
    }
    assert_eq!(estimators, ["minibatch", "control variates", "SVRG"]);
    assert_eq!(report["batch"], 20);
    assert_eq!(report["svrg_update_rate"], 100);
    let cells = report["cells"].as_array().unwrap();
    assert_eq!(cells.len(), samplers.len() * estimators.len());
    let positive = |v: &serde_json::Value| v.as_f64().is_some_and(|x| x.is_finite() && x > 0.0);
    for s in &samplers {
        for e in &estimators {
            let matching: Vec<_> = cells
                .iter()
                .filter(|c| c["sampler"] == s.as_str() && c["estimator"] == e.as_str())
                .collect();
            assert_eq!(matching.len(), 1, "{s} x {e}");
            let c = matching[0];
            for key in [
                "iterations_per_second",
                "estimates_per_second",
                "microseconds_per_estimate",
                "per_estimate_vs_reference",
            ] {
                assert!(positive(&c[key]), "{s} x {e}: {key} = {}", c[key]);
            }
            assert!(
                c["overhead_microseconds_per_iteration"]
                    .as_f64()
                    .unwrap()
                    .is_finite()
            );
            // The printed table has the same row.
            assert!(
                stdout
                    .lines()
                    .any(|l| l.starts_with(s.as_str()) && l.contains(e.as_str())),
                "{s} x {e} not printed:\n{stdout}"
            );
        }
    }
    for e in report["bare_estimators"].as_array().unwrap() {
        assert!(positive(&e["estimates_per_second"]), "{e}");
    }
    let alone = report["samplers_alone"].as_array().unwrap();
    assert_eq!(alone.len(), samplers.len());
    for a in alone {
        assert!(positive(&a["nanoseconds_per_iteration"]), "{a}");
    }
    let sghmc = cells.iter().find(|c| c["sampler"] == "SGHMC").unwrap();
    assert_eq!(sghmc["estimates_per_step"], 5);
}

/// `sgmcmc ksd`: the stored draws of a run, thinned per chain, with full-batch scores; the
/// reported KSD equals the library's on the same thinned draws, and a model of another dimension
/// is a one-line error naming both.
#[test]
fn ksd_of_stored_draws_matches_the_library() {
    let dir = setup(NPY_DATA, LOGISTIC, GOOD);
    assert!(
        sgmcmc(&["run", "run.toml", "--out", "out"], dir.path())
            .status
            .success()
    );
    let out = sgmcmc(
        &[
            "ksd",
            "out/draws.zarr",
            "--config",
            "run.toml",
            "--thin",
            "4",
            "--json",
            "ksd.json",
        ],
        dir.path(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(dir.path().join("ksd.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        json["report"]["draws"], 100,
        "2 chains × 200 draws, every 4th"
    );
    let cli_ksd = json["report"]["ksd"]["ksd"].as_f64().unwrap();

    // The same by the library: read the store, score every 4th draw of each chain, evaluate.
    let stored = sgmcmc::io::read_draws(&dir.path().join("out/draws.zarr"), "theta").unwrap();
    // θ is the reported scale here: no `unconstrained_posterior` beside the posterior.
    assert!(
        !dir.path()
            .join("out/draws.zarr/unconstrained_posterior")
            .exists()
    );
    let lib = common::library_ksd(dir.path(), &stored.chains, 4);
    assert!(cli_ksd.is_finite() && cli_ksd > 0.0);
    assert!(
        (lib - cli_ksd).abs() <= 1e-12 * cli_ksd,
        "{lib} vs {cli_ksd}"
    );

    let other = "[data]\nfeatures = \"x.npy\"\ntargets = \"y.npy\"\n\n[model]\nkind = \"logistic\"\nintercept = true\n";
    std::fs::write(dir.path().join("other.toml"), format!("{other}\n{GOOD}\n")).unwrap();
    let out = sgmcmc(
        &["ksd", "out/draws.zarr", "--config", "other.toml"],
        dir.path(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("3 parameters") && stderr.contains("has 4"),
        "{stderr}"
    );
    let out = sgmcmc(&["ksd", "nowhere.zarr", "--config", "run.toml"], dir.path());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a Zarr store"));
}

const MH_GOOD: &str = "[sampler]\nkind = \"mh\"\nproposal = { kind = \"random_walk\", sd = 0.1 }\ntest = \"barker\"\nbatch_size = 50\ntemperature = 1.0\n\n[gradient]\nbatch_size = 20\n\n[run]\niterations = 300\nchains = 2";

/// Every accept/reject test of `kind = "mh"` runs from the run file and reports its counts in
/// the summary (iterations = chains × (burn-in + iterations); data per test within [m, N]).
#[test]
fn every_mh_test_runs_from_the_config() {
    for (test, extra, min_points, max_points) in [
        ("barker", "", 50.0, 200.0),
        (
            "workshop",
            "minibatches = 4\nstd_smoothing = 0.5\n",
            200.0,
            250.0,
        ),
        ("austerity", "tolerance = 0.1\n", 50.0, 200.0),
        ("exact_barker", "", 200.0, 200.0),
        ("exact_metropolis", "", 200.0, 200.0),
    ] {
        let body = MH_GOOD.replace(
            "test = \"barker\"\n",
            &format!("test = \"{test}\"\n{extra}"),
        );
        let dir = setup(NPY_DATA, LOGISTIC, &body);
        let out = sgmcmc(&["run", "run.toml", "--out", "out"], dir.path());
        assert!(
            out.status.success(),
            "{test}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let summary = read_summary(dir.path());
        let chains = summary["run"]["chains"]
            .as_array()
            .expect("run.chains array");
        assert_eq!(chains.len(), 2, "{test}");
        for chain in chains {
            let stats = &chain["sampler_statistics"];
            let iterations = stats["iterations"].as_u64().expect("iterations counted");
            assert!(iterations >= 300, "{test}: {stats}");
            let decided = stats["accepted"].as_u64().unwrap()
                + stats["rejected"].as_u64().unwrap()
                + stats["skipped"].as_u64().unwrap();
            assert_eq!(decided, iterations, "{test}: {stats}");
            let per_test = stats["points"].as_u64().unwrap() as f64 / iterations as f64;
            assert!(
                (min_points..=max_points).contains(&per_test),
                "{test}: {per_test} points per test, expected [{min_points}, {max_points}]"
            );
        }
    }
}

/// Bad `kind = "mh"` tables: each error names the offending key or value.
#[test]
fn mh_config_errors_name_the_problem() {
    let cases: [(&str, &str, &[&str]); 10] = [
        (
            "batch_size = 50",
            "batch_size = 201",
            &["batch_size = 201", "N = 200"],
        ),
        (
            "batch_size = 50",
            "batch_size = 1",
            &["batch_size", "at least 2"],
        ),
        (
            "temperature = 1.0",
            "temperature = 0.0",
            &["temperature", "> 0"],
        ),
        ("sd = 0.1", "sd = -0.1", &["proposal sd", "> 0"]),
        ("test = \"barker\"", "test = \"barkr\"", &["barkr"]),
        (
            "test = \"barker\"",
            "test = \"austerity\"\ntolerance = 1.5",
            &["tolerance", "(0, 1)"],
        ),
        (
            "test = \"barker\"",
            "test = \"workshop\"\nminibatches = 1",
            &["minibatches", "at least 2"],
        ),
        (
            "test = \"barker\"",
            "test = \"workshop\"\nstd_smoothing = 0.0",
            &["std_smoothing"],
        ),
        (
            "{ kind = \"random_walk\", sd = 0.1 }",
            "{ kind = \"langevin\", step_size = 1e-3 }",
            &["SVRG"],
        ),
        (
            "temperature = 1.0",
            "temperature = 1.0\nschedule = { kind = \"polynomial\", b = 10 }",
            &["mh", "no step schedule"],
        ),
    ];
    for (from, to, fragments) in cases {
        let mut body = MH_GOOD.replace(from, to);
        if to.contains("langevin") {
            body = body.replace("batch_size = 20", "batch_size = 20\nestimator = \"svrg\"");
        }
        let dir = setup(NPY_DATA, LOGISTIC, &body);
        assert_fails_with(dir.path(), fragments);
    }
}

/// `bench --pmf` on MovieLens u1.base (skipped when the shared data are absent) reports the
/// iteration rate against the paper code and the parts of an iteration; a batch larger than N
/// is an error naming the flag.
#[test]
fn bench_pmf_reports_the_rate_and_the_parts() {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/movielens-100k/u1.base");
    if !file.exists() {
        eprintln!("skipped: {} is absent", file.display());
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let f = file.to_str().unwrap();
    let out = sgmcmc(
        &["bench", "--pmf", f, "--seconds", "0.01", "--repeats", "1"],
        dir.path(),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("D = 52580"), "{stdout}");
    assert!(stdout.contains("the paper code's 760"), "{stdout}");
    assert!(stdout.contains("standard normals"), "{stdout}");
    let out = sgmcmc(
        &[
            "bench",
            "--pmf",
            f,
            "--pmf-batch",
            "90000",
            "--seconds",
            "0.01",
        ],
        dir.path(),
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--pmf-batch"));
}

/// `sgmcmc shuffle` writes a permuted copy of features and targets (rows kept whole), which a
/// block-minibatch run reads as it is with `[data] rows_shuffled = true`; a copy over its own
/// input is refused.
#[test]
fn shuffle_writes_a_permuted_copy_that_a_block_run_reads() {
    let body = "[sampler]\nkind = \"sgld\"\nstep_size = 1e-4\n\n[gradient]\nbatch_size = 20\nscheme = \"block\"\n\n[run]\niterations = 200\nchains = 2";
    let dir = setup(
        "features = \"xs.npy\"\ntargets = \"ys.npy\"\nrows_shuffled = true",
        LOGISTIC,
        body,
    );
    let out = sgmcmc(
        &[
            "shuffle",
            "x.npy",
            "--out",
            "xs.npy",
            "--targets",
            "y.npy",
            "--out-targets",
            "ys.npy",
            "--seed",
            "5",
        ],
        dir.path(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let x: Array2<f64> = ndarray_npy::read_npy(dir.path().join("x.npy")).unwrap();
    let y: Array1<f64> = ndarray_npy::read_npy(dir.path().join("y.npy")).unwrap();
    let xs: Array2<f64> = ndarray_npy::read_npy(dir.path().join("xs.npy")).unwrap();
    let ys: Array1<f64> = ndarray_npy::read_npy(dir.path().join("ys.npy")).unwrap();
    let rows = |x: &Array2<f64>, y: &Array1<f64>| {
        let mut r: Vec<Vec<u64>> = (0..y.len())
            .map(|i| {
                let mut v: Vec<u64> = x.row(i).iter().map(|a| a.to_bits()).collect();
                v.push(y[i].to_bits());
                v
            })
            .collect();
        r.sort();
        r
    };
    assert_ne!(x, xs, "the rows moved");
    assert_eq!(
        rows(&x, &y),
        rows(&xs, &ys),
        "each row with its target, once"
    );
    let out = sgmcmc(&["run", "run.toml", "--out", "out"], dir.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    common::assert_command_fails_with(
        &["shuffle", "x.npy", "--out", "x.npy"],
        dir.path(),
        &["must not overwrite its input"],
    );
}
