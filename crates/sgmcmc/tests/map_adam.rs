//! The MAP by Adam (reference §3.2, `[run] map_optimizer = "adam"`): it reaches the closed-form
//! mode of the Gaussian test model, lands within a small fraction of a posterior sd on
//! minibatches, is reproducible from the seed, and bad settings or a diverging run are clear
//! errors.

mod common;

use common::{features, normals};
use sgmcmc::config::{Config, MapOptimizer};
use sgmcmc::estimator::BatchSize;
use sgmcmc::model::GaussianModel;
use sgmcmc::optim::{AdamMapOptions, find_map_adam};
use sgmcmc::rng::stream;

const N: usize = 2_000;
const PRIOR_VARIANCE: f64 = 4.0;

/// The GTM of §2.0 (identity likelihood covariance), D = 3, and its data.
fn gtm() -> (GaussianModel, Vec<f64>) {
    let x: Vec<f64> = normals(23, 0, N * 3)
        .iter()
        .map(|v| 0.5 + 2.0 * v)
        .collect();
    let eye = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0];
    (
        GaussianModel::new(features(x.clone(), 3), &eye, PRIOR_VARIANCE).unwrap(),
        x,
    )
}

/// The GTM's mode: Σᵢxᵢ / (N + 1/σ₀²) per coordinate; its posterior sd is (N + 1/σ₀²)^(−1/2).
fn closed_form_map(x: &[f64]) -> Vec<f64> {
    let precision = N as f64 + 1.0 / PRIOR_VARIANCE;
    (0..3)
        .map(|j| x.iter().skip(j).step_by(3).sum::<f64>() / precision)
        .collect()
}

fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

#[test]
fn full_batch_adam_reaches_the_closed_form_map() {
    let (model, x) = gtm();
    let options = AdamMapOptions {
        learning_rate: 1e-2,
        batch: BatchSize::Count(N),
        iterations: 5_000,
    };
    let r = find_map_adam(&model, &[0.0; 3], &options, &mut stream(1, 0)).unwrap();
    let exact = closed_form_map(&x);
    let err = max_diff(&r.theta, &exact);
    assert!(err < 1e-4, "Adam {:?} vs closed form {exact:?}", r.theta);
    assert_eq!(r.iterations, 5_000);
    assert!(!r.converged);
    // Exact gradients: the reported gradient is the full-data one at the result.
    assert!(r.gradient_norm < 1.0, "{}", r.gradient_norm);
    assert_eq!(r.evaluations, 5_001);
}

#[test]
fn minibatch_adam_lands_inside_the_posterior_bulk() {
    let (model, x) = gtm();
    let sd = (N as f64 + 1.0 / PRIOR_VARIANCE).powf(-0.5);
    let exact = closed_form_map(&x);
    // With a constant learning rate and noisy gradients Adam does not settle at the mode: it
    // stops at a point inside the posterior bulk (measured: 2.1 sd for the library's defaults,
    // α = 1e-2 on 1 % batches; 0.74 sd for the authors' NN setting, α = 1e-3 on 10 %). A good
    // start for a sampler, not a precise mode; a wrong sign or scale would leave it far out.
    for (options, tolerance) in [
        (AdamMapOptions::default(), 3.0 * sd),
        (
            AdamMapOptions {
                learning_rate: 1e-3,
                batch: BatchSize::Fraction(0.1),
                iterations: 5_000,
            },
            3.0 * sd,
        ),
    ] {
        let r = find_map_adam(&model, &[0.0; 3], &options, &mut stream(2, 0)).unwrap();
        let err = max_diff(&r.theta, &exact);
        eprintln!("{options:?}: error {err:.5} = {:.3} sd", err / sd);
        assert!(
            err < tolerance,
            "{options:?}: Adam {:?} vs {exact:?} (sd {sd})",
            r.theta
        );
        assert_eq!(
            r.evaluations,
            (5_000 * options.batch.resolve(N).unwrap()).div_ceil(N) + 1
        );
    }
}

fn run_file(run: &str) -> Config {
    let text = format!(
        "[data]\nsynthetic = {{ rows = 500, dim = 3 }}\n[model]\nkind = \"logistic\"\n\
         [sampler]\nkind = \"sgld\"\nstep_size = 1e-4\n[run]\nseed = 7\ninit = \"map\"\n{run}"
    );
    Config::from_toml(&text, "run.toml").unwrap()
}

