//! `sgmcmc experiment NAME`: the papers' experiments as commands (library code in
//! `sgmcmc::experiments`; result tables in `docs/experiments/`).

use anyhow::{Context, Result};
use clap::Subcommand;
use sgmcmc::estimator::BatchSize;
use sgmcmc::tuning::TuneScores;

use sgmcmc_experiments::ccadl_mnist::{self, CcadlMnistSettings};
use sgmcmc_experiments::coreset_fig1::{self, CoresetFig1Settings, Problem};
use sgmcmc_experiments::mamba::bnn::{self as mamba_bnn, MambaBnnSettings};
use sgmcmc_experiments::mamba::fssd_study::{self, FssdStudySettings};
use sgmcmc_experiments::mamba::ksd_estimators::{self, KsdEstimatorSettings};
use sgmcmc_experiments::mamba::pmf::{self as mamba_pmf, MambaPmfSettings};
use sgmcmc_experiments::mamba::{HarnessSettings, MambaError};
use sgmcmc_experiments::mamba_logreg::{self, MambaLogregSettings};
use sgmcmc_experiments::mh_mixture::{self, MhMixtureSettings};
use sgmcmc_experiments::mh_mnist::{self, MhMnistSettings};
use sgmcmc_experiments::normal_gamma::{self, Method, NormalGammaExperiment, PAPER_TABLE_1};
use sgmcmc_experiments::trial_store::TrialStore;
use sgmcmc_runfile::config::MapOptimizer;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// `--map-optimizer` of the neural-network experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MapOptimizerArg {
    /// L-BFGS on the full data.
    Lbfgs,
    /// Adam on minibatches.
    Adam,
}

/// `--tune-scores` of the MAMBA experiments: MAMBA-KSD's scores at the kept draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TuneScoresArg {
    /// The control-variate surrogate on a fixed subsample about the MAP (the default).
    ControlVariates,
    /// The exact full-data score (N per-datum gradients per scored draw).
    Full,
}

impl From<TuneScoresArg> for TuneScores {
    fn from(arg: TuneScoresArg) -> Self {
        match arg {
            TuneScoresArg::ControlVariates => TuneScores::ControlVariates,
            TuneScoresArg::Full => TuneScores::Full,
        }
    }
}

/// `--problem` of the KSD-estimator study.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum KsdProblem {
    /// The §4.1 logistic regression (synthetic, --rows).
    Logreg,
    /// PMF on MovieLens 100K (--data-dir).
    Pmf,
    /// The 784-100-10 neural network on MNIST (--data-dir).
    Bnn,
}

/// `--methods` of the posteriordb experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PosteriordbMethod {
    /// Our NUTS reference.
    Nuts,
    /// SGLD with exact gradients at a small step.
    Sgld,
    /// BAOAB with exact gradients at a small step.
    Baoab,
    /// The default path (no settings).
    Default,
    /// The default path with control-variate gradients.
    DefaultCv,
}

