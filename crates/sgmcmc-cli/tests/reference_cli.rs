//! `sgmcmc reference` end to end (moved with the binary from the core's tests/reference.rs).

use crate::common;

use common::sgmcmc;

use sgmcmc::reference::ReferenceMoments;

const TINY_CONFIG: &str = "[data]\nsynthetic = { rows = 2000, dim = 3, seed = 5 }\n\n\
    [model]\nkind = \"logistic\"\n\n[sampler]\nkind = \"sgld\"\nstep_size = 1e-4\n\n[run]\nseed = 2\n";

/// (4) `sgmcmc reference` on a tiny config: table on stdout, a loadable reference file with the
/// requested chains and draws, the run-file seed used by default (so two runs agree), and bad
/// input as one-line errors.
#[test]
fn cli_reference_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("run.toml"), TINY_CONFIG).unwrap();
    let args = [
        "reference",
        "run.toml",
        "--out",
        "ref.json",
        "--chains",
        "2",
        "--warmup",
        "200",
        "--draws",
        "150",
    ];
    let out = sgmcmc(&args, dir.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for needle in [
        "beta[0]",
        "beta[2]",
        "ess_bulk",
        "r_hat",
        "laplace_sd",
        "reference: ref.json",
    ] {
        assert!(stdout.contains(needle), "stdout lacks {needle}: {stdout}");
    }
    let m = ReferenceMoments::load(&dir.path().join("ref.json")).unwrap();
    assert_eq!((m.chains, m.draws_per_chain, m.dim()), (2, 150, 3));
    assert_eq!(m.parameter_names, ["beta[0]", "beta[1]", "beta[2]"]);
    assert!(m.method.contains("seed 2"), "{}", m.method);

    let mut args2 = args;
    args2[3] = "ref2.json";
    assert!(sgmcmc(&args2, dir.path()).status.success());
    let m2 = ReferenceMoments::load(&dir.path().join("ref2.json")).unwrap();
    assert_eq!(m, m2, "same seed, same reference");

    for (bad, needle) in [
        (vec!["reference", "missing.toml"], "missing.toml"),
        (
            vec!["reference", "run.toml", "--chains", "0"],
            "chains must be at least 1",
        ),
        (
            vec!["reference", "run.toml", "--out", "no/such/dir/ref.json"],
            "no/such/dir/ref.json",
        ),
    ] {
        let out = sgmcmc(&bad, dir.path());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{bad:?} succeeded");
        assert!(!stderr.contains("panicked"), "{stderr}");
        let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error")).collect();
        assert_eq!(lines.len(), 1, "{stderr}");
        assert!(lines[0].contains(needle), "{stderr}");
    }
}

/// Ctrl-C during `sgmcmc reference` (issue 25): the chains stop, the reference is written from
/// the draws made so far (each chain cut to the shortest, said in its method), and the exit
/// status says the run was interrupted. Before, the handler was not installed and the process
/// died with nothing written.
#[cfg(unix)]
#[test]
fn ctrl_c_during_reference_keeps_the_draws_so_far() {
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let config = TINY_CONFIG.replace("rows = 2000", "rows = 20000");
    std::fs::write(dir.path().join("run.toml"), config).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_sgmcmc"))
        .args([
            "reference",
            "run.toml",
            "--out",
            "ref.json",
            "--chains",
            "2",
        ])
        .args(["--warmup", "100", "--draws", "10000000"])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2500));
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "an interrupted reference exits non-zero"
    );
    assert!(stderr.contains("interrupted"), "{stderr}");
    let m = ReferenceMoments::load(&dir.path().join("ref.json")).unwrap();
    assert!(
        m.draws_per_chain > 0 && m.draws_per_chain < 10_000_000,
        "{}",
        m.draws_per_chain
    );
    assert!(m.method.contains("INTERRUPTED"), "{}", m.method);
    assert!(m.mean.iter().chain(&m.sd).all(|v| v.is_finite()));
}
