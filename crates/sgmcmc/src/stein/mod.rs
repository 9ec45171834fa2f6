//! Stein discrepancies: how far a sample is from the target π, using only the score ∇log π.
//!
//! A Stein discrepancy measures sample quality without knowing π's normalising constant or its
//! moments. For a base kernel k, the Langevin Stein kernel k_p(x, y) (reference §4.1) has
//! E_{X~π}[k_p(X, y)] = 0 for every y, so the kernel Stein discrepancy
//! KSD² = E_{X,X'~q}[k_p(X, X')] is zero when the sample distribution q is π and positive otherwise
//! (for the IMQ kernel with β ∈ (−1, 0) it also detects non-convergence; Gorham & Mackey 2017).
//! The finite-set Stein discrepancy (FSSD, Jitkrittum et al. 2017) evaluates the Stein witness
//! at J test locations instead of all pairs, which costs O(n·J·d) rather than O(n²·d). The
//! MAMBA tuner ranks sampler settings by these values (lower is better).
//!
//! Inputs are always a row-major P × D `&[f64]` of draws, the matching P × D scores
//! s_a = ∇log π(x_a) and D. [`evaluate`] computes everything a report needs from
//! [`SteinSettings`]; [`ksd()`], [`linear_ksd`], [`fssd()`] and [`fssd_opt`] are the single
//! pieces; [`full_batch_scores`] computes exact scores at thinned draws.

mod fssd;
mod gof;
mod ksd;
mod scores;

pub use fssd::{
    Fssd, FssdObjective, FssdOpt, FssdOptSettings, ObjectiveGradient, fssd, fssd_opt,
    initial_locations, objective_and_gradient,
};
pub use gof::{KsdTest, KsdTestSettings, ksd_test};
pub use ksd::{KSD_TILE, Ksd, ksd, ksd_with_tile, linear_ksd};
pub use scores::{ThinnedScores, every_kth_row, full_batch_scores};

use crate::rng::ChainRng;
use rand::RngExt;
use rand::SeedableRng;
use std::time::Instant;

/// Errors of the Stein discrepancies: bad shapes, bad values, bad settings.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SteinError {
    /// D = 0.
    #[error("the dimension D must be at least 1")]
    ZeroDimension,
    /// The draws are not a whole number of rows of length D.
    #[error("{what} have {len} values, which is not a multiple of the dimension D = {dim}")]
    Ragged {
        /// "draws", "scores" or "locations".
        what: &'static str,
        /// Number of values given.
        len: usize,
        /// The dimension D.
        dim: usize,
    },
    /// Draws and scores have different numbers of rows.
    #[error("{draws} draws but {scores} score rows (D = {dim}): every draw needs its score")]
    DimensionMismatch {
        /// Rows of draws.
        draws: usize,
        /// Rows of scores.
        scores: usize,
        /// The dimension D.
        dim: usize,
    },
    /// No draws at all.
    #[error("empty sample: no draws were given")]
    EmptySample,
    /// A NaN or infinite value.
    #[error("non-finite value {value} in {what}, row {row}, column {col}")]
    NonFinite {
        /// "draws", "scores" or "locations".
        what: &'static str,
        /// 0-based row.
        row: usize,
        /// 0-based column.
        col: usize,
        /// The offending value.
        value: f64,
    },
    /// A kernel parameter is out of range.
    #[error("invalid kernel parameter: {0}")]
    BadKernel(String),
    /// A statistic needs more points than were given.
    #[error("{what} needs at least {needed} points, but got {got}")]
    TooFewPoints {
        /// The statistic or step that needs them.
        what: &'static str,
        /// Minimum number of points.
        needed: usize,
        /// Number given.
        got: usize,
    },
    /// A setting is out of range.
    #[error("invalid setting: {0}")]
    BadSetting(String),
    /// The sample cannot define the quantity asked for (e.g. every draw is the same point).
    #[error("degenerate sample: {0}")]
    Degenerate(String),
    /// The model's dimension is not the draws' dimension.
    #[error("the model has dimension {model}, but the draws have D = {draws}")]
    ModelDimension {
        /// The model's D.
        model: usize,
        /// The draws' D.
        draws: usize,
    },
}

/// Number of rows of a row-major `values` with `dim` columns, checking the shape and that every
/// value is finite.
pub(crate) fn check_rows(
    what: &'static str,
    values: &[f64],
    dim: usize,
) -> Result<usize, SteinError> {
    if dim == 0 {
        return Err(SteinError::ZeroDimension);
    }
    if !values.len().is_multiple_of(dim) {
        return Err(SteinError::Ragged {
            what,
            len: values.len(),
            dim,
        });
    }
    if let Some(k) = values.iter().position(|v| !v.is_finite()) {
        return Err(SteinError::NonFinite {
            what,
            row: k / dim,
            col: k % dim,
            value: values[k],
        });
    }
    Ok(values.len() / dim)
}

