//! Bit-for-bit fixture of the draws that the `sgmcmc` commands produce at fixed seeds: every
//! sampler × gradient estimator on a small logistic problem (plus schedules and compatibility
//! switches), minibatch Metropolis–Hastings chains, a MAMBA run with a gradient-evaluation
//! budget (every round's ranking, the winner and its draws) and coreset MCMC runs (final weights
//! and draws). It was recorded before the workspace restructuring (issue 21) so that any change
//! to what users get shows up as a failed case here.
//!
//! Each case stores an FNV-1a hash of the IEEE-754 bits of everything it produced, in order,
//! with its first and last values for diagnosis. Re-record (only when a change of results is
//! intended and explained) with `SGMCMC_RECORD_FIXTURE=1 cargo test --release --test
//! fixture_draws`.
//!
//! Machine dependence: cases marked `simd` go through code whose floating-point order may
//! depend on the vector instructions of the machine (faer's products and factorisations, the
//! KSD's dispatched kernels). They are compared bit for bit when the machine has the vector
//! level recorded with the fixture, and skipped (with a note on stderr) otherwise; every other
//! case is compared on any machine.

use crate::common;

use common::sgmcmc;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The fixture file.
fn fixture_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/draws.json")
}

/// The vector level that decides the floating-point order of dispatched kernels.
fn simd_level() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return "x86_64-avx512f";
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            return "x86_64-avx2";
        }
        "x86_64"
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        std::env::consts::ARCH
    }
}

