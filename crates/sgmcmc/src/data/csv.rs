//! CSV loading into an owned `Matrix<f64>`.

use std::io::BufRead;
use std::path::Path;

use super::libsvm::open_text;
use super::{DataError, Dataset, Features, Matrix};

pub(super) fn map_csv_error(name: &str, e: ::csv::Error) -> DataError {
    let message = e.to_string().replace('\n', " ");
    match e.into_kind() {
        ::csv::ErrorKind::Io(io) => DataError::io(name, io),
        _ => DataError::Csv {
            path: name.to_string(),
            message,
        },
    }
}

/// One CSV field as f64, or [`DataError::ParseNumber`] naming the 1-based `row`, the physical
/// `line` and the column (`column()` is only called on error).
pub(super) fn parse_number(
    field: &[u8],
    name: &str,
    row: usize,
    line: u64,
    column: impl FnOnce() -> String,
) -> Result<f64, DataError> {
    std::str::from_utf8(field)
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .ok_or_else(|| DataError::ParseNumber {
            path: name.to_string(),
            row,
            line,
            column: column(),
            value: String::from_utf8_lossy(field).into_owned(),
        })
}

/// A CSV reader over a (possibly decompressed) text stream.
pub(super) type CsvReader = ::csv::Reader<Box<dyn BufRead>>;

/// A CSV reader over `path` (`.gz` decompressed; fields trimmed, rows of any width) past its
/// header row, and the header's column names; an error for an empty file.
pub(super) fn open_with_header(
    path: &Path,
    name: &str,
) -> Result<(CsvReader, Vec<String>), DataError> {
    let input = open_text(path, name)?;
    let mut rdr = ::csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .trim(::csv::Trim::All)
        .from_reader(input);
    let headers: Vec<String> = rdr
        .headers()
        .map_err(|e| map_csv_error(name, e))?
        .iter()
        .map(String::from)
        .collect();
    if headers.is_empty() || (headers.len() == 1 && headers[0].is_empty()) {
        return Err(DataError::Csv {
            path: name.to_string(),
            message: "no header row (the file is empty)".to_string(),
        });
    }
    Ok((rdr, headers))
}

