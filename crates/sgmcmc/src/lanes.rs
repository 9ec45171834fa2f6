//! Eight f64 lanes, the unit of every hand-vectorised kernel (the GLMs' row kernels, the KSD's
//! pair kernel): one trait of lane operations ([`Lanes`]) and its three implementations, an
//! array ([`Portable`], any CPU), two 256-bit registers ([`Avx2`], AVX2 + FMA) and one 512-bit
//! register ([`Avx512`]). Every operation is one IEEE operation per lane (fused multiply-adds
//! only where written as [`Lanes::mul_add`]) or, in [`Lanes::rsqrt_seed`], integer arithmetic on
//! the bits, the same on every path, so a kernel written against the trait gives the same bits
//! on every CPU. [`Isa::detect`] picks the widest path.
//!
//! Written by hand rather than with a portable SIMD crate, which would choose the lane count
//! (and so the summation order) per CPU.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Logical lanes of every kernel.
pub(crate) const LANES: usize = 8;

/// Which instructions a call uses; [`Isa::detect`] picks the widest the CPU has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Isa {
    /// The eight lanes as an array (any CPU).
    Portable,
    /// Two 256-bit registers (AVX2 + FMA).
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// One 512-bit register (AVX-512F/VL + FMA).
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Isa {
    /// The widest path this CPU runs.
    #[inline]
    pub(crate) fn detect() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if has!("avx512f") && has!("avx512vl") && has!("fma") {
                return Isa::Avx512;
            }
            if has!("avx2") && has!("fma") {
                return Isa::Avx2;
            }
        }
        Isa::Portable
    }

    /// Every path this CPU runs (for tests that compare them).
    #[cfg(test)]
    pub(crate) fn available() -> Vec<Isa> {
        let mut all = vec![Isa::Portable];
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if has!("avx2") && has!("fma") {
                all.push(Isa::Avx2);
            }
            if has!("avx512f") && has!("avx512vl") && has!("fma") {
                all.push(Isa::Avx512);
            }
        }
        all
    }
}

/// Eight f64 lanes and the operations the kernels perform on them. Every method is unsafe:
/// the CPU must support the implementation's instructions, and pointers must be valid for `n`.
pub(crate) trait Lanes: Copy {
    unsafe fn zero() -> Self;
    unsafe fn splat(v: f64) -> Self;
    unsafe fn load_f64(p: *const f64, n: usize) -> Self;
    unsafe fn load_f32(p: *const f32, n: usize) -> Self;
    /// Writes the first `n` lanes to `p`.
    unsafe fn store(self, p: *mut f64, n: usize);
    /// Writes lanes 8 − m … 7 to `p + 8 − m …`; the others are not touched.
    unsafe fn store_high(self, p: *mut f64, m: usize);
    /// a·b + c, rounded once, per lane.
    unsafe fn mul_add(a: Self, b: Self, c: Self) -> Self;
    /// a·b + c in lanes 8 − m … 7, c in the others.
    unsafe fn mul_add_high(a: Self, b: Self, c: Self, m: usize) -> Self;
    unsafe fn add(a: Self, b: Self) -> Self;
    unsafe fn sub(a: Self, b: Self) -> Self;
    unsafe fn mul(a: Self, b: Self) -> Self;
    /// x if x > 0, else +0 (also for NaN), per lane.
    unsafe fn positive_part(self) -> Self;
    /// from_bits(magic − (bits(x) >> 1)) per lane, wrapping: the bit-level first guess of a
    /// reciprocal square root (the exponent halved and negated, the mantissa roughly so).
    unsafe fn rsqrt_seed(self, magic: u64) -> Self;
    /// acc + (v if lo < x < hi, else +0), per lane (a NaN in v outside is dropped).
    unsafe fn add_inside(acc: Self, v: Self, x: Self, lo: Self, hi: Self) -> Self;
    /// ((l₀+l₁)+(l₂+l₃)) + ((l₄+l₅)+(l₆+l₇)).
    unsafe fn tree_sum(self) -> f64;
    /// [`Lanes::tree_sum`] of eight vectors at once.
    #[inline(always)]
    unsafe fn tree_sums(v: [Self; LANES]) -> [f64; LANES] {
        let mut out = [0.0; LANES];
        for (o, vi) in out.iter_mut().zip(v) {
            // SAFETY: forwarded from the caller.
            *o = unsafe { vi.tree_sum() };
        }
        out
    }
}

