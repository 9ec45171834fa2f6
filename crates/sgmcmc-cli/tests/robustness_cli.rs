//! A run that cannot be corrupted and never exits 0 with nothing meaningful (issue 25): the
//! output directory as one transaction (a lock, an earlier run refused or overwritten, no
//! output renamed over a device), a closed or full stdout, sizes checked against memory before
//! anything is allocated, inputs that are not regular files, runs that would keep no draws,
//! and discrepancies from too few draws. Each test reproduces a failure of the code before it.

use crate::common;

use common::{assert_command_fails_with, assert_fails_with, sgmcmc};
use ndarray::{Array1, Array2};
use ndarray_npy::write_npy;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const GOOD: &str = "[data]\nfeatures = \"x.npy\"\ntargets = \"y.npy\"\n\n[model]\nkind = \"logistic\"\n\n\
                    [sampler]\nkind = \"sgld\"\nstep_size = 1e-4\n\n[gradient]\nbatch_size = 20\n\n\
                    [run]\niterations = 400\nchains = 2\nseed = 3";

/// A directory with x.npy (200 x 3), y.npy and `run.toml` = `toml`.
fn setup(toml: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let n = 200;
    let x = Array2::from_shape_fn((n, 3), |(i, j)| ((i * 7 + j * 3) % 11) as f64 / 5.0 - 1.0);
    let y = Array1::from_shape_fn(n, |i| (i % 3 == 0) as u8 as f64);
    write_npy(dir.path().join("x.npy"), &x).unwrap();
    write_npy(dir.path().join("y.npy"), &y).unwrap();
    std::fs::write(dir.path().join("run.toml"), toml).unwrap();
    dir
}

fn summary(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("summary.json")).expect("summary.json written");
    serde_json::from_str(&text).unwrap()
}

fn binary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sgmcmc"))
}

/// Waits for `child` at most `limit`; a child still running then is killed and the test fails
/// (a command that reads forever must not hang the suite).
fn wait_at_most(mut child: Child, limit: Duration) -> Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            child.kill().unwrap();
            panic!("still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// `sgmcmc run … | head -1`: the reader is gone before anything is printed. The run neither
/// panics nor loses its files, and exits 0 as a Unix filter does (before: a panic, exit 101,
/// no summary.json).
#[test]
fn a_closed_stdout_neither_panics_nor_loses_the_outputs() {
    let dir = setup(GOOD);
    let mut child = binary()
        .args(["run", "run.toml", "--out", "out"])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = wait_at_most(child, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(out.status.success(), "{stderr}");
    assert_eq!(summary(&dir.path().join("out"))["draws"], 800);
    assert!(dir.path().join("out/diagnostics.svg").exists());
}

/// Stdout on a full disk: the files are written, and the lost report is a one-line error
/// (before: a panic, no summary.json).
#[test]
fn a_full_stdout_is_reported_after_the_outputs_are_written() {
    let dir = setup(GOOD);
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = binary()
        .args(["run", "run.toml", "--out", "out"])
        .current_dir(dir.path())
        .stdout(full)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!out.status.success());
    assert!(
        stderr.contains("error: cannot write to standard output"),
        "{stderr}"
    );
    assert_eq!(summary(&dir.path().join("out"))["draws"], 800);
}

/// Two runs into one directory at once: the second is refused while the first holds it,
/// even with --overwrite (before: their draws interleaved under one summary).
#[cfg(unix)]
#[test]
fn a_directory_in_use_is_refused() {
    let dir = setup(&GOOD.replace("iterations = 400", "budget_seconds = 300"));
    let first = binary()
        .args(["run", "run.toml", "--out", "out"])
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Until the first run has made its store (it holds the lock from before that).
    let start = Instant::now();
    while !dir.path().join("out/draws.zarr").exists() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "first run never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::write(
        dir.path().join("second.toml"),
        GOOD.replace("seed = 3", "seed = 4"),
    )
    .unwrap();
    let second = sgmcmc(
        &["run", "second.toml", "--out", "out", "--overwrite"],
        dir.path(),
    );
    let pid = first.id().to_string();
    Command::new("kill").args(["-INT", &pid]).status().unwrap();
    let first = wait_at_most(first, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "the second run was not refused");
    assert!(
        stderr.contains("is in use by another sgmcmc run"),
        "{stderr}"
    );
    assert!(stderr.contains(&format!("(process {pid})")), "{stderr}");
    // The first run's outputs are its own.
    assert!(!first.status.success(), "an interrupted run exits non-zero");
    let s = summary(&dir.path().join("out"));
    assert_eq!(s["interrupted"], true);
    assert_eq!(s["settings"]["config"]["run"]["seed"], 3);
}