/// Number of points n of a (draws, scores) pair, after checking shapes and finiteness.
pub(crate) fn check_sample(draws: &[f64], scores: &[f64], dim: usize) -> Result<usize, SteinError> {
    let n = check_rows("draws", draws, dim)?;
    let m = check_rows("scores", scores, dim)?;
    if n != m {
        return Err(SteinError::DimensionMismatch {
            draws: n,
            scores: m,
            dim,
        });
    }
    if n == 0 {
        return Err(SteinError::EmptySample);
    }
    Ok(n)
}

/// The inverse multi-quadric kernel k(x, y) = (c² + ‖x − y‖²)^β (reference §4.1).
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ImqKernel {
    c: f64,
    beta: f64,
}

impl Default for ImqKernel {
    /// c = 1, β = −1/2 (MAMBA paper §2.2; Gorham & Mackey 2017).
    fn default() -> Self {
        Self { c: 1.0, beta: -0.5 }
    }
}

impl ImqKernel {
    /// The kernel with scale `c` > 0 and exponent `beta` < 0.
    pub fn new(c: f64, beta: f64) -> Result<Self, SteinError> {
        if !(c.is_finite() && c > 0.0) {
            return Err(SteinError::BadKernel(format!(
                "IMQ scale c must be finite and > 0, got {c}"
            )));
        }
        if !(beta.is_finite() && beta < 0.0) {
            return Err(SteinError::BadKernel(format!(
                "IMQ exponent beta must be finite and < 0, got {beta}"
            )));
        }
        Ok(Self { c, beta })
    }

    /// The scale c.
    pub fn c(&self) -> f64 {
        self.c
    }

    /// The exponent β.
    pub fn beta(&self) -> f64 {
        self.beta
    }

    /// Whether β ∈ (−1, 0), the range in which the KSD is proven to detect non-convergence
    /// (Gorham & Mackey 2017). Other negative β are allowed but should be flagged to the user.
    pub fn detects_non_convergence(&self) -> bool {
        self.beta > -1.0 && self.beta < 0.0
    }
}

/// The Gaussian kernel k(x, y) = exp(−‖x − y‖²/(2σ²)) (reference §4.1).
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct GaussianKernel {
    sigma2: f64,
}

/// Most points the median heuristic looks at (kgof `meddistance(X, subsample=1000)`).
pub const MEDIAN_HEURISTIC_POINTS: usize = 1000;

/// Seed of the median heuristic's subsample (kgof's fixed seed).
const MEDIAN_HEURISTIC_SEED: u64 = 9827;

impl GaussianKernel {
    /// The kernel with squared width σ² > 0.
    pub fn new(sigma2: f64) -> Result<Self, SteinError> {
        if !(sigma2.is_finite() && sigma2 > 0.0) {
            return Err(SteinError::BadKernel(format!(
                "Gaussian squared width sigma2 must be finite and > 0, got {sigma2}"
            )));
        }
        Ok(Self { sigma2 })
    }

    /// The squared width σ².
    pub fn sigma2(&self) -> f64 {
        self.sigma2
    }

    /// The median heuristic: σ² = (median pairwise Euclidean distance)², over at most
    /// [`MEDIAN_HEURISTIC_POINTS`] draws chosen without replacement with a fixed seed; the mean
    /// distance if the median is 0 (kgof `meddistance`).
    pub fn median_heuristic(draws: &[f64], dim: usize) -> Result<Self, SteinError> {
        let n = check_rows("draws", draws, dim)?;
        if n < 2 {
            return Err(SteinError::TooFewPoints {
                what: "the median heuristic",
                needed: 2,
                got: n,
            });
        }
        // Partial Fisher–Yates: the first m entries of `idx` are a uniform subset.
        let m = n.min(MEDIAN_HEURISTIC_POINTS);
        let mut idx: Vec<usize> = (0..n).collect();
        if m < n {
            let mut rng = ChainRng::seed_from_u64(MEDIAN_HEURISTIC_SEED);
            for i in 0..m {
                let j = rng.random_range(i..n);
                idx.swap(i, j);
            }
        }
        let rows = &idx[..m];
        let mut dist = Vec::with_capacity(m * (m - 1) / 2);
        for (k, &a) in rows.iter().enumerate() {
            let xa = &draws[a * dim..(a + 1) * dim];
            for &b in &rows[..k] {
                let xb = &draws[b * dim..(b + 1) * dim];
                let r2: f64 = xa.iter().zip(xb).map(|(p, q)| (p - q) * (p - q)).sum();
                dist.push(r2.sqrt());
            }
        }
        let len = dist.len();
        let (_, &mut hi, _) = dist.select_nth_unstable_by(len / 2, f64::total_cmp);
        let med = if len % 2 == 1 {
            hi
        } else {
            // numpy's median of an even count: the mean of the two middle values.
            let lo = dist[..len / 2]
                .iter()
                .copied()
                .fold(f64::NEG_INFINITY, f64::max);
            0.5 * (lo + hi)
        };
        let width = if med > 0.0 {
            med
        } else {
            dist.iter().sum::<f64>() / len as f64
        };
        if width <= 0.0 {
            return Err(SteinError::Degenerate(
                "every draw is the same point, so the median heuristic gives no width".into(),
            ));
        }
        Self::new(width * width)
    }
}