impl PosteriordbMethod {
    /// The stochastic-gradient method, if it is one.
    fn sg(self) -> Option<sgmcmc_experiments::posteriordb::sg::SgMethod> {
        use sgmcmc_experiments::posteriordb::sg::SgMethod;
        match self {
            PosteriordbMethod::Nuts => None,
            PosteriordbMethod::Sgld => Some(SgMethod::SgldFullBatch),
            PosteriordbMethod::Baoab => Some(SgMethod::BaoabFullBatch),
            PosteriordbMethod::Default => Some(SgMethod::DefaultPath),
            PosteriordbMethod::DefaultCv => Some(SgMethod::DefaultPathControlVariates),
        }
    }
}

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
    /// CCAdL paper §4.2: Bayesian logistic regression on MNIST 7s vs 9s (100-dim random projection, n = 500), SGHMC, SGNHT and CCAdL at h in {0.2, 0.5, 1}e-4 x A in {1, 10}: test log-likelihood at the running posterior mean against passes, and the marginals at A = 10 against a NUTS reference.
    CcadlMnist {
        /// Directory with train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz.
        data_dir: PathBuf,
        /// Output directory: report.json, tables.md, curves.svg and marginals.svg.
        #[arg(long, default_value = "ccadl_mnist_out")]
        out: PathBuf,
        /// Passes through the training data of the test-log-likelihood curve.
        #[arg(long, default_value_t = 600)]
        passes: usize,
        /// Draws after the curve for the marginals (runs at --marginal-diffusion; the paper: 10^6; 0: none).
        #[arg(long, default_value_t = 200_000)]
        marginal_samples: usize,
        /// The diffusion A of the marginal comparison.
        #[arg(long, default_value_t = 10.0)]
        marginal_diffusion: f64,
        /// Repeats of every configuration (the paper shows one run).
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Minibatch size n.
        #[arg(long, default_value_t = 500)]
        batch: usize,
        /// Features after the random projection.
        #[arg(long, default_value_t = 100)]
        projection_dim: usize,
        /// Step sizes h.
        #[arg(long, value_delimiter = ',', default_value = "0.00002,0.00005,0.0001")]
        steps: Vec<f64>,
        /// Diffusions A.
        #[arg(long, value_delimiter = ',', default_value = "1,10")]
        diffusions: Vec<f64>,
        /// Master seed (the projection and every run).
        #[arg(long, default_value_t = 2015)]
        seed: u64,
        /// NUTS reference: chains.
        #[arg(long, default_value_t = 4)]
        reference_chains: usize,
        /// NUTS reference: warm-up iterations per chain.
        #[arg(long, default_value_t = 1000)]
        reference_warmup: usize,
        /// NUTS reference: draws per chain.
        #[arg(long, default_value_t = 2500)]
        reference_draws: usize,
    },
    /// Tuning-free coreset paper: Fig. 1 (--study fig1: Hot DoG, r = 1e-3 with the hot-start test, against ADAM at learning rates 10^k, k = -3..1, beside the untrained coreset), the hot-start ablation and r sweep (--study hot-start: Figs. 4 and 6) or the other learning-rate-free methods (--study methods: DoG, DoWG, prodigy, D-Adaptation SGD and ADAM, each with and without the test; Figs. 3 and 7) or the burn-in traces (--study burn-in: the gradient norm and the hot-start statistic on the untrained coreset, burn_in.svg; Figs. 5, 10 and 11); M in {100, 500, 1000}, K = 2, S = M. Problems: the Gaussian location model (d = 20, N = 10,000; exact kernel), and with their flags the sparse regression (N = 50,000; Gibbs), Poisson regression on the bike-sharing data (slice sampler, Stan reference) and Bradley-Terry on the NBA games (slice sampler, NUTS reference); final average squared z-score, median over trials.
    CoresetFig1 {
        /// Output directory: report.json and tables.md.
        #[arg(long, default_value = "coreset_fig1_out")]
        out: PathBuf,
        /// Which comparison: fig1, hot-start, methods or burn-in.
        #[arg(long, default_value = "fig1")]
        study: coreset_fig1::Study,
        /// Optimisation iterations per run (the paper: 200,000).
        #[arg(long, default_value_t = 200_000)]
        iterations: usize,
        /// Trials per cell (the paper: 10); tables give medians.
        #[arg(long, default_value_t = 3)]
        trials: usize,
        /// Coreset sizes M.
        #[arg(long, value_delimiter = ',', default_value = "100,500,1000")]
        sizes: Vec<usize>,
        /// ADAM's learning rates alpha_0.
        #[arg(long, value_delimiter = ',', default_value = "0.001,0.01,0.1,1,10")]
        learning_rates: Vec<f64>,
        /// Hot DoG's initial step r (the method the others are compared with).
        #[arg(long, default_value_t = 1e-3)]
        hot_dog_r: f64,
        /// The r values of the hot-start study (Hot DoG) and of the methods study (DoG, DoWG); the paper's grid 10^k, k = -3..1.
        #[arg(long, value_delimiter = ',', default_value = "0.001,0.01,0.1,1,10")]
        r_values: Vec<f64>,
        /// prodigy's and D-Adaptation SGD's initial lower bound d0 (methods study).
        #[arg(long, default_value_t = 1e-6)]
        d0: f64,
        /// Master seed of the runs (trial t uses seed + t).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Seed of the synthetic data (Gaussian location, sparse regression).
        #[arg(long, default_value_t = 2024)]
        data_seed: u64,
        /// Leave out the Gaussian location problem.
        #[arg(long)]
        no_gaussian: bool,
        /// Add the sparse regression (50,000 synthetic points, Gibbs kernel).
        #[arg(long)]
        sparse_regression: bool,
        /// Rows of the sparse regression's synthetic data (the paper: 50,000).
        #[arg(long, default_value_t = 50_000)]
        sparse_rows: usize,
        /// Sparse regression reference: full-data Gibbs chains.
        #[arg(long, default_value_t = 4)]
        gibbs_chains: usize,
        /// Sparse regression reference: sweeps per chain (the first half discarded).
        #[arg(long, default_value_t = 50_000)]
        gibbs_sweeps: usize,
        /// The bike-sharing directory (poisson_reg.csv and the Stan moments): adds the Poisson problem.
        #[arg(long)]
        bike_sharing: Option<PathBuf>,
        /// The NBA games directory (games.csv.gz): adds Bradley-Terry, with a NUTS reference.
        #[arg(long)]
        nba: Option<PathBuf>,
        /// Bradley-Terry reference: NUTS chains.
        #[arg(long, default_value_t = 4)]
        nuts_chains: usize,
        /// Bradley-Terry reference: NUTS warm-up iterations per chain.
        #[arg(long, default_value_t = 1000)]
        nuts_warmup: usize,
        /// Bradley-Terry reference: NUTS draws per chain.
        #[arg(long, default_value_t = 2500)]
        nuts_draws: usize,
        /// Reuse the trials that an earlier run into the same --out finished (every finished trial is kept in OUT/trials): a run stopped part-way resumes where it stopped, and one with more trials or sizes runs only the new ones. A trial is reused only when everything it depends on is the same. Without --resume the stored trials are cleared first.
        #[arg(long)]
        resume: bool,
    },
    /// MAMBA paper §4.1: logistic regression (N = 10^6, d = 10, the paper's generator); six samplers tuned by MAMBA-KSD (R = 1 s), grid search and the 1/N heuristic, then 10 s runs: KSD, xi against NUTS, accuracy, draws.
    MambaLogreg {
        /// Output directory: report.json, tables.md, ksd_curves.svg (KSD against time, the paper's Figure 1), and each sampler's run file (configs/).
        #[arg(long, default_value = "mamba_logreg_out")]
        out: PathBuf,
        /// The NUTS reference (JSON): read if it exists, else computed (2 chains x (500 + 1000)) and written.
        #[arg(long, default_value = "mamba_logreg_out/reference.json")]
        reference: PathBuf,
        /// Rows generated (80 % train, the last 20 % test).
        #[arg(long, default_value_t = 1_000_000)]
        rows: usize,
        /// MAMBA's R in thread-CPU seconds.
        #[arg(long, default_value_t = 1.0)]
        budget_seconds: f64,
        /// Length of each final run (seconds, one chain from the MAP).
        #[arg(long, default_value_t = 10.0)]
        final_seconds: f64,
        /// Independent final runs per chosen setting (the paper: 10); the tables give their means.
        #[arg(long, default_value_t = 10)]
        final_runs: usize,
        /// Grid search: gradient estimates per grid point (the paper: 5,000 iterations; SGHMC gets 5,000/L iterations).
        #[arg(long, default_value_t = 5000)]
        grid_estimates: u64,
        /// Samplers (comma-separated; default all six).
        #[arg(long, value_delimiter = ',')]
        samplers: Option<Vec<String>>,
        /// Also MAMBA with FSSD-opt (the paper's M-FSSD column).
        #[arg(long)]
        fssd: bool,
        /// Only MAMBA with FSSD-opt (and its final runs).
        #[arg(long)]
        fssd_only: bool,
        /// Samplers whose MAMBA is re-run with the full-batch KSD beside the surrogate (rank correlation).
        #[arg(long, value_delimiter = ',')]
        rank_check: Option<Vec<String>>,
        /// Master seed of the runs (the data seed is fixed at 2021 unless --data-seed).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Seed of the data.
        #[arg(long, default_value_t = 2021)]
        data_seed: u64,
        /// Subsample m of MAMBA's control-variate scores (1 % of the 800,000 training rows by default).
        #[arg(long, default_value_t = 10_000)]
        score_subsample: usize,
        /// MAMBA-KSD's scores at the kept draws: the control-variate surrogate or the exact full-data score.
        #[arg(long, value_enum, default_value_t = TuneScoresArg::ControlVariates)]
        tune_scores: TuneScoresArg,
        /// Checkpoints of the KSD-against-time curves (evenly spaced up to --final-seconds).
        #[arg(long, default_value_t = 10)]
        curve_points: usize,
    },
    /// Why MAMBA-FSSD picks the largest step on the §4.1 logistic regression: every arm of MAMBA's grid runs one round-0 segment from the MAP, and its draws are scored by MAMBA-KSD's metric, the library's MAMBA-FSSD, the MAMBA code's FSSD and variants, each compared with the exact KSD and xi (report.json, tables.md).
    MambaFssdStudy {
        /// Output directory: report.json and tables.md.
        #[arg(long, default_value = "mamba_fssd_study_out")]
        out: PathBuf,
        /// The NUTS reference (JSON) for xi: read if it exists, else computed (2 chains x (500 + 1000)) and written; without it, no xi.
        #[arg(long)]
        reference: Option<PathBuf>,
        /// Rows generated (80 % train).
        #[arg(long, default_value_t = 1_000_000)]
        rows: usize,
        /// Samplers (comma-separated).
        #[arg(long, value_delimiter = ',', default_value = "SGLD,SGHMC")]
        samplers: Vec<String>,
        /// CPU seconds per arm (default: MAMBA's round-0 budget per arm for R = --budget-seconds).
        #[arg(long)]
        arm_seconds: Option<f64>,
        /// Per-datum gradient evaluations per arm instead of seconds (the same draws on any machine).
        #[arg(long)]
        arm_evaluations: Option<u64>,
        /// MAMBA's R in thread-CPU seconds (sets the default --arm-seconds).
        #[arg(long, default_value_t = 1.0)]
        budget_seconds: f64,
        /// At most this many evenly spaced draws of an arm enter its exact KSD.
        #[arg(long, default_value_t = 1000)]
        exact_draws: usize,
        /// Master seed (the data seed is 2021).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Subsample m of the control-variate scores.
        #[arg(long, default_value_t = 10_000)]
        score_subsample: usize,
    },
    /// MAMBA paper App. B.2, Figs. 4-5: SGLD from the MAP over a grid of step sizes (batch 1 %) and of batch sizes (step 10^-4.5), each arm's KSD estimated five ways (full-batch or stochastic scores, all draws or thinned by 5, and MAMBA's control-variate surrogate), each ranked against the full-batch KSD of all draws (report.json, tables.md, ksd_estimators.svg).
    MambaKsdEstimators {
        /// The problem.
        #[arg(long, value_enum)]
        problem: KsdProblem,
        /// The MovieLens 100K directory (pmf) or the MNIST directory (bnn).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Output directory.
        #[arg(long, default_value = "mamba_ksd_estimators_out")]
        out: PathBuf,
        /// Rows generated (logreg; 80 % train).
        #[arg(long, default_value_t = 1_000_000)]
        rows: usize,
        /// Each arm's budget: this many iterations at a 1 % batch, as per-datum gradient evaluations.
        #[arg(long, default_value_t = 500)]
        iterations: u64,
        /// At most this many evenly spaced draws of an arm are scored (default: 500; bnn 100, whose full-batch score costs 0.5 s per draw).
        #[arg(long)]
        max_draws: Option<usize>,
        /// Log10 step sizes of Fig. 4 (default: the experiment's grid, -1 ... -7.5 for logreg, -2 ... -7.5 otherwise).
        #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
        steps: Option<Vec<f64>>,
        /// Batch sizes (% of N) of Fig. 5.
        #[arg(long, value_delimiter = ',', default_value = "100,10,1,0.1")]
        batch_percents: Vec<f64>,
        /// Master seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// The surrogate's m (default: the experiment's, 10,000 for logreg and pmf, 1,000 for bnn).
        #[arg(long)]
        score_subsample: Option<usize>,
        /// L-BFGS iterations of the network's MAP search (bnn only; default 200, about 0.3 s each).
        #[arg(long)]
        map_iterations: Option<usize>,
    },
    /// MAMBA paper §4.2: Bayesian PMF on MovieLens 100K (u1.base/u1.test, d = 20, 52,580 parameters); six samplers tuned by MAMBA-KSD (R = 10 s), grid search (by test RMSE) and the 1/N heuristic, then 20 s runs: KSD, xi against NUTS, RMSE, draws; the KSD-against-time curves as SVG.
    MambaPmf {
        /// The MovieLens 100K directory (u1.base, u1.test, u.info), e.g. ../shared/data/movielens-100k.
        data_dir: PathBuf,
        /// Output directory: report.json, tables.md, ksd_curves.svg (the paper's Figure 2) and configs/.
        #[arg(long, default_value = "mamba_pmf_out")]
        out: PathBuf,
        /// The NUTS reference (JSON, e.g. from `sgmcmc reference`): read if it exists, else computed (2 chains x (500 + 1000), about 40 min) and written.
        #[arg(long, default_value = "mamba_pmf_out/reference.json")]
        reference: PathBuf,
        /// Grid search: iterations per grid point (the paper: 2,000).
        #[arg(long, default_value_t = 2000)]
        grid_iterations: u64,
        /// A final run's KSD scores at most this many evenly spaced draws (its cost grows as their square times D = 52,580).
        #[arg(long, default_value_t = 500)]
        ksd_draws: usize,
        #[command(flatten)]
        common: RealDataArgs,
    },
    /// MAMBA paper §4.3: the 784-100-10 Bayesian neural network on MNIST (79,510 weights); six samplers tuned by MAMBA-KSD (R = 10 s), grid search (by test accuracy) and the 1/N heuristic, then 300 s runs from the MAP: test ECE, MCE, accuracy, draws; the ECE-against-time curves as SVG.
    MambaBnn {
        /// The MNIST directory (train-* and t10k-* IDX files), e.g. ../shared/data/mnist.
        data_dir: PathBuf,
        /// Output directory: report.json, tables.md, ece_curves.svg (the paper's Figure 3) and configs/.
        #[arg(long, default_value = "mamba_bnn_out")]
        out: PathBuf,
        /// Grid search: gradient estimates per grid point (the paper: 1,000 iterations; SGHMC gets 1,000/L iterations).
        #[arg(long, default_value_t = 1000)]
        grid_estimates: u64,
        /// The MAP's optimiser: lbfgs (full data) or adam (minibatches, as the authors' code found its MAP).
        #[arg(long, value_enum, default_value_t = MapOptimizerArg::Lbfgs)]
        map_optimizer: MapOptimizerArg,
        /// Iterations of the MAP search (default: 200 L-BFGS iterations, each about one full-data gradient, about 0.5 s; or 5,000 Adam steps).
        #[arg(long)]
        map_iterations: Option<usize>,
        /// Adam's learning rate (only with --map-optimizer adam; the authors': 1e-3).
        #[arg(long)]
        map_learning_rate: Option<f64>,
        /// Adam's minibatch: a count or a percentage (only with --map-optimizer adam; the authors': 10%).
        #[arg(long)]
        map_batch: Option<BatchSize>,
        /// Only the control of the ECE cells: find the MAP and report its test ECE, MCE and accuracy as a single draw (map_control.json in --out).
        #[arg(long)]
        map_only: bool,
        #[command(flatten)]
        common: RealDataArgs,
    },
    /// Minibatch MH paper §5.1: the Gaussian mixture (N = 10,000, T = 110, m = 200, random walk diag(0.03, 0.03)); the minibatch Barker test (grow and skip), the workshop test, Austerity and full-data MH against the exact tempered posterior (KS per coordinate), data used per test, skips as m grows.
    MhMixture {
        /// Output directory: report.json and tables.md.
        #[arg(long, default_value = "mh_mixture_out")]
        out: PathBuf,
        /// Independent chains per test.
        #[arg(long, default_value_t = 10)]
        chains: usize,
        /// Kept iterations per chain.
        #[arg(long, default_value_t = 10_000)]
        iterations: usize,
        /// Iterations discarded first.
        #[arg(long, default_value_t = 1_000)]
        burn_in: usize,
        /// Minibatch m.
        #[arg(long, default_value_t = 200)]
        batch: usize,
        /// Likelihood temperature T.
        #[arg(long, default_value_t = 110.0)]
        temperature: f64,
        /// Master seed of the chains.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// posteriordb (issue 27): NUTS and the stochastic-gradient samplers on every posterior of a posteriordb folder (e.g. ../shared/data/posteriordb), each built from its Stan model's priors, constraints and data transforms, against the gold-standard reference draws: per parameter the mean's z-score against the combined MCSE and the sd ratio; writes report.json and table.md (NUTS), sg_report.json and sg_table.md (the stochastic-gradient rows beside NUTS's).
    Posteriordb {
        /// The posteriordb folder (posteriors/, data/, reference_draws/).
        dir: PathBuf,
        /// Output directory: report.json and table.md (NUTS), sg_report.json and sg_table.md.
        #[arg(long, default_value = "posteriordb_out")]
        out: PathBuf,
        /// Only these posteriors (default: every one in DIR/posteriors).
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
        /// The methods: nuts, and the stochastic-gradient rows sgld (full batch, epsilon 0.005),
        /// baoab (full batch, h 0.1), default (the default path), default-cv (the default path
        /// with control variates on 10 % minibatches).
        #[arg(
            long,
            value_enum,
            value_delimiter = ',',
            default_value = "nuts,sgld,baoab,default,default-cv"
        )]
        methods: Vec<PosteriordbMethod>,
        /// SGLD's iterations per chain (a twentieth burn-in).
        #[arg(long, default_value_t = 200_000)]
        sgld_iterations: usize,
        /// BAOAB's iterations per chain (a twentieth burn-in).
        #[arg(long, default_value_t = 40_000)]
        baoab_iterations: usize,
        /// NUTS chains per posterior.
        #[arg(long, default_value_t = 4)]
        chains: usize,
        /// NUTS warm-up iterations per chain.
        #[arg(long, default_value_t = 1000)]
        warmup: usize,
        /// NUTS draws kept per chain.
        #[arg(long, default_value_t = 5000)]
        draws: usize,
        /// Seed of every posterior's run.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Instead of sampling, write each posterior's prepared data and run file (data.csv,
        /// run.toml: its model, priors and constraints, the default path) into EXPORT/NAME/.
        #[arg(long)]
        export: Option<PathBuf>,
    },
    /// Minibatch MH paper §5.2: logistic regression on MNIST 1s vs 7s (flat prior, random walk); the minibatch Barker test, Austerity and the exact test: test accuracy / log-likelihood against data points processed, and the Barker test's sensitivity to the minibatch size.
    MhMnist {
        /// Directory with train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz.
        data_dir: PathBuf,
        /// Output directory: report.json and tables.md.
        #[arg(long, default_value = "mh_mnist_out")]
        out: PathBuf,
        /// Iterations of each method's chain.
        #[arg(long, default_value_t = 3000)]
        iterations: usize,
        /// Master seed (test subset and every chain).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Random-walk standard deviation per coordinate (the paper's variance 0.01).
        #[arg(long, default_value_t = 0.1)]
        proposal_sd: f64,
        /// Batch increment m of the Barker and Austerity tests.
        #[arg(long, default_value_t = 50)]
        batch: usize,
        /// Likelihood temperature T of the Barker and exact tests.
        #[arg(long, default_value_t = 3000.0)]
        temperature: f64,
        /// Austerity's tolerance epsilon.
        #[arg(long, default_value_t = 0.02)]
        austerity_tolerance: f64,
        /// Austerity's likelihood temperature (default: --temperature; the workshop's "no temperature" is 1).
        #[arg(long)]
        austerity_temperature: Option<f64>,
        /// Record test accuracy and log-likelihood every this many iterations.
        #[arg(long, default_value_t = 50)]
        record_every: usize,
        /// Test images drawn from the test 1s and 7s.
        #[arg(long, default_value_t = 1000)]
        test_size: usize,
        /// Batch increments of the minibatch-size table.
        #[arg(long, value_delimiter = ',', default_value = "5,10,20,50,100,200")]
        sensitivity_batches: Vec<usize>,
        /// Iterations at which the minibatch-size table reads the test accuracy.
        #[arg(long, value_delimiter = ',', default_value = "700,1000,1500")]
        sensitivity_checkpoints: Vec<usize>,
        /// Barker chains per batch increment in the minibatch-size table (0: no table).
        #[arg(long, default_value_t = 5)]
        sensitivity_repeats: usize,
        /// Independent chains per method (the first chain of Barker, Austerity and the exact test keeps the streams of one-chain runs).
        #[arg(long, default_value_t = 5)]
        chains: usize,
        /// K of the workshop's Algorithm 1: minibatches of m points for the standard deviation of Delta' ((K + 1)·m points per test).
        #[arg(long, default_value_t = 10)]
        workshop_minibatches: usize,
    },
}

