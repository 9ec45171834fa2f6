//! Kernel Stein discrepancy with the Langevin Stein kernel (reference §4.1–§4.3).
//!
//! KSD²_V = (1/n²)·Σ_a Σ_b k_p(x_a, x_b) and KSD²_U = (1/(n(n−1)))·Σ_{a≠b} k_p(x_a, x_b); the
//! reported KSD is sqrt(KSD²_V) (§4.2, as SGMCMCJax `imq_KSD` and the MAMBA code).
//!
//! Computation (§4.2): the draws are centred (k_p depends on x only through r = x_a − x_b), and
//! rows are cut into tiles of B rows. Each tile is stored as the 2B × D block [X_I; S_I], so one
//! faer GEMM [X_I; S_I]·[X_J; S_J]ᵀ gives the four B × B Gram blocks X_IX_Jᵀ, X_IS_Jᵀ, S_IX_Jᵀ and
//! S_IS_Jᵀ of a tile pair, from which
//!
//!   ‖r‖² = ‖x_a‖² + ‖x_b‖² − 2x_aᵀx_b (clamped at 0),
//!   (s_a − s_b)ᵀr = s_aᵀx_a − s_aᵀx_b − s_bᵀx_a + s_bᵀx_b.
//!
//! Only tile pairs I ≤ J are formed (pairs a < b doubled, the diagonal added in closed form).
//! Work units are the tile rows I and T−1−I together (T + 1 tile pairs each), spread over rayon;
//! each unit sums its tile pairs in a fixed order in f64 and the unit sums are added in unit
//! order, so the value does not depend on the number of threads. Memory: the 2P × D tile copy
//! plus one (2B)² block per thread, never a P × P matrix.

use super::{Kernel, SteinError, check_sample};
use crate::cpu::clear_upper_vector_state;
use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};
use rayon::prelude::*;

/// KSD values of one sample.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Ksd {
    /// The reported KSD: sqrt(KSD²_V) (reference §4.2); NaN when KSD²_V is (e.g. scores so
    /// large that their products overflow).
    pub ksd: f64,
    /// KSD²_V = (1/n²)·Σ_a Σ_b k_p(x_a, x_b) (≥ 0 up to rounding).
    pub squared_v: f64,
    /// KSD²_U = (1/(n(n−1)))·Σ_{a≠b} k_p(x_a, x_b), unbiased, can be negative; `None` for n = 1.
    pub squared_u: Option<f64>,
}

/// One Stein-kernel value k_p from h = s_aᵀs_b, dr = (s_a − s_b)ᵀr and r2 = ‖r‖² (§4.1).
pub(crate) trait PairTerm: Copy + Send + Sync {
    fn term(&self, h: f64, dr: f64, r2: f64) -> f64;
}

/// IMQ: k_p = h·u^β + u^(β−1)·(a1·dr + a2) + a3·u^(β−2)·r2 with u = c² + r2, a1 = −2β,
/// a2 = −2dβ, a3 = −4β(β−1).
#[derive(Clone, Copy)]
struct ImqTerm {
    c2: f64,
    beta: f64,
    a1: f64,
    a2: f64,
    a3: f64,
}

/// IMQ with β = −1/2: u^β = sqrt(1/u), so one division and one square root per pair.
#[derive(Clone, Copy)]
struct ImqHalfTerm(ImqTerm);

/// Gaussian: k_p = k·(h + dr/σ² + d/σ² − r2/σ⁴) with k = exp(−r2/(2σ²)).
#[derive(Clone, Copy)]
struct GaussTerm {
    inv: f64,
    d_inv: f64,
    inv2: f64,
    minus_half_inv: f64,
}

impl PairTerm for ImqTerm {
    #[inline(always)]
    fn term(&self, h: f64, dr: f64, r2: f64) -> f64 {
        let u = self.c2 + r2;
        let q = 1.0 / u;
        let p0 = u.powf(self.beta);
        let p1 = p0 * q;
        h * p0 + p1 * (self.a1 * dr + self.a2) + self.a3 * (p1 * q) * r2
    }
}

impl PairTerm for ImqHalfTerm {
    #[inline(always)]
    fn term(&self, h: f64, dr: f64, r2: f64) -> f64 {
        let k = &self.0;
        let u = k.c2 + r2;
        let q = 1.0 / u;
        let p0 = q.sqrt();
        let p1 = p0 * q;
        h * p0 + p1 * (k.a1 * dr + k.a2) + k.a3 * (p1 * q) * r2
    }
}