/// A base kernel of the Langevin Stein kernel.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(tag = "kind", rename_all = "lowercase"))]
pub enum Kernel {
    /// Inverse multi-quadric (the default, c = 1, β = −1/2).
    Imq(ImqKernel),
    /// Gaussian.
    Gaussian(GaussianKernel),
}

impl Default for Kernel {
    fn default() -> Self {
        Kernel::Imq(ImqKernel::default())
    }
}

impl Kernel {
    /// Validates the parameters again (the constructors already do; this guards values that
    /// were changed since).
    pub(crate) fn validate(&self) -> Result<(), SteinError> {
        match *self {
            Kernel::Imq(k) => ImqKernel::new(k.c, k.beta).map(|_| ()),
            Kernel::Gaussian(k) => GaussianKernel::new(k.sigma2).map(|_| ()),
        }
    }
}

/// The kernel as a run file or CLI names it; [`KernelSettings::resolve`] turns it into a
/// [`Kernel`] (validated, with the median heuristic for a Gaussian width not given).
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)
)]
pub enum KernelSettings {
    /// IMQ (c² + ‖r‖²)^β.
    Imq {
        /// Scale c (default 1).
        #[cfg_attr(feature = "serde", serde(default = "default_c"))]
        c: f64,
        /// Exponent β (default −1/2).
        #[cfg_attr(feature = "serde", serde(default = "default_beta"))]
        beta: f64,
    },
    /// Gaussian exp(−‖r‖²/(2σ²)).
    Gaussian {
        /// Squared width σ²; the median heuristic when absent.
        #[cfg_attr(feature = "serde", serde(default))]
        sigma2: Option<f64>,
    },
}

fn default_c() -> f64 {
    1.0
}

fn default_beta() -> f64 {
    -0.5
}

impl Default for KernelSettings {
    fn default() -> Self {
        KernelSettings::Imq {
            c: default_c(),
            beta: default_beta(),
        }
    }
}

impl KernelSettings {
    /// The kernel for this sample (the median heuristic runs on `draws` if needed).
    pub fn resolve(&self, draws: &[f64], dim: usize) -> Result<Kernel, SteinError> {
        Ok(match *self {
            KernelSettings::Imq { c, beta } => Kernel::Imq(ImqKernel::new(c, beta)?),
            KernelSettings::Gaussian { sigma2: Some(s) } => {
                Kernel::Gaussian(GaussianKernel::new(s)?)
            }
            KernelSettings::Gaussian { sigma2: None } => {
                Kernel::Gaussian(GaussianKernel::median_heuristic(draws, dim)?)
            }
        })
    }
}

/// Everything [`evaluate`] needs: the KSD kernel and, optionally, FSSD-opt.
#[derive(Debug, Clone, PartialEq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct SteinSettings {
    /// Base kernel of the KSD (default IMQ, c = 1, β = −1/2).
    pub kernel: KernelSettings,
    /// FSSD-opt as well (off when absent).
    pub fssd: Option<FssdSettings>,
}

/// FSSD-opt settings for [`evaluate`].
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct FssdSettings {
    /// Base kernel of the FSSD. Default: Gaussian, its width starting at the draws' median
    /// distance (optimised with the locations). The MAMBA code's IMQ (c = 1, β = −1/2) has a
    /// fixed width that is flat across a narrow posterior and ranks far-off samples first
    /// (docs/experiments/mamba_fssd.md); it stays available as `{ kind = "imq" }`.
    pub kernel: KernelSettings,
    /// Locations, optimiser and split (a nested table `opt`).
    pub opt: FssdOptSettings,
    /// Seed of the split and the initial locations.
    pub seed: u64,
}

