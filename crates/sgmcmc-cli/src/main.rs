//! The `sgmcmc` command line: `demo`, `run CONFIG`, `reference CONFIG`, `ksd`, `tune CONFIG`,
//! `bench`, `experiment NAME`.

#[macro_use]
mod output;
mod commands;
mod experiment;
mod progress;
mod tune;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// Stochastic-gradient MCMC for large data sets.
#[derive(Parser)]
#[command(name = "sgmcmc", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// SGLD (control-variate gradients) on the built-in 1,000,000 x 10 logistic regression, 4 chains from the MAP.
    Demo {
        /// Also write draws (Zarr) and summary.json into this directory.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Override the number of iterations per chain (after burn-in).
        #[arg(long)]
        iterations: Option<usize>,
        /// Print the demo's run file (a valid `sgmcmc run` config) and exit.
        #[arg(long)]
        print_config: bool,
        /// Delete an earlier run's outputs in --out first (without it, such a directory is refused).
        #[arg(long, requires = "out")]
        overwrite: bool,
    },
    /// Run the sampler a TOML run file describes (see README and examples/*.toml).
    Run {
        /// The run file.
        config: PathBuf,
        /// Output directory for draws.zarr, summary.json and the chains' checkpoints.
        #[arg(long, default_value = "out")]
        out: PathBuf,
        /// Delete an earlier run's outputs in --out first (without it, such a directory is refused).
        #[arg(long, conflicts_with = "resume")]
        overwrite: bool,
        /// Continue the run in --out (killed, or stopped by Ctrl-C or SIGTERM) from its chains'
        /// checkpoints, with the same run file: the draws are those of an uninterrupted run.
        #[arg(long)]
        resume: bool,
        /// Prepare the run for its chains to run as separate processes or batch-scheduler
        /// tasks: resolve it (the default path included), record it in --out and create its
        /// store; sample nothing. Then `--chains` runs some chains, and `--finish` summarises.
        #[arg(long, conflicts_with_all = ["resume", "chains", "finish"])]
        prepare: bool,
        /// Run only these chains of the prepared run in --out (N, or N-M inclusive, e.g. a
        /// Slurm array's task id), each from its checkpoint if it has one (so a retried task
        /// continues); other processes may run other chains into the same directory at once.
        #[arg(long, value_name = "N[-M]", conflicts_with_all = ["resume", "overwrite", "finish"])]
        chains: Option<String>,
        /// Summarise the prepared run in --out once every chain has all its draws (R-hat, ESS,
        /// the bias check; summary.json), and finish its store; refused while a chain is
        /// missing draws.
        #[arg(long, conflicts_with_all = ["resume", "overwrite"])]
        finish: bool,
    },
    /// Coreset MCMC (Hot DoG by default) on a coreset run file ([data], [model], [coreset]; see examples/coreset_gaussian.toml): trains the weights, then keeps draws from the coreset posterior.
    Coreset {
        /// The coreset run file.
        config: PathBuf,
        /// Output directory for coreset.json, draws.zarr and summary.json.
        #[arg(long, default_value = "coreset_out")]
        out: PathBuf,
        /// Delete an earlier run's outputs in --out first (without it, such a directory is refused).
        #[arg(long, conflicts_with = "resume")]
        overwrite: bool,
        /// Continue the run in --out (killed, or stopped by Ctrl-C or SIGTERM) from its
        /// checkpoint, with the same run file: the weights and draws are those of an
        /// uninterrupted run.
        #[arg(long)]
        resume: bool,
    },
    /// Full-data reference posterior of a run file's model by NUTS (nuts-rs): prints mean, sd, ESS and
    /// R-hat per parameter and writes the reference moments (JSON).
    Reference {
        /// The run file (its data and model are used; the sampler settings are not).
        config: PathBuf,
        /// The reference file to write.
        #[arg(long, default_value = "reference.json")]
        out: PathBuf,
        /// Number of chains.
        #[arg(long, default_value_t = 4)]
        chains: usize,
        /// Warm-up iterations per chain (discarded).
        #[arg(long, default_value_t = 1000)]
        warmup: usize,
        /// Draws kept per chain.
        #[arg(long, default_value_t = 1000)]
        draws: usize,
        /// Seed (default: the run file's `[run] seed`).
        #[arg(long)]
        seed: Option<u64>,
        /// A dense metric fixed at the Laplace covariance at the MAP (D <= 1,000): NUTS in
        /// whitened coordinates, for badly conditioned posteriors.
        #[arg(long)]
        dense_metric: bool,
        /// Start afresh, deleting the finished chains of an interrupted run of this reference
        /// (FILE.partial) first (without it, they are refused).
        #[arg(long, conflicts_with = "resume")]
        overwrite: bool,
        /// Continue an interrupted (killed, or stopped by Ctrl-C or SIGTERM) run of this
        /// reference with the same run file and options: the chains it finished (kept in
        /// FILE.partial) are not run again, and the reference is that of an uninterrupted run.
        #[arg(long)]
        resume: bool,
    },
    /// Stein discrepancies of stored draws: KSD (IMQ, c = 1, β = −1/2) with full-batch scores at
    /// every K-th draw of each chain, and optionally FSSD-opt.
    Ksd {
        /// The draws: the Zarr store `sgmcmc run --out DIR` wrote (DIR/draws.zarr), or one that
        /// ArviZ wrote (`idata.to_zarr(path)`; Zarr v2 or v3, zstd, gzip, blosc or no
        /// compression, float32 or float64).
        draws: PathBuf,
        /// The run file of the model the draws target.
        #[arg(long)]
        config: PathBuf,
        /// The posterior variables holding the draws, their parameters side by side in this
        /// order; each (chain, draw) or (chain, draw, k, ...). Default: theta if present, else the
        /// posterior's only variable.
        #[arg(long, value_name = "NAME[,NAME...]", value_delimiter = ',')]
        variable: Vec<String>,
        /// Keep every K-th draw of each chain (MAMBA's default is 10).
        #[arg(long, default_value_t = 10)]
        thin: usize,
        /// Also FSSD-opt (J = 10 locations optimised on 20 % of the draws; Gaussian kernel, width from the draws' median distance).
        #[arg(long)]
        fssd: bool,
        /// Also write the report as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Tune a sampler's step size, batch size and other hyperparameters over the run file's
    /// [tune] grid: MAMBA (default), grid search or the 1/N heuristic; writes the per-round
    /// table, the winner's run file and its draws.
    Tune {
        /// The run file, with a [tune] table.
        config: PathBuf,
        /// Which tuner.
        #[arg(long, value_enum, default_value = "mamba")]
        method: tune::MethodArg,
        /// Output directory (rounds.csv, tune.json, winner.toml, winner_draws.zarr).
        #[arg(long, default_value = "tune_out")]
        out: PathBuf,
        /// Also draw MAMBA's round-by-round metric per arm (log scale; the arms of the last
        /// round in colour, pruned arms in grey, ending where they were pruned) as SVG.
        #[arg(long, value_name = "FILE.svg")]
        plot: Option<PathBuf>,
        /// Delete an earlier run's outputs in --out first (without it, such a directory is refused).
        #[arg(long, conflicts_with = "resume")]
        overwrite: bool,
        /// Continue the tuning run in --out (killed, or stopped) after its last complete MAMBA
        /// round, with the same run file (grid search and the heuristic run again whole).
        #[arg(long)]
        resume: bool,
    },
    /// Write a copy of a .npy feature matrix (and its targets) with the rows in a uniformly
    /// random order, out of core (two sequential passes through bucket files, at most --memory-mib
    /// held at once): for block minibatches ([gradient] scheme = "block") on data larger than
    /// memory, with [data] rows_shuffled = true.
    Shuffle {
        /// The features (.npy, 2-D, f8 or f4).
        features: PathBuf,
        /// The copy to write (same dtype).
        #[arg(long)]
        out: PathBuf,
        /// The targets (.npy vector) to shuffle along.
        #[arg(long, requires = "out_targets")]
        targets: Option<PathBuf>,
        /// Where to write the shuffled targets (f8).
        #[arg(long, requires = "targets")]
        out_targets: Option<PathBuf>,
        /// Seed of the permutation.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Memory to use, in MiB.
        #[arg(long, default_value_t = 1024)]
        memory_mib: usize,
    },
    /// Measure SGLD iterations/s on the synthetic logistic data, with bytes and FLOPs per iteration
    /// (--matrix: every sampler x estimator).
    Bench(sgmcmc_experiments::bench::BenchArgs),
    /// Reproduce a paper's experiment (tables in docs/experiments/).
    Experiment {
        #[command(subcommand)]
        which: experiment::Experiment,
    },
}