/// An earlier run's directory: refused by default (before: the new draws were written beside
/// the old summary); --overwrite deletes the earlier outputs, keeps the user's other files.
#[test]
fn an_earlier_run_is_refused_unless_overwritten() {
    let dir = setup(GOOD);
    let first = sgmcmc(&["run", "run.toml", "--out", "out"], dir.path());
    assert!(first.status.success());
    std::fs::write(dir.path().join("out/notes.txt"), "mine").unwrap();
    std::fs::write(
        dir.path().join("run.toml"),
        GOOD.replace("iterations = 400", "iterations = 100"),
    )
    .unwrap();
    assert_fails_with(
        dir.path(),
        &["out already holds a run", "summary.json", "--overwrite"],
    );
    assert_eq!(summary(&dir.path().join("out"))["draws"], 800);
    let again = sgmcmc(
        &["run", "run.toml", "--out", "out", "--overwrite"],
        dir.path(),
    );
    assert!(again.status.success());
    assert_eq!(summary(&dir.path().join("out"))["draws"], 200);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out/notes.txt")).unwrap(),
        "mine"
    );
    // A regular file is not an output directory.
    std::fs::write(dir.path().join("file"), "x").unwrap();
    assert_command_fails_with(
        &["run", "run.toml", "--out", "file"],
        dir.path(),
        &["file is not a directory"],
    );
}

/// `reference --out` naming a FIFO (as /dev/full, a device): refused before any sampling, and
/// the node stays what it was (before: NUTS ran, then the file was renamed over the node).
#[cfg(unix)]
#[test]
fn an_output_that_is_not_a_regular_file_is_refused_first() {
    use std::os::unix::fs::FileTypeExt;
    let dir = setup(GOOD);
    let fifo = dir.path().join("fifo.json");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    assert_command_fails_with(
        &[
            "reference",
            "run.toml",
            "--out",
            "fifo.json",
            "--warmup",
            "50",
            "--draws",
            "50",
        ],
        dir.path(),
        &["fifo.json", "a FIFO, not a regular file"],
    );
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo()
    );
    assert!(!dir.path().join("out").exists());
}

/// Data that is not a regular file (a device that reads forever, a FIFO, a directory) is
/// refused at once (before: /dev/zero was read forever).
#[test]
fn data_that_is_not_a_regular_file_is_refused() {
    for (features, what) in [("/dev/zero", "a device"), (".", "a directory")] {
        let dir = setup(&GOOD.replace("x.npy", features));
        let child = binary()
            .args(["run", "run.toml", "--out", "out"])
            .current_dir(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = wait_at_most(child, Duration::from_secs(30));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(
            stderr.contains(&format!("{what}, not a regular file")),
            "{features}: {stderr}"
        );
    }
}

/// Sizes from the data and the run file are checked against memory before anything is
/// allocated: a LIBSVM index of 10⁹ (before: an abort on a 24 GB allocation of parameter
/// names) and 10⁹ chains (before: 9 GB of memory and no output).
#[test]
fn sizes_beyond_memory_are_refused_before_allocation() {
    let dir = setup(GOOD);
    std::fs::write(
        dir.path().join("big.svm"),
        "1 1:0.5 1000000000:1\n0 2:1\n1 3:1\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("run.toml"),
        GOOD.replace(
            "features = \"x.npy\"\ntargets = \"y.npy\"",
            "libsvm = \"big.svm\"",
        )
        .replace("batch_size = 20", "batch_size = 2"),
    )
    .unwrap();
    assert_fails_with(
        dir.path(),
        &["big.svm", "1000000000 feature columns", "GB are available"],
    );
    std::fs::write(
        dir.path().join("run.toml"),
        GOOD.replace("chains = 2", "chains = 1_000_000_000"),
    )
    .unwrap();
    assert_fails_with(
        dir.path(),
        &["1000000000 chains", "GB of memory", "fewer chains"],
    );
    assert!(!dir.path().join("out").exists());
}

/// Runs that would keep no draws are refused before they start (before: exit 0 with an empty
/// store and null statistics).
#[test]
fn runs_that_keep_no_draws_are_refused() {
    for (from, to, needle) in [
        (
            "iterations = 400",
            "iterations = 0",
            "iterations must be at least 1",
        ),
        (
            "chains = 2",
            "chains = 2\nthin = 500",
            "thin = 500 is larger than iterations = 400",
        ),
    ] {
        let dir = setup(&GOOD.replace(from, to));
        assert_fails_with(dir.path(), &[needle]);
    }
}

/// Coreset MCMC with no chains (before: an index-out-of-bounds panic) or 10⁹ chains.
#[test]
fn coreset_chain_counts_are_checked() {
    let base = "[data]\nsynthetic = { rows = 500, dim = 3, generator = \"gaussian_location\", seed = 3 }\n\n\
                [model]\nkind = \"gaussian\"\nprior_variance = 1.0\n\n[coreset]\nsize = 50\n\
                iterations = 100\ndraws = 100\nkernel = { kind = \"exact_gaussian\" }\n";
    for (chains, needle) in [
        ("0", "at least 2 chains"),
        ("1_000_000_000", "GB of memory"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("coreset.toml"),
            format!("{base}chains = {chains}\n"),
        )
        .unwrap();
        assert_command_fails_with(
            &["coreset", "coreset.toml", "--out", "out"],
            dir.path(),
            &[needle],
        );
    }
}

/// A KSD from a handful of draws warns and says how many (before: a bare number).
#[test]
fn a_discrepancy_from_few_draws_warns_with_the_count() {
    let dir = setup(GOOD);
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
            "100",
        ],
        dir.path(),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("WARNING: the discrepancy rests on only 8 draws"),
        "{stdout}"
    );
    let plenty = sgmcmc(
        &[
            "ksd",
            "out/draws.zarr",
            "--config",
            "run.toml",
            "--thin",
            "1",
        ],
        dir.path(),
    );
    assert!(!String::from_utf8_lossy(&plenty.stdout).contains("WARNING"));
}
