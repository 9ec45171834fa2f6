//! Helpers for the CLI's tests: the core's test helpers (`crates/sgmcmc/tests/common`), and the
//! `sgmcmc` binary.
#![allow(dead_code, unused_imports)]

#[path = "../../../sgmcmc/tests/common/mod.rs"]
mod core;
pub use core::*;

use std::path::Path;
use std::process::{Command, Output};

// ---------------------------------------------------------------------------------------------
// The binary.
// ---------------------------------------------------------------------------------------------

/// Runs the `sgmcmc` binary with `args` in `dir`.
pub fn sgmcmc(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sgmcmc"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("binary runs")
}

/// Runs `sgmcmc run run.toml` in `dir` and asserts a clean failure whose one-line message
/// contains every string of `needles`.
pub fn assert_fails_with(dir: &Path, needles: &[&str]) {
    assert_command_fails_with(&["run", "run.toml", "--out", "out"], dir, needles);
}

/// Runs `sgmcmc ARGS` in `dir` and asserts a clean failure whose one-line message contains
/// every string of `needles`.
pub fn assert_command_fails_with(args: &[&str], dir: &Path, needles: &[&str]) {
    let out = sgmcmc(args, dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "expected failure, got success; stderr: {stderr}"
    );
    assert!(
        !stderr.contains("panicked"),
        "panic instead of an error: {stderr}"
    );
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected a one-line error, got: {stderr}");
    assert!(lines[0].starts_with("error: "), "{stderr}");
    for n in needles {
        assert!(
            lines[0].contains(n),
            "error {:?} does not mention {n:?}",
            lines[0]
        );
    }
}

/// The KSD the library gives for `chains` (θ, row-major) of the model of `dir/run.toml`, with
/// exact scores at every `thin`-th draw: what `sgmcmc ksd` must agree with.
pub fn library_ksd(dir: &Path, chains: &[Vec<f64>], thin: usize) -> f64 {
    use sgmcmc::stein::{SteinSettings, evaluate, full_batch_scores};
    let cfg = sgmcmc_runfile::config::Config::from_file(&dir.join("run.toml")).unwrap();
    let prepared = sgmcmc_runfile::pipeline::prepare(&cfg).unwrap();
    let model = prepared.model();
    let (mut kept, mut scores) = (Vec::new(), Vec::new());
    for chain in chains {
        let t = full_batch_scores(model, chain, model.dim(), thin).unwrap();
        kept.extend(t.draws);
        scores.extend(t.scores);
    }
    evaluate(&kept, &scores, model.dim(), &SteinSettings::default())
        .unwrap()
        .ksd
        .ksd
}
