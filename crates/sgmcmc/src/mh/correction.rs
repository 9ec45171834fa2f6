//! The correction distribution C_σ (reference §6.3–6.4): probability masses u_j on the grid
//! y_j = j·h, j = −N_g..N_g, such that N(0, σ²) ⊛ Σ_j u_j·δ(y_j) ≈ the standard logistic law,
//! i.e. Σ_j u_j·Φ((x − y_j)/σ) ≈ 1/(1 + e^(−x)).
//!
//! - [`CorrectionTable::ridge`]: ridge least squares (§6.3(a), UAI version; the default);
//! - [`CorrectionTable::default_table`]: the N_g = 4000, σ = 1, λ = 10 ridge table, embedded in
//!   the binary (`xcorr_default.bin`, written by `examples/xcorr_table.rs`);
//! - [`CorrectionTable::fft_bank_curve`] and [`CorrectionBank`]: the workshop's FFT
//!   deconvolution and its bank of 100 curves (§6.3(b), `mh_workshop_fft_bank`);
//! - [`CorrectionTable::sample`]: inverse CDF with binary search and linear interpolation (§6.4).

use std::sync::OnceLock;

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt;
use faer::linalg::matmul::dot::inner_prod;
use faer::{ColRef, Conj, MatMut, Par, RowRef};
use rand::RngExt;
use rayon::prelude::*;
use realfft::RealFftPlanner;
use realfft::num_complex::Complex;

use crate::cpu::clear_upper_vector_state;
use crate::rng::ChainRng;

/// π/√3 ≈ 1.8138, the standard deviation of the standard logistic law: σ must stay below it,
/// since N(0, σ²) must be a part of that law (§6.1).
pub const MAX_SIGMA: f64 = 1.813_799_364_234_217_8;

/// Largest N_g [`CorrectionTable::ridge`] accepts: its normal matrix holds (2N_g + 1)² f64
/// (3.2 GB at this limit; 512 MB at the default N_g = 4000).
pub const MAX_HALF_POINTS: usize = 10_000;

/// The embedded default table: 8001 little-endian f64 masses u⁺ of
/// `CorrectionTable::ridge(&RidgeTableSpec::default())`, written by
/// `cargo run --release --example xcorr_table -- --out src/mh/xcorr_default.bin`.
static DEFAULT_TABLE_BYTES: &[u8] = include_bytes!("xcorr_default.bin");

/// Errors of the correction-table constructors; each names the offending value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CorrectionError {
    /// σ outside (0, π/√3).
    #[error(
        "σ = {0} is outside (0, π/√3 ≈ 1.8138): N(0, σ²) cannot be a part of the standard \
         logistic law"
    )]
    Sigma(f64),
    /// N_g = 0 or above [`MAX_HALF_POINTS`].
    #[error(
        "half_points N_g = {0} must be in 1..={MAX_HALF_POINTS} (the support has 2N_g + 1 \
         points; the dense normal matrix (2N_g + 1)²)"
    )]
    HalfPoints(usize),
    /// λ not positive (or not finite).
    #[error("ridge penalty λ = {0} must be positive and finite")]
    Lambda(f64),
    /// V not positive (or not finite).
    #[error("support range V = {0} must be positive and finite")]
    Range(f64),
    /// The Cholesky factorisation of MᵀM + λI failed.
    #[error(
        "the ridge normal matrix MᵀM + λI is not numerically positive definite (pivot {pivot}, \
         λ = {lambda}); increase λ"
    )]
    NotPositiveDefinite {
        /// Index of the failing pivot.
        pivot: usize,
        /// The penalty used.
        lambda: f64,
    },
    /// No positive finite mass left (after clipping), or a non-finite mass.
    #[error(
        "the masses sum to {sum} (σ = {sigma}): a table needs finite masses with a positive sum"
    )]
    Masses {
        /// Σ u⁺.
        sum: f64,
        /// σ of the table.
        sigma: f64,
    },
    /// A table file whose length is not an odd positive number of f64.
    #[error(
        "a table file of {bytes} bytes: expected 2N_g + 1 = {expected} little-endian f64 masses \
         ({} bytes)", 8 * expected
    )]
    TableBytes {
        /// Length of the file.
        bytes: usize,
        /// Number of masses expected.
        expected: usize,
    },
    /// An empty bank, or bank curves not sorted by σ.
    #[error("a correction bank needs at least one curve, sorted by increasing σ")]
    Bank,
}

