//! The coreset run file of `sgmcmc coreset CONFIG` (reference §7): `[data]` and `[model]` as in
//! a run file, the `[coreset]` table, an optional `[sampler]` (for `kernel = { kind = "sampler" }`)
//! and an optional `[evaluation] reference` (the z-score metric along the run).

use super::{ConfigError, DataConfig, EvaluationConfig, ModelConfig, SamplerTable};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// A whole coreset run file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoresetFile {
    /// Where the data come from.
    pub data: DataConfig,
    /// The model and its prior.
    pub model: ModelConfig,
    /// Coreset size, optimiser, kernel, iterations.
    pub coreset: CoresetConfig,
    /// The sampler driven by full coreset gradients, for `kernel = { kind = "sampler" }`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampler: Option<SamplerTable>,
    /// `reference`: moments to track the average squared z-score against: a reference.json (as
    /// `sgmcmc reference` writes it), or the bike-sharing directory for its shipped Stan moments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluation: Option<EvaluationConfig>,
}

/// The `[coreset]` table (defaults: the tuning-free paper's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoresetConfig {
    /// Seed of every random stream (coreset points, subsamples, chains).
    #[serde(default)]
    pub seed: u64,
    /// Coreset size M.
    pub size: usize,
    /// Chains K (≥ 2).
    #[serde(default = "default_chains")]
    pub chains: usize,
    /// Subsample S of the full-data term (default M).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subsample: Option<usize>,
    /// Optimisation iterations.
    #[serde(default = "default_iterations")]
    pub iterations: usize,
    /// Draws kept after training, pooled over chains.
    #[serde(default = "default_draws")]
    pub draws: usize,
    /// `"uniform"` (default) or `"stratified"` (class-balanced, for 0/1 labels).
    #[serde(default)]
    pub construction: Construction,
    /// `"uniform"` (default) or `"cyclic_scan"` (the reference code's).
    #[serde(default)]
    pub subsample_scheme: SchemeConfig,
    /// Divide ĝ by its per-coordinate curvature (compatibility option).
    #[serde(default)]
    pub newton_correction: bool,
    /// The weight optimiser.
    #[serde(default)]
    pub optimiser: OptimiserConfig,
    /// The Markov kernel.
    #[serde(default)]
    pub kernel: KernelConfig,
    /// The hot-start gate.
    #[serde(default)]
    pub hot_start: HotStartConfig,
    /// Chain starts: `"standard_normal"` (default; the reference's N(0, I)), `"prior"` or
    /// `"zeros"`. The exact Gaussian kernel always starts at an exact draw from π_w.
    #[serde(default)]
    pub init: CoresetInit,
    /// Record the metric every this many iterations.
    #[serde(default = "default_record_every")]
    pub record_every: usize,
    /// The longest time, in seconds, between two checkpoints of the run's whole state when it
    /// writes to an output directory (`sgmcmc coreset --out`): a killed run loses at most this
    /// much, and `--resume` continues it.
    #[serde(default = "default_checkpoint_seconds")]
    pub checkpoint_seconds: f64,
}

fn default_chains() -> usize {
    2
}
fn default_iterations() -> usize {
    200_000
}
fn default_draws() -> usize {
    10_000
}
fn default_record_every() -> usize {
    100
}
fn default_checkpoint_seconds() -> f64 {
    super::DEFAULT_CHECKPOINT_SECONDS
}

/// How the coreset points are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Construction {
    /// Uniformly without replacement.
    #[default]
    Uniform,
    /// ⌈M/2⌉ positives (or all of them) and the rest negatives.
    Stratified,
}

/// How the subsample of the full-data term is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SchemeConfig {
    /// Uniformly without replacement.
    #[default]
    Uniform,
    /// The next S points of a cyclic scan in file order.
    CyclicScan,
}

/// Chain starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CoresetInit {
    /// N(0, I).
    #[default]
    StandardNormal,
    /// A draw from the model's prior.
    Prior,
    /// θ = 0.
    Zeros,
}

