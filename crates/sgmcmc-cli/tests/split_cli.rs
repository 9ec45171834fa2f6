//! A run split over processes, as a batch scheduler's array tasks run it (issue 26):
//! `sgmcmc run --prepare`, then `--chains N[-M]` in any number of processes at once, then
//! `--finish`. The draws, their `sample_stats` and the summary are those of the same run in
//! one process, bit for bit; a task killed and run again continues its chains from their
//! checkpoints; what would mix or lose draws is refused with a clear error.
//!
//! Break-once check: a process that clears every chain's stale draws when it reopens the store
//! (not only its own) deleted the draws of the chains running beside it, and `--finish` failed
//! ("chain 0: draw 0 is missing from the store"); restored.

use crate::common;

use common::assert_command_fails_with;
use sgmcmc::io::{read_draw_statistics, read_draws};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// Four chains of a few seconds each (on a quiet machine), checkpointed twice a second.
const RUN: &str = "[data]\nsynthetic = { rows = 20_000, dim = 5, seed = 3 }\n\n\
                   [model]\nkind = \"logistic\"\nprior_variance = 10.0\n\n\
                   [sampler]\nkind = \"sgld\"\nstep_size = 2e-5\n\n\
                   [gradient]\nestimator = \"control_variates\"\nbatch_size = 50\n\n\
                   [run]\nseed = 11\nchains = 4\niterations = 1_000_000\nburn_in = 1_000\nthin = 100\n\
                   checkpoint_seconds = 0.5\n";

