//! FFT autocovariance, Sokal's integrated autocorrelation time and the
//! single-chain Monte Carlo standard error of the mean.

use std::sync::Arc;

use realfft::num_complex::Complex;
use realfft::{ComplexToReal, RealFftPlanner, RealToComplex};

/// Smallest 5-smooth integer `>= target` (same as `scipy.fftpack.next_fast_len`).
pub(crate) fn next_fast_len(target: usize) -> usize {
    if target <= 6 {
        return target.max(1);
    }
    let mut best = usize::MAX;
    let mut p5 = 1usize;
    while p5 < best {
        let mut p35 = p5;
        while p35 < best {
            // smallest power of two with p35 * 2^k >= target
            let mut n = p35;
            while n < target {
                n *= 2;
            }
            best = best.min(n);
            if p35 >= target {
                break;
            }
            p35 *= 3;
        }
        if p5 >= target {
            break;
        }
        p5 *= 5;
    }
    best
}

/// Reusable FFT plans and buffers for the autocovariance of length-`n` series.
///
/// For each series: fill [`AutocovWorkspace::input_mut`], call [`AutocovWorkspace::add`];
/// then [`AutocovWorkspace::finish`] gives the *sum* of their autocovariances. By linearity
/// this needs one inverse FFT in total, not one per series.
pub(crate) struct AutocovWorkspace {
    n: usize,
    m: usize,
    r2c: Arc<dyn RealToComplex<f64>>,
    c2r: Arc<dyn ComplexToReal<f64>>,
    time: Vec<f64>,
    spec: Vec<Complex<f64>>,
    power: Vec<Complex<f64>>,
    scratch: Vec<Complex<f64>>,
}

impl AutocovWorkspace {
    /// Plans a real FFT of length `next_fast_len(2 n)` (zero padding, so no wrap-around).
    pub(crate) fn new(n: usize) -> Self {
        let m = next_fast_len(2 * n.max(1));
        let mut planner = RealFftPlanner::<f64>::new();
        let r2c = planner.plan_fft_forward(m);
        let c2r = planner.plan_fft_inverse(m);
        let scratch_len = r2c.get_scratch_len().max(c2r.get_scratch_len());
        let spec = r2c.make_output_vec();
        Self {
            n,
            m,
            r2c,
            c2r,
            time: vec![0.0; m],
            power: vec![Complex::new(0.0, 0.0); spec.len()],
            spec,
            scratch: vec![Complex::new(0.0, 0.0); scratch_len],
        }
    }

    /// The `n` input values of the next [`AutocovWorkspace::add`].
    pub(crate) fn input_mut(&mut self) -> &mut [f64] {
        &mut self.time[..self.n]
    }

    /// Adds the power spectrum of the mean-centred, zero-padded input to the running sum.
    /// Returns the input mean.
    pub(crate) fn add(&mut self) -> f64 {
        let n = self.n;
        if n == 0 {
            return f64::NAN;
        }
        let mean = self.time[..n].iter().sum::<f64>() / n as f64;
        for v in &mut self.time[..n] {
            *v -= mean;
        }
        self.time[n..].fill(0.0);
        self.r2c
            .process_with_scratch(&mut self.time, &mut self.spec, &mut self.scratch)
            .expect("FFT buffer sizes are fixed by construction");
        for (p, c) in self.power.iter_mut().zip(&self.spec) {
            p.re += c.norm_sqr();
        }
        mean
    }

    /// Writes the summed biased autocovariances (divisor `n`) at lags `0..n` to `out` and
    /// resets the running sum.
    pub(crate) fn finish(&mut self, out: &mut [f64]) {
        let n = self.n;
        debug_assert_eq!(out.len(), n);
        if n == 0 {
            return;
        }
        self.c2r
            .process_with_scratch(&mut self.power, &mut self.time, &mut self.scratch)
            .expect("FFT buffer sizes are fixed by construction");
        self.power.fill(Complex::new(0.0, 0.0));
        // realfft's inverse is unnormalised: divide by m (irfft) and by n (biased estimator).
        let scale = 1.0 / (self.m as f64 * n as f64);
        for (o, t) in out.iter_mut().zip(&self.time[..n]) {
            *o = t * scale;
        }
    }
}

/// Biased sample autocovariance `γ_k = (1/n) Σ_{t<n−k} (x_t − x̄)(x_{t+k} − x̄)` at lags
/// `k = 0..n`, written to `out`; computed by real FFT zero-padded to a 5-smooth length
/// `≥ 2n` (as ArviZ `autocov`).
///
/// # Panics
/// If `out.len() != x.len()`.
pub fn autocovariance(x: &[f64], out: &mut [f64]) {
    assert_eq!(
        out.len(),
        x.len(),
        "autocovariance: out must have x.len() lags"
    );
    if x.is_empty() {
        return;
    }
    let mut ws = AutocovWorkspace::new(x.len());
    ws.input_mut().copy_from_slice(x);
    ws.add();
    ws.finish(out);
}

/// Sample autocorrelation `ρ_k = γ_k / γ_0` at lags `0..n` (as ArviZ `autocorr`);
/// all NaN for a constant series.
pub fn autocorrelation(x: &[f64]) -> Vec<f64> {
    let mut out = vec![0.0; x.len()];
    autocovariance(x, &mut out);
    if let Some(&g0) = out.first() {
        for v in &mut out {
            *v /= g0;
        }
    }
    out
}