/// What `--overwrite` asks of an output directory that holds an earlier run.
fn existing(overwrite: bool) -> sgmcmc::io::ExistingRun {
    if overwrite {
        sgmcmc::io::ExistingRun::Overwrite
    } else {
        sgmcmc::io::ExistingRun::Refuse
    }
}

/// What `--overwrite` or `--resume` asks of an output directory that holds an earlier run.
fn existing_or_resume(overwrite: bool, resume: bool) -> sgmcmc::io::ExistingRun {
    if resume {
        sgmcmc::io::ExistingRun::Resume
    } else {
        existing(overwrite)
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo {
            out,
            iterations,
            print_config,
            overwrite,
        } => commands::demo(out, iterations, print_config, existing(overwrite)),
        Command::Run {
            config,
            out,
            overwrite,
            resume,
            prepare,
            chains,
            finish,
        } => (|| -> anyhow::Result<()> {
            let split = if prepare {
                commands::Split::Prepare
            } else if let Some(spec) = chains {
                commands::Split::Chains(commands::parse_chains(&spec)?)
            } else if finish {
                commands::Split::Finish
            } else {
                commands::Split::Whole
            };
            let existing = existing_or_resume(overwrite, resume || finish);
            commands::run(&config, &out, existing, split)
        })(),
        Command::Coreset {
            config,
            out,
            overwrite,
            resume,
        } => commands::coreset(&config, &out, existing_or_resume(overwrite, resume)),
        Command::Reference {
            config,
            out,
            chains,
            warmup,
            draws,
            seed,
            dense_metric,
            overwrite,
            resume,
        } => commands::reference(
            &config,
            &out,
            &commands::ReferenceOptions {
                chains,
                warmup,
                draws,
                seed,
                dense_metric,
            },
            existing_or_resume(overwrite, resume),
        ),
        Command::Ksd {
            draws,
            config,
            variable,
            thin,
            fssd,
            json,
        } => commands::ksd(&draws, &config, &variable, thin, fssd, json.as_deref()),
        Command::Tune {
            config,
            method,
            out,
            plot,
            overwrite,
            resume,
        } => tune::tune(
            &config,
            &out,
            method,
            plot.as_deref(),
            existing_or_resume(overwrite, resume),
        ),
        Command::Bench(args) => {
            sgmcmc_experiments::bench::bench(&args).map_err(anyhow::Error::from)
        }
        Command::Shuffle {
            features,
            out,
            targets,
            out_targets,
            seed,
            memory_mib,
        } => commands::shuffle(
            &features,
            targets.as_deref().zip(out_targets.as_deref()),
            &out,
            seed,
            memory_mib,
        ),
        Command::Experiment { which } => experiment::run(which),
    };
    let stdout_failure = output::failure();
    match result {
        Ok(()) => match stdout_failure {
            None => ExitCode::SUCCESS,
            // A reader that stopped reading (`| head`): the outputs are written; as for
            // any Unix filter, that is not an error.
            Some(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
            Some(e) => {
                eprintln!(
                    "error: cannot write to standard output ({e}); the files the command writes were written"
                );
                ExitCode::FAILURE
            }
        },
        Err(e) => {
            // One line: each cause once (library errors often include their source already).
            let mut line = String::new();
            for cause in e.chain().map(|c| c.to_string()) {
                if !line.contains(&cause) {
                    if !line.is_empty() {
                        line.push_str(": ");
                    }
                    line.push_str(&cause);
                }
            }
            eprintln!("error: {}", line.replace('\n', " "));
            ExitCode::FAILURE
        }
    }
}
