//! The posterior summary: per-parameter moments, quantiles and convergence diagnostics, as a
//! table for the terminal and as `summary.json`.

use crate::diagnostics::summarize;
use serde::Serialize;

/// One parameter's row of the summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ParameterRow {
    /// Parameter name.
    pub name: String,
    /// Posterior mean (pooled over chains).
    pub mean: f64,
    /// Posterior standard deviation.
    pub sd: f64,
    /// 5 % quantile.
    pub q05: f64,
    /// 95 % quantile.
    pub q95: f64,
    /// Bulk effective sample size (Vehtari et al. 2021).
    pub ess_bulk: f64,
    /// Tail effective sample size.
    pub ess_tail: f64,
    /// Rank-normalised split R-hat.
    pub rhat: f64,
    /// Monte Carlo standard error of the mean.
    pub mcse_mean: f64,
}

/// Summarise draws: `chains[c]` is chain c's draws, flat row-major (`draws × dim`). Chains are
/// truncated to the shortest one so split R-hat and ESS see equal lengths.
pub fn summarize_parameters(names: &[String], chains: &[&[f64]]) -> Vec<ParameterRow> {
    let dim = names.len();
    let draws = chains
        .iter()
        .map(|c| c.len() / dim.max(1))
        .min()
        .unwrap_or(0);
    let mut columns: Vec<Vec<f64>> = vec![Vec::with_capacity(draws); chains.len()];
    names
        .iter()
        .enumerate()
        .map(|(j, name)| {
            for (col, chain) in columns.iter_mut().zip(chains) {
                col.clear();
                col.extend((0..draws).map(|k| chain[k * dim + j]));
            }
            let slices: Vec<&[f64]> = columns.iter().map(Vec::as_slice).collect();
            let s = summarize(&slices);
            ParameterRow {
                name: name.clone(),
                mean: s.mean,
                sd: s.sd,
                q05: s.q05,
                q95: s.q95,
                ess_bulk: s.ess_bulk,
                ess_tail: s.ess_tail,
                rhat: s.rhat,
                mcse_mean: s.mcse_mean,
            }
        })
        .collect()
}

/// A fixed-width table of the rows (mean, sd, quantiles, ESS, R-hat), followed by extra
/// columns `(title, values)` (e.g. the true value, or a Laplace-approximation sd).
pub fn format_table(rows: &[ParameterRow], extra: &[(&str, &[f64])]) -> String {
    use std::fmt::Write;
    let width = rows.iter().map(|r| r.name.len()).max().unwrap_or(4).max(9);
    let mut out = String::new();
    let _ = write!(
        out,
        "{:<width$} {:>11} {:>10} {:>11} {:>11} {:>9} {:>9} {:>7}",
        "parameter", "mean", "sd", "q05", "q95", "ess_bulk", "ess_tail", "r_hat"
    );
    for (title, _) in extra {
        let _ = write!(out, " {title:>11}");
    }
    out.push('\n');
    for (k, r) in rows.iter().enumerate() {
        let _ = write!(
            out,
            "{:<width$} {:>11.5} {:>10.5} {:>11.5} {:>11.5} {:>9.0} {:>9.0} {:>7.3}",
            r.name, r.mean, r.sd, r.q05, r.q95, r.ess_bulk, r.ess_tail, r.rhat
        );
        for (_, values) in extra {
            let _ = write!(out, " {:>11.5}", values.get(k).copied().unwrap_or(f64::NAN));
        }
        out.push('\n');
    }
    out
}