impl PairTerm for GaussTerm {
    #[inline(always)]
    fn term(&self, h: f64, dr: f64, r2: f64) -> f64 {
        let k = (self.minus_half_inv * r2).exp();
        k * (h + dr * self.inv + self.d_inv - r2 * self.inv2)
    }
}

fn imq_term(c: f64, beta: f64, dim: usize) -> ImqTerm {
    ImqTerm {
        c2: c * c,
        beta,
        a1: -2.0 * beta,
        a2: -2.0 * dim as f64 * beta,
        a3: -4.0 * beta * (beta - 1.0),
    }
}

fn gauss_term(sigma2: f64, dim: usize) -> GaussTerm {
    let inv = 1.0 / sigma2;
    GaussTerm {
        inv,
        d_inv: dim as f64 * inv,
        inv2: inv * inv,
        minus_half_inv: -0.5 * inv,
    }
}

/// k_p(x, y) from the two points and their scores (no Gram products; O(d)).
pub(crate) fn stein_kernel(kernel: &Kernel, x: &[f64], y: &[f64], sx: &[f64], sy: &[f64]) -> f64 {
    let (mut h, mut dr, mut r2) = (0.0, 0.0, 0.0);
    for i in 0..x.len() {
        let r = x[i] - y[i];
        h += sx[i] * sy[i];
        dr += (sx[i] - sy[i]) * r;
        r2 += r * r;
    }
    let d = x.len();
    match *kernel {
        Kernel::Imq(k) if k.beta() == -0.5 => {
            ImqHalfTerm(imq_term(k.c(), k.beta(), d)).term(h, dr, r2)
        }
        Kernel::Imq(k) => imq_term(k.c(), k.beta(), d).term(h, dr, r2),
        Kernel::Gaussian(k) => gauss_term(k.sigma2(), d).term(h, dr, r2),
    }
}

/// Tile rows B of [`ksd()`]: the (2B)² GEMM output block (128 KB) and the two 2B × D operands
/// stay in L2. Fixed, so the summation order never depends on the machine or thread count
/// (32, 64, 128 and 256 were within the benchmark's noise of each other at D = 10 and 100).
pub const KSD_TILE: usize = 64;

/// The KSD of `draws` with `scores` (P × D row-major each) under the Langevin Stein kernel of
/// `kernel` (reference §4.2): V- and U-statistics, and the reported sqrt(KSD²_V).
///
/// O(P²·D) work spread over the rayon pool, O(P·D) memory; bit-identical for any thread count.
pub fn ksd(draws: &[f64], scores: &[f64], dim: usize, kernel: &Kernel) -> Result<Ksd, SteinError> {
    ksd_with_tile(draws, scores, dim, kernel, KSD_TILE)
}

/// [`ksd()`] with an explicit tile of `tile` rows (≥ 1): for tests of the tiling and for
/// benchmarks; the value changes only by rounding with the tile.
pub fn ksd_with_tile(
    draws: &[f64],
    scores: &[f64],
    dim: usize,
    kernel: &Kernel,
    tile: usize,
) -> Result<Ksd, SteinError> {
    let n = check_sample(draws, scores, dim)?;
    kernel.validate()?;
    if tile == 0 {
        return Err(SteinError::BadSetting(
            "the KSD tile must have at least 1 row".into(),
        ));
    }
    let (off_diagonal, diagonal) = match *kernel {
        Kernel::Imq(k) if k.beta() == -0.5 => sums(
            draws,
            scores,
            dim,
            tile,
            ImqHalfTerm(imq_term(k.c(), k.beta(), dim)),
        ),
        Kernel::Imq(k) => sums(draws, scores, dim, tile, imq_term(k.c(), k.beta(), dim)),
        Kernel::Gaussian(k) => sums(draws, scores, dim, tile, gauss_term(k.sigma2(), dim)),
    };
    let nf = n as f64;
    let squared_v = (2.0 * off_diagonal + diagonal) / (nf * nf);
    let squared_u = (n > 1).then(|| 2.0 * off_diagonal / (nf * (nf - 1.0)));
    Ok(Ksd {
        // Not `max(0.0)`: that maps NaN (e.g. overflowing scores) to a perfect 0.
        ksd: if squared_v < 0.0 {
            0.0
        } else {
            squared_v.sqrt()
        },
        squared_v,
        squared_u,
    })
}