/// The weight optimiser (reference §7.4, §7.6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum OptimiserConfig {
    /// Hot DoG (Algorithm 2).
    HotDog {
        /// Initial step r.
        #[serde(default = "default_r")]
        r: f64,
        /// The reference code's d bias correction 1 − β₁ᶜ (compatibility option).
        #[serde(default)]
        reference_d_correction: bool,
    },
    /// ADAM with γ_τ = α₀/√τ.
    Adam {
        /// α₀.
        learning_rate: f64,
    },
    /// DoG (Ivgi et al. 2023; paper Eq. 5).
    Dog {
        /// Initial step r.
        #[serde(default = "default_r")]
        r: f64,
    },
    /// DoWG (Khaled et al. 2023; paper Eq. 5).
    Dowg {
        /// Initial step r.
        #[serde(default = "default_r")]
        r: f64,
        /// Keep r in the running maximum (the reference code's form).
        #[serde(default)]
        keep_r0_in_max: bool,
    },
    /// Prodigy ADAM with cosine annealing (period 100).
    Prodigy {
        /// Initial lower bound d₀.
        #[serde(default = "default_d0")]
        d0: f64,
    },
    /// D-Adaptation SGD.
    DadaptSgd {
        /// γ.
        #[serde(default = "default_gamma")]
        gamma: f64,
        /// Initial d₀.
        #[serde(default = "default_d0")]
        d0: f64,
    },
}

fn default_d0() -> f64 {
    1e-6
}
fn default_gamma() -> f64 {
    1.0
}

fn default_r() -> f64 {
    1e-3
}

impl Default for OptimiserConfig {
    fn default() -> Self {
        OptimiserConfig::HotDog {
            r: default_r(),
            reference_d_correction: false,
        }
    }
}

/// The π_w-invariant kernel (reference §7.7).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum KernelConfig {
    /// The exact AR(1) kernel of the Gaussian location model (Σ = I).
    ExactGaussian {
        /// Autocorrelation β ∈ [0, 1).
        #[serde(default = "default_beta")]
        beta: f64,
    },
    /// Hit-and-run slice sampling with doubling (Neal 2003), any model.
    Slice {
        /// Initial interval width w.
        #[serde(default = "default_width")]
        width: f64,
        /// At most this many doublings p.
        #[serde(default = "default_max_doublings")]
        max_doublings: usize,
        /// Passes per kernel step.
        #[serde(default = "default_passes")]
        passes: usize,
        /// Shrinkage proposals before the step is an error.
        #[serde(default = "default_max_shrinks")]
        max_shrinks: usize,
    },
    /// The `[sampler]` table's sampler on full coreset gradients.
    Sampler,
    /// The Gibbs sampler of the spike-and-slab regression (`[model] kind = "sparse_regression"`).
    Gibbs,
}

fn default_width() -> f64 {
    10.0
}
fn default_max_doublings() -> usize {
    20
}
fn default_passes() -> usize {
    3
}
fn default_max_shrinks() -> usize {
    1024
}

fn default_beta() -> f64 {
    0.8
}

impl Default for KernelConfig {
    fn default() -> Self {
        KernelConfig::Slice {
            width: default_width(),
            max_doublings: default_max_doublings(),
            passes: default_passes(),
            max_shrinks: default_max_shrinks(),
        }
    }
}

/// The `hot_start` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HotStartConfig {
    /// Gate the optimiser on the hot-start test.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Threshold c of the median statistic.
    #[serde(default = "default_threshold")]
    pub threshold: f64,
    /// Test every this many iterations once i ≥ 3·dim.
    #[serde(default = "default_check_every")]
    pub check_every: usize,
    /// Warm-up ends here whatever the test says.
    #[serde(default = "default_max_warmup")]
    pub max_warmup: usize,
    /// Trace log π_w with the prior (the reference code's).
    #[serde(default)]
    pub trace_includes_prior: bool,
    /// Never train when the cap is reached without a pass (the reference code's behaviour).
    #[serde(default)]
    pub never_train_without_hot_start: bool,
}

fn default_true() -> bool {
    true
}
fn default_threshold() -> f64 {
    0.5
}
fn default_check_every() -> usize {
    30
}
fn default_max_warmup() -> usize {
    10_000
}

impl Default for HotStartConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            threshold: default_threshold(),
            check_every: default_check_every(),
            max_warmup: default_max_warmup(),
            trace_includes_prior: false,
            never_train_without_hot_start: false,
        }
    }
}

impl CoresetFile {
    /// Parse a coreset run file from text; `path` names it in errors.
    pub fn from_toml(text: &str, path: &str) -> Result<Self, ConfigError> {
        super::parse_toml(text, path)
    }

    /// Read and parse a coreset run file; relative paths resolve against its directory.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = super::read_text(path)?;
        let mut cfg = Self::from_toml(&text, &path.display().to_string())?;
        let base = path.parent().unwrap_or(Path::new("."));
        super::resolve_data_paths(&mut cfg.data, base);
        if let Some(ev) = &mut cfg.evaluation
            && let Some(p) = &mut ev.reference
            && p.is_relative()
        {
            *p = base.join(&*p);
        }
        Ok(cfg)
    }
}
