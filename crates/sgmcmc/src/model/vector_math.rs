//! `exp` and the logistic function written without branches, so that a loop over many
//! independent values compiles to vector instructions, and [`map_tile`], which runs such a loop
//! with the widest instructions the CPU has (AVX-512F, AVX2, else the SSE2 baseline).
//!
//! libm's `exp` is a scalar call (about a quarter of the time of the GLMs' row loops); where
//! many values are needed at once (the scores of a block of draws: one per row and draw) this
//! form is several times faster. Every path performs the same IEEE operations in the same order
//! (Rust never contracts them into FMAs), so the values do not depend on the CPU.

/// ln 2 split for Cody–Waite range reduction (fdlibm's constants): `n·LN2_HI` is exact for
/// |n| < 2¹¹.
const LN2_HI: f64 = 6.931_471_803_691_238e-1;
const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
/// 1.5·2⁵²: adding it rounds a double of magnitude < 2⁵¹ to the nearest integer, which then
/// sits in the low bits of the sum's representation.
const ROUND: f64 = 6_755_399_441_055_744.0;
/// Above this, eˣ overflows to +∞.
const EXP_MAX: f64 = 709.782_712_893_384;
/// Below this, the result is flushed to 0 (e⁻⁷⁰⁸ ≈ 3.3·10⁻³⁰⁸: an absolute error no larger).
const EXP_MIN: f64 = -708.0;

/// 1/k! for k = 2..=13: the Taylor polynomial of eʳ on |r| ≤ ln2/2, whose remainder
/// r¹⁴/14! < 5·10⁻¹⁸ is below half an ulp.
const INV_FACTORIAL: [f64; 12] = [
    1.0 / 2.0,
    1.0 / 6.0,
    1.0 / 24.0,
    1.0 / 120.0,
    1.0 / 720.0,
    1.0 / 5_040.0,
    1.0 / 40_320.0,
    1.0 / 362_880.0,
    1.0 / 3_628_800.0,
    1.0 / 39_916_800.0,
    1.0 / 479_001_600.0,
    1.0 / 6_227_020_800.0,
];

/// eˣ within a few ulp of the correctly rounded value; +∞ above 709.78, 0 below −708, NaN for
/// NaN. Branch-free: x = n·ln2 + r with n = round(x/ln2), eʳ by its Taylor polynomial, then
/// 2ⁿ built from n's bits (as 2·2ⁿ⁻¹, so n = 1024 stays representable).
#[inline(always)]
pub fn exp(x: f64) -> f64 {
    // NaN passes through the clamp and the selects below (comparisons with NaN are false).
    let xc = x.clamp(EXP_MIN, EXP_MAX);
    let t = xc * std::f64::consts::LOG2_E + ROUND;
    let n = t - ROUND;
    let r = (xc - n * LN2_HI) - n * LN2_LO;
    let mut p = INV_FACTORIAL[11];
    for &c in INV_FACTORIAL[..11].iter().rev() {
        p = p * r + c;
    }
    let p = (p * r + 1.0) * r + 1.0;
    // t's low bits hold n (two's complement); (n − 1 + 1023) << 52 is the double 2ⁿ⁻¹, for
    // n ∈ [−1021, 1024].
    let scale = f64::from_bits(t.to_bits().wrapping_add(1022) << 52);
    let e = (p * 2.0) * scale;
    if x > EXP_MAX {
        f64::INFINITY
    } else if x < EXP_MIN {
        0.0
    } else {
        e
    }
}

/// σ(z) = 1/(1 + e⁻ᶻ), with [`exp`]: exact limits 0 and 1 at ∓∞.
#[inline(always)]
pub fn sigmoid(z: f64) -> f64 {
    1.0 / (1.0 + exp(-z))
}

