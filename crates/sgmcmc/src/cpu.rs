//! CPU state that hand-tuned code must look after.

/// `vzeroupper` after a faer product: its AVX kernels leave the upper halves of the vector
/// registers dirty, which makes the SSE code that follows (the model's row loops, libm's
/// `exp`/`log`) much slower on these CPUs (reference dependencies.md, "Pitfalls"; measured here:
/// CCAdL's full covariance 1.55× → 1.18× SGLD, full-batch scores 52 → 23 ms per draw).
#[inline(always)]
pub fn clear_upper_vector_state() {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: `vzeroupper` only needs AVX, checked above; it changes no value the program
        // reads (SSE registers keep their low 128 bits, and nothing live is in the upper ones
        // between our functions).
        unsafe { core::arch::x86_64::_mm256_zeroupper() };
    }
}
