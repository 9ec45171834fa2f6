//! `sgmcmc run --resume` (issue 25): a run killed at a random moment (kill -9) or stopped
//! (Ctrl-C) is continued from its chains' checkpoints and ends with exactly the draws of an
//! uninterrupted run (its `sample_stats` included); a killed chain loses at most one
//! checkpoint interval of sampling.
//!
//! `SGMCMC_KILLS=20 cargo test --release -p sgmcmc-cli --test integration resume_cli:: -- --nocapture` runs
//! the kill -9 test with 20 kills (3 by default) and prints what each lost.

use crate::common;

use common::assert_command_fails_with;
use sgmcmc::io::{read_draw_statistics, read_draws};
use sgmcmc::runner::checkpoint_header;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

/// Two chains (one per core, so both run at once), SGLD with control variates: its checkpoint
/// holds the estimator's centre and the subsampler's permutation besides the position and
/// stream. Long enough (several seconds) to be killed in the middle.
const RUN: &str = "[data]\nsynthetic = { rows = 20_000, dim = 5, seed = 3 }\n\n\
                   [model]\nkind = \"logistic\"\nprior_variance = 10.0\n\n\
                   [sampler]\nkind = \"sgld\"\nstep_size = 2e-5\n\n\
                   [gradient]\nestimator = \"control_variates\"\nbatch_size = 50\n\n\
                   [run]\nseed = 11\nchains = 2\niterations = 3_000_000\nburn_in = 1_000\nthin = 200\n\
                   checkpoint_seconds = 0.5\nbias_check = false\n";

/// The longest a running chain's last checkpoint may be old at a kill: the interval, plus
/// the time to write it and to read the clock (every 64 iterations), with room for a busy
/// machine.
const LOST_AT_MOST: Duration = Duration::from_millis(500 + 700);

fn sgmcmc(dir: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sgmcmc"));
    cmd.current_dir(dir)
        .env("RAYON_NUM_THREADS", "2")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Runs `sgmcmc COMMAND FILE --out OUT EXTRA...` in `dir`, which must succeed; its stdout.
fn succeeds(dir: &Path, [command, file]: [&str; 2], out: &str, extra: &[&str]) -> String {
    let result = sgmcmc(dir)
        .args([command, file, "--out", out])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        result.status.success(),
        "{command} {out} {extra:?}: {}",
        String::from_utf8_lossy(&result.stderr)
    );
    String::from_utf8_lossy(&result.stdout).into_owned()
}

fn run_to_end(dir: &Path, out: &str, extra: &[&str]) {
    succeeds(dir, ["run", "run.toml"], out, extra);
}

/// Every chain's draws, bit for bit.
fn draw_bits(store: &Path) -> Vec<Vec<u64>> {
    read_draws(store, "theta")
        .unwrap()
        .chains
        .iter()
        .map(|c| c.iter().map(|v| v.to_bits()).collect())
        .collect()
}