/// Σ_{a<b} k_p(x_a, x_b) and Σ_a k_p(x_a, x_a).
fn sums<K: PairTerm>(draws: &[f64], scores: &[f64], dim: usize, tile: usize, k: K) -> (f64, f64) {
    let n = draws.len() / dim;
    let tile = tile.min(n);
    let tiles = n.div_ceil(tile);
    // Centre, and lay the rows out tile by tile as [X_I; S_I].
    let mut mean = vec![0.0; dim];
    for row in draws.chunks_exact(dim) {
        mean.iter_mut().zip(row).for_each(|(m, x)| *m += x);
    }
    mean.iter_mut().for_each(|m| *m /= n as f64);
    let mut z = vec![0.0; 2 * n * dim];
    let mut xx = vec![0.0; n];
    let mut sx = vec![0.0; n];
    let mut diagonal = 0.0;
    for t in 0..tiles {
        let (first, len) = (t * tile, tile.min(n - t * tile));
        let block = &mut z[2 * first * dim..2 * (first + len) * dim];
        let (xb, sb) = block.split_at_mut(len * dim);
        for i in 0..len {
            let a = first + i;
            let (x, s) = (
                &draws[a * dim..(a + 1) * dim],
                &scores[a * dim..(a + 1) * dim],
            );
            let xr = &mut xb[i * dim..(i + 1) * dim];
            let (mut xxa, mut sxa, mut ssa) = (0.0, 0.0, 0.0);
            for c in 0..dim {
                let xc = x[c] - mean[c];
                xr[c] = xc;
                xxa += xc * xc;
                sxa += s[c] * xc;
                ssa += s[c] * s[c];
            }
            sb[i * dim..(i + 1) * dim].copy_from_slice(s);
            xx[a] = xxa;
            sx[a] = sxa;
            diagonal += k.term(ssa, 0.0, 0.0);
        }
    }
    let units = tiles.div_ceil(2);
    let layout = Layout {
        n,
        dim,
        tile,
        tiles,
        z: &z,
        xx: &xx,
        sx: &sx,
    };
    let unit_sums: Vec<f64> = (0..units)
        .into_par_iter()
        .map_init(
            || vec![0.0; 4 * tile * tile + tile],
            |out, u| {
                let mut total = layout.tile_row(u, out, k);
                let partner = tiles - 1 - u;
                if partner != u {
                    total += layout.tile_row(partner, out, k);
                }
                total
            },
        )
        .collect();
    (unit_sums.iter().sum(), diagonal)
}

/// The tiled, centred sample and its per-row products ‖x_a‖² and s_aᵀx_a.
#[derive(Clone, Copy)]
struct Layout<'a> {
    n: usize,
    dim: usize,
    tile: usize,
    tiles: usize,
    z: &'a [f64],
    xx: &'a [f64],
    sx: &'a [f64],
}

impl Layout<'_> {
    /// First row and length of tile `t`.
    fn rows(&self, t: usize) -> (usize, usize) {
        let first = t * self.tile;
        (first, self.tile.min(self.n - first))
    }

    /// Σ over tile pairs (i, j ≥ i) of Σ_{a<b} k_p, in order of j.
    fn tile_row<K: PairTerm>(&self, i: usize, out: &mut [f64], k: K) -> f64 {
        (i..self.tiles).map(|j| self.tile_pair(i, j, out, k)).sum()
    }

    /// Σ_{a ∈ I, b ∈ J, a < b} k_p(x_a, x_b).
    fn tile_pair<K: PairTerm>(&self, ti: usize, tj: usize, out: &mut [f64], k: K) -> f64 {
        let d = self.dim;
        let (fi, li) = self.rows(ti);
        let (fj, lj) = self.rows(tj);
        let zi = MatRef::from_row_major_slice(&self.z[2 * fi * d..2 * (fi + li) * d], 2 * li, d);
        let zj = MatRef::from_row_major_slice(&self.z[2 * fj * d..2 * (fj + lj) * d], 2 * lj, d);
        let w = 2 * lj;
        let (out, rest) = out.split_at_mut(2 * li * w);
        matmul(
            MatMut::from_row_major_slice_mut(out, 2 * li, w),
            Accum::Replace,
            zi,
            zj.transpose(),
            1.0,
            Par::Seq,
        );
        clear_upper_vector_state();
        let (vals, _) = rest.split_at_mut(lj);
        tile_sum(
            k,
            Tile {
                out,
                li,
                lj,
                diagonal: ti == tj,
                xx_i: &self.xx[fi..fi + li],
                sx_i: &self.sx[fi..fi + li],
                xx_j: &self.xx[fj..fj + lj],
                sx_j: &self.sx[fj..fj + lj],
            },
            vals,
        )
    }
}

/// One tile pair after its GEMM: `out` is the 2|I| × 2|J| row-major block
/// [X_IX_Jᵀ, X_IS_Jᵀ; S_IX_Jᵀ, S_IS_Jᵀ], with the rows' ‖x‖² and sᵀx.
struct Tile<'a> {
    out: &'a [f64],
    li: usize,
    lj: usize,
    diagonal: bool,
    xx_i: &'a [f64],
    sx_i: &'a [f64],
    xx_j: &'a [f64],
    sx_j: &'a [f64],
}