/// Settings of the ridge table (§6.3(a)): support y_j = j·h, j = −N_g..N_g, h = V/N_g; fit
/// points x_i = i·h, i = −2N_g..2N_g; penalty λ.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RidgeTableSpec {
    /// N_g: the support has 2N_g + 1 points.
    pub half_points: usize,
    /// σ of the Gaussian part, in (0, π/√3).
    pub sigma: f64,
    /// λ, the ridge penalty.
    pub lambda: f64,
    /// V: the support is [−V, V].
    pub range: f64,
}

impl Default for RidgeTableSpec {
    /// The paper's table: N_g = 4000, σ = 1, λ = 10, V = 20 (h = 0.005, 8001 masses).
    fn default() -> Self {
        Self {
            half_points: 4000,
            sigma: 1.0,
            lambda: 10.0,
            range: 20.0,
        }
    }
}

impl RidgeTableSpec {
    /// Checks σ ∈ (0, π/√3), 1 ≤ N_g ≤ [`MAX_HALF_POINTS`], λ > 0 and V > 0.
    pub fn validate(&self) -> Result<(), CorrectionError> {
        validate_sigma(self.sigma)?;
        if self.half_points == 0 || self.half_points > MAX_HALF_POINTS {
            return Err(CorrectionError::HalfPoints(self.half_points));
        }
        if !(self.lambda > 0.0 && self.lambda.is_finite()) {
            return Err(CorrectionError::Lambda(self.lambda));
        }
        if !(self.range > 0.0 && self.range.is_finite()) {
            return Err(CorrectionError::Range(self.range));
        }
        Ok(())
    }

    /// The grid step h = V/N_g.
    pub fn step(&self) -> f64 {
        self.range / self.half_points as f64
    }
}

fn validate_sigma(sigma: f64) -> Result<(), CorrectionError> {
    if sigma > 0.0 && sigma < MAX_SIGMA {
        Ok(())
    } else {
        Err(CorrectionError::Sigma(sigma))
    }
}

/// A correction distribution as a mass table (§6.3–6.4): masses u_j ≥ 0 at y_j = j·h,
/// j = −N_g..N_g, and the cumulative masses F_k the sampler inverts.
///
/// By default F is divided by its last value so that it ends at 1 ([lib]);
/// [`CorrectionTable::unnormalised`] keeps the raw cumulative sums (`mh_xcorr_unnormalised`,
/// the references: the ≈ 0.09 % of mass above 1 is never drawn).
#[derive(Clone, PartialEq)]
pub struct CorrectionTable {
    sigma: f64,
    step: f64,
    half_points: usize,
    masses: Vec<f64>,
    cumulative: Vec<f64>,
    normalised: bool,
    /// Sampling spreads u_k over [y_k − h/2, y_k + h/2] (default) rather than the references'
    /// (y_{k−1}, y_k].
    centred: bool,
    mass_sum: f64,
    linf: f64,
}

impl std::fmt::Debug for CorrectionTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CorrectionTable")
            .field("sigma", &self.sigma)
            .field("step", &self.step)
            .field("half_points", &self.half_points)
            .field("normalised", &self.normalised)
            .field("mass_sum", &self.mass_sum)
            .field("linf", &self.linf)
            .finish_non_exhaustive()
    }
}

/// The table for `sigma`: the embedded default for σ = 1; any other σ is built once per
/// process with the default grid (N_g = 4000, λ = 10, V = 20; about 5 s) and kept for the
/// process's lifetime, so every chain of a run shares one table.
pub fn correction_table(sigma: f64) -> Result<&'static CorrectionTable, CorrectionError> {
    if sigma == 1.0 {
        return Ok(CorrectionTable::default_table());
    }
    type Built = Vec<(u64, &'static CorrectionTable)>;
    static BUILT: std::sync::OnceLock<std::sync::Mutex<Built>> = std::sync::OnceLock::new();
    let mut built = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((_, table)) = built.iter().find(|(bits, _)| *bits == sigma.to_bits()) {
        return Ok(table);
    }
    let table = CorrectionTable::ridge(&RidgeTableSpec {
        sigma,
        ..RidgeTableSpec::default()
    })?;
    let table: &'static CorrectionTable = Box::leak(Box::new(table));
    built.push((sigma.to_bits(), table));
    Ok(table)
}

/// Φ, the standard normal CDF (accurate in both tails through erfc).
#[inline]
fn normal_cdf(z: f64) -> f64 {
    0.5 * statrs::function::erf::erfc(-z * std::f64::consts::FRAC_1_SQRT_2)
}

