//! Quantiles and the per-parameter summary table (ArviZ `az.summary`).

use super::ess::{EssWorkspace, ess_mean_with, ess_of_rows, ess_tail_with};
use super::rhat::{py_max, rhat_bulk_tail, split_copy, validate};

/// Quantile of ascending-`sorted` data by linear interpolation between order statistics
/// (Hyndman & Fan 1996 type 7, numpy's default `np.quantile(x, p)`).
///
/// NaN if `sorted` is empty or `p` is not in `[0, 1]`. Precondition: `sorted` is sorted.
pub fn quantile(sorted: &[f64], p: f64) -> f64 {
    let n = sorted.len();
    if n == 0 || !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    let virtual_index = (n - 1) as f64 * p;
    if virtual_index >= (n - 1) as f64 {
        return sorted[n - 1];
    }
    let lo = virtual_index.floor();
    let i = lo as usize;
    lerp(sorted[i], sorted[i + 1], virtual_index - lo)
}

/// numpy's `_lerp`: `a + (b − a) t`, evaluated from `b` when `t ≥ 0.5`.
fn lerp(a: f64, b: f64, t: f64) -> f64 {
    let diff = b - a;
    if t >= 0.5 {
        b - diff * (1.0 - t)
    } else {
        a + diff * t
    }
}

/// Order statistics `(x_(k), x_(k+1))` (0-based, the second clipped to the maximum) of
/// `buf`, which is reordered. `buf` must be non-empty and free of NaN.
fn order_stat_pair(buf: &mut [f64], k: usize) -> (f64, f64) {
    let (_, &mut a, right) = buf.select_nth_unstable_by(k, f64::total_cmp);
    let b = right.iter().copied().min_by(f64::total_cmp).unwrap_or(a);
    (a, b)
}

/// Type 7 quantile exactly as `scipy.stats.mstats.mquantiles(x, p, alphap=1, betap=1)`
/// (what ArviZ uses for the tail-ESS thresholds); `buf` is reordered.
pub(crate) fn mquantile_type7(buf: &mut [f64], p: f64) -> f64 {
    let n = buf.len();
    if n == 0 {
        return f64::NAN;
    }
    if n == 1 {
        return buf[0];
    }
    // m = alphap + p (1 − alphap − betap) with alphap = betap = 1; 1 + (−p) ≡ 1 − p in IEEE
    let m = 1.0 - p;
    let aleph = n as f64 * p + m;
    let k = aleph.clamp(1.0, (n - 1) as f64).floor();
    let gamma = (aleph - k).clamp(0.0, 1.0);
    let (a, b) = order_stat_pair(buf, k as usize - 1);
    (1.0 - gamma) * a + gamma * b
}

/// numpy type 7 quantile of unsorted `buf` (reordered), same result as [`quantile`].
fn quantile_unsorted(buf: &mut [f64], p: f64) -> f64 {
    let n = buf.len();
    let virtual_index = (n - 1) as f64 * p;
    if virtual_index >= (n - 1) as f64 {
        return order_stat_pair(buf, n - 1).0;
    }
    let lo = virtual_index.floor();
    let (a, b) = order_stat_pair(buf, lo as usize);
    lerp(a, b, virtual_index - lo)
}

/// Posterior summary of one scalar parameter, the columns of ArviZ `az.summary`
/// (Vehtari et al. 2021 diagnostics; quantiles instead of HDI).
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ParameterSummary {
    /// Mean of all pooled draws.
    pub mean: f64,
    /// Standard deviation of all pooled draws (divisor `N − 1`).
    pub sd: f64,
    /// 5 % quantile of all pooled draws (numpy type 7).
    pub q05: f64,
    /// 95 % quantile of all pooled draws (numpy type 7).
    pub q95: f64,
    /// Bulk ESS, see [`ess_bulk`](super::ess_bulk).
    pub ess_bulk: f64,
    /// Tail ESS, see [`ess_tail`](super::ess_tail).
    pub ess_tail: f64,
    /// Rank-normalised split R-hat, see [`rhat`](fn@super::rhat).
    pub rhat: f64,
    /// Monte Carlo standard error of the mean, `sd / sqrt(ess_mean)` (ArviZ
    /// `mcse(method="mean")`; ESS of the split chains without rank normalisation).
    pub mcse_mean: f64,
}

impl ParameterSummary {
    const NAN: Self = Self {
        mean: f64::NAN,
        sd: f64::NAN,
        q05: f64::NAN,
        q95: f64::NAN,
        ess_bulk: f64::NAN,
        ess_tail: f64::NAN,
        rhat: f64::NAN,
        mcse_mean: f64::NAN,
    };
}

