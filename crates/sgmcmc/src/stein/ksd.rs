//! Kernel Stein discrepancy with the Langevin Stein kernel (reference §4.1–§4.3).
//!
//! KSD²_V = (1/n²)·Σ_a Σ_b k_p(x_a, x_b) and KSD²_U = (1/(n(n−1)))·Σ_{a≠b} k_p(x_a, x_b); the
//! reported KSD is sqrt(KSD²_V) (§4.2, as SGMCMCJax `imq_KSD` and the MAMBA code).
//!
//! Computation (§4.2): the draws are centred (k_p depends on x only through r = x_a − x_b), and
//! rows are cut into tiles of B rows, each stored in panels of eight rows. For a tile pair, a
//! register-blocked kernel forms the Gram products x_aᵀx_b, s_aᵀx_b + x_aᵀs_b and s_aᵀs_b
//! of a few rows a against one panel of rows b at once (fused multiply-adds over the D features,
//! never written to memory), from which
//!
//!   ‖r‖² = ‖x_a‖² + ‖x_b‖² − 2x_aᵀx_b (clamped at 0),
//!   (s_a − s_b)ᵀr = s_aᵀx_a + s_bᵀx_b − (s_aᵀx_b + x_aᵀs_b),
//!
//! and k_p follow in the same registers. Doing the products and the kernel arithmetic together
//! keeps the kernel arithmetic beside the multiply-adds (with a GEMM to memory first, the two ran
//! one after the other); for the IMQ with β = −½, u^(−½) comes from Newton's iteration rather
//! than the divider, whose division and square root set the pace at small D.
//!
//! Only tile pairs I ≤ J are formed (pairs a < b doubled, the diagonal added in closed form).
//! Work units are the tile rows I and T−1−I together (T + 1 tile pairs each), spread over rayon;
//! each unit sums its tile pairs in a fixed order in f64 and the unit sums are added in unit
//! order, so the value does not depend on the number of threads or on the CPU's vector width.
//! Memory: the tiled 2P × D copy, never a P × P matrix.

use super::{Kernel, SteinError, check_sample};
#[cfg(target_arch = "x86_64")]
use crate::lanes::{Avx2, Avx512};
use crate::lanes::{Isa, LANES, Lanes, Portable};
use rayon::prelude::*;

/// KSD values of one sample.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Ksd {
    /// The reported KSD: sqrt(KSD²_V) (reference §4.2); not finite when KSD²_V is not (e.g.
    /// draws or scores so large that their products overflow): NaN for NaN or −∞, +∞ for +∞.
    pub ksd: f64,
    /// KSD²_V = (1/n²)·Σ_a Σ_b k_p(x_a, x_b) (≥ 0 up to rounding).
    pub squared_v: f64,
    /// KSD²_U = (1/(n(n−1)))·Σ_{a≠b} k_p(x_a, x_b), unbiased, can be negative; `None` for n = 1.
    pub squared_u: Option<f64>,
}

/// One Stein-kernel value k_p from h = s_aᵀs_b, dr = (s_a − s_b)ᵀr and r2 = ‖r‖² (§4.1).
pub(crate) trait PairTerm: Copy + Send + Sync {
    fn term(&self, h: f64, dr: f64, r2: f64) -> f64;