/// The options `mamba-pmf` and `mamba-bnn` share (defaults: the paper's protocol).
#[derive(clap::Args)]
pub struct RealDataArgs {
    /// MAMBA's R in thread-CPU seconds (the paper: 10).
    #[arg(long, default_value_t = 10.0)]
    budget_seconds: f64,
    /// Length of each final run (seconds, one chain from the MAP); default: the paper's (20 s PMF, 300 s NN).
    #[arg(long)]
    final_seconds: Option<f64>,
    /// Independent final runs per chosen setting (default: 3 PMF, 1 NN); the tables give their means.
    #[arg(long)]
    final_runs: Option<usize>,
    /// Keep every k-th iterate of a final run (default: 10 PMF, 50 NN).
    #[arg(long)]
    final_thin: Option<usize>,
    /// Fraction of a final run's kept draws dropped as burn-in.
    #[arg(long, default_value_t = 0.1)]
    burn_in: f64,
    /// Samplers (comma-separated; default all six).
    #[arg(long, value_delimiter = ',')]
    samplers: Option<Vec<String>>,
    /// Master seed of the runs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Checkpoints of the curves against time (evenly spaced up to the final length).
    #[arg(long, default_value_t = 5)]
    curve_points: usize,
    /// Threads for MAMBA's arms and grid search (0: every core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// MAMBA-KSD's scores at the kept draws: the control-variate surrogate or the exact full-data score.
    #[arg(long, value_enum, default_value_t = TuneScoresArg::ControlVariates)]
    tune_scores: TuneScoresArg,
    /// Only MAMBA-KSD: skip grid search and the heuristic (they do not use MAMBA's scores, so a run with another --tune-scores can be paired by seed with an earlier run's baselines).
    #[arg(long)]
    mamba_only: bool,
}