/// The portable lanes: an array, each operation lane by lane.
#[derive(Clone, Copy)]
pub(crate) struct Portable([f64; LANES]);

impl Lanes for Portable {
    #[inline(always)]
    unsafe fn zero() -> Self {
        Portable([0.0; LANES])
    }
    #[inline(always)]
    unsafe fn splat(v: f64) -> Self {
        Portable([v; LANES])
    }
    #[inline(always)]
    unsafe fn load_f64(p: *const f64, n: usize) -> Self {
        let mut v = [0.0; LANES];
        for (l, vl) in v.iter_mut().enumerate().take(n) {
            // SAFETY: l < n, and p..p + n is readable (caller).
            *vl = unsafe { *p.add(l) };
        }
        Portable(v)
    }
    #[inline(always)]
    unsafe fn load_f32(p: *const f32, n: usize) -> Self {
        let mut v = [0.0; LANES];
        for (l, vl) in v.iter_mut().enumerate().take(n) {
            // SAFETY: l < n, and p..p + n is readable (caller).
            *vl = f64::from(unsafe { *p.add(l) });
        }
        Portable(v)
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f64, n: usize) {
        for (l, &vl) in self.0.iter().enumerate().take(n) {
            // SAFETY: l < n, and p..p + n is writable (caller).
            unsafe { *p.add(l) = vl };
        }
    }
    #[inline(always)]
    unsafe fn store_high(self, p: *mut f64, m: usize) {
        for l in LANES - m..LANES {
            // SAFETY: p + 8 − m … p + 7 is writable (caller).
            unsafe { *p.add(l) = self.0[l] };
        }
    }
    #[inline(always)]
    unsafe fn mul_add(a: Self, b: Self, c: Self) -> Self {
        Portable(std::array::from_fn(|l| a.0[l].mul_add(b.0[l], c.0[l])))
    }
    #[inline(always)]
    unsafe fn mul_add_high(a: Self, b: Self, c: Self, m: usize) -> Self {
        Portable(std::array::from_fn(|l| {
            if l >= LANES - m {
                a.0[l].mul_add(b.0[l], c.0[l])
            } else {
                c.0[l]
            }
        }))
    }
    #[inline(always)]
    unsafe fn add(a: Self, b: Self) -> Self {
        Portable(std::array::from_fn(|l| a.0[l] + b.0[l]))
    }
    #[inline(always)]
    unsafe fn sub(a: Self, b: Self) -> Self {
        Portable(std::array::from_fn(|l| a.0[l] - b.0[l]))
    }
    #[inline(always)]
    unsafe fn mul(a: Self, b: Self) -> Self {
        Portable(std::array::from_fn(|l| a.0[l] * b.0[l]))
    }
    #[inline(always)]
    unsafe fn positive_part(self) -> Self {
        Portable(self.0.map(|x| if x > 0.0 { x } else { 0.0 }))
    }
    #[inline(always)]
    unsafe fn rsqrt_seed(self, magic: u64) -> Self {
        Portable(
            self.0
                .map(|x| f64::from_bits(magic.wrapping_sub(x.to_bits() >> 1))),
        )
    }
    #[inline(always)]
    unsafe fn add_inside(acc: Self, v: Self, x: Self, lo: Self, hi: Self) -> Self {
        Portable(std::array::from_fn(|l| {
            let inside = lo.0[l] < x.0[l] && x.0[l] < hi.0[l];
            acc.0[l] + if inside { v.0[l] } else { 0.0 }
        }))
    }
    #[inline(always)]
    unsafe fn tree_sum(self) -> f64 {
        let l = self.0;
        ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))
    }
}