    /// [`PairTerm::term`] of [`LANES`] pairs at once; by default lane by lane with `term`.
    ///
    /// # Safety
    /// The CPU must support `L`'s instructions.
    #[inline(always)]
    unsafe fn term_lanes<L: Lanes>(&self, h: L, dr: L, r2: L) -> L {
        let (mut hs, mut drs, mut r2s) = ([0.0; LANES], [0.0; LANES], [0.0; LANES]);
        // SAFETY: the CPU supports `L` (caller); each array holds LANES values.
        unsafe {
            h.store(hs.as_mut_ptr(), LANES);
            dr.store(drs.as_mut_ptr(), LANES);
            r2.store(r2s.as_mut_ptr(), LANES);
            let out: [f64; LANES] = std::array::from_fn(|l| self.term(hs[l], drs[l], r2s[l]));
            L::load_f64(out.as_ptr(), LANES)
        }
    }
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

/// IMQ with β = −1/2. One pair ([`PairTerm::term`]): u^β = sqrt(1/u), a division and a square
/// root. Lanes ([`PairTerm::term_lanes`]): no divider (it would set the pace at small D), p = u^(−½)
/// by Newton's iteration and q = p² = 1/u; needs c² in [`NEWTON_C2`].
#[derive(Clone, Copy)]
struct ImqHalfTerm(ImqTerm);

/// The range of c² in which [`ImqHalfTerm`]'s lanes are exact to rounding: u/2 ≥ c²/2 is normal
/// and 3c² finite (outside it, the general IMQ term takes over).
const NEWTON_C2: std::ops::RangeInclusive<f64> = 1e-300..=1e300;

/// Newton steps from the bit-level guess of u^(−½) (relative error < 3.5 %): the error squares
/// (times 3/2) each step, 3.5e-2 → 1.8e-3 → 5e-6 → 4e-11 → rounding.
const NEWTON_STEPS: usize = 4;

/// The magic constant of the bit-level guess of u^(−½) from the bits of u (Robertson's for
/// f64), moved to take the bits of −u/2: bits(−u/2) = bits(u) − 2⁵² + 2⁶³ for normal u/2.
const RSQRT_SEED_FROM_MINUS_HALF: u64 = 0x5FE6_EB50_C7B5_37A9u64
    .wrapping_add(1 << 62)
    .wrapping_sub(1 << 51);

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

