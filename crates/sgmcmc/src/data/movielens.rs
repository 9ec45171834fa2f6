//! MovieLens ratings files (`u.data`, `u1.base`, `u1.test`, …; `.gz` decompressed by
//! extension): one rating per line, four tab-separated fields `user item rating timestamp`,
//! ids 1-based. Blank lines are skipped.
//!
//! The [`Dataset`] has two feature columns, `user` and `item`, holding the 0-based indices
//! (id − 1) as f64, and the rating as the target; the timestamp is ignored. Errors name the
//! file and the 1-based line: a missing file, a line without four fields, an id that is not
//! a positive integer, a rating that does not parse or is not finite, a file without ratings.
//!
//! [`movielens_counts`] reads the user and item counts from `u.info` beside the file, so a
//! model sized by them also fits a test split whose ids do not all occur in training.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use super::csv::parse_number;
use super::libsvm::open_text;
use super::{DataError, Dataset, Features, Matrix};

/// Feature names of a loaded ratings file: 0-based user and item indices.
pub const MOVIELENS_FEATURES: [&str; 2] = ["user", "item"];

/// The counts file of a MovieLens directory.
pub const MOVIELENS_INFO: &str = "u.info";

/// Fields per line: user, item, rating, timestamp.
const FIELDS: usize = 4;

/// A `DataError::Csv` naming `line`.
fn line_error(name: &str, line: u64, message: String) -> DataError {
    DataError::Csv {
        path: name.to_string(),
        message: format!("line {line}: {message}"),
    }
}

/// A 1-based id as a 0-based index; an error naming the line for anything but a positive
/// integer that fits in u32.
fn parse_id(field: &str, what: &str, name: &str, line: u64) -> Result<u32, DataError> {
    match field.parse::<u32>() {
        Ok(0) => Err(line_error(
            name,
            line,
            format!("{what} id 0: ids are 1-based"),
        )),
        Ok(id) => Ok(id - 1),
        Err(_) => Err(line_error(
            name,
            line,
            format!("{what} id {field:?} is not a positive integer"),
        )),
    }
}

/// Load a MovieLens ratings file (see the module documentation).
pub fn load_movielens(path: &Path) -> Result<Dataset, DataError> {
    let name = path.display().to_string();
    let input = open_text(path, &name)?;
    let mut features: Vec<f64> = Vec::new();
    let mut ratings: Vec<f64> = Vec::new();
    for (k, text) in input.lines().enumerate() {
        let line = k as u64 + 1;
        let text = text.map_err(|e| DataError::io(&name, e))?;
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let fields: Vec<&str> = text.split('\t').map(str::trim).collect();
        if fields.len() != FIELDS {
            return Err(line_error(
                &name,
                line,
                format!(
                    "{} tab-separated fields, expected {FIELDS} (user, item, rating, timestamp)",
                    fields.len()
                ),
            ));
        }
        let user = parse_id(fields[0], "user", &name, line)?;
        let item = parse_id(fields[1], "item", &name, line)?;
        let row = ratings.len() + 1;
        let rating = parse_number(fields[2].as_bytes(), &name, row, line, || {
            "3 (rating)".to_string()
        })?;
        if !rating.is_finite() {
            return Err(line_error(
                &name,
                line,
                format!("rating {:?} is not finite", fields[2]),
            ));
        }
        features.push(f64::from(user));
        features.push(f64::from(item));
        ratings.push(rating);
    }
    if ratings.is_empty() {
        return Err(DataError::Empty {
            source_name: name,
            what: "rows",
        });
    }
    let rows = ratings.len();
    Ok(Dataset {
        features: Features::F64(Matrix::from_vec(features, rows, 2)?),
        targets: Some(ratings),
        feature_names: MOVIELENS_FEATURES.iter().map(|s| s.to_string()).collect(),
        targets_source: Some(format!("{name} (rating, field 3)")),
        features_source: name,
    })
}

/// `u.info` in `path` (a directory) or beside it (a file).
fn info_path(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.join(MOVIELENS_INFO)
    } else {
        path.parent().unwrap_or(Path::new(".")).join(MOVIELENS_INFO)
    }
}

/// (users, items) from the `u.info` file in `path` (a directory) or beside it (a ratings
/// file): lines `943 users` and `1682 items` (other lines ignored). `Ok(None)` when there is
/// no such file; an error naming it when it exists but lacks either count.
pub fn movielens_counts(path: &Path) -> Result<Option<(usize, usize)>, DataError> {
    let info = info_path(path);
    if !info.is_file() {
        return Ok(None);
    }
    let name = info.display().to_string();
    let text = crate::io::read_regular_to_string(&info).map_err(|e| DataError::io(&name, e))?;
    let (mut users, mut items) = (None, None);
    for (k, line) in text.lines().enumerate() {
        let mut words = line.split_whitespace();
        let (Some(count), Some(what)) = (words.next(), words.next()) else {
            continue;
        };
        let slot = match what {
            "users" => &mut users,
            "items" => &mut items,
            _ => continue,
        };
        let n = count.parse::<usize>().map_err(|_| {
            line_error(
                &name,
                k as u64 + 1,
                format!("{count:?} is not a count of {what}"),
            )
        })?;
        *slot = Some(n);
    }
    match (users, items) {
        (Some(u), Some(i)) => Ok(Some((u, i))),
        _ => Err(DataError::Csv {
            path: name,
            message: "needs the lines `N users` and `M items`".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_ratings_and_counts() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.base");
        std::fs::write(&p, "1\t2\t5\t881250949\n\n3\t1\t3.5\t1\n").unwrap();
        let ds = load_movielens(&p).unwrap();
        let Features::F64(m) = &ds.features else {
            panic!("f64 features")
        };
        assert_eq!(m.as_slice(), &[0.0, 1.0, 2.0, 0.0]);
        assert_eq!(ds.targets.as_deref(), Some(&[5.0, 3.5][..]));
        assert_eq!(ds.feature_names, ["user", "item"]);
        assert_eq!(movielens_counts(&p).unwrap(), None);
        std::fs::write(d.path().join("u.info"), "3 users\n7 items\n2 ratings\n").unwrap();
        assert_eq!(movielens_counts(&p).unwrap(), Some((3, 7)));
        assert_eq!(movielens_counts(d.path()).unwrap(), Some((3, 7)));
        std::fs::write(d.path().join("u.info"), "3 users\n").unwrap();
        let e = movielens_counts(&p).unwrap_err().to_string();
        assert!(e.contains("u.info") && e.contains("items"), "{e}");
    }
}
