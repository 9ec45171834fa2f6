//! Effective sample size: bulk, tail and mean ESS (Vehtari et al. 2021,
//! §2.2 and §3; ArviZ `_ess`, `_ess_bulk`, `_ess_tail`, `_ess_mean`).

use super::autocorr::{AutocovWorkspace, min_max};
use super::rhat::{RESOLUTION, split_chain, split_copy, validate, z_scale_in_place};
use super::summary::mquantile_type7;

/// Buffers reused across the ESS computations of one call.
pub(crate) struct EssWorkspace {
    acov: AutocovWorkspace,
    acov_mean: Vec<f64>,
    rho: Vec<f64>,
    chain_means: Vec<f64>,
}

impl EssWorkspace {
    /// Workspace for split chains of `n_draw` draws.
    pub(crate) fn new(n_draw: usize) -> Self {
        Self {
            acov: AutocovWorkspace::new(n_draw),
            acov_mean: vec![0.0; n_draw],
            rho: vec![0.0; n_draw],
            chain_means: Vec::new(),
        }
    }

    /// ArviZ `_ess(ary, relative=False)` for `n_chain` chains of `n_draw` draws, where
    /// `fill(c, buf)` writes chain `c` into `buf`: multi-chain autocorrelation
    /// (Vehtari et al. 2021, §2.2) truncated by Geyer's initial positive and initial
    /// monotone sequences, `τ̂ ≥ 1 / log10(S)`, ESS `= S / τ̂`.
    pub(crate) fn ess<F>(&mut self, n_chain: usize, mut fill: F) -> f64
    where
        F: FnMut(usize, &mut [f64]),
    {
        let n_draw = self.acov_mean.len();
        let n = n_draw as f64;
        self.chain_means.clear();
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        let mut has_nan = false;
        for c in 0..n_chain {
            let buf = self.acov.input_mut();
            fill(c, buf);
            let (l, h) = min_max(buf);
            has_nan |= buf.iter().any(|v| v.is_nan());
            lo = lo.min(l);
            hi = hi.max(h);
            let mean = self.acov.add();
            self.chain_means.push(mean);
        }
        // always finish: it also resets the workspace's running spectrum sum
        self.acov.finish(&mut self.acov_mean);
        if has_nan {
            return f64::NAN;
        }
        let size = (n_chain * n_draw) as f64;
        if hi - lo < RESOLUTION {
            return size;
        }
        for v in &mut self.acov_mean {
            *v /= n_chain as f64;
        }
        let acov = &self.acov_mean;
        let mean_var = acov[0] * n / (n - 1.0);
        let mut var_plus = mean_var * (n - 1.0) / n;
        if n_chain > 1 {
            var_plus += super::rhat::var_ddof1(&self.chain_means);
        }
        let rho_at = |t: usize| 1.0 - (mean_var - acov[t]) / var_plus;

        let rho = &mut self.rho;
        rho.fill(0.0);
        let mut rho_even = 1.0;
        rho[0] = rho_even;
        let mut rho_odd = rho_at(1);
        rho[1] = rho_odd;

        // Geyer's initial positive sequence
        let mut t: usize = 1;
        while t + 3 < n_draw && rho_even + rho_odd > 0.0 {
            rho_even = rho_at(t + 1);
            rho_odd = rho_at(t + 2);
            if rho_even + rho_odd >= 0.0 {
                rho[t + 1] = rho_even;
                rho[t + 2] = rho_odd;
            }
            t += 2;
        }
        // max_t = t − 2 may be −1; keep everything as max_t + 1 = t − 1 ≥ 0.
        let max_t_plus_1 = t - 1;
        if rho_even > 0.0 {
            rho[max_t_plus_1] = rho_even;
        }
        // Geyer's initial monotone sequence
        let mut t: usize = 1;
        while t + 3 <= max_t_plus_1 {
            if rho[t + 1] + rho[t + 2] > rho[t - 1] + rho[t] {
                rho[t + 1] = (rho[t - 1] + rho[t]) / 2.0;
                rho[t + 2] = rho[t + 1];
            }
            t += 2;
        }
        let tau = -1.0 + 2.0 * rho[..max_t_plus_1].iter().sum::<f64>() + rho[max_t_plus_1];
        let floor = 1.0 / size.log10();
        let tau = if floor > tau { floor } else { tau };
        if rho.iter().any(|v| v.is_nan()) {
            return f64::NAN;
        }
        size / tau
    }
}

