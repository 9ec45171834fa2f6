//! Loaders for the coreset MCMC paper's data sets (reference §7.9; data README §3–4):
//! the bike-sharing Poisson-regression table with its Stan reference posterior, and the NBA
//! games for Bradley–Terry.
//!
//! Bike sharing: `poisson_reg.csv` has no header and 10 columns: 8 standardised covariates,
//! the constant 1.0 and the count. The constant column is kept as a plain ninth feature
//! named `intercept` (use the GLM *without* its `intercept` flag), so the model's parameters
//! are θ = (x1..x8, intercept): the same order as a GLM with the flag, and the order in which
//! [`load_bike_sharing_reference`] returns the Stan moments (the files put the intercept
//! first).

use std::path::Path;

use super::csv::{map_csv_error, open_with_header, parse_number};
use super::libsvm::open_text;
use super::{DataError, Dataset, Features, Matrix};
use crate::moments::ReferenceMoments;

/// The bike-sharing table's file name inside its directory.
pub const BIKE_SHARING_FILE: &str = "poisson_reg.csv";
/// The Stan posterior mean's file name (one line, intercept first).
pub const BIKE_SHARING_STAN_MEAN: &str = "stan_posterior_mean.csv";
/// The Stan posterior covariance's file name (9 lines of 9, intercept first).
pub const BIKE_SHARING_STAN_COV: &str = "stan_posterior_cov.csv";
/// The NBA games' file name inside its directory.
pub const NBA_GAMES_FILE: &str = "games.csv.gz";

/// Number of covariates in the bike-sharing table.
const BIKE_COVARIATES: usize = 8;
/// Columns per bike-sharing row: covariates, the constant, the count.
const BIKE_COLUMNS: usize = BIKE_COVARIATES + 2;

/// `path` itself, or `path/file` when `path` is a directory.
pub fn file_in(path: &Path, file: &str) -> std::path::PathBuf {
    if path.is_dir() {
        path.join(file)
    } else {
        path.to_path_buf()
    }
}

/// Names of the bike-sharing parameters in model order: `x1`..`x8`, `intercept`.
pub fn bike_sharing_names() -> Vec<String> {
    (1..=BIKE_COVARIATES)
        .map(|j| format!("x{j}"))
        .chain(std::iter::once("intercept".to_string()))
        .collect()
}

/// Read a header-less numeric CSV whose every row has `columns` fields (`None`: as many as
/// the first row). Errors name the 1-based row, line and column.
fn read_numeric_rows(
    path: &Path,
    name: &str,
    columns: Option<usize>,
) -> Result<(Vec<f64>, usize, usize), DataError> {
    let input = open_text(path, name)?;
    let mut rdr = ::csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(::csv::Trim::All)
        .from_reader(input);
    let mut rec = ::csv::ByteRecord::new();
    let mut values = Vec::new();
    let mut rows = 0usize;
    let mut width = columns;
    while rdr
        .read_byte_record(&mut rec)
        .map_err(|e| map_csv_error(name, e))?
    {
        rows += 1;
        let line = rec.position().map_or(0, |p| p.line());
        let expected = *width.get_or_insert(rec.len());
        if rec.len() != expected {
            return Err(DataError::Csv {
                path: name.to_string(),
                message: format!(
                    "row {rows} (line {line}) has {} fields but {expected} are expected",
                    rec.len()
                ),
            });
        }
        for (j, field) in rec.iter().enumerate() {
            let v = parse_number(field, name, rows, line, || (j + 1).to_string())?;
            values.push(v);
        }
    }
    if rows == 0 {
        return Err(DataError::Empty {
            source_name: name.to_string(),
            what: "rows",
        });
    }
    Ok((values, rows, width.unwrap_or(0)))
}