/// FNV-1a (64 bit) over the bits of `values`, in order.
fn fnv1a(values: &[f64]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for v in values {
        for b in v.to_bits().to_le_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

/// What one case produced: its values in a fixed order.
fn record(values: &[f64], simd: bool) -> Value {
    json!({
        "hash": fnv1a(values),
        "values": values.len(),
        "first": values.first(),
        "last": values.last(),
        "simd": simd,
    })
}

/// Every chain's draws of a store, chain after chain.
fn store_values(path: &Path) -> Vec<f64> {
    sgmcmc::io::read_draws(path, "theta")
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
        .pooled()
}

/// Runs `sgmcmc ARGS` in `dir`, asserting success.
fn run_ok(args: &[&str], dir: &Path) {
    let out = sgmcmc(args, dir);
    assert!(
        out.status.success(),
        "sgmcmc {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

const DATA: &str = "[data]\nsynthetic = { rows = 2000, dim = 4, seed = 7 }\n\n[model]\nkind = \"logistic\"\nprior_variance = 10.0\n";
const RUN: &str = "[run]\nseed = 11\nchains = 2\niterations = 200\nburn_in = 20\nthin = 2\n";

/// The samplers, each as its `[sampler]` table body, with whether it runs dispatched vector code.
const SAMPLERS: &[(&str, &str, bool)] = &[
    ("sgld", "kind = \"sgld\"\nstep_size = 1e-4", false),
    ("psgld", "kind = \"psgld\"\nstep_size = 2e-4", false),
    (
        "sghmc",
        "kind = \"sghmc\"\nstep_size = 1e-4\ninner_steps = 3\nfriction = 0.1",
        false,
    ),
    (
        "sgnht",
        "kind = \"sgnht\"\nstep_size = 1e-4\ndiffusion = 0.1",
        false,
    ),
    (
        "baoab",
        "kind = \"baoab\"\nstep_size = 0.01\nfriction = 1.0",
        false,
    ),
    ("badodab", "kind = \"badodab\"\nstep_size = 0.01", false),
    (
        "ccadl",
        "kind = \"ccadl\"\nstep_size = 0.01\ndiffusion = 1.0",
        true,
    ),
];

const ESTIMATORS: &[(&str, &str)] = &[
    ("minibatch", "estimator = \"minibatch\"\nbatch_size = 50"),
    (
        "control_variates",
        "estimator = \"control_variates\"\nbatch_size = 50",
    ),
    (
        "svrg",
        "estimator = \"svrg\"\nbatch_size = 50\nupdate_rate = 20",
    ),
    ("full", "estimator = \"full\""),
];

/// Further `sgmcmc run` cases: schedules, unit conventions, compatibility switches, initial
/// points, minibatch MH.
const EXTRA_RUNS: &[(&str, &str, bool)] = &[
    (
        "sgld-polynomial-schedule",
        "[sampler]\nkind = \"sgld\"\nwelling_teh_step = 2e-4\nschedule = { kind = \"polynomial\", b = 10, gamma = 0.55 }\n\n[gradient]\nbatch_size = \"2.5%\"\nwith_replacement = true",
        false,
    ),
    (
        "sgld-cyclical-prior-init",
        "[sampler]\nkind = \"sgld\"\nstep_size = 1e-4\ntemperature = 2.0\nschedule = { kind = \"cyclical\", cycles = 3 }\n\n[gradient]\nbatch_size = 0.05",
        false,
    ),
    (
        "psgld-catalogue-dt",
        "[sampler]\nkind = \"psgld\"\ncatalogue_dt = 2e-3\ndecay = 0.9\n\n[gradient]\nbatch_size = 100",
        false,
    ),
    (
        "sghmc-compatibility",
        "[sampler]\nkind = \"sghmc\"\nstep_size = 1e-4\ninner_steps = 2\ngradient_before_position_update = true\nno_momentum_resampling = true\nshared_minibatch = true\n\n[gradient]\nbatch_size = 50",
        false,
    ),
    (
        "baoab-compatibility",
        "[sampler]\nkind = \"baoab\"\nstep_size = 0.01\nfriction = 2.0\nzero_initial_momentum = true\nnoise_std_scaled_by_tau = true\ntemperature = 1.5\n\n[gradient]\nestimator = \"control_variates\"\nbatch_size = 40",
        false,
    ),
    (
        "ccadl-diagonal-extensions",
        "[sampler]\nkind = \"ccadl\"\nstep_size = 0.01\ndiffusion = 1.0\ncovariance = \"diagonal\"\nfinite_population = true\nkappa = 0.1\nexponential_friction = true\n\n[gradient]\nbatch_size = 50",
        false,
    ),
    (
        "mh-barker-random-walk",
        "[sampler]\nkind = \"mh\"\nproposal = { kind = \"random_walk\", sd = 0.02 }\ntest = \"barker\"\nbatch_size = 100\ntemperature = 20.0\n\n[gradient]\nbatch_size = 100",
        false,
    ),
    (
        "mh-austerity-langevin",
        "[sampler]\nkind = \"mh\"\nproposal = { kind = \"langevin\", step_size = 1e-4 }\ntest = \"austerity\"\nbatch_size = 100\n\n[gradient]\nestimator = \"control_variates\"\nbatch_size = 100",
        false,
    ),
    (
        "mh-exact-metropolis",
        "[sampler]\nkind = \"mh\"\nproposal = { kind = \"random_walk\", sd = 0.02 }\ntest = \"exact_metropolis\"\n\n[gradient]\nbatch_size = 100",
        false,
    ),
];

/// MAMBA (KSD on control-variate scores) over 9 SGLD-CV arms with a gradient-evaluation budget.
const TUNE: &str = "[data]\nsynthetic = { rows = 3000, dim = 4, seed = 5, generator = \"mamba\" }\n\n[model]\nkind = \"logistic\"\nprior_variance = 10.0\n\n[sampler]\nkind = \"sgld\"\nstep_size = 1e-5\n\n[gradient]\nestimator = \"control_variates\"\n\n[run]\nseed = 3\nchains = 2\niterations = 100\n\n[tune]\nbudget_gradient_evaluations = 200000\neta = 3\nmetric = \"ksd\"\nthin = 5\nscores = \"control_variates\"\nscore_subsample = 200\n\n[tune.grid]\nlog10_step_size = [-3.0, -4.0, -5.0]\nbatch_size = [\"10%\", \"5%\", \"2%\"]\n";

/// Coreset MCMC: the exact Gaussian kernel with Hot DoG, and the slice kernel on logistic
/// regression with ADAM.
const CORESETS: &[(&str, &str, bool)] = &[
    (
        "coreset-gaussian-hot-dog",
        "[data]\nsynthetic = { rows = 2000, dim = 5, generator = \"gaussian_location\", seed = 2024 }\n\n[model]\nkind = \"gaussian\"\nprior_variance = 1.0\n\n[coreset]\nseed = 1\nsize = 50\niterations = 600\ndraws = 200\noptimiser = { kind = \"hot_dog\", r = 1e-3 }\nkernel = { kind = \"exact_gaussian\", beta = 0.8 }\n",
        false,
    ),
    (
        "coreset-logistic-slice-sampler",
        "[data]\nsynthetic = { rows = 2000, dim = 3, seed = 9 }\n\n[model]\nkind = \"logistic\"\nprior_variance = 10.0\n\n[coreset]\nseed = 2\nsize = 40\niterations = 300\ndraws = 100\noptimiser = { kind = \"hot_dog\", r = 1e-3 }\nkernel = { kind = \"slice\" }\n",
        false,
    ),
];

/// Runs every case and returns its record.
fn produce(dir: &Path) -> BTreeMap<String, Value> {
    let mut cases = BTreeMap::new();
    let mut run_case = |name: &str, toml: String, simd: bool| {
        let file = format!("{name}.toml");
        std::fs::write(dir.join(&file), toml).unwrap();
        let out = format!("out-{name}");
        run_ok(&["run", &file, "--out", &out], dir);
        let values = store_values(&dir.join(&out).join("draws.zarr"));
        cases.insert(name.to_string(), record(&values, simd));
    };
    for (s, sampler, simd) in SAMPLERS {
        for (e, gradient) in ESTIMATORS {
            let toml = format!("{DATA}\n[sampler]\n{sampler}\n\n[gradient]\n{gradient}\n\n{RUN}");
            run_case(&format!("{s}-{e}"), toml, *simd);
        }
    }
    for (name, body, simd) in EXTRA_RUNS {
        let init = if name.contains("prior-init") {
            "init = \"prior\"\n"
        } else {
            ""
        };
        run_case(name, format!("{DATA}\n{body}\n\n{RUN}{init}"), *simd);
    }

    // MAMBA: the ranking of every round (arm, metric), the winner and its draws.
    std::fs::write(dir.join("tune.toml"), TUNE).unwrap();
    run_ok(&["tune", "tune.toml", "--out", "out-tune"], dir);
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("out-tune/tune.json")).unwrap())
            .unwrap();
    let outcome = &report["outcome"];
    let mut ranking_values = Vec::new();
    let mut rounds = Vec::new();
    for round in outcome["rounds"].as_array().expect("rounds") {
        let mut ranked = Vec::new();
        for arm in round.as_array().unwrap() {
            let (a, m) = (
                arm["arm"].as_u64().unwrap(),
                arm["metric"].as_f64().unwrap(),
            );
            let evals = arm["gradient_evaluations"].as_u64().unwrap();
            ranking_values.extend([a as f64, m, evals as f64]);
            ranked.push(json!([a, m]));
        }
        rounds.push(Value::Array(ranked));
    }
    let winner = outcome["winner"].as_u64().unwrap();
    let mut tune = record(&ranking_values, true);
    tune["rounds"] = Value::Array(rounds);
    tune["winner"] = json!(winner);
    tune["winner_settings"] = report["winner_settings"].clone();
    cases.insert("mamba-ranking".into(), tune);
    let winner_draws = store_values(&dir.join("out-tune/winner_draws.zarr"));
    cases.insert("mamba-winner-draws".into(), record(&winner_draws, true));

    // Coreset MCMC: the final weights and the draws.
    for (name, toml, simd) in CORESETS {
        let file = format!("{name}.toml");
        std::fs::write(dir.join(&file), toml).unwrap();
        let out = format!("out-{name}");
        run_ok(&["coreset", &file, "--out", &out], dir);
        let report: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join(&out).join("coreset.json")).unwrap(),
        )
        .unwrap();
        let weights: Vec<f64> = report["weights"]
            .as_array()
            .expect("coreset.json has weights")
            .iter()
            .map(|w| w.as_f64().unwrap())
            .collect();
        cases.insert(format!("{name}-weights"), record(&weights, *simd));
        let draws = store_values(&dir.join(&out).join("draws.zarr"));
        cases.insert(format!("{name}-draws"), record(&draws, *simd));
    }
    cases
}

