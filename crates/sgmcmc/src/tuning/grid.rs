//! The arms of a tuning run: the Cartesian product of a [`TuneGrid`]'s values applied to a
//! sampler's and an estimator's settings (reference §5.1).
//!
//! The step is set through [`SamplerSettings::with_step_size`] (in the sampler's own units);
//! any other sampler key through [`SamplerSettings::with_key`], so every key the `[sampler]`
//! table accepts can be searched and a misspelt key is an error naming it.

use super::TuneError;
use crate::estimator::BatchSize;
use crate::settings::{EstimatorSettings, GridValue, SamplerSettings};

/// The grid of `[tune.grid]`: `log10_step_size` (a list, or `{ from, to, by }`) or
/// `step_size` (a list), `batch_size` (a list of counts, fractions or "1%" strings), and any
/// other key of the `[sampler]` table with a list of values (e.g. `inner_steps = [5, 10]`).
/// Steps are in the sampler's own units (ε for SGLD/pSGLD, η for SGHMC/SGNHT, h for the
/// splitting schemes and CCAdL). Arms are ordered step, then batch size, then the other keys
/// in alphabetical order (the last varying fastest); ties in the metric keep that order.
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct TuneGrid {
    /// log10 of the step: a list, or `{ from = -1, to = -7.5, by = 0.5 }` (by > 0 walks from
    /// `from` towards `to`, both ends included).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub log10_step_size: Option<GridValues>,
    /// The steps themselves.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub step_size: Option<Vec<f64>>,
    /// Batch sizes.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub batch_size: Option<Vec<BatchSize>>,
    /// Any other `[sampler]` key, with its values.
    #[cfg_attr(feature = "serde", serde(flatten))]
    pub sampler: std::collections::BTreeMap<String, Vec<GridValue>>,
}

/// Grid values: a list, or an arithmetic range with both ends included.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(untagged))]
pub enum GridValues {
    /// Explicit values.
    List(Vec<f64>),
    /// from, from ± by, …, to.
    Range {
        /// First value.
        from: f64,
        /// Last value (included when the range reaches it within 1e-9·by).
        to: f64,
        /// Spacing > 0.
        by: f64,
    },
}

impl GridValues {
    /// The values, or an error naming the problem.
    pub fn values(&self) -> Result<Vec<f64>, String> {
        match *self {
            GridValues::List(ref v) if v.is_empty() => Err("an empty list".into()),
            GridValues::List(ref v) => Ok(v.clone()),
            GridValues::Range { from, to, by } => {
                if !(by.is_finite() && by > 0.0 && from.is_finite() && to.is_finite()) {
                    return Err(format!(
                        "range from {from} to {to} by {by}: `by` must be > 0 and every value finite"
                    ));
                }
                let steps = ((to - from).abs() / by + 1e-9).floor() as usize;
                if steps > 100_000 {
                    return Err(format!(
                        "range from {from} to {to} by {by} has {steps} values"
                    ));
                }
                let sign = if to >= from { 1.0 } else { -1.0 };
                Ok((0..=steps).map(|k| from + sign * by * k as f64).collect())
            }
        }
    }
}

/// One arm: complete sampler and estimator settings, and the grid values that made them.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ArmSettings {
    /// The sampler of the arm (constant step).
    pub sampler: SamplerSettings,
    /// The gradient estimator of the arm.
    pub gradient: EstimatorSettings,
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

/// The grid key of the step in the sampler's own units, and the other conventions' step keys,
/// which cannot be searched (the step is searched in the sampler's own units).
const STEP_KEY: &str = "step_size";
const OTHER_STEP_KEYS: [&str; 2] = ["welling_teh_step", "catalogue_dt"];

/// A copy of `sampler` with `key` set to `value`, or an error naming the key.
fn with_key(
    sampler: &SamplerSettings,
    key: &str,
    value: &GridValue,
) -> Result<SamplerSettings, TuneError> {
    if key == "kind" || key == "schedule" {
        return Err(TuneError::Grid(format!(
            "[tune.grid] `{key}` cannot be searched; tune one sampler at a time"
        )));
    }
    sampler.with_key(key, value).map_err(|e| {
        TuneError::Grid(format!(
            "[tune.grid] `{key} = {value}` does not fit the [sampler] table: {e}"
        ))
    })
}

/// A batch size as written in a table: a count, or a percentage.
pub fn batch_label(b: BatchSize) -> String {
    match b {
        BatchSize::Count(c) => c.to_string(),
        BatchSize::Fraction(f) => format!("{}%", trim_float(f * 100.0)),
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
    sampler: &SamplerSettings,
    gradient: &EstimatorSettings,
    grid: &TuneGrid,
) -> Result<Vec<ArmSettings>, TuneError> {
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
                    .map(|v| (AxisValue::Step(10f64.powf(v)), trim_float(v)))
                    .collect(),
            ));
        }
        (None, Some(values)) => axes.push((
            STEP_KEY.into(),
            values
                .iter()
                .map(|&v| (AxisValue::Step(v), format!("{v:e}")))
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
                AxisValue::Step(step) => {
                    table = table
                        .with_step_size(*step)
                        .map_err(|source| TuneError::GridKey {
                            key: key.clone(),
                            source,
                        })?;
                }
                AxisValue::Sampler(v) => table = with_key(&table, key, v)?,
                AxisValue::Batch(b) => gradient.batch_size = *b,
            }
            labels.push((key.clone(), label.clone()));
        }
        let arm = ArmSettings {
            sampler: table,
            gradient,
            values: labels,
        };
        arm.sampler.build().map_err(|source| TuneError::Arm {
            index,
            label: arm.label(),
            table: "sampler",
            source,
        })?;
        arms.push(arm);
    }
    Ok(arms)
}

#[derive(Debug, Clone)]
enum AxisValue {
    Step(f64),
    Sampler(GridValue),
    Batch(BatchSize),
}

/// The 1/N heuristic of reference §5.5 (Brosse et al. 2018): step = 1/N in the sampler's own
/// units, the given batch size (10 % by default), and L = 10 for SGHMC.
pub fn heuristic_arm(
    sampler: &SamplerSettings,
    gradient: &EstimatorSettings,
    num_data: usize,
    batch: BatchSize,
) -> Result<ArmSettings, TuneError> {
    let step = 1.0 / num_data as f64;
    let mut table = sampler.with_step_size(step).map_err(TuneError::Heuristic)?;
    let mut values = vec![
        ("log10_step_size".to_string(), trim_float(step.log10())),
        ("batch_size".to_string(), batch_label(batch)),
    ];
    if let SamplerSettings::Sghmc { .. } = table {
        table = with_key(&table, "inner_steps", &GridValue::Integer(10))?;
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