impl RealDataArgs {
    /// Apply the options to an experiment's defaults.
    fn apply(self, h: &mut HarnessSettings) -> Result<()> {
        anyhow::ensure!(self.curve_points >= 1, "--curve-points must be at least 1");
        anyhow::ensure!(
            (0.0..1.0).contains(&self.burn_in),
            "--burn-in must be in [0, 1), got {}",
            self.burn_in
        );
        anyhow::ensure!(
            self.final_thin != Some(0),
            "--final-thin must be at least 1"
        );
        h.budget_seconds = self.budget_seconds;
        h.final_seconds = self.final_seconds.unwrap_or(h.final_seconds);
        anyhow::ensure!(
            self.final_runs != Some(0),
            "--final-runs must be at least 1"
        );
        h.final_runs = self.final_runs.unwrap_or(h.final_runs);
        h.final_thin = self.final_thin.unwrap_or(h.final_thin);
        h.final_burn_in = self.burn_in;
        if let Some(s) = self.samplers {
            h.samplers = sampler_indices(&s)?;
        }
        h.seed = self.seed;
        h.curve_points = self.curve_points;
        h.threads = self.threads;
        h.tune_scores = self.tune_scores.into();
        h.mamba_only = self.mamba_only;
        Ok(())
    }
}

/// Write each sampler's run file into `out/configs`.
fn write_configs(
    out: &Path,
    samplers: &[usize],
    text: impl Fn(usize) -> std::result::Result<String, MambaError>,
) -> Result<()> {
    let configs = out.join("configs");
    std::fs::create_dir_all(&configs)
        .with_context(|| format!("cannot create {}", configs.display()))?;
    for &i in samplers {
        let name = mamba_logreg::SAMPLERS[i].to_lowercase();
        std::fs::write(configs.join(format!("{name}.toml")), text(i)?)?;
    }
    Ok(())
}

