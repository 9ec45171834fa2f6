//! The MAP by Adam chosen in the run file (`[run] map_optimizer = "adam"`): its stream follows
//! the seed, bad settings name the key, and a diverging run is an error, not a panic.

use sgmcmc_runfile::config::{Config, MapOptimizer};

fn run_file(run: &str) -> Config {
    let text = format!(
        "[data]\nsynthetic = {{ rows = 500, dim = 3 }}\n[model]\nkind = \"logistic\"\n\
         [sampler]\nkind = \"sgld\"\nstep_size = 1e-4\n[run]\nseed = 7\ninit = \"map\"\n{run}"
    );
    Config::from_toml(&text, "run.toml").unwrap()
}

fn run_map(run: &str) -> Result<sgmcmc::optim::MapResult, String> {
    let cfg = run_file(run);
    let prepared = sgmcmc_runfile::pipeline::prepare(&cfg).map_err(|e| e.to_string())?;
    sgmcmc_runfile::pipeline::find_run_map(&cfg, prepared.model()).map_err(|e| e.to_string())
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
        let prepared = sgmcmc_runfile::pipeline::prepare(&cfg).unwrap();
        sgmcmc_runfile::pipeline::find_run_map(&cfg, prepared.model()).unwrap()
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