/// Lanes of the row sums: independent partial sums with a fixed assignment of columns to lanes
/// (so the sum is reproducible) that the compiler keeps in vector registers.
const LANES: usize = 8;

/// Σ_{a ∈ I, b ∈ J, a < b} k_p(x_a, x_b) of one tile, with the widest vector instructions the
/// CPU has. Every path does the same IEEE operations (+, −, ×, ÷, √; Rust never fuses them into
/// FMAs) in the same order, so the value is bit-identical whichever path runs.
fn tile_sum<K: PairTerm>(k: K, t: Tile<'_>, vals: &mut [f64]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F, checked just above.
            return unsafe { tile_sum_avx512(k, t, vals) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2, checked just above.
            return unsafe { tile_sum_avx2(k, t, vals) };
        }
    }
    tile_sum_body(k, t, vals)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn tile_sum_avx512<K: PairTerm>(k: K, t: Tile<'_>, vals: &mut [f64]) -> f64 {
    tile_sum_body(k, t, vals)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn tile_sum_avx2<K: PairTerm>(k: K, t: Tile<'_>, vals: &mut [f64]) -> f64 {
    tile_sum_body(k, t, vals)
}

/// Row by row: first every k_p of the row into `vals` (a plain element-wise loop the compiler
/// vectorises), then their sum over [`LANES`] lanes.
#[inline(always)]
fn tile_sum_body<K: PairTerm>(k: K, t: Tile<'_>, vals: &mut [f64]) -> f64 {
    let (li, lj) = (t.li, t.lj);
    let w = 2 * lj;
    let mut total = 0.0;
    for a in 0..li {
        let start = if t.diagonal { a + 1 } else { 0 };
        let top = &t.out[a * w..(a + 1) * w];
        let bottom = &t.out[(li + a) * w..(li + a + 1) * w];
        let (xxa, sxa) = (t.xx_i[a], t.sx_i[a]);
        let vals = &mut vals[start..lj];
        let columns = top[start..lj]
            .iter()
            .zip(&top[lj + start..w])
            .zip(&bottom[start..lj])
            .zip(&bottom[lj + start..w])
            .zip(&t.xx_j[start..])
            .zip(&t.sx_j[start..]);
        for (v, (((((g, xs), sx), ss), xxb), sxb)) in vals.iter_mut().zip(columns) {
            // ‖r‖² = ‖x_a‖² + ‖x_b‖² − 2x_aᵀx_b ≥ 0; (s_a − s_b)ᵀr = s_aᵀx_a − s_aᵀx_b − s_bᵀx_a + s_bᵀx_b.
            let r2 = xxa + xxb - 2.0 * g;
            let r2 = if r2 > 0.0 { r2 } else { 0.0 };
            let dr = sxa + sxb - sx - xs;
            *v = k.term(*ss, dr, r2);
        }
        let mut lanes = [0.0f64; LANES];
        let mut chunks = vals.chunks_exact(LANES);
        for c in &mut chunks {
            for (lane, v) in lanes.iter_mut().zip(c) {
                *lane += v;
            }
        }
        for (lane, v) in lanes.iter_mut().zip(chunks.remainder()) {
            *lane += v;
        }
        total += lanes.iter().sum::<f64>();
    }
    total
}

/// Linear-time KSD (reference §4.3, Liu, Lee & Jordan 2016): the mean of
/// H_a = k_p(x_a, x_{a+⌊n/2⌋}) over a < ⌊n/2⌋ (the first half against the second; an odd last
/// point is dropped). Unbiased for KSD² with independent draws; can be negative; no square root.
pub fn linear_ksd(
    draws: &[f64],
    scores: &[f64],
    dim: usize,
    kernel: &Kernel,
) -> Result<f64, SteinError> {
    let n = check_sample(draws, scores, dim)?;
    kernel.validate()?;
    if n < 2 {
        return Err(SteinError::TooFewPoints {
            what: "the linear-time KSD",
            needed: 2,
            got: n,
        });
    }
    let m = n / 2;
    let row = |a: usize| a * dim..(a + 1) * dim;
    let total: f64 = (0..m)
        .map(|a| {
            let b = a + m;
            stein_kernel(
                kernel,
                &draws[row(a)],
                &draws[row(b)],
                &scores[row(a)],
                &scores[row(b)],
            )
        })
        .sum();
    Ok(total / m as f64)
}
