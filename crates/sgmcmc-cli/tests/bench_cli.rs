//! `sgmcmc bench --ksd` (moved with the binary from the core's tests/stein.rs).

/// `sgmcmc bench --ksd` runs (tiny blocks, small score data) and writes its JSON: every KSD
/// row equals the bench's direct double loop to 1e-12 and has positive times and FLOP rates.
#[test]
fn bench_ksd_smoke() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("ksd.json");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sgmcmc"))
        .args(["bench", "--ksd", "--seconds", "0.01", "--repeats", "1"])
        .args(["--rows", "20000", "--score-draws", "2", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = report["ksd"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    for row in rows {
        let rel = row["relative_difference_from_direct_loop"]
            .as_f64()
            .unwrap();
        assert!(rel < 1e-12, "{row}");
        assert!(row["seconds"].as_f64().unwrap() > 0.0);
        assert!(row["gflops_per_second"].as_f64().unwrap() > 0.0);
    }
    assert!(report["scores"]["seconds_per_draw"].as_f64().unwrap() > 0.0);
    assert!(report["gemm_peak_gflops_all_threads"].as_f64().unwrap() > 0.0);
}