/// How a MAMBA experiment writes its outputs: its tables, its curves SVG (file name and
/// metric) and the plot of the curves.
struct MambaOutputs<R> {
    markdown: fn(&R) -> String,
    curves: (&'static str, &'static str),
    plot: fn(&Path, &R) -> Result<Vec<String>, sgmcmc_experiments::plot::PlotError>,
}

impl<R: serde::Serialize> MambaOutputs<R> {
    /// Write tables.md, report.json and the curves SVG into `out`; returns the tables and the
    /// methods the plot left out.
    fn save(&self, out: &Path, report: &R) -> Result<(String, Vec<String>)> {
        let tables = (self.markdown)(report);
        std::fs::write(out.join("tables.md"), &tables)
            .with_context(|| format!("cannot write {}/tables.md", out.display()))?;
        std::fs::write(
            out.join("report.json"),
            serde_json::to_string_pretty(report)? + "\n",
        )
        .with_context(|| format!("cannot write {}/report.json", out.display()))?;
        let svg = out.join(self.curves.0);
        let left_out =
            (self.plot)(&svg, report).with_context(|| format!("cannot plot {}", svg.display()))?;
        Ok((tables, left_out))
    }

    /// Save the samplers finished so far (after each one), so that an experiment stopped
    /// early keeps them; a failure to write is a warning, not the end of the run.
    fn save_partial(&self, out: &Path, report: &R, finished: usize) {
        match self.save(out, report) {
            Ok(_) => outln!(
                "saved the {finished} finished sampler(s) to {}/tables.md, report.json and {}",
                out.display(),
                self.curves.0
            ),
            Err(e) => eprintln!("warning: cannot save the finished samplers: {e:#}"),
        }
    }

    /// Save the whole report and print its tables and what was written.
    fn finish(&self, out: &Path, report: &R, seconds: f64) -> Result<()> {
        let (tables, left_out) = self.save(out, report)?;
        outln!("\n{tables}");
        let (name, metric) = self.curves;
        if !left_out.is_empty() {
            outln!(
                "{name} leaves out (no finite {metric}): {}",
                left_out.join(", ")
            );
        }
        outln!(
            "{seconds:.1} s; wrote {}/tables.md, report.json, {name} and configs/",
            out.display()
        );
        Ok(())
    }
}

/// Names of [`mamba_logreg::SAMPLERS`] as given on the command line (case-insensitive).
fn sampler_indices(list: &[String]) -> Result<Vec<usize>> {
    list.iter()
        .map(|name| {
            mamba_logreg::SAMPLERS
                .iter()
                .position(|s| s.eq_ignore_ascii_case(name.trim()))
                .with_context(|| {
                    format!(
                        "unknown sampler {name:?}; expected one of SGLD, SGLD-CV, SGHMC, SGHMC-CV, SGNHT, SGNHT-CV"
                    )
                })
        })
        .collect()
}

