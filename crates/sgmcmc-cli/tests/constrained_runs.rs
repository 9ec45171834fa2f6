//! Run files with per-group priors and constrained parameters (issue 27): a linear regression
//! whose σ has a half-Cauchy prior and a two-component mixture with ordered means run end to
//! end; the store and the summary hold the constrained values (σ, not log σ; μ₁ < μ₂), under
//! the names the user thinks in; bad prior tables give one-line errors.
//!
//! Break-once check: the store written without the `Constrained` sink (log σ stored) fails
//! `a_linear_regression_reports_sigma` at "stored sigma"; restored.

use crate::common;

use common::{assert_fails_with, normals, sgmcmc};
use sgmcmc::io::zarr_read::{read_draws, read_unconstrained};
use std::path::Path;

fn summary_means(dir: &Path) -> Vec<(String, f64)> {
    let text = std::fs::read_to_string(dir.join("out/summary.json")).expect("summary.json");
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    json["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_string(),
                p["mean"].as_f64().unwrap(),
            )
        })
        .collect()
}

fn run(dir: &Path) {
    let out = sgmcmc(&["run", "run.toml", "--out", "out"], dir);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

const LINEAR_MODEL: &str = r#"[model]
kind = "linear"
intercept = true

[model.priors]
coefficients = { kind = "flat" }
intercept = { kind = "normal", location = 0, scale = 10 }
sigma = { kind = "half_cauchy", scale = 2.5 }
"#;

const FULL_BATCH_SGLD: &str = r#"[sampler]
kind = "sgld"
step_size = 2e-6

[gradient]
batch_size = 1.0

[run]
iterations = 6000
burn_in = 1000
chains = 2
init = "map"
seed = 3
bias_check = false
"#;

/// Writes `data.csv` (y = 1 + 2x + N(0, 0.5²), N = 2,000) and `run.toml` (the linear model
/// with σ under a half-Cauchy prior, full-batch SGLD) into `dir`.
fn write_linear_run(dir: &Path) {
    let n = 2000;
    let noise = normals(5, 0, n);
    let mut csv = String::from("x,y\n");
    for (i, e) in noise.iter().enumerate() {
        let x = (i % 97) as f64 / 48.0 - 1.0;
        csv += &format!("{x},{}\n", 1.0 + 2.0 * x + 0.5 * e);
    }
    std::fs::write(dir.join("data.csv"), csv).unwrap();
    let toml = format!(
        "[data]\ntable = \"data.csv\"\ntarget = \"y\"\n\n{LINEAR_MODEL}\n{FULL_BATCH_SGLD}"
    );
    std::fs::write(dir.join("run.toml"), toml).unwrap();
}

/// `sgmcmc reference` of that regression gives σ's moments on σ's scale, and a run's
/// `[evaluation]` against it compares σ with σ: small z and ξ. (Compared on θ's scale, log σ
/// ≈ −0.69 against σ ≈ 0.5 would give z in the thousands.)
#[test]
fn reference_moments_and_the_evaluation_are_on_sigmas_scale() {
    let dir = tempfile::tempdir().unwrap();
    write_linear_run(dir.path());
    let args = [
        "reference",
        "run.toml",
        "--out",
        "ref.json",
        "--chains",
        "2",
        "--warmup",
        "300",
        "--draws",
        "1000",
    ];
    let out = sgmcmc(&args, dir.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let moments = sgmcmc::reference::ReferenceMoments::load(&dir.path().join("ref.json")).unwrap();
    assert_eq!(moments.parameter_names, ["x", "intercept", "sigma"]);
    assert!(
        (moments.mean[2] - 0.5).abs() < 0.05,
        "sigma {}",
        moments.mean[2]
    );
    let toml = std::fs::read_to_string(dir.path().join("run.toml")).unwrap();
    let toml = format!("{toml}\n[evaluation]\nreference = \"ref.json\"\n");
    std::fs::write(dir.path().join("run.toml"), toml).unwrap();
    run(dir.path());
    let text = std::fs::read_to_string(dir.path().join("out/summary.json")).unwrap();
    let summary: serde_json::Value = serde_json::from_str(&text).unwrap();
    let r = &summary["evaluation"]["reference"];
    let (z, xi) = (
        r["mean_squared_z_score"].as_f64().unwrap(),
        r["relative_sd_error"].as_f64().unwrap(),
    );
    assert!(z < 0.5 && xi < 0.2, "z = {z}, xi = {xi}");
}

/// `sgmcmc ksd` on a store of σ draws scores them on θ (log σ), where the Stein identity
/// holds: the same KSD as the library's on the store's `unconstrained_posterior`. (Scored as if
/// σ were log σ, the draws would sit near log σ = 0.5, far out in the posterior's tail.)
#[test]
fn the_ksd_of_stored_sigmas_is_computed_on_theta() {
    let dir = tempfile::tempdir().unwrap();
    write_linear_run(dir.path());
    run(dir.path());
    let args = [
        "ksd",
        "out/draws.zarr",
        "--config",
        "run.toml",
        "--thin",
        "20",
        "--json",
        "ksd.json",
    ];
    let out = sgmcmc(&args, dir.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(dir.path().join("ksd.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let cli = json["report"]["ksd"]["ksd"].as_f64().unwrap();
    let theta = read_unconstrained(&dir.path().join("out/draws.zarr"), "theta").unwrap();
    let library = common::library_ksd(dir.path(), &theta.chains, 20);
    assert!((library - cli).abs() <= 1e-9 * cli, "{library} vs {cli}");
}

/// The posterior of σ is about 0.5 ± 0.008, of log σ about −0.69. The summary's σ and the
/// store's σ column are σ itself.
#[test]
fn a_linear_regression_reports_sigma() {
    let dir = tempfile::tempdir().unwrap();
    write_linear_run(dir.path());
    run(dir.path());
    let means = summary_means(dir.path());
    let names: Vec<&str> = means.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["x", "intercept", "sigma"]);
    let sigma = means[2].1;
    assert!((sigma - 0.5).abs() < 0.05, "sigma mean {sigma}");
    assert!((means[0].1 - 2.0).abs() < 0.1 && (means[1].1 - 1.0).abs() < 0.1);
    let stored = read_draws(&dir.path().join("out/draws.zarr"), "theta").unwrap();
    let pooled = stored.pooled();
    let column: Vec<f64> = pooled.iter().skip(2).step_by(3).copied().collect();
    assert!(
        column.iter().all(|s| (0.4..0.6).contains(s)),
        "stored sigma"
    );
    let stored_mean = column.iter().sum::<f64>() / column.len() as f64;
    assert!(
        (stored_mean - sigma).abs() < 1e-9,
        "{stored_mean} vs {sigma}"
    );
    // The same draws on the scale the sampler moved in: log sigma, the coefficients as they are.
    let theta = read_unconstrained(&dir.path().join("out/draws.zarr"), "theta").unwrap();
    assert_eq!(theta.parameter_names, stored.parameter_names);
    assert_eq!(theta.pooled().len(), pooled.len());
    for (t, c) in theta.pooled().chunks(3).zip(pooled.chunks(3)) {
        assert_eq!(&t[..2], &c[..2]);
        assert!((t[2] - c[2].ln()).abs() < 1e-12, "{} vs ln {}", t[2], c[2]);
    }
}

/// 1,000 points from 0.3·N(−1, 0.5²) + 0.7·N(2, 1): the means are reported ordered, the sds
/// positive and the weight in (0, 1), near the truth.
#[test]
fn a_normal_mixture_reports_ordered_means() {
    let dir = tempfile::tempdir().unwrap();
    let z = normals(8, 0, 1000);
    let mut csv = String::from("y\n");
    for (i, e) in z.iter().enumerate() {
        let y = if i % 10 < 3 { -1.0 + 0.5 * e } else { 2.0 + e };
        csv += &format!("{y}\n");
    }
    std::fs::write(dir.path().join("data.csv"), csv).unwrap();
    let toml = format!(
        "[data]\ntable = \"data.csv\"\n\n[model]\nkind = \"normal_mixture\"\n\n{}",
        FULL_BATCH_SGLD.replace("2e-6", "2e-5")
    );
    std::fs::write(dir.path().join("run.toml"), toml).unwrap();
    run(dir.path());
    let means = summary_means(dir.path());
    let names: Vec<&str> = means.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["mu[1]", "mu[2]", "sigma[1]", "sigma[2]", "theta"]);
    let want = [-1.0, 2.0, 0.5, 1.0, 0.3];
    for ((name, got), want) in means.iter().zip(want) {
        assert!((got - want).abs() < 0.15, "{name}: {got} vs {want}");
    }
}

/// A prior on the wrong support, two ways of treating the noise, an intercept prior without
/// an intercept, and an unknown prior kind are named.
#[test]
fn bad_prior_tables_are_named() {
    let cases: [(&str, &[&str]); 7] = [
        (
            "kind = \"linear\"\n[model.priors]\ncoefficients = { kind = \"half_normal\", scale = 1 }",
            &["priors.coefficients", "half_normal", "real line"],
        ),
        (
            "kind = \"linear\"\nnoise_variance = 0.5\n[model.priors]\nsigma = { kind = \"exponential\", rate = 1 }",
            &["noise_variance", "priors.sigma"],
        ),
        (
            "kind = \"linear\"\nintercept = false\n[model.priors]\nintercept = { kind = \"flat\" }",
            &["priors.intercept", "intercept = true"],
        ),
        (
            "kind = \"linear\"\n[model.priors]\nsigma = { kind = \"gamma\", shape = 2 }",
            &["gamma"],
        ),
        (
            "kind = \"logistic\"\n[model.priors]\nsigma = { kind = \"half_normal\", scale = 1 }",
            &["priors.sigma", "logistic", "coefficients, intercept"],
        ),
        (
            "kind = \"logistic\"\nprior = \"cauchy\"\n[model.priors]\ncoefficients = { kind = \"flat\" }",
            &["cauchy", "priors.coefficients", "give one"],
        ),
        (
            "kind = \"poisson\"\n[model.priors]\ncoefficients = { kind = \"beta\", alpha = 2, beta = 2 }",
            &["priors.coefficients", "beta"],
        ),
    ];
    for (model, needles) in cases {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("data.csv"), "x,y\n0,1\n1,0\n2,1\n").unwrap();
        let toml = format!(
            "[data]\ntable = \"data.csv\"\ntarget = \"y\"\n\n[model]\n{model}\n\n{FULL_BATCH_SGLD}"
        );
        std::fs::write(dir.path().join("run.toml"), toml).unwrap();
        assert_fails_with(dir.path(), needles);
    }
}

/// `[model.priors]` on a logistic and a Poisson regression: Student-t(3, 0, 2.5) coefficients
/// and a N(1, 2²) intercept give the closed-form log prior (differences between two points, so
/// that normalising constants cancel).
#[test]
fn logistic_and_poisson_regressions_take_priors_per_group() {
    use sgmcmc::data::{Dataset, Features, Matrix};
    let t = |x: f64| -2.0 * (1.0 + (x / 2.5).powi(2) / 3.0).ln();
    let normal = |x: f64| -0.5 * ((x - 1.0) / 2.0).powi(2);
    let (a, b) = ([0.3, -1.2, 0.7], [2.0, 0.1, -0.4]);
    let want = t(a[0]) + t(a[1]) + normal(a[2]) - t(b[0]) - t(b[1]) - normal(b[2]);
    for kind in ["logistic", "poisson"] {
        let toml = format!(
            "[data]\ntable = \"unused.csv\"\ntarget = \"y\"\n\n[model]\nkind = \"{kind}\"\n\
             intercept = true\n\n[model.priors]\n\
             coefficients = {{ kind = \"student_t\", df = 3, location = 0, scale = 2.5 }}\n\
             intercept = {{ kind = \"normal\", location = 1, scale = 2 }}\n"
        );
        let cfg = sgmcmc_runfile::config::Config::from_toml(&toml, "run.toml").unwrap();
        let data = Dataset {
            features: Features::F64(Matrix::from_vec(vec![0.5, 1.0, -1.0, 0.0], 2, 2).unwrap()),
            targets: Some(vec![1.0, 0.0]),
            feature_names: Vec::new(),
            features_source: "test".into(),
            targets_source: None,
        };
        let model = sgmcmc_runfile::pipeline::build_model(&cfg.model, data).unwrap();
        let got = model.log_prior(&a) - model.log_prior(&b);
        assert!((got - want).abs() < 1e-12, "{kind}: {got} vs {want}");
        assert!(
            cfg.to_toml().unwrap().contains("student_t"),
            "{kind}: the priors are written back"
        );
    }
}