fn summary(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("summary.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// A uniform number in [0, 1) from a 64-bit LCG (fixed seed: the kill moments are the same on
/// every machine, relative to the run's length there).
fn uniform(state: &mut u64) -> f64 {
    *state = state
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (*state >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(unix)]
#[test]
fn a_run_killed_at_random_moments_resumes_to_the_uninterrupted_draws() {
    let kills: usize = std::env::var("SGMCMC_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("run.toml"), RUN).unwrap();
    run_to_end(dir.path(), "whole", &[]);
    // The kills fall while the chains sample (not in the summary after them).
    let sampling = summary(&dir.path().join("whole"))["seconds"]
        .as_f64()
        .unwrap();
    let length = Duration::from_secs_f64(0.2 + sampling);
    let whole = draw_bits(&dir.path().join("whole/draws.zarr"));
    assert_eq!(whole.len(), 2);
    let whole_statistics = read_draw_statistics(&dir.path().join("whole/draws.zarr")).unwrap();
    assert!(
        whole_statistics
            .iter()
            .all(|c| !c.is_empty() && c[0].step_size.is_some())
    );
    let total_iterations = 3_001_000;
    let mut rng = 0x5eed_u64;
    for k in 0..kills {
        let out = format!("killed{k}");
        let at = length.mul_f64(0.05 + 0.95 * uniform(&mut rng));
        let mut child = sgmcmc(dir.path())
            .args(["run", "run.toml", "--out", &out])
            .spawn()
            .unwrap();
        std::thread::sleep(at);
        child.kill().unwrap(); // SIGKILL
        let killed_at = SystemTime::now();
        child.wait().unwrap();

        // What each running chain lost: the time since its last checkpoint.
        let checkpoints = dir.path().join(&out).join("checkpoints");
        let mut report = Vec::new();
        let mut at_checkpoint = vec![0u64; 2];
        for (c, at_checkpoint) in at_checkpoint.iter_mut().enumerate() {
            let file = checkpoints.join(format!("chain-{c}.state"));
            let Ok(bytes) = std::fs::read(&file) else {
                report.push(format!("chain {c}: no checkpoint yet"));
                continue;
            };
            let header = checkpoint_header(&bytes).unwrap();
            *at_checkpoint = header.progress.draws as u64;
            let age = killed_at
                .duration_since(std::fs::metadata(&file).unwrap().modified().unwrap())
                .unwrap_or_default();
            let finished = header.progress.iterations == total_iterations;
            report.push(format!(
                "chain {c}: checkpoint at draw {} ({} iterations), {:.3} s before the kill{}",
                header.progress.draws,
                header.progress.iterations,
                age.as_secs_f64(),
                if finished { " (finished)" } else { "" }
            ));
            if !finished {
                assert!(
                    age <= LOST_AT_MOST,
                    "kill {k} at {at:?}: chain {c} lost {age:?} of sampling"
                );
            }
        }
        eprintln!(
            "kill {k} at {:.2} s of {:.2} s: {}",
            at.as_secs_f64(),
            length.as_secs_f64(),
            report.join("; ")
        );

        run_to_end(dir.path(), &out, &["--resume"]);
        assert!(
            draw_bits(&dir.path().join(&out).join("draws.zarr")) == whole,
            "kill {k} at {at:?}: the resumed draws differ from the uninterrupted run's"
        );
        // sample_stats too: the draws before the kill keep theirs (kept with the checkpoints).
        assert!(
            read_draw_statistics(&dir.path().join(&out).join("draws.zarr")).unwrap()
                == whole_statistics,
            "kill {k} at {at:?}: the resumed sample_stats differ from the uninterrupted run's"
        );
        // The chains went on from their checkpoints (a resume that started over would also
        // reproduce the draws).
        let s = summary(&dir.path().join(&out));
        assert_eq!(s["resumed_draws"], serde_json::json!(at_checkpoint), "{s}");
        assert_eq!(s["draws"], summary(&dir.path().join("whole"))["draws"]);
    }
}

/// Ctrl-C ends the run with its draws and a final checkpoint; `--resume` continues it to the
/// uninterrupted draws, and resuming a finished run changes nothing.
#[cfg(unix)]
#[test]
fn an_interrupted_run_resumes_and_a_finished_one_stays_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("run.toml"), RUN).unwrap();
    run_to_end(dir.path(), "whole", &[]);
    let whole = draw_bits(&dir.path().join("whole/draws.zarr"));

    let child = sgmcmc(dir.path())
        .args(["run", "run.toml", "--out", "stopped"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let stopped = child.wait_with_output().unwrap();
    assert!(
        !stopped.status.success(),
        "an interrupted run exits non-zero"
    );
    assert_eq!(summary(&dir.path().join("stopped"))["interrupted"], true);

    run_to_end(dir.path(), "stopped", &["--resume"]);
    assert!(draw_bits(&dir.path().join("stopped/draws.zarr")) == whole);
    assert_eq!(summary(&dir.path().join("stopped"))["interrupted"], false);

    run_to_end(dir.path(), "whole", &["--resume"]);
    assert!(draw_bits(&dir.path().join("whole/draws.zarr")) == whole);
}

/// What cannot be resumed says why: no run in the directory, or a different run file.
#[test]
fn a_resume_without_its_run_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let short = RUN.replace("iterations = 3_000_000", "iterations = 2_000");
    std::fs::write(dir.path().join("run.toml"), &short).unwrap();
    assert_command_fails_with(
        &["run", "run.toml", "--out", "empty", "--resume"],
        dir.path(),
        &["holds no run to continue"],
    );
    run_to_end(dir.path(), "out", &[]);
    std::fs::write(
        dir.path().join("run.toml"),
        short.replace("seed = 11", "seed = 12"),
    )
    .unwrap();
    assert_command_fails_with(
        &["run", "run.toml", "--out", "out", "--resume"],
        dir.path(),
        &["started with other settings"],
    );
    let both = common::sgmcmc(
        &["run", "run.toml", "--out", "out", "--resume", "--overwrite"],
        dir.path(),
    );
    assert!(!both.status.success());
    assert!(String::from_utf8_lossy(&both.stderr).contains("cannot be used with"));
}

/// MAMBA over 27 arms (η = 3: rounds of 27, 9 and 3 arms), budgets in gradient evaluations so
/// that every run picks the same winner with the same draws.
const TUNE_RUN: &str = "[data]\nsynthetic = { rows = 20_000, dim = 5, seed = 7 }\n\n\
                        [model]\nkind = \"logistic\"\n\n\
                        [sampler]\nkind = \"sgld\"\nstep_size = 7.7e-4\n\n\
                        [gradient]\nbatch_size = \"1%\"\n\n\
                        [run]\nseed = 3\nchains = 2\niterations = 300\n\n\
                        [tune]\nbudget_gradient_evaluations = 3e7\nthin = 5\n\
                        score_subsample = 500\nthreads = 2\n\n\
                        [tune.grid]\nlog10_step_size = { from = -3, to = -7, by = 0.5 }\n\
                        batch_size = [\"1%\", \"10%\", \"100%\"]\n";

/// `tune.json` without what is timed (every `…seconds` key) and the count of resumed rounds.
fn untimed(value: &serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => serde_json::Value::Object(
            map.iter()
                .filter(|(k, _)| !k.ends_with("seconds") && *k != "resumed_rounds")
                .map(|(k, v)| (k.clone(), untimed(v)))
                .collect(),
        ),
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.iter().map(untimed).collect())
        }
        other => other.clone(),
    }
}

