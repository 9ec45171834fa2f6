//! The GLMs' dense-row kernels, the hot loop of every minibatch gradient: the linear predictors
//! zₖ = xₖᵀw + b of a chunk of rows ([`dots`]) and the weighted row sum g += Σₖ rₖxₖ
//! ([`add_weighted_rows`]), with AVX-512 or AVX2 + FMA where the CPU has them. Both take their
//! rows from a [`RowSource`]: consecutive rows ([`Strided`]) or rows picked by index
//! ([`Gathered`]), whose addresses are checked once when the source is built rather than per
//! row (per-row slices and closures cost bounds checks and reloads of the closures' captured
//! values from the stack; see `docs/experiments/sgld_throughput.md`).
//!
//! Each kernel is a fixed sequence of IEEE operations on eight logical lanes, which every path
//! performs in the same order (AVX2 holds the eight lanes in two registers, the portable path in
//! an array), so the result is the same bits on every CPU:
//! - **panels:** a row of d features is read as ⌊d/8⌋ full panels of eight (features 8p…8p+7)
//!   and, when m = d mod 8 > 0, a tail: if d > 8, the last eight features d−8…d−1 of which
//!   lanes 8−m…7 (features d−m…d−1) are used and the others left as they are; if d < 8, the
//!   d features in lanes 0…d−1 and zeros after them. No load reaches past the end of a row (a
//!   masked load still fetches every cache line it spans: reading past a random row's end
//!   would fetch a line that was never prefetched).
//! - **dot:** per lane, fused multiply-adds xⱼwⱼ + acc, panel by panel, from 0; then
//!   z = ((l₀+l₁)+(l₂+l₃)) + ((l₄+l₅)+(l₆+l₇)) + b.
//! - **weighted sum:** in runs of [`SUM_RUN`] = 64 rows from the first (the last run may be
//!   shorter), so that a caller can split a batch into chunks of any multiple of 64 rows and
//!   get the same bits. Per run and per lane of each panel, four accumulators take the run's
//!   rows k ≡ m (mod 4) by fused multiply-adds rₖxₖⱼ + A in increasing k, from 0; then
//!   gⱼ += (A₀+A₁) + (A₂+A₃) for the lanes the panel uses. The sum Σₖ rₖ it also adds to the
//!   caller's running sum takes, per run, rₖ into lane k mod 8 by additions, then the dot's
//!   tree.
//!
//! Written by hand because the row length d is only known at run time (d = 10 is one full and
//! one partial vector), which defeats the compiler's vectoriser, and because a portable SIMD
//! crate would choose the lane count (and so the summation order) per CPU.

use super::DataIndex;
use crate::data::Element;

pub(crate) use crate::lanes::Isa;
use crate::lanes::Portable;
#[cfg(target_arch = "x86_64")]
use crate::lanes::{Avx2, Avx512};
use crate::lanes::{LANES, Lanes};

/// Row-phase accumulators per feature in [`add_weighted_rows`] (breaks the FMA latency chain).
const PHASES: usize = 4;

/// Rows per run of the weighted sum (module docs): its summation order starts again every 64
/// rows, so chunks of any multiple of 64 rows give the same bits.
pub(crate) const SUM_RUN: usize = 64;

/// A stored feature type the kernels load (converted to f64).
pub(crate) trait RowElement: Element {
    /// The first `n` ≤ 8 elements at `p` as f64 lanes, 0 in the others.
    ///
    /// # Safety
    /// `p..p + n` must be readable, and the CPU must support `L`'s instructions.
    unsafe fn load<L: Lanes>(p: *const Self, n: usize) -> L;
}

impl RowElement for f64 {
    #[inline(always)]
    unsafe fn load<L: Lanes>(p: *const f64, n: usize) -> L {
        // SAFETY: forwarded from the caller.
        unsafe { L::load_f64(p, n) }
    }
}

impl RowElement for f32 {
    #[inline(always)]
    unsafe fn load<L: Lanes>(p: *const f32, n: usize) -> L {
        // SAFETY: forwarded from the caller.
        unsafe { L::load_f32(p, n) }
    }
}

/// The rows a kernel reads, each of [`Self::row_len`] elements, and the prefetch it issues
/// before each. Row addresses are computed from a base pointer (no slice bounds per row, no
/// closure environment to reload), checked once when the source is built.
///
/// # Safety
/// Implementors promise that for every k < `rows()`, `row(k)` points to `row_len()` readable
/// elements for as long as the source is borrowed: the kernels read them without a check.
pub(crate) unsafe trait RowSource<T> {
    /// Number of rows.
    fn rows(&self) -> usize;
    /// Elements per row.
    fn row_len(&self) -> usize;
    /// Row k's first element; its `row_len()` elements are readable.
    ///
    /// # Safety
    /// `k < self.rows()`.
    unsafe fn row(&self, k: usize) -> *const T;
    /// Called just before rows k … k + count − 1 are first read: a hint to start loading
    /// later rows.
    fn prefetch_rows(&self, k: usize, count: usize);
    /// Called while the weighted sum reads rows k … k + count − 1 again (a second pass, after
    /// [`dots`]): a hint to start loading later rows, spread over both passes. None by
    /// default.
    #[inline(always)]
    fn prefetch_in_sum(&self, k: usize, count: usize) {
        let _ = (k, count);
    }
}