fn sgmcmc(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sgmcmc"));
    cmd.current_dir(dir)
        .args(args)
        .env("RAYON_NUM_THREADS", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

fn succeeded(output: Output, what: &str) -> String {
    assert!(
        output.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn run(dir: &Path, args: &[&str]) -> String {
    succeeded(sgmcmc(dir, args).output().unwrap(), &args.join(" "))
}

/// Every chain's draws, bit for bit, and their statistics.
fn stored(dir: &Path) -> (Vec<Vec<u64>>, Vec<Vec<sgmcmc::sampler::DrawStatistics>>) {
    let store = dir.join("draws.zarr");
    let draws = read_draws(&store, "theta")
        .unwrap()
        .chains
        .iter()
        .map(|c| c.iter().map(|v| v.to_bits()).collect())
        .collect();
    (draws, read_draw_statistics(&store).unwrap())
}

/// summary.json's per-parameter rows (R-hat, ESS, ...) and the bias check's KSD test.
fn summary(dir: &Path) -> (serde_json::Value, serde_json::Value) {
    let text = std::fs::read_to_string(dir.join("summary.json")).unwrap();
    let s: serde_json::Value = serde_json::from_str(&text).unwrap();
    let test = s["bias_check"]["test"].clone();
    assert!(test["statistic"].is_f64(), "{test}");
    (s["parameters"].clone(), test)
}

#[cfg(unix)]
#[test]
fn chains_run_as_separate_tasks_give_the_whole_runs_draws() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("run.toml"), RUN).unwrap();
    run(d, &["run", "run.toml", "--out", "whole"]);

    let out = run(d, &["run", "run.toml", "--out", "split", "--prepare"]);
    assert!(out.contains("4 chains of 10000 draws"), "{out}");
    assert_command_fails_with(
        &["run", "run.toml", "--out", "split", "--finish"],
        d,
        &["not finished", "chains 0, 1, 2, 3"],
    );
    // Chains 0-1 in one task; chain 2 in another, killed (kill -9) after its first checkpoint
    // and run again, as a scheduler retries a task; chain 3 in a third, at the same time.
    let first = sgmcmc(d, &["run", "run.toml", "--out", "split", "--chains", "0-1"])
        .spawn()
        .unwrap();
    let mut killed = sgmcmc(d, &["run", "run.toml", "--out", "split", "--chains", "2"])
        .spawn()
        .unwrap();
    let checkpoint = d.join("split/checkpoints/chain-2.state");
    while !checkpoint.exists() {
        assert!(
            killed.try_wait().unwrap().is_none(),
            "chain 2 ended before its first checkpoint"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    // The same chain cannot run twice at once.
    assert_command_fails_with(
        &["run", "run.toml", "--out", "split", "--chains", "1-2"],
        d,
        &["chain 1 is being run by process"],
    );
    // Nor can a whole run go into the directory while chains run.
    assert_command_fails_with(
        &["run", "run.toml", "--out", "split", "--resume"],
        d,
        &["in use by another sgmcmc run"],
    );
    killed.kill().unwrap(); // SIGKILL
    killed.wait().unwrap();
    let third = sgmcmc(d, &["run", "run.toml", "--out", "split", "--chains", "3"])
        .spawn()
        .unwrap();
    let again = run(d, &["run", "run.toml", "--out", "split", "--chains", "2"]);
    assert!(
        !again.contains("(0 from its checkpoint)"),
        "the retried chain started over: {again}"
    );
    succeeded(first.wait_with_output().unwrap(), "chains 0-1");
    succeeded(third.wait_with_output().unwrap(), "chain 3");

    run(d, &["run", "run.toml", "--out", "split", "--finish"]);
    assert!(
        stored(&d.join("split")) == stored(&d.join("whole")),
        "the split run's draws or sample_stats differ from the whole run's"
    );
    assert_eq!(summary(&d.join("split")), summary(&d.join("whole")));
}

/// What cannot be split says why: a chain the run does not have, chains of a directory that
/// was not prepared, and a run without an iteration budget.
#[test]
fn a_split_that_cannot_work_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("run.toml"), RUN).unwrap();
    let timed = RUN.replace("iterations = 1_000_000", "budget_seconds = 1.0");
    std::fs::write(d.join("timed.toml"), timed).unwrap();
    assert_command_fails_with(
        &["run", "timed.toml", "--out", "timed", "--prepare"],
        d,
        &["needs an iteration budget"],
    );
    std::fs::create_dir(d.join("empty")).unwrap();
    assert_command_fails_with(
        &["run", "run.toml", "--out", "empty", "--chains", "0"],
        d,
        &["holds no run to continue"],
    );
    run(d, &["run", "run.toml", "--out", "split", "--prepare"]);
    assert_command_fails_with(
        &["run", "run.toml", "--out", "split", "--chains", "3-5"],
        d,
        &["has chains 0-3, not chain 4"],
    );
    assert_command_fails_with(
        &["run", "run.toml", "--out", "split", "--chains", "2-1"],
        d,
        &["the range is empty"],
    );
    assert_command_fails_with(
        &["run", "run.toml", "--out", "split"],
        d,
        &["already holds a run"],
    );
}

/// A chain that diverges in its task is done: `--finish` does not wait for it, continues it
/// from its last finite checkpoint (where it diverges again) and ends as the run in one process
/// does (here every chain diverges: the same error, and the same draws in the store).
/// Break-once check: without the marker a diverged chain leaves, `--finish` refused ("not
/// finished: chains 0, 1"); restored.
#[test]
fn diverged_chains_are_done_and_finish_as_in_one_process() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let diverging = RUN
        .replace("step_size = 2e-5", "step_size = 100.0")
        .replace("chains = 4", "chains = 2")
        .replace("iterations = 1_000_000", "iterations = 20_000");
    std::fs::write(d.join("run.toml"), diverging).unwrap();
    let whole = sgmcmc(d, &["run", "run.toml", "--out", "whole"])
        .output()
        .unwrap();
    assert!(!whole.status.success());
    let whole_error = String::from_utf8_lossy(&whole.stderr).into_owned();
    assert!(
        whole_error.contains("every chain diverged"),
        "{whole_error}"
    );

    run(d, &["run", "run.toml", "--out", "split", "--prepare"]);
    let out = run(d, &["run", "run.toml", "--out", "split", "--chains", "0-1"]);
    assert_eq!(out.matches("DIVERGED").count(), 2, "{out}");
    let finish = sgmcmc(d, &["run", "run.toml", "--out", "split", "--finish"])
        .output()
        .unwrap();
    assert!(!finish.status.success());
    let finish_error = String::from_utf8_lossy(&finish.stderr);
    assert!(
        finish_error.contains("every chain diverged"),
        "{finish_error}"
    );
    let draws = |dir: &str| -> Vec<Vec<u64>> {
        read_draws(&d.join(dir).join("draws.zarr"), "theta")
            .unwrap()
            .chains
            .iter()
            .map(|c| c.iter().map(|v| v.to_bits()).collect())
            .collect()
    };
    assert!(draws("split") == draws("whole"), "the stored draws differ");
}
