//! `sgmcmc experiment ccadl-mnist`: every flag reaches the settings, the outputs are written, and a
//! bad DATA_DIR is a clear error.
//!
//! Broken once: `settings.reference.draws = reference_draws` dropped from the CLI's match arm; the
//! test failed on the reference's draw count (5,000 against 120).

use crate::common;

use common::{synthetic_digits, write_split};
use std::fs;

#[test]
fn cli_writes_report_tables_and_figures() {
    let dir = tempfile::tempdir().unwrap();
    write_split(
        dir.path(),
        "train",
        &synthetic_digits(&[(7, 60), (9, 50), (1, 10)]),
        31,
    );
    write_split(
        dir.path(),
        "t10k",
        &synthetic_digits(&[(7, 20), (9, 20), (1, 5)]),
        32,
    );
    let out = dir.path().join("out");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_sgmcmc"))
        .args(["experiment", "ccadl-mnist"])
        .arg(dir.path())
        .arg("--out")
        .arg(&out)
        .args(["--passes", "4", "--marginal-samples", "50", "--runs", "2"])
        .args(["--batch", "20", "--projection-dim", "6"])
        .args([
            "--steps",
            "0.001",
            "--diffusions",
            "1,5",
            "--marginal-diffusion",
            "5",
        ])
        .args(["--seed", "9", "--reference-chains", "2"])
        .args(["--reference-warmup", "40", "--reference-draws", "60"])
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let json: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let s = &json["settings"];
    assert_eq!(s["passes"], 4);
    assert_eq!(s["marginal_samples"], 50);
    assert_eq!(s["marginal_diffusion"], 5.0);
    assert_eq!(s["runs"], 2);
    assert_eq!(s["batch"], 20);
    assert_eq!(s["projection_dim"], 6);
    assert_eq!(s["seed"], 9);
    assert_eq!(s["steps"], serde_json::json!([0.001]));
    assert_eq!(s["diffusions"], serde_json::json!([1.0, 5.0]));
    assert_eq!(s["reference"]["warmup"], 40);
    assert_eq!(s["reference"]["seed"], 9);
    assert_eq!(json["reference"]["draws"], 2 * 60);
    // 2 runs × 2 diffusions × 3 methods; 4 passes and the start.
    let runs = json["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 12);
    assert_eq!(runs[0]["test_log_lik_at_mean"].as_array().unwrap().len(), 5);
    assert_eq!(json["data"]["train_sevens"], 60);
    assert_eq!(json["data"]["features"], 6);
    for file in ["tables.md", "curves.svg", "marginals.svg"] {
        assert!(out.join(file).is_file(), "{file} missing");
    }

    // A missing DATA_DIR: a one-line error naming the file, no panic.
    common::assert_command_fails_with(
        &["experiment", "ccadl-mnist", "missing", "--out", "out2"],
        dir.path(),
        &["train-images-idx3-ubyte"],
    );
}