/// Lanes 0–3 and 4–7 in two AVX registers.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(crate) struct Avx2(__m256d, __m256d);

/// The mask of the first `n` of four 64-bit lanes.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn mask4(n: usize) -> __m256i {
    // SAFETY: AVX2 (caller).
    unsafe { _mm256_cmpgt_epi64(_mm256_set1_epi64x(n as i64), _mm256_setr_epi64x(0, 1, 2, 3)) }
}

/// The masks of lanes 8 − m … 7 of eight, split into lanes 0–3 and 4–7.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn high_masks4(m: usize) -> (__m256i, __m256i) {
    // SAFETY: AVX2 (caller).
    unsafe {
        let first = _mm256_set1_epi64x((LANES - m) as i64 - 1);
        (
            _mm256_cmpgt_epi64(_mm256_setr_epi64x(0, 1, 2, 3), first),
            _mm256_cmpgt_epi64(_mm256_setr_epi64x(4, 5, 6, 7), first),
        )
    }
}

/// The mask of the first `n` of four 32-bit lanes.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn mask4_32(n: usize) -> __m128i {
    // SAFETY: SSE2 (caller's AVX2 implies it).
    unsafe { _mm_cmpgt_epi32(_mm_set1_epi32(n as i32), _mm_setr_epi32(0, 1, 2, 3)) }
}

/// The tree of [`Lanes::tree_sum`] over lanes 0–3 in `lo` and 4–7 in `hi`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn tree_sum_halves(lo: __m256d, hi: __m256d) -> f64 {
    // SAFETY: AVX (caller).
    unsafe {
        // (l0+l1, l4+l5, l2+l3, l6+l7)
        let pairs = _mm256_hadd_pd(lo, hi);
        // ((l0+l1)+(l2+l3), (l4+l5)+(l6+l7))
        let quads = _mm_add_pd(
            _mm256_castpd256_pd128(pairs),
            _mm256_extractf128_pd(pairs, 1),
        );
        _mm_cvtsd_f64(_mm_add_sd(quads, _mm_unpackhi_pd(quads, quads)))
    }
}