/// Bulk ESS: ESS of the rank-normalised split chains (Vehtari et al. 2021, §3),
/// identical to ArviZ `az.ess(x, method="bulk")`.
///
/// `chains`: one slice per chain, all the same length. NaN for fewer than 4 draws per
/// chain, ragged input or any NaN; a constant input gives the number of split draws.
pub fn ess_bulk(chains: &[&[f64]]) -> f64 {
    let Some((m, n)) = validate(chains, 1) else {
        return f64::NAN;
    };
    let mut z = split_copy(chains);
    z_scale_in_place(&mut z, &mut Vec::new());
    ess_of_rows(&mut EssWorkspace::new(n / 2), &z, 2 * m)
}

/// ESS of `rows` contiguous rows of `values`.
pub(crate) fn ess_of_rows(ws: &mut EssWorkspace, values: &[f64], rows: usize) -> f64 {
    let len = values.len() / rows;
    ws.ess(rows, |c, buf| {
        buf.copy_from_slice(&values[c * len..(c + 1) * len])
    })
}

/// Tail ESS: `min` of the split-chain ESS of the indicators `I(x ≤ q₀.₀₅)` and
/// `I(x ≤ q₀.₉₅)` (Vehtari et al. 2021, §3), identical to ArviZ
/// `az.ess(x, method="tail")` (quantiles of all pooled draws, R/scipy type 7).
///
/// Same preconditions and NaN behaviour as [`ess_bulk`].
pub fn ess_tail(chains: &[&[f64]]) -> f64 {
    let Some((_, n)) = validate(chains, 1) else {
        return f64::NAN;
    };
    let mut pooled: Vec<f64> = chains.iter().flat_map(|c| c.iter().copied()).collect();
    let q05 = mquantile_type7(&mut pooled, 0.05);
    let q95 = mquantile_type7(&mut pooled, 0.95);
    let mut ws = EssWorkspace::new(n / 2);
    ess_tail_with(&mut ws, chains, q05, q95)
}

/// Tail ESS given the pooled 5 % and 95 % quantiles.
pub(crate) fn ess_tail_with(ws: &mut EssWorkspace, chains: &[&[f64]], q05: f64, q95: f64) -> f64 {
    let rows = 2 * chains.len();
    let mut indicator_ess = |q: f64| {
        ws.ess(rows, |c, buf| {
            for (b, &x) in buf.iter_mut().zip(split_chain(chains, c)) {
                *b = if x <= q { 1.0 } else { 0.0 };
            }
        })
    };
    let lo = indicator_ess(q05);
    let hi = indicator_ess(q95);
    // Python's min(lo, hi)
    if hi < lo { hi } else { lo }
}

/// Mean ESS: ESS of the split chains without rank normalisation (Vehtari et al. 2021,
/// §2.2), identical to ArviZ `az.ess(x, method="mean")`; used for `mcse_mean`.
///
/// Same preconditions and NaN behaviour as [`ess_bulk`].
pub fn ess_mean(chains: &[&[f64]]) -> f64 {
    let Some((_, n)) = validate(chains, 1) else {
        return f64::NAN;
    };
    ess_mean_with(&mut EssWorkspace::new(n / 2), chains)
}

/// Mean ESS with a caller-provided workspace.
pub(crate) fn ess_mean_with(ws: &mut EssWorkspace, chains: &[&[f64]]) -> f64 {
    ws.ess(2 * chains.len(), |c, buf| {
        buf.copy_from_slice(split_chain(chains, c))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ess_degenerate_inputs() {
        let a = [1.0, 2.0, 3.0];
        assert!(ess_bulk(&[]).is_nan());
        assert!(ess_bulk(&[&a]).is_nan());
        assert!(ess_tail(&[&a, &a]).is_nan());
        assert!(ess_mean(&[&[1.0, f64::NAN, 2.0, 3.0]]).is_nan());
        // constant chains: ArviZ returns the number of split draws (2 x 11 → 20)
        let c = [3.0; 11];
        assert_eq!(ess_bulk(&[&c, &c]), 20.0);
        assert_eq!(ess_tail(&[&c, &c]), 20.0);
        assert_eq!(ess_mean(&[&c, &c]), 20.0);
    }

    #[test]
    fn ess_alternating_matches_arviz() {
        // az.ess([[1,-1,1,-1,1,-1],[-1,1,-1,1,-1,1]]) and method="tail"
        let x = [1.0, -1.0, 1.0, -1.0, 1.0, -1.0];
        let y = [-1.0, 1.0, -1.0, 1.0, -1.0, 1.0];
        let b = ess_bulk(&[&x, &y]);
        assert!((b / 12.9501749525715 - 1.0).abs() < 1e-12, "{b}");
        assert!((ess_tail(&[&x, &y]) - 12.0).abs() < 1e-12);
    }
}