fn tune_json(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("tune.json")).unwrap();
    untimed(&serde_json::from_str(&text).unwrap())
}

/// `sgmcmc tune --resume` (issue 25): a tuning run killed (kill -9) after its first round
/// continues from the progress saved then, runs only the later rounds, and ends with the
/// uninterrupted run's rounds, winner and winner's draws (bit for bit); a sampling run's
/// directory is not a tuning run's.
#[cfg(unix)]
#[test]
fn a_tuning_run_killed_after_a_round_resumes_to_the_uninterrupted_outcome() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("run.toml"), TUNE_RUN).unwrap();
    let tune = |out: &str, extra: &[&str]| succeeds(dir.path(), ["tune", "run.toml"], out, extra);
    tune("whole", &[]);
    let whole = tune_json(&dir.path().join("whole"));
    let whole_draws = draw_bits(&dir.path().join("whole/winner_draws.zarr"));

    let mut child = sgmcmc(dir.path())
        .args(["tune", "run.toml", "--out", "killed"])
        .spawn()
        .unwrap();
    let progress = dir.path().join("killed/checkpoints/tune.state");
    while !progress.exists() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before its first round's progress was seen"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(
        !dir.path().join("killed/tune.json").exists(),
        "killed before the end"
    );

    let out = tune("killed", &["--resume"]);
    assert!(out.contains("continuing the tuning run"), "{out}");
    // The first round was not run again (a resume from scratch also ends as `whole`).
    let text = std::fs::read_to_string(dir.path().join("killed/tune.json")).unwrap();
    let report: serde_json::Value = serde_json::from_str(&text).unwrap();
    let resumed = report["outcome"]["resumed_rounds"].as_u64().unwrap();
    assert!((1..3).contains(&resumed), "{resumed} rounds resumed");
    assert!(
        out.contains(&format!("continued after {resumed} of 3 rounds")),
        "{out}"
    );
    assert_eq!(tune_json(&dir.path().join("killed")), whole);
    assert!(draw_bits(&dir.path().join("killed/winner_draws.zarr")) == whole_draws);
    // Resuming the finished run runs no round and writes the same outcome.
    tune("killed", &["--resume"]);
    assert_eq!(tune_json(&dir.path().join("killed")), whole);

    assert_command_fails_with(
        &["run", "run.toml", "--out", "killed", "--resume"],
        dir.path(),
        &["holds a run of `sgmcmc tune`, not of `sgmcmc run`"],
    );
}

/// A NUTS reference of a few seconds: four chains on two threads, so that some finish while
/// others still run.
const REFERENCE_RUN: &str = "[data]\nsynthetic = { rows = 20_000, dim = 5, seed = 3 }\n\n\
                             [model]\nkind = \"logistic\"\nprior_variance = 10.0\n\n\
                             [run]\nseed = 7\n";