/// Summarises one parameter from `chains` (one slice per chain, all the same length):
/// pooled mean, sd, 5 %/95 % quantiles, and the diagnostics [`ess_bulk`](super::ess_bulk),
/// [`ess_tail`](super::ess_tail), [`rhat`](fn@super::rhat) and `mcse_mean`, sharing work
/// between them.
///
/// Empty, ragged or NaN-containing input gives all NaN; with fewer than 4 draws per chain
/// only the moments and quantiles are computed; with one chain `rhat` is NaN (as ArviZ).
pub fn summarize(chains: &[&[f64]]) -> ParameterSummary {
    let m = chains.len();
    if m == 0
        || chains[0].is_empty()
        || chains.iter().any(|c| c.len() != chains[0].len())
        || chains.iter().any(|c| c.iter().any(|v| v.is_nan()))
    {
        return ParameterSummary::NAN;
    }
    let mut pooled: Vec<f64> = chains.iter().flat_map(|c| c.iter().copied()).collect();
    let total = pooled.len() as f64;
    let mean = pooled.iter().sum::<f64>() / total;
    let sd = (pooled.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (total - 1.0)).sqrt();
    let q05 = quantile_unsorted(&mut pooled, 0.05);
    let q95 = quantile_unsorted(&mut pooled, 0.95);
    let mut out = ParameterSummary {
        mean,
        sd,
        q05,
        q95,
        ..ParameterSummary::NAN
    };
    let Some((_, n)) = validate(chains, 1) else {
        return out;
    };
    // tail-ESS thresholds use scipy's mquantiles arithmetic (may differ from q05/q95 by ulps)
    let t05 = mquantile_type7(&mut pooled, 0.05);
    let t95 = mquantile_type7(&mut pooled, 0.95);
    drop(pooled);

    let mut ws = EssWorkspace::new(n / 2);
    let split = split_copy(chains);
    let mut z = Vec::new();
    let (bulk, tail) = rhat_bulk_tail(&split, 2 * m, &mut z);
    if m >= 2 {
        out.rhat = py_max(bulk, tail);
    }
    out.ess_bulk = ess_of_rows(&mut ws, &z, 2 * m);
    out.ess_tail = ess_tail_with(&mut ws, chains, t05, t95);
    out.mcse_mean = sd / ess_mean_with(&mut ws, chains).sqrt();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantile_matches_numpy() {
        // np.quantile([3,1,4,1,5,9,2,6], [0,.05,.1,.25,.5,.77,.95,1]) (numpy 2.4.6)
        let mut x = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0];
        let ps = [0.0, 0.05, 0.1, 0.25, 0.5, 0.77, 0.95, 1.0];
        let want = [
            1.0,
            1.0,
            1.0,
            1.75,
            3.5,
            5.390000000000001,
            7.949999999999998,
            9.0,
        ];
        let mut unsorted = x;
        x.sort_by(f64::total_cmp);
        for (&p, &w) in ps.iter().zip(&want) {
            assert_eq!(quantile(&x, p), w, "p = {p}");
            assert_eq!(quantile_unsorted(&mut unsorted, p), w, "p = {p}");
        }
        assert_eq!(quantile(&[2.5], 0.3), 2.5);
        assert_eq!(quantile(&[1.0, 2.0], 0.25), 1.25);
        assert!(quantile(&[], 0.5).is_nan());
        assert!(quantile(&[1.0], 1.5).is_nan());
    }

    #[test]
    fn mquantile_matches_scipy() {
        // scipy.stats.mstats.mquantiles(a, [.25,.5,.75], alphap=1, betap=1) of the
        // docstring example a = [6,47,49,15,42,41,7,39,43,40,36]
        let a = [
            6.0, 47.0, 49.0, 15.0, 42.0, 41.0, 7.0, 39.0, 43.0, 40.0, 36.0,
        ];
        let mut sorted = a;
        sorted.sort_by(f64::total_cmp);
        for p in [0.05, 0.25, 0.5, 0.75, 0.95] {
            let mut buf = a;
            let got = mquantile_type7(&mut buf, p);
            assert!((got - quantile(&sorted, p)).abs() < 1e-12, "p = {p}");
        }
    }

    #[test]
    fn summary_degenerate_inputs() {
        assert!(summarize(&[]).mean.is_nan());
        let s = summarize(&[&[1.0, 2.0, 3.0]]);
        assert_eq!((s.mean, s.sd, s.q95), (2.0, 1.0, 2.9));
        assert!(s.ess_bulk.is_nan() && s.rhat.is_nan());
        let c = [2.0; 8];
        let s = summarize(&[&c, &c]);
        assert_eq!(
            (s.mean, s.sd, s.ess_bulk, s.mcse_mean),
            (2.0, 0.0, 16.0, 0.0)
        );
        assert!(s.rhat.is_nan());
    }

    #[test]
    fn summary_reuses_workspace_after_constant_indicator() {
        // the 95 % indicator is constant here (ESS short-circuits); mcse_mean must still
        // use a clean workspace
        let x = [1.0, -1.0, 1.0, -1.0, 1.0, -1.0];
        let y = [-1.0, 1.0, -1.0, 1.0, -1.0, 1.0];
        let s = summarize(&[&x, &y]);
        assert_eq!(s.ess_tail, 12.0);
        let want = s.sd / super::super::ess_mean(&[&x, &y]).sqrt();
        assert!((s.mcse_mean - want).abs() < 1e-15);
        // ArviZ: az.ess(.., method="mean") = 12.9501749525715
        assert!((s.mcse_mean - s.sd / 12.9501749525715f64.sqrt()).abs() < 1e-13);
    }
}