    /// Without the divider: m = −u/2 = −r2/2 − c²/2 (one fused step, exact), p = u^(−½) by
    /// [`NEWTON_STEPS`] steps p ← p·(3/2 + (m·p)·p) from the bit-level guess, q = p², and,
    /// as q·r2 = 1 − c²q, k_p = p·(h + q·((a1·dr + a2 + a3) − a3·c²·q)).
    #[inline(always)]
    unsafe fn term_lanes<L: Lanes>(&self, h: L, dr: L, r2: L) -> L {
        let k = &self.0;
        // SAFETY: the CPU supports `L` (caller).
        unsafe {
            let m = L::mul_add(L::splat(-0.5), r2, L::splat(-0.5 * k.c2));
            let mut p = m.rsqrt_seed(RSQRT_SEED_FROM_MINUS_HALF);
            for _ in 0..NEWTON_STEPS {
                let t = L::mul(m, p);
                p = L::mul(p, L::mul_add(t, p, L::splat(1.5)));
            }
            let q = L::mul(p, p);
            let linear = L::mul_add(L::splat(k.a1), dr, L::splat(k.a2 + k.a3));
            let inner = L::mul_add(L::splat(-k.a3 * k.c2), q, linear);
            L::mul(p, L::mul_add(q, inner, h))
        }
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

/// Tile rows B of [`ksd()`]: the panels of a tile pair (2 × 2·B·D values, 20 KB at D = 10)
/// stay in L1 while the pair kernel passes over them. Fixed, so the summation order never
/// depends on the machine or thread count.
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
        Kernel::Imq(k) if k.beta() == -0.5 && NEWTON_C2.contains(&(k.c() * k.c())) => sums(
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
        // Not `max(0.0)`: that maps NaN (e.g. overflowing scores) to a perfect 0; −∞ gives NaN.
        ksd: if squared_v < 0.0 && squared_v.is_finite() {
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
    sums_on(Isa::detect(), draws, scores, dim, tile, k)
}

/// [`sums`] on the lanes of `isa`.
fn sums_on<K: PairTerm>(
    isa: Isa,
    draws: &[f64],
    scores: &[f64],
    dim: usize,
    tile: usize,
    k: K,
) -> (f64, f64) {
    let n = draws.len() / dim;
    let tile = tile.min(n);
    let tiles = n.div_ceil(tile);
    let stride = tile.next_multiple_of(LANES);
    // Centre, and lay each tile out in panels of LANES rows (zero-padded past the tile's last
    // row): per feature c, the panel's LANES values of x_·c, then its LANES values of s_·c.
    let mut mean = vec![0.0; dim];
    for row in draws.chunks_exact(dim) {
        mean.iter_mut().zip(row).for_each(|(m, x)| *m += x);
    }
    mean.iter_mut().for_each(|m| *m /= n as f64);
    let mut panels = vec![0.0; tiles * 2 * dim * stride];
    let mut xx = vec![0.0; tiles * stride];
    let mut sx = vec![0.0; tiles * stride];
    let mut diagonal = 0.0;
    for a in 0..n {
        let (t, i) = (a / tile, a % tile);
        let panel = &mut panels[t * 2 * dim * stride + (i / LANES) * 2 * dim * LANES..];
        let lane = i % LANES;
        let (x, s) = (
            &draws[a * dim..(a + 1) * dim],
            &scores[a * dim..(a + 1) * dim],
        );
        let (mut xxa, mut sxa, mut ssa) = (0.0, 0.0, 0.0);
        for c in 0..dim {
            let xc = x[c] - mean[c];
            panel[2 * LANES * c + lane] = xc;
            panel[2 * LANES * c + LANES + lane] = s[c];
            xxa += xc * xc;
            sxa += s[c] * xc;
            ssa += s[c] * s[c];
        }
        xx[t * stride + i] = xxa;
        sx[t * stride + i] = sxa;
        diagonal += k.term(ssa, 0.0, 0.0);
    }
    let layout = Layout {
        isa,
        n,
        dim,
        tile,
        tiles,
        stride,
        panels: &panels,
        xx: &xx,
        sx: &sx,
    };
    let units = tiles.div_ceil(2);
    let unit_sums: Vec<f64> = (0..units)
        .into_par_iter()
        .map(|u| {
            let mut total = layout.tile_row(u, k);
            let partner = tiles - 1 - u;
            if partner != u {
                total += layout.tile_row(partner, k);
            }
            total
        })
        .collect();
    (unit_sums.iter().sum(), diagonal)
}

/// The centred sample in tiles of panels, with the rows' ‖x_a‖² and s_aᵀx_a.
#[derive(Clone, Copy)]
struct Layout<'a> {
    isa: Isa,
    n: usize,
    dim: usize,
    tile: usize,
    tiles: usize,
    /// Rows stored per tile: its rows rounded up to [`LANES`].
    stride: usize,
    /// Tile t at `t·2·dim·stride`, in panels of [`LANES`] rows (2·dim·LANES values each): per
    /// feature c, the panel's x_·c, then its s_·c.
    panels: &'a [f64],
    /// ‖x_a‖² and s_aᵀx_a, `stride` per tile (0 in the padding).
    xx: &'a [f64],
    sx: &'a [f64],
}

impl Layout<'_> {
    /// Tile `t`: its number of rows, panels, ‖x‖² and sᵀx.
    fn tile(&self, t: usize) -> TilePanels<'_> {
        let (s, w) = (self.stride, 2 * self.dim * self.stride);
        TilePanels {
            rows: self.tile.min(self.n - t * self.tile),
            panels: &self.panels[t * w..(t + 1) * w],
            xx: &self.xx[t * s..(t + 1) * s],
            sx: &self.sx[t * s..(t + 1) * s],
        }
    }

    /// Σ over tile pairs (i, j ≥ i) of Σ_{a<b} k_p, in order of j.
    fn tile_row<K: PairTerm>(&self, i: usize, k: K) -> f64 {
        (i..self.tiles)
            .map(|j| self.tile_pair(k, self.tile(i), self.tile(j), i == j))
            .sum()
    }