/// Consecutive rows of one slice (a block minibatch, a full pass): row k at `k·d`. With
/// [`Self::prefetch_ahead`], reading rows k … k + c − 1 prefetches the cache lines of the rows
/// `ahead` places later, which may lie past the slice (a prefetch is only a hint and never
/// faults).
pub(crate) struct Strided<'a, T> {
    rows: &'a [T],
    n: usize,
    d: usize,
    ahead: usize,
    within: usize,
}

impl<'a, T> Strided<'a, T> {
    /// The `n` rows of `d` elements that make up `rows` (of length n·d), no prefetch.
    pub(crate) fn new(rows: &'a [T], n: usize, d: usize) -> Self {
        assert_eq!(n.checked_mul(d), Some(rows.len()), "{n} rows of {d}");
        Strided {
            rows,
            n,
            d,
            ahead: 0,
            within: 0,
        }
    }

    /// Prefetch the row `ahead` places after each row read, while it is one of the `within`
    /// rows from the first (rows the caller will read next; 0: none).
    pub(crate) fn prefetch_ahead(self, ahead: usize, within: usize) -> Self {
        Strided {
            ahead,
            within,
            ..self
        }
    }
}

// SAFETY: `new` checked that the slice holds exactly rows() · row_len() elements, and row(k) is
// the k-th run of row_len() of them.
unsafe impl<T> RowSource<T> for Strided<'_, T> {
    #[inline(always)]
    fn rows(&self) -> usize {
        self.n
    }

    #[inline(always)]
    fn row_len(&self) -> usize {
        self.d
    }

    #[inline(always)]
    unsafe fn row(&self, k: usize) -> *const T {
        // SAFETY: k < rows(), so the row lies inside the slice.
        unsafe { self.rows.as_ptr().add(k * self.d) }
    }

    #[inline(always)]
    fn prefetch_rows(&self, k: usize, count: usize) {
        let (lo, hi) = (k + self.ahead, (k + count + self.ahead).min(self.within));
        if lo < hi {
            // Each line of the rows once: from the line of the first byte to that of the last.
            let size = std::mem::size_of::<T>();
            let first = self.rows.as_ptr().wrapping_add(lo * self.d).cast::<i8>();
            let bytes = (hi - lo) * self.d * size;
            let mut line = first.wrapping_sub(first as usize % LINE_BYTES);
            let last = first.wrapping_add(bytes.saturating_sub(1));
            while line <= last {
                prefetch_line(line);
                line = line.wrapping_add(LINE_BYTES);
            }
        }
    }
}

/// Rows of a matrix picked by index: row k is row `idx[k]` of `data` (every index checked
/// when the source is built); `prefetch_rows(k, c)` and `prefetch_in_sum(k, c)` call the given
/// hint with (k, c).
pub(crate) struct Gathered<'a, T, P> {
    data: &'a [T],
    d: usize,
    idx: &'a [DataIndex],
    hint: P,
}

impl<'a, T, P: Fn(usize, usize)> Gathered<'a, T, P> {
    /// Rows `idx` of the row-major `data` (rows of `d` elements), with `hint(k, c)` before
    /// rows k … k + c − 1 are read (in either pass).
    /// Panics if an index is out of range (with d = 0 every row is empty, and any index
    /// reads nothing).
    pub(crate) fn new(data: &'a [T], d: usize, idx: &'a [DataIndex], hint: P) -> Self {
        // One pass that vectorises (no early exit), rather than a check per row in the kernel.
        let largest = idx.iter().fold(0, |m, &i| m.max(i)) as usize;
        assert!(
            idx.is_empty() || d == 0 || largest < data.len() / d,
            "row index {largest} out of range"
        );
        Gathered { data, d, idx, hint }
    }
}

// SAFETY: `new` checked every index i against the data (i < data.len() / d, so rows i·d ..
// (i + 1)·d are inside it), and row(k) is row idx[k].
unsafe impl<T, P: Fn(usize, usize)> RowSource<T> for Gathered<'_, T, P> {
    #[inline(always)]
    fn rows(&self) -> usize {
        self.idx.len()
    }

    #[inline(always)]
    fn row_len(&self) -> usize {
        self.d
    }

    #[inline(always)]
    unsafe fn row(&self, k: usize) -> *const T {
        // SAFETY: k < rows(), and every index was checked against the data in `new`.
        unsafe {
            let i = *self.idx.get_unchecked(k) as usize;
            self.data.as_ptr().add(i * self.d)
        }
    }

    #[inline(always)]
    fn prefetch_rows(&self, k: usize, count: usize) {
        (self.hint)(k, count);
    }

    #[inline(always)]
    fn prefetch_in_sum(&self, k: usize, count: usize) {
        (self.hint)(k, count);
    }
}

/// The rows of another source from its row `first` on (the weighted sum reads one run of
/// them at a time).
struct RowsFrom<'s, R> {
    rows: &'s R,
    first: usize,
}