/// `z[i·q + p] ← f(ys[i], z[i·q + p])` over a tile of rows × q columns (row i shares ys[i]),
/// with the widest vector instructions the CPU has. `f` should be branch-free (built from
/// [`exp`], [`sigmoid`] and arithmetic) so that the inner loop vectorises.
pub fn map_tile<Y: Copy, F: Fn(Y, f64) -> f64 + Copy>(ys: &[Y], q: usize, z: &mut [f64], f: F) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F, checked just above.
            return unsafe { map_tile_avx512(ys, q, z, f) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2, checked just above.
            return unsafe { map_tile_avx2(ys, q, z, f) };
        }
    }
    map_tile_body(ys, q, z, f);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn map_tile_avx512<Y: Copy, F: Fn(Y, f64) -> f64 + Copy>(
    ys: &[Y],
    q: usize,
    z: &mut [f64],
    f: F,
) {
    map_tile_body(ys, q, z, f);
    crate::cpu::clear_upper_vector_state();
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn map_tile_avx2<Y: Copy, F: Fn(Y, f64) -> f64 + Copy>(
    ys: &[Y],
    q: usize,
    z: &mut [f64],
    f: F,
) {
    map_tile_body(ys, q, z, f);
    crate::cpu::clear_upper_vector_state();
}

#[inline(always)]
fn map_tile_body<Y: Copy, F: Fn(Y, f64) -> f64 + Copy>(ys: &[Y], q: usize, z: &mut [f64], f: F) {
    if q == 1 {
        // One column (a minibatch's residuals): one loop over the rows, which vectorises.
        for (v, &y) in z.iter_mut().zip(ys) {
            *v = f(y, *v);
        }
        return;
    }
    for (row, &y) in z.chunks_exact_mut(q.max(1)).zip(ys) {
        for v in row.iter_mut() {
            *v = f(y, *v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distance in units in the last place between two finite doubles of the same sign.
    fn ulps(a: f64, b: f64) -> u64 {
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs()
    }

    #[test]
    fn exp_is_within_two_ulp_of_libm_over_its_range() {
        let mut worst = 0;
        let n = 200_001;
        for k in 0..n {
            let x = EXP_MIN + (EXP_MAX - EXP_MIN) * k as f64 / (n - 1) as f64;
            let want = x.exp();
            if want < f64::MIN_POSITIVE {
                continue; // subnormal results are flushed (documented)
            }
            worst = worst.max(ulps(exp(x), want));
        }
        for x in [-1e-300, 0.0, 1e-300, 1e-10, -0.5, 0.346, 0.347, 1.0, 700.0] {
            worst = worst.max(ulps(exp(x), x.exp()));
        }
        assert!(worst <= 2, "worst error {worst} ulp");
    }

    #[test]
    fn exp_limits_and_nan() {
        assert_eq!(exp(710.0), f64::INFINITY);
        assert_eq!(exp(f64::INFINITY), f64::INFINITY);
        assert_eq!(exp(-746.0), 0.0);
        assert_eq!(exp(f64::NEG_INFINITY), 0.0);
        assert!(exp(f64::NAN).is_nan());
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(sigmoid(f64::INFINITY), 1.0);
        assert_eq!(sigmoid(f64::NEG_INFINITY), 0.0);
        assert!(sigmoid(f64::NAN).is_nan());
    }

    #[test]
    fn every_dispatch_path_gives_the_same_bits() {
        let ys: Vec<u8> = (0..37).map(|i| (i % 2) as u8).collect();
        let q = 13;
        let z0: Vec<f64> = (0..ys.len() * q)
            .map(|k| (k as f64 * 0.731).sin() * 40.0)
            .collect();
        let f = |y: u8, z: f64| f64::from(y) - sigmoid(z);
        let mut plain = z0.clone();
        map_tile_body(&ys, q, &mut plain, f);
        let mut dispatched = z0.clone();
        map_tile(&ys, q, &mut dispatched, f);
        assert_eq!(plain, dispatched);
        for (k, (&v, &z)) in plain.iter().zip(&z0).enumerate() {
            let want = f64::from(ys[k / q]) - 1.0 / (1.0 + (-z).exp());
            assert!((v - want).abs() <= 4.0 * f64::EPSILON, "{v} vs {want}");
        }
    }
}
