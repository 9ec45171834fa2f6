//! `sgmcmc experiment mh-mnist` (moved with the binary from the experiments' tests): flags reach
//! the settings, the outputs are written, a bad DATA_DIR is a clear error.

use crate::common;

use common::synthetic_mnist;
use std::fs;

/// The CLI: flags reach the settings, the outputs are written, and a bad DATA_DIR exits with
/// an error naming the missing file.
#[test]
fn cli_writes_report_and_tables() {
    let dir = tempfile::tempdir().unwrap();
    synthetic_mnist(dir.path());
    let out = dir.path().join("out");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_sgmcmc"))
        .args(["experiment", "mh-mnist"])
        .arg(dir.path())
        .arg("--out")
        .arg(&out)
        .args([
            "--iterations",
            "30",
            "--record-every",
            "10",
            "--test-size",
            "100",
        ])
        .args(["--temperature", "20", "--austerity-temperature", "1"])
        .args([
            "--sensitivity-batches",
            "5,10",
            "--sensitivity-checkpoints",
            "10,20",
        ])
        .args(["--sensitivity-repeats", "1"])
        .args(["--chains", "2", "--workshop-minibatches", "5"])
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let json: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(json["settings"]["iterations"], 30);
    assert_eq!(json["data"]["test_size"], 100);
    // Two chains of each of the four methods, method by method.
    assert_eq!(json["methods"].as_array().unwrap().len(), 8);
    assert_eq!(json["methods"][2]["method"], "austerity");
    assert_eq!(json["methods"][2]["temperature"], 1.0);
    assert_eq!(json["methods"][3]["chain"], 1);
    assert_eq!(json["settings"]["workshop_minibatches"], 5);
    assert_eq!(json["methods"][0]["curve"].as_array().unwrap().len(), 4);
    assert_eq!(json["sensitivity"]["rows"].as_array().unwrap().len(), 2);
    assert!(
        fs::read_to_string(out.join("tables.md"))
            .unwrap()
            .contains("### Methods")
    );

    // A missing DATA_DIR: a one-line error naming the file, no panic.
    common::assert_command_fails_with(
        &["experiment", "mh-mnist", "missing", "--out", "out2"],
        dir.path(),
        &["train-images-idx3-ubyte.gz"],
    );
}