impl<'s, R> RowsFrom<'s, R> {
    /// Rows `first`.. of `rows`; `first` must not exceed their count.
    fn new<T>(rows: &'s R, first: usize) -> Self
    where
        R: RowSource<T>,
    {
        assert!(
            first <= rows.rows(),
            "first row {first} past the source's end"
        );
        RowsFrom { rows, first }
    }
}

// SAFETY: row(k) for k < rows() is row first + k < rows.rows() of a source that keeps the
// `RowSource` promise.
unsafe impl<T, R: RowSource<T>> RowSource<T> for RowsFrom<'_, R> {
    #[inline(always)]
    fn rows(&self) -> usize {
        self.rows.rows() - self.first
    }

    #[inline(always)]
    fn row_len(&self) -> usize {
        self.rows.row_len()
    }

    #[inline(always)]
    unsafe fn row(&self, k: usize) -> *const T {
        // SAFETY: k < rows(), so first + k < self.rows.rows().
        unsafe { self.rows.row(self.first + k) }
    }

    #[inline(always)]
    fn prefetch_rows(&self, k: usize, count: usize) {
        self.rows.prefetch_rows(self.first + k, count);
    }

    #[inline(always)]
    fn prefetch_in_sum(&self, k: usize, count: usize) {
        self.rows.prefetch_in_sum(self.first + k, count);
    }
}

/// Bytes per cache line.
const LINE_BYTES: usize = 64;