impl Default for FssdSettings {
    fn default() -> Self {
        Self {
            kernel: KernelSettings::Gaussian { sigma2: None },
            opt: FssdOptSettings::default(),
            seed: 0,
        }
    }
}

/// Stream (of [`crate::rng::stream`]) FSSD-opt draws from in [`evaluate`], far from chain numbers.
const FSSD_STREAM: u64 = (1 << 20) + 16;

/// The KSD and (optionally) FSSD-opt of one sample, as [`evaluate`] returns it.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct SteinReport {
    /// Number of draws P.
    pub draws: usize,
    /// Dimension D.
    pub dim: usize,
    /// The KSD's base kernel (with the resolved Gaussian width).
    pub kernel: Kernel,
    /// For the IMQ kernel: whether β ∈ (−1, 0), where the KSD provably detects
    /// non-convergence (false is a warning, not an error).
    pub detects_non_convergence: Option<bool>,
    /// The KSD values (reported KSD = sqrt(KSD²_V), reference §4.2).
    pub ksd: Ksd,
    /// Seconds the KSD took.
    pub ksd_seconds: f64,
    /// FSSD-opt, if asked for.
    pub fssd: Option<FssdReport>,
    /// Seconds for everything.
    pub seconds: f64,
    /// A warning for the caller to show: set when the values rest on fewer than
    /// [`FEW_DRAWS`] draws.
    pub warning: Option<String>,
}

/// Below this many draws a discrepancy is mostly its own sampling noise (the V-statistic's
/// bias alone is O(1/P)); [`evaluate`] then sets [`SteinReport::warning`].
pub const FEW_DRAWS: usize = 100;

/// FSSD-opt part of a [`SteinReport`].
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct FssdReport {
    /// The metric handed to a tuner: FSSD_V = sqrt(FSSD²_V) on the evaluation split (≥ 0).
    pub fssd: f64,
    /// FSSD²_V on the evaluation split.
    pub squared_v: f64,
    /// FSSD²_U on the evaluation split (can be negative).
    pub squared_u: f64,
    /// The kernel at the optimum (the Gaussian width may have been optimised).
    pub kernel: Kernel,
    /// Number of test locations J.
    pub num_locations: usize,
    /// Points the locations were optimised on.
    pub train_points: usize,
    /// Points the value was computed on.
    pub test_points: usize,
    /// Objective on the training points at the initial and the returned locations.
    pub initial_objective: f64,
    /// See `initial_objective`.
    pub final_objective: f64,
    /// Seconds FSSD-opt took.
    pub seconds: f64,
}

/// KSD (and FSSD-opt if `settings.fssd` is set) of `draws` with `scores` (both P × D row-major).
pub fn evaluate(
    draws: &[f64],
    scores: &[f64],
    dim: usize,
    settings: &SteinSettings,
) -> Result<SteinReport, SteinError> {
    let start = Instant::now();
    let n = check_sample(draws, scores, dim)?;
    let kernel = settings.kernel.resolve(draws, dim)?;
    let t = Instant::now();
    let ksd_value = ksd(draws, scores, dim, &kernel)?;
    let ksd_seconds = t.elapsed().as_secs_f64();
    let fssd = match &settings.fssd {
        None => None,
        Some(f) => {
            let t = Instant::now();
            let fk = f.kernel.resolve(draws, dim)?;
            let mut rng = crate::rng::stream(f.seed, FSSD_STREAM);
            let opt = fssd_opt(draws, scores, dim, &fk, &f.opt, &mut rng)?;
            Some(FssdReport {
                fssd: opt.value.value,
                squared_v: opt.value.squared_v,
                squared_u: opt.value.squared_u,
                kernel: opt.kernel,
                num_locations: f.opt.num_locations,
                train_points: opt.train_points,
                test_points: opt.test_points,
                initial_objective: opt.initial_objective,
                final_objective: opt.final_objective,
                seconds: t.elapsed().as_secs_f64(),
            })
        }
    };
    Ok(SteinReport {
        draws: n,
        dim,
        kernel,
        detects_non_convergence: match kernel {
            Kernel::Imq(k) => Some(k.detects_non_convergence()),
            Kernel::Gaussian(_) => None,
        },
        ksd: ksd_value,
        ksd_seconds,
        fssd,
        seconds: start.elapsed().as_secs_f64(),
        warning: (n < FEW_DRAWS).then(|| {
            format!(
                "the discrepancy rests on only {n} draws; below {FEW_DRAWS} it is mostly noise \
                 (keep more draws, or thin less)"
            )
        }),
    })
}