    /// Σ_{a ∈ I, b ∈ J, a < b} k_p(x_a, x_b) of one tile pair, on the widest path the CPU has
    /// (every path gives the same bits: [`tile_pair_body`]).
    fn tile_pair<K: PairTerm>(
        &self,
        k: K,
        ti: TilePanels<'_>,
        tj: TilePanels<'_>,
        diagonal: bool,
    ) -> f64 {
        let dim = self.dim;
        match self.isa {
            // SAFETY: the portable lanes need no CPU feature.
            Isa::Portable => unsafe { tile_pair_body::<K, Portable, 2>(k, dim, ti, tj, diagonal) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Isa::Avx2` is only constructed when the CPU has AVX2 and FMA.
            Isa::Avx2 => unsafe { tile_pair_avx2(k, dim, ti, tj, diagonal) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Isa::Avx512` is only constructed when the CPU has AVX-512F/VL and FMA.
            Isa::Avx512 => unsafe { tile_pair_avx512(k, dim, ti, tj, diagonal) },
        }
    }
}

/// One tile of a [`Layout`].
#[derive(Clone, Copy)]
struct TilePanels<'a> {
    rows: usize,
    panels: &'a [f64],
    xx: &'a [f64],
    sx: &'a [f64],
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_pair_avx2<K: PairTerm>(
    k: K,
    dim: usize,
    ti: TilePanels<'_>,
    tj: TilePanels<'_>,
    diagonal: bool,
) -> f64 {
    // SAFETY: AVX2 and FMA are enabled here.
    unsafe { tile_pair_body::<K, Avx2, 2>(k, dim, ti, tj, diagonal) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,fma")]
unsafe fn tile_pair_avx512<K: PairTerm>(
    k: K,
    dim: usize,
    ti: TilePanels<'_>,
    tj: TilePanels<'_>,
    diagonal: bool,
) -> f64 {
    // SAFETY: AVX-512F/VL and FMA are enabled here.
    unsafe { tile_pair_body::<K, Avx512, 4>(k, dim, ti, tj, diagonal) }
}

/// 0, 1, …, LANES − 1: a panel's lane numbers, for the pair mask.
const LANE_NUMBERS: [f64; LANES] = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0];

/// R rows a of tile I (lanes o … o + R − 1 of one of its panels) against each panel of
/// [`LANES`] rows b of tile J, all in registers:
///
/// 1. g = x_aᵀx_b, cross = x_aᵀs_b + s_aᵀx_b and h = s_aᵀs_b, per lane by fused
///    multiply-adds over the D features in order, from 0 (cross: x_a,c·s_b,c then s_a,c·x_b,c);
/// 2. ‖r‖² = (‖x_a‖² + ‖x_b‖²) − 2g, clamped at +0, and (s_a − s_b)ᵀr = (s_aᵀx_a + s_bᵀx_b)
///    − cross, then k_p ([`PairTerm::term_lanes`]);
/// 3. k_p added to row a's lane b mod [`LANES`] where b lies in the tile pair's own rows and,
///    on the diagonal, a < b (a masked add only on the panels that hold other lanes).
///
/// Row a's lanes are summed by [`Lanes::tree_sum`], and the rows in the order of a, so the
/// value does not depend on R or on the path.
///
/// # Safety
/// The CPU must support `L`'s instructions.
#[inline(always)]
unsafe fn tile_pair_body<K: PairTerm, L: Lanes, const R: usize>(
    k: K,
    dim: usize,
    ti: TilePanels<'_>,
    tj: TilePanels<'_>,
    diagonal: bool,
) -> f64 {
    const { assert!(LANES.is_multiple_of(R)) };
    let panel = 2 * dim * LANES;
    let width = tj.rows.next_multiple_of(LANES);
    assert!(tj.xx.len() >= width && tj.sx.len() >= width);
    // SAFETY (all lane operations below): the CPU supports `L` (caller); every load reads
    // LANES values of a slice whose length was checked.
    unsafe {
        let (minus_two, end) = (L::splat(-2.0), L::splat(tj.rows as f64));
        let lane = L::load_f64(LANE_NUMBERS.as_ptr(), LANES);
        let mut total = 0.0;
        for a0 in (0..ti.rows).step_by(R) {
            // Rows past the tile's end read the zero padding; their sums are not used.
            let (o, pa) = (a0 % LANES, a0 / LANES);
            let panel_a = &ti.panels[pa * panel..(pa + 1) * panel];
            let xxa: [L; R] = std::array::from_fn(|r| L::splat(ti.xx[a0 + r]));
            let sxa: [L; R] = std::array::from_fn(|r| L::splat(ti.sx[a0 + r]));
            let after: [L; R] =
                std::array::from_fn(|r| L::splat(if diagonal { (a0 + r) as f64 } else { -1.0 }));
            let mut sums = [L::zero(); R];
            // On the diagonal, panels whose rows all have b ≤ a0 hold no pair of the block.
            let first = if diagonal {
                (a0 + 1) / LANES * LANES
            } else {
                0
            };
            for b0 in (first..width).step_by(LANES) {
                let panel_b = &tj.panels[b0 / LANES * panel..(b0 / LANES + 1) * panel];
                let mut g = [L::zero(); R];
                let mut cross = [L::zero(); R];
                let mut h = [L::zero(); R];
                for (fa, fb) in panel_a
                    .chunks_exact(2 * LANES)
                    .zip(panel_b.chunks_exact(2 * LANES))
                {
                    let xb = L::load_f64(fb.as_ptr(), LANES);
                    let sb = L::load_f64(fb[LANES..].as_ptr(), LANES);
                    for r in 0..R {
                        let (xa, sa) = (L::splat(fa[o + r]), L::splat(fa[LANES + o + r]));
                        g[r] = L::mul_add(xa, xb, g[r]);
                        cross[r] = L::mul_add(xa, sb, cross[r]);
                        cross[r] = L::mul_add(sa, xb, cross[r]);
                        h[r] = L::mul_add(sa, sb, h[r]);
                    }
                }
                let xxb = L::load_f64(tj.xx[b0..].as_ptr(), LANES);
                let sxb = L::load_f64(tj.sx[b0..].as_ptr(), LANES);
                // Only panels at the tile's end or (on the diagonal) reaching row a0 + R − 1
                // hold lanes outside the pair set; the others add every lane.
                let masked = b0 + LANES > tj.rows || (diagonal && b0 < a0 + R);
                // The panel's row numbers b0 + l, exact as floats.
                let b = L::add(L::splat(b0 as f64), lane);
                for r in 0..R {
                    let r2 = L::mul_add(minus_two, g[r], L::add(xxa[r], xxb)).positive_part();
                    let dr = L::sub(L::add(sxa[r], sxb), cross[r]);
                    let value = k.term_lanes(h[r], dr, r2);
                    sums[r] = if masked {
                        L::add_inside(sums[r], value, b, after[r], end)
                    } else {
                        L::add(sums[r], value)
                    };
                }
            }
            for s in &sums[..R.min(ti.rows - a0)] {
                total += s.tree_sum();
            }
        }
        total
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stein::ImqKernel;

    /// A deterministic sample of n rows × d: draws about (0, 1, …, d − 1) (spread 3) and
    /// scores in (−2, 2).
    fn sample(n: usize, d: usize) -> (Vec<f64>, Vec<f64>) {
        let x = (0..n * d)
            .map(|i| ((i as f64 * 0.618_034).sin() * 1e3).fract() * 3.0 + (i % d) as f64)
            .collect();
        let s = (0..n * d)
            .map(|i| ((i as f64 * 0.414_214).cos() * 1e3).fract() * 2.0)
            .collect();
        (x, s)
    }

    /// Every path (portable, AVX2, AVX-512, as this CPU has them) gives the same bits, for the
    /// three kernel terms, tiles that do and do not fill their last panel, and D = 1, 7, 10.
    #[test]
    fn every_lane_path_gives_the_same_bits() {
        let paths = Isa::available();
        for &(n, d) in &[(37usize, 1usize), (203, 7), (130, 10)] {
            let (x, s) = sample(n, d);
            for tile in [1usize, 5, 64, 1000] {
                let check = |name: &str, all: Vec<(f64, f64)>| {
                    for (isa, got) in paths.iter().zip(&all) {
                        assert_eq!(
                            (got.0.to_bits(), got.1.to_bits()),
                            (all[0].0.to_bits(), all[0].1.to_bits()),
                            "{name}, {isa:?}, n {n}, d {d}, tile {tile}: {got:?} vs {:?}",
                            all[0]
                        );
                    }
                };
                let half = ImqHalfTerm(imq_term(1.0, -0.5, d));
                check(
                    "IMQ, beta -1/2",
                    paths
                        .iter()
                        .map(|&i| sums_on(i, &x, &s, d, tile, half))
                        .collect(),
                );
                let imq = imq_term(1.7, -0.3, d);
                check(
                    "IMQ, beta -0.3",
                    paths
                        .iter()
                        .map(|&i| sums_on(i, &x, &s, d, tile, imq))
                        .collect(),
                );
                let gauss = gauss_term(4.0, d);
                check(
                    "Gaussian",
                    paths
                        .iter()
                        .map(|&i| sums_on(i, &x, &s, d, tile, gauss))
                        .collect(),
                );
            }
        }
        // The comparison is only a test where a vector path exists.
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            assert!(paths.len() >= 2, "{paths:?}");
        }
    }

    /// The IMQ β = −½ lanes (Newton's iteration, no divider) against the general IMQ term
    /// (division and `powf`) over c from 1e-150 to 1e50 and draws at scales 1e-60 to 1e50 (beyond
    /// them u^(−5/2) underflows in the general term, not in the lanes),
    /// on every path: equal to a few units of rounding (one Newton step fewer is off by ~4e-11).
    #[test]
    fn newton_imq_lanes_match_the_divided_term() {
        let d = 5;
        let (unit, scores) = sample(83, d);
        let mut worst = 0.0f64;
        for c in [1e-150, 1e-3, 1.0, 30.0, 1e50] {
            for scale in [1e-60, 1e-3, 1.0, 1e3, 1e50] {
                let x: Vec<f64> = unit.iter().map(|v| v * scale).collect();
                // Scores of the size 1/scale makes every term of k_p count.
                let s: Vec<f64> = scores.iter().map(|v| v / scale.max(c)).collect();
                let general = sums_on(Isa::Portable, &x, &s, d, 16, imq_term(c, -0.5, d));
                assert!(NEWTON_C2.contains(&(c * c)));
                for isa in Isa::available() {
                    let half = ImqHalfTerm(imq_term(c, -0.5, d));
                    let newton = sums_on(isa, &x, &s, d, 16, half);
                    let rel = (newton.0 - general.0).abs() / general.0.abs();
                    worst = worst.max(rel);
                    assert!(
                        rel < 1e-13,
                        "{isa:?}, c {c}, scale {scale}: {newton:?} vs {general:?} ({rel:e})"
                    );
                }
            }
        }
        eprintln!("largest relative difference: {worst:e}");
    }

    /// Above [`NEWTON_C2`] `ksd` takes the general IMQ term: at c = 1e154 (3c² overflows) it
    /// gives the general term's finite value, not +∞. (Below the range the general term itself
    /// overflows, u^(−3/2) at u = c².)
    #[test]
    fn ksd_takes_the_general_term_outside_the_newton_range() {
        let (n, d, c) = (40, 3, 1e154);
        assert!(!NEWTON_C2.contains(&(c * c)));
        let (unit, scores) = sample(n, d);
        let x: Vec<f64> = unit.iter().map(|v| v * 1e150).collect();
        let s: Vec<f64> = scores.iter().map(|v| v / c).collect();
        let kernel = Kernel::Imq(ImqKernel::new(c, -0.5).unwrap());
        let got = ksd(&x, &s, d, &kernel).unwrap();
        let (off, diagonal) = sums_on(Isa::Portable, &x, &s, d, KSD_TILE, imq_term(c, -0.5, d));
        let want = (2.0 * off + diagonal) / (n * n) as f64;
        assert!(got.squared_v.is_finite(), "{got:?}");
        assert_eq!(got.squared_v.to_bits(), want.to_bits(), "{got:?} vs {want}");
    }
}
