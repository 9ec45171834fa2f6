//! `sgmcmc experiment NAME`: the papers' experiments as commands (library code in
//! `sgmcmc::experiments`; result tables in `docs/experiments/`).

use anyhow::{Context, Result};
use clap::Subcommand;
use sgmcmc::experiments::normal_gamma::{self, Method, NormalGammaExperiment, PAPER_TABLE_1};
use std::path::PathBuf;
use std::time::Instant;

/// The experiments.
#[derive(Subcommand)]
pub enum Experiment {
    /// CCAdL paper §4.1: SGHMC, SGNHT and CCAdL on the Normal-Gamma model (N = 100, n = 10) at h in {0.001, 0.01} x A in {1, 10}; prints the table beside the paper's Table 1.
    CcadlNormalGamma {
        /// Recorded samples per run.
        #[arg(long, default_value_t = 1_000_000)]
        samples: usize,
        /// Iterations discarded before recording.
        #[arg(long, default_value_t = 50_000)]
        burn_in: usize,
        /// Master seed (data and every run derive from it).
        #[arg(long, default_value_t = 2015)]
        seed: u64,
        /// Also run CCAdL with the (N - n)/N finite-population factor.
        #[arg(long)]
        finite_population: bool,
        /// Write the full result (every statistic of every run) as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
    },
}

/// Run one experiment.
pub fn run(which: Experiment) -> Result<()> {
    match which {
        Experiment::CcadlNormalGamma {
            samples,
            burn_in,
            seed,
            finite_population,
            json,
        } => {
            let mut cfg = NormalGammaExperiment {
                samples,
                burn_in,
                seed,
                ..Default::default()
            };
            if finite_population {
                cfg.methods.push(Method::CcadlFinitePopulation);
            }
            let started = Instant::now();
            let result = normal_gamma::run(&cfg)?;
            println!(
                "Normal-Gamma posterior: E mu = {:.5}, E gamma = {:.5}, sd mu = {:.5}, sd gamma = {:.5}",
                result.posterior_mean[0],
                result.posterior_mean[1],
                result.posterior_variance[0].sqrt(),
                result.posterior_variance[1].sqrt()
            );
            println!(
                "\n(CDF RMSE, autocorrelation time), {samples} samples after {burn_in} burn-in, seed {seed}:\n"
            );
            print!("{}", normal_gamma::markdown(&result));
            println!("\nThe paper's Table 1 (RMSE, autocorrelation time):\n");
            println!(
                "| method | h = 0.001, A = 1 | h = 0.001, A = 10 | h = 0.01, A = 1 | h = 0.01, A = 10 |"
            );
            println!("|---|---|---|---|---|");
            for (name, cells) in PAPER_TABLE_1 {
                let cells: Vec<String> = cells.iter().map(|(e, t)| format!("({e}, {t})")).collect();
                println!("| {name} | {} |", cells.join(" | "));
            }
            println!("\n{:.1} s", started.elapsed().as_secs_f64());
            if let Some(path) = json {
                let text = serde_json::to_string_pretty(&result)?;
                std::fs::write(&path, text)
                    .with_context(|| format!("cannot write {}", path.display()))?;
            }
            Ok(())
        }
    }
}