/// Load the bike-sharing table (`poisson_reg.csv`, or a directory holding it): no header,
/// exactly 10 columns per row; columns 1–8 are the covariates, column 9 must be the constant
/// 1.0 (it becomes the ninth feature, `intercept`), column 10 is the count (the target; the
/// Poisson model checks it is a non-negative integer). Errors name the row and column.
pub fn load_bike_sharing(path: &Path) -> Result<Dataset, DataError> {
    let path = file_in(path, BIKE_SHARING_FILE);
    let name = path.display().to_string();
    let (values, rows, _) = read_numeric_rows(&path, &name, Some(BIKE_COLUMNS))?;
    let mut features = Vec::with_capacity(rows * (BIKE_COLUMNS - 1));
    let mut targets = Vec::with_capacity(rows);
    for (i, row) in values.chunks_exact(BIKE_COLUMNS).enumerate() {
        if row[BIKE_COVARIATES] != 1.0 {
            return Err(DataError::Csv {
                path: name,
                message: format!(
                    "row {}, column {}: the intercept column must be 1.0, found {}",
                    i + 1,
                    BIKE_COVARIATES + 1,
                    row[BIKE_COVARIATES]
                ),
            });
        }
        features.extend_from_slice(&row[..=BIKE_COVARIATES]);
        targets.push(row[BIKE_COLUMNS - 1]);
    }
    Ok(Dataset {
        features: Features::F64(Matrix::from_vec(features, rows, BIKE_COLUMNS - 1)?),
        targets: Some(targets),
        feature_names: bike_sharing_names(),
        targets_source: Some(format!("{name} (count, column {BIKE_COLUMNS})")),
        features_source: name,
    })
}

/// The Stan reference posterior of the bike-sharing Poisson regression (softplus link,
/// β ~ N(0, I₉)) from `stan_posterior_mean.csv` and `stan_posterior_cov.csv` in `dir`,
/// reordered from the files' (intercept, x1..x8) to the model's (x1..x8, intercept).
/// The Stan summary carries no ESS or R-hat: `ess_bulk` and `rhat` are 0 (not available),
/// `chains` and `draws_per_chain` 0. Errors: unreadable or malformed files, wrong shapes,
/// a covariance that is not symmetric or has a non-positive variance.
pub fn load_bike_sharing_reference(dir: &Path) -> Result<ReferenceMoments, DataError> {
    let d = BIKE_COVARIATES + 1;
    let mean_path = dir.join(BIKE_SHARING_STAN_MEAN);
    let mean_name = mean_path.display().to_string();
    let (mean_file, rows, cols) = read_numeric_rows(&mean_path, &mean_name, None)?;
    if rows * cols != d {
        return Err(DataError::Csv {
            path: mean_name,
            message: format!("expected {d} values (one per coefficient), found {rows} x {cols}"),
        });
    }
    let cov_path = dir.join(BIKE_SHARING_STAN_COV);
    let cov_name = cov_path.display().to_string();
    let (cov_file, rows, cols) = read_numeric_rows(&cov_path, &cov_name, None)?;
    if (rows, cols) != (d, d) {
        return Err(DataError::Csv {
            path: cov_name,
            message: format!("expected a {d} x {d} covariance, found {rows} x {cols}"),
        });
    }
    // Model index k holds file index order[k]: x1..x8 are file entries 1..8, the intercept 0.
    let order: Vec<usize> = (1..d).chain(std::iter::once(0)).collect();
    let mean: Vec<f64> = order.iter().map(|&f| mean_file[f]).collect();
    let mut covariance = vec![0.0; d * d];
    for (k, &fk) in order.iter().enumerate() {
        for (l, &fl) in order.iter().enumerate() {
            let c = cov_file[fk * d + fl];
            let t = cov_file[fl * d + fk];
            if !c.is_finite() || (c - t).abs() > 1e-12 * c.abs().max(t.abs()).max(f64::MIN_POSITIVE)
            {
                return Err(DataError::Csv {
                    path: cov_name,
                    message: format!(
                        "row {}, column {}: the covariance is not finite and symmetric ({c} vs {t})",
                        fk + 1,
                        fl + 1
                    ),
                });
            }
            covariance[k * d + l] = c;
        }
    }
    let sd: Vec<f64> = (0..d).map(|k| covariance[k * d + k].sqrt()).collect();
    if let Some(k) = sd.iter().position(|s| !(s.is_finite() && *s > 0.0)) {
        return Err(DataError::Csv {
            path: cov_name,
            message: format!(
                "row {0}, column {0}: variance {1} is not positive",
                order[k] + 1,
                covariance[k * d + k]
            ),
        });
    }
    Ok(ReferenceMoments {
        method: format!(
            "Stan posterior (coreset MCMC experiments, poisson_regression/stan/summary_stats.jld) \
             from {}; ess_bulk and rhat not available (0)",
            dir.display()
        ),
        parameter_names: bike_sharing_names(),
        mean,
        sd,
        covariance,
        ess_bulk: vec![0.0; d],
        rhat: vec![0.0; d],
        chains: 0,
        draws_per_chain: 0,
    })
}