/// Loads a CSV file with a header row (`.gz` is decompressed by extension).
///
/// Every column except `target` is a feature, in file order; all values are parsed
/// as `f64` (surrounding whitespace is ignored). The target column, if given, must
/// exist. Errors name the 1-based data row (header not counted), the physical line
/// and the column name.
pub fn load_csv(path: &Path, target: Option<&str>) -> Result<Dataset, DataError> {
    let name = path.display().to_string();
    let (mut rdr, headers) = open_with_header(path, &name)?;
    let target_idx =
        match target {
            None => None,
            Some(t) => Some(headers.iter().position(|h| h == t).ok_or_else(|| {
                DataError::MissingColumn {
                    path: name.clone(),
                    column: t.to_string(),
                    available: headers.clone(),
                }
            })?),
        };
    let feature_names: Vec<String> = headers
        .iter()
        .enumerate()
        .filter(|&(j, _)| Some(j) != target_idx)
        .map(|(_, h)| h.clone())
        .collect();
    let cols = feature_names.len();

    let mut data: Vec<f64> = Vec::new();
    let mut targets: Vec<f64> = Vec::new();
    let mut rec = ::csv::ByteRecord::new();
    let mut rows = 0usize;
    while rdr
        .read_byte_record(&mut rec)
        .map_err(|e| map_csv_error(&name, e))?
    {
        rows += 1;
        let line = rec.position().map_or(0, |p| p.line());
        if rec.len() != headers.len() {
            return Err(DataError::RaggedRow {
                path: name,
                row: rows,
                line,
                expected: headers.len(),
                found: rec.len(),
            });
        }
        for (j, field) in rec.iter().enumerate() {
            let value = parse_number(field, &name, rows, line, || format!("{:?}", headers[j]))?;
            if Some(j) == target_idx {
                targets.push(value);
            } else {
                data.push(value);
            }
        }
    }
    let features = Matrix::from_vec(data, rows, cols)?;
    let features = Features::F64(features);
    super::check_nonempty(&features, &name)?;
    let targets_source = target.map(|t| format!("{name} (target column {t:?})"));
    Ok(Dataset {
        features,
        targets: target_idx.map(|_| targets),
        feature_names,
        features_source: name,
        targets_source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn write(dir: &tempfile::TempDir, file: &str, text: &str) -> std::path::PathBuf {
        let p = dir.path().join(file);
        fs::write(&p, text).unwrap();
        p
    }

    fn f64s(ds: &Dataset) -> &Matrix<f64> {
        match &ds.features {
            Features::F64(m) => m,
            _ => panic!("expected dense f64"),
        }
    }

    #[test]
    fn with_and_without_target() {
        let d = tempfile::tempdir().unwrap();
        let p = write(&d, "t.csv", "a, y ,b\n1,2,3\n 4.5 ,-5,6e1\n");
        let ds = load_csv(&p, Some("y")).unwrap();
        assert_eq!(ds.feature_names, vec!["a", "b"]);
        assert_eq!((ds.rows(), ds.cols()), (2, 2));
        assert_eq!(f64s(&ds).row(0), &[1.0, 3.0]);
        assert_eq!(f64s(&ds).row(1), &[4.5, 60.0]);
        assert_eq!(ds.targets.as_deref(), Some(&[2.0, -5.0][..]));
        assert!(ds.targets_source.as_deref().unwrap().contains("\"y\""));

        let ds = load_csv(&p, None).unwrap();
        assert_eq!(ds.feature_names, vec!["a", "y", "b"]);
        assert_eq!(f64s(&ds).row(1), &[4.5, -5.0, 60.0]);
        assert!(ds.targets.is_none());
        assert_eq!(ds.features_source, p.display().to_string());
    }

    #[test]
    fn missing_target_column() {
        let d = tempfile::tempdir().unwrap();
        let p = write(&d, "t.csv", "a,b\n1,2\n");
        let e = load_csv(&p, Some("label")).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}: target column \"label\" not found; available columns: \"a\", \"b\"",
                p.display()
            )
        );
    }

    #[test]
    fn bad_number_names_row_and_column() {
        let d = tempfile::tempdir().unwrap();
        let p = write(&d, "train.csv", "id,age\n1,30\n2,abc\n");
        let e = load_csv(&p, None).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}: row 2 (line 3), column \"age\": cannot parse \"abc\" as a number",
                p.display()
            )
        );
        let p = write(&d, "empty_field.csv", "id,age\n1,\n");
        let e = load_csv(&p, None).unwrap_err();
        assert!(e.to_string().contains("cannot parse \"\""), "{e}");
    }

    #[test]
    fn ragged_row() {
        let d = tempfile::tempdir().unwrap();
        let p = write(&d, "r.csv", "a,b,c\n1,2,3\n4,5\n");
        let e = load_csv(&p, None).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}: row 2 (line 3) has 2 fields but the header has 3",
                p.display()
            )
        );
    }

    #[test]
    fn empty_inputs() {
        let d = tempfile::tempdir().unwrap();
        let p = write(&d, "h.csv", "a,b\n");
        let e = load_csv(&p, None).unwrap_err();
        assert!(matches!(e, DataError::Empty { what: "rows", .. }), "{e}");
        let p = write(&d, "only_target.csv", "y\n1\n");
        let e = load_csv(&p, Some("y")).unwrap_err();
        assert!(
            matches!(
                e,
                DataError::Empty {
                    what: "columns",
                    ..
                }
            ),
            "{e}"
        );
        let p = write(&d, "nothing.csv", "");
        let e = load_csv(&p, None).unwrap_err();
        assert!(e.to_string().contains("no header row"), "{e}");
        let e = load_csv(&d.path().join("missing.csv"), None).unwrap_err();
        assert!(matches!(e, DataError::Io { .. }), "{e}");
    }

    #[test]
    fn nan_in_csv_is_caught_by_validation() {
        let d = tempfile::tempdir().unwrap();
        let p = write(&d, "n.csv", "a,b,y\n1,2,3\n4,NaN,6\n7,8,inf\n");
        let ds = load_csv(&p, Some("y")).unwrap();
        let e = super::super::validate_finite(&ds).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("{}: row 2, column \"b\": NaN", p.display())
        );
    }
}