/// The standard logistic CDF 1/(1 + e^(−x)).
#[inline]
fn logistic_cdf(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// Σ aᵢ·bᵢ (faer's SIMD dot product).
#[inline]
fn dot(a: &[f64], b: &[f64]) -> f64 {
    inner_prod(
        RowRef::from_slice(a),
        Conj::No,
        ColRef::from_slice(b),
        Conj::No,
    )
}

/// The 6N_g + 1 distinct entries of the design matrix: g[k] = Φ((k − 3N_g)·h/σ), so that
/// M_ij = Φ((x_i − y_j)/σ) = g[(i − j) + 3N_g] (M is Toeplitz, §6.3(a)).
fn design_values(half_points: usize, step: f64, sigma: f64) -> Vec<f64> {
    let n3 = 3 * half_points as i64;
    (-n3..=n3)
        .map(|k| normal_cdf(k as f64 * step / sigma))
        .collect()
}

/// L∞ = max_i |(M·u)_i − v_i| over the 4N_g + 1 fit points x_i = i·h, i = −2N_g..2N_g, with
/// `g` from [`design_values`]. Row r = i + 2N_g of M, read against column c = j + N_g, is
/// g[r − c + 2N_g]; reversing g makes each row one contiguous dot product.
fn fit_linf(masses: &[f64], g: &[f64], half_points: usize, step: f64) -> f64 {
    let n = masses.len();
    let n2 = 2 * half_points;
    let reversed: Vec<f64> = g.iter().rev().copied().collect();
    // g[r − c + 2N] = reversed[6N − (r − c + 2N)] = reversed[4N − r + c].
    let fitted: Vec<f64> = (0..=2 * n2)
        .map(|r| dot(&reversed[2 * n2 - r..2 * n2 - r + n], masses))
        .collect();
    clear_upper_vector_state();
    fitted
        .iter()
        .enumerate()
        .map(|(r, m)| (m - logistic_cdf((r as f64 - n2 as f64) * step)).abs())
        .fold(0.0, f64::max)
}

impl CorrectionTable {
    /// A table from masses u_j ≥ 0 at y_j = (j − N_g)·h (`masses.len()` = 2N_g + 1), normalised,
    /// with the fit quality L∞ of §6.3(a) computed for `sigma`.
    fn from_masses(masses: Vec<f64>, sigma: f64, step: f64) -> Result<Self, CorrectionError> {
        debug_assert!(masses.len() % 2 == 1);
        let half_points = masses.len() / 2;
        let mass_sum: f64 = masses.iter().sum();
        if !(mass_sum > 0.0 && mass_sum.is_finite()) || masses.iter().any(|&u| u < 0.0) {
            return Err(CorrectionError::Masses {
                sum: mass_sum,
                sigma,
            });
        }
        let g = design_values(half_points, step, sigma);
        let linf = fit_linf(&masses, &g, half_points, step);
        let mut table = Self {
            sigma,
            step,
            half_points,
            cumulative: Vec::new(),
            masses,
            normalised: true,
            centred: true,
            mass_sum,
            linf,
        };
        table.set_cumulative(true);
        Ok(table)
    }

    /// F_k = Σ_{j≤k} u_j, divided by its last value when `normalised` (the last entry is then
    /// exactly 1).
    fn set_cumulative(&mut self, normalised: bool) {
        let mut running = 0.0;
        self.cumulative = self
            .masses
            .iter()
            .map(|u| {
                running += u;
                running
            })
            .collect();
        if normalised {
            let total = running;
            self.cumulative.iter_mut().for_each(|f| *f /= total);
            if let Some(last) = self.cumulative.last_mut() {
                *last = 1.0;
            }
        }
        self.normalised = normalised;
    }

    /// Ridge least squares (§6.3(a)): M_ij = Φ((x_i − y_j)/σ) on the 4N_g + 1 fit points,
    /// v_i = 1/(1 + e^(−x_i)), u* = (MᵀM + λI)⁻¹Mᵀv by Cholesky (faer, one thread, so the
    /// result does not depend on the thread count), u⁺ = max(u*, 0).
    ///
    /// MᵀM is built in O(N_g²) from its Toeplitz structure: its first column by dot products,
    /// then (MᵀM)_{a+1,b+1} = (MᵀM)_{a,b} + g_{2N_g−1−a}·g_{2N_g−1−b} − g_{6N_g−a}·g_{6N_g−b}
    /// (shifting both columns one step moves one fit row in and one out): 0.2 s for N_g = 4000.
    /// The dense solve is O(N_g³): 4.5 s in all for N_g = 4000 (0.7 s for N_g = 2000) on one
    /// core here; it needs 8·(2N_g + 1)² bytes.
    pub fn ridge(spec: &RidgeTableSpec) -> Result<Self, CorrectionError> {
        spec.validate()?;
        let half = spec.half_points;
        let (n2, n) = (2 * half, 2 * half + 1);
        let fit = 2 * n2 + 1;
        let step = spec.step();
        let g = design_values(half, step, spec.sigma);
        let v: Vec<f64> = (0..fit)
            .map(|r| logistic_cdf((r as f64 - n2 as f64) * step))
            .collect();
        // Column c of M (rows r = 0..4N_g): g[r − c + 2N_g].
        let column = |c: usize| &g[n2 - c..n2 - c + fit];

        // Lower triangle of A = MᵀM + λI, column-major.
        let mut a = vec![0.0; n * n];
        let first = column(0);
        for (r, a_r0) in a[..n].iter_mut().enumerate() {
            *a_r0 = dot(column(r), first);
        }
        // p[a] = g[2N_g − 1 − a] (fit row −1 entering), q[a] = g[6N_g − a] (row 4N_g leaving).
        let p = |i: usize| g[n2 - 1 - i];
        let q = |i: usize| g[3 * n2 - i];
        for c in 1..n {
            let (prev, cur) = a.split_at_mut(c * n);
            let prev = &prev[(c - 1) * n..];
            let cur = &mut cur[..n];
            let (pc, qc) = (p(c - 1), q(c - 1));
            for r in c..n {
                cur[r] = prev[r - 1] + (p(r - 1) * pc - q(r - 1) * qc);
            }
        }
        for d in 0..n {
            a[d * n + d] += spec.lambda;
        }
        let mut rhs: Vec<f64> = (0..n).map(|c| dot(column(c), &v)).collect();

        let mut buffer = MemBuffer::new(llt::factor::cholesky_in_place_scratch::<f64>(
            n,
            Par::Seq,
            Default::default(),
        ));
        let mut mat = MatMut::from_column_major_slice_mut(&mut a, n, n);
        llt::factor::cholesky_in_place(
            mat.as_mut(),
            Default::default(),
            Par::Seq,
            MemStack::new(&mut buffer),
            Default::default(),
        )
        .map_err(|e| match e {
            llt::factor::LltError::NonPositivePivot { index } => {
                CorrectionError::NotPositiveDefinite {
                    pivot: index,
                    lambda: spec.lambda,
                }
            }
        })?;
        llt::solve::solve_in_place(
            mat.as_ref(),
            MatMut::from_column_major_slice_mut(&mut rhs, n, 1),
            Par::Seq,
            MemStack::new(&mut MemBuffer::new(
                llt::solve::solve_in_place_scratch::<f64>(n, 1, Par::Seq),
            )),
        );
        clear_upper_vector_state();
        drop(a);
        let masses: Vec<f64> = rhs.into_iter().map(|u| u.max(0.0)).collect();
        Self::from_masses(masses, spec.sigma, step)
    }

    /// The default table (N_g = 4000, σ = 1, λ = 10, V = 20), parsed once from the asset
    /// embedded in the binary; `examples/xcorr_table.rs` rebuilds it.
    pub fn default_table() -> &'static CorrectionTable {
        static TABLE: OnceLock<CorrectionTable> = OnceLock::new();
        TABLE.get_or_init(|| {
            Self::from_le_bytes(DEFAULT_TABLE_BYTES, &RidgeTableSpec::default())
                .expect("the embedded default table is 8001 valid masses (tested)")
        })
    }

    /// A table from 2N_g + 1 little-endian f64 masses (the format of [`Self::to_le_bytes`]) for
    /// the grid and σ of `spec` (its λ is not used).
    pub fn from_le_bytes(bytes: &[u8], spec: &RidgeTableSpec) -> Result<Self, CorrectionError> {
        spec.validate()?;
        let expected = 2 * spec.half_points + 1;
        if bytes.len() != 8 * expected {
            return Err(CorrectionError::TableBytes {
                bytes: bytes.len(),
                expected,
            });
        }
        let masses = bytes
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().expect("chunks of 8 bytes")))
            .collect();
        Self::from_masses(masses, spec.sigma, spec.step())
    }

    /// The masses u⁺ as little-endian f64 (2N_g + 1 of them).
    pub fn to_le_bytes(&self) -> Vec<u8> {
        self.masses.iter().flat_map(|u| u.to_le_bytes()).collect()
    }

    /// One curve of the workshop's FFT bank (§6.3(b), `mh_workshop_fft_bank`): on [−10, 10]
    /// with 4001 points (h = 0.005), the DFT of the logistic density divided by that of the
    /// N(0, σ²) density, only the zero bin and the nine lowest on each side kept, inverted,
    /// clipped at 0, normalised by the trapezoid rule and integrated to a CDF, plus a ramp
    /// 10⁻⁶·max·i/length, renormalised. The masses are the CDF's increments, so the sampler's
    /// linear interpolation reproduces that CDF. Accurate only for small σ (CDF error ≈ 1e-3
    /// at σ = 0.8, ≈ 1e-2 at σ = 1).
    pub fn fft_bank_curve(sigma: f64) -> Result<Self, CorrectionError> {
        validate_sigma(sigma)?;
        const HALF: usize = 2000;
        const STEP: f64 = 0.005;
        const KEPT_BINS: usize = 9;
        let len = 2 * HALF + 1;
        // The logistic density centred on index HALF; the normal density centred on index 0
        // (wrapped), so the quotient of the transforms is again centred on index HALF.
        let mut logistic: Vec<f64> = (0..len)
            .map(|k| {
                let e = (-((k as f64 - HALF as f64) * STEP).abs()).exp();
                e / ((1.0 + e) * (1.0 + e))
            })
            .collect();
        let norm = 1.0 / (sigma * (2.0 * std::f64::consts::PI).sqrt());
        let mut normal: Vec<f64> = (0..len)
            .map(|k| {
                let d = if k <= HALF {
                    k as f64
                } else {
                    k as f64 - len as f64
                } * STEP;
                norm * (-0.5 * (d / sigma).powi(2)).exp()
            })
            .collect();
        let mut planner = RealFftPlanner::<f64>::new();
        let forward = planner.plan_fft_forward(len);
        let inverse = planner.plan_fft_inverse(len);
        let mut spec_log = forward.make_output_vec();
        let mut spec_norm = forward.make_output_vec();
        forward
            .process(&mut logistic, &mut spec_log)
            .expect("buffer sizes from the plan");
        forward
            .process(&mut normal, &mut spec_norm)
            .expect("buffer sizes from the plan");
        for (k, (l, n)) in spec_log.iter_mut().zip(&spec_norm).enumerate() {
            *l = if k <= KEPT_BINS {
                *l / *n
            } else {
                Complex::new(0.0, 0.0)
            };
        }
        // The zero bin of a real signal's transform is real; the quotient keeps it so.
        spec_log[0].im = 0.0;
        let mut density = inverse.make_output_vec();
        inverse
            .process(&mut spec_log, &mut density)
            .expect("buffer sizes from the plan");
        density.iter_mut().for_each(|c| *c = c.max(0.0));
        let area = STEP * (density.iter().sum::<f64>() - 0.5 * (density[0] + density[len - 1]));
        if !(area > 0.0 && area.is_finite()) {
            return Err(CorrectionError::Masses { sum: area, sigma });
        }
        density.iter_mut().for_each(|c| *c /= area);
        let mut cdf = vec![0.0; len];
        for k in 1..len {
            cdf[k] = cdf[k - 1] + 0.5 * STEP * (density[k - 1] + density[k]);
        }
        let top = cdf.iter().copied().fold(0.0, f64::max);
        for (k, f) in cdf.iter_mut().enumerate() {
            *f += 1e-6 * top * k as f64 / len as f64;
        }
        let last = cdf[len - 1];
        cdf.iter_mut().for_each(|f| *f /= last);
        let masses = (0..len)
            .map(|k| if k == 0 { cdf[0] } else { cdf[k] - cdf[k - 1] })
            .collect();
        Self::from_masses(masses, sigma, STEP)
    }

    /// The same masses with the raw cumulative sums (`mh_xcorr_unnormalised`, the references'
    /// behaviour): F ends at Σu⁺, and mass above 1 is never drawn.
    pub fn unnormalised(&self) -> Self {
        let mut table = self.clone();
        table.set_cumulative(false);
        table
    }

    /// The symmetrised table u_j ← (u_j + u_{−j})/2 (§6.4, optional [lib]), with its own L∞.
    pub fn symmetrised(&self) -> Self {
        let n = self.masses.len();
        let masses = (0..n)
            .map(|j| 0.5 * (self.masses[j] + self.masses[n - 1 - j]))
            .collect();
        let mut table = Self::from_masses(masses, self.sigma, self.step)
            .expect("the mirror average of a valid table is valid");
        table.set_cumulative(self.normalised);
        table.centred = self.centred;
        table
    }

    /// The references' interpolation (`mh_xcorr_reference_interpolation`): draws spread the
    /// mass u_k over (y_{k−1}, y_k] and U ≤ F_0 returns y_{−N_g} (§6.4 as written).
    pub fn with_reference_interpolation(&self) -> Self {
        let mut table = self.clone();
        table.centred = false;
        table
    }

    /// Whether draws spread each mass over the cell centred on its grid point (the default).
    pub fn is_centred(&self) -> bool {
        self.centred
    }

    /// One draw of X_corr by inverse CDF (§6.4): U ~ U(0, 1), the first k with F_k ≥ U by
    /// binary search, then linear interpolation within the cell of u_k. No allocation.
    ///
    /// Library default: the cell of u_k is [y_k − h/2, y_k + h/2], centred on the point mass
    /// the ridge fit assumes; for the default table the CDF of N(0, 1) + a draw is then within
    /// 5.6e-4 of the logistic CDF. The references' (y_{k−1}, y_k] shifts the law h/2 to the
    /// left and the error to 1.1e-3, above the 1e-3
    /// ([`Self::with_reference_interpolation`]).
    #[inline]
    pub fn sample(&self, rng: &mut ChainRng) -> f64 {
        self.quantile(rng.random::<f64>())
    }

    /// The inverse of [`Self::cdf`] at `u` ∈ [0, 1] as [`Self::sample`] computes it.
    #[inline]
    pub fn quantile(&self, u: f64) -> f64 {
        let f = &self.cumulative;
        let k = f.partition_point(|&fk| fk < u);
        if !self.centred {
            if k == 0 {
                return self.support(0);
            }
            if k == f.len() {
                return self.support(k - 1);
            }
            let (lo, hi) = (f[k - 1], f[k]);
            return self.support(k - 1) + (u - lo) / (hi - lo) * self.step;
        }
        if k == f.len() {
            return self.support(k - 1) + 0.5 * self.step;
        }
        let lo = if k == 0 { 0.0 } else { f[k - 1] };
        let hi = f[k];
        let frac = if hi > lo { (u - lo) / (hi - lo) } else { 0.0 };
        self.support(k) + (frac - 0.5) * self.step
    }

    /// P(X_corr ≤ x) for the law [`Self::sample`] draws from, capped at 1 (unnormalised
    /// tables). Centred (default): u_k uniform on [y_k − h/2, y_k + h/2]. Reference
    /// interpolation: an atom F_0 at y_{−N_g}, then u_k uniform on (y_{k−1}, y_k].
    pub fn cdf(&self, x: f64) -> f64 {
        if x.is_nan() {
            return f64::NAN;
        }
        let f = &self.cumulative;
        let last = f.len() - 1;
        if self.centred {
            let t = (x - self.support(0)) / self.step + 0.5;
            if t <= 0.0 {
                return 0.0;
            }
            let k = t as usize;
            if k > last {
                return f[last].min(1.0);
            }
            let prev = if k == 0 { 0.0 } else { f[k - 1] };
            return (prev + (t - k as f64) * (f[k] - prev)).min(1.0);
        }
        let t = (x - self.support(0)) / self.step;
        if t < 0.0 {
            return 0.0;
        }
        if t >= last as f64 {
            return f[last].min(1.0);
        }
        let k = t as usize;
        let frac = t - k as f64;
        (f[k] + frac * (f[k + 1] - f[k])).min(1.0)
    }

    /// The CDF of N(0, σ²) ⊛ X_corr at `x` as a sum over the masses: Σ_j w_j·Φ((x − y_j)/σ),
    /// with w = u⁺/Σu⁺ (normalised table) or w = u⁺ (unnormalised: what L∞ measures). Terms
    /// with |x − y_j|/σ > 9 use Φ = 1 or 0 (an error below 1.2e-19 per unit of mass).
    pub fn cdf_convolved(&self, x: f64) -> f64 {
        const CUT: f64 = 9.0;
        let scale = if self.normalised {
            1.0 / self.mass_sum
        } else {
            1.0
        };
        let mut sum = 0.0;
        for (j, &u) in self.masses.iter().enumerate() {
            let z = (x - self.support(j)) / self.sigma;
            if z > CUT {
                sum += u;
            } else if z >= -CUT {
                sum += u * normal_cdf(z);
            }
        }
        sum * scale
    }

    /// The support point y_j (0-based index j = 0..2N_g, i.e. y = (j − N_g)·h).
    #[inline]
    pub fn support(&self, j: usize) -> f64 {
        (j as f64 - self.half_points as f64) * self.step
    }

    /// σ of the Gaussian part this table corrects.
    pub fn sigma(&self) -> f64 {
        self.sigma
    }

    /// The grid step h.
    pub fn step(&self) -> f64 {
        self.step
    }

    /// N_g (the table has 2N_g + 1 masses).
    pub fn half_points(&self) -> usize {
        self.half_points
    }

    /// The masses u⁺ (not normalised), at [`Self::support`] points.
    pub fn masses(&self) -> &[f64] {
        &self.masses
    }

    /// The cumulative masses F the sampler inverts (ending at 1 unless unnormalised).
    pub fn cumulative(&self) -> &[f64] {
        &self.cumulative
    }

    /// Whether F is renormalised to end at 1 (the default).
    pub fn is_normalised(&self) -> bool {
        self.normalised
    }

    /// Fit quality of §6.3(a): max_i |Σ_j u⁺_j·Φ((x_i − y_j)/σ) − 1/(1 + e^(−x_i))| over the
    /// fit points x_i = i·h, i = −2N_g..2N_g, with the raw masses u⁺.
    pub fn linf(&self) -> f64 {
        self.linf
    }

    /// Σ_j u⁺_j before renormalisation (1.0008858 for the default table).
    pub fn mass_sum(&self) -> f64 {
        self.mass_sum
    }

    /// Mean Σ_j w_j·y_j of the normalised masses w = u⁺/Σu⁺ at the grid points. The sampler's
    /// interpolated law has mean lower by h/2 (each mass spread over (y_{k−1}, y_k]).
    pub fn mean(&self) -> f64 {
        let s: f64 = (0..self.masses.len())
            .map(|j| self.masses[j] * self.support(j))
            .sum();
        s / self.mass_sum
    }

    /// Variance Σ_j w_j·(y_j − mean)² of the normalised masses (2.3608 for the default table;
    /// the ideal π²/3 − σ²; the sampler's interpolated law adds h²/12).
    pub fn variance(&self) -> f64 {
        let mean = self.mean();
        let s: f64 = (0..self.masses.len())
            .map(|j| self.masses[j] * (self.support(j) - mean).powi(2))
            .sum();
        s / self.mass_sum
    }
}

