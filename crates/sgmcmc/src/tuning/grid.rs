//! The arms of a tuning run: the Cartesian product of the `[tune.grid]` values applied to the
//! run file's `[sampler]` and `[gradient]` tables (reference §5.1).
//!
//! A value for a sampler key is written into the table through serde, so every key the
//! `[sampler]` table accepts can be searched and a misspelt key is an error naming it.

use super::TuneError;
use crate::config::{BatchSizeConfig, GradientConfig, SamplerConfig, SamplerTable, TuneGrid};
use crate::pipeline::build_method;
use serde::Serialize;

/// One arm: a complete `[sampler]` and `[gradient]` pair, and the grid values that made it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArmSettings {
    /// The sampler table of the arm.
    pub sampler: SamplerTable,
    /// The gradient table of the arm.
    pub gradient: GradientConfig,
    /// (grid key, value as written) in grid order.
    pub values: Vec<(String, String)>,
}

impl ArmSettings {
    /// `key=value, …`, for tables and logs.
    pub fn label(&self) -> String {
        let parts: Vec<String> = self
            .values
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        parts.join(", ")
    }
}

/// Keys that set the step (and the step keys of other conventions they replace).
const STEP_KEY: &str = "step_size";
const OTHER_STEP_KEYS: [&str; 2] = ["welling_teh_step", "catalogue_dt"];

/// A copy of `table` with `key` set to `value`; an error names the key if the sampler does not
/// have it or the value has the wrong type. Setting `step_size` removes the alternative step
/// keys (`welling_teh_step`, `catalogue_dt`), so the step is in the sampler's own units.
pub fn with_sampler_key(
    table: &SamplerTable,
    key: &str,
    value: toml::Value,
) -> Result<SamplerTable, TuneError> {
    let mut map = match toml::Value::try_from(table) {
        Ok(toml::Value::Table(t)) => t,
        _ => unreachable!("a sampler table serialises to a table"),
    };
    if key == "kind" || key == "schedule" {
        return Err(TuneError::Grid(format!(
            "[tune.grid] `{key}` cannot be searched; tune one sampler at a time"
        )));
    }
    if key == STEP_KEY {
        for other in OTHER_STEP_KEYS {
            map.remove(other);
        }
    }
    map.insert(key.to_string(), value.clone());
    let table: SamplerTable = toml::Value::Table(map).try_into().map_err(|e| {
        TuneError::Grid(format!(
            "[tune.grid] `{key} = {value}` does not fit the [sampler] table: {}",
            first_line(&e.to_string())
        ))
    })?;
    Ok(table)
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().trim().to_string()
}

/// A batch size as written in a table: a count, or a percentage.
pub fn batch_label(b: BatchSizeConfig) -> String {
    match b {
        BatchSizeConfig::Count(c) => c.to_string(),
        BatchSizeConfig::Fraction(f) => format!("{}%", trim_float(f * 100.0)),
    }
}

