//! The posterior summary: per-parameter moments, quantiles and convergence diagnostics, as a
//! table for the terminal and as `summary.json`.

use crate::diagnostics::{ParameterSummary, summarize};

/// One parameter's row of the summary: its name and its [`ParameterSummary`] (serialised flat:
/// `name`, `mean`, `sd`, `q05`, `q95`, `ess_bulk`, `ess_tail`, `rhat`, `mcse_mean`).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ParameterRow {
    /// Parameter name.
    pub name: String,
    /// Moments, quantiles and diagnostics.
    #[cfg_attr(feature = "serde", serde(flatten))]
    pub stats: ParameterSummary,
}

/// Summarise draws of `model`'s θ (`chains[c]` row-major) on its constrained scale, the scale
/// its parameter names refer to (σ, not log σ: [`crate::model::Model::constrain`]).
pub fn summarize_model_draws(
    model: &(impl crate::model::Model + ?Sized),
    chains: &[&[f64]],
) -> Vec<ParameterRow> {
    let names = model.parameter_names();
    if !model.is_constrained() {
        return summarize_parameters(&names, chains);
    }
    let mapped: Vec<Vec<f64>> = chains
        .iter()
        .map(|c| crate::model::constraint::constrain_draws(model, c))
        .collect();
    let views: Vec<&[f64]> = mapped.iter().map(Vec::as_slice).collect();
    summarize_parameters(&names, &views)
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
            ParameterRow {
                name: name.clone(),
                stats: summarize(&slices),
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
            r.name,
            r.stats.mean,
            r.stats.sd,
            r.stats.q05,
            r.stats.q95,
            r.stats.ess_bulk,
            r.stats.ess_tail,
            r.stats.rhat
        );
        for (_, values) in extra {
            let _ = write!(out, " {:>11.5}", values.get(k).copied().unwrap_or(f64::NAN));
        }
        out.push('\n');
    }
    out
}