#[test]
fn commands_reproduce_the_recorded_draws_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let produced = produce(dir.path());
    let path = fixture_path();
    if std::env::var_os("SGMCMC_RECORD_FIXTURE").is_some() {
        let fixture = json!({
            "about": "draws of the sgmcmc commands at fixed seeds; see tests/fixture_draws.rs",
            "simd": simd_level(),
            "cases": produced,
        });
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(
            &path,
            serde_json::to_string_pretty(&fixture).unwrap() + "\n",
        )
        .unwrap();
        eprintln!("recorded {} cases in {}", produced.len(), path.display());
        return;
    }
    let fixture: Value = serde_json::from_str(
        &std::fs::read_to_string(&path).expect("tests/fixtures/draws.json exists"),
    )
    .unwrap();
    let same_simd = fixture["simd"].as_str() == Some(simd_level());
    let expected = fixture["cases"].as_object().expect("cases");
    let mut failures = Vec::new();
    let mut compared = 0;
    for (name, want) in expected {
        let Some(got) = produced.get(name) else {
            failures.push(format!("{name}: no longer produced"));
            continue;
        };
        if want["simd"].as_bool() == Some(true) && !same_simd {
            eprintln!(
                "{name}: recorded on {}, this machine is {}: not compared",
                fixture["simd"],
                simd_level()
            );
            continue;
        }
        compared += 1;
        if got["hash"] != want["hash"] || got["values"] != want["values"] {
            failures.push(format!(
                "{name}: {} values hashing to {}, recorded {} hashing to {} (first {} vs {}, last {} vs {})",
                got["values"],
                got["hash"],
                want["values"],
                want["hash"],
                got["first"],
                want["first"],
                got["last"],
                want["last"]
            ));
        }
    }
    for name in produced.keys().filter(|n| !expected.contains_key(*n)) {
        failures.push(format!("{name}: produced but not in the fixture"));
    }
    assert!(
        failures.is_empty(),
        "{} of {} compared cases differ from tests/fixtures/draws.json:\n{}",
        failures.len(),
        compared,
        failures.join("\n")
    );
    assert!(compared >= 30, "only {compared} cases compared");
}
