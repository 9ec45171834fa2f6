//! The coreset paper's regression models as run files through `sgmcmc run` (moved with the
//! binary from the core's tests/coreset_models.rs).

use crate::common;

use common::{NBA_HEADER, games, poisson_data, sgmcmc, write};
use sgmcmc::model::PoissonLink;
use std::path::Path;

const SAMPLER: &str = "[sampler]\nkind = \"sgld\"\nstep_size = 1e-4\n\n[gradient]\nbatch_size = 50\n\n\
                       [run]\niterations = 300\nchains = 2\ninit = \"map\"\n";

fn run_ok(dir: &Path) -> serde_json::Value {
    let out = sgmcmc(&["run", "run.toml", "--out", "out", "--overwrite"], dir);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(dir.join("out/summary.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// A synthetic Poisson table (softplus link) runs end to end; the posterior means recover the
/// generating coefficients. With N = 2000 the posterior sd of each coefficient is ≈ 0.02 (the
/// Fisher information ≈ N·E[σ²/λ·x²] with λ ≈ 2.5), so |mean − truth| < 0.15 is over 5 sd.
/// Break-once check: `PoissonLink::Softplus` mapped to the log link in `build_predictive_model`
/// moved the means away from the truth and failed here.
#[test]
fn poisson_run_file_through_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let w = [0.5, -0.4];
    let (x, y) = poisson_data(51, 2000, &w, 2.0, PoissonLink::Softplus);
    let mut csv = String::from("a,b,count\n");
    for (row, y) in x.chunks_exact(2).zip(&y) {
        csv += &format!("{},{},{}\n", row[0], row[1], y);
    }
    write(dir.path(), "table.csv", &csv);
    let toml = format!(
        "[data]\ntable = \"table.csv\"\ntarget = \"count\"\n\n[model]\nkind = \"poisson\"\n\
         link = \"softplus\"\nintercept = true\nprior_variance = 1\n\n{SAMPLER}"
    );
    write(dir.path(), "run.toml", &toml);
    let summary = run_ok(dir.path());
    let params = summary["parameters"].as_array().unwrap();
    let names: Vec<&str> = params.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["a", "b", "intercept"]);
    for (p, truth) in params.iter().zip([0.5, -0.4, 2.0]) {
        let m = p["mean"].as_f64().unwrap();
        assert!((m - truth).abs() < 0.15, "{}: {m} vs {truth}", p["name"]);
    }

    // A bad count names its row through the CLI.
    write(
        dir.path(),
        "table.csv",
        "a,b,count\n0.1,0.2,3\n0.3,0.4,-1\n",
    );
    common::assert_fails_with(dir.path(), &["row 2", "non-negative integer"]);
}

/// `nba_games` + `kind = "bradley_terry"`, and logistic with `prior = "cauchy"`, through the
/// CLI; the round trip of the new keys through serde; a misplaced `prior_scale` is an error.
/// Break-once check: accepting `prior_scale` with the normal prior made that run succeed.
#[test]
fn bradley_terry_and_cauchy_run_files_through_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let (x, y, _) = games(61, 300);
    let mut csv = format!("{NBA_HEADER}\n");
    for (row, y) in x.chunks_exact(2).zip(&y) {
        csv += &format!("d,0,{},{},100,{}\n", row[0], row[1], y);
    }
    write(dir.path(), "games.csv", &csv);
    let model = "[model]\nkind = \"bradley_terry\"\nscale = 1.0\nprior_variance = 1.0\n";
    write(
        dir.path(),
        "run.toml",
        &format!("[data]\nnba_games = \"games.csv\"\n\n{model}\n{SAMPLER}"),
    );
    let summary = run_ok(dir.path());
    let names: Vec<&str> = summary["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "team[7]",
            "team[42]",
            "team[99]",
            "team[1610612737]",
            "team[1610612760]"
        ]
    );

    let (x, y) = common::logistic_data(62, 300, &[1.0, -1.0], 0.0);
    let mut csv = String::from("a,b,y\n");
    for (row, y) in x.chunks_exact(2).zip(&y) {
        csv += &format!("{},{},{}\n", row[0], row[1], y);
    }
    write(dir.path(), "table.csv", &csv);
    let logistic = "[model]\nkind = \"logistic\"\nprior = \"cauchy\"\nprior_scale = 2.5\n";
    let text = format!("[data]\ntable = \"table.csv\"\ntarget = \"y\"\n\n{logistic}\n{SAMPLER}");
    write(dir.path(), "run.toml", &text);
    run_ok(dir.path());
    let cfg = sgmcmc_runfile::config::Config::from_toml(&text, "run.toml").unwrap();
    let back = sgmcmc_runfile::config::Config::from_toml(&cfg.to_toml().unwrap(), "x").unwrap();
    assert_eq!(back, cfg);

    let text = text.replace("prior = \"cauchy\"\n", "");
    write(dir.path(), "run.toml", &text);
    common::assert_fails_with(dir.path(), &["prior_scale", "cauchy"]);
    write(
        dir.path(),
        "run.toml",
        &text.replace("prior_scale = 2.5", "prior = \"laplace\""),
    );
    common::assert_fails_with(dir.path(), &["laplace"]);
}