/// Integrated autocorrelation time `τ_int = 1 + 2 Σ_{k=1}^{W} ρ_k` with Sokal's automatic
/// window: the smallest `W` with `W ≥ 5 τ_int(W)` (Sokal 1997, "Monte Carlo methods in
/// statistical mechanics"; as in emcee).
///
/// Returns NaN for fewer than 4 draws or any NaN, and 1 for a constant series (ArviZ's
/// convention that a constant chain has ESS = n).
pub fn integrated_autocorr_time(x: &[f64]) -> f64 {
    const C: f64 = 5.0;
    let n = x.len();
    if n < 4 || x.iter().any(|v| v.is_nan()) {
        return f64::NAN;
    }
    let (lo, hi) = min_max(x);
    if lo == hi {
        return 1.0;
    }
    let mut acov = vec![0.0; n];
    autocovariance(x, &mut acov);
    let g0 = acov[0];
    let mut tau = 1.0;
    for (w, g) in acov.iter().enumerate().skip(1) {
        tau += 2.0 * g / g0;
        if w as f64 >= C * tau {
            return tau;
        }
    }
    // Unreachable in exact arithmetic: τ(n−1) = 0 for a mean-centred series.
    f64::NAN
}

/// Monte Carlo standard error of the mean of one chain, `sd · sqrt(τ_int / n)`, with the
/// sample sd (divisor `n − 1`) and [`integrated_autocorr_time`]. NaN for fewer than 4 draws.
pub fn mcse_mean(x: &[f64]) -> f64 {
    let tau = integrated_autocorr_time(x);
    if tau.is_nan() {
        return f64::NAN;
    }
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1.0);
    (var * tau / n).sqrt()
}

/// `(min, max)` of a non-empty slice without NaNs.
pub(crate) fn min_max(x: &[f64]) -> (f64, f64) {
    x.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Small deterministic generator (SplitMix64) + Box–Muller normals.
    pub(crate) struct SplitMix(pub u64);
    impl SplitMix {
        fn next_u64(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        fn uniform(&mut self) -> f64 {
            ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        }
        pub(crate) fn normal(&mut self) -> f64 {
            let (u1, u2) = (self.uniform(), self.uniform());
            (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
        }
    }

    fn naive_autocov(x: &[f64]) -> Vec<f64> {
        let n = x.len();
        let mean = x.iter().sum::<f64>() / n as f64;
        (0..n)
            .map(|k| {
                (0..n - k)
                    .map(|t| (x[t] - mean) * (x[t + k] - mean))
                    .sum::<f64>()
                    / n as f64
            })
            .collect()
    }

    #[test]
    fn next_fast_len_is_5_smooth() {
        // values from scipy.fftpack.next_fast_len
        for (t, want) in [
            (1, 1),
            (7, 8),
            (13, 15),
            (97, 100),
            (401, 405),
            (1021, 1024),
        ] {
            assert_eq!(next_fast_len(t), want, "target {t}");
        }
    }

    #[test]
    fn fft_autocovariance_matches_naive() {
        let mut rng = SplitMix(7);
        for n in [1usize, 2, 3, 5, 17, 64, 257, 1000] {
            let x: Vec<f64> = (0..n).map(|_| 3.0 + rng.normal()).collect();
            let mut fast = vec![0.0; n];
            autocovariance(&x, &mut fast);
            let slow = naive_autocov(&x);
            for (k, (a, b)) in fast.iter().zip(&slow).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-12 * slow[0],
                    "n={n} lag {k}: {a} vs {b}"
                );
            }
        }
    }

    #[test]
    fn autocorrelation_starts_at_one() {
        let x = [1.0, 3.0, 2.0, 5.0, 4.0];
        let r = autocorrelation(&x);
        assert_eq!(r[0], 1.0);
        assert!(autocorrelation(&[2.0; 5]).iter().all(|v| v.is_nan()));
    }

    #[test]
    fn tau_of_ar1_matches_theory() {
        // AR(1) with φ = 0.5: τ_int = (1 + φ) / (1 − φ) = 3.
        let phi = 0.5;
        let mut rng = SplitMix(12345);
        let mut x = vec![0.0; 400_000];
        let mut s = rng.normal() / (1.0f64 - phi * phi).sqrt();
        for v in &mut x {
            s = phi * s + rng.normal();
            *v = s;
        }
        let tau = integrated_autocorr_time(&x);
        assert!((tau - 3.0).abs() < 0.06, "tau = {tau}");
        // mcse of the mean: sd_stationary = 1/sqrt(1-φ²)
        let want = (1.0 / (1.0 - phi * phi) * 3.0 / x.len() as f64).sqrt();
        let got = mcse_mean(&x);
        assert!((got / want - 1.0).abs() < 0.03, "mcse {got} vs {want}");
    }

    #[test]
    fn tau_degenerate_inputs() {
        assert!(integrated_autocorr_time(&[1.0, 2.0, 3.0]).is_nan());
        assert!(integrated_autocorr_time(&[1.0, f64::NAN, 3.0, 4.0]).is_nan());
        assert_eq!(integrated_autocorr_time(&[2.0; 10]), 1.0);
        assert_eq!(mcse_mean(&[2.0; 10]), 0.0);
        // iid-ish white noise: τ ≈ 1
        let mut rng = SplitMix(3);
        let x: Vec<f64> = (0..100_000).map(|_| rng.normal()).collect();
        let tau = integrated_autocorr_time(&x);
        assert!((tau - 1.0).abs() < 0.05, "tau = {tau}");
    }
}