#[cfg(target_arch = "x86_64")]
impl Lanes for Avx2 {
    #[inline(always)]
    unsafe fn zero() -> Self {
        // SAFETY: AVX (caller).
        unsafe { Avx2(_mm256_setzero_pd(), _mm256_setzero_pd()) }
    }
    #[inline(always)]
    unsafe fn splat(v: f64) -> Self {
        // SAFETY: AVX (caller).
        unsafe { Avx2(_mm256_set1_pd(v), _mm256_set1_pd(v)) }
    }
    #[inline(always)]
    unsafe fn load_f64(p: *const f64, n: usize) -> Self {
        // SAFETY: AVX2 (caller); masked loads touch only p..p + n.
        unsafe {
            if n >= LANES {
                Avx2(_mm256_loadu_pd(p), _mm256_loadu_pd(p.add(4)))
            } else if n > 4 {
                Avx2(
                    _mm256_loadu_pd(p),
                    _mm256_maskload_pd(p.add(4), mask4(n - 4)),
                )
            } else {
                Avx2(_mm256_maskload_pd(p, mask4(n)), _mm256_setzero_pd())
            }
        }
    }
    #[inline(always)]
    unsafe fn load_f32(p: *const f32, n: usize) -> Self {
        // SAFETY: AVX2 (caller); masked loads touch only p..p + n.
        unsafe {
            if n >= LANES {
                let v = _mm256_loadu_ps(p);
                Avx2(
                    _mm256_cvtps_pd(_mm256_castps256_ps128(v)),
                    _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)),
                )
            } else if n > 4 {
                Avx2(
                    _mm256_cvtps_pd(_mm_loadu_ps(p)),
                    _mm256_cvtps_pd(_mm_maskload_ps(p.add(4), mask4_32(n - 4))),
                )
            } else {
                Avx2(
                    _mm256_cvtps_pd(_mm_maskload_ps(p, mask4_32(n))),
                    _mm256_setzero_pd(),
                )
            }
        }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f64, n: usize) {
        // SAFETY: AVX2 (caller); masked stores touch only p..p + n.
        unsafe {
            if n >= LANES {
                _mm256_storeu_pd(p, self.0);
                _mm256_storeu_pd(p.add(4), self.1);
            } else if n > 4 {
                _mm256_storeu_pd(p, self.0);
                _mm256_maskstore_pd(p.add(4), mask4(n - 4), self.1);
            } else {
                _mm256_maskstore_pd(p, mask4(n), self.0);
            }
        }
    }
    #[inline(always)]
    unsafe fn store_high(self, p: *mut f64, m: usize) {
        // SAFETY: AVX2 (caller); masked stores touch only p + 8 − m … p + 7.
        unsafe {
            let (lo, hi) = high_masks4(m);
            _mm256_maskstore_pd(p, lo, self.0);
            _mm256_maskstore_pd(p.add(4), hi, self.1);
        }
    }
    #[inline(always)]
    unsafe fn mul_add(a: Self, b: Self, c: Self) -> Self {
        // SAFETY: FMA (caller).
        unsafe {
            Avx2(
                _mm256_fmadd_pd(a.0, b.0, c.0),
                _mm256_fmadd_pd(a.1, b.1, c.1),
            )
        }
    }
    #[inline(always)]
    unsafe fn mul_add_high(a: Self, b: Self, c: Self, m: usize) -> Self {
        // SAFETY: AVX + FMA (caller).
        unsafe {
            let (lo, hi) = high_masks4(m);
            let f = Self::mul_add(a, b, c);
            Avx2(
                _mm256_blendv_pd(c.0, f.0, _mm256_castsi256_pd(lo)),
                _mm256_blendv_pd(c.1, f.1, _mm256_castsi256_pd(hi)),
            )
        }
    }
    #[inline(always)]
    unsafe fn add(a: Self, b: Self) -> Self {
        // SAFETY: AVX (caller).
        unsafe { Avx2(_mm256_add_pd(a.0, b.0), _mm256_add_pd(a.1, b.1)) }
    }
    #[inline(always)]
    unsafe fn sub(a: Self, b: Self) -> Self {
        // SAFETY: AVX (caller).
        unsafe { Avx2(_mm256_sub_pd(a.0, b.0), _mm256_sub_pd(a.1, b.1)) }
    }
    #[inline(always)]
    unsafe fn mul(a: Self, b: Self) -> Self {
        // SAFETY: AVX (caller).
        unsafe { Avx2(_mm256_mul_pd(a.0, b.0), _mm256_mul_pd(a.1, b.1)) }
    }
    #[inline(always)]
    unsafe fn positive_part(self) -> Self {
        // SAFETY: AVX (caller). max(x, 0) returns its second operand, +0, for NaN and for ±0.
        unsafe {
            let zero = _mm256_setzero_pd();
            Avx2(_mm256_max_pd(self.0, zero), _mm256_max_pd(self.1, zero))
        }
    }
    #[inline(always)]
    unsafe fn rsqrt_seed(self, magic: u64) -> Self {
        // SAFETY: AVX2 (caller).
        unsafe {
            let m = _mm256_set1_epi64x(magic as i64);
            let half = |x: __m256d| {
                _mm256_castsi256_pd(_mm256_sub_epi64(
                    m,
                    _mm256_srli_epi64::<1>(_mm256_castpd_si256(x)),
                ))
            };
            Avx2(half(self.0), half(self.1))
        }
    }
    #[inline(always)]
    unsafe fn add_inside(acc: Self, v: Self, x: Self, lo: Self, hi: Self) -> Self {
        // SAFETY: AVX (caller).
        unsafe {
            let half = |acc, v, x, lo, hi| {
                let inside = _mm256_and_pd(
                    _mm256_cmp_pd::<_CMP_LT_OQ>(lo, x),
                    _mm256_cmp_pd::<_CMP_LT_OQ>(x, hi),
                );
                _mm256_add_pd(acc, _mm256_and_pd(v, inside))
            };
            Avx2(
                half(acc.0, v.0, x.0, lo.0, hi.0),
                half(acc.1, v.1, x.1, lo.1, hi.1),
            )
        }
    }
    #[inline(always)]
    unsafe fn tree_sum(self) -> f64 {
        // SAFETY: AVX (caller).
        unsafe { tree_sum_halves(self.0, self.1) }
    }
}