fn trim_float(x: f64) -> String {
    let s = format!("{x:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Every arm of `grid` over the base tables, in grid order: the step (`log10_step_size` or
/// `step_size`) outermost, then `batch_size`, then the other keys alphabetically (the last
/// varying fastest). Each arm's sampler is built once here, so an invalid value (a step ≤ 0,
/// L = 0, …) is an error before anything runs.
pub fn expand_grid(
    sampler: &SamplerTable,
    gradient: &GradientConfig,
    grid: &TuneGrid,
) -> Result<Vec<ArmSettings>, TuneError> {
    if sampler.schedule.is_some() {
        return Err(TuneError::Grid(
            "[sampler] has a `schedule`; tune searches constant steps, remove the schedule".into(),
        ));
    }
    // (key, [(value for the table, label)]) per axis.
    type Axis = (String, Vec<(AxisValue, String)>);
    let mut axes: Vec<Axis> = Vec::new();
    match (&grid.log10_step_size, &grid.step_size) {
        (Some(_), Some(_)) => {
            return Err(TuneError::Grid(
                "[tune.grid] give `log10_step_size` or `step_size`, not both".into(),
            ));
        }
        (Some(values), None) => {
            let values = values
                .values()
                .map_err(|e| TuneError::Grid(format!("[tune.grid] log10_step_size: {e}")))?;
            axes.push((
                "log10_step_size".into(),
                values
                    .into_iter()
                    .map(|v| {
                        (
                            AxisValue::Sampler(toml::Value::Float(10f64.powf(v))),
                            trim_float(v),
                        )
                    })
                    .collect(),
            ));
        }
        (None, Some(values)) => axes.push((
            STEP_KEY.into(),
            values
                .iter()
                .map(|&v| (AxisValue::Sampler(toml::Value::Float(v)), format!("{v:e}")))
                .collect(),
        )),
        (None, None) => {}
    }
    if let Some(batches) = &grid.batch_size {
        axes.push((
            "batch_size".into(),
            batches
                .iter()
                .map(|&b| (AxisValue::Batch(b), batch_label(b)))
                .collect(),
        ));
    }
    for (key, values) in &grid.sampler {
        if OTHER_STEP_KEYS.contains(&key.as_str()) {
            return Err(TuneError::Grid(format!(
                "[tune.grid] `{key}`: search the step with `log10_step_size` or `step_size` (the sampler's own units)"
            )));
        }
        axes.push((
            key.clone(),
            values
                .iter()
                .map(|v| (AxisValue::Sampler(v.clone()), v.to_string()))
                .collect(),
        ));
    }
    if let Some((key, _)) = axes.iter().find(|(_, v)| v.is_empty()) {
        return Err(TuneError::Grid(format!(
            "[tune.grid] `{key}` has no values"
        )));
    }
    if axes.is_empty() {
        return Err(TuneError::Grid(
            "[tune.grid] is empty: give at least one of `log10_step_size`, `step_size`, `batch_size` or a sampler key".into(),
        ));
    }
    let total: usize = axes.iter().map(|(_, v)| v.len()).product();
    let mut arms = Vec::with_capacity(total);
    for index in 0..total {
        // Mixed-radix digits, the last axis fastest.
        let mut rest = index;
        let mut picks = vec![0; axes.len()];
        for (a, (_, values)) in axes.iter().enumerate().rev() {
            picks[a] = rest % values.len();
            rest /= values.len();
        }
        let mut table = sampler.clone();
        let mut gradient = gradient.clone();
        let mut labels = Vec::with_capacity(axes.len());
        for ((key, values), &pick) in axes.iter().zip(&picks) {
            let (value, label) = &values[pick];
            match value {
                AxisValue::Sampler(v) => {
                    let table_key = if key == "log10_step_size" {
                        STEP_KEY
                    } else {
                        key
                    };
                    table = with_sampler_key(&table, table_key, v.clone())?;
                }
                AxisValue::Batch(b) => gradient.batch_size = *b,
            }
            labels.push((key.clone(), label.clone()));
        }
        build_method(&table.method)
            .map_err(|e| TuneError::Grid(format!("[tune.grid] arm {index}: {e}")))?;
        arms.push(ArmSettings {
            sampler: table,
            gradient,
            values: labels,
        });
    }
    Ok(arms)
}

#[derive(Debug, Clone)]
enum AxisValue {
    Sampler(toml::Value),
    Batch(BatchSizeConfig),
}

/// The 1/N heuristic of reference §5.5 (Brosse et al. 2018): step = 1/N in the sampler's own
/// units, the given batch size (10 % by default), and L = 10 for SGHMC.
pub fn heuristic_arm(
    sampler: &SamplerTable,
    gradient: &GradientConfig,
    num_data: usize,
    batch: BatchSizeConfig,
) -> Result<ArmSettings, TuneError> {
    let step = 1.0 / num_data as f64;
    let mut table = with_sampler_key(sampler, STEP_KEY, toml::Value::Float(step))?;
    table.schedule = None;
    let mut values = vec![
        ("log10_step_size".to_string(), trim_float(step.log10())),
        ("batch_size".to_string(), batch_label(batch)),
    ];
    if let SamplerConfig::Sghmc { .. } = table.method {
        table = with_sampler_key(&table, "inner_steps", toml::Value::Integer(10))?;
        values.push(("inner_steps".into(), "10".into()));
    }
    let mut gradient = gradient.clone();
    gradient.batch_size = batch;
    Ok(ArmSettings {
        sampler: table,
        gradient,
        values,
    })
}