/// The workshop's bank of correction curves (§6.3(b), §6.6): one table per σ_k, and the lookup
/// "the curve whose σ is closest to the measured s".
#[derive(Debug, Clone, PartialEq)]
pub struct CorrectionBank {
    curves: Vec<CorrectionTable>,
}

impl CorrectionBank {
    /// Number of curves of the workshop bank.
    pub const CURVES: usize = 100;

    /// σ_k = 0.1 + 1.1·k/100, k = 0..99, of the workshop bank.
    pub fn workshop_sigma(k: usize) -> f64 {
        0.1 + 1.1 * k as f64 / 100.0
    }

    /// The workshop bank: [`CorrectionTable::fft_bank_curve`] at each σ_k (curves built on
    /// rayon, each independently, so the bank does not depend on the thread count).
    pub fn fft() -> Result<Self, CorrectionError> {
        let curves = (0..Self::CURVES)
            .into_par_iter()
            .map(|k| CorrectionTable::fft_bank_curve(Self::workshop_sigma(k)))
            .collect::<Result<Vec<_>, _>>()?;
        Self::from_curves(curves)
    }

    /// The workshop bank built once per process and shared by every chain (100 FFT curves,
    /// a few milliseconds each).
    pub fn workshop() -> Result<&'static CorrectionBank, CorrectionError> {
        static BANK: std::sync::OnceLock<CorrectionBank> = std::sync::OnceLock::new();
        if let Some(bank) = BANK.get() {
            return Ok(bank);
        }
        let bank = Self::fft()?;
        Ok(BANK.get_or_init(|| bank))
    }

    /// A bank of any tables (e.g. ridge tables, §6.3(b) "bank mode"), sorted by increasing σ.
    pub fn from_curves(curves: Vec<CorrectionTable>) -> Result<Self, CorrectionError> {
        if curves.is_empty() || curves.windows(2).any(|w| w[0].sigma >= w[1].sigma) {
            return Err(CorrectionError::Bank);
        }
        Ok(Self { curves })
    }

    /// The curves, by increasing σ.
    pub fn curves(&self) -> &[CorrectionTable] {
        &self.curves
    }

    /// The curve whose σ is closest to `s` (the lower one on a tie; the first for NaN).
    pub fn closest(&self, s: f64) -> &CorrectionTable {
        let k = self.curves.partition_point(|c| c.sigma < s);
        if k == 0 {
            return &self.curves[0];
        }
        if k == self.curves.len() {
            return &self.curves[k - 1];
        }
        let (lo, hi) = (&self.curves[k - 1], &self.curves[k]);
        if s - lo.sigma <= hi.sigma - s { lo } else { hi }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use faer::prelude::Solve;

    /// The O(N_g²) normal matrix and the solve against a dense MᵀM + λI built directly and
    /// solved by faer's high-level LLT, on a small grid. Break-once: the recurrence without its
    /// leaving-row term failed here (u[0] = 0.478, direct 3.1e-4).
    #[test]
    fn toeplitz_build_matches_a_direct_solve() {
        let spec = RidgeTableSpec {
            half_points: 40,
            sigma: 0.9,
            lambda: 0.1,
            range: 8.0,
        };
        let table = CorrectionTable::ridge(&spec).unwrap();
        let (half, h) = (spec.half_points as i64, spec.step());
        let m =
            faer::Mat::<f64>::from_fn((4 * half + 1) as usize, (2 * half + 1) as usize, |r, c| {
                let (x, y) = (
                    (r as i64 - 2 * half) as f64 * h,
                    (c as i64 - half) as f64 * h,
                );
                normal_cdf((x - y) / spec.sigma)
            });
        let v = faer::Col::<f64>::from_fn(m.nrows(), |r| {
            logistic_cdf((r as i64 - 2 * half) as f64 * h)
        });
        let mut a = m.transpose() * &m;
        for d in 0..a.nrows() {
            a[(d, d)] += spec.lambda;
        }
        let rhs = m.transpose() * &v;
        let u = a.llt(faer::Side::Lower).unwrap().solve(&rhs);
        clear_upper_vector_state();
        for (j, &got) in table.masses().iter().enumerate() {
            let want = u[j].max(0.0);
            assert!((got - want).abs() < 1e-10, "u[{j}] = {got}, direct {want}");
        }
        let fitted = &m * faer::Col::<f64>::from_fn(m.ncols(), |c| table.masses()[c]);
        let linf = (0..m.nrows())
            .map(|r| (fitted[r] - v[r]).abs())
            .fold(0.0, f64::max);
        assert!(
            (table.linf() - linf).abs() < 1e-12,
            "{} vs {linf}",
            table.linf()
        );
    }

    #[test]
    fn centred_quantile_spreads_each_mass_over_its_cell() {
        let table =
            CorrectionTable::from_masses(vec![0.25, 0.0, 0.5, 0.25, 0.0], 1.0, 1.0).unwrap();
        assert!(table.is_centred());
        // F = [0.25, 0.25, 0.75, 1, 1]; y = −2..2; cells [y − ½, y + ½].
        assert_eq!(table.quantile(0.0), -2.5);
        assert_eq!(table.quantile(0.125), -2.0);
        assert_eq!(table.quantile(0.25), -1.5);
        assert_eq!(table.quantile(0.5), 0.0);
        assert_eq!(table.quantile(0.875), 1.0);
        assert_eq!(table.quantile(1.0), 1.5);
        // Points off the flat stretch of the empty cell [−1.5, −0.5] (where quantile gives its left end).
        for x in [-2.25, 0.25, 0.5, 1.25] {
            let f = table.cdf(x);
            if f > 0.0 && f < 1.0 {
                assert!((table.quantile(f) - x).abs() < 1e-12, "x = {x}");
            }
        }
        assert_eq!(table.cdf(-2.5), 0.0);
        assert_eq!(table.cdf(-2.0), 0.125);
        assert_eq!(table.cdf(-1.0), 0.25);
        assert_eq!(table.cdf(5.0), 1.0);
    }

    #[test]
    fn quantile_brackets_and_interpolates() {
        let table = CorrectionTable::from_masses(vec![0.25, 0.0, 0.5, 0.25, 0.0], 1.0, 1.0)
            .unwrap()
            .with_reference_interpolation();
        // F = [0.25, 0.25, 0.75, 1, 1]; y = −2..2.
        assert_eq!(table.quantile(0.0), -2.0);
        assert_eq!(table.quantile(0.25), -2.0);
        assert_eq!(table.quantile(0.5), -0.5);
        assert_eq!(table.quantile(0.75), 0.0);
        assert_eq!(table.quantile(0.875), 0.5);
        assert_eq!(table.quantile(1.0), 1.0);
        for x in [-3.0, -2.0, -1.5, -0.5, 0.25, 0.5, 2.0, 3.0] {
            let f = table.cdf(x);
            if f > 0.25 && f < 1.0 {
                assert!((table.quantile(f) - x).abs() < 1e-12, "x = {x}");
            }
        }
        assert_eq!(table.cdf(-2.0), 0.25);
        assert_eq!(table.cdf(-2.5), 0.0);
        assert_eq!(table.cdf(5.0), 1.0);
    }
}