/// The eight lanes in one AVX-512 register.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(crate) struct Avx512(__m512d);

/// The mask of the first `n` of eight lanes.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn mask8(n: usize) -> __mmask8 {
    if n >= LANES { 0xff } else { (1u8 << n) - 1 }
}

#[cfg(target_arch = "x86_64")]
impl Lanes for Avx512 {
    #[inline(always)]
    unsafe fn zero() -> Self {
        // SAFETY: AVX-512F (caller).
        unsafe { Avx512(_mm512_setzero_pd()) }
    }
    #[inline(always)]
    unsafe fn splat(v: f64) -> Self {
        // SAFETY: AVX-512F (caller).
        unsafe { Avx512(_mm512_set1_pd(v)) }
    }
    #[inline(always)]
    unsafe fn load_f64(p: *const f64, n: usize) -> Self {
        // SAFETY: AVX-512F (caller); the masked load touches only p..p + n.
        unsafe {
            if n >= LANES {
                Avx512(_mm512_loadu_pd(p))
            } else {
                Avx512(_mm512_maskz_loadu_pd(mask8(n), p))
            }
        }
    }
    #[inline(always)]
    unsafe fn load_f32(p: *const f32, n: usize) -> Self {
        // SAFETY: AVX-512F/VL (caller); the masked load touches only p..p + n.
        unsafe {
            if n >= LANES {
                Avx512(_mm512_cvtps_pd(_mm256_loadu_ps(p)))
            } else {
                Avx512(_mm512_cvtps_pd(_mm256_maskz_loadu_ps(mask8(n), p)))
            }
        }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f64, n: usize) {
        // SAFETY: AVX-512F (caller); the masked store touches only p..p + n.
        unsafe {
            if n >= LANES {
                _mm512_storeu_pd(p, self.0);
            } else {
                _mm512_mask_storeu_pd(p, mask8(n), self.0);
            }
        }
    }
    #[inline(always)]
    unsafe fn store_high(self, p: *mut f64, m: usize) {
        // SAFETY: AVX-512F (caller); the masked store touches only p + 8 − m … p + 7.
        unsafe { _mm512_mask_storeu_pd(p, !mask8(LANES - m), self.0) }
    }
    #[inline(always)]
    unsafe fn mul_add(a: Self, b: Self, c: Self) -> Self {
        // SAFETY: AVX-512F (caller).
        unsafe { Avx512(_mm512_fmadd_pd(a.0, b.0, c.0)) }
    }
    #[inline(always)]
    unsafe fn mul_add_high(a: Self, b: Self, c: Self, m: usize) -> Self {
        // SAFETY: AVX-512F (caller).
        unsafe { Avx512(_mm512_mask3_fmadd_pd(a.0, b.0, c.0, !mask8(LANES - m))) }
    }
    #[inline(always)]
    unsafe fn add(a: Self, b: Self) -> Self {
        // SAFETY: AVX-512F (caller).
        unsafe { Avx512(_mm512_add_pd(a.0, b.0)) }
    }
    #[inline(always)]
    unsafe fn sub(a: Self, b: Self) -> Self {
        // SAFETY: AVX-512F (caller).
        unsafe { Avx512(_mm512_sub_pd(a.0, b.0)) }
    }
    #[inline(always)]
    unsafe fn mul(a: Self, b: Self) -> Self {
        // SAFETY: AVX-512F (caller).
        unsafe { Avx512(_mm512_mul_pd(a.0, b.0)) }
    }
    #[inline(always)]
    unsafe fn positive_part(self) -> Self {
        // SAFETY: AVX-512F (caller). max(x, 0) returns its second operand, +0, for NaN and ±0.
        unsafe { Avx512(_mm512_max_pd(self.0, _mm512_setzero_pd())) }
    }
    #[inline(always)]
    unsafe fn rsqrt_seed(self, magic: u64) -> Self {
        // SAFETY: AVX-512F (caller).
        unsafe {
            let bits = _mm512_srli_epi64::<1>(_mm512_castpd_si512(self.0));
            Avx512(_mm512_castsi512_pd(_mm512_sub_epi64(
                _mm512_set1_epi64(magic as i64),
                bits,
            )))
        }
    }
    #[inline(always)]
    unsafe fn add_inside(acc: Self, v: Self, x: Self, lo: Self, hi: Self) -> Self {
        // SAFETY: AVX-512F (caller).
        unsafe {
            let inside = _mm512_cmp_pd_mask::<_CMP_LT_OQ>(lo.0, x.0)
                & _mm512_cmp_pd_mask::<_CMP_LT_OQ>(x.0, hi.0);
            Avx512(_mm512_add_pd(acc.0, _mm512_maskz_mov_pd(inside, v.0)))
        }
    }
    #[inline(always)]
    unsafe fn tree_sum(self) -> f64 {
        // SAFETY: AVX-512F (caller).
        unsafe {
            tree_sum_halves(
                _mm512_castpd512_pd256(self.0),
                _mm512_extractf64x4_pd(self.0, 1),
            )
        }
    }
    /// The same trees as a transpose: pair sums by unpacking, then the halves' sums by
    /// exchanging 128-bit blocks, then the two halves (21 instructions for eight vectors).
    #[inline(always)]
    unsafe fn tree_sums(v: [Self; LANES]) -> [f64; LANES] {
        // SAFETY: AVX-512F (caller).
        unsafe {
            // s01 = [v0:l0+l1, v1:l0+l1, v0:l2+l3, v1:l2+l3, v0:l4+l5, v1:l4+l5, v0:l6+l7, …]
            let pair = |a: Self, b: Self| {
                _mm512_add_pd(_mm512_unpacklo_pd(a.0, b.0), _mm512_unpackhi_pd(a.0, b.0))
            };
            let (s01, s23, s45, s67) = (
                pair(v[0], v[1]),
                pair(v[2], v[3]),
                pair(v[4], v[5]),
                pair(v[6], v[7]),
            );
            // Blocks 0 and 2 against blocks 1 and 3: [v0:lo, v1:lo, v0:hi, v1:hi, v2:lo, v3:lo, v2:hi, v3:hi]
            // where lo = (l0+l1)+(l2+l3) and hi = (l4+l5)+(l6+l7).
            const EVEN: i32 = 0b10_00_10_00;
            const ODD: i32 = 0b11_01_11_01;
            let quad = |a: __m512d, b: __m512d| {
                _mm512_add_pd(
                    _mm512_shuffle_f64x2::<EVEN>(a, b),
                    _mm512_shuffle_f64x2::<ODD>(a, b),
                )
            };
            let (t0, t1) = (quad(s01, s23), quad(s45, s67));
            // [v0:lo … v7:lo] + [v0:hi … v7:hi]
            let sums = _mm512_add_pd(
                _mm512_shuffle_f64x2::<EVEN>(t0, t1),
                _mm512_shuffle_f64x2::<ODD>(t0, t1),
            );
            let mut out = [0.0; LANES];
            _mm512_storeu_pd(out.as_mut_ptr(), sums);
            out
        }
    }
}