/// Prefetch the cache line holding `p`.
#[inline(always)]
fn prefetch_line(p: *const i8) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: a prefetch is only a hint; it never faults or reads memory into the program.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// `z[k] = row kᵀw + b` for k < z.len() (the dot rule of the module docs), calling
/// `rows.prefetch_rows` before rows are read (per group of eight). Panics unless the rows have
/// w.len() elements and there are at least z.len() of them.
#[inline]
pub(crate) fn dots<T: RowElement, R: RowSource<T>>(
    isa: Isa,
    rows: &R,
    w: &[f64],
    b: f64,
    z: &mut [f64],
) {
    assert_eq!(rows.row_len(), w.len(), "row length");
    assert!(z.len() <= rows.rows(), "more outputs than rows");
    match isa {
        Isa::Portable => {
            // SAFETY: the portable lanes need no CPU feature; the row counts are checked above,
            // and each row's length by the `RowSource` contract.
            unsafe { dots_body::<Portable, T, R>(rows, w, b, z) }
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => {
            // SAFETY: `Isa::Avx2` is only constructed when the CPU has AVX2 and FMA.
            unsafe { dots_avx2(rows, w, b, z) }
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => {
            // SAFETY: `Isa::Avx512` is only constructed when the CPU has AVX-512F/VL and FMA.
            unsafe { dots_avx512(rows, w, b, z) }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dots_avx2<T: RowElement, R: RowSource<T>>(rows: &R, w: &[f64], b: f64, z: &mut [f64]) {
    // SAFETY: AVX2 and FMA are enabled here; the rows are the caller's.
    unsafe { dots_body::<Avx2, T, R>(rows, w, b, z) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,fma")]
unsafe fn dots_avx512<T: RowElement, R: RowSource<T>>(rows: &R, w: &[f64], b: f64, z: &mut [f64]) {
    // SAFETY: AVX-512F/VL and FMA are enabled here; the rows are the caller's.
    unsafe { dots_body::<Avx512, T, R>(rows, w, b, z) }
}

/// # Safety
/// `rows` has rows of w.len() elements, at least z.len() of them; the CPU features are the
/// caller's.
#[inline(always)]
unsafe fn dots_body<L: Lanes, T: RowElement, R: RowSource<T>>(
    rows: &R,
    w: &[f64],
    b: f64,
    z: &mut [f64],
) {
    let d = w.len();
    // A literal panel count and tail for the common widths, so that the panel loops unroll, w
    // stays in registers and no row tests its shape. SAFETY (every arm): forwarded from the
    // caller.
    match (d / LANES, tail_of(d)) {
        (0, TAIL_SHORT) => unsafe { dots_rows::<L, T, R, TAIL_SHORT>(rows, w, b, z, 0) },
        (0, _) => unsafe { dots_rows::<L, T, R, TAIL_NONE>(rows, w, b, z, 0) },
        (1, TAIL_NONE) => unsafe { dots_rows::<L, T, R, TAIL_NONE>(rows, w, b, z, 1) },
        (1, _) => unsafe { dots_rows::<L, T, R, TAIL_HIGH>(rows, w, b, z, 1) },
        (2, TAIL_NONE) => unsafe { dots_rows::<L, T, R, TAIL_NONE>(rows, w, b, z, 2) },
        (2, _) => unsafe { dots_rows::<L, T, R, TAIL_HIGH>(rows, w, b, z, 2) },
        (3, TAIL_NONE) => unsafe { dots_rows::<L, T, R, TAIL_NONE>(rows, w, b, z, 3) },
        (3, _) => unsafe { dots_rows::<L, T, R, TAIL_HIGH>(rows, w, b, z, 3) },
        (panels, TAIL_NONE) => unsafe { dots_rows::<L, T, R, TAIL_NONE>(rows, w, b, z, panels) },
        (panels, _) => unsafe { dots_rows::<L, T, R, TAIL_HIGH>(rows, w, b, z, panels) },
    }
}

/// A row's last d mod 8 features (module docs): none (d a multiple of 8), ...
const TAIL_NONE: u8 = 0;
/// ... the high lanes of the last eight features (d > 8), ...
const TAIL_HIGH: u8 = 1;
/// ... or the d features of a short row (d < 8), in lanes 0 … d − 1.
const TAIL_SHORT: u8 = 2;

/// The tail of a row of d features.
fn tail_of(d: usize) -> u8 {
    match (d % LANES, d > LANES) {
        (0, _) => TAIL_NONE,
        (_, true) => TAIL_HIGH,
        (_, false) => TAIL_SHORT,
    }
}

/// [`dots_body`] with d / 8 full panels and the tail `TAIL` (which must be `tail_of(d)`).
///
/// # Safety
/// As [`dots_body`].
#[inline(always)]
unsafe fn dots_rows<L: Lanes, T: RowElement, R: RowSource<T>, const TAIL: u8>(
    rows: &R,
    w: &[f64],
    b: f64,
    z: &mut [f64],
    panels: usize,
) {
    let d = w.len();
    debug_assert_eq!(tail_of(d), TAIL);
    let wp = w.as_ptr();
    // (Plain loops, not closures or `array::from_fn`: those would not inherit the CPU
    // features, and the intrinsics inside them would become calls.)
    let done = z.len() - z.len() % LANES;
    for (g, zg) in z[..done].chunks_exact_mut(LANES).enumerate() {
        rows.prefetch_rows(g * LANES, LANES);
        // SAFETY: the CPU features are the caller's.
        let mut accs = [unsafe { L::zero() }; LANES];
        for (i, a) in accs.iter_mut().enumerate() {
            // SAFETY: g·8 + i < z.len() ≤ rows.rows(), rows and w have length d; the CPU
            // features are the caller's.
            *a = unsafe { dot_lanes::<L, T, TAIL>(rows.row(g * LANES + i), wp, d, panels) };
        }
        // SAFETY: the CPU features are the caller's.
        let sums = unsafe { L::tree_sums(accs) };
        for (zk, s) in zg.iter_mut().zip(sums) {
            *zk = s + b;
        }
    }
    for (k, zk) in z.iter_mut().enumerate().skip(done) {
        rows.prefetch_rows(k, 1);
        // SAFETY: as above.
        *zk = unsafe { dot_lanes::<L, T, TAIL>(rows.row(k), wp, d, panels).tree_sum() } + b;
    }
}

/// The lanes of the dot rule (module docs) for one row, before the tree.
///
/// # Safety
/// `x` and `wp` must point to d readable elements, `TAIL` be `tail_of(d)`; the CPU features
/// are the caller's.
#[inline(always)]
unsafe fn dot_lanes<L: Lanes, T: RowElement, const TAIL: u8>(
    x: *const T,
    wp: *const f64,
    d: usize,
    panels: usize,
) -> L {
    // SAFETY: every load reads a panel of the module docs, inside the row and w.
    unsafe {
        let mut acc = L::zero();
        for p in 0..panels {
            let j0 = p * LANES;
            acc = L::mul_add(
                T::load::<L>(x.add(j0), LANES),
                L::load_f64(wp.add(j0), LANES),
                acc,
            );
        }
        match TAIL {
            TAIL_HIGH => {
                let (xt, wt) = (x.add(d - LANES), wp.add(d - LANES));
                L::mul_add_high(
                    T::load::<L>(xt, LANES),
                    L::load_f64(wt, LANES),
                    acc,
                    d % LANES,
                )
            }
            TAIL_SHORT => L::mul_add(T::load::<L>(x, d), L::load_f64(wp, d), acc),
            _ => acc,
        }
    }
}

/// `g[j] += Σₖ r[k]·(row k)[j]` and `r_sum += Σₖ r[k]` over k < r.len() (the weighted-sum
/// rule of the module docs). Panics unless the rows have g.len() elements and there are at
/// least r.len() of them.
#[inline]
pub(crate) fn add_weighted_rows<T: RowElement, R: RowSource<T>>(
    isa: Isa,
    rows: &R,
    r: &[f64],
    g: &mut [f64],
    r_sum: &mut f64,
) {
    assert_eq!(rows.row_len(), g.len(), "row length");
    assert!(r.len() <= rows.rows(), "more weights than rows");
    match isa {
        Isa::Portable => {
            // SAFETY: the portable lanes need no CPU feature; the row counts are checked above,
            // and each row's length by the `RowSource` contract.
            unsafe { weighted_body::<Portable, T, R>(rows, r, g, r_sum) }
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => {
            // SAFETY: `Isa::Avx2` is only constructed when the CPU has AVX2 and FMA.
            unsafe { weighted_avx2(rows, r, g, r_sum) }
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => {
            // SAFETY: `Isa::Avx512` is only constructed when the CPU has AVX-512F/VL and FMA.
            unsafe { weighted_avx512(rows, r, g, r_sum) }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn weighted_avx2<T: RowElement, R: RowSource<T>>(
    rows: &R,
    r: &[f64],
    g: &mut [f64],
    r_sum: &mut f64,
) {
    // SAFETY: AVX2 and FMA are enabled here; the rows are the caller's.
    unsafe { weighted_body::<Avx2, T, R>(rows, r, g, r_sum) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,fma")]
unsafe fn weighted_avx512<T: RowElement, R: RowSource<T>>(
    rows: &R,
    r: &[f64],
    g: &mut [f64],
    r_sum: &mut f64,
) {
    // SAFETY: AVX-512F/VL and FMA are enabled here; the rows are the caller's.
    unsafe { weighted_body::<Avx512, T, R>(rows, r, g, r_sum) }
}

/// # Safety
/// `rows` has rows of g.len() elements, at least r.len() of them; the CPU features are the
/// caller's.
#[inline(always)]
unsafe fn weighted_body<L: Lanes, T: RowElement, R: RowSource<T>>(
    rows: &R,
    r: &[f64],
    g: &mut [f64],
    r_sum: &mut f64,
) {
    for (run, r) in r.chunks(SUM_RUN).enumerate() {
        let rows = RowsFrom::new(rows, run * SUM_RUN);
        // SAFETY: the run's rows are rows of `rows` (r.len() of them in all), as the caller
        // promised.
        unsafe { weighted_run::<L, T, _>(&rows, r, g, r_sum) };
    }
}

/// One run of [`weighted_body`] (r.len() ≤ [`SUM_RUN`]).
///
/// # Safety
/// As [`weighted_body`].
#[inline(always)]
unsafe fn weighted_run<L: Lanes, T: RowElement, R: RowSource<T>>(
    rows: &R,
    r: &[f64],
    g: &mut [f64],
    r_sum: &mut f64,
) {
    debug_assert!(r.len() <= SUM_RUN);
    let d = g.len();
    // A literal panel count and tail, as in `dots_body`; up to three panels (d < 32) in one
    // pass over the rows. SAFETY (every arm): forwarded from the caller.
    unsafe {
        match (d / LANES, tail_of(d)) {
            (0, TAIL_SHORT) => weighted_fused::<L, T, R, TAIL_SHORT>(rows, r, g, 0),
            (0, _) => weighted_fused::<L, T, R, TAIL_NONE>(rows, r, g, 0),
            (1, TAIL_NONE) => weighted_fused::<L, T, R, TAIL_NONE>(rows, r, g, 1),
            (1, _) => weighted_fused::<L, T, R, TAIL_HIGH>(rows, r, g, 1),
            (2, TAIL_NONE) => weighted_fused::<L, T, R, TAIL_NONE>(rows, r, g, 2),
            (2, _) => weighted_fused::<L, T, R, TAIL_HIGH>(rows, r, g, 2),
            (3, TAIL_NONE) => weighted_fused::<L, T, R, TAIL_NONE>(rows, r, g, 3),
            (3, _) => weighted_fused::<L, T, R, TAIL_HIGH>(rows, r, g, 3),
            (panels, _) => weighted_by_panel::<L, T, R>(rows, r, g, panels),
        }
        *r_sum += sum_of::<L>(r);
    }
}

/// Panels whose weighted sums [`weighted_fused`] accumulates in one pass over the rows.
const FUSED_PANELS: usize = 3;

/// The weighted-sum rule for d / 8 = `panels` ≤ [`FUSED_PANELS`] full panels and the tail
/// `TAIL` (`tail_of(d)`), every panel's accumulators in one pass over the rows: each row is
/// read once, and the (panels + 1) · 4 accumulators are independent chains of fused
/// multiply-adds. Each accumulator takes the same rows in the same order as
/// [`weighted_by_panel`]'s, so the bits are the same.
///
/// # Safety
/// As [`weighted_body`], and `panels` ≤ [`FUSED_PANELS`].
#[inline(always)]
unsafe fn weighted_fused<L: Lanes, T: RowElement, R: RowSource<T>, const TAIL: u8>(
    rows: &R,
    r: &[f64],
    g: &mut [f64],
    panels: usize,
) {
    let d = g.len();
    let n = r.len();
    debug_assert!(panels <= FUSED_PANELS && tail_of(d) == TAIL);
    // SAFETY: every load reads a panel of the module docs inside a row k < n (rows are the
    // caller's) or g; r[k] is in range; the CPU features are the caller's.
    unsafe {
        // acc[q][p]: panel q (the tail is panel `panels`), rows k ≡ p (mod 4).
        let mut acc = [[L::zero(); PHASES]; FUSED_PANELS + 1];
        let mut k = 0;
        while k + PHASES <= n {
            rows.prefetch_in_sum(k, PHASES);
            for p in 0..PHASES {
                weighted_row::<L, T, TAIL>(&mut acc, rows.row(k + p), r[k + p], d, panels, p);
            }
            k += PHASES;
        }
        if k < n {
            rows.prefetch_in_sum(k, n - k);
        }
        for p in 0..n - k {
            weighted_row::<L, T, TAIL>(&mut acc, rows.row(k + p), r[k + p], d, panels, p);
        }
        let gp = g.as_mut_ptr();
        for (q, a) in acc.iter().enumerate().take(panels) {
            let sum = L::add(L::add(a[0], a[1]), L::add(a[2], a[3]));
            let gq = gp.add(q * LANES);
            L::add(L::load_f64(gq, LANES), sum).store(gq, LANES);
        }
        let a = &acc[panels];
        let sum = L::add(L::add(a[0], a[1]), L::add(a[2], a[3]));
        match TAIL {
            TAIL_HIGH => {
                let gt = gp.add(d - LANES);
                L::add(L::load_f64(gt, LANES), sum).store_high(gt, d % LANES);
            }
            TAIL_SHORT => L::add(L::load_f64(gp, d), sum).store(gp, d),
            _ => {}
        }
    }
}

/// One row's fused multiply-adds r·x + acc[q][phase] for each panel q of [`weighted_fused`].
///
/// # Safety
/// `x` points to d readable elements; as [`weighted_fused`].
#[inline(always)]
unsafe fn weighted_row<L: Lanes, T: RowElement, const TAIL: u8>(
    acc: &mut [[L; PHASES]; FUSED_PANELS + 1],
    x: *const T,
    r: f64,
    d: usize,
    panels: usize,
    phase: usize,
) {
    // SAFETY: forwarded from the caller.
    unsafe {
        let rk = L::splat(r);
        for (q, a) in acc.iter_mut().enumerate().take(panels) {
            a[phase] = L::mul_add(rk, T::load::<L>(x.add(q * LANES), LANES), a[phase]);
        }
        let a = &mut acc[panels][phase];
        match TAIL {
            TAIL_HIGH => {
                let xt = T::load::<L>(x.add(d - LANES), LANES);
                *a = L::mul_add_high(rk, xt, *a, d % LANES);
            }
            TAIL_SHORT => *a = L::mul_add(rk, T::load::<L>(x, d), *a),
            _ => {}
        }
    }
}

/// The weighted-sum rule panel by panel (one pass over the rows per panel), for rows of
/// more than [`FUSED_PANELS`] panels (so a tail, if any, is the high lanes of the last eight
/// features).
///
/// # Safety
/// As [`weighted_body`], and d > 8.
#[inline(always)]
unsafe fn weighted_by_panel<L: Lanes, T: RowElement, R: RowSource<T>>(
    rows: &R,
    r: &[f64],
    g: &mut [f64],
    panels: usize,
) {
    let d = g.len();
    debug_assert!(panels > FUSED_PANELS && d > LANES);
    // SAFETY: every load reads j0..j0 + 8 ≤ d of a row k < r.len() or of g (length d); the
    // rows are the caller's, as are the CPU features.
    unsafe {
        let m = d % LANES;
        for p in 0..panels {
            let j0 = p * LANES;
            let mul_add = |a, b, c| L::mul_add(a, b, c);
            // The prefetch hints go with the first pass over the rows.
            let sum = weighted_panel::<L, T, R>(rows, r, j0, p == 0, mul_add);
            let gp = g.as_mut_ptr().add(j0);
            L::add(L::load_f64(gp, LANES), sum).store(gp, LANES);
        }
        if m > 0 {
            let mul_add = |a, b, c| L::mul_add_high(a, b, c, m);
            let sum = weighted_panel::<L, T, R>(rows, r, d - LANES, false, mul_add);
            let gp = g.as_mut_ptr().add(d - LANES);
            L::add(L::load_f64(gp, LANES), sum).store_high(gp, m);
        }
    }
}

/// Σₖ r[k] by the module docs' rule: r[k] into lane k mod 8 by additions, then the tree.
///
/// # Safety
/// The CPU features are the caller's.
#[inline(always)]
unsafe fn sum_of<L: Lanes>(r: &[f64]) -> f64 {
    let n = r.len();
    // SAFETY: each load reads k0..min(k0 + 8, n) of r; the CPU features are the caller's.
    unsafe {
        let mut acc = L::zero();
        for k0 in (0..n).step_by(LANES) {
            acc = L::add(acc, L::load_f64(r.as_ptr().add(k0), n - k0));
        }
        acc.tree_sum()
    }
}

/// (A₀+A₁) + (A₂+A₃) for one panel: the eight elements from `j0` of every row, with
/// `mul_add` (all lanes, or only a tail's); with `pace`, the rows' prefetch hints
/// ([`RowSource::prefetch_in_sum`]) per four rows.
///
/// # Safety
/// `rows.row(k) + j0 … + 8` must be readable for every k < r.len() (so r.len() ≤
/// rows.rows()); the CPU features are the caller's.
#[inline(always)]
unsafe fn weighted_panel<L: Lanes, T: RowElement, R: RowSource<T>>(
    rows: &R,
    r: &[f64],
    j0: usize,
    pace: bool,
    mul_add: impl Fn(L, L, L) -> L,
) -> L {
    let n = r.len();
    // SAFETY: forwarded from the caller.
    unsafe {
        let mut acc = [L::zero(); PHASES];
        let mut k = 0;
        while k + PHASES <= n {
            if pace {
                rows.prefetch_in_sum(k, PHASES);
            }
            for (p, a) in acc.iter_mut().enumerate() {
                let x = T::load::<L>(rows.row(k + p).add(j0), LANES);
                *a = mul_add(L::splat(r[k + p]), x, *a);
            }
            k += PHASES;
        }
        if pace && k < n {
            rows.prefetch_in_sum(k, n - k);
        }
        for (p, a) in acc.iter_mut().enumerate().take(n - k) {
            let x = T::load::<L>(rows.row(k + p).add(j0), LANES);
            *a = mul_add(L::splat(r[k + p]), x, *a);
        }
        L::add(L::add(acc[0], acc[1]), L::add(acc[2], acc[3]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows with a spread of magnitudes and signs, so that summation order shows in the bits.
    fn rows_of<T: RowElement>(n: usize, d: usize, conv: impl Fn(f64) -> T) -> Vec<T> {
        (0..n * d)
            .map(|k| {
                let v =
                    ((k as f64 * 0.618_034).sin() * 1e3).fract() * 10f64.powi((k % 7) as i32 - 3);
                conv(v)
            })
            .collect()
    }

    fn check_paths<T: RowElement>(conv: impl Fn(f64) -> T + Copy) {
        let paths = Isa::available();
        for d in [0, 1, 2, 7, 8, 9, 10, 16, 17, 31, 40, 41] {
            for n in [0, 1, 3, 4, 5, 13, 64, 65, 130] {
                let x = rows_of(n, d, conv);
                let w: Vec<f64> = (0..d).map(|j| 0.3 - 0.11 * j as f64).collect();
                let r: Vec<f64> = (0..n).map(|k| (k as f64 * 1.7).cos() * 1e-2).collect();
                let row = |k: usize| &x[k * d..(k + 1) * d];
                let strided = Strided::new(&x, n, d).prefetch_ahead(3, n);
                // The same rows gathered from a matrix with other rows between them.
                let spread: Vec<T> = (0..2 * n * d)
                    .map(|e| {
                        if (e / d) % 2 == 1 {
                            x[(e / d / 2) * d + e % d]
                        } else {
                            conv(7.0)
                        }
                    })
                    .collect();
                let idx: Vec<DataIndex> = (0..n as DataIndex).map(|k| 2 * k + 1).collect();
                let gathered = Gathered::new(&spread, d, &idx, |_, _| {});
                let mut results = Vec::new();
                for &isa in &paths {
                    let mut z = vec![0.0; n];
                    dots(isa, &strided, &w, 0.25, &mut z);
                    let mut g: Vec<f64> = (0..d).map(|j| j as f64 * 1e-3).collect();
                    let mut s = 0.0;
                    add_weighted_rows(isa, &strided, &r, &mut g, &mut s);
                    let mut zg = vec![0.0; n];
                    dots(isa, &gathered, &w, 0.25, &mut zg);
                    let mut gg: Vec<f64> = (0..d).map(|j| j as f64 * 1e-3).collect();
                    let mut sg = 0.0;
                    add_weighted_rows(isa, &gathered, &r, &mut gg, &mut sg);
                    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(
                        bits(&zg),
                        bits(&z),
                        "{isa:?} gathered dots, d = {d}, n = {n}"
                    );
                    assert_eq!(
                        bits(&gg),
                        bits(&g),
                        "{isa:?} gathered sum, d = {d}, n = {n}"
                    );
                    assert_eq!(sg.to_bits(), s.to_bits(), "{isa:?} gathered sum of r");
                    results.push((isa, z, g, s));
                }
                let (_, z0, g0, s0) = &results[0];
                for (isa, z, g, s) in &results[1..] {
                    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(z), bits(z0), "{isa:?} dots, d = {d}, n = {n}");
                    assert_eq!(bits(g), bits(g0), "{isa:?} weighted sum, d = {d}, n = {n}");
                    assert_eq!(
                        s.to_bits(),
                        s0.to_bits(),
                        "{isa:?} sum of r, d = {d}, n = {n}"
                    );
                }
                // The values themselves, against plain sums.
                for (k, &zk) in z0.iter().enumerate() {
                    let want: f64 = row(k)
                        .iter()
                        .zip(&w)
                        .map(|(a, b)| a.to_f64() * b)
                        .sum::<f64>()
                        + 0.25;
                    assert!((zk - want).abs() <= 1e-12 * (1.0 + want.abs()), "dot {k}");
                }
                for (j, &gj) in g0.iter().enumerate() {
                    let want =
                        j as f64 * 1e-3 + (0..n).map(|k| r[k] * row(k)[j].to_f64()).sum::<f64>();
                    assert!((gj - want).abs() <= 1e-12 * (1.0 + want.abs()), "g {j}");
                }
                let want: f64 = r.iter().sum();
                assert!((s0 - want).abs() <= 1e-14, "sum of r");
            }
        }
    }

    #[test]
    fn every_path_gives_the_same_bits_f64() {
        check_paths(|v| v);
    }

    #[test]
    fn every_path_gives_the_same_bits_f32() {
        check_paths(|v| v as f32);
    }

    #[test]
    #[should_panic(expected = "row index 3 out of range")]
    fn gathered_rows_refuse_an_index_past_the_data() {
        let data = [0.0f64; 6];
        let _ = Gathered::new(&data, 2, &[0, 3, 1], |_, _| {});
    }

    #[test]
    #[should_panic(expected = "rows of")]
    fn strided_rows_refuse_a_slice_of_another_length() {
        let data = [0.0f64; 6];
        let _ = Strided::new(&data, 4, 2);
    }

    /// The weighted sum on every path is the module docs' rule, to the bit: per run of 64 rows
    /// and per feature, four accumulators take the run's rows k ≡ 0, 1, 2, 3 (mod 4) by fused
    /// multiply-adds in increasing k, then g += (A₀+A₁) + (A₂+A₃); Σ r per run by lanes k mod
    /// 8 and the tree, added to the running sum. Every row shape (no tail, a short row, a tail
    /// panel; up to three panels in one pass, more panel by panel), batches with 0–3 rows after
    /// the last group of four, and batches of one, two and three runs (the last one short).
    #[test]
    fn the_weighted_sum_is_the_documented_rule() {
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for d in [0, 1, 7, 8, 9, 10, 16, 24, 31, 32, 40, 41] {
            for n in [0, 1, 3, 4, 5, 11, 64, 65, 131] {
                let x = rows_of(n, d, |v| v);
                let r: Vec<f64> = (0..n)
                    .map(|k| (k as f64 * 0.37).sin() * 10f64.powi(k as i32 % 5 - 2))
                    .collect();
                let mut want = vec![0.5; d];
                let mut want_sum = 0.25;
                for run in (0..n).step_by(64) {
                    let rows = run..(run + 64).min(n);
                    for (j, wj) in want.iter_mut().enumerate() {
                        let mut a = [0.0f64; PHASES];
                        for k in rows.clone() {
                            let p = (k - run) % PHASES;
                            a[p] = r[k].mul_add(x[k * d + j], a[p]);
                        }
                        *wj += (a[0] + a[1]) + (a[2] + a[3]);
                    }
                    let mut l = [0.0f64; LANES];
                    for k in rows {
                        l[(k - run) % LANES] += r[k];
                    }
                    want_sum += ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
                }
                for isa in Isa::available() {
                    let mut g = vec![0.5; d];
                    let mut sum = 0.25;
                    add_weighted_rows(isa, &Strided::new(&x, n, d), &r, &mut g, &mut sum);
                    assert_eq!(
                        bits(&g),
                        bits(&want),
                        "{isa:?} weighted sum, d = {d}, n = {n}"
                    );
                    assert_eq!(
                        sum.to_bits(),
                        want_sum.to_bits(),
                        "{isa:?} sum of r, n = {n}"
                    );
                }
            }
        }
    }

    /// One call over 130 rows gives the bits of calls over chunks of 64, 64 and 2 of the same
    /// rows (g and Σ r), on every path: the runs make the result independent of how a caller
    /// chunks a batch into multiples of 64 rows.
    #[test]
    fn chunks_of_whole_runs_give_the_bits_of_one_call() {
        let (n, bits) = (130, |v: &[f64]| {
            v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        });
        for d in [3, 10, 40] {
            let x = rows_of(n, d, |v| v);
            let r: Vec<f64> = (0..n).map(|k| (k as f64 * 0.61).cos() * 1e-2).collect();
            for isa in Isa::available() {
                let (mut g, mut s) = (vec![0.5; d], 0.25);
                add_weighted_rows(isa, &Strided::new(&x, n, d), &r, &mut g, &mut s);
                let (mut gc, mut sc) = (vec![0.5; d], 0.25);
                for (lo, hi) in [(0, 64), (64, 128), (128, n)] {
                    let rows = Strided::new(&x[lo * d..hi * d], hi - lo, d);
                    add_weighted_rows(isa, &rows, &r[lo..hi], &mut gc, &mut sc);
                }
                assert_eq!(bits(&gc), bits(&g), "{isa:?} weighted sum, d = {d}");
                assert_eq!(sc.to_bits(), s.to_bits(), "{isa:?} sum of r, d = {d}");
            }
        }
    }

    #[test]
    fn the_portable_path_is_the_documented_rule() {
        let x: Vec<f64> = (0..10).map(|j| 1.0 + j as f64 * 1e-9).collect();
        let w: Vec<f64> = (0..10)
            .map(|j| if j % 2 == 0 { 1e16 } else { -1e16 })
            .collect();
        let mut z = [0.0];
        dots(Isa::Portable, &Strided::new(&x, 1, 10), &w, 0.0, &mut z);
        // Lanes 0–7 take features 0–7; the tail (features 2–9, lanes 6 and 7 used) adds
        // features 8 and 9 to lanes 6 and 7.
        let l: Vec<f64> = (0..8)
            .map(|l| {
                let a = x[l].mul_add(w[l], 0.0);
                if l >= 6 {
                    x[l + 2].mul_add(w[l + 2], a)
                } else {
                    a
                }
            })
            .collect();
        let want = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
        assert_eq!(z[0].to_bits(), want.to_bits());
    }
}