fn run_map(run: &str) -> Result<sgmcmc::optim::MapResult, String> {
    let cfg = run_file(run);
    let prepared = sgmcmc::pipeline::prepare(&cfg).map_err(|e| e.to_string())?;
    sgmcmc::pipeline::find_run_map(&cfg, prepared.model()).map_err(|e| e.to_string())
}

#[test]
fn the_run_file_selects_adam_and_its_stream_follows_the_seed() {
    let cfg = run_file("map_optimizer = \"adam\"\nmap_iterations = 300\n");
    assert_eq!(cfg.run.map_optimizer, MapOptimizer::Adam);
    let a =
        run_map("map_optimizer = \"adam\"\nmap_iterations = 300\nmap_batch_size = 20\n").unwrap();
    let b =
        run_map("map_optimizer = \"adam\"\nmap_iterations = 300\nmap_batch_size = 20\n").unwrap();
    assert_eq!(a.theta, b.theta, "same seed, same MAP");
    assert_eq!(a.iterations, 300);
    let other_seed = {
        let text = "map_optimizer = \"adam\"\nmap_iterations = 300\nmap_batch_size = 20\n";
        let mut cfg = run_file(text);
        cfg.run.seed = 8;
        let prepared = sgmcmc::pipeline::prepare(&cfg).unwrap();
        sgmcmc::pipeline::find_run_map(&cfg, prepared.model()).unwrap()
    };
    assert_ne!(a.theta, other_seed.theta, "the minibatches follow the seed");
    // Adam's default length is 5,000 steps; L-BFGS (the default optimiser) converges here.
    assert_eq!(
        run_map("map_optimizer = \"adam\"\n").unwrap().iterations,
        5_000
    );
    let lbfgs = run_map("").unwrap();
    assert!(lbfgs.converged);
    // Adam's result is inside the posterior bulk: a posterior draw sits on average D/2 below the
    // mode in log density (a χ²_D/2 gap under the Laplace approximation); Adam must be within D.
    let adam = run_map("map_optimizer = \"adam\"\n").unwrap();
    let dim = lbfgs.theta.len() as f64;
    let gap = lbfgs.log_posterior - adam.log_posterior;
    assert!(
        (0.0..dim).contains(&gap),
        "{} vs {}",
        lbfgs.log_posterior,
        adam.log_posterior
    );
}

#[test]
fn bad_map_settings_are_errors_that_name_the_key() {
    let cases = [
        (
            "map_learning_rate = 0.1\n",
            "map_learning_rate is an Adam setting",
        ),
        (
            "map_batch_size = \"5%\"\n",
            "map_batch_size is an Adam setting",
        ),
        ("map_iterations = 0\n", "map_iterations must be at least 1"),
        (
            "map_optimizer = \"adam\"\nmap_learning_rate = 0.0\n",
            "map_learning_rate must be finite and > 0",
        ),
        (
            "map_optimizer = \"adam\"\nmap_learning_rate = nan\n",
            "map_learning_rate must be finite and > 0",
        ),
        (
            "map_optimizer = \"adam\"\nmap_batch_size = 501\n",
            "batch size 501 is invalid for N = 500",
        ),
    ];
    for (run, expected) in cases {
        let err = run_map(run).unwrap_err();
        assert!(err.contains(expected), "{run:?}: {err}");
    }
    let text = "[data]\nsynthetic = { rows = 50, dim = 2 }\n[model]\nkind = \"logistic\"\n\
                [run]\nmap_optimizer = \"sgd\"\n";
    let err = Config::from_toml(text, "run.toml").unwrap_err().to_string();
    assert!(err.contains("sgd") && err.contains("adam"), "{err}");
}

#[test]
fn a_diverging_adam_is_an_error_not_a_panic() {
    let (model, _) = gtm();
    let options = AdamMapOptions {
        learning_rate: 1e308,
        batch: BatchSize::Count(N),
        iterations: 10,
    };
    let err = find_map_adam(&model, &[0.0; 3], &options, &mut stream(1, 0))
        .unwrap_err()
        .to_string();
    assert!(err.contains("Adam diverged at step"), "{err}");
    let err = find_map_adam(
        &model,
        &[0.0; 2],
        &AdamMapOptions::default(),
        &mut stream(1, 0),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("start has 2 values"), "{err}");
}