/// `sgmcmc reference --resume` (issue 25): a reference run killed (kill -9) once a chain has
/// finished runs only the unfinished chains again and writes the uninterrupted run's reference
/// file, byte for byte; its finished chains (FILE.partial) are refused without --resume, and
/// deleted once the file is complete.
#[cfg(unix)]
#[test]
fn a_reference_run_killed_after_a_chain_resumes_to_the_uninterrupted_reference() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("run.toml"), REFERENCE_RUN).unwrap();
    let options = ["--chains", "4", "--warmup", "300", "--draws", "300"];
    let reference = |out: &str, extra: &[&str]| {
        let extra = [&options[..], extra].concat();
        succeeds(dir.path(), ["reference", "run.toml"], out, &extra)
    };
    reference("whole.json", &[]);
    let whole = std::fs::read(dir.path().join("whole.json")).unwrap();
    assert!(!dir.path().join("whole.json.partial").exists());

    let mut child = sgmcmc(dir.path())
        .args(["reference", "run.toml", "--out", "killed.json"])
        .args(options)
        .spawn()
        .unwrap();
    let chains = dir.path().join("killed.json.partial/checkpoints");
    let finished = || {
        std::fs::read_dir(&chains).map_or(0, |entries| {
            entries
                .filter(|e| {
                    let name = e.as_ref().unwrap().file_name();
                    name.to_string_lossy().starts_with("chain-")
                })
                .count()
        })
    };
    while finished() == 0 {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before a finished chain was seen"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let kept = finished();
    assert!((1..4).contains(&kept), "{kept} chains finished at the kill");
    assert!(
        !dir.path().join("killed.json").exists(),
        "killed before the end"
    );

    assert_command_fails_with(
        &["reference", "run.toml", "--out", "killed.json"],
        dir.path(),
        &["killed.json.partial already holds a run", "--resume"],
    );
    assert_command_fails_with(
        &[
            "reference",
            "run.toml",
            "--out",
            "killed.json",
            "--draws",
            "200",
            "--resume",
        ],
        dir.path(),
        &["was started with other options"],
    );
    let out = reference("killed.json", &["--resume"]);
    assert!(
        out.contains(&format!("{kept} of 4 chains finished earlier")),
        "{out}"
    );
    assert!(
        std::fs::read(dir.path().join("killed.json")).unwrap() == whole,
        "the resumed reference differs from the uninterrupted one"
    );
    assert!(!dir.path().join("killed.json.partial").exists());
    assert_command_fails_with(
        &["reference", "run.toml", "--out", "killed.json", "--resume"],
        dir.path(),
        &["no interrupted reference run to continue"],
    );
}

/// A coreset run of a few seconds, checkpointed five times a second.
const CORESET_RUN: &str = "[data]\nsynthetic = { rows = 5000, dim = 5, generator = \"gaussian_location\", seed = 3 }\n\n\
                           [model]\nkind = \"gaussian\"\nprior_variance = 1.0\n\n\
                           [coreset]\nseed = 4\nsize = 200\nchains = 3\niterations = 20000\ndraws = 3000\n\
                           checkpoint_seconds = 0.2\noptimiser = { kind = \"hot_dog\" }\nkernel = { kind = \"slice\" }\n";

/// `sgmcmc coreset --resume` (issue 25): a coreset run killed (kill -9) in the middle continues
/// from its last checkpoint of the whole joint state and ends with the uninterrupted run's
/// weights, metric, hot start and draws, bit for bit; other settings are refused.
#[cfg(unix)]
#[test]
fn a_coreset_run_killed_in_the_middle_resumes_to_the_uninterrupted_run() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("coreset.toml"), CORESET_RUN).unwrap();
    let coreset =
        |out: &str, extra: &[&str]| succeeds(dir.path(), ["coreset", "coreset.toml"], out, extra);
    let report = |out: &str| -> serde_json::Value {
        let text = std::fs::read_to_string(dir.path().join(out).join("coreset.json")).unwrap();
        untimed(&serde_json::from_str(&text).unwrap())
    };
    coreset("whole", &[]);

    let mut child = sgmcmc(dir.path())
        .args(["coreset", "coreset.toml", "--out", "killed"])
        .spawn()
        .unwrap();
    let state = dir.path().join("killed/checkpoints/coreset.state");
    // Killed after its second checkpoint at least (well into the run).
    let mut seen = 0;
    let mut modified = None;
    while seen < 2 {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before two checkpoints were seen"
        );
        if let Ok(m) = std::fs::metadata(&state).and_then(|m| m.modified())
            && modified != Some(m)
        {
            modified = Some(m);
            seen += 1;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(
        !dir.path().join("killed/coreset.json").exists(),
        "killed before the end"
    );
    std::fs::write(
        dir.path().join("other.toml"),
        CORESET_RUN.replace("seed = 4", "seed = 5"),
    )
    .unwrap();
    assert_command_fails_with(
        &["coreset", "other.toml", "--out", "killed", "--resume"],
        dir.path(),
        &["was started with other settings"],
    );
    let out = coreset("killed", &["--resume"]);
    assert!(out.contains("continued the coreset run"), "{out}");
    assert_eq!(report("killed"), report("whole"));
    assert!(
        draw_bits(&dir.path().join("killed/draws.zarr"))
            == draw_bits(&dir.path().join("whole/draws.zarr")),
        "the resumed draws differ"
    );
}