/// Print an experiment's tables and write them (`tables.md`) and its report (`report.json`)
/// into `out`.
fn write_tables_and_report(out: &Path, tables: &str, report: &impl serde::Serialize) -> Result<()> {
    outln!("\n{tables}");
    std::fs::write(out.join("tables.md"), tables)
        .with_context(|| format!("cannot write {}/tables.md", out.display()))?;
    std::fs::write(
        out.join("report.json"),
        serde_json::to_string_pretty(report)? + "\n",
    )
    .with_context(|| format!("cannot write {}/report.json", out.display()))?;
    Ok(())
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
            outln!(
                "Normal-Gamma posterior: E mu = {:.5}, E gamma = {:.5}, sd mu = {:.5}, sd gamma = {:.5}",
                result.posterior_mean[0],
                result.posterior_mean[1],
                result.posterior_variance[0].sqrt(),
                result.posterior_variance[1].sqrt()
            );
            outln!(
                "\n(CDF RMSE, autocorrelation time), {samples} samples after {burn_in} burn-in, seed {seed}:\n"
            );
            out!("{}", normal_gamma::markdown(&result));
            outln!("\nThe paper's Table 1 (RMSE, autocorrelation time):\n");
            outln!(
                "| method | h = 0.001, A = 1 | h = 0.001, A = 10 | h = 0.01, A = 1 | h = 0.01, A = 10 |"
            );
            outln!("|---|---|---|---|---|");
            for (name, cells) in PAPER_TABLE_1 {
                let cells: Vec<String> = cells.iter().map(|(e, t)| format!("({e}, {t})")).collect();
                outln!("| {name} | {} |", cells.join(" | "));
            }
            outln!("\n{:.1} s", started.elapsed().as_secs_f64());
            if let Some(path) = json {
                let text = serde_json::to_string_pretty(&result)?;
                std::fs::write(&path, text)
                    .with_context(|| format!("cannot write {}", path.display()))?;
            }
            Ok(())
        }
        Experiment::CcadlMnist {
            data_dir,
            out,
            passes,
            marginal_samples,
            marginal_diffusion,
            runs,
            batch,
            projection_dim,
            steps,
            diffusions,
            seed,
            reference_chains,
            reference_warmup,
            reference_draws,
        } => {
            let mut settings = CcadlMnistSettings::new(data_dir);
            settings.passes = passes;
            settings.marginal_samples = marginal_samples;
            settings.marginal_diffusion = marginal_diffusion;
            settings.runs = runs;
            settings.batch = batch;
            settings.projection_dim = projection_dim;
            settings.steps = steps;
            settings.diffusions = diffusions;
            settings.seed = seed;
            settings.reference.chains = reference_chains;
            settings.reference.warmup = reference_warmup;
            settings.reference.draws = reference_draws;
            settings.reference.seed = seed;
            let started = Instant::now();
            let log = |line: &str| outln!("[{:7.1} s] {line}", started.elapsed().as_secs_f64());
            let report = ccadl_mnist::run(&settings, &log)?;
            ccadl_mnist::write_outputs(&report, &out)?;
            outln!("\n{}", report.markdown());
            outln!(
                "{:.1} s; wrote {}/report.json, tables.md, curves.svg{}",
                started.elapsed().as_secs_f64(),
                out.display(),
                if marginal_samples > 0 {
                    ", marginals.svg"
                } else {
                    ""
                }
            );
            Ok(())
        }
        Experiment::MambaLogreg {
            out,
            reference,
            rows,
            budget_seconds,
            final_seconds,
            final_runs,
            grid_estimates,
            samplers,
            fssd,
            fssd_only,
            rank_check,
            seed,
            data_seed,
            score_subsample,
            tune_scores,
            curve_points,
        } => {
            if curve_points == 0 {
                anyhow::bail!("--curve-points must be at least 1");
            }
            let settings = MambaLogregSettings {
                rows,
                budget_seconds,
                final_seconds,
                final_runs,
                grid_estimates,
                samplers: match samplers {
                    Some(s) => sampler_indices(&s)?,
                    None => (0..6).collect(),
                },
                fssd,
                fssd_only,
                rank_check: sampler_indices(&rank_check.unwrap_or_default())?,
                reference,
                seed,
                data_seed,
                score_subsample,
                tune_scores: tune_scores.into(),
                curve_points,
                ..MambaLogregSettings::default()
            };
            write_configs(&out, &settings.samplers, |i| {
                mamba_logreg::config_text(&settings, i, false)
            })?;
            if let Some(dir) = settings.reference.parent() {
                std::fs::create_dir_all(dir).ok();
            }
            let started = Instant::now();
            let outputs = MambaOutputs {
                markdown: mamba_logreg::markdown,
                curves: ("ksd_curves.svg", "KSD"),
                plot: mamba_logreg::write_ksd_curves,
            };
            let report = mamba_logreg::run(
                &settings,
                &mut |line| outln!("[{:7.1} s] {line}", started.elapsed().as_secs_f64()),
                &mut |partial| outputs.save_partial(&out, partial, partial.samplers.len()),
            )?;
            outputs.finish(&out, &report, report.seconds)
        }
        Experiment::MambaFssdStudy {
            out,
            reference,
            rows,
            samplers,
            arm_seconds,
            arm_evaluations,
            budget_seconds,
            exact_draws,
            seed,
            score_subsample,
        } => {
            let settings = FssdStudySettings {
                logreg: MambaLogregSettings {
                    rows,
                    budget_seconds,
                    samplers: sampler_indices(&samplers)?,
                    seed,
                    score_subsample,
                    ..MambaLogregSettings::default()
                },
                arm_seconds,
                arm_evaluations,
                exact_draws,
                reference,
            };
            std::fs::create_dir_all(&out)
                .with_context(|| format!("cannot create {}", out.display()))?;
            if let Some(dir) = settings.reference.as_ref().and_then(|r| r.parent()) {
                std::fs::create_dir_all(dir).ok();
            }
            let started = Instant::now();
            let report = fssd_study::run(&settings, &mut |line| {
                outln!("[{:7.1} s] {line}", started.elapsed().as_secs_f64())
            })?;
            write_tables_and_report(&out, &fssd_study::markdown(&report), &report)?;
            outln!(
                "{:.1} s; wrote {}/tables.md and report.json",
                report.seconds,
                out.display()
            );
            Ok(())
        }
        Experiment::MambaKsdEstimators {
            problem,
            data_dir,
            out,
            rows,
            iterations,
            max_draws,
            steps,
            batch_percents,
            seed,
            score_subsample,
            map_iterations,
        } => {
            if map_iterations.is_some() && problem != KsdProblem::Bnn {
                anyhow::bail!("--map-iterations applies to --problem bnn only");
            }
            let dir = || {
                data_dir
                    .clone()
                    .context("--data-dir is required for --problem pmf and bnn")
            };
            let (name, spec, mut harness) = match problem {
                KsdProblem::Logreg => {
                    let s = MambaLogregSettings {
                        rows,
                        ..MambaLogregSettings::default()
                    };
                    ("logistic regression", s.spec(), s.harness())
                }
                KsdProblem::Pmf => {
                    let s = MambaPmfSettings::new(dir()?);
                    ("PMF", s.spec(), s.harness)
                }
                KsdProblem::Bnn => {
                    let s = MambaBnnSettings {
                        map_iterations,
                        ..MambaBnnSettings::new(dir()?)
                    };
                    ("neural network", s.spec(), s.harness)
                }
            };
            harness.seed = seed;
            if let Some(m) = score_subsample {
                harness.score_subsample = m;
            }
            let default_steps = if problem == KsdProblem::Logreg {
                -1.0
            } else {
                -2.0
            };
            let settings = KsdEstimatorSettings {
                problem: name.into(),
                spec,
                harness,
                log10_steps: steps.unwrap_or_else(|| {
                    (0..)
                        .map(|k| default_steps - 0.5 * k as f64)
                        .take_while(|s| *s >= -7.5)
                        .collect()
                }),
                step_batch_percent: 1.0,
                batch_percents,
                batch_log10_step: -4.5,
                iterations,
                max_draws: max_draws.unwrap_or(if problem == KsdProblem::Bnn { 100 } else { 500 }),
            };
            std::fs::create_dir_all(&out)
                .with_context(|| format!("cannot create {}", out.display()))?;
            let started = Instant::now();
            let report = ksd_estimators::run(&settings, &mut |line| {
                outln!("[{:7.1} s] {line}", started.elapsed().as_secs_f64())
            })?;
            write_tables_and_report(&out, &ksd_estimators::markdown(&report), &report)?;
            ksd_estimators::write_svg(&out.join("ksd_estimators.svg"), &report)?;
            outln!(
                "{:.1} s; wrote {}/tables.md, report.json and ksd_estimators.svg",
                report.seconds,
                out.display()
            );
            Ok(())
        }
        Experiment::MambaPmf {
            data_dir,
            out,
            reference,
            grid_iterations,
            ksd_draws,
            common,
        } => {
            anyhow::ensure!(ksd_draws >= 1, "--ksd-draws must be at least 1");
            let mut settings = MambaPmfSettings {
                reference,
                grid_iterations,
                final_max_scored: ksd_draws,
                ..MambaPmfSettings::new(data_dir)
            };
            common.apply(&mut settings.harness)?;
            write_configs(&out, &settings.harness.samplers, |i| {
                mamba_pmf::config_text(&settings, i)
            })?;
            let started = Instant::now();
            let outputs = MambaOutputs {
                markdown: mamba_pmf::markdown,
                curves: ("ksd_curves.svg", "KSD"),
                plot: mamba_pmf::write_ksd_curves,
            };
            let report = mamba_pmf::run(
                &settings,
                &mut |line| outln!("[{:7.1} s] {line}", started.elapsed().as_secs_f64()),
                &mut |partial| outputs.save_partial(&out, partial, partial.samplers.len()),
            )?;
            outputs.finish(&out, &report, report.seconds)
        }
        Experiment::MambaBnn {
            data_dir,
            out,
            grid_estimates,
            map_optimizer,
            map_iterations,
            map_learning_rate,
            map_batch,
            map_only,
            common,
        } => {
            let map_optimizer = match map_optimizer {
                MapOptimizerArg::Lbfgs => MapOptimizer::Lbfgs,
                MapOptimizerArg::Adam => MapOptimizer::Adam,
            };
            if map_optimizer == MapOptimizer::Lbfgs
                && (map_learning_rate.is_some() || map_batch.is_some())
            {
                anyhow::bail!(
                    "--map-learning-rate and --map-batch are Adam settings; add --map-optimizer adam"
                );
            }
            let defaults = MambaBnnSettings::new(data_dir);
            let mut settings = MambaBnnSettings {
                grid_estimates,
                map_optimizer,
                map_iterations,
                map_learning_rate: map_learning_rate.unwrap_or(defaults.map_learning_rate),
                map_batch: map_batch.unwrap_or(defaults.map_batch),
                ..defaults
            };
            common.apply(&mut settings.harness)?;
            if map_only {
                let started = Instant::now();
                let control = mamba_bnn::map_control(&settings, &mut |line| {
                    outln!("[{:7.1} s] {line}", started.elapsed().as_secs_f64())
                })?;
                std::fs::create_dir_all(&out)
                    .with_context(|| format!("cannot create {}", out.display()))?;
                let path = out.join("map_control.json");
                std::fs::write(&path, serde_json::to_string_pretty(&control)? + "\n")
                    .with_context(|| format!("cannot write {}", path.display()))?;
                outln!(
                    "the MAP alone: test ECE {:.2} %, MCE {:.2} %, accuracy {:.2} %; wrote {}",
                    100.0 * control.ece,
                    100.0 * control.mce,
                    100.0 * control.accuracy,
                    path.display()
                );
                return Ok(());
            }
            write_configs(&out, &settings.harness.samplers, |i| {
                mamba_bnn::config_text(&settings, i)
            })?;
            let started = Instant::now();
            let outputs = MambaOutputs {
                markdown: mamba_bnn::markdown,
                curves: ("ece_curves.svg", "ECE"),
                plot: mamba_bnn::write_ece_curves,
            };
            let report = mamba_bnn::run(
                &settings,
                &mut |line| outln!("[{:7.1} s] {line}", started.elapsed().as_secs_f64()),
                &mut |partial| outputs.save_partial(&out, partial, partial.samplers.len()),
            )?;
            outputs.finish(&out, &report, report.seconds)
        }
        Experiment::CoresetFig1 {
            out,
            study,
            iterations,
            trials,
            sizes,
            learning_rates,
            hot_dog_r,
            r_values,
            d0,
            seed,
            data_seed,
            no_gaussian,
            sparse_regression,
            sparse_rows,
            gibbs_chains,
            gibbs_sweeps,
            bike_sharing,
            nba,
            nuts_chains,
            nuts_warmup,
            nuts_draws,
            resume,
        } => {
            let settings = CoresetFig1Settings {
                study,
                sizes,
                learning_rates,
                hot_dog_r,
                r_values,
                d0,
                iterations,
                trials,
                seed,
            };
            settings.validate().map_err(anyhow::Error::msg)?;
            std::fs::create_dir_all(&out)
                .with_context(|| format!("cannot create {}", out.display()))?;
            let mut problems = Vec::new();
            if !no_gaussian {
                problems.push(
                    Problem::gaussian_location(10_000, 20, data_seed)
                        .map_err(anyhow::Error::msg)?,
                );
            }
            if sparse_regression {
                let reference = coreset_fig1::GibbsReference {
                    chains: gibbs_chains,
                    sweeps: gibbs_sweeps,
                    ..Default::default()
                };
                let problem = Problem::sparse_regression(sparse_rows, data_seed, &reference)
                    .map_err(anyhow::Error::msg)?;
                outln!("{}: reference by {}", problem.name, problem.reference);
                problems.push(problem);
            }
            if let Some(dir) = &bike_sharing {
                problems.push(Problem::bike_sharing_poisson(dir).map_err(anyhow::Error::msg)?);
            }
            if let Some(dir) = &nba {
                let nuts = sgmcmc::reference::NutsSettings {
                    chains: nuts_chains,
                    warmup: nuts_warmup,
                    draws: nuts_draws,
                    seed: 2024,
                    ..sgmcmc::reference::NutsSettings::default()
                };
                let problem = Problem::nba_bradley_terry(dir, &nuts).map_err(anyhow::Error::msg)?;
                outln!("{}: reference by {}", problem.name, problem.reference);
                problems.push(problem);
            }
            anyhow::ensure!(
                !problems.is_empty(),
                "no problem left: drop --no-gaussian or add --sparse-regression, --bike-sharing DIR or --nba DIR"
            );
            let trials_dir = out.join("trials");
            if !resume && trials_dir.exists() {
                std::fs::remove_dir_all(&trials_dir)
                    .with_context(|| format!("cannot clear {}", trials_dir.display()))?;
            }
            let store = TrialStore::open(&trials_dir).map_err(anyhow::Error::msg)?;
            let started = Instant::now();
            let report = coreset_fig1::run_with_store(
                &problems,
                &settings,
                &|line| {
                    outln!("[{:7.1} s] {line}", started.elapsed().as_secs_f64());
                },
                Some(&store),
            )
            .map_err(anyhow::Error::msg)?;
            if report.reused_trials > 0 {
                outln!(
                    "{} trials reused from {}",
                    report.reused_trials,
                    trials_dir.display()
                );
            }
            write_tables_and_report(&out, &coreset_fig1::markdown(&report), &report)?;
            if coreset_fig1::write_burn_in_figure(&report, &out.join("burn_in.svg"))
                .context("cannot draw burn_in.svg")?
            {
                outln!("wrote {}/burn_in.svg", out.display());
            }
            outln!(
                "{:.1} s; wrote {}/tables.md and report.json",
                report.seconds,
                out.display()
            );
            Ok(())
        }
        Experiment::MhMixture {
            out,
            chains,
            iterations,
            burn_in,
            batch,
            temperature,
            seed,
        } => {
            let settings = MhMixtureSettings {
                chains,
                iterations,
                burn_in,
                batch,
                temperature,
                seed,
                ..MhMixtureSettings::default()
            };
            std::fs::create_dir_all(&out)
                .with_context(|| format!("cannot create {}", out.display()))?;
            let started = Instant::now();
            let report = mh_mixture::run(&settings, &mut |line| {
                outln!("[{:7.1} s] {line}", started.elapsed().as_secs_f64());
            })?;
            write_tables_and_report(&out, &mh_mixture::markdown(&report), &report)?;
            outln!(
                "{:.1} s; wrote {}/tables.md and report.json",
                report.seconds,
                out.display()
            );
            Ok(())
        }
        Experiment::Posteriordb {
            dir,
            out,
            only,
            methods,
            sgld_iterations,
            baoab_iterations,
            chains,
            warmup,
            draws,
            seed,
            export,
        } => {
            use sgmcmc_experiments::posteriordb;
            let names = if only.is_empty() {
                posteriordb::posterior_names(&dir)?
            } else {
                only
            };
            anyhow::ensure!(!names.is_empty(), "no posteriors in {}", dir.display());
            if let Some(export) = export {
                for name in &names {
                    let posterior = posteriordb::load(&dir, name)?;
                    let to = export.join(name);
                    posterior
                        .prepared
                        .export(&to, name, &posterior.model_name)
                        .with_context(|| format!("cannot write {}", to.display()))?;
                    outln!("{}", to.join("run.toml").display());
                }
                return Ok(());
            }
            std::fs::create_dir_all(&out)
                .with_context(|| format!("cannot create {}", out.display()))?;
            let nuts = if methods.contains(&PosteriordbMethod::Nuts) {
                let settings = sgmcmc::reference::NutsSettings {
                    chains,
                    warmup,
                    draws,
                    seed,
                    dense_laplace_metric: true,
                    ..Default::default()
                };
                let report = posteriordb::nuts_report(&dir, &names, &settings, |row| {
                    outln!(
                        "{:<45} NUTS  max |z| {:5.2}  max sd error {:5.1} %  {}",
                        row.posterior,
                        row.comparison.max_abs_z(),
                        100.0 * row.comparison.max_sd_error(),
                        if row.passes() {
                            "ok"
                        } else {
                            "OUTSIDE TOLERANCE"
                        }
                    );
                })?;
                std::fs::write(
                    out.join("report.json"),
                    serde_json::to_string_pretty(&report)?,
                )?;
                std::fs::write(out.join("table.md"), report.markdown())?;
                let failed = report.rows.iter().filter(|r| !r.passes()).count();
                outln!(
                    "NUTS: {} of {} posteriors within tolerance (means within {} MCSE, sds within {} %); {}",
                    report.rows.len() - failed,
                    report.rows.len(),
                    posteriordb::Z_TOLERANCE,
                    100.0 * posteriordb::SD_TOLERANCE,
                    out.join("table.md").display()
                );
                Some(report)
            } else {
                None
            };
            let sg_methods: Vec<_> = methods.iter().filter_map(|m| m.sg()).collect();
            if !sg_methods.is_empty() {
                let settings = posteriordb::sg::SgSettings {
                    seed,
                    chains,
                    sgld_iterations,
                    baoab_iterations,
                    ..Default::default()
                };
                let report =
                    posteriordb::sg::sg_report(&dir, &names, &sg_methods, &settings, |row| {
                        outln!(
                            "{:<45} {:<38} max |z| {:6.2}  max sd error {:5.1} %  {}",
                            row.posterior,
                            row.method.label(),
                            row.comparison.max_abs_z(),
                            100.0 * row.comparison.max_sd_error(),
                            row.choice()
                        );
                    })?;
                std::fs::write(
                    out.join("sg_report.json"),
                    serde_json::to_string_pretty(&report)?,
                )?;
                std::fs::write(out.join("sg_table.md"), report.markdown(nuts.as_ref()))?;
                let within = report.rows.iter().filter(|r| r.passes()).count();
                outln!(
                    "stochastic-gradient rows: {} of {} within NUTS's tolerance; {}",
                    within,
                    report.rows.len(),
                    out.join("sg_table.md").display()
                );
            }
            Ok(())
        }
        Experiment::MhMnist {
            data_dir,
            out,
            iterations,
            seed,
            proposal_sd,
            batch,
            temperature,
            austerity_tolerance,
            austerity_temperature,
            record_every,
            test_size,
            sensitivity_batches,
            sensitivity_checkpoints,
            sensitivity_repeats,
            chains,
            workshop_minibatches,
        } => {
            let settings = MhMnistSettings {
                chains,
                workshop_minibatches,
                iterations,
                seed,
                proposal_sd,
                batch,
                temperature,
                austerity_tolerance,
                austerity_temperature,
                record_every,
                test_size,
                sensitivity_batches,
                sensitivity_checkpoints,
                sensitivity_repeats,
                ..MhMnistSettings::new(data_dir)
            };
            let started = Instant::now();
            let report = mh_mnist::run(&settings, &mut |line| {
                outln!("[{:7.1} s] {line}", started.elapsed().as_secs_f64());
            })?;
            mh_mnist::write_outputs(&report, &out)?;
            outln!("\n{}", mh_mnist::markdown(&report));
            outln!(
                "{:.1} s; wrote {}/tables.md and report.json",
                report.seconds,
                out.display()
            );
            Ok(())
        }
    }
}