/// The NBA games columns the Bradley–Terry model reads, found by name in the header.
const NBA_COLUMNS: [&str; 3] = ["HOME_TEAM_ID", "VISITOR_TEAM_ID", "HOME_TEAM_WINS"];

/// Load the NBA games (`games.csv.gz` with a header, `.gz` decompressed by extension; or a
/// directory holding it) for [`crate::model::BradleyTerry`]: features (HOME_TEAM_ID,
/// VISITOR_TEAM_ID) as the raw integer ids (the model maps them to 0..T−1 in increasing id
/// order and names the parameters `team[ID]`), target HOME_TEAM_WINS ∈ {0, 1}. The columns
/// are found by name; every other column is ignored (the upstream file has empty box-score
/// fields in 99 rows). Errors: an empty file, a missing column, a row without the column, a
/// value that is not an integer id or a 0/1 outcome (row and column named), no data rows.
pub fn load_nba_games(path: &Path) -> Result<Dataset, DataError> {
    let path = file_in(path, NBA_GAMES_FILE);
    let name = path.display().to_string();
    let (mut rdr, headers) = open_with_header(&path, &name)?;
    let mut at = [0usize; 3];
    for (slot, column) in at.iter_mut().zip(NBA_COLUMNS) {
        *slot = headers
            .iter()
            .position(|h| h == column)
            .ok_or_else(|| DataError::Csv {
                path: name.clone(),
                message: format!(
                    "column {column:?} not found; available columns: {}",
                    headers
                        .iter()
                        .map(|h| format!("{h:?}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })?;
    }
    let mut ids = Vec::new();
    let mut wins = Vec::new();
    let mut rec = ::csv::ByteRecord::new();
    let mut rows = 0usize;
    while rdr
        .read_byte_record(&mut rec)
        .map_err(|e| map_csv_error(&name, e))?
    {
        rows += 1;
        let line = rec.position().map_or(0, |p| p.line());
        for (k, (&j, column)) in at.iter().zip(NBA_COLUMNS).enumerate() {
            let field = rec.get(j).ok_or_else(|| DataError::Csv {
                path: name.clone(),
                message: format!(
                    "row {rows} (line {line}) has {} fields, no column {column:?}",
                    rec.len()
                ),
            })?;
            let text = std::str::from_utf8(field).unwrap_or("");
            let bad = |expected: &str| DataError::Csv {
                path: name.clone(),
                message: format!(
                    "row {rows} (line {line}), column {column:?}: {:?} is not {expected}",
                    String::from_utf8_lossy(field)
                ),
            };
            if k < 2 {
                let id: i64 = text.parse().map_err(|_| bad("an integer team id"))?;
                if id.unsigned_abs() >= 1 << 53 {
                    return Err(bad("a team id below 2^53"));
                }
                ids.push(id as f64);
            } else {
                match text {
                    "0" => wins.push(0.0),
                    "1" => wins.push(1.0),
                    _ => return Err(bad("0 or 1")),
                }
            }
        }
    }
    if rows == 0 {
        return Err(DataError::Empty {
            source_name: name,
            what: "rows",
        });
    }
    Ok(Dataset {
        features: Features::F64(Matrix::from_vec(ids, rows, 2)?),
        targets: Some(wins),
        feature_names: NBA_COLUMNS[..2].iter().map(|s| s.to_string()).collect(),
        targets_source: Some(format!("{name} (column \"HOME_TEAM_WINS\")")),
        features_source: name,
    })
}
